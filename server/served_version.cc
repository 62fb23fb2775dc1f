#include "server/served_version.h"

#include <utility>

namespace reprise::server {

ServedVersion::ServedVersion(std::string model_name, int64_t version,
                             std::shared_ptr<const config::ModelSettings> settings,
                             std::unique_ptr<LoadedModel> model)
    : model_name_(std::move(model_name)),
      version_(version),
      settings_(std::move(settings)),
      model_(std::move(model)) {}

bool ServedVersion::TryAcquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_) return false;
  ++leases_;
  return true;
}

void ServedVersion::Release() {
  absl::AnyInvocable<void() &&> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --leases_;
    if (draining_ && leases_ == 0 && on_drained_) done = std::move(on_drained_);
  }
  if (done) std::move(done)();
}

void ServedVersion::Drain(absl::AnyInvocable<void() &&> on_drained) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    if (leases_ > 0) {
      on_drained_ = std::move(on_drained);
      return;
    }
  }
  std::move(on_drained)();
}

int ServedVersion::leases() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leases_;
}

}  // namespace reprise::server
