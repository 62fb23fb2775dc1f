// Shape ops (shape_ops.cc) and data-movement ops (layout.cc, gather.cc): shape inference,
// plan-time values, hand-computed results and error cases. All results are exact.
#include <limits>
#include <numeric>
#include <string>
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
  runtime::TensorValue value{DataType::kInt64, {1}, runtime::ValueBytes(8, 0)};
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

// Every element of a large and a small output, of zeros (streamed over a large output) and of
// other values of 1, 4 and 8 bytes, on one and two threads (the harness's outputs start as 0xFF).
TEST(ShapeOpsTest, ConstantOfShapeFillsEveryElementOnOneAndTwoThreads) {
  KernelHarness h;
  auto value_of = [](DataType dtype, const void* bytes, size_t size) {
    runtime::TensorValue v{dtype, {1}, runtime::ValueBytes(size, 0)};
    std::memcpy(v.bytes.data(), bytes, size);
    return v;
  };
  const float two_and_half = 2.5f;
  const int8_t minus_three = -3;
  const int64_t zero64 = 0;
  const int32_t big = 123456789;
  struct Case {
    runtime::Attributes attrs;
    DataType dtype;
    std::vector<uint8_t> element;
  };
  std::vector<Case> cases;
  cases.push_back({{}, DataType::kFloat32, std::vector<uint8_t>(4, 0)});
  cases.push_back({Attrs({{"value", value_of(DataType::kFloat32, &two_and_half, 4)}}),
                   DataType::kFloat32,
                   {0, 0, 0x20, 0x40}});
  cases.push_back(
      {Attrs({{"value", value_of(DataType::kInt8, &minus_three, 1)}}), DataType::kInt8, {0xFD}});
  cases.push_back({Attrs({{"value", value_of(DataType::kInt64, &zero64, 8)}}), DataType::kInt64,
                   std::vector<uint8_t>(8, 0)});
  cases.push_back({Attrs({{"value", value_of(DataType::kInt32, &big, 4)}}),
                   DataType::kInt32,
                   {0x15, 0xCD, 0x5B, 0x07}});
  for (const Case& c : cases) {
    for (const std::vector<int64_t>& dims :
         {std::vector<int64_t>{3, 70001}, std::vector<int64_t>{5}, std::vector<int64_t>{0, 4}}) {
      for (int threads : {1, 2}) {
        auto kernel =
            h.Prepare("ConstantOfShape",
                      {Tensor::Of<int64_t>({static_cast<int64_t>(dims.size())}, dims, true)},
                      c.attrs, 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel,
                                 {Tensor::Of<int64_t>({static_cast<int64_t>(dims.size())}, dims)});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].dtype, c.dtype);
        EXPECT_EQ((*out)[0].shape, dims);
        const size_t size = c.element.size();
        const size_t n = (*out)[0].bytes.size() / size;
        ASSERT_EQ(static_cast<int64_t>(n), dims[0] * (dims.size() > 1 ? dims[1] : 1));
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) {
          wrong += std::memcmp((*out)[0].bytes.data() + i * size, c.element.data(), size) != 0;
        }
        EXPECT_EQ(wrong, 0u) << runtime::DataTypeName(c.dtype) << " of " << n << " on " << threads
                             << " threads";
      }
    }
  }
}

