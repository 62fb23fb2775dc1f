// The metrics: what Record* writes, what the collector reads at scrape time, the HTTP endpoint,
// and the whole server counting real gRPC requests.
#include "server/metrics.h"

#include <chrono>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/metrics_collector.h"
#include "server/metrics_endpoint.h"
#include "server/model_repository.h"
#include "server/notification.h"
#include "server/server.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/server/fake_backend.h"
#include "tests/server/metrics_text.h"
#include "tests/server/temp_repo.h"
#include "tests/server/tsan_skip.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;
using testing::HttpExchange;
using testing::HttpGet;
using testing::Value;

TEST(FailureReasonTest, MapsCodesToTheDocumentedReasons) {
  EXPECT_EQ(FailureReason(absl::StatusCode::kOk), "");
  EXPECT_EQ(FailureReason(absl::StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(FailureReason(absl::StatusCode::kNotFound), "not_found");
  EXPECT_EQ(FailureReason(absl::StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(FailureReason(absl::StatusCode::kResourceExhausted), "resource_exhausted");
  EXPECT_EQ(FailureReason(absl::StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(FailureReason(absl::StatusCode::kInternal), "internal");
  EXPECT_EQ(FailureReason(absl::StatusCode::kFailedPrecondition), "internal");
}

TEST(MetricsTest, CountsRequestsByOutcomeAndReason) {
  Metrics m;
  for (int i = 0; i < 3; ++i) {
    m.RecordRequest("mlp", "1", absl::StatusCode::kOk, absl::Milliseconds(2));
  }
  m.RecordRequest("mlp", "1", absl::StatusCode::kInvalidArgument, absl::Milliseconds(1));
  m.RecordRequest("", "", absl::StatusCode::kNotFound, absl::ZeroDuration());
  const std::string text = m.Serialize();
  EXPECT_EQ(Value(text, "reprise_requests_total",
                  {{"model", "mlp"}, {"version", "1"}, {"outcome", "success"}}),
            3);
  EXPECT_EQ(Value(text, "reprise_requests_total",
                  {{"model", "mlp"}, {"outcome", "failure"}, {"reason", "invalid_argument"}}),
            1);
  EXPECT_EQ(Value(text, "reprise_requests_total", {{"model", ""}, {"reason", "not_found"}}), 1);
  EXPECT_EQ(Value(text, "reprise_request_duration_seconds_count", {{"model", "mlp"}}), 4);
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_request_duration_seconds_sum", {{"model", "mlp"}}), 0.007);
  // 2 ms requests are above the 1 ms bucket and within the 2.5 ms one.
  EXPECT_EQ(
      Value(text, "reprise_request_duration_seconds_bucket", {{"model", "mlp"}, {"le", "0.001"}}),
      1);
  EXPECT_EQ(
      Value(text, "reprise_request_duration_seconds_bucket", {{"model", "mlp"}, {"le", "0.0025"}}),
      4);
}

TEST(MetricsTest, ExecutionsInferencesAndBatchSizes) {
  Metrics m;
  m.RecordExecution("m", "2", 4);
  m.RecordExecution("m", "2", 1);
  const std::string text = m.Serialize();
  EXPECT_EQ(Value(text, "reprise_executions_total", {{"model", "m"}}), 2);
  EXPECT_EQ(Value(text, "reprise_inferences_total", {{"model", "m"}}), 5);
  EXPECT_EQ(Value(text, "reprise_batch_size_count", {{"model", "m"}}), 2);
  EXPECT_EQ(Value(text, "reprise_batch_size_bucket", {{"model", "m"}, {"le", "2"}}), 1);
  EXPECT_EQ(Value(text, "reprise_batch_size_bucket", {{"model", "m"}, {"le", "4"}}), 2);
}

TEST(MetricsTest, QueueAndComputePhases) {
  Metrics m;
  m.RecordQueue("m", "1", absl::Microseconds(300));
  ComputeTimes t{absl::Microseconds(10), absl::Milliseconds(3), absl::Microseconds(20)};
  m.RecordCompute("m", "1", t);
  const std::string text = m.Serialize();
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_queue_duration_seconds_sum", {{"model", "m"}}), 0.0003);
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_compute_duration_seconds_sum", {{"phase", "infer"}}),
                   0.003);
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_compute_duration_seconds_sum", {{"phase", "input"}}),
                   0.00001);
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_compute_duration_seconds_sum", {{"phase", "output"}}),
                   0.00002);
}

TEST(MetricsTest, LoadCreatesZeroSeriesAndCountsFailures) {
  Metrics m;
  EXPECT_FALSE(Value(m.Serialize(), "reprise_requests_total").has_value());
  m.RecordLoad("m", "1", absl::Seconds(2), /*ok=*/true);
  m.RecordLoad("bad", "1", absl::Milliseconds(5), /*ok=*/false);
  const std::string text = m.Serialize();
  EXPECT_EQ(Value(text, "reprise_requests_total", {{"model", "m"}, {"outcome", "success"}}), 0);
  EXPECT_EQ(Value(text, "reprise_executions_total", {{"model", "m"}}), 0);
  EXPECT_EQ(Value(text, "reprise_model_load_failures_total", {{"model", "bad"}}), 1);
  EXPECT_EQ(Value(text, "reprise_model_load_failures_total", {{"model", "m"}}), 0);
  EXPECT_DOUBLE_EQ(*Value(text, "reprise_model_load_duration_seconds_sum", {{"model", "m"}}), 2.0);
  EXPECT_FALSE(Value(text, "reprise_requests_total", {{"model", "bad"}}).has_value());
}

// A backend whose models report two runtime instances (one captured, one whose capture failed)
// and whose device reports fixed memory numbers.
class InstanceModel final : public LoadedModel {
 public:
  const ModelSignature& signature() const override { return signature_; }
  void InferAsync(std::span<const InputTensor>, std::span<const std::string>, const InferOptions&,
                  InferDone done) override {
    std::move(done)(std::vector<OutputTensor>{}, InferTimings{});
  }
  // Totals over the version's life: they include an instance that was evicted (and recaptured),
  // so they differ from the sums over the resident instances.
  CaptureStats capture_stats() const override {
    CaptureStats s;
    s.captures = 3;
    s.replays = 9;
    s.evictions = 2;
    s.capture_failures = 1;
    s.live_instances = 2;
    s.live_bytes = 1536;
    s.capture_time.Observe(0.002);   // 2 ms, resident
    s.capture_time.Observe(0.0005);  // the evicted instance's first capture
    s.capture_time.Observe(0.003);   // its recapture
    return s;
  }
  std::vector<RuntimeInstanceInfo> ListRuntimeInstances() const override {
    RuntimeInstanceInfo captured;
    captured.stream = 0;
    captured.shape_signature = "x:[1,4]";
    captured.state = "CAPTURED";
    captured.captures = 1;
    captured.replays = 5;
    captured.capture_time_ns = 2'000'000;  // 2 ms
    captured.arena_bytes = 1024;
    RuntimeInstanceInfo eager = captured;
    eager.stream = 1;
    eager.state = "EAGER";
    eager.captures = 0;
    eager.replays = 0;
    eager.capture_time_ns = 0;
    eager.arena_bytes = 512;
    RuntimeInstanceInfo evicted = captured;
    evicted.shape_signature = "x:[2,4]";
    evicted.state = "EVICTED";
    evicted.arena_bytes = 0;
    return {captured, eager, evicted};
  }

 private:
  ModelSignature signature_;
};

class InstanceBackend final : public ModelBackend {
 public:
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const LoadSpec&) override {
    return std::make_unique<InstanceModel>();
  }
  std::vector<DeviceMemoryInfo> MemoryUsage() const override {
    return {DeviceMemoryInfo{"cpu", 4096, 8192, 16, 32}};
  }
};

TEST(MetricsCollectorTest, ReadsInstancesStatesMemoryAndProcess) {
  testing::TempRepo repo;
  repo.AddVersion("m", 3);
  InstanceBackend backend;
  testing::ManualExecutor executor;
  ModelRepository::Options options;
  options.paths = {repo.path()};
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Create(options, &backend, &executor);
  ASSERT_TRUE(repository.ok()) << repository.status();
  absl::Status loaded = absl::UnknownError("not called");
  (*repository)->LoadAtStartup({}, [&](absl::Status s) { loaded = s; });
  executor.RunAll();
  ASSERT_TRUE(loaded.ok()) << loaded;

  std::atomic<int64_t> calls{7};
  MetricsCollector collector(repository->get(), &backend, &calls, /*memory_budget_bytes=*/4096);
  Metrics metrics;
  metrics.AddCollectable(std::shared_ptr<prometheus::Collectable>(
      &collector, [](prometheus::Collectable*) {}));  // borrowed: lives on this stack
  // The failed capture is logged once, however many scrapes see it.
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const std::string text = metrics.Serialize();
  metrics.Serialize();
  spdlog::set_default_logger(previous);
  const std::vector<std::string> lines = absl::StrSplit(log.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << log.str();
  EXPECT_THAT(lines[0], HasSubstr("model \"m\" version 3 stream 1 shape x:[1,4]: capture failed"));

  const std::map<std::string, std::string> mv = {{"model", "m"}, {"version", "3"}};
  EXPECT_EQ(Value(text, "reprise_runtime_instance_captures_total", mv), 3);
  EXPECT_EQ(Value(text, "reprise_runtime_instance_replays_total", mv), 9);
  EXPECT_EQ(Value(text, "reprise_runtime_instance_evictions_total", mv), 2);
  EXPECT_EQ(Value(text, "reprise_capture_failures_total", mv), 1);
  EXPECT_EQ(Value(text, "reprise_runtime_instances", {{"model", "m"}, {"state", "CAPTURED"}}), 1);
  EXPECT_EQ(Value(text, "reprise_runtime_instances", {{"model", "m"}, {"state", "EAGER"}}), 1);
  EXPECT_EQ(Value(text, "reprise_runtime_instance_arena_bytes", mv), 1536);
  // Every capture of the version's life, evicted instances included: cumulative buckets.
  EXPECT_EQ(Value(text, "reprise_capture_duration_seconds_count", mv), 3);
  EXPECT_EQ(Value(text, "reprise_capture_duration_seconds_bucket", {{"le", "0.0001"}}), 0);
  EXPECT_EQ(Value(text, "reprise_capture_duration_seconds_bucket", {{"le", "0.001"}}), 1);
  EXPECT_EQ(Value(text, "reprise_capture_duration_seconds_bucket", {{"le", "0.01"}}), 3);
  EXPECT_EQ(Value(text, "reprise_capture_duration_seconds_bucket", {{"le", "+Inf"}}), 3);
  EXPECT_NEAR(*Value(text, "reprise_capture_duration_seconds_sum", mv), 0.0055, 1e-12);
  EXPECT_EQ(Value(text, "reprise_pending_requests", mv), 0);
  EXPECT_EQ(Value(text, "reprise_model_state", {{"model", "m"}, {"state", "READY"}}), 1);
  EXPECT_EQ(Value(text, "reprise_model_state", {{"model", "m"}, {"state", "LOADING"}}), 0);
  EXPECT_EQ(Value(text, "reprise_device_memory_used_bytes", {{"pool", "device"}}), 4096);
  EXPECT_EQ(Value(text, "reprise_device_memory_peak_bytes", {{"pool", "pinned_host"}}), 32);
  EXPECT_EQ(Value(text, "reprise_grpc_server_inflight_calls"), 7);
  EXPECT_EQ(Value(text, "reprise_capture_memory_budget_bytes"), 4096);
  EXPECT_GT(*Value(text, "process_resident_memory_bytes"), 0);
  EXPECT_GT(*Value(text, "process_start_time_seconds"), 1.6e9);
  EXPECT_GT(*Value(text, "process_open_fds"), 0);

  absl::Status unloaded = absl::UnknownError("not called");
  (*repository)->UnloadAll([&](absl::Status s) { unloaded = s; });
  executor.RunAll();
  ASSERT_TRUE(unloaded.ok());
  const std::string after = metrics.Serialize();
  EXPECT_FALSE(Value(after, "reprise_runtime_instance_replays_total", mv).has_value());
  EXPECT_EQ(Value(after, "reprise_model_state", {{"model", "m"}, {"state", "UNAVAILABLE"}}), 1);
}

// Requests recorded from several threads while scrapes run and a model loads and unloads
// (the collector reads the repository that the loader changes). Runs under TSan too.
TEST(MetricsConcurrencyTest, RecordsScrapesAndReloadsAtOnce) {
  testing::TempRepo repo;
  repo.AddVersion("m", 1);
  InstanceBackend backend;
  ThreadPool loader(2, "load");
  ModelRepository::Options options;
  options.paths = {repo.path()};
  options.control_mode = config::ControlMode::kExplicit;
  Metrics metrics;
  options.metrics = &metrics;
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Create(options, &backend, &loader);
  ASSERT_TRUE(repository.ok()) << repository.status();
  std::atomic<int64_t> calls{0};
  metrics.AddCollectable(std::make_shared<MetricsCollector>(repository->get(), &backend, &calls));

  constexpr int kThreads = 4, kPerThread = 500, kReloads = 10;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) EXPECT_FALSE(metrics.Serialize().empty());
  });
  std::vector<std::thread> recorders;
  for (int t = 0; t < kThreads; ++t) {
    recorders.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        metrics.RecordRequest("m", "1", absl::StatusCode::kOk, absl::Microseconds(i));
        metrics.RecordExecution("m", "1", 1);
      }
    });
  }
  for (int i = 0; i < kReloads; ++i) {
    Notification loaded, unloaded;
    (*repository)->LoadModel("m", [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      loaded.Notify();
    });
    loaded.WaitForNotification();
    (*repository)->UnloadModel("m", [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      unloaded.Notify();
    });
    unloaded.WaitForNotification();
  }
  for (std::thread& t : recorders) t.join();
  done.store(true);
  scraper.join();
  loader.Stop();
  const std::string text = metrics.Serialize();
  EXPECT_EQ(Value(text, "reprise_requests_total", {{"model", "m"}, {"outcome", "success"}}),
            kThreads * kPerThread);
  EXPECT_EQ(Value(text, "reprise_executions_total", {{"model", "m"}}), kThreads * kPerThread);
  EXPECT_EQ(Value(text, "reprise_model_load_duration_seconds_count", {{"model", "m"}}), kReloads);
}

