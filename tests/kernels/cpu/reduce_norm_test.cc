// Reductions (log-sum-exp included), ArgMax, CumSum, TopK (reduce.cc, topk.cc),
// Softmax/LayerNorm/BatchNorm (normalization.cc), the channel LayerNorm (channel_norm.cc) and
// Resize (resize.cc). Float tolerance 1e-5
// absolute + 1e-5 relative against reference loops, exact for hand-computed cases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
  }
}

TEST(ReduceTest, AxesFromAttributeOrInputKeepdimsAndNoop) {
  KernelHarness h;
  const auto x = RandomFloats(2 * 3 * 4, 81);
  const Tensor t = Tensor::Of<float>({2, 3, 4}, x);
  // ReduceMean over the non-adjacent axes 0 and 2, keepdims.
  auto out = h.Run("ReduceMean", {t}, Attrs({{"axes", std::vector<int64_t>{0, -1}}}), 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 1}));
  std::vector<float> want(3, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[j] += x[(i * 3 + j) * 4 + k] / 8.0f;
  ExpectNear((*out)[0].Values<float>(), want);
  // ReduceSum (opset 13): axes as an input, keepdims 0.
  out = h.Run("ReduceSum", {t, Tensor::Of<int64_t>({1}, {1}, true)},
              Attrs({{"keepdims", int64_t{0}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 4}));
  want.assign(8, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[i * 4 + k] += x[(i * 3 + j) * 4 + k];
  ExpectNear((*out)[0].Values<float>(), want);
  // No axes: all, unless noop_with_empty_axes.
  out = h.Run("ReduceMax", {t});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1}));
  EXPECT_EQ((*out)[0].Values<float>()[0], *std::max_element(x.begin(), x.end()));
  out = h.Run("ReduceSum", {t, Tensor::Of<int64_t>({0}, {}, true)},
              Attrs({{"noop_with_empty_axes", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), x);
  out = h.Run("ReduceL2", {Tensor::Of<float>({2, 2}, {3, 4, 6, 8})},
              Attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5, 10}));
  out = h.Run("ReduceProd", {Tensor::Of<int64_t>({3}, {2, 3, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{24}));
  EXPECT_EQ(h.Prepare("ReduceSum", {t, Tensor::Of<int64_t>({1}, {1})}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(h.Prepare("ReduceMin", {t}, Attrs({{"axes", std::vector<int64_t>{3}}})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Every float reduction over one run of adjacent axes (at the end, in the middle, across
// size-1 axes) and over axes apart, on one and on two threads, against a reference in double
// over the multi-index. Rows long enough to need blocks of lanes, values far from zero.
TEST(ReduceTest, FloatReductionsOverRunsOfAxesMatchADoubleReference) {
  KernelHarness h;
  const Shape shape = {3, 1, 5, 7, 2100};
  const int64_t count = 3 * 5 * 7 * 2100;
  std::vector<float> x = RandomFloats(count, 83, -1.0f, 1.0f);
  for (int64_t i = 0; i < count; ++i) x[i] += (i % 3 == 0) ? 50.0f : -20.0f;
  const std::vector<std::vector<int64_t>> axes_cases = {
      {4}, {3, 4}, {1, 2, 3, 4}, {2}, {1, 2}, {0}, {0, 1, 2, 3, 4}, {2, 4}, {0, 3}};
  const std::vector<std::string> ops = {"ReduceSum",       "ReduceMean", "ReduceMax", "ReduceMin",
                                        "ReduceSumSquare", "ReduceL2",   "ReduceL1"};
  for (const std::vector<int64_t>& axes : axes_cases) {
    // The reference: each output's index as the input's with the reduced axes at 0.
    std::vector<bool> reduced(shape.size(), false);
    for (int64_t a : axes) reduced[a] = true;
    Shape out_shape;
    for (size_t d = 0; d < shape.size(); ++d) out_shape.push_back(reduced[d] ? 1 : shape[d]);
    const int64_t out_count = runtime::NumElements(out_shape);
    for (const std::string& op : ops) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(op + " over " + runtime::ShapeToString(axes) + " on " +
                     std::to_string(threads) + " thread(s)");
        std::vector<double> sum(out_count, 0), squares(out_count, 0), l1(out_count, 0);
        std::vector<double> max(out_count, -1e30), min(out_count, 1e30);
        std::vector<int64_t> n(out_count, 0);
        std::vector<int64_t> index(shape.size(), 0);
        for (int64_t i = 0; i < count; ++i) {
          int64_t o = 0;
          for (size_t d = 0; d < shape.size(); ++d) {
            o = o * out_shape[d] + (reduced[d] ? 0 : index[d]);
          }
          const double v = x[i];
          sum[o] += v;
          squares[o] += v * v;
          l1[o] += std::fabs(v);
          max[o] = std::max(max[o], v);
          min[o] = std::min(min[o], v);
          ++n[o];
          for (size_t d = shape.size(); d-- > 0;) {
            if (++index[d] < shape[d]) break;
            index[d] = 0;
          }
        }
        auto kernel = h.Prepare(op, {Tensor::Of<float>(shape, x)},
                                Attrs({{"axes", axes}, {"keepdims", int64_t{1}}}), 13, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, {Tensor::Of<float>(shape, x)});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, out_shape);
        const std::vector<float> got = (*out)[0].Values<float>();
        ASSERT_EQ(static_cast<int64_t>(got.size()), out_count);
        for (int64_t o = 0; o < out_count; ++o) {
          double want = sum[o];
          if (op == "ReduceMean") want = sum[o] / n[o];
          if (op == "ReduceMax") want = max[o];
          if (op == "ReduceMin") want = min[o];
          if (op == "ReduceSumSquare") want = squares[o];
          if (op == "ReduceL2") want = std::sqrt(squares[o]);
          if (op == "ReduceL1") want = l1[o];
          ASSERT_NEAR(got[o], want, 1e-6 * std::fabs(want) + 1e-4) << "output " << o;
        }
      }
    }
  }
}

// ReduceMax / ReduceMin over the last axis (vector lanes, four vectors in flight, then a tail):
// rows of 1 to 70 values, the extreme in the last place, a row of infinities gives that
// infinity, NaN (first and last in a row) is skipped as the comparisons skip it.
// ReduceMax and ReduceMin over the last axis of 37 rows (groups of a vector's lanes of rows
// merged by lane shuffles, then single rows; rows shorter than a vector, rows whose last vector
// overlaps the one before, rows of more than 16 vectors) on one and two threads: in the first
// group and again in the second, a row whose maximum comes last, one whose minimum comes first,
// a row of -inf and one starting and ending with NaN (skipped).
TEST(ReduceTest, RowExtremesOverShortAndInfiniteRows) {
  KernelHarness h;
  const int64_t rows = 37;
  for (int64_t dim : {1, 5, 8, 16, 20, 33, 70, 300}) {
    std::vector<float> x = RandomFloats(rows * dim, 88, -5.0f, 5.0f);
    for (const int64_t first : {int64_t{0}, int64_t{18}}) {
      float* r = x.data() + first * dim;
      r[dim - 1] = 9.0f;                                             // the maximum last
      r[dim] = -9.0f;                                                // the minimum first
      for (int64_t k = 0; k < dim; ++k) r[2 * dim + k] = -INFINITY;  // a row of -inf
      r[3 * dim] = NAN;                                              // starts with NaN
      r[4 * dim - 1] = NAN;                                          // and ends with it
    }
    for (const std::string op : {"ReduceMax", "ReduceMin"}) {
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << op << " dim " << dim << " threads " << threads);
        const std::vector<Tensor> in = {Tensor::Of<float>({rows, dim}, x)};
        auto kernel =
            h.Prepare(op, in, Attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}),
                      13, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, in);
        ASSERT_TRUE(out.ok()) << out.status();
        const std::vector<float> got = (*out)[0].Values<float>();
        ASSERT_EQ(got.size(), static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
          float want = op == "ReduceMax" ? -INFINITY : INFINITY;
          bool any = false;
          for (int64_t k = 0; k < dim; ++k) {
            const float v = x[r * dim + k];
            if (std::isnan(v)) continue;
            any = true;
            want = op == "ReduceMax" ? std::max(want, v) : std::min(want, v);
          }
          if (!any) continue;  // a row of NaN only (dim 1)
          EXPECT_EQ(got[r], want) << "row " << r;
        }
      }
    }
  }
}

