// Conditional tasks (IF / WHILE / SWITCH) with bodies captured into child instances
// (capture_semantics.md §4 and §7 scenario 2).
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

class ConditionalTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    add_ = PrepareBinary(device_, "Add");
    mul_ = PrepareBinary(device_, "Mul");
    x_ = DeviceFloats(SelfValues());
    y_ = DeviceFloats(2.0f);
    out_ = DeviceFloats(0.0f);
    auto pinned = device_->MallocHost(sizeof(uint32_t));
    ASSERT_TRUE(pinned.ok());
    selector_ = static_cast<uint32_t*>(pinned.value());
    *selector_ = 0;
    origin_ = NewStream();
    body_stream_ = NewStream();
  }

  void TearDown() override {
    EXPECT_TRUE(device_->FreeHost(selector_).ok());
    CoreTest::TearDown();
  }

  // Starts a capture whose first task copies the pinned selector into a new condition.
  ConditionHandle BeginWithCondition(uint32_t default_value, bool assign_default) {
    EXPECT_TRUE(BeginCapture(origin_.get(), CaptureMode::kGlobal).ok());
    ModelRI* filling = GetCaptureInfo(origin_.get()).instance;
    EXPECT_NE(filling, nullptr);
    auto condition = filling->CreateCondition(default_value, assign_default);
    EXPECT_TRUE(condition.ok()) << condition.status();
    return *condition;
  }

  void CopySelectorInto(const ConditionHandle& condition) {
    EXPECT_TRUE(
        origin_->MemcpyAsync(condition.value, selector_, sizeof(uint32_t), CopyKind::kHostToDevice)
            .ok());
  }

  // Captures `fn(body_stream_)` into `body`.
  template <typename Fn>
  void CaptureBody(ModelRI* body, Fn fn) {
    ASSERT_TRUE(body_stream_->BeginBodyCapture(body, CaptureMode::kGlobal).ok());
    fn(body_stream_.get());
    ASSERT_TRUE(body_stream_->EndBodyCapture().ok());
  }

  void Run(ModelRI& ri, uint32_t selector) {
    *selector_ = selector;
    std::fill(out_, out_ + kCount, -1.0f);
    ASSERT_TRUE(ExecuteAsync(ri, origin_.get()).ok());
    ASSERT_TRUE(origin_->Synchronize().ok());
  }

  void LaunchAdd(Stream* stream) {
    const void* in[] = {x_, y_};
    void* out[] = {out_};
    ASSERT_TRUE(stream->LaunchKernel(*add_, in, out, nullptr).ok());
  }
  void LaunchMul(Stream* stream) {
    const void* in[] = {x_, y_};
    void* out[] = {out_};
    ASSERT_TRUE(stream->LaunchKernel(*mul_, in, out, nullptr).ok());
  }

  std::vector<float> Sum() { return AddOther(SelfValues(), 1.0f); }
  std::vector<float> Product() {
    std::vector<float> out;
    for (float v : SelfValues()) out.push_back(v * 2.0f);
    return out;
  }

  std::unique_ptr<PreparedKernel> add_, mul_;
  float *x_, *y_, *out_;
  uint32_t* selector_ = nullptr;
  std::unique_ptr<Stream> origin_, body_stream_;
};

TEST_F(ConditionalTest, IfWithElseBody) {
  ConditionHandle condition = BeginWithCondition(0, true);
  CopySelectorInto(condition);
  auto bodies = origin_->AddConditional(ConditionalKind::kIf, condition, 2);
  ASSERT_TRUE(bodies.ok()) << bodies.status();
  ASSERT_EQ(bodies->size(), 2u);
  CaptureBody((*bodies)[0], [&](Stream* s) { LaunchAdd(s); });
  CaptureBody((*bodies)[1], [&](Stream* s) { LaunchMul(s); });
  auto ri = EndCapture(origin_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  Run(**ri, 1);
  ExpectFloats(Read(out_), Sum());
  Run(**ri, 0);
  ExpectFloats(Read(out_), Product());
  Run(**ri, 7);
  ExpectFloats(Read(out_), Sum());
  // Bodies run only through their parent.
  EXPECT_FALSE((*bodies)[0]->ExecuteAsync(origin_.get()).ok());
  CheckJsonWithPython(DumpJson(**ri, DumpFlags::kVerbose),
                      "t=d[\"streams\"][0][\"tasks\"]; "
                      "assert [x[\"kind\"] for x in t]==[\"copy\",\"conditional\"]; "
                      "b=t[1][\"bodies\"]; assert t[1][\"type\"]==\"if\" and len(b)==2; "
                      "assert b[1][\"child\"] and b[1][\"streams\"][0][\"tasks\"][0]"
                      "[\"op\"]==\"Mul\"");
}

TEST_F(ConditionalTest, IfWithoutElseRunsNothingOnZero) {
  ConditionHandle condition = BeginWithCondition(0, true);
  CopySelectorInto(condition);
  auto bodies = origin_->AddConditional(ConditionalKind::kIf, condition, 1);
  ASSERT_TRUE(bodies.ok());
  CaptureBody((*bodies)[0], [&](Stream* s) { LaunchAdd(s); });
  auto ri = EndCapture(origin_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  Run(**ri, 0);
  ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));
  Run(**ri, 1);
  ExpectFloats(Read(out_), Sum());
}