// Transposes against the index formula: batched 2-D transposes of 4-byte elements (NCHW <->
// NHWC, outer axes that do not coalesce, partial 8 x 8 tiles at the right and bottom edges, wide
// matrices taken in chunks of columns) go through tiles transposed in vector registers where the
// CPU has AVX2; a small axis of two to four moved last interleaves its runs (any element size);
// 8-byte, 1-byte and other permutations copy element by element. One and two threads.
TEST(LayoutTest, TransposesMatchTheIndexFormula) {
  KernelHarness h;
  struct Case {
    Shape in;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{2, 9, 12, 10}, {0, 2, 3, 1}},  // NCHW -> NHWC: [2][120, 9], a one-column edge
      {{2, 12, 10, 9}, {0, 3, 1, 2}},  // NHWC -> NCHW: [2][9, 120], a one-row edge
      {{3, 4, 17, 19}, {1, 0, 3, 2}},  // outer axes [4, 3] with their own strides
      {{21, 16}, {1, 0}},              // whole tiles only
      {{2, 1037, 11}, {0, 2, 1}},      // [2][11, 1037]: chunks of 512, 512 and 13 columns
      {{4, 6, 10}, {1, 0, 2}},         // rows copied as they are
      {{5, 3, 8}, {2, 1, 0}},          // too few rows for a tile
      {{2, 37}, {1, 0}},               // [37, 2]: two runs interleaved, an odd row count
      {{2, 3, 20}, {0, 2, 1}},         // [2][20, 3]: three runs, two blocks
      {{4, 9, 10}, {1, 2, 0}},         // [90, 4]: four runs
      {{5, 12}, {1, 0}},               // [12, 5]: five columns copy element by element
  };
  for (const Case& c : cases) {
    const int64_t rank = static_cast<int64_t>(c.in.size());
    int64_t count = 1;
    for (int64_t d : c.in) count *= d;
    Shape out_shape(rank);
    for (int64_t i = 0; i < rank; ++i) out_shape[i] = c.in[c.perm[i]];
    // want[o] = x[index of o's source]: the source offset of every output element.
    std::vector<int64_t> source(count);
    std::vector<int64_t> in_strides(rank, 1);
    for (int64_t i = rank - 2; i >= 0; --i) in_strides[i] = in_strides[i + 1] * c.in[i + 1];
    for (int64_t o = 0; o < count; ++o) {
      int64_t rest = o, at = 0;
      for (int64_t i = rank - 1; i >= 0; --i) {
        at += rest % out_shape[i] * in_strides[c.perm[i]];
        rest /= out_shape[i];
      }
      source[o] = at;
    }
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << runtime::ShapeToString(c.in) << " perm " << runtime::ShapeToString(c.perm)
                   << " threads " << threads);
      const runtime::Attributes attrs = Attrs({{"perm", c.perm}});
      std::vector<float> xf(count);
      std::vector<int32_t> xi(count);
      std::vector<int64_t> xl(count);
      std::vector<uint8_t> xb(count);
      for (int64_t k = 0; k < count; ++k) {
        xf[k] = static_cast<float>(k) * 0.5f - 7.0f;
        xi[k] = static_cast<int32_t>(k * 7 - 100);
        xl[k] = (int64_t{1} << 40) + k;
        xb[k] = static_cast<uint8_t>(k * 13);
      }
      const std::vector<Tensor> inputs[] = {{Tensor::Of<float>(c.in, xf)},
                                            {Tensor::Of<int32_t>(c.in, xi)},
                                            {Tensor::Of<int64_t>(c.in, xl)},
                                            {Tensor::Of<uint8_t>(c.in, xb)}};
      for (int type = 0; type < 4; ++type) {
        auto kernel = h.Prepare("Transpose", inputs[type], attrs, 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, inputs[type]);
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].shape, out_shape);
        const Tensor& y = (*out)[0];
        const auto expect_gathered = [&](const auto& got, const auto& x) {
          for (int64_t o = 0; o < count; ++o) {
            ASSERT_EQ(got[o], x[source[o]]) << "type " << type << " output " << o;
          }
        };
        if (type == 0) expect_gathered(y.Values<float>(), xf);
        if (type == 1) expect_gathered(y.Values<int32_t>(), xi);
        if (type == 2) expect_gathered(y.Values<int64_t>(), xl);
        if (type == 3) expect_gathered(y.Values<uint8_t>(), xb);
      }
    }
  }
}

// DepthToSpace (DCR and CRD) and SpaceToDepth against the ONNX index formulas, blocksizes 2 to
// 5 (2 to 4 interleave runs of the input into the output's rows; 5 copies element by element),
// one and two threads.
TEST(LayoutTest, DepthAndSpaceMatchTheIndexFormula) {
  KernelHarness h;
  for (const int64_t b : {2, 3, 4, 5}) {
    const int64_t n = 2, cb = 3, hh = 4, ww = 9;  // the smaller image of the two
    const int64_t c = cb * b * b;
    std::vector<float> x(n * c * hh * ww);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k) * 0.25f - 11.0f;
    const Tensor deep = Tensor::Of<float>({n, c, hh, ww}, x);
    const Tensor wide = Tensor::Of<float>({n, cb, hh * b, ww * b}, x);
    for (int threads : {1, 2}) {
      for (const std::string mode : {"DCR", "CRD"}) {
        SCOPED_TRACE(::testing::Message()
                     << "blocksize " << b << " " << mode << " threads " << threads);
        auto kernel = h.Prepare("DepthToSpace", {deep}, Attrs({{"blocksize", b}, {"mode", mode}}),
                                17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, {deep});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].shape, (Shape{n, cb, hh * b, ww * b}));
        const auto y = (*out)[0].Values<float>();
        for (int64_t i = 0; i < n; ++i)
          for (int64_t k = 0; k < cb; ++k)
            for (int64_t r = 0; r < hh * b; ++r)
              for (int64_t q = 0; q < ww * b; ++q) {
                const int64_t ch =
                    mode == "DCR" ? ((r % b) * b + q % b) * cb + k : (k * b + r % b) * b + q % b;
                ASSERT_EQ(y[((i * cb + k) * hh * b + r) * ww * b + q],
                          x[((i * c + ch) * hh + r / b) * ww + q / b])
                    << "output " << i << ", " << k << ", " << r << ", " << q;
              }
      }
      SCOPED_TRACE(::testing::Message() << "SpaceToDepth " << b << " threads " << threads);
      auto kernel = h.Prepare("SpaceToDepth", {wide}, Attrs({{"blocksize", b}}), 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto out = h.RunPrepared(**kernel, {wide});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].shape, (Shape{n, c, hh, ww}));
      const auto y = (*out)[0].Values<float>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t r = 0; r < hh; ++r)
            for (int64_t q = 0; q < ww; ++q) {
              const int64_t k = ch % cb, dy = ch / cb / b, dx = ch / cb % b;
              ASSERT_EQ(y[((i * c + ch) * hh + r) * ww + q],
                        x[((i * cb + k) * hh * b + r * b + dy) * ww * b + q * b + dx]);
            }
    }
  }
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

