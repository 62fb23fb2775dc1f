// Book-keeping of the CPU backend's captures: one process-wide mutex guards every capture, the
// capture bindings of streams and events, and the list of active captures that the capture-mode
// rules (runtime/core/capture.h) are checked against.
#ifndef REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_
#define REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime::cpu {

class CpuEvent;
class CpuModelRI;
class CpuStream;
struct RiData;

/// The capture mutex. Lock order: a stream's queue mutex is never held while taking it.
std::mutex& CaptureMutex();

/// One stream taking part in a capture.
struct CaptureStreamState {
  CpuStream* stream = nullptr;
  // Vector clock: clock[t] = how many of stream t's tasks this stream's next task comes after.
  std::vector<uint32_t> clock;
  int open_group = -1;
};

/// One capture (of a top-level instance, or of a conditional body). Guarded by CaptureMutex().
struct CaptureState {
  uint64_t id = 0;
  uint64_t origin_stream_id = 0;
  CaptureMode mode = CaptureMode::kGlobal;
  std::thread::id thread;
  CaptureStatus status = CaptureStatus::kActive;
  bool ended = false;
  std::string invalid_reason;
  bool body = false;
  std::unique_ptr<CpuModelRI> owned_instance;  // top-level: handed out by EndCapture
  CpuModelRI* instance = nullptr;              // the instance being filled
  RiData* data = nullptr;
  std::vector<CaptureStreamState> streams;  // [0] is the origin
};

/// Registers `capture` as active (caller holds CaptureMutex()).
void AddActiveCapture(std::shared_ptr<CaptureState> capture);
/// Removes it and marks it ended (caller holds CaptureMutex()).
void RemoveActiveCapture(const CaptureState* capture);
/// Invalidates `capture` with a reason (caller holds CaptureMutex()).
void InvalidateCapture(CaptureState* capture, absl::string_view reason);

/// Applies the mode table to a potentially unsafe call named `call` made by this thread.
/// FAILED_PRECONDITION (and the disturbed captures become INVALIDATED) when refused.
absl::Status CheckUnsafeCall(absl::string_view call);
/// The same, with the caller already holding CaptureMutex().
absl::Status CheckUnsafeCallLocked(absl::string_view call);
/// For event synchronise / query: illegal on an event recorded inside an active capture.
absl::Status CheckEventSync(CpuEvent* event, absl::string_view call);

/// Element-wise max of two vector clocks, into `into` (grown as needed).
void MergeClock(std::vector<uint32_t>* into, const std::vector<uint32_t>& from);

/// "capture 7 (global) on stream 3".
std::string DescribeCapture(const CaptureState& capture);

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_
