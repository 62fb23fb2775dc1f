// The engine's dynamic batching and capture policy on the example MLP: batched results equal
// the requests run alone, warm-up captures every bucket so that later traffic captures
// nothing, the LRU bound evicts and recaptures, the memory budget holds.
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine_backend.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;

const std::string kMlp = std::string(REPRISE_SOURCE_DIR) + "/tools/models/repository/mlp";

constexpr char kBase[] =
    "max_batch_size: 8\n"
    "input: [{name: input, data_type: TYPE_FP32, dims: [64]}]\n"
    "output: [{name: output, data_type: TYPE_FP32, dims: [10]}]\n";

struct Request {
  std::vector<float> data;
  std::vector<InputTensor> inputs;
};

// `rows` rows of 64 floats, distinct per `seed` and row.
std::unique_ptr<Request> MakeRequest(int rows, int seed) {
  auto r = std::make_unique<Request>();
  r->data.resize(static_cast<size_t>(rows) * 64);
  for (size_t i = 0; i < r->data.size(); ++i) {
    r->data[i] = static_cast<float>((seed * 131 + static_cast<int>(i) * 7) % 97) / 97.0f - 0.5f;
  }
  InputTensor in;
  in.name = "input";
  in.dtype = runtime::DataType::kFloat32;
  in.shape = {rows, 64};
  in.data = absl::string_view(reinterpret_cast<const char*>(r->data.data()),
                              r->data.size() * sizeof(float));
  r->inputs.push_back(in);
  return r;
}

class EngineBatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EngineBackend>> backend = EngineBackend::Create(options_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }
  std::unique_ptr<LoadedModel> Load(const std::string& extra_yaml, int streams) {
    absl::StatusOr<config::ModelSettings> s =
        config::ParseModelSettings(std::string(kBase) + extra_yaml, "test", "mlp");
    EXPECT_TRUE(s.ok()) << s.status();
    settings_.push_back(std::make_unique<config::ModelSettings>(*s));
    LoadSpec spec;
    spec.model_name = "mlp";
    spec.version = 1;
    spec.model_path = kMlp + "/1/model.onnx";
    spec.settings = settings_.back().get();
    spec.streams = streams;
    absl::StatusOr<std::unique_ptr<LoadedModel>> m = backend_->Load(spec);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }
  static absl::StatusOr<std::vector<OutputTensor>> Run(LoadedModel& m, const Request& r,
                                                       InferTimings* t = nullptr) {
    static const std::vector<std::string> kOut = {"output"};
    return m.Infer(r.inputs, kOut, t);
  }

  EngineBackendOptions options_;
  std::unique_ptr<EngineBackend> backend_;
  std::vector<std::unique_ptr<config::ModelSettings>> settings_;
};

// The request path's copy budget: a request's input bytes are copied once (into the plan) and
// its output bytes once (out of the plan, into its answer), alone or in a batch (one gather
// copy, one scatter copy; padding rows are zeros written, not copies). A new copy on the path
// that goes through the plans' staging or the read-out shows here.
TEST_F(EngineBatchingTest, EachRequestIsCopiedOnceInAndOnceOut) {
  constexpr uint64_t kInRow = 64 * sizeof(float);
  constexpr uint64_t kOutRow = 10 * sizeof(float);
  std::unique_ptr<LoadedModel> alone = Load("", 1);
  ASSERT_NE(alone, nullptr);
  std::unique_ptr<Request> r = MakeRequest(3, 1);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Run(*alone, *r).ok());  // padded to bucket 4
  CaptureStats c = alone->capture_stats();
  EXPECT_EQ(c.input_bytes_copied, 4 * 3 * kInRow);
  EXPECT_EQ(c.output_bytes_copied, 4 * 3 * kOutRow);

  std::unique_ptr<LoadedModel> batched = Load(
      "dynamic_batching: {preferred_batch_size: [7], max_queue_delay_microseconds: 60000000}\n", 1);
  ASSERT_NE(batched, nullptr);
  const std::vector<int> rows = {1, 2, 1, 3};
  std::vector<std::unique_ptr<Request>> requests;
  for (size_t i = 0; i < rows.size(); ++i) {
    requests.push_back(MakeRequest(rows[i], static_cast<int>(i)));
  }
  std::vector<std::thread> clients;
  std::vector<InferTimings> timings(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    clients.emplace_back([&, i] { ASSERT_TRUE(Run(*batched, *requests[i], &timings[i]).ok()); });
  }
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(timings[0].batch_size, 7);  // one batch of 7 rows, padded to 8
  c = batched->capture_stats();
  EXPECT_EQ(c.input_bytes_copied, 7 * kInRow);
  EXPECT_EQ(c.output_bytes_copied, 7 * kOutRow);
}