absl::Status DecrementCondition(void* value) {
  --*static_cast<uint32_t*>(value);
  return absl::OkStatus();
}

TEST_F(ConditionalTest, WhileRepeatsUntilTheBodyClearsTheCondition) {
  float* acc = DeviceFloats(0.0f);  // allocated before the capture (an allocation is unsafe)
  ConditionHandle condition = BeginWithCondition(0, true);
  CopySelectorInto(condition);
  // acc starts at 0 (a memset in the instance); each iteration adds y (= 2).
  ASSERT_TRUE(origin_->MemsetAsync(acc, 0, kBytes).ok());
  auto bodies = origin_->AddConditional(ConditionalKind::kWhile, condition, 1);
  ASSERT_TRUE(bodies.ok());
  CaptureBody((*bodies)[0], [&](Stream* s) {
    const void* in[] = {acc, y_};
    void* out[] = {acc};
    ASSERT_TRUE(s->LaunchKernel(*add_, in, out, nullptr).ok());
    ASSERT_TRUE(s->LaunchHostFunc(&DecrementCondition, condition.value).ok());
  });
  auto ri = EndCapture(origin_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  Run(**ri, 3);
  ExpectFloats(Read(acc), std::vector<float>(kCount, 6.0f));
  Run(**ri, 0);
  ExpectFloats(Read(acc), std::vector<float>(kCount, 0.0f));
  Run(**ri, 5);
  ExpectFloats(Read(acc), std::vector<float>(kCount, 10.0f));
}

TEST_F(ConditionalTest, SwitchRunsBodyKAndNoneWhenOutOfRange) {
  ConditionHandle condition = BeginWithCondition(0, true);
  CopySelectorInto(condition);
  auto bodies = origin_->AddConditional(ConditionalKind::kSwitch, condition, 3);
  ASSERT_TRUE(bodies.ok());
  for (int k = 0; k < 3; ++k) {
    CaptureBody((*bodies)[k], [&](Stream* s) {
      ASSERT_TRUE(s->MemsetAsync(out_, static_cast<uint8_t>(0x10 + k), kBytes).ok());
    });
  }
  auto ri = EndCapture(origin_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  for (uint32_t k = 0; k < 3; ++k) {
    Run(**ri, k);
    const auto* bytes = reinterpret_cast<const uint8_t*>(out_);
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(bytes[i], 0x10 + k) << "selector " << k;
  }
  Run(**ri, 3);
  ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));
}

// With assign_default the value is reset at every launch: a host write before it is lost.
// Without, the host write survives.
TEST_F(ConditionalTest, AssignDefaultDecidesWhetherAHostWriteSurvives) {
  for (bool assign_default : {true, false}) {
    SCOPED_TRACE(assign_default);
    ConditionHandle condition = BeginWithCondition(1, assign_default);
    auto bodies = origin_->AddConditional(ConditionalKind::kIf, condition, 1);
    ASSERT_TRUE(bodies.ok());
    CaptureBody((*bodies)[0], [&](Stream* s) { LaunchAdd(s); });
    auto ri = EndCapture(origin_.get());
    ASSERT_TRUE(ri.ok()) << ri.status();
    EXPECT_EQ(*condition.value, 1u);
    *condition.value = 0;  // host write before the launch
    Run(**ri, 0);
    if (assign_default) {
      ExpectFloats(Read(out_), Sum());  // reset to 1: the body ran
    } else {
      ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));
    }
  }
}

TEST_F(ConditionalTest, ErrorsAreReported) {
  ConditionHandle condition = BeginWithCondition(0, true);
  EXPECT_FALSE(origin_->AddConditional(ConditionalKind::kWhile, condition, 2).ok());
  EXPECT_FALSE(origin_->AddConditional(ConditionalKind::kIf, condition, 3).ok());
  EXPECT_FALSE(origin_->AddConditional(ConditionalKind::kIf, ConditionHandle{}, 1).ok());
  EXPECT_FALSE(body_stream_->AddConditional(ConditionalKind::kIf, condition, 1).ok());
  auto bodies = origin_->AddConditional(ConditionalKind::kIf, condition, 1);
  ASSERT_TRUE(bodies.ok());
  ASSERT_TRUE(body_stream_->BeginBodyCapture((*bodies)[0], CaptureMode::kGlobal).ok());
  // The parent cannot end while a body is being captured.
  auto early = EndCapture(origin_.get());
  EXPECT_THAT(early.status().message(), HasSubstr("body is still being captured"));
  EXPECT_FALSE(EndCapture(body_stream_.get()).ok());  // a body ends with EndBodyCapture
  ASSERT_TRUE(body_stream_->EndBodyCapture().ok());
  EXPECT_FALSE(body_stream_->BeginBodyCapture((*bodies)[0], CaptureMode::kGlobal).ok());
  auto ri = EndCapture(origin_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_FALSE((*ri)->CreateCondition(0, false).ok());  // only while capturing
}

}  // namespace
}  // namespace reprise::runtime::testing
