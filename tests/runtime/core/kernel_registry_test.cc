#include <memory>

#include "gtest/gtest.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime {
namespace {

class NullKernel final : public PreparedKernel {
 public:
  absl::string_view op() const override { return "Null"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs&) const override { return absl::OkStatus(); }

 private:
  std::vector<TensorDesc> outputs_;
};

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareNull(const PrepareContext&) {
  return std::make_unique<NullKernel>();
}

// A kernel library's state: counts the kernels prepared with it.
struct CountingState final : KernelState {
  int prepared = 0;
};

// Fails unless prepared with a CountingState, which it counts in.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCounted(const PrepareContext& context) {
  auto* state = dynamic_cast<CountingState*>(context.kernel_state.get());
  if (state == nullptr) return absl::FailedPreconditionError("no counting state");
  ++state->prepared;
  return std::make_unique<NullKernel>();
}

TEST(KernelRegistryTest, RegisterFindPrepare) {
  KernelRegistry registry;
  ASSERT_TRUE(registry.Register("Null", &PrepareNull).ok());
  EXPECT_TRUE(registry.Has("Null"));
  EXPECT_FALSE(registry.Has("Conv"));
  EXPECT_EQ(registry.Register("Null", &PrepareNull).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(registry.Register("Nothing", nullptr).ok());

  PrepareContext context;
  context.op = "Null";
  auto kernel = registry.Prepare(context);
  ASSERT_TRUE(kernel.ok());
  EXPECT_EQ((*kernel)->op(), "Null");

  context.op = "Conv";
  auto missing = registry.Prepare(context);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("Conv"), absl::string_view::npos);
}

TEST(KernelRegistryTest, PreparesWithItsOwnState) {
  KernelRegistry a, b;
  ASSERT_TRUE(a.Register("Counted", &PrepareCounted).ok());
  ASSERT_TRUE(b.Register("Counted", &PrepareCounted).ok());
  PrepareContext context;
  context.op = "Counted";
  EXPECT_EQ(a.Prepare(context).status().code(), absl::StatusCode::kFailedPrecondition);
  auto state_a = std::make_shared<CountingState>();
  auto state_b = std::make_shared<CountingState>();
  ASSERT_TRUE(a.SetState(state_a).ok());
  ASSERT_TRUE(b.SetState(state_b).ok());
  EXPECT_EQ(a.SetState(state_b).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(a.state(), state_a);
  // A state the caller put in the context is replaced by the registry's.
  context.kernel_state = state_b;
  ASSERT_TRUE(a.Prepare(context).ok());
  ASSERT_TRUE(a.Prepare(context).ok());
  ASSERT_TRUE(b.Prepare(context).ok());
  EXPECT_EQ(state_a->prepared, 2);
  EXPECT_EQ(state_b->prepared, 1);
  // The registry owns its state: it goes with the registry.
  std::weak_ptr<CountingState> weak = state_a;
  state_a.reset();
  EXPECT_FALSE(weak.expired());
  a = KernelRegistry();
  EXPECT_TRUE(weak.expired());
}

TEST(AttributesTest, TypedGettersAndFallbacks) {
  Attributes attrs;
  attrs.Set("axis", int64_t{2});
  attrs.Set("alpha", 0.5f);
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  EXPECT_EQ(*attrs.GetInt("axis", 0), 2);
  EXPECT_EQ(*attrs.GetInt("missing", 7), 7);
  EXPECT_FLOAT_EQ(*attrs.GetFloat("alpha", 1.0f), 0.5f);
  EXPECT_EQ(attrs.GetInts("pads", {})->size(), 4u);
  EXPECT_FALSE(attrs.GetInt("alpha", 0).ok());  // wrong type is an error, not a fallback
  EXPECT_FALSE(attrs.GetTensor("value").ok());
}

}  // namespace
}  // namespace reprise::runtime
