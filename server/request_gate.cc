#include "server/request_gate.h"

#include "absl/strings/str_cat.h"

namespace reprise::server {

absl::Status RequestGate::Enter() {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("server is shutting down");
  if (in_flight_ >= max_in_flight_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("server is full: ", in_flight_,
                     " requests in flight (limits.max_queue_length ", max_in_flight_, ")"));
  }
  ++in_flight_;
  return absl::OkStatus();
}

void RequestGate::Exit() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void RequestGate::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool RequestGate::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool RequestGate::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int RequestGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace reprise::server