// log(sum e^v) of `values` in double: the maximum m plus log(sum e^(v - m)); NaN when any value
// is NaN, the infinity when the maximum is one.
double LogSumExpReference(const std::vector<double>& values) {
  double m = -INFINITY;
  for (double v : values) {
    if (std::isnan(v)) return NAN;
    m = std::max(m, v);
  }
  if (std::isinf(m)) return m;
  double sum = 0;
  for (double v : values) sum += std::exp(v - m);
  return m + std::log(sum);
}

// ReduceLogSumExp over the vector-lane rows (the last axis, longer than one block of 2048),
// over columns (a middle axis), over axes that are not one run (the general loop), in float32
// and float64, on 1 and 2 threads: values around 1000 (e^1000 overflows even a double, so the
// sum must be shifted by the maximum), around -1000, rows of -inf, rows holding +inf or NaN.
TEST(ReduceTest, LogSumExpShiftsByTheMaximum) {
  KernelHarness h;
  const Shape shape = {3, 2, 5, 2100};
  const int64_t count = 3 * 2 * 5 * 2100;
  std::vector<float> x = RandomFloats(count, 91, -4.0f, 4.0f);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t outer = i / (2 * 5 * 2100);
    x[i] += outer == 0 ? 1000.0f : outer == 1 ? -1000.0f : 0.0f;
  }
  // In the last batch item: row (1, 0) all -inf, row (1, 1) one +inf, row (1, 2) one NaN, row
  // (1, 3) half -inf.
  float* special = x.data() + (2 * 2 + 1) * 5 * 2100;
  std::fill(special, special + 2100, -INFINITY);
  special[2100 + 7] = INFINITY;
  special[2 * 2100 + 2099] = NAN;
  std::fill(special + 3 * 2100, special + 3 * 2100 + 1050, -INFINITY);
  for (const std::vector<int64_t>& axes :
       std::vector<std::vector<int64_t>>{{3}, {2}, {1, 2}, {1, 3}, {0, 1, 2, 3}}) {
    std::vector<bool> reduced(shape.size(), false);
    for (int64_t a : axes) reduced[a] = true;
    Shape out_shape;
    for (size_t d = 0; d < shape.size(); ++d) out_shape.push_back(reduced[d] ? 1 : shape[d]);
    std::vector<std::vector<double>> groups(runtime::NumElements(out_shape));
    std::vector<int64_t> index(shape.size(), 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < shape.size(); ++d) o = o * out_shape[d] + (reduced[d] ? 0 : index[d]);
      groups[o].push_back(x[i]);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
    for (bool as_double : {false, true}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(runtime::ShapeToString(axes) + (as_double ? " float64 " : " float32 ") +
                     std::to_string(threads) + " thread(s)");
        const Tensor in = as_double
                              ? Tensor::Of<double>(shape, std::vector<double>(x.begin(), x.end()))
                              : Tensor::Of<float>(shape, x);
        auto kernel = h.Prepare("ReduceLogSumExp", {in},
                                Attrs({{"axes", axes}, {"keepdims", int64_t{1}}}), 13, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, {in});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, out_shape);
        std::vector<double> got;
        if (as_double) {
          got = (*out)[0].Values<double>();
        } else {
          for (float v : (*out)[0].Values<float>()) got.push_back(v);
        }
        ASSERT_EQ(got.size(), groups.size());
        for (size_t o = 0; o < groups.size(); ++o) {
          const double want = LogSumExpReference(groups[o]);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[o])) << "output " << o << ": " << got[o];
          } else if (std::isinf(want)) {
            EXPECT_EQ(got[o], want) << "output " << o;
          } else {
            ASSERT_NEAR(got[o], want, 1e-6 * std::fabs(want) + 1e-5) << "output " << o;
          }
        }
      }
    }
  }
}

