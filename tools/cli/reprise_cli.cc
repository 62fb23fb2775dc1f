// reprise: the command-line client of reprise-server (KServe v2 gRPC and the admin service).
//
//   reprise [--addr HOST:PORT] [-i grpc|http] [--json] [--ssl] [--root-certificates FILE]
//           [--private-key FILE --certificate-chain FILE] [-H NAME=VALUE] COMMAND [ARGS]
//
// Commands: health, models, load M, unload M, metadata M, infer M --input NAME=FILE.npy|random
// [--output-dir DIR], stats [M], instances M, dump M --stream S --shape SIG [--verbose],
// profile M [--iterations N] [--top N] [--eager] [--trace FILE.json].
// Human-readable output by default; --json prints one JSON document (the response message in
// protobuf's JSON mapping, or for health and infer a small object). On an RPC error it prints
// the gRPC status code and message to stderr and exits 1; a usage error exits 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "health.grpc.pb.h"
#include "reprise_admin.grpc.pb.h"
#include "runtime/base/status_macros.h"
#include "runtime/engine/npy.h"
#include "server/kserve_types.h"
#include "tools/common/client_channel.h"
#include "tools/common/http_client.h"

namespace reprise::cli {
namespace {

using google::protobuf::Message;
using runtime::TensorValue;

constexpr char kUsage[] =
    "usage: reprise [--addr HOST:PORT] [--json] [--ssl ...] [-H NAME=VALUE] COMMAND [ARGS]\n"
    "  health                          liveness, readiness and gRPC health of the server\n"
    "  healthcheck                     exit 0 only if gRPC health is SERVING (5 s deadline;\n"
    "                                  container HEALTHCHECK and probes)\n"
    "  models                          the repository index (every model and version)\n"
    "  load MODEL | unload MODEL       load or unload a model (explicit control mode)\n"
    "  metadata MODEL                  the model's inputs and outputs\n"
    "  infer MODEL --input NAME=FILE.npy|random [--input ...] [--output-dir DIR]\n"
    "                                  run one inference; outputs written as DIR/NAME.npy\n"
    "  stats [MODEL]                   per-model statistics\n"
    "  instances MODEL                 the model's runtime instances (stream, shape, replays)\n"
    "  dump MODEL --stream S --shape SIG [--verbose]   one runtime instance as JSON\n"
    "  profile MODEL [--iterations N] [--top N] [--eager] [--trace FILE.json]\n"
    "                                  profile the model on a stream of its own: a table of\n"
    "                                  the top steps; the Chrome-trace JSON into FILE\n"
    "options: --addr (default 127.0.0.1:8001; 8000 with -i http), --json (machine-readable\n"
    "  output), -i / --protocol grpc|http (KServe v2 over gRPC, the default, or HTTP/REST; over\n"
    "  HTTP, infer sends binary tensors unless --json-tensors; instances / dump / profile are\n"
    "  gRPC only)\n"
    "  TLS and headers: --ssl, --root-certificates FILE, --private-key FILE,\n"
    "  --certificate-chain FILE, -H NAME=VALUE (see --help)\n";

struct Options {
  std::string addr;    // default 127.0.0.1:8001 (gRPC) or 127.0.0.1:8000 (HTTP)
  bool http = false;   // -i / --protocol http|grpc
  bool binary = true;  // HTTP infer: tensors as binary data (--json-tensors: JSON)
  bool json = false;
  std::string command;
  std::vector<std::string> positional;
  std::vector<std::string> inputs;  // NAME=FILE.npy | NAME=random
  std::string output_dir;
  int stream = -1;
  std::string shape;
  bool verbose = false;
  int iterations = 0;  // profile: 0 lets the server choose
  int top = 0;
  bool eager = false;
  std::string trace;
  tools::ClientConnectionOptions connection;  // --ssl, certificates, -H
};

// A gRPC error, printed as "<CODE>: <message>".
absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string ToJson(const Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}\n";
  return out;
}

absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options o;
  auto value = [&](int& i, absl::string_view flag) -> absl::StatusOr<std::string> {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, absl::StrCat(flag, "="))) return arg.substr(flag.size() + 1);
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    return std::string(argv[++i]);
  };
  auto is = [](const std::string& arg, absl::string_view flag) {
    return arg == flag || absl::StartsWith(arg, absl::StrCat(flag, "="));
  };
  const std::vector<std::string> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    size_t next = static_cast<size_t>(i);
    ASSIGN_OR_RETURN(bool connection_flag, tools::ParseConnectionFlag(args, &next, &o.connection));
    if (connection_flag) {
      i = static_cast<int>(next);
    } else if (is(arg, "--addr")) {
      ASSIGN_OR_RETURN(o.addr, value(i, "--addr"));
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "-i" || is(arg, "--protocol")) {
      ASSIGN_OR_RETURN(std::string v, value(i, arg == "-i" ? "-i" : "--protocol"));
      if (v != "http" && v != "grpc") {
        return absl::InvalidArgumentError(
            absl::StrCat("--protocol \"", v, "\" is not one of http, grpc"));
      }
      o.http = v == "http";
    } else if (arg == "--json-tensors") {
      o.binary = false;
    } else if (is(arg, "--input")) {
      ASSIGN_OR_RETURN(std::string v, value(i, "--input"));
      o.inputs.push_back(v);
    } else if (is(arg, "--output-dir")) {
      ASSIGN_OR_RETURN(o.output_dir, value(i, "--output-dir"));
    } else if (is(arg, "--stream")) {
      ASSIGN_OR_RETURN(std::string v, value(i, "--stream"));
      if (!absl::SimpleAtoi(v, &o.stream) || o.stream < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--stream \"", v, "\" is not a stream"));
      }
    } else if (is(arg, "--shape")) {
      ASSIGN_OR_RETURN(o.shape, value(i, "--shape"));
    } else if (arg == "--verbose") {
      o.verbose = true;
    } else if (is(arg, "--iterations") || is(arg, "--top")) {
      const bool iterations = is(arg, "--iterations");
      ASSIGN_OR_RETURN(std::string v, value(i, iterations ? "--iterations" : "--top"));
      int* out = iterations ? &o.iterations : &o.top;
      if (!absl::SimpleAtoi(v, out) || *out < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(iterations ? "--iterations" : "--top", " \"", v, "\" is not a count"));
      }
    } else if (arg == "--eager") {
      o.eager = true;
    } else if (is(arg, "--trace")) {
      ASSIGN_OR_RETURN(o.trace, value(i, "--trace"));
    } else if (arg == "-h" || arg == "--help") {
      o.command = "help";
    } else if (absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    } else if (o.command.empty()) {
      o.command = arg;
    } else {
      o.positional.push_back(arg);
    }
  }
  if (o.command.empty()) return absl::InvalidArgumentError("no command");
  if (o.addr.empty()) o.addr = o.http ? "127.0.0.1:8000" : "127.0.0.1:8001";
  return o;
}

