// Gemm/MatMul (gemm.cc) and Einsum (einsum.cc) against plain reference loops; tolerance
// 1e-4 absolute + 1e-4 relative.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernel_util.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
  }
}

std::vector<float> ReferenceMatMul(const std::vector<float>& a, const std::vector<float>& b,
                                   int64_t m, int64_t k, int64_t n, bool ta = false,
                                   bool tb = false) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        acc += a[ta ? p * m + i : i * k + p] * b[tb ? j * k + p : p * n + j];
      }
      c[i * n + j] = static_cast<float>(acc);
    }
  return c;
}

TEST(GemmTest, TransposesAlphaBetaAndBroadcastC) {
  KernelHarness h;
  const int64_t m = 5, k = 7, n = 3;
  const auto a = RandomFloats(m * k, 31);
  const auto b = RandomFloats(k * n, 32);
  const auto c = RandomFloats(n, 33);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      auto ab = ReferenceMatMul(a, b, m, k, n, ta, tb);
      std::vector<float> want(m * n);
      for (int64_t i = 0; i < m * n; ++i) want[i] = 0.5f * ab[i] + 2.0f * c[i % n];
      auto out = h.Run(
          "Gemm",
          {Tensor::Of<float>(ta ? Shape{k, m} : Shape{m, k}, a),
           Tensor::Of<float>(tb ? Shape{n, k} : Shape{k, n}, b), Tensor::Of<float>({n}, c)},
          Attrs(
              {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", 0.5f}, {"beta", 2.0f}}));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape, (Shape{m, n}));
      ExpectNear((*out)[0].Values<float>(), want);
    }
  }
  EXPECT_EQ(h.Prepare("Gemm", {Tensor::Of<float>({2, 3}, {}), Tensor::Of<float>({2, 3}, {})})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MatMulTest, BatchedBroadcastAndVectors) {
  KernelHarness h;
  // [2,1,3,4] x [3,4,2] -> [2,3,3,2]
  const auto a = RandomFloats(2 * 3 * 4, 41);
  const auto b = RandomFloats(3 * 4 * 2, 42);
  auto out = h.Run("MatMul", {Tensor::Of<float>({2, 1, 3, 4}, a), Tensor::Of<float>({3, 4, 2}, b)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape, (Shape{2, 3, 3, 2}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<float> ai(a.begin() + i * 12, a.begin() + (i + 1) * 12);
      std::vector<float> bj(b.begin() + j * 8, b.begin() + (j + 1) * 8);
      auto c = ReferenceMatMul(ai, bj, 3, 4, 2);
      want.insert(want.end(), c.begin(), c.end());
    }
  ExpectNear((*out)[0].Values<float>(), want);
  // A batch folded into one GEMM: [2,3,4] x [4,2].
  out = h.Run("MatMul", {Tensor::Of<float>({2, 3, 4}, a),
                         Tensor::Of<float>({4, 2}, std::vector<float>(b.begin(), b.begin() + 8))});
  ASSERT_TRUE(out.ok());
  ExpectNear((*out)[0].Values<float>(),
             ReferenceMatMul(a, std::vector<float>(b.begin(), b.begin() + 8), 6, 4, 2));
  // 1-D operands drop their dim.
  out = h.Run("MatMul", {Tensor::Of<float>({3}, {1, 2, 3}), Tensor::Of<float>({3}, {4, 5, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, Shape{});
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{32}));
  out = h.Run("MatMul",
              {Tensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6}), Tensor::Of<float>({3}, {1, 0, -1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, Shape{2});
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-2, -2}));
  auto bad = h.Prepare("MatMul", {Tensor::Of<float>({2, 3}, {}), Tensor::Of<float>({4, 2}, {})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("[2,3]"), std::string::npos);
}

TEST(EinsumTest, CommonFormsMatchReference) {
  KernelHarness h;
  const auto a = RandomFloats(2 * 3 * 4, 51);
  const auto b = RandomFloats(2 * 4 * 5, 52);
  auto out = h.Run("Einsum", {Tensor::Of<float>({2, 3, 4}, a), Tensor::Of<float>({2, 4, 5}, b)},
                   Attrs({{"equation", std::string("bij,bjk->bik")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want;
  for (int i = 0; i < 2; ++i) {
    auto c =
        ReferenceMatMul(std::vector<float>(a.begin() + i * 12, a.begin() + (i + 1) * 12),
                        std::vector<float>(b.begin() + i * 20, b.begin() + (i + 1) * 20), 3, 4, 5);
    want.insert(want.end(), c.begin(), c.end());
  }
  ExpectNear((*out)[0].Values<float>(), want);
  out = h.Run("Einsum", {Tensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6})},
              Attrs({{"equation", std::string("ij->ji")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  out = h.Run("Einsum", {Tensor::Of<float>({2, 2}, {1, 2, 3, 4})},
              Attrs({{"equation", std::string("ii")}}));  // implicit output: the trace
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5}));
  out = h.Run(
      "Einsum",
      {Tensor::Of<float>({2, 1, 2}, {1, 2, 3, 4}), Tensor::Of<float>({3, 2}, {1, 0, 0, 1, 1, 1})},
      Attrs({{"equation", std::string("...j,kj->...k")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 1, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3, 3, 4, 7}));
  EXPECT_FALSE(h.Prepare("Einsum", {Tensor::Of<float>({2, 3}, {})},
                         Attrs({{"equation", std::string("ijk->i")}}))
                   .ok());
  // An output label may appear once only (the matrix-product form once read past its operand).
  const absl::Status repeated =
      h.Prepare("Einsum", {Tensor::Of<float>({2, 3}, {}), Tensor::Of<float>({3, 4}, {})},
                Attrs({{"equation", std::string("ij,jk->iki")}}))
          .status();
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(repeated.message()), ::testing::HasSubstr("repeats"));
}

// Float32 contractions of two operands run as batched matrix products (transposed operands
// read in place, other orders permuted); float64 takes the general loop, so the two forms of
// each equation are compared, at one and two threads, including empty contractions and a
// batch of tiny products (the general loop in both types).
TEST(EinsumTest, MatrixProductFormsMatchTheGeneralLoop) {
  KernelHarness h;
  struct Form {
    std::string equation;
    Shape a, b;
  };
  const std::vector<Form> forms = {
      {"bgid,bgjd->bgij", {2, 3, 7, 5}, {2, 3, 6, 5}},  // attention scores: B transposed
      {"bgij,bgjd->bgid", {2, 3, 7, 6}, {2, 3, 6, 5}},  // attention output
      {"ki,kj->ij", {4, 3}, {4, 5}},                    // A transposed
      {"ij,kj->ki", {3, 4}, {5, 4}},                    // the product's transpose
      {"ibd,jbd->bij", {5, 2, 4}, {6, 2, 4}},           // both operands permuted
      {"abc,cd->abd", {2, 3, 4}, {4, 5}},               // two M labels
      {"bn,anm->bam", {2, 4}, {3, 4, 5}},               // B permuted, two N labels
      {"i,i->", {6}, {6}},                              // a dot product
      {"ik,kj->ij", {3, 0}, {0, 4}},                    // K empty: zeros
      {"bik,bkj->bij", {40, 16, 16}, {40, 16, 16}},     // a batch worth two threads
      {"ij,ij->ij", {3, 4}, {3, 4}},                    // elementwise: the general loop
  };
  for (const Form& f : forms) {
    SCOPED_TRACE(f.equation);
    const auto a = RandomFloats(static_cast<size_t>(runtime::NumElements(f.a)), 61);
    const auto b = RandomFloats(static_cast<size_t>(runtime::NumElements(f.b)), 62);
    const std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
    const runtime::Attributes attrs = Attrs({{"equation", f.equation}});
    auto want =
        h.Run("Einsum", {Tensor::Of<double>(f.a, a64), Tensor::Of<double>(f.b, b64)}, attrs);
    ASSERT_TRUE(want.ok()) << want.status();
    const std::vector<double> w = (*want)[0].Values<double>();
    for (int threads : {1, 2}) {
      const std::vector<Tensor> inputs = {Tensor::Of<float>(f.a, a), Tensor::Of<float>(f.b, b)};
      auto kernel = h.Prepare("Einsum", inputs, attrs, 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto got = h.RunPrepared(**kernel, inputs);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)[0].shape, (*want)[0].shape);
      const std::vector<float> g = (*got)[0].Values<float>();
      ASSERT_EQ(g.size(), w.size());
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5 + 1e-5 * std::fabs(w[i]));
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing

namespace reprise::kernels::cpu::testing {
namespace {

// Up to 4 rows with B known at prepare: the small kernel with B packed (alpha folded in).
TEST(GemmTest, SmallProductsWithKnownWeightsMatchTheReference) {
  KernelHarness h;
  // Up to 16 rows take the small kernel: whole 4x16 register blocks, and their row and column
  // edges (n = 21: one block and 5 columns; n = 48: three blocks; n = 7: edges only).
  for (int64_t m : {1, 3, 4, 5, 8, 13, 16})
    for (int64_t n : {int64_t{21}, int64_t{48}, int64_t{7}}) {
      SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n);
      const int64_t k = 19;
      const auto a = RandomFloats(m * k, 41);
      const auto b = RandomFloats(n * k, 42);
      const auto c = RandomFloats(n, 43);
      const auto ab = ReferenceMatMul(a, b, m, k, n, false, true);
      std::vector<float> want(m * n);
      for (int64_t i = 0; i < m * n; ++i) want[i] = 1.5f * ab[i] + 0.5f * c[i % n];
      auto out = h.Run("Gemm",
                       {Tensor::Of<float>({m, k}, a), Tensor::Of<float>({n, k}, b, /*known=*/true),
                        Tensor::Of<float>({n}, c)},
                       Attrs({{"transB", int64_t{1}}, {"alpha", 1.5f}, {"beta", 0.5f}}));
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear((*out)[0].Values<float>(), want);
    }
}

// Products past the small kernel with known (constant) weights read them packed by oneDNN's
// matmul: Gemm (B stored [K,N] or, transB, [N,K]; C broadcast and scaled by beta), MatMul and
// FusedMatMul's folded product (A's batch folded into rows, a bias and an activation), at one
// and two threads, against the reference.
TEST(GemmTest, KnownWeightsReadPackedMatchTheReference) {
  KernelHarness h;
  struct Size {
    int64_t m, k, n;
  };
  // Packed: every transposed B, and up to 256 rows against 2^18 weights or more (the first).
  // Where oneDNN keeps B plain (no AVX-512), 32 rows or more run sgemm on a row-major copy of
  // B: the second transposed, the last both ways (its rows of 256 floats padded to 272); with
  // AVX2, 2 to 16 rows run our kernel on B in panels of 16 columns: the first, and rows short
  // of a block of 4 (5, 2) or columns short of a panel (530, 333, 300).
  for (const Size& z : {Size{8, 512, 512}, Size{33, 64, 130}, Size{1, 512, 96}, Size{40, 96, 256},
                        Size{5, 130, 530}, Size{2, 400, 333}, Size{16, 64, 300}}) {
    for (int64_t trans_b : {0, 1}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "m=" << z.m << " k=" << z.k << " n=" << z.n
                                          << " transB=" << trans_b << " threads=" << threads);
        const auto a = RandomFloats(z.m * z.k, 71);
        const auto b = RandomFloats(z.k * z.n, 72);
        const auto c = RandomFloats(z.n, 73);
        const auto ab = ReferenceMatMul(a, b, z.m, z.k, z.n, false, trans_b != 0);
        std::vector<float> want(z.m * z.n);
        for (int64_t i = 0; i < z.m * z.n; ++i) want[i] = ab[i] + 0.5f * c[i % z.n];
        const Shape b_shape = trans_b != 0 ? Shape{z.n, z.k} : Shape{z.k, z.n};
        const std::vector<Tensor> inputs = {Tensor::Of<float>({z.m, z.k}, a),
                                            Tensor::Of<float>(b_shape, b, /*known=*/true),
                                            Tensor::Of<float>({z.n}, c)};
        auto kernel =
            h.Prepare("Gemm", inputs, Attrs({{"transB", trans_b}, {"beta", 0.5f}}), 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, inputs);
        ASSERT_TRUE(out.ok()) << out.status();
        ExpectNear((*out)[0].Values<float>(), want);
      }
    }
  }
  // MatMul by known weights (a linear layer without bias): A's batch folded into rows read packed
  // ([2, 20, 512]), one and two rows on the row kernel, 12 rows by 130 x 530 (panels or
  // oneDNN's packing), and A of rank 4; one and two threads.
  struct Product {
    Shape a;
    int64_t k, n;
  };
  for (const Product& z : {Product{{2, 20, 512}, 512, 520}, Product{{1, 2, 512}, 512, 520},
                           Product{{1, 512}, 512, 520}, Product{{3, 4, 130}, 130, 530},
                           Product{{2, 2, 3, 512}, 512, 600}}) {
    const int64_t m = runtime::NumElements(z.a) / z.k;
    const auto a = RandomFloats(m * z.k, 77);
    const auto b = RandomFloats(z.k * z.n, 78);
    const std::vector<Tensor> inputs = {Tensor::Of<float>(z.a, a),
                                        Tensor::Of<float>({z.k, z.n}, b, /*known=*/true)};
    Shape out_shape = z.a;
    out_shape.back() = z.n;
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "MatMul " << runtime::ShapeToString(z.a) << " x [" << z.k
                                        << ", " << z.n << "] threads=" << threads);
      auto kernel = h.Prepare("MatMul", inputs, Attrs({}), 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto out = h.RunPrepared(**kernel, inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].shape, out_shape);
      ExpectNear((*out)[0].Values<float>(), ReferenceMatMul(a, b, m, z.k, z.n));
    }
  }
  // FusedMatMul: [2, 20, 512] x known [512, 520] + bias, Relu.
  const int64_t rows = 40, k = 512, n = 520;
  const auto a = RandomFloats(rows * k, 74);
  const auto b = RandomFloats(k * n, 75);
  const auto bias = RandomFloats(n, 76);
  const auto ab = ReferenceMatMul(a, b, rows, k, n);
  std::vector<float> want(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) want[i] = std::max(ab[i] + bias[i % n], 0.0f);
  const std::vector<Tensor> inputs = {Tensor::Of<float>({2, 20, k}, a),
                                      Tensor::Of<float>({k, n}, b, /*known=*/true),
                                      Tensor::Of<float>({n}, bias, /*known=*/true)};
  for (int threads : {1, 2}) {
    auto kernel = h.Prepare("com.reprise.FusedMatMul", inputs,
                            Attrs({{"activation", std::string("Relu")}}), 17, 1, threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto out = h.RunPrepared(**kernel, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), want);
  }
}

// One or two rows by 2^18 weights or more run our row kernel on B in panels of 16 columns (with
// AVX2; oneDNN's matmul without), three rows oneDNN's matmul (or, on AVX2, the 4-row panel
// kernel): k short of a block of 4 (2051) and n short of a panel (1031), k a multiple of 4 with
// n whole panels (4096 x 512), and a classifier's 1280 x 1000 and 512 x 512 at the bound; B both
// ways, one and two threads.
TEST(GemmTest, FewRowsByLargeWeightsMatchTheReference) {
  KernelHarness h;
  struct Size {
    int64_t k, n;
  };
  for (const Size& z : {Size{2051, 1031}, Size{4096, 512}, Size{1280, 1000}, Size{512, 512}}) {
    const auto b = RandomFloats(z.k * z.n, 92);
    const auto c = RandomFloats(z.n, 93);
    for (int64_t m : {1, 2, 3}) {
      const auto a = RandomFloats(m * z.k, 91);
      for (int64_t trans_b : {0, 1}) {
        const auto ab = ReferenceMatMul(a, b, m, z.k, z.n, false, trans_b != 0);
        std::vector<float> want(m * z.n);
        for (int64_t i = 0; i < m * z.n; ++i) want[i] = ab[i] + c[i % z.n];
        const Shape b_shape = trans_b != 0 ? Shape{z.n, z.k} : Shape{z.k, z.n};
        const std::vector<Tensor> inputs = {Tensor::Of<float>({m, z.k}, a),
                                            Tensor::Of<float>(b_shape, b, /*known=*/true),
                                            Tensor::Of<float>({z.n}, c)};
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << z.k << " n=" << z.n
                                            << " transB=" << trans_b << " threads=" << threads);
          auto kernel = h.Prepare("Gemm", inputs, Attrs({{"transB", trans_b}}), 17, 1, threads);
          ASSERT_TRUE(kernel.ok()) << kernel.status();
          auto out = h.RunPrepared(**kernel, inputs);
          ASSERT_TRUE(out.ok()) << out.status();
          ExpectNear((*out)[0].Values<float>(), want);
        }
      }
    }
  }
}

// One constant read both as Gemm's transposed B and as MatMul's plain B: the device's cache of
// packed weights keeps the two packings apart (the same address and packed layout, but another
// source layout), so each product reads its own.
TEST(GemmTest, OneConstantPackedTwoWaysKeepsBothPackings) {
  KernelHarness h;
  const int64_t m = 8, k = 512, n = 512;
  const auto a = RandomFloats(m * k, 81);
  const auto b = RandomFloats(k * n, 82);
  const std::vector<Tensor> inputs = {Tensor::Of<float>({m, k}, a),
                                      Tensor::Of<float>({k, n}, b, /*known=*/true)};
  auto gemm = h.Prepare("Gemm", inputs, Attrs({{"transB", int64_t{1}}}));
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  auto matmul = h.Prepare("com.reprise.FusedMatMul", inputs, Attrs({}));
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  auto transposed = h.RunPrepared(**gemm, inputs);
  ASSERT_TRUE(transposed.ok()) << transposed.status();
  ExpectNear((*transposed)[0].Values<float>(), ReferenceMatMul(a, b, m, k, n, false, true));
  auto plain = h.RunPrepared(**matmul, inputs);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ExpectNear((*plain)[0].Values<float>(), ReferenceMatMul(a, b, m, k, n));
}

TEST(GemmTest, FusedGemmAppliesTheActivationThenTheResidual) {
  KernelHarness h;
  const int64_t m = 6, k = 5, n = 4;
  const auto a = RandomFloats(m * k, 51);
  const auto b = RandomFloats(k * n, 52);
  const auto r = RandomFloats(n, 53);  // broadcast over the rows
  const auto ab = ReferenceMatMul(a, b, m, k, n);
  for (const char* act : {"Relu", "Tanh", "Sigmoid", "Clip"}) {
    std::vector<float> want(m * n);
    for (int64_t i = 0; i < m * n; ++i) {
      float v = ab[i];
      if (std::string(act) == "Relu") v = v > 0 ? v : 0;
      if (std::string(act) == "Tanh") v = std::tanh(v);
      if (std::string(act) == "Sigmoid") v = 1.0f / (1.0f + std::exp(-v));
      if (std::string(act) == "Clip") v = std::min(std::max(v, -0.1f), 0.2f);
      want[i] = v + r[i % n];
    }
    auto out =
        h.Run("com.reprise.FusedGemm",
              {Tensor::Of<float>({m, k}, a), Tensor::Of<float>({k, n}, b), Tensor::Absent(),
               Tensor::Of<float>({1, n}, r)},
              Attrs({{"activation", std::string(act)}, {"clip_min", -0.1f}, {"clip_max", 0.2f}}));
    ASSERT_TRUE(out.ok()) << act << ": " << out.status();
    ExpectNear((*out)[0].Values<float>(), want);
  }
  auto bad =
      h.Run("com.reprise.FusedGemm", {Tensor::Of<float>({m, k}, a), Tensor::Of<float>({k, n}, b)},
            Attrs({{"activation", std::string("Gelu")}}));
  EXPECT_FALSE(bad.ok());
}

// FusedGemm with known weights and up to 16 rows: the small kernel takes C, the activation and
// the residual into its stores. Every row edge (1-3 rows past the blocks of 4), column blocks
// of 32 (one or two rows), 16 and 8 and single columns; C as a known row (scaled by beta), a
// row read in place, a column filled first, or absent; the residual as Y's shape, one row, or
// a column (broadcast another way: the separate epilogue); Relu and Clip in the stores, Tanh
// after them. NaN sums: Relu gives 0, Clip keeps NaN, as the unfused activations do.
TEST(GemmTest, SmallFusedGemmTakesTheBiasActivationAndResidualInItsStores) {
  KernelHarness h;
  const int64_t k = 11;
  enum class C { kAbsent, kKnownRow, kRow, kColumn };
  int cases = 0;
  for (int64_t m : {1, 2, 3, 4, 6, 9})
    for (int64_t n : {int64_t{7}, int64_t{21}, int64_t{40}, int64_t{64}})
      for (const char* act : {"", "Relu", "Clip", "Tanh"})
        for (C c_form : {C::kAbsent, C::kKnownRow, C::kRow, C::kColumn})
          for (int r_form = 0; r_form < 4; ++r_form) {  // none, [m,n], [1,n], [m,1]
            if ((m + n + r_form + static_cast<int>(c_form)) % 3 != 0 && m != 3) continue;
            SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " act=" << act << " C="
                                              << static_cast<int>(c_form) << " R=" << r_form);
            ++cases;
            auto a = RandomFloats(m * k, 91 + m);
            a[(m - 1) * k + 2] = NAN;  // the last row's sums are NaN
            const auto b = RandomFloats(n * k, 92);
            const int64_t c_count = c_form == C::kColumn ? m : n;
            const auto c = RandomFloats(c_count, 93);
            const Shape r_shape = r_form == 1   ? Shape{m, n}
                                  : r_form == 2 ? Shape{1, n}
                                                : Shape{m, 1};
            const auto r = RandomFloats(runtime::NumElements(r_shape), 94);
            const float beta = c_form == C::kRow ? 1.0f : 0.5f;
            const auto ab = ReferenceMatMul(a, b, m, k, n, false, true);
            std::vector<float> want(m * n);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                float v = 2.0f * ab[i * n + j];
                if (c_form == C::kColumn) v += beta * c[i];
                if (c_form == C::kKnownRow || c_form == C::kRow) v += beta * c[j];
                const std::string name = act;
                if (name == "Relu") v = v > 0 ? v : 0;
                if (name == "Clip") v = v < -0.3f ? -0.3f : v > 0.4f ? 0.4f : v;
                if (name == "Tanh") v = std::tanh(v);
                if (r_form == 1) v += r[i * n + j];
                if (r_form == 2) v += r[j];
                if (r_form == 3) v += r[i];
                want[i * n + j] = v;
              }
            std::vector<Tensor> inputs = {Tensor::Of<float>({m, k}, a),
                                          Tensor::Of<float>({n, k}, b, /*known=*/true)};
            if (c_form == C::kAbsent) {
              inputs.push_back(Tensor::Absent());
            } else {
              inputs.push_back(Tensor::Of<float>(c_form == C::kColumn ? Shape{m, 1} : Shape{n}, c,
                                                 c_form == C::kKnownRow));
            }
            if (r_form != 0) inputs.push_back(Tensor::Of<float>(r_shape, r));
            auto kernel = h.Prepare("com.reprise.FusedGemm", inputs,
                                    Attrs({{"transB", int64_t{1}},
                                           {"alpha", 2.0f},
                                           {"beta", beta},
                                           {"activation", std::string(act)},
                                           {"clip_min", -0.3f},
                                           {"clip_max", 0.4f}}));
            ASSERT_TRUE(kernel.ok()) << kernel.status();
            auto out = h.RunPrepared(**kernel, inputs);
            ASSERT_TRUE(out.ok()) << out.status();
            const std::vector<float> got = (*out)[0].Values<float>();
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
              if (std::isnan(want[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
              } else {
                ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
              }
            }
          }
  EXPECT_GT(cases, 300);
}

// FusedMatMul with A's batch folded into up to 16 rows: the small kernel takes a bias row,
// Relu or Clip and a residual of Y's shape or one row into its stores; other activations and
// residuals broadcast another way (a column, rows repeated over a batch axis) take the
// separate epilogue.
TEST(GemmTest, SmallFusedMatMulTakesTheEpilogueInItsStores) {
  KernelHarness h;
  const int64_t k = 9, n = 37;
  const Shape a_shape = {2, 3, k};
  const int64_t rows = 6;
  const auto a = RandomFloats(rows * k, 101);
  const auto b = RandomFloats(k * n, 102);
  const auto bias = RandomFloats(n, 103);
  const auto ab = ReferenceMatMul(a, b, rows, k, n);
  // None, Y's shape, one row, a column, and rows repeated over the first batch axis.
  const std::vector<Shape> residuals = {{}, {2, 3, n}, {1, n}, {3, 1}, {3, n}};
  for (const char* act : {"", "Relu", "Clip", "Gelu"})
    for (bool with_bias : {false, true})
      for (size_t ri = 0; ri < residuals.size(); ++ri) {
        SCOPED_TRACE(::testing::Message()
                     << "act=" << act << " bias=" << with_bias << " residual=" << ri);
        const Shape& r_shape = residuals[ri];
        const auto r = RandomFloats(ri == 0 ? 0 : runtime::NumElements(r_shape), 104);
        std::vector<float> want(rows * n);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double v = ab[i * n + j] + (with_bias ? bias[j] : 0.0f);
            const std::string name = act;
            if (name == "Relu") v = v > 0 ? v : 0;
            if (name == "Clip") v = std::min(std::max(v, -0.2), 0.3);
            if (name == "Gelu") v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
            if (ri == 1) v += r[i * n + j];
            if (ri == 2) v += r[j];
            if (ri == 3) v += r[i % 3];
            if (ri == 4) v += r[(i % 3) * n + j];
            want[i * n + j] = static_cast<float>(v);
          }
        std::vector<Tensor> inputs = {Tensor::Of<float>(a_shape, a),
                                      Tensor::Of<float>({k, n}, b, /*known=*/true)};
        inputs.push_back(with_bias ? Tensor::Of<float>({n}, bias) : Tensor::Absent());
        if (ri != 0) inputs.push_back(Tensor::Of<float>(r_shape, r));
        auto out = h.Run(
            "com.reprise.FusedMatMul", inputs,
            Attrs({{"activation", std::string(act)}, {"clip_min", -0.2f}, {"clip_max", 0.3f}}));
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, (Shape{2, 3, n}));
        ExpectNear((*out)[0].Values<float>(), want);
      }
}