// Constant Pad against the index formula over [2, 3, 5]: pads and crops on every axis, the last
// axis's rows copied as runs (lead values, the input's run, trailing values), including a crop
// past the row's end (no run at all), pads wider than the row, and a pad longer than the row
// it makes (7 then a crop of 8: only values).
TEST(LayoutTest, ConstantPadMatchesTheIndexFormula) {
  KernelHarness h;
  const Shape in = {2, 3, 5};
  const std::vector<float> x = Iota(30);
  const std::vector<std::vector<int64_t>> cases = {
      {0, 1, 2, 1, 0, 3},  {0, 0, -2, 0, 1, -1}, {1, 0, -4, 0, 0, 2}, {0, 0, 7, 0, 0, 0},
      {0, 0, -6, 0, 0, 3}, {0, -1, 0, -1, 0, 0}, {0, 0, 7, 0, 0, -8},
  };
  for (const std::vector<int64_t>& pads : cases) {
    SCOPED_TRACE(runtime::ShapeToString(pads));
    Shape out(3);
    for (int a = 0; a < 3; ++a) out[a] = in[a] + pads[a] + pads[a + 3];
    auto got = h.Run("Pad", {Tensor::Of<float>(in, x), Tensor::Of<int64_t>({6}, pads, true),
                             Tensor::Of<float>({}, {-1.5f})});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ((*got)[0].shape, out);
    std::vector<float> want;
    for (int64_t i = 0; i < out[0]; ++i) {
      for (int64_t j = 0; j < out[1]; ++j) {
        for (int64_t k = 0; k < out[2]; ++k) {
          const int64_t si = i - pads[0], sj = j - pads[1], sk = k - pads[2];
          const bool inside =
              si >= 0 && si < in[0] && sj >= 0 && sj < in[1] && sk >= 0 && sk < in[2];
          want.push_back(inside ? x[(si * in[1] + sj) * in[2] + sk] : -1.5f);
        }
      }
    }
    EXPECT_EQ((*got)[0].Values<float>(), want);
  }
  // A model's extreme pads: a crop of INT64_MIN then a pad of INT64_MAX leave 4 of the last
  // axis, all padding (no overflow on the way: UBSan in the sanitizer build).
  auto got = h.Run("Pad", {Tensor::Of<float>(in, x),
                           Tensor::Of<int64_t>({6},
                                               {0, 0, std::numeric_limits<int64_t>::min(), 0, 0,
                                                std::numeric_limits<int64_t>::max()},
                                               true),
                           Tensor::Of<float>({}, {-1.5f})});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((*got)[0].shape, (Shape{2, 3, 4}));
  EXPECT_EQ((*got)[0].Values<float>(), std::vector<float>(24, -1.5f));
  // The same pads in edge mode (every position past the end: the last value) and reflect mode
  // (o + 2^63 is o modulo the period 8 of a 5-value axis: values 0..3).
  const Tensor extreme = Tensor::Of<int64_t>(
      {6}, {0, 0, std::numeric_limits<int64_t>::min(), 0, 0, std::numeric_limits<int64_t>::max()},
      true);
  for (const std::string mode : {"edge", "reflect"}) {
    SCOPED_TRACE(mode);
    got = h.Run("Pad", {Tensor::Of<float>(in, x), extreme}, Attrs({{"mode", mode}}));
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<float> want;
    for (int64_t row = 0; row < 6; ++row) {
      for (int64_t k = 0; k < 4; ++k) want.push_back(x[row * 5 + (mode == "edge" ? 4 : k)]);
    }
    EXPECT_EQ((*got)[0].Values<float>(), want);
  }
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
