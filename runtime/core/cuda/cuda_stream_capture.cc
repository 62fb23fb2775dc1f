// Reprise's capture API mapped onto CUDA stream capture (README.md has the mapping).
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/capture.h"
#include "runtime/core/cuda/condition_kernels.h"
#include "runtime/core/cuda/cuda_device.h"
#include "runtime/core/cuda/cuda_model_ri.h"
#include "runtime/core/cuda/cuda_stream.h"
#include "runtime/core/cuda/cuda_util.h"

namespace reprise::runtime::cuda {
namespace {

cudaStreamCaptureMode ToCuda(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kGlobal:
      return cudaStreamCaptureModeGlobal;
    case CaptureMode::kThreadLocal:
      return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::kRelaxed:
      return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

}  // namespace

void CudaStream::FinishLocked(CudaCapture* capture) {
  capture->ended = true;
  for (CudaStream* stream : capture->streams) {
    stream->capture_.reset();
    stream->capture_index_ = 0;
    stream->routed_.store(false, std::memory_order_release);
  }
  if (capture->instance != nullptr) capture->instance->capture = nullptr;
  RemoveActiveCapture(capture);
}

absl::Status CudaStream::StartCaptureLocked(std::shared_ptr<CudaCapture> capture,
                                            cudaGraph_t graph) {
  capture->id = NextCaptureId();
  capture->thread = std::this_thread::get_id();
  capture->origin = absl::StrCat("cuda stream ", id_);
  capture->body = capture->purpose == CudaCapture::Purpose::kBody;
  capture->checks_unsafe_calls = capture->purpose != CudaCapture::Purpose::kUpdate;
  capture->streams = {this};
  const cudaStreamCaptureMode mode = ToCuda(capture->mode);
  if (graph != nullptr) {
    RETURN_IF_ERROR(
        CudaStatus(cudaStreamBeginCaptureToGraph(stream_, graph, nullptr, nullptr, 0, mode),
                   absl::StrCat("cudaStreamBeginCaptureToGraph on cuda stream ", id_)));
    capture->graph = graph;
  } else {
    RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, mode),
                               absl::StrCat("cudaStreamBeginCapture on cuda stream ", id_)));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    RETURN_IF_ERROR(CudaStatus(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &capture->graph,
                                                        nullptr, nullptr, nullptr),
                               "cudaStreamGetCaptureInfo"));
  }
  capture_ = capture;
  capture_index_ = 0;
  routed_.store(true, std::memory_order_release);
  AddActiveCapture(std::move(capture));
  return absl::OkStatus();
}

absl::Status CudaStream::BeginCapture(CaptureMode mode) {
  if (is_default_) {
    return absl::FailedPreconditionError(absl::StrCat("cannot capture on ", device_->name(),
                                                      "'s default stream (cuda stream ", id_, ")"));
  }
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda stream ", id_, " is already capturing (", DescribeCapture(*capture_), ")"));
  }
  auto capture = std::make_shared<CudaCapture>();
  capture->purpose = CudaCapture::Purpose::kInstance;
  capture->mode = mode;
  capture->owned_instance = std::make_unique<CudaModelRI>(device_, nullptr, nullptr);
  capture->instance = capture->owned_instance.get();
  capture->instance->capture = capture.get();
  capture->instance->streams.resize(1);
  return StartCaptureLocked(std::move(capture), nullptr);
}

absl::StatusOr<std::unique_ptr<ModelRI>> CudaStream::EndCapture() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->purpose != CudaCapture::Purpose::kInstance) {
    return absl::FailedPreconditionError(
        absl::StrCat("end capture: cuda stream ", id_, " is not capturing an instance"));
  }
  if (capture_index_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "end capture: cuda stream ", id_, " is not the origin of ", DescribeCapture(*capture_)));
  }
  std::shared_ptr<CudaCapture> capture = capture_;
  if (capture->mode != CaptureMode::kRelaxed && capture->thread != std::this_thread::get_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("end capture: wrong thread for ", DescribeCapture(*capture),
                     "; it must be ended by the thread that began it (the capture goes on)"));
  }
  cudaGraph_t graph = nullptr;
  absl::Status status;
  {
    // CUDA checks the thread in GLOBAL / THREAD_LOCAL mode itself; Reprise did it above.
    status = CudaStatus(cudaStreamEndCapture(stream_, &graph),
                        absl::StrCat("end of ", DescribeCapture(*capture)));
  }
  FinishLocked(capture.get());
  if (status.ok() && capture->status == CaptureStatus::kInvalidated) {
    status = absl::FailedPreconditionError(
        absl::StrCat(DescribeCapture(*capture), " was invalidated: ", capture->invalid_reason));
  }
  if (!status.ok()) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return status;
  }
  std::unique_ptr<CudaModelRI> instance = std::move(capture->owned_instance);
  capture->instance = nullptr;
  RETURN_IF_ERROR(instance->Seal(graph));
  return std::unique_ptr<ModelRI>(std::move(instance));
}

