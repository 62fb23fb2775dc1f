#include "runtime/core/cuda/cuda_stream.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cuda/cuda_device.h"
#include "runtime/core/cuda/cuda_event.h"
#include "runtime/core/cuda/cuda_kernel.h"
#include "runtime/core/cuda/cuda_model_ri.h"
#include "runtime/core/cuda/cuda_util.h"

namespace reprise::runtime::cuda {

absl::Status CudaKernel::Run(const KernelArgs& /*args*/) const {
  return absl::FailedPreconditionError(
      absl::StrCat("kernel ", op(), " is a cuda kernel: it runs only on a cuda stream"));
}

CudaStream::CudaStream(CudaDevice* device, cudaStream_t stream, bool is_default)
    : device_(device), stream_(stream), id_(NextCudaObjectId()), is_default_(is_default) {
  device_->RegisterStream(this);
}

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(CudaDevice* device,
                                                               bool is_default) {
  RETURN_IF_ERROR(device->Activate());
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags"));
  return std::unique_ptr<CudaStream>(new CudaStream(device, stream, is_default));
}

CudaStream::~CudaStream() {
  device_->UnregisterStream(this);
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (capture_ != nullptr && capture_index_ == 0) {
      // Abandoned capture: end it at CUDA and drop the graph.
      cudaGraph_t graph = nullptr;
      (void)cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr && capture_->purpose != CudaCapture::Purpose::kBody) {
        (void)cudaGraphDestroy(graph);
      }
      FinishLocked(capture_.get());
    }
  }
  ScopedCudaRelaxed relaxed;
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
}

Device* CudaStream::device() const { return device_; }

CudaCapture* CudaStream::RoutedLocked() const { return capture_.get(); }

absl::Status CudaStream::Issue(CudaTask task, const std::function<absl::Status()>& issue,
                               std::unique_ptr<HostCall> host_call) {
  if (!routed_.load(std::memory_order_acquire)) {
    RETURN_IF_ERROR(issue());
    if (host_call != nullptr) (void)host_call.release();  // self-deleting, now owned by CUDA
    return absl::OkStatus();
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  CudaCapture* capture = RoutedLocked();
  if (capture == nullptr) {  // the capture ended in between
    RETURN_IF_ERROR(issue());
    if (host_call != nullptr) (void)host_call.release();
    return absl::OkStatus();
  }
  const size_t before = GraphNodeCount(capture->graph);
  absl::Status status = issue();
  if (!status.ok()) {
    InvalidateCapture(capture, status.message());
    return absl::Status(status.code(), absl::StrCat(status.message(), " (while capturing on ",
                                                    DescribeCapture(*capture), ")"));
  }
  AppendLocked(capture, std::move(task), before, std::move(host_call));
  return absl::OkStatus();
}

void CudaStream::AppendLocked(CudaCapture* capture, CudaTask task, size_t nodes_before,
                              std::unique_ptr<HostCall> host_call) {
  task.seq = capture->next_seq++;
  task.stream = capture_index_;
  task.num_nodes = GraphNodeCount(capture->graph) - nodes_before;
  if (task.num_nodes > 0) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* deps = nullptr;
    size_t num_deps = 0;
    if (cudaStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, &deps, nullptr, &num_deps) ==
            cudaSuccess &&
        num_deps == 1) {
      task.node = deps[0];
    }
  }
  if (capture->purpose == CudaCapture::Purpose::kUpdate) {
    capture->update_tasks.push_back(std::move(task));
    if (host_call != nullptr) capture->update_host_calls.push_back(std::move(host_call));
    return;
  }
  CudaModelRI* instance = capture->instance;
  task.group = capture->open_group;
  if (instance->streams.size() <= static_cast<size_t>(capture_index_)) {
    instance->streams.resize(capture_index_ + 1);
  }
  auto& list = instance->streams[capture_index_];
  if (task.group >= 0) instance->groups[task.group].emplace_back(capture_index_, list.size());
  list.push_back(std::move(task));
  if (host_call != nullptr) instance->host_calls.push_back(std::move(host_call));
}