// ArgMax / ArgMin over every axis of [3, 5, 7, 300] (up to 10500 outputs a row, more than one
// block of columns), first or last index of the best, on 1 and 2 threads, float32 and int64:
// values from a few integers (many ties), NaN in float (never better, and kept when first),
// against a scan that compares each value with the one at the best index so far.
TEST(ReduceTest, ArgMaxAndArgMinMatchAScanOverEveryAxis) {
  KernelHarness h;
  const Shape shape = {3, 5, 7, 300};
  const int64_t count = 3 * 5 * 7 * 300;
  std::vector<float> x = RandomFloats(count, 97, -3.0f, 3.0f);
  for (float& v : x) v = std::round(v);
  for (int64_t i = 0; i < count; i += 97) x[i] = NAN;
  std::vector<int64_t> ints(count);
  for (int64_t i = 0; i < count; ++i) ints[i] = std::isnan(x[i]) ? 7 : static_cast<int64_t>(x[i]);
  for (int64_t axis = 0; axis < 4; ++axis) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < 4; ++d) inner *= shape[d];
    const int64_t dim = shape[axis];
    for (const std::string op : {"ArgMax", "ArgMin"}) {
      for (int64_t last : {0, 1}) {
        for (bool as_int : {false, true}) {
          for (int threads : {1, 2}) {
            SCOPED_TRACE(op + " axis " + std::to_string(axis) + " last " + std::to_string(last) +
                         (as_int ? " int64 " : " float32 ") + std::to_string(threads));
            const Tensor in =
                as_int ? Tensor::Of<int64_t>(shape, ints) : Tensor::Of<float>(shape, x);
            auto kernel = h.Prepare(op, {in}, Attrs({{"axis", axis}, {"select_last_index", last}}),
                                    13, 1, threads);
            ASSERT_TRUE(kernel.ok()) << kernel.status();
            auto out = h.RunPrepared(**kernel, {in});
            ASSERT_TRUE(out.ok()) << out.status();
            const std::vector<int64_t> got = (*out)[0].Values<int64_t>();
            ASSERT_EQ(static_cast<int64_t>(got.size()), outer * inner);
            for (int64_t o = 0; o < outer; ++o) {
              for (int64_t i = 0; i < inner; ++i) {
                auto value = [&](int64_t k) {
                  const int64_t at = (o * dim + k) * inner + i;
                  return as_int ? static_cast<double>(ints[at]) : static_cast<double>(x[at]);
                };
                int64_t best = 0;
                for (int64_t k = 1; k < dim; ++k) {
                  const double v = value(k), b = value(best);
                  const bool better =
                      op == "ArgMax" ? (last != 0 ? v >= b : v > b) : (last != 0 ? v <= b : v < b);
                  if (better) best = k;
                }
                ASSERT_EQ(got[o * inner + i], best) << "output " << o * inner + i;
              }
            }
          }
        }
      }
    }
  }
}