CaptureInfo CudaStream::GetCaptureInfo() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  CaptureInfo info;
  if (capture_ == nullptr || capture_->purpose == CudaCapture::Purpose::kUpdate) return info;
  info.status = capture_->status;
  if (info.status == CaptureStatus::kActive) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, nullptr, nullptr, nullptr) ==
            cudaSuccess &&
        status == cudaStreamCaptureStatusInvalidated) {
      InvalidateCapture(capture_.get(), "cuda invalidated the capture");
      info.status = CaptureStatus::kInvalidated;
    }
  }
  info.instance = capture_->instance;
  return info;
}

absl::Status CudaStream::BeginBodyCapture(ModelRI* body, CaptureMode mode) {
  auto* child = dynamic_cast<CudaModelRI*>(body);
  if (child == nullptr || child->parent() == nullptr || child->device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "body capture on cuda stream ", id_, ": not a conditional body of ", device_->name()));
  }
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("body capture: cuda stream ", id_,
                                                      " is already capturing (",
                                                      DescribeCapture(*capture_), ")"));
  }
  if (child->sealed() || child->capture != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("body capture: body ", child->id(), " is already captured"));
  }
  auto capture = std::make_shared<CudaCapture>();
  capture->purpose = CudaCapture::Purpose::kBody;
  capture->mode = mode;
  capture->instance = child;
  child->capture = capture.get();
  child->streams.resize(1);
  return StartCaptureLocked(std::move(capture), child->graph());
}

absl::Status CudaStream::EndBodyCapture() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->purpose != CudaCapture::Purpose::kBody ||
      capture_index_ != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("end body capture: cuda stream ", id_, " is not capturing a body"));
  }
  std::shared_ptr<CudaCapture> capture = capture_;
  CudaModelRI* body = capture->instance;
  absl::Status status;
  if (body->loop_condition != nullptr) {
    // WHILE: re-evaluate the condition from its value at the end of every iteration.
    status = CudaStatus(
        LaunchSetCondition(body->loop_condition->handle, body->loop_condition->value, stream_),
        "while condition update");
  }
  cudaGraph_t graph = nullptr;
  status.Update(CudaStatus(cudaStreamEndCapture(stream_, &graph),
                           absl::StrCat("end of ", DescribeCapture(*capture))));
  FinishLocked(capture.get());
  if (status.ok() && capture->status == CaptureStatus::kInvalidated) {
    status = absl::FailedPreconditionError(
        absl::StrCat(DescribeCapture(*capture), " was invalidated: ", capture->invalid_reason));
  }
  if (status.ok()) body->MarkBodySealed();
  return status;
}

absl::StatusOr<std::vector<ModelRI*>> CudaStream::AddConditional(ConditionalKind kind,
                                                                 ConditionHandle condition,
                                                                 int num_bodies) {
  const bool count_ok = (kind == ConditionalKind::kIf && (num_bodies == 1 || num_bodies == 2)) ||
                        (kind == ConditionalKind::kWhile && num_bodies == 1) ||
                        (kind == ConditionalKind::kSwitch && num_bodies >= 1);
  if (!count_ok) {
    return absl::InvalidArgumentError(absl::StrCat("conditional ", ConditionalKindName(kind),
                                                   " cannot have ", num_bodies, " bodies"));
  }
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->purpose == CudaCapture::Purpose::kUpdate) {
    return absl::FailedPreconditionError(
        absl::StrCat("add conditional: cuda stream ", id_, " is not capturing"));
  }
  CudaCapture* capture = capture_.get();
  CudaModelRI* instance = capture->instance;
  const CudaModelRI::Condition* cond = nullptr;
  for (CudaModelRI* owner = instance; owner != nullptr && cond == nullptr;
       owner = owner->parent()) {
    cond = owner->FindCondition(condition);
  }
  if (cond == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("add conditional: condition ", condition.index,
                                                   " does not belong to instance ", instance->id(),
                                                   " or its parents"));
  }
  const size_t before = GraphNodeCount(capture->graph);
  absl::Status status = CudaStatus(LaunchSetCondition(cond->handle, cond->value, stream_),
                                   "conditional: set condition kernel");
  cudaStreamCaptureStatus capture_status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  size_t num_deps = 0;
  if (status.ok()) {
    status = CudaStatus(cudaStreamGetCaptureInfo(stream_, &capture_status, nullptr, nullptr, &deps,
                                                 nullptr, &num_deps),
                        "cudaStreamGetCaptureInfo");
  }
  cudaGraphNode_t node = nullptr;
  cudaGraphNodeParams params = {};
  if (status.ok()) {
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = cond->handle;
    params.conditional.type = kind == ConditionalKind::kIf      ? cudaGraphCondTypeIf
                              : kind == ConditionalKind::kWhile ? cudaGraphCondTypeWhile
                                                                : cudaGraphCondTypeSwitch;
    params.conditional.size = static_cast<unsigned>(num_bodies);
    status = CudaStatus(cudaGraphAddNode(&node, capture->graph, deps, nullptr, num_deps, &params),
                        "cudaGraphAddNode(conditional)");
  }
  if (status.ok()) {
    status = CudaStatus(cudaStreamUpdateCaptureDependencies(stream_, &node, nullptr, 1,
                                                            cudaStreamSetCaptureDependencies),
                        "cudaStreamUpdateCaptureDependencies");
  }
  if (!status.ok()) {
    InvalidateCapture(capture, status.message());
    return status;
  }
  CudaModelRI::Conditional conditional;
  conditional.kind = kind;
  conditional.condition = cond;
  std::vector<ModelRI*> bodies;
  for (int b = 0; b < num_bodies; ++b) {
    CudaModelRI* child = instance->AddChild(params.conditional.phGraph_out[b]);
    if (kind == ConditionalKind::kWhile) child->loop_condition = cond;
    conditional.bodies.push_back(child);
    bodies.push_back(child);
  }
  CudaTask task;
  task.kind = TaskKind::kConditional;
  task.value = static_cast<uint32_t>(instance->conditionals.size());
  task.dst = cond->value;
  instance->conditionals.push_back(std::move(conditional));
  AppendLocked(capture, std::move(task), before, nullptr);
  return bodies;
}

