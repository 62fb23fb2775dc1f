#include "runtime/engine/stream_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/core/capture.h"
#include "runtime/core/status_macros.h"

namespace reprise::runtime::engine {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The values of a small tensor (a value-key candidate) as text that tells distinct values
// apart: integers in full, floats with enough digits to round-trip.
std::string ValueText(const TensorValue& value) {
  const int64_t n = NumElements(value.shape);
  std::vector<std::string> parts;
  parts.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = value.bytes.data() + static_cast<size_t>(i) * DataTypeSize(value.dtype);
    switch (value.dtype) {
      case DataType::kInt32: {
        int32_t v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrCat(v));
        break;
      }
      case DataType::kInt64: {
        int64_t v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrCat(v));
        break;
      }
      case DataType::kFloat32: {
        float v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrFormat("%.9g", v));
        break;
      }
      case DataType::kFloat64: {
        double v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrFormat("%.17g", v));
        break;
      }
      default:
        parts.push_back("?");
    }
  }
  return absl::StrCat("(", absl::StrJoin(parts, ","), ")");
}

}  // namespace

std::string ShapeSignature(const std::vector<NamedTensor>& inputs) {
  std::string signature;
  for (const NamedTensor& input : inputs) {
    if (!signature.empty()) signature.push_back(';');
    absl::StrAppend(&signature, input.name, ":", ShapeToString(input.value.shape));
  }
  return signature;
}

// One signature: its plan, its instance (null when it runs eagerly) and its statistics.
// The plan and the instance are used by the one running thread only; the instance pointer and
// the statistics are also read by ListInstances / DumpInstance, so they change under Impl::mu.
struct Entry {
  std::unique_ptr<ExecutionPlan> plan;  // declared before `ri`: outlives it
  std::unique_ptr<ModelRI> ri;
  StreamInstanceInfo info;
};

struct StreamSession::Impl {
  std::shared_ptr<const Model> model;
  Device* device = nullptr;
  ExecMode mode = ExecMode::kReplay;
  std::vector<std::string> input_names;  // graph order
  bool value_keyed = false;              // touched by the running thread only
  std::unique_ptr<Stream> stream;
  // std::mutex rather than absl::Mutex (TSan, docs/development.md).
  mutable std::mutex mu;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries ABSL_GUARDED_BY(mu);

  std::string Signature(const std::vector<const TensorValue*>& ordered) const;
  absl::StatusOr<Entry*> FindOrMake(const std::vector<const TensorValue*>& ordered,
                                    StreamRunInfo* info);
  // Captures the plan's steps; on success stores the instance, else marks the entry eager.
  void Capture(Entry* entry, StreamRunInfo* info);
  // Enqueues every step and waits; the error names the node when a launch is refused.
  absl::Status RunEager(const ExecutionPlan& plan);
  void MarkEager(Entry* entry, absl::string_view reason);
};

std::string StreamSession::Impl::Signature(const std::vector<const TensorValue*>& ordered) const {
  std::string signature;
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (i > 0) signature.push_back(';');
    absl::StrAppend(&signature, input_names[i], ":", ShapeToString(ordered[i]->shape));
    if (value_keyed && Model::IsValueKeyCandidate(*ordered[i])) {
      absl::StrAppend(&signature, "=", ValueText(*ordered[i]));
    }
  }
  return signature;
}

void StreamSession::Impl::MarkEager(Entry* entry, absl::string_view reason) {
  std::lock_guard<std::mutex> lock(mu);
  entry->ri.reset();
  entry->info.state = "eager";
  entry->info.reason = std::string(reason);
}

