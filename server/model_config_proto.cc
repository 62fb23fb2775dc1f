#include "server/model_config_proto.h"

namespace reprise::server {
namespace {

using runtime::DataType;

inference::ModelInstanceGroup::Kind KindFromName(const std::string& name) {
  inference::ModelInstanceGroup::Kind kind = inference::ModelInstanceGroup::KIND_AUTO;
  inference::ModelInstanceGroup::Kind_Parse(name, &kind);
  return kind;
}

template <typename T>
void FillTensor(const std::string& name, inference::DataType type, const std::vector<int64_t>& dims,
                T* out) {
  out->set_name(name);
  out->set_data_type(type);
  for (int64_t d : dims) out->add_dims(d);
}

std::vector<int64_t> WithoutBatch(const std::vector<int64_t>& shape, int max_batch_size) {
  if (max_batch_size <= 0 || shape.empty()) return shape;
  return std::vector<int64_t>(shape.begin() + 1, shape.end());
}

}  // namespace

inference::DataType ToProtoDataType(DataType type) {
  switch (type) {
    case DataType::kBool:
      return inference::TYPE_BOOL;
    case DataType::kUInt8:
      return inference::TYPE_UINT8;
    case DataType::kUInt16:
      return inference::TYPE_UINT16;
    case DataType::kUInt32:
      return inference::TYPE_UINT32;
    case DataType::kUInt64:
      return inference::TYPE_UINT64;
    case DataType::kInt8:
      return inference::TYPE_INT8;
    case DataType::kInt16:
      return inference::TYPE_INT16;
    case DataType::kInt32:
      return inference::TYPE_INT32;
    case DataType::kInt64:
      return inference::TYPE_INT64;
    case DataType::kFloat16:
      return inference::TYPE_FP16;
    case DataType::kFloat32:
      return inference::TYPE_FP32;
    case DataType::kFloat64:
      return inference::TYPE_FP64;
    case DataType::kString:
      return inference::TYPE_STRING;
    case DataType::kBFloat16:
      return inference::TYPE_BF16;
    default:
      return inference::TYPE_INVALID;
  }
}

inference::ModelConfig ToModelConfigProto(const config::ModelSettings& settings,
                                          const ModelSignature& signature) {
  inference::ModelConfig out;
  out.set_name(settings.name);
  out.set_platform(settings.platform);
  out.set_backend(settings.backend);
  out.set_max_queue_size(static_cast<uint32_t>(settings.max_queue_size));
  out.set_max_batch_size(settings.max_batch_size);

  auto* policy = out.mutable_version_policy();
  switch (settings.version_policy.kind) {
    case config::VersionPolicy::Kind::kLatest:
      policy->mutable_latest()->set_num_versions(settings.version_policy.num_versions);
      break;
    case config::VersionPolicy::Kind::kAll:
      policy->mutable_all();
      break;
    case config::VersionPolicy::Kind::kSpecific:
      for (int64_t v : settings.version_policy.versions)
        policy->mutable_specific()->add_versions(v);
      break;
  }

  // config.yaml's TensorType numbers are model_config.proto's DataType numbers by design.
  if (!settings.inputs.empty()) {
    for (const config::TensorSettings& t : settings.inputs) {
      FillTensor(t.name, static_cast<inference::DataType>(t.data_type), t.dims, out.add_input());
    }
  } else {
    for (const TensorInfo& t : signature.inputs) {
      FillTensor(t.name, ToProtoDataType(t.dtype), WithoutBatch(t.shape, settings.max_batch_size),
                 out.add_input());
    }
  }
  if (!settings.outputs.empty()) {
    for (const config::TensorSettings& t : settings.outputs) {
      inference::ModelOutput* output = out.add_output();
      FillTensor(t.name, static_cast<inference::DataType>(t.data_type), t.dims, output);
      output->set_label_filename(t.label_filename);
    }
  } else {
    for (const TensorInfo& t : signature.outputs) {
      FillTensor(t.name, ToProtoDataType(t.dtype), WithoutBatch(t.shape, settings.max_batch_size),
                 out.add_output());
    }
  }

  for (const config::InstanceGroup& g : settings.instance_groups) {
    auto* group = out.add_instance_group();
    group->set_count(g.count);
    group->set_kind(KindFromName(g.kind));
    for (int gpu : g.gpus) group->add_gpus(gpu);
  }
  const config::CaptureSettings& capture = settings.capture;
  if (!capture.buckets.empty() || capture.warmup.has_value() ||
      capture.max_instances_per_stream.has_value()) {
    inference::ModelCapture* c = out.mutable_capture();
    for (int64_t b : capture.buckets) c->add_buckets(b);
    if (capture.warmup.has_value()) c->set_warmup(*capture.warmup);
    if (capture.max_instances_per_stream.has_value()) {
      c->set_max_instances_per_stream(*capture.max_instances_per_stream);
    }
  }
  if (settings.dynamic_batching.has_value()) {
    auto* batching = out.mutable_dynamic_batching();
    for (int64_t size : settings.dynamic_batching->preferred_batch_size) {
      batching->add_preferred_batch_size(static_cast<int32_t>(size));
    }
    if (settings.dynamic_batching->max_queue_delay_microseconds.has_value()) {
      batching->set_max_queue_delay_microseconds(
          static_cast<uint64_t>(*settings.dynamic_batching->max_queue_delay_microseconds));
    }
    const config::DynamicBatching& b = *settings.dynamic_batching;
    batching->set_priority_levels(static_cast<uint64_t>(b.priority_levels));
    batching->set_default_priority_level(static_cast<uint64_t>(b.default_priority_level));
    auto* queue = batching->mutable_default_queue_policy();
    queue->set_max_queue_size(b.default_queue_policy.max_queue_size);
    queue->set_default_timeout_microseconds(
        static_cast<uint64_t>(b.default_queue_policy.default_timeout_microseconds));
    queue->set_allow_timeout_override(true);
  }
  return out;
}

}  // namespace reprise::server
