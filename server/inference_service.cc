#include "server/inference_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "server/client_text.h"
#include "server/infer_codec.h"
#include "server/metrics.h"
#include "server/model_config_override.h"
#include "server/model_config_proto.h"

namespace reprise::server {
namespace {

uint64_t Nanos(absl::Duration d) { return static_cast<uint64_t>(absl::ToInt64Nanoseconds(d)); }

void Add(inference::StatisticDuration* d, uint64_t count, uint64_t ns) {
  d->set_count(count);
  d->set_ns(ns);
}

// The one record of an Infer's timings, for both the statistics RPC and the metrics: its queue
// and compute phases when it ran, and the execution (batch size, inferences) once per batch
// when it succeeded (Triton's execution_count and batch_stats count successful executions).
void RecordInferTimings(const InferTimings& t, bool ok, int64_t request_rows, VersionStats* stats,
                        Metrics* metrics, absl::string_view model, absl::string_view version) {
  const bool ran = ok || t.batch_size > 0;
  if (!ran) return;  // refused or timed out in the queue: no execution to count
  auto add = [](std::atomic<uint64_t>& counter, int64_t v) {
    counter.fetch_add(static_cast<uint64_t>(v), std::memory_order_relaxed);
  };
  add(stats->queue_count, 1);
  add(stats->queue_ns, t.queue_ns);
  add(stats->compute_input_count, 1);
  add(stats->compute_input_ns, t.compute_input_ns);
  add(stats->compute_count, 1);
  add(stats->compute_ns, t.compute_ns);
  add(stats->compute_output_count, 1);
  add(stats->compute_output_ns, t.compute_output_ns);
  const bool execution = t.counts_execution && ok;
  if (execution) {
    add(stats->execution_count, 1);
    if (t.batch_size > 0) {
      stats->AddBatch(
          static_cast<uint64_t>(t.batch_size), static_cast<uint64_t>(t.compute_input_ns),
          static_cast<uint64_t>(t.compute_ns), static_cast<uint64_t>(t.compute_output_ns));
    }
  }
  if (metrics == nullptr) return;
  metrics->RecordQueue(model, version, absl::Nanoseconds(t.queue_ns));
  ComputeTimes times;
  times.input = absl::Nanoseconds(t.compute_input_ns);
  times.infer = absl::Nanoseconds(t.compute_ns);
  times.output = absl::Nanoseconds(t.compute_output_ns);
  metrics->RecordCompute(model, version, times);
  if (execution)
    metrics->RecordExecution(model, version, t.batch_size > 0 ? t.batch_size : request_rows);
}

std::string Label(const ServedVersion& v) {
  return absl::StrCat("model \"", v.model_name(), "\" version ", v.version());
}

constexpr absl::string_view kCudaSharedMemory =
    "CUDA shared memory (reprise serves no GPU yet; use system shared memory)";

// The outputs asked for with classification get their labels (label_filename) from the
// model's settings, which the request's lease keeps alive.
void AttachLabels(const config::ModelSettings& settings, DecodedRequest* decoded) {
  for (size_t i = 0; i < decoded->output_options.size(); ++i) {
    if (decoded->output_options[i].classification <= 0) continue;
    for (const config::TensorSettings& out : settings.outputs) {
      if (out.name == decoded->outputs[i] && !out.labels.empty()) {
        decoded->output_options[i].labels = &out.labels;
      }
    }
  }
}

// A load's parameters as a LoadOverride: the `config` JSON parsed into a ModelConfig (checked
// like a config file when the load resolves it), the `file:` contents borrowed from `request`.
absl::StatusOr<LoadOverride> ReadLoadOverride(
    const inference::RepositoryModelLoadRequest& request) {
  ASSIGN_OR_RETURN(LoadParameters params, ReadLoadParameters(request.parameters()));
  LoadOverride override;
  if (params.config_json.has_value()) {
    ASSIGN_OR_RETURN(override.config, ParseConfigOverride(*params.config_json));
  }
  override.files = std::move(params.files);
  return override;
}

// Load errors as Triton words them, which its clients and tests match: "failed to load 'm'",
// and "failed to poll from model repository" for a model that cannot be found.
absl::Status LoadFailed(const std::string& name, const absl::Status& status) {
  if (status.ok()) return status;
  std::string message(status.message());
  if (status.code() == absl::StatusCode::kNotFound &&
      !absl::StartsWith(message, "failed to poll")) {
    message = absl::StrCat("failed to poll from model repository: ", message);
  }
  // Triton's single quotes; the client's name cut like every name a client chose.
  return absl::Status(status.code(),
                      absl::StrCat("failed to load ", QuotedName(name, '\''), ", ", message));
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
  for (const char* ext :
       {"classification", "model_repository", "model_configuration", "statistics"}) {
    response->add_extensions(ext);
  }
  if (info_.shared_memory != nullptr) response->add_extensions("system_shared_memory");
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

// One inference between InferAsync and its `done`: holds the version and the decoded request
// (whose inputs the model borrows) until the response is filled.
struct InferenceService::Call {
  VersionLease lease;
  std::string label;
  std::string model_label;  // metric labels of the version
  std::string version_label;
  absl::Time start;
  uint64_t batch = 1;
  DecodedRequest decoded;
  const inference::ModelInferRequest* request = nullptr;
  inference::ModelInferResponse* response = nullptr;
  absl::AnyInvocable<void(absl::Status) &&> done;
};

void InferenceService::RecordOutcome(absl::string_view model, absl::string_view version,
                                     const absl::Status& status, absl::Duration duration) {
  if (info_.metrics != nullptr) {
    info_.metrics->RecordRequest(model, version, status.code(), duration);
  }
  if (!status.ok()) rejected_log_.Note(FailureReason(status.code()), model, status);
}

void InferenceService::Complete(std::unique_ptr<Call> call, absl::Status status) {
  VersionStats& stats = call->lease->stats();
  const absl::Time end = absl::Now();
  RecordOutcome(call->model_label, call->version_label, status, end - call->start);
  if (status.ok()) {
    stats.success_count.fetch_add(1, std::memory_order_relaxed);
    stats.success_ns.fetch_add(Nanos(end - call->start), std::memory_order_relaxed);
    stats.inference_count.fetch_add(call->batch, std::memory_order_relaxed);
    stats.last_inference_ms.store(static_cast<uint64_t>(absl::ToUnixMillis(end)),
                                  std::memory_order_relaxed);
  } else {
    stats.fail_count.fetch_add(1, std::memory_order_relaxed);
    stats.fail_ns.fetch_add(Nanos(end - call->start), std::memory_order_relaxed);
  }
  absl::AnyInvocable<void(absl::Status)&&> done = std::move(call->done);
  call.reset();  // releases the version before the RPC finishes
  std::move(done)(std::move(status));
}

void InferenceService::InferAsync(const inference::ModelInferRequest& request,
                                  inference::ModelInferResponse* response, absl::Time deadline,
                                  absl::AnyInvocable<void(absl::Status) &&> done) {
  const absl::Time start = absl::Now();
  if (request.model_name().empty()) {
    absl::Status status = absl::InvalidArgumentError("model_name is empty");
    RecordOutcome("", "", status, absl::Now() - start);
    std::move(done)(std::move(status));
    return;
  }
  absl::StatusOr<VersionLease> lease =
      repository_->Acquire(request.model_name(), request.model_version());
  if (!lease.ok()) {
    RecordOutcome("", "", lease.status(), absl::Now() - start);
    std::move(done)(lease.status());
    return;
  }
  auto call = std::make_unique<Call>();
  call->lease = *std::move(lease);
  call->label = Label(*call->lease);
  call->model_label = call->lease->model_name();
  call->version_label = std::to_string(call->lease->version());
  call->start = start;
  call->request = &request;
  call->response = response;
  call->done = std::move(done);
  if (call->start > deadline) {
    const std::string label = call->label;
    return Complete(std::move(call),
                    absl::DeadlineExceededError(
                        absl::StrCat(label, ": request deadline passed before inference started")));
  }
  const ModelSignature& signature = call->lease->model().signature();
  const int max_batch = call->lease->settings().max_batch_size;
  absl::StatusOr<DecodedRequest> decoded = DecodeInferRequest(
      request, signature, max_batch, call->label, info_.limits, info_.shared_memory);
  if (!decoded.ok()) return Complete(std::move(call), decoded.status());
  call->decoded = *std::move(decoded);
  AttachLabels(call->lease->settings(), &call->decoded);
  if (max_batch > 0 && !call->decoded.inputs.empty() && !call->decoded.inputs[0].shape.empty()) {
    call->batch = static_cast<uint64_t>(call->decoded.inputs[0].shape[0]);
  }
  InferOptions options = call->decoded.options;
  options.deadline = deadline;
  Call* raw = call.get();  // `call` moves into the callback, which outlives the borrow
  LoadedModel& model = raw->lease->model();
  auto start_model = [this, raw, options, call = std::move(call)]() mutable {
    raw->lease->model().InferAsync(
        raw->decoded.inputs, raw->decoded.outputs, options,
        [this, call = std::move(call)](absl::StatusOr<std::vector<OutputTensor>> outputs,
                                       const InferTimings& timings) mutable {
          RecordInferTimings(timings, outputs.ok(), static_cast<int64_t>(call->batch),
                             &call->lease->stats(), info_.metrics, call->model_label,
                             call->version_label);
          absl::Status status;
          if (!outputs.ok()) {
            status = absl::Status(
                outputs.status().code(),
                absl::StrCat(call->label, ": inference failed: ", outputs.status().message()));
          } else {
            status = EncodeInferResponse(*call->request, call->decoded,
                                         std::to_string(call->lease->version()),
                                         *std::move(outputs), call->label, call->response);
          }
          Complete(std::move(call), std::move(status));
        });
  };
  // A model whose InferAsync never holds the caller long (the engine's) is called on this
  // thread, the RPC's own: no hand-off. Others may block for their whole run, which must not
  // happen on a gRPC callback thread: they are called from the inference pool.
  if (model.InfersWithoutBlocking()) {
    start_model();
  } else {
    infer_executor_->Schedule(std::move(start_model));
  }
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
  // Decoded here; InferAsync hands the run to the inference pool only for a model that might
  // block this thread.
  InferAsync(*request, response, deadline, [this, reactor](absl::Status status) {
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
    service_->InferAsync(request_, response_.mutable_infer_response(), deadline,
                         [this](absl::Status status) {
                           // `this` may go once written
                           InferenceService* const service = service_;
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
      Add(infer->mutable_compute_input(), s.compute_input_count.load(), s.compute_input_ns.load());
      Add(infer->mutable_compute_infer(), s.compute_count.load(), s.compute_ns.load());
      Add(infer->mutable_compute_output(), s.compute_output_count.load(),
          s.compute_output_ns.load());
      for (const auto& [size, b] : s.BatchStats()) {
        auto* bs = out->add_batch_stats();
        bs->set_batch_size(size);
        Add(bs->mutable_compute_input(), b.count, b.compute_input_ns);
        Add(bs->mutable_compute_infer(), b.count, b.compute_infer_ns);
        Add(bs->mutable_compute_output(), b.count, b.compute_output_ns);
      }
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
  const std::string name = request->model_name();
  absl::StatusOr<LoadOverride> override = ReadLoadOverride(*request);
  if (!override.ok()) return Done(ctx, LoadFailed(name, override.status()));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The override's files borrow from `request`, which lives until Finish.
  repository_->LoadModel(name, *std::move(override), [reactor, name](absl::Status status) {
    reactor->Finish(ToGrpcStatus(LoadFailed(name, status)));
  });
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

// ---- System shared memory ----

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  if (info_.shared_memory == nullptr) return Unimplemented(ctx, "system shared memory");
  absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> regions =
      info_.shared_memory->List(request->name());
  if (!regions.ok()) return Done(ctx, regions.status());
  for (const auto& region : *regions) {
    auto& status = (*response->mutable_regions())[region->name()];
    status.set_name(region->name());
    status.set_key(region->key());
    status.set_offset(region->offset());
    status.set_byte_size(region->byte_size());
  }
  return Done(ctx, absl::OkStatus());
}
grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  if (info_.shared_memory == nullptr) return Unimplemented(ctx, "system shared memory");
  return Done(ctx, info_.shared_memory->Register(request->name(), request->key(), request->offset(),
                                                 request->byte_size()));
}
grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  if (info_.shared_memory == nullptr) return Unimplemented(ctx, "system shared memory");
  return Done(ctx, info_.shared_memory->Unregister(request->name()));
}

// ---- Not supported ----

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest*,
    inference::CudaSharedMemoryStatusResponse*) {
  return Unimplemented(ctx, kCudaSharedMemory);
}
grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest*,
    inference::CudaSharedMemoryRegisterResponse*) {
  return Unimplemented(ctx, kCudaSharedMemory);
}
grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return Unimplemented(ctx, kCudaSharedMemory);
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