absl::Status CudaStream::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) {
  const bool host_src = kind == CopyKind::kHostToDevice || kind == CopyKind::kHostToHost;
  const bool host_dst = kind == CopyKind::kDeviceToHost || kind == CopyKind::kHostToHost;
  const bool pageable = (host_src && device_->KindOf(src) == MemoryKind::kPageableHost) ||
                        (host_dst && device_->KindOf(dst) == MemoryKind::kPageableHost);
  const std::string what = absl::StrCat("memcpy_async (", CopyKindName(kind), ", ", bytes,
                                        " bytes) on cuda stream ", id_);
  RETURN_IF_ERROR(device_->Activate());
  if (pageable) {
    {
      const std::string call = absl::StrCat(what, " with pageable host memory");
      std::lock_guard<std::mutex> lock(CaptureMutex());
      if (capture_ != nullptr) return RefusePageableCopyLocked(capture_.get(), call);
      RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
    }
    ScopedCudaRelaxed relaxed;
    return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), what);
  }
  CudaTask task;
  task.kind = TaskKind::kCopy;
  task.copy_kind = kind;
  task.src = src;
  task.dst = dst;
  task.bytes = bytes;
  return Issue(std::move(task), [&] {
    return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), what);
  });
}

absl::Status CudaStream::MemsetAsync(void* dst, uint8_t value, size_t bytes) {
  RETURN_IF_ERROR(device_->Activate());
  CudaTask task;
  task.kind = TaskKind::kMemset;
  task.dst = dst;
  task.value = value;
  task.bytes = bytes;
  return Issue(std::move(task), [&] {
    return CudaStatus(cudaMemsetAsync(dst, value, bytes, stream_),
                      absl::StrCat("memset_async of ", bytes, " bytes on cuda stream ", id_));
  });
}

absl::Status CudaStream::LaunchKernel(const PreparedKernel& kernel,
                                      std::span<const void* const> inputs,
                                      std::span<void* const> outputs, void* workspace) {
  const auto* cuda_kernel = dynamic_cast<const CudaKernel*>(&kernel);
  if (cuda_kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", kernel.op(), " is not a cuda kernel; it cannot run on cuda stream ", id_));
  }
  if (kernel.workspace_bytes() > 0 && workspace == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.op(), " needs ",
                                                   kernel.workspace_bytes(),
                                                   " bytes of workspace; none was passed"));
  }
  RETURN_IF_ERROR(device_->Activate());
  KernelArgs args;
  args.inputs = inputs.data();
  args.outputs = outputs.data();
  args.workspace = workspace;
  CudaTask task;
  task.kind = TaskKind::kKernel;
  if (routed_.load(std::memory_order_acquire)) {
    task.op = std::string(kernel.op());
    task.kernel = &kernel;
    task.num_inputs = static_cast<uint16_t>(inputs.size());
    task.args.assign(inputs.begin(), inputs.end());
    task.args.insert(task.args.end(), outputs.begin(), outputs.end());
    task.workspace = workspace;
  }
  return Issue(std::move(task), [&]() -> absl::Status {
    absl::Status status = cuda_kernel->Launch(args, stream_);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("kernel ", kernel.op(), " on cuda stream ",
                                                      id_, ": ", status.message()));
    }
    return absl::OkStatus();
  });
}

absl::Status CudaStream::LaunchHostFunc(HostFn fn, void* user_data) {
  RETURN_IF_ERROR(device_->Activate());
  auto call = std::make_unique<HostCall>();
  call->fn = fn;
  call->user_data = user_data;
  call->device = device_;
  call->self_delete = !routed_.load(std::memory_order_acquire);
  HostCall* raw = call.get();
  CudaTask task;
  task.kind = TaskKind::kHostFunc;
  task.dst = user_data;
  return Issue(
      std::move(task),
      [&] {
        return CudaStatus(cudaLaunchHostFunc(stream_, &RunHostCall, raw),
                          absl::StrCat("host function on cuda stream ", id_));
      },
      std::move(call));
}