TEST_F(EngineBatchingTest, BatchedResultsEqualTheRequestsRunAlone) {
  std::unique_ptr<LoadedModel> alone = Load("", 1);
  // The batch goes when its rows reach 7 (the preferred size), whatever the arrival order: no
  // timing decides it. 7 rows pad to the bucket 8.
  std::unique_ptr<LoadedModel> batched = Load(
      "dynamic_batching: {preferred_batch_size: [7], max_queue_delay_microseconds: 60000000}\n", 1);
  ASSERT_NE(alone, nullptr);
  ASSERT_NE(batched, nullptr);
  const std::vector<int> rows = {1, 2, 1, 3};
  std::vector<std::unique_ptr<Request>> requests;
  for (size_t i = 0; i < rows.size(); ++i) {
    requests.push_back(MakeRequest(rows[i], static_cast<int>(i)));
  }
  std::vector<absl::StatusOr<std::vector<OutputTensor>>> got(rows.size());
  std::vector<InferTimings> timings(rows.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < rows.size(); ++i) {
    clients.emplace_back([&, i] { got[i] = Run(*batched, *requests[i], &timings[i]); });
  }
  for (std::thread& t : clients) t.join();
  int executions = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    EXPECT_EQ(timings[i].batch_size, 7);  // all four ran in one execution
    executions += timings[i].counts_execution ? 1 : 0;
    absl::StatusOr<std::vector<OutputTensor>> want = Run(*alone, *requests[i]);
    ASSERT_TRUE(want.ok()) << want.status();
    const OutputTensor& g = (*got[i])[0];
    const OutputTensor& w = (*want)[0];
    EXPECT_EQ(g.shape, (runtime::Shape{rows[i], 10}));  // exactly its rows, no padding
    ASSERT_EQ(g.data.size(), w.data.size());
    for (size_t k = 0; k < g.data.size() / 4; ++k) {
      float a = 0, b = 0;
      std::memcpy(&a, g.data.data() + k * 4, 4);
      std::memcpy(&b, w.data.data() + k * 4, 4);
      ASSERT_NEAR(a, b, 1e-5f) << "request " << i << " element " << k;
    }
  }
  EXPECT_EQ(executions, 1);
  // The batch ran on the bucket 8 (padded), captured once.
  std::vector<RuntimeInstanceInfo> list = batched->ListRuntimeInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].shape_signature, "input:[8,64]");
  EXPECT_EQ(list[0].bucket, 8);
}

TEST_F(EngineBatchingTest, WarmUpCapturesEveryBucketAndTrafficCapturesNothingMore) {
  std::unique_ptr<LoadedModel> m =
      Load("capture: {buckets: [1, 2, 4, 8], warmup: true}\n", /*streams=*/2);
  ASSERT_NE(m, nullptr);
  CaptureStats before = m->capture_stats();
  EXPECT_EQ(before.captures, 8u);  // 4 buckets x 2 streams
  EXPECT_EQ(before.warmup_instances, 8u);
  EXPECT_GE(before.load_ns, before.warmup_ns);
  std::vector<RuntimeInstanceInfo> list = m->ListRuntimeInstances();
  ASSERT_EQ(list.size(), 8u);
  for (const RuntimeInstanceInfo& ri : list) {
    EXPECT_EQ(ri.state, "CAPTURED");
    EXPECT_EQ(ri.captures, 1u);
    EXPECT_NE(ri.bucket, 0);
  }
  // A burst of every size up to 8 from concurrent clients: each pads to a bucket.
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int rows = 1; rows <= 8; ++rows) {
        std::unique_ptr<Request> r = MakeRequest(rows, c * 10 + rows);
        absl::StatusOr<std::vector<OutputTensor>> out = Run(*m, *r);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, (runtime::Shape{rows, 10}));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  CaptureStats after = m->capture_stats();
  EXPECT_EQ(after.captures, 8u);
  EXPECT_EQ(after.eager_runs, 0u);
  EXPECT_EQ(after.replays, before.replays + 32u);
  EXPECT_EQ(m->ListRuntimeInstances().size(), 8u);
}

