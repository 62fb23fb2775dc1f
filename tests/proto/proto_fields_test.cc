// Checks the wire facts of shared/specs/kserve_v2_grpc.md against the compiled descriptors, so
// that a wrong field number or type in proto/ cannot pass.
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpc_service.pb.h"
#include "gtest/gtest.h"
#include "model_config.pb.h"
#include "reprise_admin.pb.h"

namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct Field {
  const char* message;  // full name
  const char* name;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
};

constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBytes = FieldDescriptor::TYPE_BYTES;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kUInt64 = FieldDescriptor::TYPE_UINT64;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;
constexpr auto kUInt32 = FieldDescriptor::TYPE_UINT32;
constexpr auto kDouble = FieldDescriptor::TYPE_DOUBLE;
constexpr auto kFloat = FieldDescriptor::TYPE_FLOAT;
constexpr auto kMsg = FieldDescriptor::TYPE_MESSAGE;
constexpr auto kEnum = FieldDescriptor::TYPE_ENUM;

const std::vector<Field>& SpecFields() {
  static const auto* fields = new std::vector<Field>{
      {"inference.ServerLiveResponse", "live", 1, kBool, false},
      {"inference.ServerReadyResponse", "ready", 1, kBool, false},
      {"inference.ModelReadyRequest", "name", 1, kString, false},
      {"inference.ModelReadyRequest", "version", 2, kString, false},
      {"inference.ModelReadyResponse", "ready", 1, kBool, false},
      {"inference.ServerMetadataResponse", "name", 1, kString, false},
      {"inference.ServerMetadataResponse", "version", 2, kString, false},
      {"inference.ServerMetadataResponse", "extensions", 3, kString, true},
      {"inference.ModelMetadataRequest", "name", 1, kString, false},
      {"inference.ModelMetadataRequest", "version", 2, kString, false},
      {"inference.ModelMetadataResponse", "name", 1, kString, false},
      {"inference.ModelMetadataResponse", "versions", 2, kString, true},
      {"inference.ModelMetadataResponse", "platform", 3, kString, false},
      {"inference.ModelMetadataResponse", "inputs", 4, kMsg, true},
      {"inference.ModelMetadataResponse", "outputs", 5, kMsg, true},
      {"inference.ModelMetadataResponse.TensorMetadata", "name", 1, kString, false},
      {"inference.ModelMetadataResponse.TensorMetadata", "datatype", 2, kString, false},
      {"inference.ModelMetadataResponse.TensorMetadata", "shape", 3, kInt64, true},
      {"inference.ModelInferRequest", "model_name", 1, kString, false},
      {"inference.ModelInferRequest", "model_version", 2, kString, false},
      {"inference.ModelInferRequest", "id", 3, kString, false},
      {"inference.ModelInferRequest", "parameters", 4, kMsg, true},
      {"inference.ModelInferRequest", "inputs", 5, kMsg, true},
      {"inference.ModelInferRequest", "outputs", 6, kMsg, true},
      {"inference.ModelInferRequest", "raw_input_contents", 7, kBytes, true},
      {"inference.ModelInferRequest.InferInputTensor", "name", 1, kString, false},
      {"inference.ModelInferRequest.InferInputTensor", "datatype", 2, kString, false},
      {"inference.ModelInferRequest.InferInputTensor", "shape", 3, kInt64, true},
      {"inference.ModelInferRequest.InferInputTensor", "parameters", 4, kMsg, true},
      {"inference.ModelInferRequest.InferInputTensor", "contents", 5, kMsg, false},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "name", 1, kString, false},
      {"inference.ModelInferRequest.InferRequestedOutputTensor", "parameters", 2, kMsg, true},
      {"inference.ModelInferResponse", "model_name", 1, kString, false},
      {"inference.ModelInferResponse", "model_version", 2, kString, false},
      {"inference.ModelInferResponse", "id", 3, kString, false},
      {"inference.ModelInferResponse", "parameters", 4, kMsg, true},
      {"inference.ModelInferResponse", "outputs", 5, kMsg, true},
      {"inference.ModelInferResponse", "raw_output_contents", 6, kBytes, true},
      {"inference.ModelInferResponse.InferOutputTensor", "name", 1, kString, false},
      {"inference.ModelInferResponse.InferOutputTensor", "datatype", 2, kString, false},
      {"inference.ModelInferResponse.InferOutputTensor", "shape", 3, kInt64, true},
      {"inference.ModelInferResponse.InferOutputTensor", "parameters", 4, kMsg, true},
      {"inference.ModelInferResponse.InferOutputTensor", "contents", 5, kMsg, false},
      {"inference.InferParameter", "bool_param", 1, kBool, false},
      {"inference.InferParameter", "int64_param", 2, kInt64, false},
      {"inference.InferParameter", "string_param", 3, kString, false},
      {"inference.InferParameter", "double_param", 4, kDouble, false},
      {"inference.InferParameter", "uint64_param", 5, kUInt64, false},
      {"inference.InferTensorContents", "bool_contents", 1, kBool, true},
      {"inference.InferTensorContents", "int_contents", 2, kInt32, true},
      {"inference.InferTensorContents", "int64_contents", 3, kInt64, true},
      {"inference.InferTensorContents", "uint_contents", 4, kUInt32, true},
      {"inference.InferTensorContents", "uint64_contents", 5, kUInt64, true},
      {"inference.InferTensorContents", "fp32_contents", 6, kFloat, true},
      {"inference.InferTensorContents", "fp64_contents", 7, kDouble, true},
      {"inference.InferTensorContents", "bytes_contents", 8, kBytes, true},
      {"inference.ModelStreamInferResponse", "error_message", 1, kString, false},
      {"inference.ModelStreamInferResponse", "infer_response", 2, kMsg, false},
      {"inference.ModelConfigRequest", "name", 1, kString, false},
      {"inference.ModelConfigRequest", "version", 2, kString, false},
      {"inference.ModelConfigResponse", "config", 1, kMsg, false},
      {"inference.ModelStatisticsRequest", "name", 1, kString, false},
      {"inference.ModelStatisticsRequest", "version", 2, kString, false},
      {"inference.ModelStatisticsResponse", "model_stats", 1, kMsg, true},
      {"inference.StatisticDuration", "count", 1, kUInt64, false},
      {"inference.StatisticDuration", "ns", 2, kUInt64, false},
      {"inference.InferStatistics", "success", 1, kMsg, false},
      {"inference.InferStatistics", "fail", 2, kMsg, false},
      {"inference.InferStatistics", "queue", 3, kMsg, false},
      {"inference.InferStatistics", "compute_input", 4, kMsg, false},
      {"inference.InferStatistics", "compute_infer", 5, kMsg, false},
      {"inference.InferStatistics", "compute_output", 6, kMsg, false},
      {"inference.InferStatistics", "cache_hit", 7, kMsg, false},
      {"inference.InferStatistics", "cache_miss", 8, kMsg, false},
      {"inference.InferBatchStatistics", "batch_size", 1, kUInt64, false},
      {"inference.InferBatchStatistics", "compute_input", 2, kMsg, false},
      {"inference.InferBatchStatistics", "compute_infer", 3, kMsg, false},
      {"inference.InferBatchStatistics", "compute_output", 4, kMsg, false},
      {"inference.InferResponseStatistics", "compute_infer", 1, kMsg, false},
      {"inference.InferResponseStatistics", "compute_output", 2, kMsg, false},
      {"inference.InferResponseStatistics", "success", 3, kMsg, false},
      {"inference.InferResponseStatistics", "fail", 4, kMsg, false},
      {"inference.InferResponseStatistics", "empty_response", 5, kMsg, false},
      {"inference.InferResponseStatistics", "cancel", 6, kMsg, false},
      {"inference.MemoryUsage", "type", 1, kString, false},
      {"inference.MemoryUsage", "id", 2, kInt64, false},
      {"inference.MemoryUsage", "byte_size", 3, kUInt64, false},
      {"inference.ModelStatistics", "name", 1, kString, false},
      {"inference.ModelStatistics", "version", 2, kString, false},
      {"inference.ModelStatistics", "last_inference", 3, kUInt64, false},
      {"inference.ModelStatistics", "inference_count", 4, kUInt64, false},
      {"inference.ModelStatistics", "execution_count", 5, kUInt64, false},
      {"inference.ModelStatistics", "inference_stats", 6, kMsg, false},
      {"inference.ModelStatistics", "batch_stats", 7, kMsg, true},
      {"inference.ModelStatistics", "memory_usage", 8, kMsg, true},
      {"inference.ModelStatistics", "response_stats", 9, kMsg, true},
      {"inference.ModelRepositoryParameter", "bool_param", 1, kBool, false},
      {"inference.ModelRepositoryParameter", "int64_param", 2, kInt64, false},
      {"inference.ModelRepositoryParameter", "string_param", 3, kString, false},
      {"inference.ModelRepositoryParameter", "bytes_param", 4, kBytes, false},
      {"inference.RepositoryIndexRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryIndexRequest", "ready", 2, kBool, false},
      {"inference.RepositoryIndexResponse", "models", 1, kMsg, true},
      {"inference.RepositoryIndexResponse.ModelIndex", "name", 1, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "version", 2, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "state", 3, kString, false},
      {"inference.RepositoryIndexResponse.ModelIndex", "reason", 4, kString, false},
      {"inference.RepositoryModelLoadRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryModelLoadRequest", "model_name", 2, kString, false},
      {"inference.RepositoryModelLoadRequest", "parameters", 3, kMsg, true},
      {"inference.RepositoryModelUnloadRequest", "repository_name", 1, kString, false},
      {"inference.RepositoryModelUnloadRequest", "model_name", 2, kString, false},
      {"inference.RepositoryModelUnloadRequest", "parameters", 3, kMsg, true},
      {"inference.SystemSharedMemoryRegisterRequest", "name", 1, kString, false},
      {"inference.SystemSharedMemoryRegisterRequest", "key", 2, kString, false},
      {"inference.SystemSharedMemoryRegisterRequest", "offset", 3, kUInt64, false},
      {"inference.SystemSharedMemoryRegisterRequest", "byte_size", 4, kUInt64, false},
      {"inference.CudaSharedMemoryRegisterRequest", "raw_handle", 2, kBytes, false},
      {"inference.CudaSharedMemoryRegisterRequest", "device_id", 3, kInt64, false},
      {"inference.CudaSharedMemoryRegisterRequest", "byte_size", 4, kUInt64, false},
      {"inference.CudaSharedMemoryStatusResponse.RegionStatus", "device_id", 2, kUInt64, false},
      {"inference.TraceSettingRequest", "settings", 1, kMsg, true},
      {"inference.TraceSettingRequest", "model_name", 2, kString, false},
      {"inference.LogSettingsRequest.SettingValue", "uint32_param", 2, kUInt32, false},
      // model_config.proto (§3)
      {"inference.ModelConfig", "name", 1, kString, false},
      {"inference.ModelConfig", "platform", 2, kString, false},
      {"inference.ModelConfig", "version_policy", 3, kMsg, false},
      {"inference.ModelConfig", "max_batch_size", 4, kInt32, false},
      {"inference.ModelConfig", "input", 5, kMsg, true},
      {"inference.ModelConfig", "output", 6, kMsg, true},
      {"inference.ModelConfig", "instance_group", 7, kMsg, true},
      {"inference.ModelConfig", "dynamic_batching", 11, kMsg, false},
      {"inference.ModelConfig", "optimization", 12, kMsg, false},
      {"inference.ModelConfig", "sequence_batching", 13, kMsg, false},
      {"inference.ModelConfig", "parameters", 14, kMsg, true},
      {"inference.ModelConfig", "ensemble_scheduling", 15, kMsg, false},
      {"inference.ModelConfig", "model_warmup", 16, kMsg, true},
      {"inference.ModelConfig", "backend", 17, kString, false},
      {"inference.ModelConfig", "model_transaction_policy", 19, kMsg, false},
      {"inference.ModelConfig", "response_cache", 24, kMsg, false},
      {"inference.ModelConfig", "runtime", 25, kString, false},
      {"inference.ModelConfig", "model_metrics", 26, kMsg, false},
      {"inference.ModelVersionPolicy.Latest", "num_versions", 1, kUInt32, false},
      {"inference.ModelVersionPolicy.Specific", "versions", 1, kInt64, true},
      {"inference.ModelVersionPolicy", "latest", 1, kMsg, false},
      {"inference.ModelVersionPolicy", "all", 2, kMsg, false},
      {"inference.ModelVersionPolicy", "specific", 3, kMsg, false},
      {"inference.ModelInput", "name", 1, kString, false},
      {"inference.ModelInput", "data_type", 2, kEnum, false},
      {"inference.ModelInput", "format", 3, kEnum, false},
      {"inference.ModelInput", "dims", 4, kInt64, true},
      {"inference.ModelInput", "reshape", 5, kMsg, false},
      {"inference.ModelInput", "is_shape_tensor", 6, kBool, false},
      {"inference.ModelInput", "allow_ragged_batch", 7, kBool, false},
      {"inference.ModelInput", "optional", 8, kBool, false},
      {"inference.ModelOutput", "name", 1, kString, false},
      {"inference.ModelOutput", "data_type", 2, kEnum, false},
      {"inference.ModelOutput", "dims", 3, kInt64, true},
      {"inference.ModelOutput", "label_filename", 4, kString, false},
      {"inference.ModelOutput", "reshape", 5, kMsg, false},
      {"inference.ModelOutput", "is_shape_tensor", 6, kBool, false},
      {"inference.ModelInstanceGroup", "name", 1, kString, false},
      {"inference.ModelInstanceGroup", "count", 2, kInt32, false},
      {"inference.ModelInstanceGroup", "gpus", 3, kInt32, true},
      {"inference.ModelInstanceGroup", "kind", 4, kEnum, false},
      {"inference.ModelInstanceGroup", "profile", 5, kString, true},
      {"inference.ModelInstanceGroup", "rate_limiter", 6, kMsg, false},
      {"inference.ModelInstanceGroup", "passive", 7, kBool, false},
      {"inference.ModelInstanceGroup", "secondary_devices", 8, kMsg, true},
      {"inference.ModelInstanceGroup", "host_policy", 9, kString, false},
      {"inference.ModelDynamicBatching", "preferred_batch_size", 1, kInt32, true},
      {"inference.ModelDynamicBatching", "max_queue_delay_microseconds", 2, kUInt64, false},
      {"inference.ModelDynamicBatching", "preserve_ordering", 3, kBool, false},
      {"inference.ModelDynamicBatching", "priority_levels", 4, kUInt64, false},
      {"inference.ModelDynamicBatching", "default_priority_level", 5, kUInt64, false},
      {"inference.ModelDynamicBatching", "default_queue_policy", 6, kMsg, false},
      {"inference.ModelDynamicBatching", "priority_queue_policy", 7, kMsg, true},
      {"inference.ModelQueuePolicy", "timeout_action", 1, kEnum, false},
      {"inference.ModelQueuePolicy", "default_timeout_microseconds", 2, kUInt64, false},
      {"inference.ModelQueuePolicy", "allow_timeout_override", 3, kBool, false},
      {"inference.ModelQueuePolicy", "max_queue_size", 4, kUInt32, false},
      {"inference.ModelOptimizationPolicy", "graph", 1, kMsg, false},
      {"inference.ModelOptimizationPolicy", "priority", 2, kEnum, false},
      {"inference.ModelOptimizationPolicy", "cuda", 3, kMsg, false},
      {"inference.ModelOptimizationPolicy", "execution_accelerators", 4, kMsg, false},
      {"inference.ModelOptimizationPolicy", "input_pinned_memory", 5, kMsg, false},
      {"inference.ModelOptimizationPolicy", "output_pinned_memory", 6, kMsg, false},
      {"inference.ModelOptimizationPolicy", "gather_kernel_buffer_threshold", 7, kUInt32, false},
      {"inference.ModelOptimizationPolicy", "eager_batching", 8, kBool, false},
      {"inference.ModelOptimizationPolicy.Cuda", "graphs", 1, kBool, false},
      {"inference.ModelOptimizationPolicy.Cuda", "busy_wait_events", 2, kBool, false},
      {"inference.ModelOptimizationPolicy.Cuda", "graph_spec", 3, kMsg, true},
      {"inference.ModelOptimizationPolicy.Cuda", "output_copy_stream", 4, kBool, false},
      {"inference.ModelOptimizationPolicy.Cuda.GraphSpec", "batch_size", 1, kInt32, false},
      {"inference.ModelOptimizationPolicy.Cuda.GraphSpec", "input", 2, kMsg, true},
      {"inference.ModelOptimizationPolicy.Cuda.GraphSpec", "graph_lower_bound", 3, kMsg, false},
      {"inference.ModelParameter", "string_value", 1, kString, false},
      {"inference.ModelTransactionPolicy", "decoupled", 1, kBool, false},
      {"inference.ModelResponseCache", "enable", 1, kBool, false},
  };
  return *fields;
}

