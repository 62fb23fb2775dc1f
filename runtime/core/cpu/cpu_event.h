// The CPU backend's event: issued / completed record counters and the recorded flag.
#ifndef REPRISE_RUNTIME_CORE_CPU_CPU_EVENT_H_
#define REPRISE_RUNTIME_CORE_CPU_CPU_EVENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/base/thread_annotations.h"
#include "runtime/core/event.h"

namespace reprise::runtime::cpu {

struct CaptureState;

/// Where an event was last recorded inside a capture (guarded by the capture mutex).
struct EventCaptureBinding {
  std::shared_ptr<CaptureState> capture;  // null when not recorded in a capture
  uint32_t slot = 0;
  std::vector<uint32_t> clock;  // the recording stream's vector clock after the record
};

/// Event semantics are documented in runtime/core/event.h. Thread-safe.
class CpuEvent final : public Event {
 public:
  explicit CpuEvent(bool external) : external_(external) {}

  bool external() const override { return external_; }
  absl::Status Synchronize() override;
  absl::StatusOr<bool> Query() override;

  /// Host side: issues one record and returns its ticket.
  uint64_t IssueRecord();
  /// Host side: the ticket of the latest record issued (0 when none).
  uint64_t IssuedCount();
  /// Worker side: a record with `ticket` ran.
  void Complete(uint64_t ticket);
  /// Worker side: clears the recorded flag.
  void Reset();
  /// Worker side: blocks until a record with ticket >= `target` ran and the event is recorded.
  /// Returns false when `cancel` became true first.
  bool WaitFor(uint64_t target, const std::atomic<bool>* cancel);

  /// Guarded by CaptureMutex() (capture_registry.h).
  EventCaptureBinding binding;

 private:
  /// Refuses (and invalidates) when recorded inside an active capture; else the unsafe-call rule.
  absl::Status CheckSync(absl::string_view call);

  const bool external_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool recorded_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CPU_EVENT_H_
