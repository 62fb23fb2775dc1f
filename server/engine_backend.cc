#include "server/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#if REPRISE_SERVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif
#include "runtime/base/status_macros.h"
#include "runtime/engine/device_plan.h"
#include "runtime/engine/onnx_import.h"
#include "runtime/engine/stream_session.h"
#include "server/cpu_budget.h"
#include "server/engine_model.h"
#include "server/infer_codec.h"
#include "server/model_config_proto.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace {

using runtime::DataType;
using runtime::engine::Dim;
using runtime::engine::Model;
using runtime::engine::Value;

int64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start)
      .count();
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// config.yaml's TYPE_* names are KServe's datatype names with a prefix (TYPE_STRING: BYTES).
absl::StatusOr<DataType> DataTypeOf(config::TensorType type) {
  if (type == config::TensorType::kString) return DataType::kString;
  absl::string_view name = config::TensorTypeName(type);
  name.remove_prefix(std::min<size_t>(name.size(), 5));  // "TYPE_"
  return DataTypeFromKServe(name);
}

// One tensor of the signature from the graph's value and, when config.yaml lists it, its entry.
absl::StatusOr<TensorInfo> MakeTensorInfo(const Value& value, const config::TensorSettings* entry,
                                          int max_batch_size, absl::string_view kind,
                                          absl::string_view label) {
  const std::string what = absl::StrCat(label, ": ", kind, " \"", value.name, "\"");
  TensorInfo info{value.name, value.dtype, {}};
  if (value.has_shape) {
    for (const Dim& d : value.dims) info.shape.push_back(d.known() ? d.value : -1);
  }
  if (max_batch_size > 0) {
    if (value.has_shape && value.dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is a scalar in the graph but max_batch_size ", max_batch_size,
                       " needs a leading batch dimension"));
    }
    if (value.has_shape && value.dims[0].known()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a fixed first dimension ", value.dims[0].value,
                       " in the graph but max_batch_size ", max_batch_size,
                       " needs a variable batch dimension"));
    }
    if (!info.shape.empty()) info.shape[0] = -1;
  }
  if (entry == nullptr) {
    if (!value.has_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has no shape in the graph; list its dims in the model config"));
    }
    return info;
  }
  ASSIGN_OR_RETURN(DataType config_type, DataTypeOf(entry->data_type));
  if (config_type != value.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", config::TensorTypeName(entry->data_type), " in the model config but ",
        runtime::DataTypeName(value.dtype), " in the graph"));
  }
  std::vector<int64_t> config_shape;
  if (max_batch_size > 0) config_shape.push_back(-1);
  config_shape.insert(config_shape.end(), entry->dims.begin(), entry->dims.end());
  if (!value.has_shape) return TensorInfo{value.name, value.dtype, config_shape};
  if (config_shape.size() != info.shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has shape ", ShapeString(config_shape), " in the model config (batch dimension ",
        max_batch_size > 0 ? "included" : "none", ") but ",
        runtime::engine::DimsToString(value.dims), " in the graph"));
  }
  for (size_t i = 0; i < config_shape.size(); ++i) {
    if (config_shape[i] < 0) continue;
    if (info.shape[i] >= 0 && info.shape[i] != config_shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has shape ", ShapeString(config_shape), " in the model config but ",
          runtime::engine::DimsToString(value.dims), " in the graph (dimension ", i, ")"));
    }
    info.shape[i] = config_shape[i];  // config.yaml may pin a symbolic dimension
  }
  return info;
}