TEST(ProtoFieldsTest, MatchSpec) {
  // Make sure every generated file is linked in and registered in the generated pool.
  inference::ModelInferRequest infer;
  inference::ModelConfig config;
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  for (const Field& f : SpecFields()) {
    SCOPED_TRACE(std::string(f.message) + "." + f.name);
    const auto* message = pool->FindMessageTypeByName(f.message);
    ASSERT_NE(message, nullptr);
    const FieldDescriptor* field = message->FindFieldByName(f.name);
    ASSERT_NE(field, nullptr);
    EXPECT_EQ(field->number(), f.number);
    EXPECT_EQ(field->type(), f.type);
    EXPECT_EQ(field->is_repeated(), f.repeated);
  }
}

TEST(ProtoFieldsTest, OneofsAndMaps) {
  const auto* param = inference::InferParameter::descriptor();
  ASSERT_EQ(param->oneof_decl_count(), 1);
  EXPECT_EQ(param->oneof_decl(0)->field_count(), 5);
  const auto* config = inference::ModelConfig::descriptor();
  const auto* sched = config->FindFieldByName("dynamic_batching")->containing_oneof();
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ(sched->name(), "scheduling_choice");
  EXPECT_EQ(config->FindFieldByName("sequence_batching")->containing_oneof(), sched);
  EXPECT_EQ(config->FindFieldByName("ensemble_scheduling")->containing_oneof(), sched);
  EXPECT_TRUE(inference::ModelInferRequest::descriptor()->FindFieldByName("parameters")->is_map());
  EXPECT_TRUE(
      inference::ModelStatistics::descriptor()->FindFieldByName("response_stats")->is_map());
  EXPECT_TRUE(inference::ModelConfig::descriptor()->FindFieldByName("parameters")->is_map());
}

