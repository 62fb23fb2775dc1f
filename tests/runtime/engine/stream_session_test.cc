#include "runtime/engine/stream_session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

// A stream that forwards to a CPU stream, except that launching a "Div" kernel while capturing
// first synchronises the stream (an unsafe call, refused in every capture mode, which
// invalidates the capture): a kernel whose use makes capture fail. Because it is not a CPU
// stream, the CPU backend's instances also refuse to run on it (a failing first replay).
class ForwardingStream : public Stream {
 public:
  explicit ForwardingStream(std::unique_ptr<Stream> inner) : inner_(std::move(inner)) {}

  Device* device() const override { return inner_->device(); }
  uint64_t id() const override { return inner_->id(); }
  absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    return inner_->MemcpyAsync(dst, src, bytes, kind);
  }
  absl::Status MemsetAsync(void* dst, uint8_t value, size_t bytes) override {
    return inner_->MemsetAsync(dst, value, bytes);
  }
  absl::Status LaunchKernel(const PreparedKernel& kernel, std::span<const void* const> inputs,
                            std::span<void* const> outputs, void* workspace) override {
    if (kernel.op() == "Div" && inner_->GetCaptureInfo().status != CaptureStatus::kNone) {
      inner_->Synchronize().IgnoreError();  // refused: invalidates the capture
    }
    return inner_->LaunchKernel(kernel, inputs, outputs, workspace);
  }
  absl::Status LaunchHostFunc(HostFn fn, void* user_data) override {
    return inner_->LaunchHostFunc(fn, user_data);
  }
  absl::Status RecordEvent(Event* event) override { return inner_->RecordEvent(event); }
  absl::Status WaitEvent(Event* event) override { return inner_->WaitEvent(event); }
  absl::Status ResetEvent(Event* event) override { return inner_->ResetEvent(event); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<bool> Query() override { return inner_->Query(); }
  absl::Status BeginCapture(CaptureMode mode) override { return inner_->BeginCapture(mode); }
  absl::StatusOr<std::unique_ptr<ModelRI>> EndCapture() override { return inner_->EndCapture(); }
  CaptureInfo GetCaptureInfo() override { return inner_->GetCaptureInfo(); }
  absl::Status BeginBodyCapture(ModelRI* body, CaptureMode mode) override {
    return inner_->BeginBodyCapture(body, mode);
  }
  absl::Status EndBodyCapture() override { return inner_->EndBodyCapture(); }
  absl::StatusOr<std::vector<ModelRI*>> AddConditional(ConditionalKind kind,
                                                       ConditionHandle condition,
                                                       int num_bodies) override {
    return inner_->AddConditional(kind, condition, num_bodies);
  }
  absl::Status BeginTaskGroup() override { return inner_->BeginTaskGroup(); }
  absl::StatusOr<TaskGroup> EndTaskGroup() override { return inner_->EndTaskGroup(); }
  absl::Status BeginTaskUpdate(TaskGroup group) override { return inner_->BeginTaskUpdate(group); }
  absl::Status EndTaskUpdate() override { return inner_->EndTaskUpdate(); }

 private:
  std::unique_ptr<Stream> inner_;
};

// The CPU device, except that its streams are ForwardingStreams.
class ForwardingDevice : public Device {
 public:
  explicit ForwardingDevice(Device* inner) : inner_(inner) {}
  absl::string_view name() const override { return inner_->name(); }
  absl::StatusOr<void*> Malloc(size_t bytes) override { return inner_->Malloc(bytes); }
  absl::Status Free(void* ptr) override { return inner_->Free(ptr); }
  absl::StatusOr<void*> MallocHost(size_t bytes) override { return inner_->MallocHost(bytes); }
  absl::Status FreeHost(void* ptr) override { return inner_->FreeHost(ptr); }
  bool host_memory() const override { return inner_->host_memory(); }
  MemoryKind KindOf(const void* ptr) const override { return inner_->KindOf(ptr); }
  MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    return inner_->Memcpy(dst, src, bytes, kind);
  }
  absl::Status Memset(void* dst, uint8_t value, size_t bytes) override {
    return inner_->Memset(dst, value, bytes);
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, inner_->CreateStream());
    return std::unique_ptr<Stream>(new ForwardingStream(std::move(stream)));
  }
  Stream* default_stream() override { return inner_->default_stream(); }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(EventFlags flags) override {
    return inner_->CreateEvent(flags);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  KernelRegistry* kernels() override { return inner_->kernels(); }

 private:
  Device* inner_;
};

std::vector<float> Iota(size_t n, float start, float step) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = start + step * static_cast<float>(i);
  return values;
}

