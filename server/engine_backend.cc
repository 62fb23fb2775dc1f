#include "server/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/status_macros.h"
#include "runtime/engine/stream_session.h"
#include "server/infer_codec.h"
#include "server/stream_pool.h"

namespace reprise::server {
namespace {

using runtime::DataType;
using runtime::engine::Dim;
using runtime::engine::ExecMode;
using runtime::engine::Model;
using runtime::engine::NamedTensor;
using runtime::engine::StreamSession;
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
  if (value.dtype == DataType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a string tensor, which the engine backend cannot serve"));
  }
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
          absl::StrCat(what, " has no shape in the graph; list its dims in config.yaml"));
    }
    return info;
  }
  ASSIGN_OR_RETURN(DataType config_type, DataTypeOf(entry->data_type));
  if (config_type != value.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", config::TensorTypeName(entry->data_type), " in config.yaml but ",
                     runtime::DataTypeName(value.dtype), " in the graph"));
  }
  std::vector<int64_t> config_shape;
  if (max_batch_size > 0) config_shape.push_back(-1);
  config_shape.insert(config_shape.end(), entry->dims.begin(), entry->dims.end());
  if (!value.has_shape) return TensorInfo{value.name, value.dtype, config_shape};
  if (config_shape.size() != info.shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has shape ", ShapeString(config_shape),
                     " in config.yaml (batch dimension ", max_batch_size > 0 ? "included" : "none",
                     ") but ", runtime::engine::DimsToString(value.dims), " in the graph"));
  }
  for (size_t i = 0; i < config_shape.size(); ++i) {
    if (config_shape[i] < 0) continue;
    if (info.shape[i] >= 0 && info.shape[i] != config_shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has shape ", ShapeString(config_shape), " in config.yaml but ",
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
      return absl::InvalidArgumentError(absl::StrCat(label, ": input \"", value.name,
                                                     "\" of the graph is missing in config.yaml"));
    }
    ASSIGN_OR_RETURN(TensorInfo info, MakeTensorInfo(value, entry, max_batch_size, kind, label));
    infos.push_back(std::move(info));
  }
  for (const config::TensorSettings& e : entries) {
    if (by_name.contains(e.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": ", kind, " \"", e.name, "\" of config.yaml is not in the graph"));
    }
  }
  return infos;
}

// One loaded version: the model, one StreamSession per stream, and the pool that leases them.
class EngineModel final : public LoadedModel {
 public:
  EngineModel(std::shared_ptr<runtime::Backend> backend, std::shared_ptr<const Model> model,
              ModelSignature signature, std::vector<std::unique_ptr<StreamSession>> sessions,
              std::string label, int max_queue)
      : backend_(std::move(backend)),
        model_(std::move(model)),
        signature_(std::move(signature)),
        sessions_(std::move(sessions)),
        label_(std::move(label)),
        pool_(label_, static_cast<int>(sessions_.size()), max_queue) {}

  const ModelSignature& signature() const override { return signature_; }

  absl::StatusOr<std::vector<OutputTensor>> Infer(std::span<const InputTensor> inputs,
                                                  std::span<const std::string> outputs,
                                                  InferTimings* timings) override {
    std::vector<NamedTensor> tensors;
    tensors.reserve(inputs.size());
    for (const InputTensor& in : inputs) {
      NamedTensor t;
      t.name = in.name;
      t.value.dtype = in.dtype;
      t.value.shape = in.shape;
      t.value.bytes.assign(in.data.begin(), in.data.end());
      tensors.push_back(std::move(t));
    }
    ASSIGN_OR_RETURN(StreamLease lease, pool_.Acquire());
    if (timings != nullptr) timings->queue_ns = lease.queue_ns();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<NamedTensor>> results =
        sessions_[static_cast<size_t>(lease.stream())]->Run(tensors);
    lease.Reset();
    if (timings != nullptr) timings->compute_ns = NanosSince(start);
    if (!results.ok()) return results.status();

    std::vector<OutputTensor> out;
    out.reserve(outputs.size());
    for (const std::string& name : outputs) {
      NamedTensor* found = nullptr;
      for (NamedTensor& r : *results) {
        if (r.name == name) found = &r;
      }
      if (found == nullptr) {
        return absl::InternalError(
            absl::StrCat(label_, ": the engine returned no output \"", name, "\""));
      }
      OutputTensor t;
      t.name = name;
      t.dtype = found->value.dtype;
      t.shape = found->value.shape;
      t.data.assign(found->value.bytes.begin(), found->value.bytes.end());
      out.push_back(std::move(t));
    }
    return out;
  }

