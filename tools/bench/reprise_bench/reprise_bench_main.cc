// reprise-bench: a load generator for reprise-server's KServe v2 gRPC API, in the spirit of
// Triton's perf_analyzer. See BenchUsage() (reprise-bench --help) and docs/benchmarks.md.
//
// For each load level (a concurrency or a request rate): unmeasured warm-up, then measurement
// windows until the last three agree within the stability threshold or --max-windows ran;
// the last three windows are reported. Every wait is bounded; --addr is any gRPC target.
// Exit status: 0 when every level ran (failed requests are counted, not fatal), 1 when the
// server cannot be reached or a level did not drain, 2 on a usage error.
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/data_type.h"
#include "runtime/engine/npy.h"
#include "server/kserve_types.h"
#include "tools/bench/reprise_bench/bench_options.h"
#include "tools/bench/reprise_bench/bench_report.h"
#include "tools/bench/reprise_bench/http_load_runner.h"
#include "tools/bench/reprise_bench/load_runner.h"
#include "tools/common/http_client.h"

namespace reprise::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;
using inference::GRPCInferenceService;

struct PreparedRequest {
  inference::ModelInferRequest request;
  int expected_outputs = 0;
};

// Random or zero bytes for `count` elements of KServe type `datatype`.
absl::StatusOr<std::string> GenerateData(const std::string& datatype, int64_t count, bool zeros,
                                         std::mt19937_64* rng) {
  ASSIGN_OR_RETURN(runtime::DataType type, server::DataTypeFromKServe(datatype));
  const size_t size = runtime::DataTypeSize(type);
  if (size == 0 || type == runtime::DataType::kString) {  // strings: no random text
    return absl::InvalidArgumentError(
        absl::StrCat("cannot generate data of type ", datatype, " (give a .npy)"));
  }
  std::string bytes(static_cast<size_t>(count) * size, '\0');
  if (zeros) return bytes;
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < count; ++i) {
    char* p = bytes.data() + static_cast<size_t>(i) * size;
    if (type == runtime::DataType::kFloat32) {
      const float v = real(*rng);
      std::memcpy(p, &v, sizeof(v));
    } else if (type == runtime::DataType::kFloat64) {
      const double v = real(*rng);
      std::memcpy(p, &v, sizeof(v));
    } else if (type == runtime::DataType::kInt64) {
      const int64_t v = small(*rng);
      std::memcpy(p, &v, sizeof(v));
    } else if (type == runtime::DataType::kInt32) {
      const int32_t v = small(*rng);
      std::memcpy(p, &v, sizeof(v));
    } else if (type == runtime::DataType::kBool) {
      *p = static_cast<char>(small(*rng) % 2);
    } else if (size == 1) {
      *p = static_cast<char>(small(*rng));
    }  // other types stay zero
  }
  return bytes;
}

