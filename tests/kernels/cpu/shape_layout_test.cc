// Shape ops (shape_ops.cc) and data-movement ops (layout.cc, gather.cc): shape inference,
// plan-time values, hand-computed results and error cases. All results are exact.
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(ShapeOpsTest, ShapeAndSizeAreKnownAtPrepare) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 3, 4, 5}, {});
  auto kernel = h.Prepare("Shape", {x}, Attrs({{"start", int64_t{1}}, {"end", int64_t{-1}}}));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const runtime::TensorDesc& desc = (*kernel)->outputs()[0];
  EXPECT_EQ(desc.dtype, DataType::kInt64);
  EXPECT_EQ(desc.shape, (Shape{2}));
  ASSERT_NE(desc.data, nullptr);
  EXPECT_EQ(static_cast<const int64_t*>(desc.data)[0], 3);
  EXPECT_EQ(static_cast<const int64_t*>(desc.data)[1], 4);
  auto out = h.RunPrepared(**kernel, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{3, 4}));
  kernel = h.Prepare("Size", {x});
  ASSERT_TRUE(kernel.ok());
  ASSERT_NE((*kernel)->outputs()[0].data, nullptr);
  EXPECT_EQ(*static_cast<const int64_t*>((*kernel)->outputs()[0].data), 120);
  EXPECT_EQ((*kernel)->outputs()[0].shape, Shape{});
}