  std::vector<RuntimeInstanceInfo> ListRuntimeInstances() const override {
    std::vector<RuntimeInstanceInfo> list;
    for (size_t s = 0; s < sessions_.size(); ++s) {
      for (const runtime::engine::StreamInstanceInfo& i : sessions_[s]->ListInstances()) {
        RuntimeInstanceInfo info;
        info.stream = static_cast<int>(s);
        info.shape_signature = i.shape_signature;
        info.state = absl::AsciiStrToUpper(i.state);  // CAPTURED or EAGER, as the proto spells
        info.captures = i.captures;
        info.replays = i.replays;
        info.capture_time_ns = static_cast<uint64_t>(i.capture_ns);
        info.arena_bytes = i.arena_bytes;
        info.last_used_ms = static_cast<uint64_t>(i.last_used_ms);
        list.push_back(std::move(info));
      }
    }
    return list;
  }

  absl::StatusOr<std::string> DumpRuntimeInstance(int stream, absl::string_view shape_signature,
                                                  bool verbose) const override {
    if (stream < 0 || static_cast<size_t>(stream) >= sessions_.size()) {
      return absl::NotFoundError(absl::StrCat("no stream ", stream, " (the model has ",
                                              sessions_.size(), " streams: 0 to ",
                                              sessions_.size() - 1, ")"));
    }
    return sessions_[static_cast<size_t>(stream)]->DumpInstance(shape_signature, verbose);
  }

 private:
  // Declared first, destroyed last: the sessions' streams and the model's kernel registry
  // belong to the device.
  const std::shared_ptr<runtime::Backend> backend_;
  const std::shared_ptr<const Model> model_;
  const ModelSignature signature_;
  const std::vector<std::unique_ptr<StreamSession>> sessions_;
  const std::string label_;
  StreamPool pool_;
};

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

absl::StatusOr<std::unique_ptr<EngineBackend>> EngineBackend::Create(EngineBackendOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend, runtime::CreateBackend("cpu"));
  ASSIGN_OR_RETURN(runtime::Device * device, backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(device->kernels()));
  return std::unique_ptr<EngineBackend>(
      new EngineBackend(std::shared_ptr<runtime::Backend>(std::move(backend)), device, options));
}

absl::StatusOr<std::unique_ptr<LoadedModel>> EngineBackend::Load(const LoadSpec& spec) {
  const std::string label = absl::StrCat("model \"", spec.model_name, "\" version ", spec.version);
  config::ModelSettings defaults;
  const config::ModelSettings& settings = spec.settings != nullptr ? *spec.settings : defaults;
  runtime::engine::ModelOptions model_options;
  model_options.intra_op_threads = options_.intra_op_threads;
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                   Model::LoadFile(spec.model_path, *device_->kernels(), model_options));
  ASSIGN_OR_RETURN(ModelSignature signature, SignatureFromGraph(*model, settings, label));
  std::vector<std::unique_ptr<StreamSession>> sessions;
  for (int i = 0; i < std::max(spec.streams, 1); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<StreamSession> session,
                     StreamSession::Create(model, device_, ExecMode::kReplay));
    sessions.push_back(std::move(session));
  }
  return std::make_unique<EngineModel>(backend_, std::move(model), std::move(signature),
                                       std::move(sessions), label, spec.max_queue_length);
}

std::vector<DeviceMemoryInfo> EngineBackend::MemoryUsage() const {
  const runtime::MemoryStats s = device_->memory_stats();
  DeviceMemoryInfo info;
  info.device = std::string(device_->name());
  info.in_use = s.device_in_use;
  info.peak = s.device_peak;
  info.pinned_in_use = s.pinned_in_use;
  info.pinned_peak = s.pinned_peak;
  return {info};
}

}  // namespace reprise::server