TEST(ProtoFieldsTest, DataTypeEnumMatchesSpecTable) {
  const auto* e = inference::DataType_descriptor();
  const std::vector<std::pair<const char*, int>> expected = {
      {"TYPE_INVALID", 0}, {"TYPE_BOOL", 1},    {"TYPE_UINT8", 2}, {"TYPE_UINT16", 3},
      {"TYPE_UINT32", 4},  {"TYPE_UINT64", 5},  {"TYPE_INT8", 6},  {"TYPE_INT16", 7},
      {"TYPE_INT32", 8},   {"TYPE_INT64", 9},   {"TYPE_FP16", 10}, {"TYPE_FP32", 11},
      {"TYPE_FP64", 12},   {"TYPE_STRING", 13}, {"TYPE_BF16", 14}};
  for (const auto& [name, number] : expected) {
    const auto* value = e->FindValueByName(name);
    ASSERT_NE(value, nullptr) << name;
    EXPECT_EQ(value->number(), number) << name;
  }
  const auto* kind = inference::ModelInstanceGroup::Kind_descriptor();
  EXPECT_EQ(kind->FindValueByName("KIND_AUTO")->number(), 0);
  EXPECT_EQ(kind->FindValueByName("KIND_GPU")->number(), 1);
  EXPECT_EQ(kind->FindValueByName("KIND_CPU")->number(), 2);
  EXPECT_EQ(kind->FindValueByName("KIND_MODEL")->number(), 3);
}