// The model's metadata and statistics, over the protocol under test.
class Control {
 public:
  Control(GRPCInferenceService::Stub* stub, HttpClient* http) : stub_(stub), http_(http) {}
  bool Metadata(const BenchOptions& o, inference::ModelMetadataResponse* out) {
    if (http_ != nullptr) {
      absl::StatusOr<inference::ModelMetadataResponse> r = http_->ModelMetadata(o.model);
      if (r.ok()) *out = *std::move(r);
      return r.ok();
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ModelMetadataRequest request;
    request.set_name(o.model);
    request.set_version(o.version);
    return stub_->ModelMetadata(&ctx, request, out).ok();
  }
  bool Statistics(const BenchOptions& o, inference::ModelStatisticsResponse* out) {
    if (http_ != nullptr) {
      absl::StatusOr<inference::ModelStatisticsResponse> r = http_->ModelStatistics(o.model);
      if (r.ok()) *out = *std::move(r);
      return r.ok();
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ModelStatisticsRequest request;
    request.set_name(o.model);
    request.set_version(o.version);
    return stub_->ModelStatistics(&ctx, request, out).ok();
  }

 private:
  GRPCInferenceService::Stub* const stub_;
  HttpClient* const http_;
};

absl::StatusOr<PreparedRequest> PrepareRequest(const BenchOptions& o, Control* control) {
  PreparedRequest out;
  out.request.set_model_name(o.model);
  out.request.set_model_version(o.version);
  // The model's inputs and outputs, when the server describes them (an echo server does not).
  inference::ModelMetadataResponse metadata;
  const bool have_metadata = control->Metadata(o, &metadata);
  out.expected_outputs = have_metadata ? metadata.outputs_size() : -1;
  std::vector<std::pair<std::string, std::string>> sources = o.inputs;
  if (have_metadata) {
    for (const auto& in : metadata.inputs()) {
      bool given = false;
      for (const auto& [name, source] : o.inputs) given = given || name == in.name();
      if (!given) sources.emplace_back(in.name(), o.input_data);
    }
  }
  if (sources.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no inputs: the server has no metadata for model \"", o.model, "\"; give --input"));
  }
  std::mt19937_64 rng(o.seed);
  for (const auto& [name, source] : sources) {
    auto* tensor = out.request.add_inputs();
    tensor->set_name(name);
    std::string bytes;
    if (source == "random" || source == "zeros") {
      const inference::ModelMetadataResponse::TensorMetadata* meta = nullptr;
      for (const auto& in : metadata.inputs()) {
        if (in.name() == name) meta = &in;
      }
      std::vector<int64_t> shape;
      bool have_shape = false;
      for (const auto& [shape_name, dims] : o.shapes) {
        if (shape_name == name) {
          shape = dims;
          have_shape = true;
        }
      }
      if (!have_shape && meta != nullptr) {
        for (int i = 0; i < meta->shape_size(); ++i) {
          int64_t d = meta->shape(i);
          if (d < 0 && i == 0) d = o.batch_size;
          if (d < 0) {
            return absl::InvalidArgumentError(absl::StrCat("input \"", name,
                                                           "\" has a dynamic dimension ", i,
                                                           ": give --shape ", name, "=DIMS"));
          }
          shape.push_back(d);
        }
        have_shape = true;
      }
      if (!have_shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("input \"", name, "\": no shape known, give --shape ", name, "=DIMS"));
      }
      const std::string datatype = meta != nullptr ? meta->datatype() : "FP32";
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      ASSIGN_OR_RETURN(bytes, GenerateData(datatype, count, source == "zeros", &rng));
      tensor->set_datatype(datatype);
      for (int64_t d : shape) tensor->add_shape(d);
    } else {
      ASSIGN_OR_RETURN(runtime::TensorValue value, runtime::engine::ReadNpyFile(source));
      std::vector<int64_t> shape(value.shape.begin(), value.shape.end());
      bytes.assign(reinterpret_cast<const char*>(value.bytes.data()), value.bytes.size());
      if (o.batch_size > 1 && !shape.empty() && shape[0] == 1) {
        // A batch-1 file repeated to the batch size.
        std::string one = bytes;
        for (int b = 1; b < o.batch_size; ++b) bytes += one;
        shape[0] = o.batch_size;
      }
      tensor->set_datatype(std::string(server::KServeDatatypeName(value.dtype)));
      for (int64_t d : shape) tensor->add_shape(d);
    }
    out.request.add_raw_input_contents(std::move(bytes));
  }
  return out;
}

ServerCounters ReadCounters(const BenchOptions& o, Control* control) {
  ServerCounters c;
  inference::ModelStatisticsResponse response;
  if (!control->Statistics(o, &response)) return c;
  // Summed over the versions answered (one unless the model serves several).
  for (const auto& m : response.model_stats()) {
    const auto& s = m.inference_stats();
    c.inference_count += m.inference_count();
    c.execution_count += m.execution_count();
    c.success_count += s.success().count();
    c.success_ns += s.success().ns();
    c.queue_count += s.queue().count();
    c.queue_ns += s.queue().ns();
    c.input_count += s.compute_input().count();
    c.input_ns += s.compute_input().ns();
    c.infer_count += s.compute_infer().count();
    c.infer_ns += s.compute_infer().ns();
    c.output_count += s.compute_output().count();
    c.output_ns += s.compute_output().ns();
  }
  c.valid = response.model_stats_size() > 0;
  return c;
}

void Progress(const BenchOptions& o, const std::string& line) {
  if (!o.progress) return;
  std::fprintf(stderr, "\r%-100s", line.c_str());
  std::fflush(stderr);
}

// Sleeps `ms` in steps of at most 100 ms.
void SleepMs(int ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) {
    std::this_thread::sleep_until(std::min(end, Clock::now() + std::chrono::milliseconds(100)));
  }
}

