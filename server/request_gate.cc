#include "server/request_gate.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace reprise::server {

absl::Status RequestGate::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  if (--in_flight_ == 0) idle_.notify_all();
}

void RequestGate::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

bool RequestGate::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

bool RequestGate::WaitIdle(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [this] { return in_flight_ == 0; };
  if (deadline == absl::InfiniteFuture()) {
    idle_.wait(lock, idle);
    return true;
  }
  if (deadline <= absl::Now()) return idle();
  return idle_.wait_until(lock, absl::ToChronoTime(deadline), idle);
}

int RequestGate::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

}  // namespace reprise::server
