#include "runtime/core/cpu/capture_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/capture.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/cpu_stream.h"

namespace reprise::runtime {
namespace {
thread_local CaptureMode t_capture_mode = CaptureMode::kGlobal;
}  // namespace

void ExchangeThreadCaptureMode(CaptureMode* mode) { std::swap(t_capture_mode, *mode); }

CaptureMode ThreadCaptureMode() { return t_capture_mode; }

}  // namespace reprise::runtime

namespace reprise::runtime::cpu {
namespace {

std::vector<std::shared_ptr<CaptureState>>& ActiveCaptures() {
  // Never destroyed: captures may be checked from threads still running at exit.
  static auto* captures = new std::vector<std::shared_ptr<CaptureState>>();
  return *captures;
}

}  // namespace

std::mutex& CaptureMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

void AddActiveCapture(std::shared_ptr<CaptureState> capture) {
  ActiveCaptures().push_back(std::move(capture));
}

void RemoveActiveCapture(const CaptureState* capture) {
  auto& list = ActiveCaptures();
  list.erase(std::remove_if(list.begin(), list.end(),
                            [capture](const auto& c) { return c.get() == capture; }),
             list.end());
}

void InvalidateCapture(CaptureState* capture, absl::string_view reason) {
  if (capture->status == CaptureStatus::kActive) {
    capture->status = CaptureStatus::kInvalidated;
    capture->invalid_reason = std::string(reason);
  }
}

std::string DescribeCapture(const CaptureState& capture) {
  const uint64_t stream_id = capture.origin_stream_id;
  return absl::StrCat(capture.body ? "body capture " : "capture ", capture.id, " (",
                      CaptureModeName(capture.mode), ") on stream ", stream_id);
}

absl::Status CheckUnsafeCallLocked(absl::string_view call) {
  const CaptureMode mode = ThreadCaptureMode();
  if (mode == CaptureMode::kRelaxed) return absl::OkStatus();
  const std::thread::id self = std::this_thread::get_id();
  std::string refused_by;
  for (const auto& capture : ActiveCaptures()) {
    if (capture->status != CaptureStatus::kActive) continue;
    const bool refused = capture->mode == CaptureMode::kGlobal ||
                         (capture->mode == CaptureMode::kThreadLocal && capture->thread == self);
    if (!refused) continue;
    const std::string description = DescribeCapture(*capture);
    InvalidateCapture(capture.get(), absl::StrCat(call, " was called while it was active"));
    if (refused_by.empty()) refused_by = description;
  }
  if (refused_by.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(call, " is not allowed while ", refused_by, " is active (thread mode ",
                   CaptureModeName(mode), "); the capture is now invalidated"));
}

absl::Status CheckUnsafeCall(absl::string_view call) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  return CheckUnsafeCallLocked(call);
}

absl::Status CheckEventSync(CpuEvent* event, absl::string_view call) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  CaptureState* capture = event->binding.capture.get();
  if (capture != nullptr && !capture->ended) {
    const std::string description = DescribeCapture(*capture);
    InvalidateCapture(capture, absl::StrCat(call, " on an event recorded inside the capture"));
    return absl::FailedPreconditionError(
        absl::StrCat(call, " on an event recorded inside ", description,
                     " is illegal in every mode; the capture is now invalidated"));
  }
  return CheckUnsafeCallLocked(call);
}

void MergeClock(std::vector<uint32_t>* into, const std::vector<uint32_t>& from) {
  if (into->size() < from.size()) into->resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

}  // namespace reprise::runtime::cpu