class StreamSessionTest : public runtime::testing::CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();  // the CPU device with its kernels
    if (HasFatalFailure()) return;
    // y = x * s + x;  z = y / s
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Input("s", onnx::TensorProto::FLOAT, {1});
    b.Output("y", {-1, 4}).Output("z", {-1, 4});
    b.Node("Mul", {"x", "s"}, {"t"}, "scale");
    b.Node("Add", {"t", "x"}, {"y"}, "residual");
    b.Node("Div", {"y", "s"}, {"z"}, "unscale");
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
    ASSERT_TRUE(model.ok()) << model.status();
    div_model_ = *model;

    model_ = ScaleModel(1);
    ASSERT_NE(model_, nullptr);
  }

  // y = x * s + x, its kernels prepared with `threads` intra-op threads.
  std::shared_ptr<const Model> ScaleModel(int threads) {
    ModelBuilder c;
    c.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Input("s", onnx::TensorProto::FLOAT, {1});
    c.Output("y", {-1, 4});
    c.Node("Mul", {"x", "s"}, {"t"}, "scale");
    c.Node("Add", {"t", "x"}, {"y"}, "residual");
    ModelOptions options;
    options.intra_op_threads = threads;
    auto model = Model::LoadBytes(c.Bytes(), *device_->kernels(), options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  std::unique_ptr<StreamSession> NewSession(std::shared_ptr<const Model> model, ExecMode mode,
                                            Device* device = nullptr,
                                            StreamSessionOptions options = {}) {
    auto session =
        StreamSession::Create(std::move(model), device ? device : device_, mode, options);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  static std::vector<NamedTensor> Inputs(int64_t n, float start, float scale) {
    return {{"x", FloatTensor({n, 4}, Iota(static_cast<size_t>(4 * n), start, 0.5f))},
            {"s", FloatTensor({1}, {scale})}};
  }

  // x * s + x for Inputs(n, start, scale).
  static std::vector<float> Expected(int64_t n, float start, float scale) {
    std::vector<float> out;
    for (float x : Iota(static_cast<size_t>(4 * n), start, 0.5f)) out.push_back(x * scale + x);
    return out;
  }

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Model> div_model_;
};

// Host plans and device plans (DevicePlan on the CPU backend: relocated buffers, pinned
// staging, recorded copies), replayed and eager, all equal one plain run of the plan.
TEST_F(StreamSessionTest, ReplayEqualsEagerEqualsThePlan) {
  StreamSessionOptions on_device;
  on_device.device_plans = true;
  auto replay = NewSession(div_model_, ExecMode::kReplay);
  auto eager = NewSession(div_model_, ExecMode::kEager);
  auto device_replay = NewSession(div_model_, ExecMode::kReplay, nullptr, on_device);
  auto device_eager = NewSession(div_model_, ExecMode::kEager, nullptr, on_device);
  ASSERT_NE(replay, nullptr);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(device_replay, nullptr);
  ASSERT_NE(device_eager, nullptr);
  EXPECT_FALSE(replay->device_plans());
  EXPECT_TRUE(device_replay->device_plans());
  for (auto [n, start, scale] : {std::tuple<int64_t, float, float>{1, 0.f, 2.f},
                                 {3, -1.f, 0.25f},
                                 {1, 7.f, -3.f},
                                 {3, 2.f, 5.f},
                                 {2, 1.f, 1.f}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " start=" << start << " scale=" << scale);
    auto want = testing::RunPlan(*div_model_, Inputs(n, start, scale));
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(want->size(), 2u);
    EXPECT_EQ(Floats((*want)[0].value), Expected(n, start, scale));
    for (StreamSession* session :
         {replay.get(), eager.get(), device_replay.get(), device_eager.get()}) {
      auto got = session->Run(Inputs(n, start, scale));
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ((*got)[i].name, (*want)[i].name);
        EXPECT_EQ((*got)[i].value.shape, (*want)[i].value.shape);
        EXPECT_EQ(Floats((*got)[i].value), Floats((*want)[i].value));
      }
    }
  }
  EXPECT_EQ(replay->mode(), ExecMode::kReplay);
  EXPECT_EQ(eager->mode(), ExecMode::kEager);
  // Three shapes, each captured once on the device path too; replays count every run.
  EXPECT_EQ(device_replay->counters().captures, 3u);
  EXPECT_EQ(device_replay->counters().replays, 5u);
  EXPECT_EQ(device_eager->counters().eager_runs, 5u);
  EXPECT_EQ(&replay->model(), div_model_.get());
}

TEST_F(StreamSessionTest, SecondRunOfAShapeReplaysAndANewShapeCaptures) {
  auto session = NewSession(model_, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  StreamRunInfo info;

  auto out = session->Run(Inputs(1, 0, 2), &info);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Expected(1, 0, 2));
  EXPECT_TRUE(info.planned);
  EXPECT_TRUE(info.captured);
  EXPECT_TRUE(info.replayed);
  EXPECT_FALSE(info.eager);

  // Same shape, other values: the instance reads the new inputs from the plan's buffers.
  out = session->Run(Inputs(1, 10, -1.5f), &info);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Expected(1, 10, -1.5f));
  EXPECT_FALSE(info.planned);
  EXPECT_FALSE(info.captured);
  EXPECT_TRUE(info.replayed);
  EXPECT_FALSE(info.eager);
  EXPECT_EQ(info.capture_ns, 0);

  out = session->Run(Inputs(3, 1, 3), &info);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Expected(3, 1, 3));
  EXPECT_TRUE(info.planned);
  EXPECT_TRUE(info.captured);
  EXPECT_TRUE(info.replayed);

  out = session->Run(Inputs(1, 4, 4), &info);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Expected(1, 4, 4));
  EXPECT_FALSE(info.captured);

  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].shape_signature, "x:[1,4];s:[1]");
  EXPECT_EQ(list[0].state, "captured");
  EXPECT_EQ(list[0].captures, 1u);
  EXPECT_EQ(list[0].replays, 3u);
  EXPECT_EQ(list[0].eager_runs, 0u);
  EXPECT_GT(list[0].capture_ns, 0);
  EXPECT_GT(list[0].arena_bytes, 0u);
  EXPECT_GT(list[0].last_used_ms, 0);
  EXPECT_EQ(list[1].shape_signature, "x:[3,4];s:[1]");
  EXPECT_EQ(list[1].captures, 1u);
  EXPECT_EQ(list[1].replays, 1u);
  EXPECT_EQ(ShapeSignature(Inputs(3, 0, 1)), "x:[3,4];s:[1]");
}

