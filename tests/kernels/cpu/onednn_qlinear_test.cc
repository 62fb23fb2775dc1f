// QLinearConv and QLinearMatMul on oneDNN (onednn_qlinear.cc) against the direct loops
// (quantized_ops.cc) over a sweep of random shapes, types, zero points and scales. oneDNN rounds
// scale * accumulator in float32, the loop in double: outputs may differ by one quantization step,
// no more, and on few elements.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quantized_ops.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

using runtime::Attributes;
using runtime::PrepareContext;
using runtime::PreparedKernel;
using runtime::TensorDesc;

// Random 8-bit values of `type` (int8 or uint8) in [lo, hi].
Tensor EightBits(DataType type, Shape shape, int lo, int hi, std::mt19937& rng, bool known) {
  Tensor t;
  t.dtype = type;
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<size_t>(runtime::NumElements(t.shape)));
  std::uniform_int_distribution<int> value(lo, hi);
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(value(rng));  // two's complement for int8
  t.known = known;
  return t;
}

struct Case {
  std::string op = "QLinearConv";
  std::vector<Tensor> inputs;
  Attributes attrs;
  std::string label;
};

// One random convolution: 1-D, 2-D or 3-D; groups (depthwise included); strides, pads,
// dilations; uint8 or int8 x and y; per-tensor or per-channel w scales; with or without bias.
Case RandomCase(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int spatial_rank = pick(0, 5) == 0 ? 1 : (pick(0, 5) == 0 ? 3 : 2);
  const int64_t group = pick(0, 2) == 0 ? 1 : pick(2, 4);
  const bool depthwise = group > 1 && pick(0, 1) == 0;
  const int64_t in_per_group = depthwise ? 1 : pick(1, 9);
  const int64_t out_per_group = depthwise ? 1 : pick(1, 12);
  const int64_t n = pick(1, 2);
  Shape x = {n, group * in_per_group};
  Shape w = {group * out_per_group, in_per_group};
  std::vector<int64_t> strides, pads_begin, pads_end, dilations;
  for (int i = 0; i < spatial_rank; ++i) {
    const int64_t k = pick(1, 3);
    x.push_back(pick(static_cast<int>(k) + 2, spatial_rank == 3 ? 6 : 13));
    w.push_back(k);
    strides.push_back(pick(1, 2));
    dilations.push_back(k > 1 && pick(0, 3) == 0 ? 2 : 1);
    pads_begin.push_back(pick(0, 1));
    pads_end.push_back(pick(0, 1));
  }
  std::vector<int64_t> pads = pads_begin;
  pads.insert(pads.end(), pads_end.begin(), pads_end.end());
  const DataType x_type = pick(0, 2) == 0 ? DataType::kInt8 : DataType::kUInt8;
  const DataType y_type = pick(0, 1) == 0 ? DataType::kInt8 : DataType::kUInt8;
  const bool x_signed = x_type == DataType::kInt8;
  const bool y_signed = y_type == DataType::kInt8;
  const int64_t m = w[0];
  const bool per_channel = pick(0, 2) != 0;
  const bool bias = pick(0, 3) != 0;
  Case c;
  c.inputs.push_back(EightBits(x_type, x, x_signed ? -128 : 0, x_signed ? 127 : 255, rng, false));
  c.inputs.push_back(Tensor::Of<float>({}, {RandomFloats(1, seed + 1, 0.005f, 0.03f)[0]}, true));
  c.inputs.push_back(EightBits(x_type, {}, x_signed ? -20 : 100, x_signed ? 20 : 150, rng, true));
  c.inputs.push_back(EightBits(DataType::kInt8, w, -127, 127, rng, true));
  const Shape params = per_channel ? Shape{m} : Shape{};
  c.inputs.push_back(Tensor::Of<float>(
      params, RandomFloats(per_channel ? static_cast<size_t>(m) : 1, seed + 2, 0.002f, 0.01f),
      true));
  c.inputs.push_back(EightBits(DataType::kInt8, params, 0, 0, rng, true));
  // y's scale: about 40 steps per standard deviation of the real output (x - x_zero about
  // +-75, w about +-73, average w scale 0.006), so that outputs use the range and a few
  // saturate.
  // Products per output: the weights of one output channel (an exact integer).
  const auto taps = static_cast<double>(runtime::NumElements(w)) / static_cast<double>(m);
  const double spread = c.inputs[1].Values<float>()[0] * 0.006 * std::sqrt(taps) * 75.0 * 73.0;
  c.inputs.push_back(Tensor::Of<float>({}, {static_cast<float>(spread / 40.0)}, true));
  c.inputs.push_back(EightBits(y_type, {}, y_signed ? -10 : 0, y_signed ? 10 : 140, rng, true));
  if (bias) {
    std::vector<int32_t> b(static_cast<size_t>(m));
    std::uniform_int_distribution<int32_t> value(-3000, 3000);
    for (int32_t& v : b) v = value(rng);
    c.inputs.push_back(Tensor::Of<int32_t>({m}, b, true));
  }
  c.attrs.Set("group", group);
  c.attrs.Set("strides", strides);
  c.attrs.Set("pads", pads);
  c.attrs.Set("dilations", dilations);
  c.label = absl::StrCat("seed ", seed, ": x ", runtime::ShapeToString(x), " ",
                         runtime::DataTypeName(x_type), ", w ", runtime::ShapeToString(w),
                         " group ", group, ", y ", runtime::DataTypeName(y_type),
                         per_channel ? ", per-channel" : ", per-tensor", bias ? ", bias" : "");
  return c;
}

