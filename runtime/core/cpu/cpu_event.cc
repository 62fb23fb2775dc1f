#include "runtime/core/cpu/cpu_event.h"

#include <algorithm>

#include <chrono>
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/capture_state.h"

namespace reprise::runtime::cpu {

absl::Status CpuEvent::CheckSync(absl::string_view call) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  return CheckEventSyncLocked(binding.capture.get(), call);
}

absl::Status CpuEvent::Synchronize() {
  RETURN_IF_ERROR(CheckSync("event synchronize"));
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = issued_;
  cv_.wait(lock, [this, target] { return completed_ >= target; });
  return absl::OkStatus();
}

absl::StatusOr<bool> CpuEvent::Query() {
  RETURN_IF_ERROR(CheckSync("event query"));
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= issued_;
}

uint64_t CpuEvent::IssueRecord() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++issued_;
}

uint64_t CpuEvent::IssuedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return issued_;
}

void CpuEvent::Complete(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  completed_ = std::max(completed_, ticket);
  recorded_ = true;
  // Notified under the lock: a waiter that wakes may destroy the event right away.
  cv_.notify_all();
}

void CpuEvent::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  recorded_ = false;
}

bool CpuEvent::WaitFor(uint64_t target, const std::atomic<bool>* cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [this, target] { return recorded_ && completed_ >= target; };
  // A stream being destroyed must not hang on a record that never comes: wake up now and then
  // to look at `cancel` (only while actually blocked).
  while (!ready()) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(20), ready);
  }
  return true;
}

}  // namespace reprise::runtime::cpu