absl::Status CudaStream::Synchronize() {
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    const std::string call = absl::StrCat("stream synchronize (cuda stream ", id_, ")");
    if (capture_ != nullptr) return RefuseOnCapturingStreamLocked(capture_.get(), call);
    RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
  }
  RETURN_IF_ERROR(device_->Activate());
  ScopedCudaRelaxed relaxed;
  absl::Status status =
      CudaStatus(cudaStreamSynchronize(stream_), absl::StrCat("synchronize of cuda stream ", id_));
  status.Update(device_->TakeAsyncError());
  return status;
}

absl::StatusOr<bool> CudaStream::Query() {
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    const std::string call = absl::StrCat("stream query (cuda stream ", id_, ")");
    if (capture_ != nullptr) return RefuseOnCapturingStreamLocked(capture_.get(), call);
    RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
  }
  ScopedCudaRelaxed relaxed;
  const cudaError_t error = cudaStreamQuery(stream_);
  if (error == cudaErrorNotReady) return false;
  RETURN_IF_ERROR(CudaStatus(error, absl::StrCat("query of cuda stream ", id_)));
  return true;
}

absl::Status CudaStream::RecordEvent(Event* event) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(event);
  if (cuda_event == nullptr || cuda_event->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("record on cuda stream ", id_, ": the event is not of ", device_->name()));
  }
  RETURN_IF_ERROR(device_->Activate());
  const bool routed = routed_.load(std::memory_order_acquire);
  CudaTask task;
  task.kind = TaskKind::kEventRecord;
  task.external = cuda_event->external();
  task.dst = event;
  const unsigned flags = routed && cuda_event->external() ? cudaEventRecordExternal : 0;
  RETURN_IF_ERROR(Issue(std::move(task), [&] {
    return CudaStatus(cudaEventRecordWithFlags(cuda_event->handle(), stream_, flags),
                      absl::StrCat("event record on cuda stream ", id_));
  }));
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr && !cuda_event->external()) {
    cuda_event->recorded_in = capture_;
  } else {
    cuda_event->recorded_in.reset();
  }
  return absl::OkStatus();
}

absl::Status CudaStream::WaitEvent(Event* event) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(event);
  if (cuda_event == nullptr || cuda_event->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait on cuda stream ", id_, ": the event is not of ", device_->name()));
  }
  RETURN_IF_ERROR(device_->Activate());
  {
    // A wait on an event recorded inside an active capture pulls this stream into it (fork).
    std::lock_guard<std::mutex> lock(CaptureMutex());
    std::shared_ptr<CudaCapture> fork = cuda_event->recorded_in.lock();
    if (capture_ == nullptr && fork != nullptr && !fork->ended &&
        fork->purpose != CudaCapture::Purpose::kUpdate) {
      RETURN_IF_ERROR(
          CudaStatus(cudaStreamWaitEvent(stream_, cuda_event->handle(), 0),
                     absl::StrCat("fork of cuda stream ", id_, " into ", DescribeCapture(*fork))));
      capture_ = fork;
      capture_index_ = static_cast<int>(fork->streams.size());
      fork->streams.push_back(this);
      routed_.store(true, std::memory_order_release);
      CudaTask task;
      task.kind = TaskKind::kEventWait;
      task.dst = event;
      AppendLocked(fork.get(), std::move(task), GraphNodeCount(fork->graph), nullptr);
      return absl::OkStatus();
    }
  }
  const bool routed = routed_.load(std::memory_order_acquire);
  CudaTask task;
  task.kind = TaskKind::kEventWait;
  task.external = cuda_event->external();
  task.dst = event;
  const unsigned flags = routed && cuda_event->external() ? cudaEventWaitExternal : 0;
  return Issue(std::move(task), [&] {
    return CudaStatus(cudaStreamWaitEvent(stream_, cuda_event->handle(), flags),
                      absl::StrCat("event wait on cuda stream ", id_));
  });
}

absl::Status CudaStream::ResetEvent(Event* event) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(event);
  if (cuda_event == nullptr || cuda_event->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("reset on cuda stream ", id_, ": the event is not of ", device_->name()));
  }
  // CUDA events need no reset (each record replaces the state): listed, adds no node.
  CudaTask task;
  task.kind = TaskKind::kEventReset;
  task.dst = event;
  return Issue(std::move(task), [] { return absl::OkStatus(); });
}

}  // namespace reprise::runtime::cuda