absl::Status CudaStream::BeginTaskGroup() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->purpose == CudaCapture::Purpose::kUpdate) {
    return absl::FailedPreconditionError(
        absl::StrCat("begin task group: cuda stream ", id_, " is not capturing"));
  }
  if (capture_->open_group >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("begin task group: group ", capture_->open_group, " is still open"));
  }
  CudaModelRI* instance = capture_->instance;
  capture_->open_group = static_cast<int>(instance->groups.size());
  instance->groups.emplace_back();
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> CudaStream::EndTaskGroup() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->open_group < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("end task group: no task group is open on cuda stream ", id_));
  }
  TaskGroup group;
  group.instance = capture_->instance;
  group.index = capture_->open_group;
  capture_->open_group = -1;
  return group;
}

absl::Status CudaStream::BeginTaskUpdate(TaskGroup group) {
  auto* instance = dynamic_cast<CudaModelRI*>(group.instance);
  if (instance == nullptr || group.index < 0 ||
      static_cast<size_t>(group.index) >= instance->groups.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("begin task update: no task group ", group.index, " in that instance"));
  }
  if (!instance->sealed()) {
    return absl::FailedPreconditionError(
        absl::StrCat("begin task update: instance ", instance->id(), " is still being captured"));
  }
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "begin task update: cuda stream ", id_, " is capturing or already collecting an update"));
  }
  // The replacement tasks are captured (relaxed, privately) into a scratch graph: they run
  // nowhere; their node parameters are copied into the instance at EndTaskUpdate.
  auto capture = std::make_shared<CudaCapture>();
  capture->purpose = CudaCapture::Purpose::kUpdate;
  capture->mode = CaptureMode::kRelaxed;
  update_instance_ = instance;
  update_group_ = group.index;
  return StartCaptureLocked(std::move(capture), nullptr);
}

absl::Status CudaStream::EndTaskUpdate() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->purpose != CudaCapture::Purpose::kUpdate) {
    return absl::FailedPreconditionError(
        absl::StrCat("end task update: no update is open on cuda stream ", id_));
  }
  std::shared_ptr<CudaCapture> capture = capture_;
  cudaGraph_t scratch = nullptr;
  absl::Status status =
      CudaStatus(cudaStreamEndCapture(stream_, &scratch), "end task update (scratch capture)");
  FinishLocked(capture.get());
  if (status.ok() && capture->status == CaptureStatus::kInvalidated) {
    status = absl::FailedPreconditionError(
        absl::StrCat("task update was invalidated: ", capture->invalid_reason));
  }
  if (status.ok()) {
    status = update_instance_->ApplyUpdate(update_group_, capture->update_tasks,
                                           capture->update_host_calls);
  }
  if (scratch != nullptr) (void)cudaGraphDestroy(scratch);
  update_instance_ = nullptr;
  update_group_ = -1;
  return status;
}

}  // namespace reprise::runtime::cuda
