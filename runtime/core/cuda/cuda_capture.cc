#include "runtime/core/cuda/cuda_capture.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/capture.h"
#include "runtime/core/cuda/cuda_device.h"

namespace reprise::runtime::cuda {
namespace {

std::vector<std::shared_ptr<CudaCapture>>& ActiveCaptures() {
  // Never destroyed: captures may be checked from threads still running at exit.
  static auto* captures = new std::vector<std::shared_ptr<CudaCapture>>();
  return *captures;
}

}  // namespace

void CUDART_CB RunHostCall(void* host_call) {
  auto* call = static_cast<HostCall*>(host_call);
  absl::Status status = call->fn(call->user_data);
  if (!status.ok()) {
    call->device->RecordAsyncError(
        absl::Status(status.code(), absl::StrCat("host function: ", status.message())));
  }
  if (call->self_delete) delete call;
}

std::mutex& CaptureMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

void AddActiveCapture(std::shared_ptr<CudaCapture> capture) {
  ActiveCaptures().push_back(std::move(capture));
}

void RemoveActiveCapture(const CudaCapture* capture) {
  auto& list = ActiveCaptures();
  list.erase(std::remove_if(list.begin(), list.end(),
                            [capture](const auto& c) { return c.get() == capture; }),
             list.end());
}

void InvalidateCapture(CudaCapture* capture, absl::string_view reason) {
  if (capture->status == CaptureStatus::kActive) {
    capture->status = CaptureStatus::kInvalidated;
    capture->invalid_reason = std::string(reason);
  }
}

std::string DescribeCapture(const CudaCapture& capture) {
  const char* kind = capture.purpose == CudaCapture::Purpose::kBody ? "body capture " : "capture ";
  return absl::StrCat(kind, capture.id, " (", CaptureModeName(capture.mode), ") on cuda stream ",
                      capture.origin_stream_id);
}

absl::Status CheckUnsafeCallLocked(absl::string_view call) {
  const CaptureMode mode = ThreadCaptureMode();
  if (mode == CaptureMode::kRelaxed) return absl::OkStatus();
  const std::thread::id self = std::this_thread::get_id();
  std::string refused_by;
  for (const auto& capture : ActiveCaptures()) {
    if (capture->status != CaptureStatus::kActive) continue;
    if (capture->purpose == CudaCapture::Purpose::kUpdate) continue;  // private, not a capture
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

size_t GraphNodeCount(cudaGraph_t graph) {
  size_t count = 0;
  if (graph == nullptr || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return 0;
  return count;
}

}  // namespace reprise::runtime::cuda
