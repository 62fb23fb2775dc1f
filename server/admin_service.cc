#include "server/admin_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/inference_service.h"

namespace reprise::server {

std::string RedactAddresses(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  size_t i = 0;
  while (i < json.size()) {
    if (json.substr(i, 3) == "\"0x") {
      size_t j = i + 3;
      while (j < json.size() && absl::ascii_isxdigit(static_cast<unsigned char>(json[j]))) ++j;
      if (j > i + 3 && j < json.size() && json[j] == '"') {
        out += "\"redacted\"";
        i = j + 1;
        continue;
      }
    }
    out.push_back(json[i++]);
  }
  return out;
}

std::string RedactKeyValues(absl::string_view signature) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(signature, ';')) {
    if (!out.empty()) out.push_back(';');
    const size_t eq = part.find("=(");
    if (eq == absl::string_view::npos) {
      absl::StrAppend(&out, part);
    } else {
      absl::StrAppend(&out, part.substr(0, eq), "=(redacted)");
    }
  }
  return out;
}

grpc::ServerUnaryReactor* AdminService::ListInstances(
    grpc::CallbackServerContext* ctx, const reprise::v1::ListInstancesRequest* request,
    reprise::v1::ListInstancesResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (grpc::Status s = access_->Check(*ctx, ProtocolGroup::kAdmin); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  std::shared_ptr<const ServingMap> map = repository_->Snapshot();
  if (!request->model().empty() && !map->contains(request->model())) {
    reactor->Finish(ToGrpcStatus(
        absl::NotFoundError(absl::StrCat("model \"", request->model(), "\" is not loaded"))));
    return reactor;
  }
  std::vector<std::string> names;
  for (const auto& [name, unused] : *map) {
    if (request->model().empty() || name == request->model()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    for (const auto& [number, version] : map->at(name).versions) {
      const std::string v = std::to_string(number);
      if (!request->version().empty() && v != request->version()) continue;
      if (!version->TryAcquire()) continue;  // being unloaded
      VersionLease lease(version);
      const CaptureStats c = lease->model().capture_stats();
      auto* totals = response->add_versions();
      totals->set_model(name);
      totals->set_version(v);
      totals->set_captures(c.captures);
      totals->set_replays(c.replays);
      totals->set_eager_runs(c.eager_runs);
      totals->set_evictions(c.evictions);
      totals->set_capture_failures(c.capture_failures);
      totals->set_budget_refusals(c.budget_refusals);
      totals->set_value_plans(c.value_plans);
      totals->set_live_instances(c.live_instances);
      totals->set_live_bytes(c.live_bytes);
      totals->set_warmup_instances(c.warmup_instances);
      totals->set_warmup_ns(static_cast<uint64_t>(c.warmup_ns));
      totals->set_load_ns(static_cast<uint64_t>(c.load_ns));
      for (const RuntimeInstanceInfo& ri : lease->model().ListRuntimeInstances()) {
        auto* out = response->add_instances();
        out->set_model(name);
        out->set_version(v);
        out->set_stream(ri.stream);
        out->set_shape_signature(options_.allow_value_dump ? ri.shape_signature
                                                           : RedactKeyValues(ri.shape_signature));
        out->set_bucket(ri.bucket);
        out->set_state(ri.state);
        out->set_captures(ri.captures);
        out->set_replays(ri.replays);
        out->set_capture_time_ns(ri.capture_time_ns);
        out->set_arena_bytes(ri.arena_bytes);
        out->set_last_used_ms(ri.last_used_ms);
        out->set_intra_op_threads(ri.intra_op_threads);
        out->set_threads_choice(ri.threads_choice);
        out->set_part(ri.part);
      }
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::DumpInstance(
    grpc::CallbackServerContext* ctx, const reprise::v1::DumpInstanceRequest* request,
    reprise::v1::DumpInstanceResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (grpc::Status s = access_->Check(*ctx, ProtocolGroup::kAdmin); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  absl::StatusOr<VersionLease> lease = repository_->Acquire(request->model(), request->version());
  if (!lease.ok()) {
    reactor->Finish(ToGrpcStatus(lease.status()));
    return reactor;
  }
  absl::StatusOr<std::string> json = (*lease)->model().DumpRuntimeInstance(
      request->stream(), request->shape_signature(), request->verbose());
  if (!json.ok()) {
    reactor->Finish(ToGrpcStatus(absl::Status(
        json.status().code(), absl::StrCat("model \"", (*lease)->model_name(), "\" version ",
                                           (*lease)->version(), ": ", json.status().message()))));
    return reactor;
  }
  response->set_json(options_.allow_address_dump ? *std::move(json) : RedactAddresses(*json));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::ProfileModel(
    grpc::CallbackServerContext* ctx, const reprise::v1::ProfileModelRequest* request,
    reprise::v1::ProfileModelResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (grpc::Status s = access_->Check(*ctx, ProtocolGroup::kAdmin); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  const int iterations = request->iterations() == 0 ? 10 : request->iterations();
  const int top = request->top() == 0 ? 15 : request->top();
  if (iterations < 1 || iterations > kMaxProfileIterations || top < 0) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("profile: iterations ", request->iterations(), " and top ", request->top(),
                     " (want iterations 0 to ", kMaxProfileIterations, ", top >= 0)"))));
    return reactor;
  }
  absl::StatusOr<VersionLease> lease = repository_->Acquire(request->model(), request->version());
  if (!lease.ok()) {
    reactor->Finish(ToGrpcStatus(lease.status()));
    return reactor;
  }
  absl::StatusOr<ModelProfile> profile =
      (*lease)->model().Profile(iterations, top, request->eager());
  if (!profile.ok()) {
    reactor->Finish(ToGrpcStatus(
        absl::Status(profile.status().code(),
                     absl::StrCat("model \"", (*lease)->model_name(), "\" version ",
                                  (*lease)->version(), ": ", profile.status().message()))));
    return reactor;
  }
  response->set_trace_json(std::move(profile->trace_json));
  response->set_table(std::move(profile->table));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace reprise::server