absl::StatusOr<std::vector<TensorInfo>> MakeTensorInfos(
    const std::vector<Value>& values, const std::vector<config::TensorSettings>& entries,
    int max_batch_size, absl::string_view kind, absl::string_view label) {
  absl::flat_hash_map<std::string, const config::TensorSettings*> by_name;
  for (const config::TensorSettings& e : entries) by_name[e.name] = &e;
  std::vector<TensorInfo> infos;
  for (const Value& value : values) {
    const config::TensorSettings* entry = nullptr;
    if (auto it = by_name.find(value.name); it != by_name.end()) {
      entry = it->second;
      by_name.erase(it);
    } else if (!entries.empty() && kind == "input") {
      // Every input must be fed, so a config that lists inputs must list them all; outputs
      // may be a subset (the others are still computed and can be requested).
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": input \"", value.name, "\" of the graph is missing in the model config"));
    }
    ASSIGN_OR_RETURN(TensorInfo info, MakeTensorInfo(value, entry, max_batch_size, kind, label));
    infos.push_back(std::move(info));
  }
  for (const config::TensorSettings& e : entries) {
    if (by_name.contains(e.name)) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": ", kind, " \"", e.name,
                                                     "\" of the model config is not in the graph"));
    }
  }
  return infos;
}

}  // namespace

absl::StatusOr<ModelSignature> SignatureFromGraph(const Model& model,
                                                  const config::ModelSettings& settings,
                                                  absl::string_view label) {
  ModelSignature signature;
  ASSIGN_OR_RETURN(signature.inputs, MakeTensorInfos(model.inputs(), settings.inputs,
                                                     settings.max_batch_size, "input", label));
  ASSIGN_OR_RETURN(signature.outputs, MakeTensorInfos(model.outputs(), settings.outputs,
                                                      settings.max_batch_size, "output", label));
  return signature;
}

absl::StatusOr<DevicePlacement> PlacementFor(const config::ModelSettings& settings,
                                             absl::string_view label) {
  DevicePlacement placement;
  bool gpu = false, other = false;
  std::vector<int> gpus;
  for (const config::InstanceGroup& g : settings.instance_groups) {
    if (g.kind != "KIND_GPU") {
      other = true;
      continue;
    }
    gpu = true;
    for (int index : g.gpus.empty() ? std::vector<int>{0} : g.gpus) {
      if (std::find(gpus.begin(), gpus.end(), index) == gpus.end()) gpus.push_back(index);
    }
  }
  if (!gpu) return placement;
  if (other) {
    return absl::InvalidArgumentError(
        absl::StrCat(label,
                     ": instance_group mixes KIND_GPU with other kinds; a model runs on "
                     "one device"));
  }
  if (gpus.size() > 1) {
    return absl::UnimplementedError(
        absl::StrCat(label, ": instance_group names GPUs [", absl::StrJoin(gpus, ","),
                     "]; a model runs on one GPU (load it once per GPU under another name)"));
  }
  placement.backend = "cuda";
  placement.index = gpus[0];
  return placement;
}

absl::StatusOr<std::unique_ptr<EngineBackend>> EngineBackend::Create(EngineBackendOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend, runtime::CreateBackend("cpu"));
  ASSIGN_OR_RETURN(runtime::Device * device, backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(device->kernels(), options.cpu_kernels));
  return std::unique_ptr<EngineBackend>(
      new EngineBackend(std::shared_ptr<runtime::Backend>(std::move(backend)), device, options));
}

EngineBackend::EngineBackend(std::shared_ptr<runtime::Backend> backend, runtime::Device* device,
                             EngineBackendOptions options)
    : backend_(std::move(backend)),
      device_(device),
      options_(options),
      budget_(std::make_shared<runtime::engine::InstanceBudget>(
          static_cast<uint64_t>(std::max<int64_t>(options.memory_budget_bytes, 0)))) {}

