#include "server/inference_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "server/infer_codec.h"
#include "server/metrics.h"
#include "server/model_config_proto.h"

namespace reprise::server {
namespace {

uint64_t Nanos(absl::Duration d) { return static_cast<uint64_t>(absl::ToInt64Nanoseconds(d)); }

void Add(inference::StatisticDuration* d, uint64_t count, uint64_t ns) {
  d->set_count(count);
  d->set_ns(ns);
}

std::string Label(const ServedVersion& v) {
  return absl::StrCat("model \"", v.model_name(), "\" version ", v.version());
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

InferenceService::InferenceService(ModelRepository* repository, Executor* infer_executor,
                                   RequestGate* gate, const std::atomic<bool>* ready,
                                   ServiceInfo info)
    : repository_(repository),
      infer_executor_(infer_executor),
      gate_(gate),
      ready_(ready),
      info_(std::move(info)) {}

grpc::ServerUnaryReactor* InferenceService::Done(grpc::CallbackServerContext* ctx,
                                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Unimplemented(grpc::CallbackServerContext* ctx,
                                                          absl::string_view feature) {
  return Done(ctx, absl::UnimplementedError(absl::StrCat(feature, " is not supported by reprise")));
}

absl::Time InferenceService::DeadlineOf(grpc::CallbackServerContext* ctx) const {
  absl::Time deadline = absl::InfiniteFuture();
  const auto client = ctx->deadline();
  if (client != std::chrono::system_clock::time_point::max()) {
    deadline = absl::FromChrono(client);
  }
  if (info_.request_timeout > absl::ZeroDuration()) {
    deadline = std::min(deadline, absl::Now() + info_.request_timeout);
  }
  return deadline;
}

// ---- Health and metadata ----

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* ctx,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* ctx,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  response->set_ready(ready_->load() && !gate_->closed());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  absl::StatusOr<VersionLease> lease = repository_->Acquire(request->name(), request->version());
  if (!lease.ok() && lease.status().code() == absl::StatusCode::kInvalidArgument) {
    return Done(ctx, lease.status());
  }
  response->set_ready(lease.ok() && !gate_->closed());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  response->set_name(info_.name);
  response->set_version(info_.version);
  for (const char* ext : {"model_repository", "model_configuration", "statistics"}) {
    response->add_extensions(ext);
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  absl::StatusOr<VersionLease> lease = repository_->Acquire(request->name(), request->version());
  if (!lease.ok()) return Done(ctx, lease.status());
  const ServedVersion& v = **lease;
  response->set_name(v.model_name());
  response->set_platform(v.settings().platform);
  std::shared_ptr<const ServingMap> map = repository_->Snapshot();
  if (auto it = map->find(v.model_name()); it != map->end()) {
    for (const auto& [number, unused] : it->second.versions) {
      response->add_versions(std::to_string(number));
    }
  }
  const ModelSignature& sig = v.model().signature();
  for (const TensorInfo& t : sig.inputs) {
    auto* m = response->add_inputs();
    m->set_name(t.name);
    m->set_datatype(std::string(KServeDatatypeName(t.dtype)));
    for (int64_t d : t.shape) m->add_shape(d);
  }
  for (const TensorInfo& t : sig.outputs) {
    auto* m = response->add_outputs();
    m->set_name(t.name);
    m->set_datatype(std::string(KServeDatatypeName(t.dtype)));
    for (int64_t d : t.shape) m->add_shape(d);
  }
  return Done(ctx, absl::OkStatus());
}

// ---- Inference ----

absl::Status InferenceService::Infer(const inference::ModelInferRequest& request,
                                     inference::ModelInferResponse* response, absl::Time deadline) {
  const absl::Time start = absl::Now();
  std::string model, version;  // metric labels: empty unless the version was found
  absl::Status status = InferOnVersion(request, response, deadline, &model, &version);
  RecordOutcome(model, version, status, absl::Now() - start);
  return status;
}

void InferenceService::RecordOutcome(absl::string_view model, absl::string_view version,
                                     const absl::Status& status, absl::Duration duration) {
  if (info_.metrics != nullptr) {
    info_.metrics->RecordRequest(model, version, status.code(), duration);
  }
  if (!status.ok()) rejected_log_.Note(FailureReason(status.code()), model, status);
}

absl::Status InferenceService::InferOnVersion(const inference::ModelInferRequest& request,
                                              inference::ModelInferResponse* response,
                                              absl::Time deadline, std::string* model_label,
                                              std::string* version_label) {
  if (request.model_name().empty()) {
    return absl::InvalidArgumentError("model_name is empty");
  }
  ASSIGN_OR_RETURN(VersionLease lease,
                   repository_->Acquire(request.model_name(), request.model_version()));
  *model_label = lease->model_name();
  *version_label = std::to_string(lease->version());
  Metrics* const metrics = info_.metrics;
  const std::string label = Label(*lease);
  VersionStats& stats = lease->stats();
  const absl::Time start = absl::Now();
  uint64_t batch = 1;
  absl::Status status = [&]() -> absl::Status {
    if (start > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(label, ": request deadline passed before inference started"));
    }
    const ModelSignature& signature = lease->model().signature();
    const int max_batch = lease->settings().max_batch_size;
    ASSIGN_OR_RETURN(DecodedRequest decoded,
                     DecodeInferRequest(request, signature, max_batch, label));
    if (max_batch > 0 && !decoded.inputs.empty() && !decoded.inputs[0].shape.empty()) {
      batch = static_cast<uint64_t>(decoded.inputs[0].shape[0]);
    }
    const absl::Time decoded_at = absl::Now();
    InferTimings timings;
    absl::StatusOr<std::vector<OutputTensor>> outputs =
        lease->model().Infer(decoded.inputs, decoded.outputs, &timings);
    stats.queue_count.fetch_add(1, std::memory_order_relaxed);
    stats.queue_ns.fetch_add(static_cast<uint64_t>(timings.queue_ns), std::memory_order_relaxed);
    stats.compute_count.fetch_add(1, std::memory_order_relaxed);
    stats.compute_ns.fetch_add(static_cast<uint64_t>(timings.compute_ns),
                               std::memory_order_relaxed);
    if (metrics != nullptr) {
      metrics->RecordQueue(*model_label, *version_label, absl::Nanoseconds(timings.queue_ns));
    }
    if (!outputs.ok()) {
      return absl::Status(outputs.status().code(),
                          absl::StrCat(label, ": inference failed: ", outputs.status().message()));
    }
    // One request is one execution until the dynamic batcher records its batches itself.
    if (metrics != nullptr) {
      metrics->RecordExecution(*model_label, *version_label, static_cast<int64_t>(batch));
    }
    const absl::Time encode_start = absl::Now();
    absl::Status encoded = EncodeInferResponse(request, decoded, std::to_string(lease->version()),
                                               *std::move(outputs), label, response);
    if (metrics != nullptr && encoded.ok()) {
      ComputeTimes times;
      times.input = decoded_at - start;
      times.infer = absl::Nanoseconds(timings.compute_ns);
      times.output = absl::Now() - encode_start;
      metrics->RecordCompute(*model_label, *version_label, times);
    }
    return encoded;
  }();
  const absl::Time end = absl::Now();
  if (status.ok()) {
    stats.success_count.fetch_add(1, std::memory_order_relaxed);
    stats.success_ns.fetch_add(Nanos(end - start), std::memory_order_relaxed);
    stats.inference_count.fetch_add(batch, std::memory_order_relaxed);
    stats.execution_count.fetch_add(1, std::memory_order_relaxed);
    stats.last_inference_ms.store(static_cast<uint64_t>(absl::ToUnixMillis(end)),
                                  std::memory_order_relaxed);
  } else {
    stats.fail_count.fetch_add(1, std::memory_order_relaxed);
    stats.fail_ns.fetch_add(Nanos(end - start), std::memory_order_relaxed);
  }
  return status;
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  if (absl::Status admitted = gate_->Enter(); !admitted.ok()) {
    RecordOutcome("", "", admitted, absl::ZeroDuration());
    return Done(ctx, admitted);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const absl::Time deadline = DeadlineOf(ctx);
  infer_executor_->Schedule([this, reactor, request, response, deadline] {
    absl::Status status = Infer(*request, response, deadline);
    reactor->Finish(ToGrpcStatus(status));
    gate_->Exit();  // after Finish: shutdown waits for this
  });
  return reactor;
}

// One request at a time per stream: read, infer on the executor, write, read again. Errors of
// one request go back in error_message and the stream continues (Triton's default).
class InferenceService::StreamReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  StreamReactor(InferenceService* service, grpc::CallbackServerContext* ctx)
      : service_(service), ctx_(ctx) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // the client closed its side
      return;
    }
    response_.Clear();
    if (absl::Status admitted = service_->gate_->Enter(); !admitted.ok()) {
      service_->RecordOutcome("", "", admitted, absl::ZeroDuration());
      response_.set_error_message(std::string(admitted.message()));
      StartWrite(&response_);
      return;
    }
    const absl::Time deadline = service_->DeadlineOf(ctx_);
    service_->infer_executor_->Schedule([this, deadline] {
      InferenceService* const service = service_;  // `this` may be gone once written
      absl::Status status = service->Infer(request_, response_.mutable_infer_response(), deadline);
      if (!status.ok()) {
        response_.clear_infer_response();
        response_.set_error_message(std::string(status.message()));
      }
      StartWrite(&response_);
      service->gate_->Exit();
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed while writing"));
      return;
    }
    if (service_->gate_->closed()) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  InferenceService* const service_;
  grpc::CallbackServerContext* const ctx_;
  inference::ModelInferRequest request_;
  inference::ModelStreamInferResponse response_;
};

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  return new StreamReactor(this, ctx);
}

// ---- Configuration and statistics ----

grpc::ServerUnaryReactor* InferenceService::ModelConfig(
    grpc::CallbackServerContext* ctx, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  absl::StatusOr<VersionLease> lease = repository_->Acquire(request->name(), request->version());
  if (!lease.ok()) return Done(ctx, lease.status());
  *response->mutable_config() =
      ToModelConfigProto((*lease)->settings(), (*lease)->model().signature());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    grpc::CallbackServerContext* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  std::shared_ptr<const ServingMap> map = repository_->Snapshot();
  if (!request->name().empty() && !map->contains(request->name())) {
    return Done(ctx,
                absl::NotFoundError(absl::StrCat("model \"", request->name(), "\" is not loaded")));
  }
  std::vector<std::string> names;
  for (const auto& [name, unused] : *map) {
    if (request->name().empty() || name == request->name()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  bool found_version = request->version().empty();
  for (const std::string& name : names) {
    for (const auto& [number, version] : map->at(name).versions) {
      const std::string v = std::to_string(number);
      if (!request->version().empty() && v != request->version()) continue;
      found_version = true;
      VersionStats& s = version->stats();
      auto* out = response->add_model_stats();
      out->set_name(name);
      out->set_version(v);
      out->set_last_inference(s.last_inference_ms.load());
      out->set_inference_count(s.inference_count.load());
      out->set_execution_count(s.execution_count.load());
      auto* infer = out->mutable_inference_stats();
      Add(infer->mutable_success(), s.success_count.load(), s.success_ns.load());
      Add(infer->mutable_fail(), s.fail_count.load(), s.fail_ns.load());
      Add(infer->mutable_queue(), s.queue_count.load(), s.queue_ns.load());
      Add(infer->mutable_compute_infer(), s.compute_count.load(), s.compute_ns.load());
    }
  }
  if (!found_version) {
    return Done(ctx, absl::NotFoundError(absl::StrCat("model \"", request->name(), "\" version ",
                                                      request->version(), " is not loaded")));
  }
  return Done(ctx, absl::OkStatus());
}

// ---- Repository ----

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(
    grpc::CallbackServerContext* ctx, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  for (const IndexEntry& e : repository_->Index(request->ready())) {
    auto* m = response->add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (gate_->closed()) return Done(ctx, absl::UnavailableError("server is shutting down"));
  if (request->model_name().empty()) {
    return Done(ctx, absl::InvalidArgumentError("model_name is empty"));
  }
  if (!request->parameters().empty()) {
    return Done(ctx, absl::InvalidArgumentError(absl::StrCat(
                         "cannot load model \"", request->model_name(), "\": parameter \"",
                         request->parameters().begin()->first,
                         "\" is not supported (load parameters such as config and file: are "
                         "not supported)")));
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  repository_->LoadModel(request->model_name(),
                         [reactor](absl::Status status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (gate_->closed()) return Done(ctx, absl::UnavailableError("server is shutting down"));
  if (request->model_name().empty()) {
    return Done(ctx, absl::InvalidArgumentError("model_name is empty"));
  }
  for (const auto& [key, value] : request->parameters()) {
    if (key != "unload_dependents") {
      return Done(ctx, absl::InvalidArgumentError(
                           absl::StrCat("cannot unload model \"", request->model_name(),
                                        "\": parameter \"", key, "\" is not supported")));
    }
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  repository_->UnloadModel(request->model_name(), [reactor](absl::Status status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

// ---- Not supported ----

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest*,
    inference::SystemSharedMemoryStatusResponse*) {
  return Unimplemented(ctx, "system shared memory");
}
grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest*,
    inference::SystemSharedMemoryRegisterResponse*) {
  return Unimplemented(ctx, "system shared memory");
}
grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest*,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return Unimplemented(ctx, "system shared memory");
}
grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest*,
    inference::CudaSharedMemoryStatusResponse*) {
  return Unimplemented(ctx, "CUDA shared memory");
}
grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest*,
    inference::CudaSharedMemoryRegisterResponse*) {
  return Unimplemented(ctx, "CUDA shared memory");
}
grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return Unimplemented(ctx, "CUDA shared memory");
}
grpc::ServerUnaryReactor* InferenceService::TraceSetting(grpc::CallbackServerContext* ctx,
                                                         const inference::TraceSettingRequest*,
                                                         inference::TraceSettingResponse*) {
  return Unimplemented(ctx, "tracing");
}
grpc::ServerUnaryReactor* InferenceService::LogSettings(grpc::CallbackServerContext* ctx,
                                                        const inference::LogSettingsRequest*,
                                                        inference::LogSettingsResponse*) {
  return Unimplemented(ctx, "changing log settings at run time");
}

}  // namespace reprise::server
