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