TEST_F(StreamSessionTest, PlansOfAStreamShareOneArenaSizedForTheLargest) {
  auto session = NewSession(model_, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  // Largest first (as the warm-up does): every later, smaller plan shares its arena.
  ASSERT_TRUE(session->Run(Inputs(64, 0, 2)).ok());
  const uint64_t large = session->counters().arena_bytes;
  ASSERT_GT(large, 0u);
  for (int64_t n : {1, 2, 16}) {
    auto out = session->Run(Inputs(n, 1, 3));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), Expected(n, 1, 3));
  }
  EXPECT_EQ(session->counters().live_instances, 4u);
  EXPECT_EQ(session->counters().arena_bytes, large);  // one arena, not four
  uint64_t sum = 0;
  for (const StreamInstanceInfo& i : session->ListInstances()) sum += i.arena_bytes;
  EXPECT_GT(sum, large);
  // Replays taking turns on the shared arena still compute each their own values.
  for (int round = 0; round < 3; ++round) {
    for (int64_t n : {64, 1, 16, 2}) {
      const float start = static_cast<float>(round * 10 + n);
      auto out = session->Run(Inputs(n, start, -0.5f));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Floats((*out)[0].value), Expected(n, start, -0.5f)) << "n=" << n;
    }
  }
  EXPECT_EQ(session->counters().captures, 4u);
}

TEST_F(StreamSessionTest, ALargerPlanBringsALargerArenaThatLaterPlansShare) {
  auto session = NewSession(model_, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run(Inputs(1, 0, 2)).ok());
  const uint64_t small = session->counters().arena_bytes;
  ASSERT_TRUE(session->Run(Inputs(64, 0, 2)).ok());
  const uint64_t both = session->counters().arena_bytes;
  EXPECT_GT(both, small);  // the first plan keeps its arena, the larger one has its own
  ASSERT_TRUE(session->Run(Inputs(2, 0, 2)).ok());
  EXPECT_EQ(session->counters().arena_bytes, both);  // the new plan shares the larger arena
  auto out = session->Run(Inputs(1, 5, 2));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Expected(1, 5, 2));
}

TEST_F(StreamSessionTest, EagerModeNeverCaptures) {
  auto session = NewSession(model_, ExecMode::kEager);
  ASSERT_NE(session, nullptr);
  StreamRunInfo info;
  for (int i = 0; i < 3; ++i) {
    auto out = session->Run(Inputs(2, static_cast<float>(i), 2), &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), Expected(2, static_cast<float>(i), 2));
    EXPECT_TRUE(info.eager);
    EXPECT_FALSE(info.captured);
    EXPECT_FALSE(info.replayed);
    EXPECT_EQ(info.planned, i == 0);
  }
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, "eager");
  EXPECT_EQ(list[0].eager_runs, 3u);
  EXPECT_EQ(list[0].captures, 0u);
  auto dump = session->DumpInstance("x:[2,4];s:[1]", false);
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StreamSessionTest, TwoSessionsOnTwoStreamsRunConcurrently) {
  auto a = NewSession(div_model_, ExecMode::kReplay);
  auto b = NewSession(div_model_, ExecMode::kReplay);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<int> failures(2, 0);
  std::vector<int> replays(2, 0);
  auto work = [&](StreamSession* session, int t) {
    for (int i = 0; i < 60; ++i) {
      const int64_t n = 1 + (i + t) % 3;  // both threads capture and replay all three shapes
      const float start = static_cast<float>(t * 1000 + i);
      const float scale = 1.0f + static_cast<float>(i % 7);
      StreamRunInfo info;
      auto out = session->Run(Inputs(n, start, scale), &info);
      if (!out.ok() || Floats((*out)[0].value) != Expected(n, start, scale)) ++failures[t];
      if (info.replayed && !info.captured) ++replays[t];
      if (i % 10 == 0) session->ListInstances();  // read while the other thread runs
    }
  };
  std::thread ta(work, a.get(), 0);
  std::thread tb(work, b.get(), 1);
  ta.join();
  tb.join();
  EXPECT_EQ(failures, std::vector<int>(2, 0));
  EXPECT_EQ(replays, std::vector<int>(2, 57));  // 60 runs, 3 of them capture
  for (StreamSession* session : {a.get(), b.get()}) {
    std::vector<StreamInstanceInfo> list = session->ListInstances();
    ASSERT_EQ(list.size(), 3u);
    for (const StreamInstanceInfo& instance : list) EXPECT_EQ(instance.state, "captured");
  }
}