// One random QLinearMatMul: a [M, K] or [B, M, K], uint8 or int8; b [K, N] int8 with one scale
// or one per column; y uint8 or int8.
Case RandomMatMulCase(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int64_t m = pick(1, 20), k = pick(1, 70), n = pick(1, 40);
  Shape a = {m, k};
  if (pick(0, 1) == 0) a.insert(a.begin(), pick(2, 3));
  const DataType a_type = pick(0, 2) == 0 ? DataType::kInt8 : DataType::kUInt8;
  const DataType y_type = pick(0, 1) == 0 ? DataType::kInt8 : DataType::kUInt8;
  const bool a_signed = a_type == DataType::kInt8;
  const bool y_signed = y_type == DataType::kInt8;
  const bool per_column = pick(0, 2) != 0;
  Case c;
  c.op = "QLinearMatMul";
  c.inputs.push_back(EightBits(a_type, a, a_signed ? -128 : 0, a_signed ? 127 : 255, rng, false));
  c.inputs.push_back(Tensor::Of<float>({}, {RandomFloats(1, seed + 1, 0.005f, 0.03f)[0]}, true));
  c.inputs.push_back(EightBits(a_type, {}, a_signed ? -20 : 100, a_signed ? 20 : 150, rng, true));
  c.inputs.push_back(EightBits(DataType::kInt8, {k, n}, -127, 127, rng, true));
  const Shape params = per_column ? Shape{n} : Shape{};
  c.inputs.push_back(Tensor::Of<float>(
      params, RandomFloats(per_column ? static_cast<size_t>(n) : 1, seed + 2, 0.002f, 0.01f),
      true));
  c.inputs.push_back(EightBits(DataType::kInt8, params, 0, 0, rng, true));
  const double spread =
      c.inputs[1].Values<float>()[0] * 0.006 * std::sqrt(static_cast<double>(k)) * 75.0 * 73.0;
  c.inputs.push_back(Tensor::Of<float>({}, {static_cast<float>(spread / 40.0)}, true));
  c.inputs.push_back(EightBits(y_type, {}, y_signed ? -10 : 0, y_signed ? 10 : 140, rng, true));
  c.label = absl::StrCat("seed ", seed, ": a ", runtime::ShapeToString(a), " ",
                         runtime::DataTypeName(a_type), ", b [", k, ",", n, "], y ",
                         runtime::DataTypeName(y_type), per_column ? ", per-column" : "");
  return c;
}

using Factory = absl::StatusOr<std::unique_ptr<PreparedKernel>> (*)(const PrepareContext&);

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareWith(Factory factory, const Case& c,
                                                            std::vector<TensorDesc>* descs) {
  for (const Tensor& t : c.inputs) {
    TensorDesc d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    d.data = t.known ? t.bytes.data() : nullptr;
    descs->push_back(d);
  }
  PrepareContext context;
  context.op = c.op;
  context.name = "node";
  context.inputs = *descs;
  context.attributes = &c.attrs;
  return factory(context);
}

// Element i of an 8-bit output.
int ValueAt(const Tensor& t, size_t i) {
  return t.dtype == DataType::kInt8 ? static_cast<int8_t>(t.bytes[i]) : t.bytes[i];
}