absl::StatusOr<std::pair<std::shared_ptr<runtime::Backend>, runtime::Device*>>
EngineBackend::DeviceFor(const DevicePlacement& placement, absl::string_view label) {
  if (placement.backend == "cpu") return std::make_pair(backend_, device_);
  const std::string name = absl::StrCat(placement.backend, ":", placement.index);
#if !REPRISE_SERVE_CUDA
  // Built without the CUDA backend: no CUDA kernels are linked in.
  return absl::FailedPreconditionError(
      absl::StrCat(label, ": instance_group asks for KIND_GPU on ", name,
                   ", but this reprise-server was built without the CUDA backend (cmake "
                   "-DREPRISE_WITH_CUDA=ON with the CUDA toolkit, config/README.md \"Serving on "
                   "a GPU\")"));
#else
  std::lock_guard<std::mutex> lock(cuda_mu_);
  if (cuda_ == nullptr) {
    absl::StatusOr<std::unique_ptr<runtime::Backend>> cuda = runtime::CreateBackend("cuda");
    if (!cuda.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(label, ": instance_group asks for KIND_GPU on ", name,
                       ", but no CUDA device can be used: ", cuda.status().message()));
    }
    cuda_ = *std::move(cuda);
  }
  if (placement.index >= cuda_->device_count()) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": instance_group asks for KIND_GPU on ", name, ", but there is no ",
                     name, " (", cuda_->device_count(), " CUDA device(s))"));
  }
  ASSIGN_OR_RETURN(runtime::Device * device, cuda_->device(placement.index));
  if (std::find(cuda_ready_.begin(), cuda_ready_.end(), placement.index) == cuda_ready_.end()) {
    RETURN_IF_ERROR(kernels::cuda::RegisterCudaKernels(device->kernels()));
    cuda_ready_.push_back(placement.index);
  }
  return std::make_pair(cuda_, device);
#endif
}

absl::StatusOr<std::unique_ptr<LoadedModel>> EngineBackend::Load(const LoadSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  const std::string label = absl::StrCat("model \"", spec.model_name, "\" version ", spec.version);
  config::ModelSettings defaults;
  const config::ModelSettings& settings = spec.settings != nullptr ? *spec.settings : defaults;
  const int streams = std::max(spec.streams, 1);
  const int cores = options_.cores > 0 ? options_.cores : DetectCpuBudget().cpus;
  bool clamped = false;
  runtime::engine::ModelOptions model_options;
  model_options.intra_op_threads =
      IntraOpThreadsFor(options_.intra_op_threads, streams, cores, &clamped);
  model_options.max_plan_bytes = options_.max_plan_bytes;
  if (clamped) {
    spdlog::warn("{}: intra_op_threads {} x {} streams exceeds the {} cores; using {} threads",
                 label, options_.intra_op_threads, streams, cores, model_options.intra_op_threads);
  }
  ASSIGN_OR_RETURN(DevicePlacement placement, PlacementFor(settings, label));
  ASSIGN_OR_RETURN(auto backend_and_device, DeviceFor(placement, label));
  runtime::Device* const device = backend_and_device.second;
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                   Model::LoadFile(spec.model_path, *device->kernels(), model_options));
  ASSIGN_OR_RETURN(ModelSignature signature, SignatureFromGraph(*model, settings, label));

  EngineModelParams params;
  if (!device->host_memory()) {
    // The weights go to the device once, shared by every stream's plans.
    absl::StatusOr<std::shared_ptr<const runtime::engine::DeviceConstants>> constants =
        runtime::engine::DeviceConstants::Create(*model, device);
    if (!constants.ok()) {
      return absl::Status(constants.status().code(),
                          absl::StrCat(label, ": uploading the weights to ", device->name(), ": ",
                                       constants.status().message()));
    }
    params.session.device_constants = *std::move(constants);
  }
  params.backend = std::move(backend_and_device.first);
  params.device = device;
  params.model = std::move(model);
  params.signature = std::move(signature);
  params.label = label;
  params.streams = streams;
  params.max_batch_size = settings.max_batch_size;
  params.buckets = config::CaptureBuckets(settings);
  params.warmup = settings.capture.warmup.value_or(options_.warmup);
  params.session.max_instances =
      settings.capture.max_instances_per_stream.value_or(options_.max_instances_per_stream);
  params.budget = budget_;
  params.session.budget = budget_.get();
  params.session.choose_threads = options_.choose_threads;
  params.batcher = BatcherOptionsFor(settings, options_, label, spec.max_queue_length);
  ASSIGN_OR_RETURN(std::unique_ptr<EngineModel> loaded, EngineModel::Create(std::move(params)));
  loaded->set_load_ns(NanosSince(start));
  return loaded;
}

