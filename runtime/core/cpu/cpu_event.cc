#include "runtime/core/cpu/cpu_event.h"

#include <algorithm>

#include "absl/time/time.h"
#include "runtime/core/cpu/capture_state.h"
#include "runtime/core/status_macros.h"

namespace reprise::runtime::cpu {

absl::Status CpuEvent::Synchronize() {
  RETURN_IF_ERROR(CheckEventSync(this, "event synchronize"));
  absl::MutexLock lock(&mu_);
  const uint64_t target = issued_;
  if (target == 0) return absl::OkStatus();
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completed_ >= target; };
  mu_.Await(absl::Condition(&done));
  return absl::OkStatus();
}

absl::StatusOr<bool> CpuEvent::Query() {
  RETURN_IF_ERROR(CheckEventSync(this, "event query"));
  absl::MutexLock lock(&mu_);
  return completed_ >= issued_;
}

uint64_t CpuEvent::IssueRecord() {
  absl::MutexLock lock(&mu_);
  return ++issued_;
}

uint64_t CpuEvent::IssuedCount() {
  absl::MutexLock lock(&mu_);
  return issued_;
}

void CpuEvent::Complete(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  completed_ = std::max(completed_, ticket);
  recorded_ = true;
}

void CpuEvent::Reset() {
  absl::MutexLock lock(&mu_);
  recorded_ = false;
}

bool CpuEvent::WaitFor(uint64_t target, const std::atomic<bool>* cancel) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, target]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return recorded_ && completed_ >= target; };
  // A stream being destroyed must not hang on a record that never comes: wake up now and then
  // to look at `cancel` (only while actually blocked).
  while (!ready()) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return false;
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(20));
  }
  return true;
}

}  // namespace reprise::runtime::cpu