TEST_F(EngineBatchingTest, LruBoundEvictsAndTheEvictedShapeIsRecaptured) {
  std::unique_ptr<LoadedModel> m = Load("capture: {max_instances_per_stream: 2}\n", 1);
  ASSERT_NE(m, nullptr);
  for (int rows : {1, 2, 4}) ASSERT_TRUE(Run(*m, *MakeRequest(rows, rows)).ok());
  CaptureStats s = m->capture_stats();
  EXPECT_EQ(s.captures, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.live_instances, 2u);
  std::vector<RuntimeInstanceInfo> list = m->ListRuntimeInstances();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].shape_signature, "input:[1,64]");  // sorted by signature
  EXPECT_EQ(list[0].state, "EVICTED");
  absl::Status dump = m->DumpRuntimeInstance(0, "input:[1,64]", false).status();
  EXPECT_EQ(dump.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dump.message(), HasSubstr("was evicted"));

  ASSERT_TRUE(Run(*m, *MakeRequest(1, 5)).ok());  // recaptured, evicting the LRU (2)
  s = m->capture_stats();
  EXPECT_EQ(s.captures, 4u);
  EXPECT_EQ(s.evictions, 2u);
  list = m->ListRuntimeInstances();
  EXPECT_EQ(list[0].state, "CAPTURED");
  EXPECT_EQ(list[0].captures, 2u);
  EXPECT_EQ(list[1].shape_signature, "input:[2,64]");
  EXPECT_EQ(list[1].state, "EVICTED");
}

TEST_F(EngineBatchingTest, BatchAboveTheLargestBucketRunsEagerly) {
  std::unique_ptr<LoadedModel> m = Load("capture: {buckets: [2]}\n", 1);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(Run(*m, *MakeRequest(1, 1)).ok());  // padded to 2
  absl::StatusOr<std::vector<OutputTensor>> out = Run(*m, *MakeRequest(3, 2));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (runtime::Shape{3, 10}));
  CaptureStats s = m->capture_stats();
  EXPECT_EQ(s.captures, 1u);
  EXPECT_EQ(s.eager_runs, 1u);
  std::vector<RuntimeInstanceInfo> list = m->ListRuntimeInstances();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].shape_signature, "input:[2,64]");
  EXPECT_EQ(list[0].bucket, 2);
  EXPECT_EQ(list[1].shape_signature, "input:[3,64]");
  EXPECT_EQ(list[1].state, "EAGER");
  EXPECT_EQ(list[1].bucket, 0);
}

TEST_F(EngineBatchingTest, MemoryBudgetIsNeverExceeded) {
  // Learn one instance's arena size, then allow a budget for one instance only.
  std::unique_ptr<LoadedModel> probe = Load("capture: {buckets: [8]}\n", 1);
  ASSERT_NE(probe, nullptr);
  ASSERT_TRUE(Run(*probe, *MakeRequest(8, 1)).ok());
  const uint64_t one = probe->capture_stats().live_bytes;
  ASSERT_GT(one, 0u);
  probe.reset();

  options_.memory_budget_bytes = static_cast<int64_t>(one);
  SetUp();
  std::unique_ptr<LoadedModel> m = Load("capture: {buckets: [8]}\n", 2);
  ASSERT_NE(m, nullptr);
  std::unique_ptr<Request> r = MakeRequest(8, 1);
  ASSERT_TRUE(Run(*m, *r).ok());
  // A second stream has no room left (the first stream's instance is not its to evict): it
  // still answers, from a plan made for the run alone.
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] { ASSERT_TRUE(Run(*m, *r).ok()); });
  }
  for (std::thread& t : clients) t.join();
  CaptureStats s = m->capture_stats();
  EXPECT_LE(s.live_bytes, one);
  EXPECT_EQ(s.live_instances, 1u);
}

TEST_F(EngineBatchingTest, ADeadlineCenturiesAwayDoesNotWrapIntoThePast) {
  // Past int64 nanoseconds from now: the queue's deadline must saturate, not overflow into a
  // deadline that has already passed.
  std::unique_ptr<LoadedModel> m = Load("", 1);
  ASSERT_NE(m, nullptr);
  std::unique_ptr<Request> r = MakeRequest(1, 1);
  InferOptions o;
  o.deadline = absl::Now() + absl::Hours(24 * 365 * 1000);
  const std::vector<std::string> out = {"output"};
  absl::StatusOr<std::vector<OutputTensor>> result = m->Infer(r->inputs, out, o, nullptr);
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_F(EngineBatchingTest, PriorityOutOfRangeIsRefused) {
  std::unique_ptr<LoadedModel> m = Load("dynamic_batching: {priority_levels: 2}\n", 1);
  ASSERT_NE(m, nullptr);
  std::unique_ptr<Request> r = MakeRequest(1, 1);
  InferOptions o;
  o.priority = 3;
  const std::vector<std::string> out = {"output"};
  absl::Status s = m->Infer(r->inputs, out, o, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("priority 3"));
  o.priority = 1;
  EXPECT_TRUE(m->Infer(r->inputs, out, o, nullptr).ok());
}

}  // namespace
}  // namespace reprise::server
