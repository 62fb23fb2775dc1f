#include "runtime/engine/branch_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"
#include "runtime/engine/control_flow.h"
#include "runtime/engine/memory_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::AddSameConv;
using ::testing::ElementsAre;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::LaneClashes;
using testing::ModelBuilder;
using testing::RandomFloats;

BranchStep Step(int64_t cost, std::vector<int> deps) {
  BranchStep step;
  step.cost_ns = cost;
  step.deps = std::move(deps);
  return step;
}

// stem; four branches of the stem (1, 2, 2 and 2 steps); a concat of the four.
std::vector<BranchStep> InceptionSteps(int64_t cost) {
  return {Step(cost, {}),  Step(cost, {0}), Step(cost, {0}),
          Step(cost, {2}), Step(cost, {0}), Step(cost, {4}),
          Step(cost, {0}), Step(cost, {6}), Step(cost, {1, 3, 5, 7})};
}

BranchOptions Lanes(int lanes) {
  BranchOptions options;
  options.max_lanes = lanes;
  options.threads = lanes;
  return options;
}

TEST(PlanBranchesTest, InceptionBlockForksBetweenStemAndConcat) {
  const std::vector<ParallelRegion> regions = PlanBranches(InceptionSteps(100'000), Lanes(2));
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].first, 1);
  EXPECT_EQ(regions[0].end, 8);
  ASSERT_EQ(regions[0].lanes.size(), 2u);
  // Branches stay whole (a branch's steps on one lane) and every step is placed once.
  std::vector<int> all;
  for (const auto& lane : regions[0].lanes) {
    EXPECT_TRUE(std::is_sorted(lane.begin(), lane.end()));
    all.insert(all.end(), lane.begin(), lane.end());
    for (auto [a, b] : {std::pair{2, 3}, std::pair{4, 5}, std::pair{6, 7}}) {
      EXPECT_EQ(std::count(lane.begin(), lane.end(), a), std::count(lane.begin(), lane.end(), b));
    }
  }
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  // Loads 300/400 or so: lane 0 (the origin) is the heavier.
  EXPECT_GE(regions[0].lanes[0].size(), regions[0].lanes[1].size());

  const std::vector<ParallelRegion> four = PlanBranches(InceptionSteps(100'000), Lanes(4));
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].lanes.size(), 4u);
}