class Client {
 public:
  Client(const Options& options, std::shared_ptr<grpc::Channel> channel,
         std::unique_ptr<tools::HttpClient> http)
      : options_(options),
        channel_(std::move(channel)),
        stub_(inference::GRPCInferenceService::NewStub(channel_)),
        admin_(reprise::v1::RuntimeInstances::NewStub(channel_)),
        http_(std::move(http)) {}

  absl::Status Health() {
    inference::ServerLiveResponse live;
    inference::ServerReadyResponse ready;
    grpc::health::v1::HealthCheckResponse health;
    if (http_ != nullptr) {  // HTTP has no health service: SERVING is ready
      ASSIGN_OR_RETURN(bool is_live, http_->Live());
      ASSIGN_OR_RETURN(bool is_ready, http_->Ready());
      live.set_live(is_live);
      ready.set_ready(is_ready);
      health.set_status(is_ready ? grpc::health::v1::HealthCheckResponse::SERVING
                                 : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    } else {
      {
        grpc::ClientContext ctx;
        RETURN_IF_ERROR(FromGrpc(stub_->ServerLive(&ctx, {}, &live)));
      }
      {
        grpc::ClientContext ctx;
        RETURN_IF_ERROR(FromGrpc(stub_->ServerReady(&ctx, {}, &ready)));
      }
      {
        grpc::ClientContext ctx;
        RETURN_IF_ERROR(FromGrpc(grpc::health::v1::Health::NewStub(channel_)->Check(
            &ctx, grpc::health::v1::HealthCheckRequest(), &health)));
      }
    }
    const std::string serving =
        grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health.status());
    if (options_.json) {
      google::protobuf::Struct s;
      (*s.mutable_fields())["live"].set_bool_value(live.live());
      (*s.mutable_fields())["ready"].set_bool_value(ready.ready());
      (*s.mutable_fields())["health"].set_string_value(serving);
      std::cout << ToJson(s);
    } else {
      std::cout << "live: " << (live.live() ? "yes" : "no")
                << "\nready: " << (ready.ready() ? "yes" : "no") << "\nhealth: " << serving << "\n";
    }
    return absl::OkStatus();
  }