TEST(ReduceTest, ArgMaxCumSumTopK) {
  KernelHarness h;
  const Tensor t = Tensor::Of<float>({2, 3}, {1, 5, 5, 7, 2, 7});
  auto out = h.Run("ArgMax", {t}, Attrs({{"axis", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 1}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{1, 0}));
  out = h.Run(
      "ArgMax", {t},
      Attrs({{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}, {"keepdims", int64_t{0}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{2, 2}));
  out = h.Run("ArgMin", {t});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  const Tensor v = Tensor::Of<float>({4}, {1, 2, 3, 4});
  const Tensor axis = Tensor::Of<int64_t>({}, {0}, true);
  out = h.Run("CumSum", {v, axis});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 3, 6, 10}));
  out = h.Run("CumSum", {v, axis}, Attrs({{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{9, 7, 4, 0}));
  EXPECT_EQ(h.Prepare("CumSum", {v, Tensor::Of<int64_t>({}, {0})}).status().code(),
            absl::StatusCode::kUnimplemented);
  // TopK: ties keep the lower index first.
  out = h.Run("TopK", {t, Tensor::Of<int64_t>({1}, {2}, true)}, {}, 11, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{5, 5, 7, 7}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 2, 0, 2}));
  out = h.Run("TopK", {t, Tensor::Of<int64_t>({1}, {1}, true)},
              Attrs({{"largest", int64_t{0}}, {"axis", int64_t{0}}}), 11, 2);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 5}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_FALSE(h.Prepare("TopK", {t, Tensor::Of<int64_t>({1}, {4}, true)}, {}, 11, 2).ok());
}

