// kFusedMatMulOp (gemm.cc) against the unfused ops run by the same harness: Transpose (the
// folded perm), MatMul, then alpha, bias, activation and residual applied by plain loops.
// Shapes sweep 1-D operands, batch broadcasting on either side, both transposed layouts and an
// empty product, at one and two threads (a batch split over the threads with each product's
// epilogue after it, a folded product with its epilogue split by elements), and B read
// transposed with rows a multiple of 2 KiB apart (copied first); tolerance 1e-4
// absolute + 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

struct Case {
  Shape a;  // stored shapes
  std::vector<int64_t> perm_a;
  Shape b;
  std::vector<int64_t> perm_b;
  bool bias = false;
  bool residual = false;
  std::string activation;
  float alpha = 1.0f;
};

int64_t Count(const Shape& shape) { return runtime::NumElements(shape); }

// The operand as the product sees it: Transpose(stored, perm), or stored without a perm.
Tensor Logical(const KernelHarness& h, const Tensor& stored, const std::vector<int64_t>& perm) {
  if (perm.empty()) return stored;
  auto out = h.Run("Transpose", {stored}, Attrs({{"perm", perm}}));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

TEST(FusedMatMulTest, MatchesTransposeMatMulAndEpilogue) {
  const std::vector<Case> cases = {
      {{3}, {}, {3, 4}, {}, true, false, "Relu"},
      {{2, 3, 5}, {}, {5}, {}, false, true, "", 0.5f},
      {{4, 5}, {}, {2, 5, 3}, {}, true, true, "Tanh"},
      {{2, 1, 4, 5}, {}, {3, 5, 6}, {}, true, false, "Gelu", 2.0f},
      {{2, 5, 4}, {0, 2, 1}, {2, 6, 5}, {0, 2, 1}, true, true, "Sigmoid", 0.25f},
      {{2, 4, 3, 5}, {0, 2, 1, 3}, {2, 4, 3, 5}, {0, 2, 3, 1}, false, false, "", 0.125f},
      {{3, 2, 8}, {1, 0, 2}, {8, 6}, {}, true, false, "Clip"},
      {{40, 16}, {}, {16, 24}, {}, true, true, "Relu"},
      {{0, 5}, {}, {5, 3}, {}, true, true, "Relu"},
      {{8, 64, 32}, {}, {8, 32, 64}, {}, true, true, "Gelu"},
      {{2, 4, 64, 32}, {0, 2, 1, 3}, {2, 4, 64, 32}, {0, 2, 3, 1}, false, true, "", 0.125f},
      {{2, 128, 64}, {}, {64, 128}, {}, true, true, "Gelu"},
      // Attention's keys per head, [seq, heads, dh] read transposed with rows 2 and 4 KiB
      // apart: each product's B is copied to rows of dh floats first.
      {{64, 16, 32}, {1, 0, 2}, {64, 16, 32}, {1, 2, 0}, false, false, "", 0.125f},
      {{24, 32, 32}, {1, 0, 2}, {40, 32, 32}, {1, 2, 0}, true, true, "Relu", 0.5f},
  };
  KernelHarness h;
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(runtime::ShapeToString(c.a) + " x " + runtime::ShapeToString(c.b) + " " +
                 c.activation);
    const Tensor a = Tensor::Of<float>(c.a, RandomFloats(Count(c.a), ++seed));
    const Tensor b = Tensor::Of<float>(c.b, RandomFloats(Count(c.b), ++seed));
    auto product = h.Run("MatMul", {Logical(h, a, c.perm_a), Logical(h, b, c.perm_b)});
    ASSERT_TRUE(product.ok()) << product.status();
    const Shape out = (*product)[0].shape;
    std::vector<float> want = (*product)[0].Values<float>();
    const int64_t n = out.empty() ? 1 : out.back();
    std::vector<Tensor> inputs = {a, b};
    const std::vector<float> bias = RandomFloats(n, ++seed);
    const std::vector<float> residual = RandomFloats(want.size(), ++seed);
    inputs.push_back(c.bias ? Tensor::Of<float>({n}, bias, true) : Tensor::Absent());
    if (c.residual) inputs.push_back(Tensor::Of<float>(out, residual));
    for (size_t i = 0; i < want.size(); ++i) {
      float y = c.alpha * want[i] + (c.bias ? bias[i % n] : 0.0f);
      if (c.activation == "Relu") y = std::max(y, 0.0f);
      if (c.activation == "Tanh") y = std::tanh(y);
      if (c.activation == "Sigmoid") y = 1.0f / (1.0f + std::exp(-y));
      if (c.activation == "Clip") y = std::clamp(y, -0.5f, 0.25f);
      if (c.activation == "Gelu") y = 0.5f * y * (1.0f + std::erf(y / std::sqrt(2.0f)));
      want[i] = y + (c.residual ? residual[i] : 0.0f);
    }
    runtime::Attributes attrs = Attrs({{"alpha", c.alpha},
                                       {"activation", c.activation},
                                       {"clip_min", -0.5f},
                                       {"clip_max", 0.25f}});
    if (!c.perm_a.empty()) attrs.Set("perm_a", c.perm_a);
    if (!c.perm_b.empty()) attrs.Set("perm_b", c.perm_b);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      auto kernel = h.Prepare(kFusedMatMulOp, inputs, attrs, 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto got = h.RunPrepared(**kernel, inputs);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)[0].shape, out);
      const std::vector<float> values = (*got)[0].Values<float>();
      ASSERT_EQ(values.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(values[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
      }
    }
  }
}