void StreamSession::Impl::Capture(Entry* entry, StreamRunInfo* info) {
  const int64_t start = NowNs();
  absl::Status status = BeginCapture(stream.get(), CaptureMode::kThreadLocal);
  if (!status.ok()) {
    info->capture_ns = NowNs() - start;
    MarkEager(entry, absl::StrCat("begin capture: ", status.message()));
    return;
  }
  absl::Status launch = entry->plan->ForEachStep([&](const PlanStep& step) -> absl::Status {
    absl::Status s = stream->LaunchKernel(
        *step.kernel, std::span<const void* const>(step.inputs.data(), step.inputs.size()),
        std::span<void* const>(step.outputs.data(), step.outputs.size()), step.workspace);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("recording node \"", step.node_name, "\" (",
                                                 step.op, "): ", s.message()));
    }
    return absl::OkStatus();
  });
  // EndCapture in every case, so that the stream leaves the capture.
  absl::StatusOr<std::unique_ptr<ModelRI>> ri = EndCapture(stream.get());
  info->capture_ns = NowNs() - start;
  if (!launch.ok()) {
    MarkEager(entry, launch.message());
    return;
  }
  if (!ri.ok()) {
    MarkEager(entry, absl::StrCat("end capture: ", ri.status().message()));
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  entry->ri = *std::move(ri);
  entry->info.state = "captured";
  entry->info.captures += 1;
  entry->info.capture_ns = info->capture_ns;
  info->captured = true;
}

absl::StatusOr<Entry*> StreamSession::Impl::FindOrMake(
    const std::vector<const TensorValue*>& ordered, StreamRunInfo* info) {
  std::string signature = Signature(ordered);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(signature);
    if (it != entries.end()) return it->second.get();
  }
  const int64_t start = NowNs();
  bool keyed = value_keyed;
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model->PlanForInputs(ordered, &keyed));
  info->plan_ns = NowNs() - start;
  info->planned = true;
  if (keyed && !value_keyed) {
    value_keyed = true;
    signature = Signature(ordered);
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(signature);
    if (it != entries.end()) return it->second.get();  // cannot happen: keys were all unkeyed
  }
  auto entry = std::make_unique<Entry>();
  entry->plan = std::move(plan);
  entry->info.shape_signature = signature;
  entry->info.arena_bytes = entry->plan->arena_bytes();
  entry->info.state = mode == ExecMode::kEager ? "eager" : "capturing";
  if (mode == ExecMode::kEager) entry->info.reason = "eager mode";
  Entry* raw = entry.get();
  {
    std::lock_guard<std::mutex> lock(mu);
    entries.emplace(signature, std::move(entry));
  }
  if (mode == ExecMode::kReplay) Capture(raw, info);
  return raw;
}

absl::Status StreamSession::Impl::RunEager(const ExecutionPlan& plan) {
  absl::Status launch = plan.ForEachStep([&](const PlanStep& step) -> absl::Status {
    absl::Status s = stream->LaunchKernel(
        *step.kernel, std::span<const void* const>(step.inputs.data(), step.inputs.size()),
        std::span<void* const>(step.outputs.data(), step.outputs.size()), step.workspace);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("node \"", step.node_name, "\" (", step.op, "): ", s.message()));
    }
    return absl::OkStatus();
  });
  // Wait for what was queued even when a launch was refused: the tasks use the plan's buffers.
  absl::Status sync = stream->Synchronize();
  RETURN_IF_ERROR(launch);
  return sync;
}

StreamSession::StreamSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StreamSession::~StreamSession() {
  // Nothing is pending after a Run returns, but make sure before the plans go.
  if (impl_ != nullptr && impl_->stream != nullptr) impl_->stream->Synchronize().IgnoreError();
}

absl::StatusOr<std::unique_ptr<StreamSession>> StreamSession::Create(
    std::shared_ptr<const Model> model, Device* device, ExecMode mode) {
  if (model == nullptr) return absl::InvalidArgumentError("stream session: no model");
  if (device == nullptr) return absl::InvalidArgumentError("stream session: no device");
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->device = device;
  impl->mode = mode;
  for (const Value& input : impl->model->inputs()) impl->input_names.push_back(input.name);
  absl::StatusOr<std::unique_ptr<Stream>> stream = device->CreateStream();
  if (!stream.ok()) {
    return absl::Status(stream.status().code(),
                        absl::StrCat("stream session on ", device->name(),
                                     ": cannot create a stream: ", stream.status().message()));
  }
  impl->stream = *std::move(stream);
  return std::unique_ptr<StreamSession>(new StreamSession(std::move(impl)));
}