// TopK's two paths (k up to 32: a sorted array per row, contiguous float rows screened sixteen
// values at a time, rows over the threads; larger k: a heap per row) against a stable sort in
// TopK's order (NaN above every number, ties by index), over rows with duplicates, NaNs and
// infinities, along the last axis and a middle one.
TEST(ReduceTest, TopKMatchesAStableSort) {
  KernelHarness h;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t dim : {1, 7, 16, 33, 200}) {
    for (bool last : {true, false}) {
      const int64_t outer = last ? 3 : 2, inner = last ? 1 : 3;
      const Shape shape = last ? Shape{outer, dim} : Shape{outer, dim, inner};
      std::vector<float> x =
          RandomFloats(outer * dim * inner, 77 + static_cast<uint32_t>(dim), -20.0f, 20.0f);
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = i % 13 == 5 ? nan : i % 17 == 3 ? -inf : i % 19 == 8 ? inf : std::round(x[i]);
      }
      for (int64_t k :
           {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{16}, int64_t{32}, int64_t{33}, dim}) {
        if (k > dim) continue;
        for (int64_t largest : {0, 1}) {
          for (int threads : {1, 2}) {
            SCOPED_TRACE(::testing::Message() << "dim " << dim << " last " << last << " k " << k
                                              << " largest " << largest << " threads " << threads);
            const Tensor kt = Tensor::Of<int64_t>({1}, {k}, true);
            const Tensor xt = Tensor::Of<float>(shape, x);
            auto kernel =
                h.Prepare("TopK", {xt, kt}, Attrs({{"axis", int64_t{1}}, {"largest", largest}}), 11,
                          2, threads);
            ASSERT_TRUE(kernel.ok()) << kernel.status();
            auto out = h.RunPrepared(**kernel, {xt, kt});
            ASSERT_TRUE(out.ok()) << out.status();
            const auto values = (*out)[0].Values<float>();
            const auto indices = (*out)[1].Values<int64_t>();
            ASSERT_EQ(values.size(), static_cast<size_t>(outer * k * inner));
            for (int64_t o = 0; o < outer; ++o) {
              for (int64_t i = 0; i < inner; ++i) {
                auto at = [&](int64_t j) { return x[(o * dim + j) * inner + i]; };
                std::vector<int64_t> order(dim);
                std::iota(order.begin(), order.end(), 0);
                auto before = [&](int64_t a, int64_t b) {  // NaN above every number
                  const float va = at(a), vb = at(b);
                  if (std::isnan(va) || std::isnan(vb)) {
                    return std::isnan(va) != std::isnan(vb) && std::isnan(va) == (largest != 0);
                  }
                  return largest != 0 ? va > vb : va < vb;
                };
                std::stable_sort(order.begin(), order.end(), before);
                for (int64_t j = 0; j < k; ++j) {
                  const size_t got = (o * k + j) * inner + i;
                  EXPECT_EQ(indices[got], order[j]) << "row " << o << "," << i << " rank " << j;
                  const float want = at(order[j]);
                  if (std::isnan(want)) {
                    EXPECT_TRUE(std::isnan(values[got]));
                  } else {
                    EXPECT_EQ(values[got], want);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// A row of one value: both paths keep the k lowest indices, in order.
TEST(ReduceTest, TopKOfEqualValuesKeepsTheLowestIndices) {
  KernelHarness h;
  for (int64_t k : {5, 40}) {
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "k " << k << " axis " << axis);
      const Shape shape = axis == 0 ? Shape{100, 2} : Shape{2, 100};
      auto out = h.Run("TopK",
                       {Tensor::Of<float>(shape, std::vector<float>(200, 1.5f)),
                        Tensor::Of<int64_t>({1}, {k}, true)},
                       Attrs({{"axis", axis}}), 11, 2);
      ASSERT_TRUE(out.ok()) << out.status();
      const auto indices = (*out)[1].Values<int64_t>();
      ASSERT_EQ(indices.size(), static_cast<size_t>(2 * k));
      for (int64_t j = 0; j < 2 * k; ++j) {
        EXPECT_EQ(indices[j], axis == 0 ? j / 2 : j % k) << "output " << j;
      }
    }
  }
}

TEST(NormalizationTest, SoftmaxAxisSemanticsChangeAtOpset13) {
  KernelHarness h;
  const auto x = RandomFloats(2 * 3 * 4, 91, -3.0f, 3.0f);
  const Tensor t = Tensor::Of<float>({2, 3, 4}, x);
  // Opset 11, axis 1: softmax over the 12 trailing elements of each batch row.
  auto out = h.Run("Softmax", {t}, Attrs({{"axis", int64_t{1}}}), 11);
  ASSERT_TRUE(out.ok());
  std::vector<float> want(24);
  for (int b = 0; b < 2; ++b) {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += std::exp(x[b * 12 + i]);
    for (int i = 0; i < 12; ++i) want[b * 12 + i] = std::exp(x[b * 12 + i]) / sum;
  }
  ExpectNear((*out)[0].Values<float>(), want);
  // Opset 13, axis 1: softmax over the 3 elements of axis 1 only.
  out = h.Run("Softmax", {t}, Attrs({{"axis", int64_t{1}}}), 13);
  ASSERT_TRUE(out.ok());
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k) {
      double sum = 0;
      for (int j = 0; j < 3; ++j) sum += std::exp(x[(b * 3 + j) * 4 + k]);
      for (int j = 0; j < 3; ++j)
        want[(b * 3 + j) * 4 + k] = std::exp(x[(b * 3 + j) * 4 + k]) / sum;
    }
  ExpectNear((*out)[0].Values<float>(), want);
  out = h.Run("LogSoftmax", {t}, Attrs({{"axis", int64_t{1}}}), 13);
  ASSERT_TRUE(out.ok());
  for (float& w : want) w = std::log(w);
  ExpectNear((*out)[0].Values<float>(), want);
}

// The contiguous Softmax path (its own vectorised exp): relative error against double precision
// over rows of 1, 3, 16 and 37 values spread over [-100, 20] (so some shifted inputs fall below
// -87, where e^x is 0 in float) and of 50000 over [-2, 2], rows holding -inf, and a row whose
// maximum is its last value.
TEST(NormalizationTest, SoftmaxMatchesDoublePrecisionOverWideRanges) {
  KernelHarness h;
  for (const std::string op : {"Softmax", "LogSoftmax"})
    for (int64_t dim : {1, 3, 16, 37, 50000}) {
      SCOPED_TRACE(op + " " + std::to_string(dim));
      const int64_t rows = 5;
      // A vocabulary-long row over [-2, 2]: its sum of e^x gathers 50000 comparable terms.
      std::vector<float> x = dim > 1000 ? RandomFloats(rows * dim, 97, -2.0f, 2.0f)
                                        : RandomFloats(rows * dim, 97, -100.0f, 20.0f);
      if (dim > 1) {
        x[dim + 1] = -INFINITY;                                        // one -inf in row 1
        for (int64_t k = 0; k < dim; ++k) x[2 * dim + k] = -INFINITY;  // row 2: all -inf
        x[2 * dim] = 0.5f;
        x[4 * dim - 1] = 25.0f;  // row 3's maximum is its last value (a vector tail or lane)
      }
      auto out = h.Run(op, {Tensor::Of<float>({rows, dim}, x)}, {}, 13);
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<float> got = (*out)[0].Values<float>();
      for (int64_t r = 0; r < rows; ++r) {
        double max = -INFINITY, sum = 0;
        for (int64_t k = 0; k < dim; ++k) max = std::max<double>(max, x[r * dim + k]);
        for (int64_t k = 0; k < dim; ++k) sum += std::exp(x[r * dim + k] - max);
        for (int64_t k = 0; k < dim; ++k) {
          const double shift = x[r * dim + k] - max;
          if (op == "LogSoftmax") {  // shift - ln(sum), each rounded to float once or twice
            const double log_want = shift - std::log(sum);
            if (std::isinf(shift)) {
              EXPECT_EQ(got[r * dim + k], -INFINITY) << "row " << r << " at " << k;
            } else {
              EXPECT_NEAR(got[r * dim + k], log_want, 1e-6 * (std::fabs(shift) + 1.0))
                  << "row " << r << " at " << k;
            }
            continue;
          }
          const double want = std::exp(shift) / sum;
          // float's rounding of x - max alone moves e^(x - max) by |x - max| * 2^-24 relatively;
          // below float's normal range (1.2e-38) the result may be 0.
          if (std::isinf(shift)) {
            EXPECT_EQ(got[r * dim + k], 0.0f) << "row " << r << " at " << k;
            continue;
          }
          const double relative = 1e-6 + std::fabs(shift) * 1.2e-7;
          EXPECT_NEAR(got[r * dim + k], want, relative * want + 2e-38)
              << "row " << r << " at " << k;
        }
      }
    }
}

// kFusedChannelNormOp against a reference in double: positions fewer than a vector (3 x 7),
// more than a block of 256 with a tail (300, 3-D), images split over two threads, parameters as
// [C], [1, C, 1, 1] and [C, 1, 1], with and without bias; refused: rank 2, a parameter of
// another size or along another axis.
TEST(NormalizationTest, ChannelLayerNormMatchesReference) {
  KernelHarness h;
  struct Case {
    Shape x, params;
    bool bias;
    int threads;
  };
  const Case cases[] = {
      {{2, 5, 3, 7}, {5}, true, 1},
      {{1, 16, 300}, {1, 16, 1}, false, 2},
      {{3, 33, 17, 19}, {33, 1, 1}, true, 2},
      {{2, 64, 16, 16}, {1, 64, 1, 1}, true, 2},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(runtime::ShapeToString(k.x));
    const int64_t n = k.x[0], c = k.x[1], count = runtime::NumElements(k.x),
                  positions = count / (n * c);
    const auto x = RandomFloats(count, 95, -3.0f, 5.0f);
    const auto scale = RandomFloats(c, 96), bias = RandomFloats(c, 97);
    std::vector<Tensor> inputs = {Tensor::Of<float>(k.x, x), Tensor::Of<float>(k.params, scale)};
    if (k.bias) inputs.push_back(Tensor::Of<float>(k.params, bias));
    auto kernel =
        h.Prepare(kFusedChannelNormOp, inputs, Attrs({{"epsilon", 1e-4f}}), 17, 1, k.threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto out = h.RunPrepared(**kernel, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape, k.x);
    std::vector<float> want(static_cast<size_t>(count));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t p = 0; p < positions; ++p) {
        const auto at = [&](int64_t ch) { return (i * c + ch) * positions + p; };
        double mean = 0, var = 0;
        for (int64_t ch = 0; ch < c; ++ch) mean += x[at(ch)];
        mean /= static_cast<double>(c);
        for (int64_t ch = 0; ch < c; ++ch) var += (x[at(ch)] - mean) * (x[at(ch)] - mean);
        const double rstd = 1.0 / std::sqrt(var / static_cast<double>(c) + 1e-4);
        for (int64_t ch = 0; ch < c; ++ch) {
          want[at(ch)] =
              static_cast<float>((x[at(ch)] - mean) * rstd * scale[ch] + (k.bias ? bias[ch] : 0));
        }
      }
    }
    ExpectNear((*out)[0].Values<float>(), want);
  }
  const auto refused = [&](Shape x, Shape params) {
    auto kernel =
        h.Prepare(kFusedChannelNormOp, {Tensor::Of<float>(x, {}), Tensor::Of<float>(params, {})});
    return !kernel.ok() && kernel.status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused({4, 8}, {8}));
  EXPECT_TRUE(refused({1, 8, 2, 2}, {4}));
  EXPECT_TRUE(refused({1, 8, 2, 8}, {1, 1, 1, 8}));
  EXPECT_TRUE(refused({1, 8, 8}, {1, 1, 8, 1}));  // a rank above X's
  EXPECT_FALSE(refused({1, 8, 2, 2}, {8, 1, 1}));
}

TEST(NormalizationTest, LayerAndBatchNormalization) {
  KernelHarness h;
  const auto x = RandomFloats(3 * 8, 92, -2.0f, 2.0f);
  const auto scale = RandomFloats(8, 93);
  const auto bias = RandomFloats(8, 94);
  auto out = h.Run(
      "LayerNormalization",
      {Tensor::Of<float>({3, 8}, x), Tensor::Of<float>({8}, scale), Tensor::Of<float>({8}, bias)},
      Attrs({{"epsilon", 1e-3f}}), 17, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[1].shape, (Shape{3, 1}));
  std::vector<float> want(24), means(3), invs(3);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 8; ++i) mean += x[r * 8 + i] / 8.0;
    for (int i = 0; i < 8; ++i) var += (x[r * 8 + i] - mean) * (x[r * 8 + i] - mean) / 8.0;
    means[r] = static_cast<float>(mean);
    invs[r] = static_cast<float>(1 / std::sqrt(var + 1e-3));
    for (int i = 0; i < 8; ++i) {
      want[r * 8 + i] = static_cast<float>((x[r * 8 + i] - mean) * invs[r] * scale[i] + bias[i]);
    }
  }
  ExpectNear((*out)[0].Values<float>(), want);
  ExpectNear((*out)[1].Values<float>(), means);
  ExpectNear((*out)[2].Values<float>(), invs);
  out = h.Run("BatchNormalization",
              {Tensor::Of<float>({1, 2, 2}, {1, 2, 3, 4}), Tensor::Of<float>({2}, {1, 2}),
               Tensor::Of<float>({2}, {0, 1}), Tensor::Of<float>({2}, {1, 3}),
               Tensor::Of<float>({2}, {4, 1})},
              Attrs({{"epsilon", 0.0f}}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 0.5f, 1, 3}));
  EXPECT_FALSE(
      h.Prepare("BatchNormalization", {Tensor::Of<float>({1, 2, 2}, {}), Tensor::Of<float>({3}, {}),
                                       Tensor::Of<float>({2}, {}), Tensor::Of<float>({2}, {}),
                                       Tensor::Of<float>({2}, {})})
          .ok());
}

// Planes from a few values to a million (each far from zero, so that a sum in float lanes alone
// would lose the variance), against statistics in double.
TEST(NormalizationTest, InstanceNormalizationMatchesDoubleStatisticsOverLongPlanes) {
  KernelHarness h;
  for (int64_t spatial : {int64_t{5}, int64_t{3199}, int64_t{1} << 20}) {
    SCOPED_TRACE(spatial);
    const int64_t channels = 3;
    std::vector<float> x = RandomFloats(channels * spatial, 95, -1.0f, 1.0f);
    for (int64_t i = 0; i < channels * spatial; ++i) x[i] += 100.0f * (1 + i / spatial);
    const auto scale = RandomFloats(channels, 96);
    const auto bias = RandomFloats(channels, 97);
    auto out = h.Run("InstanceNormalization",
                     {Tensor::Of<float>({1, channels, spatial}, x),
                      Tensor::Of<float>({channels}, scale), Tensor::Of<float>({channels}, bias)},
                     Attrs({{"epsilon", 1e-5f}}));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = (*out)[0].Values<float>();
    for (int64_t c = 0; c < channels; ++c) {
      const float* p = x.data() + c * spatial;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < spatial; ++i) mean += p[i];
      mean /= static_cast<double>(spatial);
      for (int64_t i = 0; i < spatial; ++i) var += (p[i] - mean) * (p[i] - mean);
      var /= static_cast<double>(spatial);
      const double inv = 1 / std::sqrt(var + 1e-5);
      for (int64_t i = 0; i < spatial; ++i) {
        const double want = (p[i] - mean) * inv * scale[c] + bias[c];
        // The inputs carry float's rounding at magnitude 300 (2e-5), scaled up by inv (about 1.7).
        ASSERT_NEAR(got[c * spatial + i], want, 1e-4 + 1e-5 * std::fabs(want))
            << "channel " << c << " at " << i;
      }
    }
  }
}