// Keys read transposed with rows a multiple of 2 KiB apart (heads x dh = 512 or 1024 floats)
// get workspace for one copy of B per thread (dh x seq floats); at 384 floats apart, or with B
// read row-major, they are read in place.
TEST(FusedMatMulTest, KeysWithAliasingRowsGetWorkspaceForACopy) {
  KernelHarness h;
  const int64_t seq = 64, dh = 32;
  for (int64_t heads : {16, 32, 12})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "heads " << heads << ", threads " << threads);
      const Shape stored = {seq, heads, dh};
      const Tensor q = Tensor::Of<float>(stored, RandomFloats(Count(stored), 7));
      const Tensor k = Tensor::Of<float>(stored, RandomFloats(Count(stored), 8));
      const runtime::Attributes attrs = Attrs(
          {{"perm_a", std::vector<int64_t>{1, 0, 2}}, {"perm_b", std::vector<int64_t>{1, 2, 0}}});
      auto kernel = h.Prepare(kFusedMatMulOp, {q, k}, attrs, 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const size_t copy = heads * dh % 512 == 0 ? threads * dh * seq * sizeof(float) : 0;
      EXPECT_EQ((*kernel)->workspace_bytes(), copy);
      // Weights by values: B = V per head, [seq, dh] read row-major with the same row stride.
      const Shape probs = {heads, seq, seq};
      auto rows =
          h.Prepare(kFusedMatMulOp, {Tensor::Of<float>(probs, RandomFloats(Count(probs), 9)), k},
                    Attrs({{"perm_b", std::vector<int64_t>{1, 0, 2}}}), 17, 1, threads);
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_EQ((*rows)->workspace_bytes(), 0u);
    }
}

TEST(FusedMatMulTest, RejectsLayoutsAndShapesItCannotRead) {
  KernelHarness h;
  const Tensor a = Tensor::Of<float>({2, 3, 4}, RandomFloats(24, 1));
  const Tensor b = Tensor::Of<float>({4, 5}, RandomFloats(20, 2));
  // perm [2,1,0] moves the stored last axis to the front: not readable in place.
  auto moved = h.Run(kFusedMatMulOp, {a, Tensor::Of<float>({5, 4, 2}, RandomFloats(40, 3))},
                     Attrs({{"perm_b", std::vector<int64_t>{2, 1, 0}}}));
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("last axis"), std::string::npos) << moved.status();
  auto not_perm = h.Run(kFusedMatMulOp, {a, b}, Attrs({{"perm_a", std::vector<int64_t>{0, 0, 1}}}));
  EXPECT_FALSE(not_perm.ok());
  // A bias that would widen the product.
  auto wide = h.Run(kFusedMatMulOp, {a, b, Tensor::Of<float>({3, 1, 1, 5}, RandomFloats(15, 4))});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("bias"), std::string::npos) << wide.status();
  auto act = h.Run(kFusedMatMulOp, {a, b}, Attrs({{"activation", std::string("Swish")}}));
  EXPECT_FALSE(act.ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