absl::StatusOr<std::vector<NamedTensor>> StreamSession::Run(const std::vector<NamedTensor>& inputs,
                                                            StreamRunInfo* info) {
  StreamRunInfo local;
  StreamRunInfo* out_info = info != nullptr ? info : &local;
  *out_info = StreamRunInfo{};
  Impl& s = *impl_;
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, s.model->MatchInputs(inputs));
  ASSIGN_OR_RETURN(Entry * entry, s.FindOrMake(ordered, out_info));
  ExecutionPlan& plan = *entry->plan;

  const int64_t start = NowNs();
  for (size_t i = 0; i < ordered.size(); ++i) RETURN_IF_ERROR(plan.StageInput(i, *ordered[i]));

  // Only this thread replaces entry->ri, so reading it without the lock is safe here.
  ModelRI* ri = entry->ri.get();
  bool ran = false;
  if (ri != nullptr) {
    absl::Status status = ri->ExecuteAsync(s.stream.get());
    absl::Status sync = s.stream->Synchronize();
    if (status.ok()) status = sync;
    bool first_replay;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      first_replay = entry->info.replays == 0;
      if (status.ok()) entry->info.replays += 1;
    }
    if (status.ok()) {
      ran = true;
      out_info->replayed = true;
    } else if (first_replay) {
      s.MarkEager(entry, absl::StrCat("first replay: ", status.message()));
      out_info->captured = false;
    } else {
      return status;
    }
  }
  if (!ran) {
    RETURN_IF_ERROR(s.RunEager(plan));
    out_info->eager = true;
    std::lock_guard<std::mutex> lock(s.mu);
    entry->info.eager_runs += 1;
  }

  std::vector<NamedTensor> outputs;
  outputs.reserve(plan.outputs().size());
  for (size_t i = 0; i < plan.outputs().size(); ++i) {
    outputs.push_back(NamedTensor{plan.outputs()[i].name, plan.ReadOutput(i)});
  }
  out_info->run_ns = NowNs() - start;
  std::lock_guard<std::mutex> lock(s.mu);
  entry->info.last_used_ms = absl::ToUnixMillis(absl::Now());
  return outputs;
}

std::vector<StreamInstanceInfo> StreamSession::ListInstances() const {
  std::vector<StreamInstanceInfo> list;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    list.reserve(impl_->entries.size());
    for (const auto& [signature, entry] : impl_->entries) list.push_back(entry->info);
  }
  std::sort(list.begin(), list.end(), [](const StreamInstanceInfo& a, const StreamInstanceInfo& b) {
    return a.shape_signature < b.shape_signature;
  });
  return list;
}

absl::StatusOr<std::string> StreamSession::DumpInstance(absl::string_view shape_signature,
                                                        bool verbose) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->entries.find(shape_signature);
  if (it == impl_->entries.end()) {
    return absl::NotFoundError(absl::StrCat("no instance for signature \"", shape_signature, "\" (",
                                            impl_->entries.size(), " signature(s) seen)"));
  }
  const Entry& entry = *it->second;
  if (entry.ri == nullptr) {
    return absl::NotFoundError(absl::StrCat("signature \"", shape_signature,
                                            "\" runs eagerly, no instance: ", entry.info.reason));
  }
  return entry.ri->DumpJson(verbose ? DumpFlags::kVerbose : DumpFlags::kSummary);
}

ExecMode StreamSession::mode() const { return impl_->mode; }

const Model& StreamSession::model() const { return *impl_->model; }

}  // namespace reprise::runtime::engine
