#include "runtime/core/capture_registry.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/capture.h"

namespace reprise::runtime {
namespace {

thread_local CaptureMode t_capture_mode = CaptureMode::kGlobal;

std::vector<std::shared_ptr<CaptureRecord>>& ActiveCaptures() {
  // Never destroyed: captures may be checked from threads still running at exit.
  static auto* captures = new std::vector<std::shared_ptr<CaptureRecord>>();
  return *captures;
}

}  // namespace

void ExchangeThreadCaptureMode(CaptureMode* mode) { std::swap(t_capture_mode, *mode); }

CaptureMode ThreadCaptureMode() { return t_capture_mode; }

std::mutex& CaptureMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

uint64_t NextCaptureId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void AddActiveCapture(std::shared_ptr<CaptureRecord> capture) {
  ActiveCaptures().push_back(std::move(capture));
}

void RemoveActiveCapture(const CaptureRecord* capture) {
  auto& list = ActiveCaptures();
  list.erase(std::remove_if(list.begin(), list.end(),
                            [capture](const auto& c) { return c.get() == capture; }),
             list.end());
}

size_t ActiveCaptureCount() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  return ActiveCaptures().size();
}

void InvalidateCapture(CaptureRecord* capture, absl::string_view reason) {
  if (capture->status == CaptureStatus::kActive) {
    capture->status = CaptureStatus::kInvalidated;
    capture->invalid_reason = std::string(reason);
  }
}

std::string DescribeCapture(const CaptureRecord& capture) {
  if (capture.built) return absl::StrCat("build of ", capture.origin);
  return absl::StrCat(capture.body ? "body capture " : "capture ", capture.id, " (",
                      CaptureModeName(capture.mode), ") on ", capture.origin);
}

absl::Status CheckUnsafeCallLocked(absl::string_view call) {
  const CaptureMode mode = ThreadCaptureMode();
  if (mode == CaptureMode::kRelaxed) return absl::OkStatus();
  const std::thread::id self = std::this_thread::get_id();
  std::string refused_by;
  for (const auto& capture : ActiveCaptures()) {
    if (capture->status != CaptureStatus::kActive || !capture->checks_unsafe_calls) continue;
    const bool refused = capture->mode == CaptureMode::kGlobal ||
                         (capture->mode == CaptureMode::kThreadLocal && capture->thread == self);
    if (!refused) continue;
    if (refused_by.empty()) refused_by = DescribeCapture(*capture);
    InvalidateCapture(capture.get(), absl::StrCat(call, " was called while it was active"));
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

namespace {

// Invalidates `capture` (reason: `call` + `reason`) and returns FAILED_PRECONDITION: `call`,
// then `before` the capture's description, then `after`.
absl::Status Refuse(CaptureRecord* capture, absl::string_view call, absl::string_view reason,
                    absl::string_view before, absl::string_view after) {
  const std::string description = DescribeCapture(*capture);
  InvalidateCapture(capture, absl::StrCat(call, reason));
  return absl::FailedPreconditionError(
      absl::StrCat(call, before, description, after, "; the capture is now invalidated"));
}

}  // namespace

absl::Status RefuseOnCapturingStreamLocked(CaptureRecord* capture, absl::string_view call) {
  return Refuse(capture, call, " on a capturing stream", " on a stream taking part in ",
                " is illegal in every mode");
}

absl::Status CheckEventSyncLocked(CaptureRecord* recorded_in, absl::string_view call) {
  if (recorded_in != nullptr && !recorded_in->ended) {
    return Refuse(recorded_in, call, " on an event recorded inside the capture",
                  " on an event recorded inside ", " is illegal in every mode");
  }
  return CheckUnsafeCallLocked(call);
}

absl::Status RefusePageableCopyLocked(CaptureRecord* capture, absl::string_view call) {
  return Refuse(capture, call, " cannot be recorded", " cannot be recorded in ",
                " (use pinned memory from MallocHost)");
}

}  // namespace reprise::runtime