TEST(ProcessStatsTest, ReadsThisProcess) {
  const ProcessStats p = ReadProcessStats();
  EXPECT_GT(p.resident_bytes, 0);
  EXPECT_GE(p.virtual_bytes, p.resident_bytes);
  EXPECT_GE(p.cpu_seconds, 0);
  EXPECT_GT(p.open_fds, 2);  // stdin, stdout, stderr at least
}

TEST(MetricsEndpointTest, ServesTheTextFormatOnAFreePort) {
  Metrics m;
  m.RecordRequest("m", "1", absl::StatusCode::kOk, absl::Milliseconds(1));
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start("127.0.0.1", 0, &m);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);
  const std::string body = HttpGet((*endpoint)->port(), "/metrics");
  EXPECT_THAT(body, HasSubstr("# TYPE reprise_requests_total counter"));
  EXPECT_EQ(Value(body, "reprise_requests_total", {{"outcome", "success"}}), 1);
  const int port = (*endpoint)->port();
  EXPECT_THAT(HttpExchange(port, "GET", "/metrics?name[]=x"),
              ::testing::StartsWith("HTTP/1.0 200 OK\r\n"));
  EXPECT_THAT(HttpExchange(port, "GET", "/metrics"),
              HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  // Nothing else is served.
  EXPECT_THAT(HttpExchange(port, "GET", "/"), ::testing::StartsWith("HTTP/1.0 404 "));
  EXPECT_THAT(HttpExchange(port, "GET", "/v2/health/ready"),
              ::testing::StartsWith("HTTP/1.0 404 "));
  const std::string post = HttpExchange(port, "POST", "/metrics");
  EXPECT_THAT(post, ::testing::StartsWith("HTTP/1.0 405 "));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));

  // The port is taken now: a second endpoint on it fails with a message naming it.
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> again =
      MetricsEndpoint::Start("127.0.0.1", (*endpoint)->port(), &m);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(again.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", (*endpoint)->port())));
}

