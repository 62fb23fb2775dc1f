#include "kernels/cpu/binary.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/kernels/cpu/kernel_test_util.h"

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

using testing::Attrs;
using testing::KernelHarness;
using testing::RandomFloats;
using testing::Tensor;

// Reference broadcast: the flat offset in `shape` of output index `i` of `out`.
int64_t BroadcastOffset(int64_t i, const runtime::Shape& out, const runtime::Shape& shape) {
  int64_t offset = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t axis = out.size() - 1 - k;
    const int64_t index = i % out[axis];
    i /= out[axis];
    if (k < shape.size()) {
      const int64_t dim = shape[shape.size() - 1 - k];
      if (dim != 1) offset += index * stride;
      stride *= dim;
    }
  }
  return offset;
}

TEST(BinaryBroadcastTest, ShapesMatchAReferenceLoop) {
  KernelHarness h;
  const std::vector<std::pair<runtime::Shape, runtime::Shape>> pairs = {
      {{2, 3, 4, 5}, {1, 3, 1, 1}},       {{2, 3, 4, 5}, {5}},    {{4, 1, 5}, {3, 1}},
      {{1, 3, 1, 5}, {2, 1, 4, 1}},       {{2, 3, 4}, {2, 3, 4}}, {{}, {2, 2}},
      {{3, 1, 2, 1, 2}, {1, 2, 1, 2, 1}}, {{6, 1}, {1, 0}}};
  for (const auto& [sa, sb] : pairs) {
    SCOPED_TRACE(runtime::ShapeToString(sa) + " vs " + runtime::ShapeToString(sb));
    const auto a = RandomFloats(runtime::NumElements(sa), 71);
    const auto b = RandomFloats(runtime::NumElements(sb), 72, 0.5f, 2.0f);
    const runtime::Shape out = *BroadcastShapes(sa, sb);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Pow", "Less"}) {
      auto got = h.Run(op, {Tensor::Of<float>(sa, a), Tensor::Of<float>(sb, b)});
      ASSERT_TRUE(got.ok()) << op << ": " << got.status();
      ASSERT_EQ((*got)[0].shape, out);
      const int64_t n = runtime::NumElements(out);
      const std::string name = op;
      for (int64_t i = 0; i < n; ++i) {
        const float x = a[BroadcastOffset(i, out, sa)];
        const float y = b[BroadcastOffset(i, out, sb)];
        if (name == "Less") {
          ASSERT_EQ((*got)[0].Values<bool>()[i], x < y);
          continue;
        }
        float want = name == "Add"   ? x + y
                     : name == "Sub" ? x - y
                     : name == "Mul" ? x * y
                     : name == "Div" ? x / y
                     : name == "Max" ? std::max(x, y)
                                     : std::pow(x, y);
        if (name == "Pow" && std::isnan(want)) {
          ASSERT_TRUE(std::isnan((*got)[0].Values<float>()[i]));
          continue;
        }
        ASSERT_NEAR((*got)[0].Values<float>()[i], want, 1e-6) << op << " at " << i;
      }
    }
  }
}