TEST(ShapeOpsTest, ReshapeZeroMinusOneAndAllowzero) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 3, 4}, Iota(24));
  auto out = h.Run("Reshape", {x, Tensor::Of<int64_t>({3}, {0, -1, 2}, true)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 6, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), Iota(24));
  auto empty =
      h.Prepare("Reshape", {Tensor::Of<float>({0, 4}, {}), Tensor::Of<int64_t>({2}, {0, 4}, true)},
                Attrs({{"allowzero", int64_t{1}}}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->outputs()[0].shape, (Shape{0, 4}));
  // Errors: unknown shape, two -1, element count mismatch.
  auto unknown = h.Prepare("Reshape", {x, Tensor::Of<int64_t>({2}, {4, 6})});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("plan time"), std::string::npos);
  EXPECT_EQ(h.Prepare("Reshape", {x, Tensor::Of<int64_t>({2}, {-1, -1}, true)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto mismatch = h.Prepare("Reshape", {x, Tensor::Of<int64_t>({2}, {5, 5}, true)});
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("[2,3,4]"), std::string::npos);
}

TEST(ShapeOpsTest, FlattenSqueezeUnsqueezeAcrossOpsets) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 1, 3, 1}, Iota(6));
  auto k = h.Prepare("Flatten", {x}, Attrs({{"axis", int64_t{-2}}}));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{2, 3}));
  k = h.Prepare("Squeeze", {x});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{2, 3}));
  k = h.Prepare("Squeeze", {x}, Attrs({{"axes", std::vector<int64_t>{-1}}}), 11);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{2, 1, 3}));
  k = h.Prepare("Squeeze", {x, Tensor::Of<int64_t>({1}, {1}, true)}, {}, 13);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{2, 3, 1}));
  EXPECT_FALSE(h.Prepare("Squeeze", {x, Tensor::Of<int64_t>({1}, {0}, true)}).ok());
  k = h.Prepare("Unsqueeze", {Tensor::Of<float>({3}, {})},
                Attrs({{"axes", std::vector<int64_t>{0, -1}}}), 11);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{1, 3, 1}));
  k = h.Prepare("Unsqueeze", {Tensor::Of<float>({3}, {}), Tensor::Of<int64_t>({1}, {1}, true)});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->outputs()[0].shape, (Shape{3, 1}));
  EXPECT_EQ(h.Prepare("Unsqueeze", {Tensor::Of<float>({3}, {}), Tensor::Of<int64_t>({1}, {1})})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(ShapeOpsTest, ConstantOfShapeAndRange) {
  KernelHarness h;
  runtime::TensorValue value{DataType::kInt64, {1}, {}};
  value.bytes.resize(8);
  const int64_t seven = 7;
  std::memcpy(value.bytes.data(), &seven, 8);
  auto out =
      h.Run("ConstantOfShape", {Tensor::Of<int64_t>({2}, {2, 2}, true)}, Attrs({{"value", value}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>(4, 7)));
  out = h.Run("ConstantOfShape", {Tensor::Of<int64_t>({1}, {3}, true)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>(3, 0.0f)));
  out = h.Run("Range", {Tensor::Of<float>({}, {1}, true), Tensor::Of<float>({}, {2}, true),
                        Tensor::Of<float>({}, {0.25f}, true)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  out = h.Run("Range", {Tensor::Of<int64_t>({}, {10}, true), Tensor::Of<int64_t>({}, {4}, true),
                        Tensor::Of<int64_t>({}, {-3}, true)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{10, 7}));
  EXPECT_EQ(h.Prepare("Range", {Tensor::Of<int64_t>({}, {0}), Tensor::Of<int64_t>({}, {4}, true),
                                Tensor::Of<int64_t>({}, {1}, true)})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(
      h.Prepare("Range", {Tensor::Of<int64_t>({}, {0}, true), Tensor::Of<int64_t>({}, {4}, true),
                          Tensor::Of<int64_t>({}, {0}, true)})
          .ok());
}

TEST(LayoutTest, TransposeSliceExpandTile) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 3, 4}, Iota(24));
  auto out = h.Run("Transpose", {x}, Attrs({{"perm", std::vector<int64_t>{2, 0, 1}}}));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ((*out)[0].shape, (Shape{4, 2, 3}));
  const auto t = (*out)[0].Values<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(t[(i * 2 + j) * 3 + k], (j * 3 + k) * 4 + i);
  // x[:, ::-2, 1:] on axes (1, 2).
  out = h.Run(
      "Slice",
      {x, Tensor::Of<int64_t>({2}, {-1, 1}, true), Tensor::Of<int64_t>({2}, {-100, 100}, true),
       Tensor::Of<int64_t>({2}, {1, -1}, true), Tensor::Of<int64_t>({2}, {-2, 1}, true)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape, (Shape{2, 2, 3}));
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{9, 10, 11, 1, 2, 3, 21, 22, 23, 13, 14, 15}));
  EXPECT_EQ(h.Prepare("Slice", {x, Tensor::Of<int64_t>({1}, {0}), Tensor::Of<int64_t>({1}, {1})})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  out = h.Run("Expand",
              {Tensor::Of<int32_t>({3, 1}, {1, 2, 3}), Tensor::Of<int64_t>({3}, {2, 1, 2}, true)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3, 2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(),
            (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  out = h.Run("Tile",
              {Tensor::Of<float>({2, 2}, {1, 2, 3, 4}), Tensor::Of<int64_t>({2}, {2, 3}, true)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{4, 6}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                                           1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_FALSE(h.Prepare("Transpose", {x}, Attrs({{"perm", std::vector<int64_t>{0, 0, 1}}})).ok());
}

TEST(LayoutTest, ConcatSplitPadTrilu) {
  KernelHarness h;
  auto out = h.Run("Concat",
                   {Tensor::Of<int64_t>({2, 1}, {1, 2}), Tensor::Of<int64_t>({2, 2}, {3, 4, 5, 6})},
                   Attrs({{"axis", int64_t{-1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  EXPECT_FALSE(h.Prepare("Concat", {Tensor::Of<float>({2, 1}, {}), Tensor::Of<float>({3, 2}, {})},
                         Attrs({{"axis", int64_t{1}}}))
                   .ok());
  const Tensor x = Tensor::Of<float>({2, 5}, Iota(10));
  out = h.Run("Split", {x, Tensor::Of<int64_t>({2}, {2, 3}, true)}, Attrs({{"axis", int64_t{1}}}),
              13, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{2, 3, 4, 7, 8, 9}));
  out = h.Run("Split", {x}, Attrs({{"axis", int64_t{0}}}), 13, 2);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{5, 6, 7, 8, 9}));
  EXPECT_FALSE(h.Run("Split", {x, Tensor::Of<int64_t>({2}, {2, 2}, true)},
                     Attrs({{"axis", int64_t{1}}}), 13, 2)
                   .ok());
  const Tensor row = Tensor::Of<float>({1, 3}, {1, 2, 3});
  const Tensor pads = Tensor::Of<int64_t>({4}, {0, 2, 0, 1}, true);
  out = h.Run("Pad", {row, pads, Tensor::Of<float>({}, {9})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{9, 9, 1, 2, 3, 9}));
  out = h.Run("Pad", {row, pads}, Attrs({{"mode", std::string("reflect")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 2, 1, 2, 3, 2}));
  out = h.Run("Pad", {row, pads}, Attrs({{"mode", std::string("edge")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  out = h.Run("Pad", {row, Tensor::Of<int64_t>({4}, {0, -1, 0, 0}, true)});  // negative crops
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 3}));
  out =
      h.Run("Pad", {row}, Attrs({{"pads", std::vector<int64_t>{1, 0, 0, 0}}, {"value", 5.0f}}), 2);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5, 5, 5, 1, 2, 3}));
  EXPECT_FALSE(h.Prepare("Pad", {row, Tensor::Of<int64_t>({2}, {1, 1}, true)}).ok());
  const Tensor m = Tensor::Of<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  out = h.Run("Trilu", {m, Tensor::Of<int64_t>({}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  out = h.Run("Trilu", {m}, Attrs({{"upper", int64_t{0}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
}

TEST(GatherTest, GatherAndGatherElementsWithNegativeAndBadIndices) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = h.Run("Gather", {x, Tensor::Of<int64_t>({2, 2}, {0, -1, 1, 1})},
                   Attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3, 2, 2, 4, 6, 5, 5}));
  out = h.Run("Gather", {x, Tensor::Of<int32_t>({}, {1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 5, 6}));
  auto bad = h.Run("Gather", {x, Tensor::Of<int64_t>({1}, {2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("index 2"), std::string::npos);
  EXPECT_NE(bad.status().message().find("Gather \"node\""), std::string::npos);
  out = h.Run("GatherElements", {x, Tensor::Of<int64_t>({2, 2}, {2, 0, -1, 1})},
              Attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 1, 6, 5}));
  out = h.Run("GatherElements", {x, Tensor::Of<int64_t>({1, 3}, {1, 0, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 2, 6}));
  EXPECT_FALSE(h.Run("GatherElements", {x, Tensor::Of<int64_t>({1, 1}, {5})}).ok());
  EXPECT_FALSE(h.Prepare("Gather", {x, Tensor::Of<float>({1}, {})}).ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