TEST_F(StreamSessionTest, ListAndDumpFromAnotherThreadWhileRunning) {
  auto session = NewSession(model_, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  std::atomic<bool> done{false};
  int bad_dumps = 0;
  std::thread reader([&] {
    while (!done.load()) {
      for (const StreamInstanceInfo& instance : session->ListInstances()) {
        auto dump = session->DumpInstance(instance.shape_signature, true);
        // NOT_FOUND while the first run of a signature is still capturing.
        if (dump.ok() ? dump->find("\"Mul\"") == std::string::npos
                      : dump.status().code() != absl::StatusCode::kNotFound) {
          ++bad_dumps;
        }
      }
    }
  });
  int failures = 0;
  for (int i = 0; i < 100; ++i) {
    const int64_t n = 1 + i % 2;
    auto out = session->Run(Inputs(n, static_cast<float>(i), 2));
    if (!out.ok() || Floats((*out)[0].value) != Expected(n, static_cast<float>(i), 2)) {
      ++failures;
    }
  }
  done.store(true);
  reader.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(session->ListInstances().size(), 2u);
  EXPECT_EQ(bad_dumps, 0);
  auto dump = session->DumpInstance("x:[2,4];s:[1]", false);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("\"Add\""));
}

TEST_F(StreamSessionTest, InvalidatedCaptureFallsBackToEager) {
  ForwardingDevice device(device_);
  auto session = NewSession(div_model_, ExecMode::kReplay, &device);
  ASSERT_NE(session, nullptr);
  for (int i = 0; i < 3; ++i) {
    StreamRunInfo info;
    auto out = session->Run(Inputs(2, static_cast<float>(i), 4), &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), Expected(2, static_cast<float>(i), 4));
    EXPECT_TRUE(info.eager);
    EXPECT_FALSE(info.captured);
    EXPECT_FALSE(info.replayed);
    if (i == 0) {
      EXPECT_TRUE(info.planned);
      EXPECT_GT(info.capture_ns, 0);  // the capture was tried
    } else {
      EXPECT_EQ(info.capture_ns, 0);  // and never again
    }
  }
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, "eager");
  EXPECT_THAT(list[0].reason, HasSubstr("invalidated (stream synchronize"));
  EXPECT_EQ(list[0].captures, 0u);
  EXPECT_EQ(list[0].eager_runs, 3u);
  auto dump = session->DumpInstance(list[0].shape_signature, false);
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dump.status().message(), HasSubstr("runs eagerly"));
}

TEST_F(StreamSessionTest, FailedFirstReplayFallsBackToEager) {
  ForwardingDevice device(device_);  // capture works; CPU instances refuse to run on its stream
  auto session = NewSession(model_, ExecMode::kReplay, &device);
  ASSERT_NE(session, nullptr);
  for (int i = 0; i < 2; ++i) {
    StreamRunInfo info;
    auto out = session->Run(Inputs(1, static_cast<float>(i), -2), &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), Expected(1, static_cast<float>(i), -2));
    EXPECT_TRUE(info.eager);
    EXPECT_FALSE(info.replayed);
  }
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, "eager");
  EXPECT_THAT(list[0].reason, HasSubstr("first replay"));
  EXPECT_EQ(list[0].replays, 0u);
  EXPECT_EQ(list[0].eager_runs, 2u);
}

TEST_F(StreamSessionTest, DumpInstanceIsJsonNamingTheOps) {
  auto session = NewSession(div_model_, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run(Inputs(2, 0, 2)).ok());
  for (bool verbose : {false, true}) {
    auto dump = session->DumpInstance("x:[2,4];s:[1]", verbose);
    ASSERT_TRUE(dump.ok()) << dump.status();
    runtime::testing::CheckJsonWithPython(
        *dump,
        "ops=[t[\"op\"] for s in d[\"streams\"] for t in s[\"tasks\"] if t[\"kind\"]==\"kernel\"]; "
        "assert ops==[\"Mul\",\"Add\",\"Div\"], ops");
  }
  auto missing = session->DumpInstance("x:[5,4];s:[1]", false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("x:[5,4];s:[1]"));
}

TEST_F(StreamSessionTest, BadInputsGiveTheEnginesErrors) {
  for (ExecMode mode : {ExecMode::kReplay, ExecMode::kEager}) {
    auto session = NewSession(model_, mode);
    ASSERT_NE(session, nullptr);
    // Every refusal's text: stream_session_cache_test. Here: in both modes, nothing is planned
    // for a bad input and the session still runs a good one.
    const TensorValue x = FloatTensor({1, 4}, {1, 2, 3, 4});
    const TensorValue s = FloatTensor({1}, {2});
    auto out = session->Run({{"x", FloatTensor({2, 3}, std::vector<float>(6))}, {"s", s}});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has shape [2,3], expected [N,4]"));
    EXPECT_TRUE(session->ListInstances().empty());
    // A good run afterwards still works.
    out = session->Run({{"x", x}, {"s", s}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{3, 6, 9, 12}));
  }
}

