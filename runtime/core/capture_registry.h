// The capture registry: the capture rules of capture.h, once, for every backend.
//
// It keeps the per-thread capture modes (ExchangeThreadCaptureMode), the list of captures that
// are ACTIVE on any backend's streams, and applies the unsafe-call table of capture.h to that
// list: a GLOBAL capture on a CPU stream refuses an unsafe call made on a CUDA stream (or any
// other backend's), and the other way round. Backends only record tasks; before a potentially
// unsafe call they ask the registry (CheckUnsafeCall), and they describe, invalidate and end
// their captures through it.
#ifndef REPRISE_RUNTIME_CORE_CAPTURE_REGISTRY_H_
#define REPRISE_RUNTIME_CORE_CAPTURE_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <mutex>  // NOLINT: see docs/development.md (TSan)
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

/// What the registry knows of one capture. A backend derives its own capture state from it
/// (the tasks, the streams taking part) and registers it while it is ACTIVE. Every field is
/// guarded by CaptureMutex().
struct CaptureRecord {
  virtual ~CaptureRecord() = default;

  uint64_t id = 0;
  /// "stream 3", "cuda stream 3": the origin stream, as messages name it.
  std::string origin;
  CaptureMode mode = CaptureMode::kGlobal;
  /// The thread that began the capture (EndCapture must come from it unless RELAXED).
  std::thread::id thread;
  CaptureStatus status = CaptureStatus::kActive;
  /// Why the capture was invalidated (the first reason wins).
  std::string invalid_reason;
  /// Set once the capture is over (ended, or abandoned with its origin stream).
  bool ended = false;
  /// A conditional body's capture (named "body capture" in messages).
  bool body = false;
  /// Not a capture but a build (build.h; named "build of instance N", `origin` being the
  /// instance). Builds are never registered: they refuse no call.
  bool built = false;
  /// False for a backend's private recording (CUDA's task-update scratch capture), which the
  /// unsafe-call rule ignores.
  bool checks_unsafe_calls = true;
};

/// The one capture mutex of every backend. Lock order: taken before any stream's, device's or
/// event's own mutex, never while one of them is held.
std::mutex& CaptureMutex();

/// A process-unique capture id.
uint64_t NextCaptureId();

/// Registers `capture` as active; the registry shares ownership until RemoveActiveCapture.
/// Caller holds CaptureMutex().
void AddActiveCapture(std::shared_ptr<CaptureRecord> capture);
/// Unregisters `capture` (no-op when it is not registered). Caller holds CaptureMutex().
void RemoveActiveCapture(const CaptureRecord* capture);
/// Number of registered captures (for tests). Takes CaptureMutex().
size_t ActiveCaptureCount();

/// Marks `capture` INVALIDATED with `reason` when it is ACTIVE (the first reason wins).
/// Caller holds CaptureMutex().
void InvalidateCapture(CaptureRecord* capture, absl::string_view reason);

/// "capture 7 (global) on stream 3", "body capture 9 (relaxed) on cuda stream 4", "build of
/// instance 12".
std::string DescribeCapture(const CaptureRecord& capture);

/// Applies capture.h's mode table to a potentially unsafe call named `call` made by the calling
/// thread, against the active captures of every backend. FAILED_PRECONDITION naming the call and
/// the (first) refusing capture when refused; every refusing capture becomes INVALIDATED.
absl::Status CheckUnsafeCall(absl::string_view call);
/// The same, with the caller already holding CaptureMutex().
absl::Status CheckUnsafeCallLocked(absl::string_view call);

/// Synchronising or querying a stream that takes part in `capture` (not null): illegal in every
/// mode. Invalidates the capture and returns FAILED_PRECONDITION naming `call`. Caller holds
/// CaptureMutex().
absl::Status RefuseOnCapturingStreamLocked(CaptureRecord* capture, absl::string_view call);

/// Event synchronise / query: illegal in every mode when the event's last record was made
/// inside `recorded_in` and that capture has not ended (the capture becomes INVALIDATED);
/// otherwise the unsafe-call rule. `recorded_in` may be null. Caller holds CaptureMutex().
absl::Status CheckEventSyncLocked(CaptureRecord* recorded_in, absl::string_view call);

/// A copy with pageable host memory issued on a stream that takes part in `capture`: it can
/// never be recorded. Invalidates the capture; FAILED_PRECONDITION naming `call`. Caller holds
/// CaptureMutex().
absl::Status RefusePageableCopyLocked(CaptureRecord* capture, absl::string_view call);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_CAPTURE_REGISTRY_H_