TEST(PlanBranchesTest, ChainsCheapBranchesAndOneLaneNeverFork) {
  std::vector<BranchStep> chain;
  for (int i = 0; i < 10; ++i)
    chain.push_back(Step(1'000'000, i == 0 ? std::vector<int>{} : std::vector<int>{i - 1}));
  EXPECT_TRUE(PlanBranches(chain, Lanes(4)).empty());
  EXPECT_TRUE(PlanBranches(InceptionSteps(5'000), Lanes(2)).empty());  // below the threshold
  EXPECT_TRUE(PlanBranches(InceptionSteps(100'000), Lanes(1)).empty());
  // A residual block (x -> a -> b; add(b, x)) has one branch only.
  std::vector<BranchStep> residual = {Step(1'000'000, {}), Step(1'000'000, {0}),
                                      Step(1'000'000, {1}), Step(1'000'000, {2, 0})};
  EXPECT_TRUE(PlanBranches(residual, Lanes(2)).empty());
}

// stem; two branches of the stem of `a` and `b` (two steps each); a join of the two.
std::vector<BranchStep> TwoBranches(int64_t a, int64_t b) {
  return {Step(a, {}),      Step(a / 2, {0}), Step(a / 2, {1}),
          Step(b / 2, {0}), Step(b / 2, {3}), Step(a, {2, 4})};
}

TEST(PlanBranchesTest, ForksWhenTheSlowestLaneBeatsTheStepsOnAllThreads) {
  // Small steps gain little from a second thread: they fork even 100 against 40.
  EXPECT_EQ(PlanBranches(TwoBranches(100'000, 40'000), Lanes(2)).size(), 1u);
  // Large ones gain almost as much from it as from a fork: they fork only when even.
  EXPECT_EQ(PlanBranches(TwoBranches(14'000'000, 14'000'000), Lanes(2)).size(), 1u);
  EXPECT_TRUE(PlanBranches(TwoBranches(20'000'000, 8'000'000), Lanes(2)).empty());
  // A thread that adds nothing: any two lanes pay.
  BranchOptions flat = Lanes(2);
  flat.thread_efficiency = 0;
  EXPECT_EQ(PlanBranches(TwoBranches(20'000'000, 8'000'000), flat).size(), 1u);
  // Four threads on two lanes: each lane keeps two.
  BranchOptions wide = Lanes(2);
  wide.threads = 4;
  EXPECT_EQ(PlanBranches(TwoBranches(14'000'000, 14'000'000), wide).size(), 1u);
  EXPECT_TRUE(PlanBranches(TwoBranches(20'000'000, 8'000'000), wide).empty());
}

TEST(PlanBranchesTest, TwoBlocksGiveTwoRegions) {
  std::vector<BranchStep> steps = InceptionSteps(100'000);
  const int concat = static_cast<int>(steps.size()) - 1;
  for (int b = 0; b < 3; ++b) steps.push_back(Step(100'000, {concat}));
  const int n = static_cast<int>(steps.size());
  steps.push_back(Step(100'000, {n - 3, n - 2, n - 1}));
  const std::vector<ParallelRegion> regions = PlanBranches(steps, Lanes(2));
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[1].first, concat + 1);
  EXPECT_EQ(regions[1].end, n);
}

TEST(PlanMemoryLanesTest, ParallelLanesNeverShareBytes) {
  // Two buffers live at different steps: sequentially they share bytes; on two lanes of one
  // region they must not; on one lane they may.
  const std::vector<BufferLifetime> buffers = {{4096, 1, 1}, {4096, 2, 2}};
  EXPECT_EQ(PlanMemory(buffers).arena_bytes, 4096u);
  const MemoryPlan parallel = PlanMemory(buffers, {{0, 0}, {0, 1}});
  EXPECT_EQ(parallel.arena_bytes, 8192u);
  EXPECT_NE(parallel.offsets[0], parallel.offsets[1]);
  EXPECT_EQ(PlanMemory(buffers, {{0, 1}, {0, 1}}).arena_bytes, 4096u);
  EXPECT_EQ(PlanMemory(buffers, {{0, 0}, {1, 1}}).arena_bytes, 4096u);  // other regions
}

void AddInts(onnx::NodeProto& node, const std::string& name, std::vector<int64_t> values) {
  auto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) attr->add_ints(v);
}

// An Inception block of `c_in` channels: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3; 3x3 max pool ->
// 1x1; concatenated (8 + 16 + 8 + 8 = 40 channels).
void AddInceptionBlock(ModelBuilder& b, const std::string& p, const std::string& in,
                       const std::string& out, int64_t c_in, uint32_t seed) {
  AddSameConv(b, p + "b1", in, p + "b1", c_in, 8, 1, seed);
  AddSameConv(b, p + "b2a", in, p + "b2a", c_in, 8, 1, seed + 2);
  b.Node("Relu", {p + "b2a"}, {p + "b2r"});
  AddSameConv(b, p + "b2b", p + "b2r", p + "b2", 8, 16, 3, seed + 4);
  AddSameConv(b, p + "b3a", in, p + "b3a", c_in, 8, 1, seed + 6);
  AddSameConv(b, p + "b3b", p + "b3a", p + "b3b", 8, 8, 3, seed + 8);
  AddSameConv(b, p + "b3c", p + "b3b", p + "b3", 8, 8, 3, seed + 10);
  auto& pool = b.Node("MaxPool", {in}, {p + "b4p"}, p + "pool");
  AddInts(pool, "kernel_shape", {3, 3});
  AddInts(pool, "pads", {1, 1, 1, 1});
  AddSameConv(b, p + "b4", p + "b4p", p + "b4", c_in, 8, 1, seed + 12);
  auto& concat = b.Node("Concat", {p + "b1", p + "b2", p + "b3", p + "b4"}, {out}, p + "concat");
  testing::SetIntAttr(&concat, "axis", 1);
}

constexpr int64_t kSide = 32;

// stem conv -> two Inception blocks -> a 1x1 conv.
std::string InceptionModel() {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, kSide, kSide}).Output("y", {1, 8, kSide, kSide});
  AddSameConv(b, "stem", "x", "s", 8, 16, 3, 1);
  b.Node("Relu", {"s"}, {"stem_out"});
  AddInceptionBlock(b, "i1_", "stem_out", "block1", 16, 100);
  AddInceptionBlock(b, "i2_", "block1", "block2", 40, 200);
  AddSameConv(b, "head", "block2", "y", 40, 8, 1, 300);
  return b.Bytes();
}

std::string ChainModel() {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, kSide, kSide}).Output("y", {1, 8, kSide, kSide});
  AddSameConv(b, "a", "x", "a", 8, 16, 3, 1);
  b.Node("Relu", {"a"}, {"ar"});
  AddSameConv(b, "b", "ar", "b", 16, 16, 3, 3);
  AddSameConv(b, "c", "b", "y", 16, 8, 3, 5);
  return b.Bytes();
}

// The CPU device with its kernels (CoreTest).
class BranchCaptureTest : public runtime::testing::CoreTest {
 protected:
  std::shared_ptr<const Model> Load(const std::string& bytes, int threads, int branch_streams) {
    ModelOptions options;
    options.intra_op_threads = threads;
    options.max_branch_streams = branch_streams;
    auto model = Model::LoadBytes(bytes, *device_->kernels(), options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  std::vector<float> RunOnce(StreamSession& session, const TensorValue& x,
                             StreamRunInfo* info = nullptr) {
    auto outputs = session.Run({NamedTensor{"x", x}}, info);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    return outputs.ok() ? testing::Floats((*outputs)[0].value) : std::vector<float>{};
  }
};

TensorValue Input(uint32_t seed) {
  return FloatTensor({1, 8, kSide, kSide}, RandomFloats(8 * kSide * kSide, seed));
}

TEST_F(BranchCaptureTest, InceptionPlanForksAndKeepsLanesApartInTheArena) {
  auto model = Load(InceptionModel(), 2, 0);
  ASSERT_NE(model, nullptr);
  auto plan = model->Plan({{1, 8, kSide, kSide}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<ParallelRegion>& regions = (*plan)->parallel_regions();
  ASSERT_EQ(regions.size(), 2u);  // one per block
  EXPECT_EQ((*plan)->num_streams(), 2);
  for (const ParallelRegion& region : regions) EXPECT_EQ(region.lanes.size(), 2u);
  // No step on one lane writes what a step on the other reads or writes.
  const std::vector<std::string> clashes = LaneClashes(**plan);
  EXPECT_TRUE(clashes.empty()) << absl::StrJoin(clashes, "\n");
}

TEST_F(BranchCaptureTest, InceptionReplaysOnTwoStreamsAndMatchesEager) {
  auto forked = Load(InceptionModel(), 2, 0);
  auto single = Load(InceptionModel(), 2, 1);
  ASSERT_NE(forked, nullptr);
  ASSERT_NE(single, nullptr);
  // The plans keep their two threads (a session may otherwise time this small model onto one,
  // which never forks: StreamSessionOptions::choose_threads).
  StreamSessionOptions keep_threads;
  keep_threads.choose_threads = false;
  auto replay = StreamSession::Create(forked, device_, ExecMode::kReplay, keep_threads);
  auto eager = StreamSession::Create(forked, device_, ExecMode::kEager, keep_threads);
  auto one_stream = StreamSession::Create(single, device_, ExecMode::kReplay, keep_threads);
  ASSERT_TRUE(replay.ok() && eager.ok() && one_stream.ok());

  for (uint32_t seed : {11u, 12u, 13u}) {
    const TensorValue x = Input(seed);
    StreamRunInfo info;
    const std::vector<float> first = RunOnce(**replay, x, &info);
    ASSERT_FALSE(first.empty());
    EXPECT_TRUE(info.replayed);
    EXPECT_FALSE(info.eager) << info.capture_error;
    // The same kernels in plan order on one thread: bit for bit.
    EXPECT_EQ(first, RunOnce(**eager, x));
    // Kernels prepared with two threads on one stream: equal within float rounding.
    const std::vector<float> reference = RunOnce(**one_stream, x);
    ASSERT_EQ(reference.size(), first.size());
    float scale = 0;
    for (float v : reference) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < first.size(); ++i) {
      ASSERT_NEAR(first[i], reference[i], 1e-5f * std::max(scale, 1.0f)) << "element " << i;
    }
    // Replays are stable.
    for (int r = 0; r < 5; ++r) ASSERT_EQ(RunOnce(**replay, x), first) << "replay " << r;
  }
  const std::vector<StreamInstanceInfo> instances = (*replay)->ListInstances();
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_EQ(instances[0].state, "captured");
  auto dump = (*replay)->DumpInstance(instances[0].shape_signature, false);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("\"num_streams\": 2"));
  auto dump_single = (*one_stream)->DumpInstance(instances[0].shape_signature, false);
  ASSERT_TRUE(dump_single.ok()) << dump_single.status();
  EXPECT_THAT(*dump_single, HasSubstr("\"num_streams\": 1"));
}

TEST_F(BranchCaptureTest, CaptureForksOntoHelperStreamsAndJoins) {
  auto model = Load(InceptionModel(), 4, 4);
  ASSERT_NE(model, nullptr);
  auto plan = model->Plan({{1, 8, kSide, kSide}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int streams = (*plan)->num_streams();
  EXPECT_GT(streams, 2);  // four branches, four threads
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(BeginCapture(stream->get(), CaptureMode::kThreadLocal).ok());
  BodyStreams bodies(device_);
  BranchStreams branches(device_);
  CaptureScope scope;
  scope.root = GetCaptureInfo(stream->get()).instance;
  scope.bodies = &bodies;
  scope.branches = &branches;
  ASSERT_TRUE(EnqueuePlan(**plan, stream->get(), &scope).ok());
  auto ri = EndCapture(stream->get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ((*ri)->NumStreams(), static_cast<size_t>(streams));

  const TensorValue x = Input(21);
  auto eager = (*plan)->Run({&x});
  ASSERT_TRUE(eager.ok()) << eager.status();
  const std::vector<float> expected = testing::Floats((*eager)[0].value);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE((*plan)->StageInput(0, x).ok());
    ASSERT_TRUE((*ri)->Execute(stream->get()).ok());
    EXPECT_EQ(testing::Floats((*plan)->ReadOutput(0)), expected) << "replay " << r;
  }
}

TEST_F(BranchCaptureTest, ChainsAndOneThreadStayOnOneStream) {
  auto chain = Load(ChainModel(), 2, 0);
  ASSERT_NE(chain, nullptr);
  auto plan = chain->Plan({{1, 8, kSide, kSide}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE((*plan)->parallel_regions().empty());
  EXPECT_EQ((*plan)->num_streams(), 1);

  auto one_thread = Load(InceptionModel(), 1, 0);  // the default: no thread to spare
  ASSERT_NE(one_thread, nullptr);
  plan = one_thread->Plan({{1, 8, kSide, kSide}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE((*plan)->parallel_regions().empty());

  auto session = StreamSession::Create(chain, device_, ExecMode::kReplay);
  ASSERT_TRUE(session.ok());
  ASSERT_FALSE(RunOnce(**session, Input(3)).empty());
  const auto instances = (*session)->ListInstances();
  ASSERT_EQ(instances.size(), 1u);
  auto dump = (*session)->DumpInstance(instances[0].shape_signature, false);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("\"num_streams\": 1"));
}

}  // namespace
}  // namespace reprise::runtime::engine