// Runs 60 random cases of `make` on oneDNN (`fast`) and the loop (`ref`): every output within
// one step, at most 1% of them off, oneDNN taking at least 50 cases.
void ExpectWithinOneStep(Case (*make)(uint32_t), Factory fast_factory, Factory ref_factory) {
  KernelHarness h;
  int ran = 0;
  size_t elements = 0, off_by_one = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const Case c = make(seed);
    std::vector<TensorDesc> fast_descs, ref_descs;
    auto fast = PrepareWith(fast_factory, c, &fast_descs);
    auto ref = PrepareWith(ref_factory, c, &ref_descs);
    ASSERT_TRUE(ref.ok()) << c.label << ": " << ref.status();
    if (!fast.ok()) {
      // Only "oneDNN has nothing but its reference code" is allowed here.
      ASSERT_TRUE(absl::IsUnimplemented(fast.status())) << c.label << ": " << fast.status();
      continue;
    }
    ++ran;
    auto got = h.RunPrepared(**fast, c.inputs);
    auto want = h.RunPrepared(**ref, c.inputs);
    ASSERT_TRUE(got.ok()) << c.label << ": " << got.status();
    ASSERT_TRUE(want.ok()) << c.label << ": " << want.status();
    const Tensor& g = (*got)[0];
    const Tensor& r = (*want)[0];
    ASSERT_EQ(g.shape, r.shape) << c.label;
    ASSERT_EQ(g.dtype, r.dtype) << c.label;
    for (size_t i = 0; i < r.bytes.size(); ++i) {
      const int diff = std::abs(ValueAt(g, i) - ValueAt(r, i));
      ASSERT_LE(diff, 1) << c.label << " at " << i << ": onednn " << ValueAt(g, i) << ", loop "
                         << ValueAt(r, i);
      if (diff != 0) ++off_by_one;
    }
    elements += r.bytes.size();
  }
  std::printf("%s: onednn ran %d of 60 cases: %zu of %zu outputs one step off the loop\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name(), ran,
              off_by_one, elements);
  if (!OnednnInt8IsExact()) {
    // Without VNNI oneDNN's int8 sums saturate (measured: 15 and 34 steps off under
    // ONEDNN_MAX_CPU_ISA=AVX2): the kernel must leave every case to the loop.
    EXPECT_EQ(ran, 0) << "oneDNN took " << ran << " cases on a CPU without VNNI";
    return;
  }
  // oneDNN 2.6 with VNNI has jit int8 kernels for all of these; a machine where it has only
  // reference code for most would test little.
  EXPECT_GE(ran, 50) << "oneDNN took " << ran << " of 60 cases";
  EXPECT_LE(off_by_one * 100, elements) << off_by_one << " of " << elements << " off by one";
}

TEST(OnednnQLinearConvTest, MatchesTheDirectLoopWithinOneStep) {
  ExpectWithinOneStep(&RandomCase, &PrepareQLinearConvOnednn, &PrepareQLinearConvDirect);
}

TEST(OnednnQLinearMatMulTest, MatchesTheDirectLoopWithinOneStep) {
  ExpectWithinOneStep(&RandomMatMulCase, &PrepareQLinearMatMulOnednn, &PrepareQLinearMatMulDirect);
}

TEST(OnednnQLinearConvTest, RegisteredKernelFallsBackToTheLoop) {
  // Unknown weights, or a nonzero w_zero_point: oneDNN refuses, the registered kernel runs the
  // loop and gives its exact result.
  KernelHarness h;
  Case c = RandomCase(7);
  std::vector<TensorDesc> descs;
  c.inputs[3].known = false;
  EXPECT_TRUE(absl::IsUnimplemented(PrepareWith(&PrepareQLinearConvOnednn, c, &descs).status()));
  auto loop = h.Run("QLinearConv", c.inputs, c.attrs);
  ASSERT_TRUE(loop.ok()) << loop.status();
  c.inputs[3].known = true;
  auto fast = h.Run("QLinearConv", c.inputs, c.attrs);
  ASSERT_TRUE(fast.ok()) << fast.status();
  for (size_t i = 0; i < (*loop)[0].bytes.size(); ++i) {
    EXPECT_LE(std::abs(ValueAt((*fast)[0], i) - ValueAt((*loop)[0], i)), 1) << "at " << i;
  }
  c.inputs[5].bytes[0] = 3;  // w_zero_point
  descs.clear();
  EXPECT_TRUE(absl::IsUnimplemented(PrepareWith(&PrepareQLinearConvOnednn, c, &descs).status()));
  EXPECT_TRUE(h.Run("QLinearConv", c.inputs, c.attrs).ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