TEST(StreamSessionValueKeyTest, ShapeGivenAsAnInputKeysInstancesByValue) {
  auto backend = CreateBackend("cpu");
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto device = (*backend)->device(0);
  ASSERT_TRUE(device.ok());
  KernelRegistry* registry = (*device)->kernels();
  if (!registry->Has("Add")) {
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(registry).ok());
  }
  if (!registry->Has("Reshape")) testing::RegisterFakeShapeKernels(registry);
  ModelBuilder b;
  // x is 2-D, so only "shape" is a value-key candidate.
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3}).Input("shape", onnx::TensorProto::INT64, {2});
  b.Output("y", {-1, -1});
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("Add", {"r", "r"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), *registry);
  ASSERT_TRUE(model.ok()) << model.status();
  auto shape_tensor = [](int64_t a, int64_t c) {
    TensorValue t{DataType::kInt64, {2}, ValueBytes(16, 0)};
    std::memcpy(t.bytes.data(), &a, 8);
    std::memcpy(t.bytes.data() + 8, &c, 8);
    return t;
  };
  auto session = StreamSession::Create(*model, *device, ExecMode::kReplay);
  ASSERT_TRUE(session.ok()) << session.status();
  const TensorValue x = FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2, 3}, {3, 2}, {2, 3}}) {
    StreamRunInfo info;
    auto out = (*session)->Run({{"x", x}, {"shape", shape_tensor(rows, cols)}}, &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{rows, cols}));
    EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    EXPECT_TRUE(info.replayed);
  }
  std::vector<StreamInstanceInfo> list = (*session)->ListInstances();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].shape_signature, "x:[2,3];shape:[2]=(2,3)");
  EXPECT_EQ(list[0].replays, 2u);
  EXPECT_EQ(list[1].shape_signature, "x:[2,3];shape:[2]=(3,2)");
  EXPECT_EQ(list[1].replays, 1u);
}

// A model with an op whose output size follows its input values (NonZero), not cut at it, is
// planned per input value: each distinct input gets its own plan (computed at plan time), the
// same input replays it, and the instance list shows the input's size, not its bytes.
// (value_split_test.cc: the same model cut, as it loads by default.)
TEST_F(StreamSessionTest, AValueDependentShapeIsPlannedPerInputValue) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 40}).Output("z", {2, -1}, onnx::TensorProto::INT64);
  b.Node("Relu", {"x"}, {"r"});
  b.Node("NonZero", {"r"}, {"z"});
  ModelOptions whole;
  whole.split_at_value_dependent_nodes = false;
  auto model = Model::LoadBytes(b.Bytes(), *device_->kernels(), whole);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->keyed_by_all_values());
  auto session = NewSession(*model, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  // -1 everywhere but at the given flat positions (80 elements: more than the 64 whose values
  // are shown as text).
  auto run = [&](std::vector<int> positive, StreamRunInfo* info) {
    std::vector<float> x(80, -1.0f);
    for (int p : positive) x[p] = 1.0f;
    return session->Run({{"x", FloatTensor({2, 40}, std::move(x))}}, info);
  };
  StreamRunInfo info;
  auto out = run({0, 41, 79}, &info);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].value.shape, (Shape{2, 3}));
  EXPECT_EQ(testing::Int64s((*out)[0].value), (std::vector<int64_t>{0, 1, 1, 0, 1, 39}));
  EXPECT_TRUE(info.planned);
  out = run({5}, &info);  // one hit: another plan, another shape
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].value.shape, (Shape{2, 1}));
  EXPECT_EQ(testing::Int64s((*out)[0].value), (std::vector<int64_t>{0, 5}));
  EXPECT_TRUE(info.planned);
  out = run({0, 41, 79}, &info);  // the first input again: its plan, replayed
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(testing::Int64s((*out)[0].value), (std::vector<int64_t>{0, 1, 1, 0, 1, 39}));
  EXPECT_FALSE(info.planned);
  EXPECT_TRUE(info.replayed);
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_NE(list[0].shape_signature, list[1].shape_signature);
  for (const StreamInstanceInfo& i : list) {
    EXPECT_THAT(i.shape_signature, ::testing::StartsWith("x:[2,40]=<320 bytes #"));
    EXPECT_TRUE(session->DumpInstance(i.shape_signature, false).ok());
  }

  // With one instance allowed, an evicted whole-input entry is forgotten, not remembered with
  // its key (which holds the input's bytes).
  StreamSessionOptions one;
  one.max_instances = 1;
  auto bounded = StreamSession::Create(*model, device_, ExecMode::kReplay, one);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  for (int p = 0; p < 5; ++p) {
    std::vector<float> x(80, -1.0f);
    x[p] = 1.0f;
    auto result = (*bounded)->Run({{"x", FloatTensor({2, 40}, std::move(x))}}, &info);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(testing::Int64s((*result)[0].value), (std::vector<int64_t>{0, p}));
  }
  EXPECT_EQ((*bounded)->ListInstances().size(), 1u);
}