TEST(ProtoFieldsTest, ServiceHasEveryRpc) {
  const auto* pool = DescriptorPool::generated_pool();
  const auto* service = pool->FindServiceByName("inference.GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  for (const char* rpc : {"ServerLive",
                          "ServerReady",
                          "ModelReady",
                          "ServerMetadata",
                          "ModelMetadata",
                          "ModelInfer",
                          "ModelStreamInfer",
                          "ModelConfig",
                          "ModelStatistics",
                          "RepositoryIndex",
                          "RepositoryModelLoad",
                          "RepositoryModelUnload",
                          "SystemSharedMemoryStatus",
                          "SystemSharedMemoryRegister",
                          "SystemSharedMemoryUnregister",
                          "CudaSharedMemoryStatus",
                          "CudaSharedMemoryRegister",
                          "CudaSharedMemoryUnregister",
                          "TraceSetting",
                          "LogSettings"}) {
    EXPECT_NE(service->FindMethodByName(rpc), nullptr) << rpc;
  }
  const auto* stream = service->FindMethodByName("ModelStreamInfer");
  EXPECT_TRUE(stream->client_streaming());
  EXPECT_TRUE(stream->server_streaming());
  const auto* admin = pool->FindServiceByName("reprise.v1.RuntimeInstances");
  ASSERT_NE(admin, nullptr);
  EXPECT_NE(admin->FindMethodByName("ListInstances"), nullptr);
  EXPECT_NE(admin->FindMethodByName("DumpInstance"), nullptr);
  EXPECT_NE(reprise::v1::InstanceInfo::descriptor()->FindFieldByName("arena_bytes"), nullptr);
}

}  // namespace
