#include "kernels/cpu/binary.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"

namespace reprise::kernels::cpu {
namespace {

using runtime::DataType;
using runtime::TensorDesc;

std::vector<float> RunBinary(const runtime::KernelRegistry& registry, absl::string_view op,
                             const TensorDesc& a, const std::vector<float>& a_data,
                             const TensorDesc& b, const std::vector<float>& b_data,
                             runtime::Attributes attrs = {}) {
  std::vector<TensorDesc> inputs = {a, b};
  runtime::PrepareContext context;
  context.op = op;
  context.inputs = inputs;
  context.attributes = &attrs;
  auto kernel = registry.Prepare(context);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return {};
  std::vector<float> out(runtime::NumElements((*kernel)->outputs()[0].shape));
  const void* in_ptrs[] = {a_data.data(), b_data.data()};
  void* out_ptrs[] = {out.data()};
  runtime::KernelArgs args{in_ptrs, out_ptrs, nullptr};
  EXPECT_TRUE((*kernel)->Run(args).ok());
  return out;
}

class BinaryTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterCpuKernels(&registry_).ok()); }
  runtime::KernelRegistry registry_;
};

TEST_F(BinaryTest, AddWithAlphaSameShape) {
  TensorDesc d{DataType::kFloat32, {4, 2}};
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> b(8, 2.0f);
  runtime::Attributes attrs;
  attrs.Set("alpha", 1.1f);
  std::vector<float> out = RunBinary(registry_, "Add", d, a, d, b, attrs);
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], a[i] + 2.2f, 1e-6f);
}

TEST_F(BinaryTest, BroadcastRowAndColumn) {
  // [2,1] * [3] -> [2,3]
  std::vector<float> out = RunBinary(registry_, "Mul", {DataType::kFloat32, {2, 1}}, {2, 3},
                                     {DataType::kFloat32, {3}}, {1, 10, 100});
  EXPECT_EQ(out, (std::vector<float>{2, 20, 200, 3, 30, 300}));
  out = RunBinary(registry_, "Sub", {DataType::kFloat32, {2, 3}}, {1, 2, 3, 4, 5, 6},
                  {DataType::kFloat32, {2, 1}}, {1, 4});
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 0, 1, 2}));
  out = RunBinary(registry_, "Div", {DataType::kFloat32, {}}, {12}, {DataType::kFloat32, {3}},
                  {1, 2, 4});
  EXPECT_EQ(out, (std::vector<float>{12, 6, 3}));
}

TEST_F(BinaryTest, IncompatibleShapesAreAnError) {
  EXPECT_FALSE(BroadcastShapes({2, 3}, {4}).ok());
  EXPECT_EQ(*BroadcastShapes({5, 1, 3}, {4, 1}), (runtime::Shape{5, 4, 3}));
  std::vector<TensorDesc> inputs = {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {2}}};
  runtime::PrepareContext context;
  context.op = "Add";
  context.inputs = inputs;
  auto kernel = registry_.Prepare(context);
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.status().message().find("[2,3]"), absl::string_view::npos);
}

}  // namespace
}  // namespace reprise::kernels::cpu