// A value-keyed plan computes a chain of fused convolutions at plan time (as a detection
// model's backbone before its NonMaxSuppression). The chain keeps its values in channel blocks
// for a run; a value computed at plan time is plain, so the chain is computed plain. Twelve
// channels: the blocked layout pads them to the block, which the plain value does not hold (the
// second convolution copies its residual into its output, both blocked: it read past it).
TEST_F(StreamSessionTest, AValueKeyedPlanComputesAConvChainPlain) {
  auto chain = [&](bool nonzero) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8}).Output("y", {1, 12, 8, 8});
    b.FloatInit("w1", {12, 3, 3, 3}, testing::RandomFloats(12 * 3 * 9, 1));
    b.FloatInit("b1", {12}, testing::RandomFloats(12, 2));
    b.FloatInit("w2", {12, 12, 3, 3}, testing::RandomFloats(12 * 12 * 9, 3));
    b.FloatInit("b2", {12}, testing::RandomFloats(12, 4));
    testing::SetIntsAttr(&b.Node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
    b.Node("Relu", {"c1"}, {"r1"});
    testing::SetIntsAttr(&b.Node("Conv", {"r1", "w2", "b2"}, {"c2"}), "pads", {1, 1, 1, 1});
    b.Node("Add", {"c2", "r1"}, {"s2"});  // a residual, copied into Y (both blocked)
    b.Node("Relu", {"s2"}, {"r2"});
    testing::SetIntsAttr(&b.Node("Conv", {"r2", "w2", "b2"}, {"y"}), "pads", {1, 1, 1, 1});
    if (nonzero) {
      b.Output("z", {4, -1}, onnx::TensorProto::INT64);
      b.Node("NonZero", {"y"}, {"z"});
    }
    return Model::LoadBytes(b.Bytes(), *device_->kernels());
  };
  auto keyed = chain(true);
  ASSERT_TRUE(keyed.ok()) << keyed.status();
  ASSERT_TRUE((*keyed)->keyed_by_all_values());
  // The first two convolutions' outputs are kept blocked.
  const Graph& graph = (*keyed)->graph();
  EXPECT_TRUE(std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& node) {
    return node.attributes.GetString("y_layout", "nchw").value_or("") == "blocked";
  }));
  auto plain = chain(false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_FALSE((*plain)->keyed_by_all_values());

  const TensorValue x = FloatTensor({1, 3, 8, 8}, testing::RandomFloats(3 * 64, 5));
  auto keyed_session = NewSession(*keyed, ExecMode::kReplay);
  auto plain_session = NewSession(*plain, ExecMode::kReplay);
  ASSERT_NE(keyed_session, nullptr);
  ASSERT_NE(plain_session, nullptr);
  StreamRunInfo info;
  auto got = keyed_session->Run({{"x", x}}, &info);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(info.planned);
  auto want = plain_session->Run({{"x", x}}, &info);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> y = Floats((*got)[0].value), expected = Floats((*want)[0].value);
  ASSERT_EQ(y.size(), expected.size());
  int64_t nonzero = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], expected[i], 1e-4f) << i;
    nonzero += y[i] != 0.0f ? 1 : 0;
  }
  EXPECT_EQ((*got)[1].value.shape, (Shape{4, nonzero}));
}

TEST(ClearlyFasterTest, ComparesMediansAndFastestRunsWithTheMargin) {
  // Medians 100 and 91, fastest runs 99 and 10: both under 0.92 of the current plan's.
  EXPECT_TRUE(ClearlyFaster({91, 500, 10}, {100, 99, 101}));
  // A median of 93 is not under 92: not clearly faster, whatever its fastest run.
  EXPECT_FALSE(ClearlyFaster({93, 1, 200}, {100, 100, 100}));
  // The median, not the mean: one slow outlier of the current plan does not decide.
  EXPECT_FALSE(ClearlyFaster({100, 100, 100}, {100, 99, 100000}));
  // Slow runs of the current plan (another process on a core) lift its median, not its
  // fastest run: not clearly faster.
  EXPECT_FALSE(ClearlyFaster({95, 95, 95}, {130, 130, 98}));
  EXPECT_TRUE(ClearlyFaster({50, 50, 50}, {100, 100, 100}, 0.6));
  EXPECT_FALSE(ClearlyFaster({50, 50, 50}, {100, 100, 100}, 0.4));
  EXPECT_FALSE(ClearlyFaster({}, {100}));
  EXPECT_FALSE(ClearlyFaster({1}, {}));
}