TEST(BinaryBroadcastTest, IntegerTypesVariadicWhereAndPRelu) {
  KernelHarness h;
  auto out =
      h.Run("Add", {Tensor::Of<int64_t>({2, 2}, {1, 2, 3, 4}), Tensor::Of<int64_t>({2}, {10, 20})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{11, 22, 13, 24}));
  // Integer division by zero does not trap; it yields 0.
  out = h.Run("Div", {Tensor::Of<int32_t>({3}, {7, -7, 5}), Tensor::Of<int32_t>({3}, {2, 2, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{3, -3, 0}));
  out = h.Run("Sum", {Tensor::Of<float>({2}, {1, 2}), Tensor::Of<float>({}, {10}),
                      Tensor::Of<float>({2, 1}, {100, 200})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (runtime::Shape{2, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{111, 112, 211, 212}));
  out = h.Run("Mean", {Tensor::Of<float>({2}, {1, 2}), Tensor::Of<float>({2}, {3, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 4}));
  out = h.Run("Min", {Tensor::Of<float>({3}, {1, 5, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 5, 3}));
  out = h.Run("Where", {Tensor::Of<bool>({2, 1}, {true, false}), Tensor::Of<int64_t>({2}, {1, 2}),
                        Tensor::Of<int64_t>({}, {-1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 2, -1, -1}));
  out = h.Run("Equal", {Tensor::Of<int64_t>({3}, {1, 2, 3}), Tensor::Of<int64_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<bool>(), (std::vector<bool>{false, true, false}));
  out = h.Run("Xor", {Tensor::Of<bool>({2}, {true, true}), Tensor::Of<bool>({2}, {true, false})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<bool>(), (std::vector<bool>{false, true}));
  out = h.Run("PRelu", {Tensor::Of<float>({1, 2, 2}, {-1, 1, -2, 2}),
                        Tensor::Of<float>({2, 1}, {0.5f, 0.25f})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{-0.5f, 1, -0.5f, 2}));
  out = h.Run("Pow", {Tensor::Of<float>({2}, {2, 3}), Tensor::Of<int64_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 9}));
  // Mixed element types and bad Where conditions are errors.
  EXPECT_FALSE(h.Prepare("Add", {Tensor::Of<float>({2}, {}), Tensor::Of<int64_t>({2}, {})}).ok());
  EXPECT_FALSE(h.Prepare("Where", {Tensor::Of<float>({2}, {}), Tensor::Of<float>({2}, {}),
                                   Tensor::Of<float>({2}, {})})
                   .ok());
  EXPECT_FALSE(h.Prepare("And", {Tensor::Of<float>({2}, {}), Tensor::Of<float>({2}, {})}).ok());
}

// Mod with fmod 1 on float32 (binary.cc's FmodOf, exact in double below quotients of 2^29)
// gives std::fmod's bits: operands of random signs and magnitudes from 2^-40 to 2^40 (quotients
// on both sides of 2^29), exact multiples (zeros with the dividend's sign), quotients just
// under an integer, subnormals, zeros, infinities and NaN.
TEST(ModTest, FmodOfFloatsMatchesLibmBitForBit) {
  KernelHarness h;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 40), sign(0, 1);
  auto random_float = [&] {
    return (sign(rng) != 0 ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng));
  };
  std::vector<float> a, b;
  for (int i = 0; i < 20000; ++i) {
    a.push_back(random_float());
    b.push_back(random_float());
  }
  for (int i = 0; i < 2000; ++i) {
    const float d = random_float();
    const float k = std::round(std::ldexp(mantissa(rng), exponent(rng) / 2 + 20));
    a.push_back((sign(rng) != 0 ? -k : k) * d);  // a multiple of d (or the float nearest it)
    b.push_back(d);
    a.push_back(std::nextafter(k * d, 0.0f));  // a quotient just under k
    b.push_back(d);
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> specials = {0.0f,      -0.0f,  inf,  -inf,  NAN,   tiny,
                                       -3 * tiny, 1e-38f, 3.0f, -7.5f, 1e30f, 0.1f};
  for (float x : specials) {
    for (float y : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());
  auto out = h.Run("Mod", {Tensor::Of<float>({n}, a), Tensor::Of<float>({n}, b)},
                   Attrs({{"fmod", int64_t{1}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> got = (*out)[0].Values<float>();
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  for (int64_t i = 0; i < n; ++i) {
    const float want = std::fmod(a[i], b[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << a[i] << " fmod " << b[i] << ": " << got[i];
    } else {
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << a[i] << " fmod " << b[i];
      ASSERT_EQ(got[i], want) << std::hexfloat << a[i] << " fmod " << b[i];
    }
  }
}

// Pow by one known power of 1, 2, 3 or -1 takes products (float32 base, any numeric exponent
// type), split over the threads; other powers (0.5), unknown exponents and a scalar base that
// the exponent's shape broadcasts keep powf. All match std::pow within a float's rounding.
TEST(PowTest, ByKnownSmallPowersMatchesPow) {
  KernelHarness h;
  std::vector<float> x = RandomFloats(1001, 71, -3.0f, 3.0f);
  x.insert(x.end(), {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -1e-20f, 1e20f});
  const int64_t n = static_cast<int64_t>(x.size());
  struct Case {
    Tensor exponent;
    double power;
  };
  const std::vector<Case> cases = {
      {Tensor::Of<float>({}, {2.0f}, true), 2},   {Tensor::Of<int64_t>({1}, {3}, true), 3},
      {Tensor::Of<double>({}, {-1.0}, true), -1}, {Tensor::Of<int32_t>({}, {1}, true), 1},
      {Tensor::Of<float>({}, {0.5f}, true), 0.5}, {Tensor::Of<float>({}, {2.0f}), 2},
  };
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "power " << c.power << " known " << c.exponent.known
                                        << " threads " << threads);
      const std::vector<Tensor> in = {Tensor::Of<float>({n}, x), c.exponent};
      auto kernel = h.Prepare("Pow", in, Attrs({}), 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto out = h.RunPrepared(**kernel, in);
      ASSERT_TRUE(out.ok()) << out.status();
      const auto got = (*out)[0].Values<float>();
      ASSERT_EQ(got.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::pow(static_cast<double>(x[i]), c.power);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << "x=" << x[i];
        } else if (std::isinf(want) || std::fabs(want) > 3e38) {
          EXPECT_TRUE(std::isinf(got[i]) && (got[i] > 0) == (want > 0)) << "x=" << x[i];
        } else {
          EXPECT_NEAR(got[i], want, 1e-37 + 3e-7 * std::fabs(want)) << "x=" << x[i];
        }
      }
    }
  }
  // A scalar base by a one-element exponent of shape [1]: the output is [1].
  auto out = h.Run("Pow", {Tensor::Of<float>({}, {3.0f}), Tensor::Of<float>({1}, {2.0f}, true)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape{1});
  EXPECT_EQ((*out)[0].Values<float>(), std::vector<float>{9.0f});
}

}  // namespace
}  // namespace reprise::kernels::cpu

namespace reprise::kernels::cpu::testing {
namespace {

// Where's branch-free rows (contiguous condition bytes with contiguous or one-value operands) and
// its general loop against a plain select, for 1-, 4- and 8-byte elements, condition bytes other
// than 0 and 1 (true), and a size that splits over two threads.
TEST(WhereTest, SelectsByMasksLikeABranch) {
  KernelHarness h;
  struct Form {
    Shape cond, x, y, out;
  };
  const int64_t rows = 4, cols = 37;
  const std::vector<Form> forms = {{{rows, cols}, {rows, cols}, {rows, cols}, {rows, cols}},
                                   {{rows, cols}, {rows, cols}, {}, {rows, cols}},
                                   {{rows, cols}, {1}, {rows, cols}, {rows, cols}},
                                   {{rows, 1}, {rows, cols}, {cols}, {rows, cols}},
                                   {{cols}, {rows, cols}, {rows, 1}, {rows, cols}},
                                   {{300, 200}, {300, 200}, {}, {300, 200}}};
  for (size_t f = 0; f < forms.size(); ++f) {
    const Form& form = forms[f];
    const Shape& full = form.out;
    const int64_t count = full[0] * full[1];
    auto numel = [](const Shape& s) {
      int64_t n = 1;
      for (int64_t d : s) n *= d;
      return n;
    };
    std::vector<uint8_t> cond(numel(form.cond));
    for (size_t i = 0; i < cond.size(); ++i) cond[i] = static_cast<uint8_t>((i * 7919) % 5 * 63);
    Tensor ct = Tensor::Of<uint8_t>(form.cond, cond);
    ct.dtype = DataType::kBool;
    const auto xs = RandomFloats(numel(form.x), 11 + static_cast<uint32_t>(f));
    const auto ys = RandomFloats(numel(form.y), 21 + static_cast<uint32_t>(f));
    // Element (r, c) of a tensor of shape s broadcast to [rows', cols'].
    auto pick = [&](const Shape& s, int64_t r, int64_t c, int64_t width) {
      if (s.empty()) return int64_t{0};
      if (s.size() == 1) return s[0] == 1 ? 0 : c;
      return (s[0] == 1 ? 0 : r) * (s[1] == 1 ? 1 : width) + (s[1] == 1 ? 0 : c);
    };
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "form " << f << " threads " << threads);
      auto check = [&]<typename T>(auto convert) {
        std::vector<T> xv, yv;
        for (float v : xs) xv.push_back(convert(v));
        for (float v : ys) yv.push_back(convert(v));
        const std::vector<Tensor> in = {ct, Tensor::Of<T>(form.x, xv), Tensor::Of<T>(form.y, yv)};
        auto kernel = h.Prepare("Where", in, {}, 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, in);
        ASSERT_TRUE(out.ok()) << out.status();
        const auto got = (*out)[0].Values<T>();
        ASSERT_EQ(static_cast<int64_t>(got.size()), count);
        const int64_t width = full[1];
        for (int64_t r = 0; r < full[0]; ++r) {
          for (int64_t c = 0; c < width; ++c) {
            const bool take_x = cond[pick(form.cond, r, c, width)] != 0;
            const T want = take_x ? xv[pick(form.x, r, c, width)] : yv[pick(form.y, r, c, width)];
            ASSERT_EQ(got[r * width + c], want) << "at " << r << "," << c;
          }
        }
      };
      check.template operator()<float>([](float v) { return v; });
      check.template operator()<int64_t>([](float v) { return static_cast<int64_t>(v * 1e6f); });
      check.template operator()<uint8_t>(
          [](float v) { return static_cast<uint8_t>(v * 100 + 100); });
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