inference::ModelInferRequest AddRequest(const std::string& model) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  const std::vector<float> data(4, 1.0f);
  for (const char* name : {"a", "b"}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    r.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
  }
  return r;
}

TEST(ServerMetricsTest, CountsTheRequestsAServerAnswered) {
  REPRISE_SKIP_UNDER_TSAN();
  testing::TempRepo repo;
  repo.AddVersion("add", 1);
  repo.WriteConfig("add", "max_batch_size: 8\n");
  testing::FakeBackend backend;
  config::ServerConfig config;
  config.listen_address = "127.0.0.1";
  config.grpc_port = 0;
  config.http_port = 0;
  config.metrics_port = 0;
  config.model_repositories = {repo.path()};
  config.cpu_threads = 2;
  config.grpc_inflight_metric = true;  // opt-in (a gRPC interceptor)
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, &backend);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitForStartupLoads().ok());
  ASSERT_GT((*server)->metrics_port(), 0);
  EXPECT_NE((*server)->metrics_port(), (*server)->port());

  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  constexpr int kRequests = 5;
  for (int i = 0; i < kRequests; ++i) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    ASSERT_TRUE(stub->ModelInfer(&ctx, AddRequest("add"), &response).ok());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    EXPECT_EQ(stub->ModelInfer(&ctx, AddRequest("nope"), &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  const std::string text = HttpGet((*server)->metrics_port(), "/metrics");
  const std::map<std::string, std::string> add = {{"model", "add"}, {"version", "1"}};
  auto with = [](std::map<std::string, std::string> a, std::map<std::string, std::string> b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(Value(text, "reprise_requests_total", with(add, {{"outcome", "success"}})), kRequests);
  EXPECT_EQ(Value(text, "reprise_requests_total", {{"model", ""}, {"reason", "not_found"}}), 1);
  EXPECT_EQ(Value(text, "reprise_executions_total", add), kRequests);
  EXPECT_EQ(Value(text, "reprise_inferences_total", add), kRequests);
  EXPECT_EQ(Value(text, "reprise_queue_duration_seconds_count", add), kRequests);
  EXPECT_EQ(Value(text, "reprise_compute_duration_seconds_count", with(add, {{"phase", "infer"}})),
            kRequests);
  EXPECT_EQ(Value(text, "reprise_model_load_duration_seconds_count", add), 1);
  EXPECT_EQ(Value(text, "reprise_model_state", with(add, {{"state", "READY"}})), 1);
  // Every call has finished: the count returns to 0 once gRPC has released the last one
  // (which may be just after the client got its answer, hence the bounded polling).
  std::optional<double> inflight;
  for (int i = 0; i < 500 && inflight != 0.0; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    inflight =
        Value(HttpGet((*server)->metrics_port(), "/metrics"), "reprise_grpc_server_inflight_calls");
  }
  EXPECT_EQ(inflight, 0.0);
  EXPECT_TRUE((*server)->Shutdown());

  // Off by default: no interceptor, and the gauge is not exported.
  config.grpc_inflight_metric = false;
  absl::StatusOr<std::unique_ptr<Server>> plain = Server::Start(config, &backend);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(
      Value(HttpGet((*plain)->metrics_port(), "/metrics"), "reprise_grpc_server_inflight_calls")
          .has_value());
  EXPECT_TRUE((*plain)->Shutdown());
}

TEST(ServerMetricsTest, AllowMetricsFalseServesNoPort) {
  REPRISE_SKIP_UNDER_TSAN();
  testing::TempRepo repo;
  testing::FakeBackend backend;
  config::ServerConfig config;
  config.listen_address = "127.0.0.1";
  config.grpc_port = 0;
  config.http_port = 0;
  config.allow_metrics = false;
  config.model_repositories = {repo.path()};
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, &backend);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->metrics_port(), 0);
  EXPECT_TRUE((*server)->Shutdown());
}

}  // namespace
}  // namespace reprise::server
