// Unary elementwise kernels (unary.cc) and Cast (cast.cc) against std:: references; float
// tolerance 1e-6 absolute + 1e-5 relative.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

TEST(UnaryTest, FloatOpsMatchReference) {
  KernelHarness h;
  std::vector<float> x = RandomFloats(64, 61, -4.0f, 4.0f);
  x.push_back(0.0f);
  x.push_back(-30.0f);
  x.push_back(30.0f);
  std::vector<float> positive = RandomFloats(64, 62, 0.01f, 9.0f);
  struct Case {
    std::string op;
    std::function<double(double)> ref;
    bool positive_only;
  };
  const std::vector<Case> cases = {
      {"Relu", [](double v) { return std::max(v, 0.0); }, false},
      {"Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {"Tanh", [](double v) { return std::tanh(v); }, false},
      {"Erf", [](double v) { return std::erf(v); }, false},
      {"Exp", [](double v) { return std::exp(v); }, true},
      {"Log", [](double v) { return std::log(v); }, true},
      {"Sqrt", [](double v) { return std::sqrt(v); }, true},
      {"Reciprocal", [](double v) { return 1 / v; }, true},
      {"Floor", [](double v) { return std::floor(v); }, false},
      {"Ceil", [](double v) { return std::ceil(v); }, false},
      {"Softplus", [](double v) { return std::log1p(std::exp(v)); }, false},
      {"HardSwish", [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }, false},
      {"Neg", [](double v) { return -v; }, false},
      {"Abs", [](double v) { return std::fabs(v); }, false},
      {"Identity", [](double v) { return v; }, false},
      {"LeakyRelu", [](double v) { return v >= 0 ? v : 0.01 * v; }, false},
      {"HardSigmoid", [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }, false},
      {"Elu", [](double v) { return v >= 0 ? v : std::expm1(v); }, false},
      {"Selu",
       [](double v) {
         return 1.0507009873554804934193349852946 *
                (v > 0 ? v : 1.6732632423543772848170429916717 * std::expm1(v));
       },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const std::vector<float>& in = c.positive_only ? positive : x;
    const int64_t n = static_cast<int64_t>(in.size());
    auto out = h.Run(c.op, {Tensor::Of<float>({n}, in)});
    ASSERT_TRUE(out.ok()) << out.status();
    const auto got = (*out)[0].Values<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = c.ref(in[i]);
      EXPECT_NEAR(got[i], want, 1e-6 + 1e-5 * std::fabs(want)) << "x=" << in[i];
    }
  }
}

// The ops mapped in vector arithmetic (Erf, Exp, Softplus, LeakyRelu, Elu, Selu, Celu) over their
// whole range, against double-precision libm: every whole vector and a tail of 5, values near 0
// (e^x
// - 1's relative accuracy), at the -0.25 switch of e^x - 1, the ends of float's e^x (underflow
// below -87.3, overflow past 88.72), large, infinite and NaN inputs. Within 2e-6 relative +
// 1e-37 absolute; a NaN input gives NaN.
TEST(UnaryTest, VectorMapsMatchLibmOverTheWholeRange) {
  KernelHarness h;
  std::vector<float> x = RandomFloats(203, 63, -12.0f, 12.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f,
                  -0.0f,
                  1e-30f,
                  -1e-30f,
                  1e-8f,
                  -1e-8f,
                  1e-3f,
                  -1e-3f,
                  -0.2499f,
                  -0.25f,
                  -0.2501f,
                  0.25f,
                  -1.0f,
                  -20.0f,
                  -80.0f,
                  -87.0f,
                  -87.3f,
                  -88.0f,
                  -103.0f,
                  -200.0f,
                  80.0f,
                  88.0f,
                  88.7f,
                  88.75f,
                  89.0f,
                  200.0f,
                  1e30f,
                  -1e30f,
                  inf,
                  -inf,
                  std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  for (int i = 0; i < 64; ++i) x.push_back(-0.3f + 0.01f * static_cast<float>(i));
  // Sin / Cos: near multiples of pi/2 (zeros of one of them), at and past the reduction's limit
  // (8192); Round: halves (to even) and the largest floats with a fraction; Atan: the reduction's
  // switches at tan(pi/8) and tan(3pi/8).
  for (float v :
       {1.5707964f, 3.1415927f, -3.1415927f, 4.712389f,  6.2831855f,  100.53096f, 8191.9f,
        8192.0f,    -8192.0f,   8192.5f,     12345.6f,   -1e5f,       0.5f,       1.5f,
        2.5f,       -0.5f,      -2.5f,       8388607.5f, -8388607.5f, 8388608.0f, 0.41421f,
        0.41422f,   2.4142f,    2.41422f,    -2.41422f}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  struct Case {
    std::string op;
    runtime::Attributes attrs;
    std::function<double(double)> ref;
    bool nan_kept = true;  // Celu with a negative alpha: the scalar loop's max / min drop NaN
  };
  const double kSeluAlpha = 1.67326319217681884765625, kSeluGamma = 1.05070102214813232421875;
  const std::vector<Case> cases = {
      {"Erf", Attrs({}), [](double v) { return std::erf(v); }},
      {"Exp", Attrs({}), [](double v) { return std::exp(v); }},
      {"Softplus", Attrs({}),
       [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); }},
      {"LeakyRelu", Attrs({{"alpha", 0.1f}}), [](double v) { return v >= 0 ? v : 0.1 * v; }},
      {"Elu", Attrs({{"alpha", 0.7f}}),
       [](double v) { return v >= 0 ? v : double{0.7f} * std::expm1(v); }},
      {"Selu", Attrs({}),
       [&](double v) { return kSeluGamma * (v > 0 ? v : kSeluAlpha * std::expm1(v)); }},
      {"Celu", Attrs({{"alpha", 2.0f}}),
       [](double v) { return std::max(0.0, v) + std::min(0.0, 2.0 * std::expm1(v / 2.0)); }},
      {"Sin", Attrs({}), [](double v) { return std::sin(v); }},
      {"Cos", Attrs({}), [](double v) { return std::cos(v); }},
      {"Atan", Attrs({}), [](double v) { return std::atan(v); }},
      {"Round", Attrs({}), [](double v) { return std::nearbyint(v); }},
      {"Celu", Attrs({{"alpha", -2.0f}}),
       [](double v) { return std::max(0.0, v) + std::min(0.0, -2.0 * std::expm1(v / -2.0)); },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    auto out = h.Run(c.op, {Tensor::Of<float>({n}, x)}, c.attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        if (c.nan_kept) {
          EXPECT_TRUE(std::isnan(got[i])) << "x=NaN gave " << got[i];
        }
        continue;
      }
      const double want = c.ref(x[i]);
      if (std::isnan(want)) {  // sin and cos of infinities
        EXPECT_TRUE(std::isnan(got[i])) << "x=" << x[i] << " gave " << got[i];
        continue;
      }
      const double limit = std::numeric_limits<float>::max();
      if (std::fabs(want) > limit) {  // past float: the same infinity
        EXPECT_EQ(got[i], want > 0 ? inf : -inf) << "x=" << x[i];
        continue;
      }
      EXPECT_NEAR(got[i], want, 1e-37 + 2e-6 * std::fabs(want)) << "x=" << x[i];
    }
  }
}

TEST(UnaryTest, VectorMapsKeepTheSignOfZero) {
  KernelHarness h;
  // Whole vectors and the one-float tail: -0.3 and -0 round to -0; sin(-0) and atan(-0) are -0.
  std::vector<float> x(19, -0.3f);
  const std::vector<float> zeros(19, -0.0f);
  x[3] = x[18] = -0.0f;
  for (const char* op : {"Round", "Sin", "Atan"}) {
    SCOPED_TRACE(op);
    auto out = h.Run(op, {Tensor::Of<float>({19}, std::string(op) == "Round" ? x : zeros)});
    ASSERT_TRUE(out.ok()) << out.status();
    for (float v : (*out)[0].Values<float>()) {
      EXPECT_EQ(v, 0.0f);
      EXPECT_TRUE(std::signbit(v));
    }
  }
}

TEST(UnaryTest, AttributesAndIntegerTypes) {
  KernelHarness h;
  auto out = h.Run("LeakyRelu", {Tensor::Of<float>({2}, {-2, 3})}, Attrs({{"alpha", 0.5f}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1, 3}));
  out = h.Run("Neg", {Tensor::Of<int64_t>({3}, {1, -2, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{-1, 2, 0}));
  out = h.Run("Abs", {Tensor::Of<int32_t>({2}, {-7, 7})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{7, 7}));
  out = h.Run("Not", {Tensor::Of<bool>({2}, {true, false})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(h.Prepare("Sigmoid", {Tensor::Of<int32_t>({2}, {})}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(h.Prepare("Not", {Tensor::Of<float>({2}, {})}).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(UnaryTest, ClipBoundsFromAttributesOrInputs) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({4}, {-5, -0.5f, 0.5f, 5});
  // Opset 6: attributes.
  auto out = h.Run("Clip", {x}, Attrs({{"min", -1.0f}, {"max", 1.0f}}), 6);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  // Opset 13: inputs, read at Run even when unknown at Prepare; max absent.
  out = h.Run("Clip", {x, Tensor::Of<float>({}, {0.0f}), Tensor::Absent()}, {}, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0, 0.5f, 5}));
  out = h.Run("Clip", {Tensor::Of<int64_t>({3}, {-9, 4, 9}), Tensor::Of<int64_t>({}, {-1}),
                       Tensor::Of<int64_t>({}, {5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{-1, 4, 5}));
  EXPECT_EQ(h.Prepare("Clip", {x, Tensor::Of<float>({2}, {0, 1})}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UnaryTest, DropoutIsIdentityWithAllTrueMask) {
  KernelHarness h;
  auto out = h.Run("Dropout", {Tensor::Of<float>({3}, {1, 2, 3}), Tensor::Of<float>({}, {0.5f})},
                   {}, 13, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((*out)[1].Values<bool>(), (std::vector<bool>{true, true, true}));
  auto training = h.Prepare("Dropout", {Tensor::Of<float>({3}, {}), Tensor::Absent(),
                                        Tensor::Of<bool>({}, {true}, true)});
  EXPECT_EQ(training.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(CastTest, NumericBoolAndHalfConversions) {
  KernelHarness h;
  auto cast = [&](const Tensor& x, DataType to) {
    return h.Run("Cast", {x}, Attrs({{"to", static_cast<int64_t>(to)}}));
  };
  auto out = cast(Tensor::Of<float>({4}, {1.7f, -1.7f, 0.0f, 3e10f}), DataType::kInt32);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(),
            (std::vector<int32_t>{1, -1, 0, std::numeric_limits<int32_t>::max()}));
  out = cast(Tensor::Of<float>({3}, {0.0f, 2.0f, -0.5f}), DataType::kBool);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<bool>(), (std::vector<bool>{false, true, true}));
  out = cast(Tensor::Of<int64_t>({2}, {7, -3}), DataType::kFloat64);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{7, -3}));
  // float -> float16 -> float round-trips representable values and rounds the others.
  out = cast(Tensor::Of<float>({5}, {1.0f, -2.5f, 65504.0f, 1e6f, 1.0f + 1.0f / 4096}),
             DataType::kFloat16);
  ASSERT_TRUE(out.ok());
  Tensor half = (*out)[0];
  EXPECT_EQ(half.Values<uint16_t>(),
            (std::vector<uint16_t>{0x3C00, 0xC100, 0x7BFF, 0x7C00, 0x3C00}));
  out = cast(half, DataType::kFloat32);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(
      (*out)[0].Values<float>(),
      (std::vector<float>{1.0f, -2.5f, 65504.0f, std::numeric_limits<float>::infinity(), 1.0f}));
  // To string: prepared (tests/runtime/engine/string_tensor_test.cc runs it).
  EXPECT_TRUE(h.Prepare("Cast", {Tensor::Of<float>({1}, {})}, Attrs({{"to", int64_t{8}}})).ok());
  EXPECT_FALSE(h.Prepare("Cast", {Tensor::Of<float>({1}, {})}, Attrs({{"to", int64_t{99}}})).ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