  // healthcheck: the gRPC health service's answer for the whole server ("" service), with a
  // deadline so that a hung server fails the check instead of hanging it.
  absl::Status HealthCheck() {
    grpc::health::v1::HealthCheckResponse health;
    if (http_ != nullptr) {
      ASSIGN_OR_RETURN(bool is_ready, http_->Ready());
      health.set_status(is_ready ? grpc::health::v1::HealthCheckResponse::SERVING
                                 : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    } else {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      RETURN_IF_ERROR(FromGrpc(grpc::health::v1::Health::NewStub(channel_)->Check(
          &ctx, grpc::health::v1::HealthCheckRequest(), &health)));
    }
    const std::string serving =
        grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health.status());
    std::cout << serving << "\n";
    if (health.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat("server health is ", serving));
    }
    return absl::OkStatus();
  }

  absl::Status Models() {
    inference::RepositoryIndexResponse r;
    if (http_ != nullptr) {
      ASSIGN_OR_RETURN(r, http_->RepositoryIndex());
    } else {
      grpc::ClientContext ctx;
      RETURN_IF_ERROR(FromGrpc(stub_->RepositoryIndex(&ctx, {}, &r)));
    }
    if (options_.json) {
      std::cout << ToJson(r);
      return absl::OkStatus();
    }
    std::printf("%-24s %-8s %-12s %s\n", "MODEL", "VERSION", "STATE", "REASON");
    for (const auto& m : r.models()) {
      std::printf("%-24s %-8s %-12s %s\n", m.name().c_str(),
                  m.version().empty() ? "-" : m.version().c_str(),
                  m.state().empty() ? "-" : m.state().c_str(), m.reason().c_str());
    }
    return absl::OkStatus();
  }

  absl::Status LoadOrUnload(bool load, const std::string& model) {
    grpc::ClientContext ctx;
    grpc::Status status;
    if (http_ != nullptr) {
      RETURN_IF_ERROR(http_->LoadOrUnload(load, model));
    } else if (load) {
      inference::RepositoryModelLoadRequest request;
      request.set_model_name(model);
      inference::RepositoryModelLoadResponse response;
      status = stub_->RepositoryModelLoad(&ctx, request, &response);
    } else {
      inference::RepositoryModelUnloadRequest request;
      request.set_model_name(model);
      inference::RepositoryModelUnloadResponse response;
      status = stub_->RepositoryModelUnload(&ctx, request, &response);
    }
    RETURN_IF_ERROR(FromGrpc(status));
    const char* done = load ? "loaded" : "unloaded";
    if (options_.json) {
      google::protobuf::Struct s;
      (*s.mutable_fields())["model"].set_string_value(model);
      (*s.mutable_fields())[done].set_bool_value(true);
      std::cout << ToJson(s);
    } else {
      std::cout << "model \"" << model << "\" " << done << "\n";
    }
    return absl::OkStatus();
  }

  absl::StatusOr<inference::ModelMetadataResponse> Metadata(const std::string& model) {
    inference::ModelMetadataRequest request;
    request.set_name(model);
    if (http_ != nullptr) return http_->ModelMetadata(model);
    inference::ModelMetadataResponse r;
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(FromGrpc(stub_->ModelMetadata(&ctx, request, &r)));
    return r;
  }

  absl::Status PrintMetadata(const std::string& model) {
    ASSIGN_OR_RETURN(inference::ModelMetadataResponse r, Metadata(model));
    if (options_.json) {
      std::cout << ToJson(r);
      return absl::OkStatus();
    }
    std::cout << "model " << r.name() << " (" << r.platform() << "), versions "
              << absl::StrJoin(r.versions(), ",") << "\n";
    for (const auto* list : {&r.inputs(), &r.outputs()}) {
      const char* kind = list == &r.inputs() ? "input " : "output";
      for (const auto& t : *list) {
        std::cout << "  " << kind << " " << t.name() << " " << t.datatype() << " ["
                  << absl::StrJoin(t.shape(), ",") << "]\n";
      }
    }
    return absl::OkStatus();
  }

  absl::Status Infer(const std::string& model);

  absl::Status Stats(const std::string& model) {
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    inference::ModelStatisticsResponse r;
    if (http_ != nullptr) {
      ASSIGN_OR_RETURN(r, http_->ModelStatistics(model));
    } else {
      grpc::ClientContext ctx;
      RETURN_IF_ERROR(FromGrpc(stub_->ModelStatistics(&ctx, request, &r)));
    }
    if (options_.json) {
      std::cout << ToJson(r);
      return absl::OkStatus();
    }
    auto avg_us = [](const inference::StatisticDuration& d) {
      return d.count() == 0 ? 0.0 : static_cast<double>(d.ns()) / 1e3 / d.count();
    };
    std::printf("%-20s %-7s %10s %10s %8s %12s %12s %12s\n", "MODEL", "VERSION", "INFERENCES",
                "EXECUTIONS", "FAILED", "SUCCESS_US", "QUEUE_US", "COMPUTE_US");
    for (const auto& m : r.model_stats()) {
      const auto& s = m.inference_stats();
      std::printf("%-20s %-7s %10llu %10llu %8llu %12.1f %12.1f %12.1f\n", m.name().c_str(),
                  m.version().c_str(), static_cast<unsigned long long>(m.inference_count()),
                  static_cast<unsigned long long>(m.execution_count()),
                  static_cast<unsigned long long>(s.fail().count()), avg_us(s.success()),
                  avg_us(s.queue()), avg_us(s.compute_infer()));
    }
    return absl::OkStatus();
  }

  absl::Status Instances(const std::string& model) {
    reprise::v1::ListInstancesRequest request;
    request.set_model(model);
    reprise::v1::ListInstancesResponse r;
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(FromGrpc(admin_->ListInstances(&ctx, request, &r)));
    if (options_.json) {
      std::cout << ToJson(r);
      return absl::OkStatus();
    }
    std::printf("%-16s %-7s %6s %6s %-9s %8s %8s %12s %12s %7s  %s\n", "MODEL", "VERSION", "STREAM",
                "BUCKET", "STATE", "CAPTURES", "REPLAYS", "CAPTURE_US", "ARENA_BYTES", "THREADS",
                "SHAPE");
    for (const auto& i : r.instances()) {
      std::printf("%-16s %-7s %6d %6lld %-9s %8llu %8llu %12.1f %12llu %7d  %s\n",
                  i.model().c_str(), i.version().c_str(), i.stream(),
                  static_cast<long long>(i.bucket()), i.state().c_str(),
                  static_cast<unsigned long long>(i.captures()),
                  static_cast<unsigned long long>(i.replays()),
                  static_cast<double>(i.capture_time_ns()) / 1e3,
                  static_cast<unsigned long long>(i.arena_bytes()), i.intra_op_threads(),
                  i.shape_signature().c_str());
      if (!i.threads_choice().empty()) {
        std::printf("%16s threads chosen: %s\n", "", i.threads_choice().c_str());
      }
      if (!i.part().empty()) {
        std::printf("%16s part: %s\n", "", i.part().c_str());
      }
    }
    for (const auto& v : r.versions()) {
      std::printf(
          "%s v%s: %llu captures, %llu replays, %llu eager runs, %llu evictions, %llu capture "
          "failures, %llu live instances (%llu bytes); load %.1f ms (warm-up %llu instances, "
          "%.1f ms)\n",
          v.model().c_str(), v.version().c_str(), static_cast<unsigned long long>(v.captures()),
          static_cast<unsigned long long>(v.replays()),
          static_cast<unsigned long long>(v.eager_runs()),
          static_cast<unsigned long long>(v.evictions()),
          static_cast<unsigned long long>(v.capture_failures()),
          static_cast<unsigned long long>(v.live_instances()),
          static_cast<unsigned long long>(v.live_bytes()), static_cast<double>(v.load_ns()) / 1e6,
          static_cast<unsigned long long>(v.warmup_instances()),
          static_cast<double>(v.warmup_ns()) / 1e6);
    }
    return absl::OkStatus();
  }

  absl::Status Dump(const std::string& model) {
    if (options_.stream < 0 || options_.shape.empty()) {
      return absl::InvalidArgumentError("dump needs --stream S and --shape SIG");
    }
    reprise::v1::DumpInstanceRequest request;
    request.set_model(model);
    request.set_stream(options_.stream);
    request.set_shape_signature(options_.shape);
    request.set_verbose(options_.verbose);
    reprise::v1::DumpInstanceResponse r;
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(FromGrpc(admin_->DumpInstance(&ctx, request, &r)));
    // The dump is JSON already, in both modes.
    std::cout << r.json() << (absl::EndsWith(r.json(), "\n") ? "" : "\n");
    return absl::OkStatus();
  }

  absl::Status Profile(const std::string& model) {
    reprise::v1::ProfileModelRequest request;
    request.set_model(model);
    request.set_iterations(options_.iterations);
    request.set_top(options_.top);
    request.set_eager(options_.eager);
    reprise::v1::ProfileModelResponse r;
    grpc::ClientContext ctx;
    RETURN_IF_ERROR(FromGrpc(admin_->ProfileModel(&ctx, request, &r)));
    if (!options_.trace.empty()) {
      std::ofstream file(options_.trace);
      file << r.trace_json();
      file.close();
      if (!file) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot write --trace \"", options_.trace, "\""));
      }
    }
    if (options_.json) {
      std::cout << ToJson(r);
    } else {
      std::cout << r.table();
      if (!options_.trace.empty()) std::cout << "trace written to " << options_.trace << "\n";
    }
    return absl::OkStatus();
  }

 private:
  const Options& options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<reprise::v1::RuntimeInstances::Stub> admin_;
  std::unique_ptr<tools::HttpClient> http_;  // -i http: every command but instances / dump
};