TEST(ResizeTest, NearestAndLinearModes) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor no_roi = Tensor::Absent();
  const Tensor scales = Tensor::Of<float>({4}, {1, 1, 2, 2}, true);
  auto out = h.Run("Resize", {x, no_roi, scales}, Attrs({{"mode", std::string("nearest")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Bilinear, align_corners, to 3x3 via sizes: the centre is the mean.
  out = h.Run("Resize", {x, no_roi, Tensor::Absent(), Tensor::Of<int64_t>({4}, {1, 1, 3, 3}, true)},
              Attrs({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("align_corners")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}));
  // Half-pixel bilinear 2x: corners clamp to the edge.
  out = h.Run("Resize", {x, no_roi, scales}, Attrs({{"mode", std::string("linear")}}));
  ASSERT_TRUE(out.ok());
  const auto v = (*out)[0].Values<float>();
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[1], 1.25f);
  EXPECT_FLOAT_EQ(v[5], 1.75f);
  EXPECT_FLOAT_EQ(v[15], 4.0f);
  // Errors: unknown scales, both scales and sizes, a bad mode.
  EXPECT_EQ(h.Prepare("Resize", {x, no_roi, Tensor::Of<float>({4}, {1, 1, 2, 2})}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(
      h.Prepare("Resize", {x, no_roi, scales, Tensor::Of<int64_t>({4}, {1, 1, 3, 3}, true)}).ok());
  EXPECT_FALSE(
      h.Prepare("Resize", {x, no_roi, scales}, Attrs({{"mode", std::string("area")}})).ok());
}

// NCHW images resized in H and W only go plane by plane; the same resize of a rank-3 tensor
// (C, H, W) takes the general loop. Both must give the same bits, for each mode, for
// coordinate modes that clamp at the edges and for a downscale. Planes whose rows and columns
// each take one source (nearest, or a size kept) are gathered: twice the columns as pairs (the
// first nearest case), other whole-tap columns one by one (twice the width but not in pairs,
// an odd factor, a downscale, an unchanged width).
TEST(ResizeTest, PlanarPathMatchesTheGeneralLoop) {
  KernelHarness h;
  const std::vector<float> values = RandomFloats(2 * 5 * 7, 61);
  struct Case {
    const char* mode;
    const char* coords;
    int64_t oh, ow;
    const char* rounding = "round_prefer_floor";
  };
  for (const Case& c :
       {Case{"linear", "half_pixel", 9, 13}, Case{"linear", "align_corners", 11, 4},
        Case{"cubic", "half_pixel", 9, 13}, Case{"nearest", "asymmetric", 10, 14},
        Case{"linear", "pytorch_half_pixel", 3, 3}, Case{"nearest", "half_pixel", 10, 14, "ceil"},
        Case{"nearest", "half_pixel", 15, 21}, Case{"nearest", "asymmetric", 3, 4},
        Case{"linear", "half_pixel", 9, 7},
        Case{"nearest", "align_corners", 6, 9, "round_prefer_ceil"}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.mode << " " << c.coords << " " << c.oh << "x" << c.ow << " " << c.rounding);
    const runtime::Attributes attrs =
        Attrs({{"mode", std::string(c.mode)},
               {"coordinate_transformation_mode", std::string(c.coords)},
               {"nearest_mode", std::string(c.rounding)}});
    auto planar = h.Run("Resize",
                        {Tensor::Of<float>({1, 2, 5, 7}, values), Tensor::Absent(),
                         Tensor::Absent(), Tensor::Of<int64_t>({4}, {1, 2, c.oh, c.ow}, true)},
                        attrs);
    auto general = h.Run("Resize",
                         {Tensor::Of<float>({2, 5, 7}, values), Tensor::Absent(), Tensor::Absent(),
                          Tensor::Of<int64_t>({3}, {2, c.oh, c.ow}, true)},
                         attrs);
    ASSERT_TRUE(planar.ok()) << planar.status();
    ASSERT_TRUE(general.ok()) << general.status();
    EXPECT_EQ((*planar)[0].shape, (Shape{1, 2, c.oh, c.ow}));
    EXPECT_EQ((*planar)[0].Values<float>(), (*general)[0].Values<float>());
  }
}

// The chain's Resize (kFusedResizeOp) from and to stored layouts: channel blocks of 16 or 8
// (20 channels: padding lanes, which stay zero), channels-last, and plain at one end, for
// nearest 2x, linear 2x and a linear shrink, two images, one and two threads; every element
// against the plain Resize's.
TEST(ResizeTest, ChainResizeMatchesThePlainOneInEveryLayout) {
  KernelHarness h;
  const int64_t n = 2, c = 20, ih = 5, iw = 7;
  const std::vector<float> x = RandomFloats(n * c * ih * iw, 71);
  // The CPU's channel block (as the chain layout: 16 with AVX-512, 8 with AVX2, else none).
  const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const auto has = [&](dnnl::cpu_isa level) {
    return (isa & static_cast<int>(level)) == static_cast<int>(level);
  };
  const int64_t chain_block = has(dnnl::cpu_isa::avx512_core) ? 16
                              : has(dnnl::cpu_isa::avx2)      ? 8
                                                              : 0;
  // [N, C, H, W] stored as `layout` (block 0: plain), zeros in padding lanes.
  auto store = [&](const std::vector<float>& v, int64_t hh, int64_t ww, const std::string& layout) {
    if (layout == "nchw") return v;
    const int64_t block = layout == "nhwc" || chain_block == 0 ? c : chain_block;
    const int64_t groups = (c + block - 1) / block;
    std::vector<float> out(static_cast<size_t>(n * groups * block * hh * ww), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t p = 0; p < hh * ww; ++p) {
          out[((i * groups + k / block) * hh * ww + p) * block + k % block] =
              v[(i * c + k) * hh * ww + p];
        }
    return out;
  };
  struct Case {
    const char* mode;
    int64_t oh, ow;
  };
  for (const Case& rc : {Case{"nearest", 10, 14}, Case{"linear", 10, 14}, Case{"linear", 3, 4}}) {
    const runtime::Attributes plain_attrs = Attrs({{"mode", std::string(rc.mode)}});
    const std::vector<Tensor> in = {Tensor::Of<float>({n, c, ih, iw}, x), Tensor::Absent(),
                                    Tensor::Absent(),
                                    Tensor::Of<int64_t>({4}, {n, c, rc.oh, rc.ow}, true)};
    auto want = h.Run("Resize", in, plain_attrs);
    ASSERT_TRUE(want.ok()) << want.status();
    const std::vector<float> want_plain = (*want)[0].Values<float>();
    for (const auto& [x_layout, y_layout] :
         {std::pair<std::string, std::string>{"blocked", "blocked"},
          {"blocked", "nchw"},
          {"nchw", "blocked"},
          {"nhwc", "nhwc"}}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << rc.mode << " " << rc.oh << "x" << rc.ow << " " << x_layout << " -> "
                     << y_layout << " threads " << threads);
        runtime::Attributes attrs = plain_attrs;
        attrs.Set("x_layout", x_layout);
        attrs.Set("y_layout", y_layout);
        auto kernel = h.Prepare(kFusedResizeOp, in, attrs, 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        const std::vector<float> x_stored = store(x, ih, iw, x_layout);
        const std::vector<float> want_stored = store(want_plain, rc.oh, rc.ow, y_layout);
        ASSERT_EQ((*kernel)->output_storage_bytes(0), want_stored.size() * sizeof(float));
        std::vector<float> y(want_stored.size(), 7.0f);  // every element must be written
        std::vector<const void*> ins = {x_stored.data(), nullptr, nullptr, in[3].bytes.data()};
        ASSERT_TRUE(RunOnBuffers(**kernel, ins, y.data()).ok());
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], want_stored[i], 1e-5f + 1e-5f * std::fabs(want_stored[i])) << i;
        }
      }
    }
  }
  // A shrink to no rows (scale 0.1 of 5 rows): an empty output in any layout, run as such.
  for (const std::string layout : {"blocked", "nhwc"}) {
    const std::vector<Tensor> to_none = {Tensor::Of<float>({n, c, ih, iw}, x), Tensor::Absent(),
                                         Tensor::Of<float>({4}, {1, 1, 0.1f, 1}, true)};
    runtime::Attributes attrs = Attrs({{"mode", std::string("linear")}});
    attrs.Set("x_layout", layout);
    attrs.Set("y_layout", layout);
    auto empty = h.Prepare(kFusedResizeOp, to_none, attrs);
    ASSERT_TRUE(empty.ok()) << layout << ": " << empty.status();
    EXPECT_EQ((*empty)->outputs()[0].shape, (Shape{n, c, 0, iw}));
    EXPECT_EQ((*empty)->output_storage_bytes(0), 0u);
    auto ran = h.RunPrepared(**empty, to_none);
    ASSERT_TRUE(ran.ok()) << ran.status();
  }
  // Images or channels resized, or extrapolation: refused in a chain layout.
  const std::vector<Tensor> resize_c = {Tensor::Of<float>({n, c, ih, iw}, x), Tensor::Absent(),
                                        Tensor::Absent(),
                                        Tensor::Of<int64_t>({4}, {n, 2 * c, ih, iw}, true)};
  EXPECT_EQ(
      h.Prepare(kFusedResizeOp, resize_c,
                Attrs({{"x_layout", std::string("blocked")}, {"y_layout", std::string("blocked")}}))
          .status()
          .code(),
      absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