absl::StatusOr<LevelSummary> RunLevel(const BenchOptions& o, double level,
                                      const std::shared_ptr<grpc::Channel>& channel, Control* stub,
                                      const PreparedRequest& prepared) {
  const char* what = o.load_mode == LoadMode::kConcurrency ? "concurrency" : "rate";
  std::unique_ptr<Runner> runner_owned;
  if (o.http) {
    runner_owned = std::make_unique<HttpLoadRunner>(o.addr, o.connection.headers, prepared.request,
                                                    o.binary_inputs, o.binary_outputs,
                                                    prepared.expected_outputs);
  } else {
    runner_owned =
        std::make_unique<LoadRunner>(channel, prepared.request, prepared.expected_outputs,
                                     std::chrono::milliseconds(o.request_timeout_ms));
  }
  Runner& runner = *runner_owned;
  if (o.load_mode == LoadMode::kConcurrency) {
    runner.StartConcurrency(static_cast<int>(level));
  } else {
    runner.StartRate(level, o.max_outstanding);
  }
  Progress(o, absl::StrFormat("[%s %g] warm-up %d ms", what, level, o.warmup_ms));
  SleepMs(o.warmup_ms);
  runner.TakeSamples();
  std::vector<Window> windows;
  ServerCounters boundary = o.server_stats ? ReadCounters(o, stub) : ServerCounters();
  auto window_start = Clock::now();
  runner.TakeSamples();  // what completed while the counters were read
  bool stable = false;
  while (static_cast<int>(windows.size()) < o.max_windows) {
    Window w;
    if (o.window_mode == WindowMode::kTime) {
      SleepMs(o.window_ms);
    } else {
      runner.WaitForSamples(static_cast<size_t>(o.window_requests),
                            std::chrono::milliseconds(o.window_timeout_ms));
    }
    w.samples = runner.TakeSamples();
    const auto now = Clock::now();
    w.seconds = std::chrono::duration<double>(now - window_start).count();
    w.server_before = boundary;
    boundary = o.server_stats ? ReadCounters(o, stub) : ServerCounters();
    w.server_after = boundary;
    window_start = now;
    windows.push_back(std::move(w));
    const LevelSummary partial = Summarize(level, {windows.back()}, o.batch_size);
    Progress(o, absl::StrFormat("[%s %g] window %d/%d: %.1f infer/s, p50 %.1f us", what, level,
                                windows.size(), o.max_windows, partial.inferences_per_s,
                                partial.p50_us));
    if (LastThreeStable(windows, o.stability)) {
      stable = true;
      break;
    }
  }
  bool drained = false;
  const LoadCounts counts = runner.Stop(&drained);
  if (!drained) {
    return absl::DeadlineExceededError(
        absl::StrFormat("%s %g: requests still in flight %d ms after the load stopped", what, level,
                        o.request_timeout_ms + 5000));
  }
  LevelSummary s = Summarize(level, windows, o.batch_size);
  s.stable = stable;
  s.sent = counts.sent;
  s.ok = counts.ok;
  s.failed = counts.failed;
  s.skipped = counts.skipped;
  if (!counts.first_error.empty() && o.progress) {
    std::fprintf(stderr, "\n[%s %g] %d requests failed; first: %s\n", what, level,
                 static_cast<int>(counts.failed), counts.first_error.c_str());
  }
  return s;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status Run(const BenchOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Over HTTP the gRPC channel is made (it connects lazily) but never used.
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   MakeClientChannel(o.http ? "127.0.0.1:1" : o.addr, o.connection, args));
  std::unique_ptr<HttpClient> http;
  if (o.http) {
    ASSIGN_OR_RETURN(http, HttpClient::Connect(o.addr, o.connection.headers));
  } else if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(10))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", o.addr, " within 10 s"));
  }
  auto grpc_stub = GRPCInferenceService::NewStub(channel);
  Control control(grpc_stub.get(), http.get());
  Control* stub = &control;
  ASSIGN_OR_RETURN(PreparedRequest prepared, PrepareRequest(o, stub));
  BenchResult result;
  ServerCounters before = o.server_stats ? ReadCounters(o, stub) : ServerCounters();
  result.server_stats = before.valid;
  BenchOptions options = o;
  options.server_stats = before.valid;
  for (double level : o.levels) {
    ASSIGN_OR_RETURN(LevelSummary s, RunLevel(options, level, channel, stub, prepared));
    result.client_inferences_ok += s.ok * o.batch_size;
    result.levels.push_back(std::move(s));
  }
  if (o.progress) std::fprintf(stderr, "\r%-100s\r", "");
  if (result.server_stats) {
    const ServerCounters after = ReadCounters(o, stub);
    if (after.valid && after.inference_count >= before.inference_count) {
      result.server_inference_count_delta = after.inference_count - before.inference_count;
    }
  }
  std::fputs(FormatTable(options, result).c_str(), stdout);
  if (!o.csv_path.empty()) RETURN_IF_ERROR(WriteFile(o.csv_path, FormatCsv(options, result)));
  if (!o.json_path.empty()) RETURN_IF_ERROR(WriteFile(o.json_path, FormatJson(options, result)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace reprise::tools::bench

int main(int argc, char** argv) {
  using reprise::tools::bench::BenchUsage;
  absl::StatusOr<reprise::tools::bench::BenchOptions> options =
      reprise::tools::bench::ParseBenchArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::fprintf(stderr, "reprise-bench: %s\n%s", std::string(options.status().message()).c_str(),
                 BenchUsage().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(BenchUsage().c_str(), stdout);
    return 0;
  }
  absl::Status status = reprise::tools::bench::Run(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "\nreprise-bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