// StreamSessionOptions::choose_threads: a new plan of a multi-threaded model is timed against
// plans of fewer threads; which wins is the machine's business, so this checks the mechanism:
// the note's timings and choice, the instance's threads matching it, and the same results.
TEST_F(StreamSessionTest, ChoosesThreadsByTimingPlansOfFewer) {
  const std::shared_ptr<const Model> model = ScaleModel(4);
  ASSERT_NE(model, nullptr);

  auto chosen_threads = [](const std::string& note) {
    const size_t colon = note.rfind(": ");
    return colon == std::string::npos ? -1 : std::atoi(note.c_str() + colon + 2);
  };
  auto check_run = [&](StreamSession& session, int64_t n, StreamRunInfo* info) {
    auto got = session.Run(Inputs(n, 1.0f, 3.0f), info);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ(Floats((*got)[0].value), Expected(n, 1.0f, 3.0f));
  };

  // On: the first run of a shape times 4 threads against 2 (and against 1 while fewer win).
  auto session = NewSession(model, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  StreamRunInfo info;
  check_run(*session, 3, &info);
  EXPECT_GT(info.choose_ns, 0);
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  const std::string& note = list[0].threads_choice;
  EXPECT_THAT(note, ::testing::StartsWith("4 threads "));
  EXPECT_THAT(note, HasSubstr(", 2 threads "));
  EXPECT_THAT(note, ::testing::ContainsRegex(" run[s]?\\): [124]$"));
  const int threads = list[0].intra_op_threads;
  EXPECT_EQ(threads, chosen_threads(note)) << note;
  EXPECT_THAT(threads, ::testing::AnyOf(1, 2, 4));
  if (threads == 1) {
    EXPECT_THAT(note, HasSubstr(", 1 thread "));
  }
  // Later runs of the shape replay the chosen plan and time nothing.
  check_run(*session, 3, &info);
  EXPECT_TRUE(info.replayed);
  EXPECT_EQ(info.choose_ns, 0);
  EXPECT_EQ(session->ListInstances()[0].intra_op_threads, threads);

  // Off, a model of one thread, a limit no run meets, and device plans: the model's threads,
  // nothing timed.
  StreamSessionOptions off;
  off.choose_threads = false;
  StreamSessionOptions no_run_fits;
  no_run_fits.choose_threads_max_run_ns = 0;
  StreamSessionOptions on_device;
  on_device.device_plans = true;
  struct Case {
    const char* name;
    std::shared_ptr<const Model> model;
    StreamSessionOptions options;
    int threads;
  };
  for (const Case& c :
       {Case{"off", model, off, 4}, Case{"one thread", model_, {}, 1},
        Case{"no run fits", model, no_run_fits, 4}, Case{"device plans", model, on_device, 4}}) {
    SCOPED_TRACE(c.name);
    auto other = NewSession(c.model, ExecMode::kReplay, nullptr, c.options);
    ASSERT_NE(other, nullptr);
    check_run(*other, 2, &info);
    list = other->ListInstances();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].intra_op_threads, c.threads);
    EXPECT_EQ(list[0].threads_choice, "");
  }
}

// A model planned per input value (a NonZero at its end) computes its whole graph while planning;
// its plan has no steps, so no plan of fewer threads is made and timed for it (each would compute
// the graph again), and the result is the same.
TEST_F(StreamSessionTest, APlanComputedWhilePlanningIsNotTimedOnFewerThreads) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Input("s", onnx::TensorProto::FLOAT, {1});
  b.Output("z", {2, -1}, onnx::TensorProto::INT64);
  b.Node("Mul", {"x", "s"}, {"t"});
  b.Node("NonZero", {"t"}, {"z"});
  ModelOptions model_options;
  model_options.intra_op_threads = 4;
  model_options.split_at_value_dependent_nodes = false;  // the whole graph planned per input
  auto model = Model::LoadBytes(b.Bytes(), *device_->kernels(), model_options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->keyed_by_all_values());
  ASSERT_EQ((*model)->value_split(), nullptr);
  StreamSessionOptions options;
  int timed = 0;
  options.choose_threads_clock = [&timed](int threads, int64_t) {
    ++timed;
    return static_cast<int64_t>(threads) * 1'000'000;  // fewer threads would win
  };
  auto session = NewSession(*model, ExecMode::kReplay, nullptr, options);
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> inputs = {{"x", FloatTensor({2, 4}, {0, 1, 0, 2, 3, 0, 0, 4})},
                                     {"s", FloatTensor({1}, {2.0f})}};
  StreamRunInfo info;
  auto got = session->Run(inputs, &info);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(info.planned);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].value.shape, (Shape{2, 4}));
  const std::vector<int64_t> rows_and_columns = {0, 0, 1, 1, 1, 3, 0, 3};
  std::vector<int64_t> z((*got)[0].value.bytes.size() / sizeof(int64_t));
  std::memcpy(z.data(), (*got)[0].value.bytes.data(), (*got)[0].value.bytes.size());
  EXPECT_EQ(z, rows_and_columns);
  EXPECT_EQ(timed, 0);
  const std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].intra_op_threads, 4);
  EXPECT_EQ(list[0].threads_choice, "");
}