// A tensor of `meta`'s type and shape (variable dimensions become 1) with random values:
// floats uniform in [-1, 1), integers in [0, 10), booleans either.
absl::StatusOr<TensorValue> RandomTensor(
    const inference::ModelMetadataResponse::TensorMetadata& meta, std::mt19937* rng) {
  ASSIGN_OR_RETURN(runtime::DataType dtype, server::DataTypeFromKServe(meta.datatype()));
  TensorValue t;
  t.dtype = dtype;
  for (int64_t d : meta.shape()) t.shape.push_back(d < 0 ? 1 : d);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  const size_t size = runtime::DataTypeSize(dtype);
  if (size == 0 || dtype == runtime::DataType::kString) {  // strings: no random text
    return absl::InvalidArgumentError(
        absl::StrCat("input \"", meta.name(), "\": no random values for ", meta.datatype()));
  }
  t.bytes.resize(static_cast<size_t>(n) * size);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = t.bytes.data() + i * size;
    switch (dtype) {
      case runtime::DataType::kFloat32: {
        const float v = real(*rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case runtime::DataType::kFloat64: {
        const double v = real(*rng);
        std::memcpy(p, &v, 8);
        break;
      }
      case runtime::DataType::kBool:
        *p = static_cast<uint8_t>(small(*rng) % 2);
        break;
      default: {  // integers (and float16 / bfloat16 bit patterns of small values)
        const int64_t v = small(*rng);
        std::memcpy(p, &v, size);  // little-endian: the low bytes
        break;
      }
    }
  }
  return t;
}

absl::Status Client::Infer(const std::string& model) {
  if (options_.inputs.empty()) {
    return absl::InvalidArgumentError("infer needs --input NAME=FILE.npy or NAME=random");
  }
  ASSIGN_OR_RETURN(inference::ModelMetadataResponse meta, Metadata(model));
  inference::ModelInferRequest request;
  request.set_model_name(model);
  std::mt19937 rng(
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (const std::string& spec : options_.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input \"", spec, "\" is not NAME=FILE.npy or NAME=random"));
    }
    const std::string name = spec.substr(0, eq);
    const std::string source = spec.substr(eq + 1);
    TensorValue tensor;
    if (source == "random") {
      const inference::ModelMetadataResponse::TensorMetadata* found = nullptr;
      for (const auto& t : meta.inputs()) {
        if (t.name() == name) found = &t;
      }
      if (found == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("model \"", model, "\" has no input \"", name, "\""));
      }
      ASSIGN_OR_RETURN(tensor, RandomTensor(*found, &rng));
    } else {
      ASSIGN_OR_RETURN(tensor, runtime::engine::ReadNpyFile(source));
    }
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype(std::string(server::KServeDatatypeName(tensor.dtype)));
    for (int64_t d : tensor.shape) in->add_shape(d);
    request.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size()));
  }
  inference::ModelInferResponse response;
  grpc::ClientContext ctx;
  const auto start = std::chrono::steady_clock::now();
  if (http_ != nullptr) {
    ASSIGN_OR_RETURN(response, http_->ModelInfer(request, options_.binary));
  } else {
    RETURN_IF_ERROR(FromGrpc(stub_->ModelInfer(&ctx, request, &response)));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  google::protobuf::Struct json;
  (*json.mutable_fields())["model_name"].set_string_value(response.model_name());
  (*json.mutable_fields())["model_version"].set_string_value(response.model_version());
  auto* outputs = (*json.mutable_fields())["outputs"].mutable_list_value();
  if (!options_.json) {
    std::cout << "model " << response.model_name() << " version " << response.model_version()
              << ": " << response.outputs_size() << " outputs in " << ms << " ms\n";
  }
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    if (i >= response.raw_output_contents_size()) {
      return absl::InternalError(absl::StrCat("output \"", out.name(), "\" has no raw contents"));
    }
    TensorValue tensor;
    ASSIGN_OR_RETURN(tensor.dtype, server::DataTypeFromKServe(out.datatype()));
    tensor.shape.assign(out.shape().begin(), out.shape().end());
    const std::string& raw = response.raw_output_contents(i);
    tensor.bytes.assign(raw.begin(), raw.end());
    std::string file;
    if (!options_.output_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(options_.output_dir, ec);
      file = (std::filesystem::path(options_.output_dir) / (out.name() + ".npy")).string();
      RETURN_IF_ERROR(runtime::engine::WriteNpyFile(file, tensor));
    }
    auto* o = outputs->add_values()->mutable_struct_value()->mutable_fields();
    (*o)["name"].set_string_value(out.name());
    (*o)["datatype"].set_string_value(out.datatype());
    auto* shape = (*o)["shape"].mutable_list_value();
    for (int64_t d : out.shape()) shape->add_values()->set_number_value(static_cast<double>(d));
    if (!file.empty()) (*o)["file"].set_string_value(file);
    if (!options_.json) {
      std::cout << "  " << out.name() << " " << out.datatype() << " ["
                << absl::StrJoin(out.shape(), ",") << "]";
      if (!file.empty()) std::cout << " -> " << file;
      if (tensor.dtype == runtime::DataType::kFloat32) {
        const size_t n = std::min<size_t>(tensor.bytes.size() / 4, 6);
        std::vector<float> head(n);
        std::memcpy(head.data(), tensor.bytes.data(), n * 4);
        std::cout << " first: " << absl::StrJoin(head, " ");
      }
      std::cout << "\n";
    }
  }
  if (options_.json) std::cout << ToJson(json);
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  absl::StatusOr<Options> options = ParseArgs(argc, argv);
  if (!options.ok()) {
    std::cerr << "reprise: " << options.status().message() << "\n" << kUsage;
    return 2;
  }
  const Options& o = *options;
  if (o.command == "help") {
    std::cout << kUsage << tools::ConnectionFlagsUsage();
    return 0;
  }
  const bool needs_model = o.command == "load" || o.command == "unload" ||
                           o.command == "metadata" || o.command == "infer" ||
                           o.command == "instances" || o.command == "dump" ||
                           o.command == "profile";
  if ((needs_model && o.positional.size() != 1) ||
      (!needs_model && o.positional.size() > (o.command == "stats" ? 1u : 0u))) {
    std::cerr << "reprise: wrong arguments for \"" << o.command << "\"\n" << kUsage;
    return 2;
  }
  const std::string model = o.positional.empty() ? "" : o.positional[0];
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      tools::MakeClientChannel(o.addr, o.connection);
  if (!channel.ok()) {
    std::cerr << "reprise: " << channel.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<tools::HttpClient> http;
  if (o.http) {
    if (o.command == "instances" || o.command == "dump" || o.command == "profile") {
      std::cerr << "reprise: \"" << o.command << "\" is a gRPC-only command (reprise.v1)\n";
      return 2;
    }
    absl::StatusOr<std::unique_ptr<tools::HttpClient>> c =
        tools::HttpClient::Connect(o.addr, o.connection.headers);
    if (!c.ok()) {
      std::cerr << "reprise: " << c.status().message() << "\n";
      return 1;
    }
    http = *std::move(c);
  }
  Client client(o, *std::move(channel), std::move(http));
  absl::Status status;
  if (o.command == "health") {
    status = client.Health();
  } else if (o.command == "healthcheck") {
    status = client.HealthCheck();
  } else if (o.command == "models") {
    status = client.Models();
  } else if (o.command == "load" || o.command == "unload") {
    status = client.LoadOrUnload(o.command == "load", model);
  } else if (o.command == "metadata") {
    status = client.PrintMetadata(model);
  } else if (o.command == "infer") {
    status = client.Infer(model);
  } else if (o.command == "stats") {
    status = client.Stats(model);
  } else if (o.command == "instances") {
    status = client.Instances(model);
  } else if (o.command == "dump") {
    status = client.Dump(model);
  } else if (o.command == "profile") {
    status = client.Profile(model);
  } else {
    std::cerr << "reprise: unknown command \"" << o.command << "\"\n" << kUsage;
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "reprise: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
              << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace reprise::cli

int main(int argc, char** argv) { return reprise::cli::Run(argc, argv); }