// Small products with known weights read B in panels of 16 columns: Gemm (B [K,N] or, transB,
// [N,K]) and FusedMatMul's folded product (B read transposed through perm_b too, then with its
// bias and Relu in the stores), against the reference. The shapes cross panels inside the
// 32-column blocks of one or two rows (n = 1024, 45), end in a part panel (n = 45: a block, a
// vector, then 13 columns one by one with AVX-512 or 5 with AVX2) and have rows of 4 KiB
// (n = 1024), which the row-major reads of B missed on.
TEST(GemmTest, SmallProductsReadKnownWeightsInPanels) {
  KernelHarness h;
  struct Size {
    int64_t m, k, n;
  };
  for (const Size& z : {Size{1, 256, 1024}, Size{1, 64, 45}, Size{2, 64, 45}, Size{3, 64, 45},
                        Size{16, 64, 45}, Size{4, 5, 512}})
    for (int64_t trans_b : {0, 1}) {
      SCOPED_TRACE(::testing::Message()
                   << "m=" << z.m << " k=" << z.k << " n=" << z.n << " transB=" << trans_b);
      const auto a = RandomFloats(z.m * z.k, 111);
      const auto b = RandomFloats(z.k * z.n, 112);
      const auto bias = RandomFloats(z.n, 113);
      const auto ab = ReferenceMatMul(a, b, z.m, z.k, z.n, false, trans_b != 0);
      const Shape b_shape = trans_b != 0 ? Shape{z.n, z.k} : Shape{z.k, z.n};
      auto gemm = h.Run(
          "Gemm", {Tensor::Of<float>({z.m, z.k}, a), Tensor::Of<float>(b_shape, b, /*known=*/true)},
          Attrs({{"transB", trans_b}}));
      ASSERT_TRUE(gemm.ok()) << gemm.status();
      ExpectNear((*gemm)[0].Values<float>(), ab);
      std::vector<float> want(ab.size());
      for (size_t i = 0; i < ab.size(); ++i) {
        want[i] = std::max(ab[i] + bias[i % static_cast<size_t>(z.n)], 0.0f);
      }
      runtime::Attributes attrs = Attrs({{"activation", std::string("Relu")}});
      if (trans_b != 0) attrs.Set("perm_b", std::vector<int64_t>{1, 0});
      auto matmul =
          h.Run("com.reprise.FusedMatMul",
                {Tensor::Of<float>({1, z.m, z.k}, a), Tensor::Of<float>(b_shape, b, /*known=*/true),
                 Tensor::Of<float>({z.n}, bias)},
                attrs);
      ASSERT_TRUE(matmul.ok()) << matmul.status();
      EXPECT_EQ((*matmul)[0].shape, (Shape{1, z.m, z.n}));
      ExpectNear((*matmul)[0].Values<float>(), want);
    }
}