// The choice itself, on run times given by a fake clock (ms per thread count): fewer threads are
// kept while clearly faster, the first that is not ends the search, and a run over the limit
// times nothing.
TEST_F(StreamSessionTest, ChoosesTheFewestThreadsWhileClearlyFaster) {
  const std::shared_ptr<const Model> model = ScaleModel(4);
  ASSERT_NE(model, nullptr);
  struct Case {
    const char* name;
    std::map<int, double> ms;  // a run's time by its plan's threads
    int threads;
    std::string note;
  };
  for (const Case& c : {
           Case{"fewer always faster",
                {{4, 4}, {2, 2}, {1, 1}},
                1,
                "4 threads 4.00 ms (7 runs), 2 threads 2.00 ms (7 runs), 1 thread 1.00 ms "
                "(7 runs): 1"},
           // Two threads' first run takes over 1.25 times four threads' run: no more timing.
           Case{"more always faster",
                {{4, 1}, {2, 2}, {1, 4}},
                4,
                "4 threads 1.00 ms (1 run), 2 threads 2.00 ms (1 run): 4"},
           Case{"two threads best",
                {{4, 3}, {2, 2}, {1, 2.4}},
                2,
                "4 threads 3.00 ms (9 runs), 2 threads 2.00 ms (9 runs), 1 thread 2.40 ms "
                "(9 runs): 2"},
           // 0.97 of the time is within the 8 % margin: not worth fewer threads.
           Case{"within the margin",
                {{4, 1}, {2, 0.97}, {1, 0.5}},
                4,
                "4 threads 1.00 ms (9 runs), 2 threads 0.97 ms (9 runs): 4"},
           // Over choose_threads_max_run_ns (10 ms): nothing timed beyond the first runs.
           Case{"too long to time", {{4, 12}, {2, 1}, {1, 1}}, 4, ""},
       }) {
    SCOPED_TRACE(c.name);
    StreamSessionOptions options;
    std::map<int, int> runs;
    options.choose_threads_clock = [&c, &runs](int threads, int64_t) {
      ++runs[threads];
      return static_cast<int64_t>(c.ms.at(threads) * 1e6);
    };
    auto session = NewSession(model, ExecMode::kReplay, nullptr, options);
    ASSERT_NE(session, nullptr);
    auto got = session->Run(Inputs(2, 1.0f, 3.0f));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Floats((*got)[0].value), Expected(2, 1.0f, 3.0f));
    std::vector<StreamInstanceInfo> list = session->ListInstances();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].intra_op_threads, c.threads);
    EXPECT_EQ(list[0].threads_choice, c.note);
    // Two runs of the first plan before any trial; the later runs replay and time nothing.
    EXPECT_GE(runs[4], 2);
    const std::map<int, int> before = runs;
    ASSERT_TRUE(session->Run(Inputs(2, 1.0f, 3.0f)).ok());
    EXPECT_EQ(runs, before);
  }

  // The server's inputs are views without values (a batch's rows as pieces): the trial plans
  // run on those bytes too.
  StreamSessionOptions options;
  options.choose_threads_clock = [](int threads, int64_t) {
    return static_cast<int64_t>(threads) * 1'000'000;
  };
  auto session = NewSession(model, ExecMode::kReplay, nullptr, options);
  ASSERT_NE(session, nullptr);
  const std::vector<float> x = Iota(12, 1.0f, 0.5f), scale = {3.0f};
  InputView xv, sv;
  xv.dtype = sv.dtype = DataType::kFloat32;
  xv.shape = {3, 4};
  sv.shape = {1};
  xv.pieces.emplace_back(reinterpret_cast<const uint8_t*>(x.data()), 4 * sizeof(float));
  xv.pieces.emplace_back(reinterpret_cast<const uint8_t*>(x.data() + 4), 8 * sizeof(float));
  sv.pieces.emplace_back(reinterpret_cast<const uint8_t*>(scale.data()), sizeof(float));
  std::vector<float> got;
  absl::Status status =
      session->Run(Model::AssumeValidated({xv, sv}), [&](size_t, const PlanTensor& out) {
        got.assign(reinterpret_cast<const float*>(out.data),
                   reinterpret_cast<const float*>(out.data) + out.bytes / sizeof(float));
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(got, Expected(3, 1.0f, 3.0f));
  std::vector<StreamInstanceInfo> list = session->ListInstances();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].intra_op_threads, 1);
  EXPECT_EQ(list[0].threads_choice,
            "4 threads 4.00 ms (7 runs), 2 threads 2.00 ms (7 runs), 1 thread 1.00 ms (7 runs): 1");
}

// A run that captures replays the instance until its kernels have made their timed choices
// (here: whether a convolution's 144 KiB output is cleared first, at two threads), and returns
// the outputs all the same; later runs replay once. No such replays without a budget.
TEST_F(StreamSessionTest, TheCapturingRunReplaysUntilTheKernelsHaveChosen) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 48, 48});
  b.Output("y", {1, 16, 48, 48});
  testing::AddSameConv(b, "conv", "x", "y", 8, 16, 3, 5);
  ModelOptions model_options;
  model_options.intra_op_threads = 2;
  auto model = Model::LoadBytes(b.Bytes(), *device_->kernels(), model_options);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<NamedTensor> inputs = {
      {"x", FloatTensor({1, 8, 48, 48}, testing::RandomFloats(8 * 48 * 48, 9, -1.0f, 1.0f))}};
  auto want = testing::RunPlan(**model, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  bool keyed = false;
  auto plan = (*model)->PlanForInputs({&inputs[0].value}, &keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const uint64_t unsettled = (*plan)->settling_runs();
  ASSERT_GT(unsettled, 1u) << "no step chooses by timed runs here";
  for (const int64_t budget : {int64_t{2'000'000'000}, int64_t{0}}) {
    SCOPED_TRACE(budget);
    StreamSessionOptions options;
    options.choose_threads = false;  // no timed runs before the capture
    options.settle_budget_ns = budget;
    auto session = NewSession(*model, ExecMode::kReplay, nullptr, options);
    ASSERT_NE(session, nullptr);
    for (int run = 0; run < 2; ++run) {
      StreamRunInfo info;
      auto got = session->Run(inputs, &info);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(info.captured, run == 0);
      EXPECT_TRUE(info.replayed);
      // The capture's own replay, then the rest of the settling runs.
      EXPECT_EQ(info.settle_runs, run == 0 && budget > 0 ? static_cast<int>(unsettled) - 1 : 0);
      EXPECT_EQ(info.settle_ns > 0, info.settle_runs > 0);
      const std::vector<float> y = Floats((*got)[0].value), y_want = Floats((*want)[0].value);
      ASSERT_EQ(y.size(), y_want.size());
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_want[i], 1e-4f) << i;
    }
  }
}

}  // namespace
}  // namespace reprise::runtime::engine