absl::StatusOr<config::GraphTensors> EngineBackend::ReadGraphTensors(
    const std::string& model_path) const {
  ASSIGN_OR_RETURN(runtime::engine::Graph graph,
                   runtime::engine::ImportOnnxFile(model_path, *device_->kernels()));
  auto tensor = [](const Value& value, const std::string& name) {
    config::GraphTensor t;
    t.name = name;
    // model_config.proto's DataType numbers are config::TensorType's by design.
    t.type = static_cast<config::TensorType>(ToProtoDataType(value.dtype));
    t.has_shape = value.has_shape;
    for (const runtime::engine::Dim& d : value.dims) t.dims.push_back(d.known() ? d.value : -1);
    return t;
  };
  config::GraphTensors out;
  for (int id : graph.inputs) out.inputs.push_back(tensor(graph.values[id], graph.values[id].name));
  for (const runtime::engine::GraphOutput& o : graph.outputs) {
    out.outputs.push_back(tensor(graph.values[o.value], o.name));
  }
  return out;
}

int IntraOpThreadsFor(int configured, int streams, int cores, bool* clamped) {
  const int share = std::max(1, std::max(cores, 1) / std::max(streams, 1));
  *clamped = configured > share;
  return configured <= 0 ? share : std::min(configured, share);
}

BatcherOptions BatcherOptionsFor(const config::ModelSettings& settings,
                                 const EngineBackendOptions& defaults, absl::string_view label,
                                 int max_queue_length) {
  BatcherOptions b;
  b.label = std::string(label);
  b.max_queue_size = max_queue_length;
  b.default_timeout_ns = defaults.default_timeout_us * 1000;
  if (!settings.dynamic_batching.has_value()) return b;
  const config::DynamicBatching& d = *settings.dynamic_batching;
  b.batching = settings.max_batch_size > 0;
  b.max_batch_size = std::max(settings.max_batch_size, 1);
  b.preferred_batch_sizes = d.preferred_batch_size;
  b.max_queue_delay_ns =
      d.max_queue_delay_microseconds.value_or(defaults.max_queue_delay_us) * 1000;
  if (d.default_queue_policy.max_queue_size > 0) {
    b.max_queue_size = d.default_queue_policy.max_queue_size;
  }
  if (d.default_queue_policy.default_timeout_microseconds > 0) {
    b.default_timeout_ns = d.default_queue_policy.default_timeout_microseconds * 1000;
  }
  b.priority_levels = std::max(d.priority_levels, 1);
  b.default_priority = d.default_priority_level > 0 ? d.default_priority_level : b.priority_levels;
  return b;
}

std::vector<DeviceMemoryInfo> EngineBackend::MemoryUsage() const {
  auto info = [](const runtime::Device& device) {
    const runtime::MemoryStats s = device.memory_stats();
    DeviceMemoryInfo i;
    i.device = std::string(device.name());
    i.in_use = s.device_in_use;
    i.peak = s.device_peak;
    i.pinned_in_use = s.pinned_in_use;
    i.pinned_peak = s.pinned_peak;
    return i;
  };
  std::vector<DeviceMemoryInfo> devices = {info(*device_)};
  std::lock_guard<std::mutex> lock(cuda_mu_);
  for (int index : cuda_ready_) {
    absl::StatusOr<runtime::Device*> device = cuda_->device(index);
    if (device.ok()) devices.push_back(info(**device));
  }
  return devices;
}

}  // namespace reprise::server