// At two threads the small kernel splits its products of one row by about 175,000 weights or more
// by ranges of 32 columns: Gemm with its C row (B known), MatMul (B not known), and FusedMatMul
// with bias, Relu and a residual of Y's shape (each range reads them from its first column on),
// B known (in panels) and not (row-major). The result is the same bits as at one thread,
// whichever range computed a column; n = 1000 and 200 end in a part range.
TEST(GemmTest, SmallProductsSplitByColumnsGiveTheSameBits) {
  KernelHarness h;
  struct Size {
    int64_t m, k, n;
  };
  for (const Size& z :
       {Size{1, 256, 1024}, Size{1, 256, 1000}, Size{1, 512, 512}, Size{1, 1024, 200}})
    for (bool known : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "m=" << z.m << " k=" << z.k << " n=" << z.n << " known=" << known);
      const auto a = RandomFloats(z.m * z.k, 121);
      const auto b = RandomFloats(z.k * z.n, 122);
      const auto bias = RandomFloats(z.n, 123);
      const auto r = RandomFloats(z.m * z.n, 124);
      const auto ab = ReferenceMatMul(a, b, z.m, z.k, z.n);
      std::vector<float> want_gemm(ab.size()), want_fused(ab.size());
      for (size_t i = 0; i < ab.size(); ++i) {
        const float c = bias[i % static_cast<size_t>(z.n)];
        want_gemm[i] = ab[i] + c;
        want_fused[i] = std::max(ab[i] + c, 0.0f) + r[i];
      }
      struct Case {
        std::string op;
        std::vector<Tensor> inputs;
        runtime::Attributes attrs;
        const std::vector<float>* want;
      };
      // Gemm takes the small kernel for known B only; MatMul for B not known.
      const std::vector<Case> cases = {
          known ? Case{"Gemm",
                       {Tensor::Of<float>({z.m, z.k}, a), Tensor::Of<float>({z.k, z.n}, b, true),
                        Tensor::Of<float>({z.n}, bias)},
                       {},
                       &want_gemm}
                : Case{"MatMul",
                       {Tensor::Of<float>({z.m, z.k}, a), Tensor::Of<float>({z.k, z.n}, b)},
                       {},
                       &ab},
          {"com.reprise.FusedMatMul",
           {Tensor::Of<float>({1, z.m, z.k}, a), Tensor::Of<float>({z.k, z.n}, b, known),
            Tensor::Of<float>({z.n}, bias), Tensor::Of<float>({1, z.m, z.n}, r)},
           Attrs({{"activation", std::string("Relu")}}),
           &want_fused},
      };
      for (const Case& c : cases) {
        SCOPED_TRACE(c.op);
        std::vector<float> by_threads[2];
        for (int threads : {1, 2}) {
          auto kernel = h.Prepare(c.op, c.inputs, c.attrs, 17, 1, threads);
          ASSERT_TRUE(kernel.ok()) << kernel.status();
          auto out = h.RunPrepared(**kernel, c.inputs);
          ASSERT_TRUE(out.ok()) << out.status();
          by_threads[threads - 1] = (*out)[0].Values<float>();
          ExpectNear(by_threads[threads - 1], *c.want);
        }
        EXPECT_EQ(by_threads[0], by_threads[1]);
      }
    }
}

TEST(KernelUtilTest, IntraOpThreadsArePerCallingThread) {
  const int before = omp_get_max_threads();
  int seen = 0;
  std::thread worker([&] {
    UseIntraOpThreads(3);
    seen = omp_get_max_threads();
  });
  worker.join();
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(omp_get_max_threads(), before);
  std::thread clamped([&] {
    UseIntraOpThreads(0);
    seen = omp_get_max_threads();
  });
  clamped.join();
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
