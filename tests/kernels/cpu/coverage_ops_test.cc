// The ops added for operator coverage (issue 20): values worked out by hand, and the hostile
// inputs each must refuse (indices out of range, bad sizes) without touching memory outside its
// buffers (the harness sizes every buffer exactly, so ASan sees an overrun).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CoverageOpsTest, ModFollowsTheDivisorOrTheDividend) {
  KernelHarness h;
  const Tensor a = Tensor::Of<int32_t>({4}, {7, -7, 7, -7});
  const Tensor b = Tensor::Of<int32_t>({4}, {3, 3, -3, 0});
  auto out = h.Run("Mod", {a, b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<int32_t>(), ElementsAre(1, 2, -2, 0));  // 0 divisor: 0
  out = h.Run("Mod", {a, b}, Attrs({{"fmod", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<int32_t>(), ElementsAre(1, -1, 1, 0));
  out = h.Run("Mod", {Tensor::Of<float>({2}, {5.5f, -5.5f}), Tensor::Of<float>({1}, {2.0f})},
              Attrs({{"fmod", int64_t{1}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1.5f, -1.5f));
  // Floating point needs fmod=1.
  EXPECT_FALSE(h.Prepare("Mod", {Tensor::Of<float>({1}, {1}), Tensor::Of<float>({1}, {1})}).ok());
}

TEST(CoverageOpsTest, BitShiftPastTheWidthIsZero) {
  KernelHarness h;
  auto out = h.Run("BitShift",
                   {Tensor::Of<uint8_t>({3}, {1, 128, 255}), Tensor::Of<uint8_t>({3}, {3, 1, 9})},
                   Attrs({{"direction", std::string("LEFT")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<uint8_t>(), ElementsAre(8, 0, 0));
  out = h.Run("BitShift",
              {Tensor::Of<uint8_t>({3}, {16, 255, 255}), Tensor::Of<uint8_t>({3}, {2, 7, 8})},
              Attrs({{"direction", std::string("RIGHT")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<uint8_t>(), ElementsAre(4, 1, 0));
  EXPECT_FALSE(h.Prepare("BitShift", {Tensor::Of<uint8_t>({1}, {1}), Tensor::Of<uint8_t>({1}, {1})},
                         Attrs({{"direction", std::string("UP")}}))
                   .ok());
}

TEST(CoverageOpsTest, HardmaxPicksTheFirstMaximum) {
  KernelHarness h;
  auto out = h.Run("Hardmax", {Tensor::Of<float>({2, 3}, {1, 3, 3, -1, -2, -3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(0, 1, 0, 1, 0, 0));
}

TEST(CoverageOpsTest, ScatterAndGatherNdCheckEveryIndex) {
  KernelHarness h;
  const Tensor data = Tensor::Of<float>({2, 2}, {1, 2, 3, 4});
  auto out = h.Run("ScatterND",
                   {data, Tensor::Of<int64_t>({1, 1}, {-1}), Tensor::Of<float>({1, 2}, {9, 8})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1, 2, 9, 8));
  out = h.Run("ScatterND",
              {data, Tensor::Of<int64_t>({2, 2}, {0, 1, 0, 1}), Tensor::Of<float>({2}, {10, 20})},
              Attrs({{"reduction", std::string("add")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1, 32, 3, 4));
  auto bad = h.Run("ScatterND",
                   {data, Tensor::Of<int64_t>({1, 1}, {2}), Tensor::Of<float>({1, 2}, {9, 8})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("index 2 is out of range"));

  out = h.Run("GatherND", {data, Tensor::Of<int64_t>({2, 2}, {1, 0, 0, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(3, 2));
  out = h.Run("GatherND", {data, Tensor::Of<int64_t>({2, 1}, {1, 0})},
              Attrs({{"batch_dims", int64_t{1}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(2, 3));
  EXPECT_FALSE(h.Run("GatherND", {data, Tensor::Of<int64_t>({1, 2}, {0, -3})}).ok());

  out = h.Run("ScatterElements",
              {data, Tensor::Of<int64_t>({1, 2}, {1, 0}), Tensor::Of<float>({1, 2}, {7, 6})},
              Attrs({{"axis", int64_t{0}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1, 6, 7, 4));
  EXPECT_FALSE(h.Run("ScatterElements",
                     {data, Tensor::Of<int64_t>({1, 1}, {-3}), Tensor::Of<float>({1, 1}, {0})})
                   .ok());
}

TEST(CoverageOpsTest, ScatterElementsOfIndicesSmallerThanTheDataOnEachAxis) {
  KernelHarness h;
  const Shape data_shape = {3, 4, 5}, index_shape = {2, 3, 4};
  const std::vector<float> data = RandomFloats(60, 51);
  const std::vector<float> updates = RandomFloats(24, 52);
  for (const int64_t axis : {0, 1, 2, -1}) {
    for (const std::string reduction : {"none", "add"}) {
      SCOPED_TRACE(absl::StrCat("axis ", axis, " ", reduction));
      const int64_t a = axis < 0 ? axis + 3 : axis;
      // Indices in [-dim, dim), repeated, so that "add" sums several updates into one place.
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < 24; ++i)
        indices.push_back((i * 7) % (2 * data_shape[a]) - data_shape[a]);
      std::vector<float> want = data;
      int64_t i = 0;
      for (int64_t p = 0; p < 2; ++p) {
        for (int64_t q = 0; q < 3; ++q) {
          for (int64_t r = 0; r < 4; ++r, ++i) {
            int64_t at[3] = {p, q, r};
            at[a] = indices[i] < 0 ? indices[i] + data_shape[a] : indices[i];
            float& dst = want[(at[0] * 4 + at[1]) * 5 + at[2]];
            dst = reduction == "add" ? dst + updates[i] : updates[i];
          }
        }
      }
      auto out =
          h.Run("ScatterElements",
                {Tensor::Of<float>(data_shape, data), Tensor::Of<int64_t>(index_shape, indices),
                 Tensor::Of<float>(index_shape, updates)},
                Attrs({{"axis", axis}, {"reduction", reduction}}));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].Values<float>(), want);
    }
  }
}

// Large enough to be split over two threads: along an axis of the rows other than `axis`, along
// the last axis, or not at all (the last axis scattered, the others of one entry). Indices repeat
// many times, so that "none" keeps the last update and "add" and "max" combine in the serial order:
// the same bits on one and two threads as the reference loop's.
TEST(CoverageOpsTest, ScatterElementsOnTwoThreadsMatchesTheSerialOrder) {
  KernelHarness h;
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{6, 40, 60}, {5, 40, 60}, 0},
                                   {{6, 40, 60}, {6, 40, 50}, 2},
                                   {{6, 40, 300}, {1, 40, 300}, 1},
                                   {{50, 300}, {40, 300}, 0},
                                   {{10, 600}, {1, 600}, 1}};
  for (const Case& c : cases) {
    const int64_t rank = static_cast<int64_t>(c.data.size());
    const int64_t n = runtime::NumElements(c.data), count = runtime::NumElements(c.indices);
    const std::vector<float> data = RandomFloats(static_cast<size_t>(n), 61);
    const std::vector<float> updates = RandomFloats(static_cast<size_t>(count), 62);
    std::vector<int64_t> indices;
    const int64_t dim = c.data[c.axis];
    for (int64_t i = 0; i < count; ++i) indices.push_back((i * 37 + i / 7) % (2 * dim) - dim);
    for (const std::string reduction : {"none", "add", "max"}) {
      std::vector<float> want = data;
      for (int64_t i = 0; i < count; ++i) {
        int64_t offset = 0, rest = i, stride = 1;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t at = rest % c.indices[d];
          rest /= c.indices[d];
          if (d == c.axis) at = indices[i] < 0 ? indices[i] + dim : indices[i];
          offset += at * stride;
          stride *= c.data[d];
        }
        float& dst = want[offset];
        if (reduction == "none") dst = updates[i];
        if (reduction == "add") dst = dst + updates[i];
        if (reduction == "max") dst = std::max(dst, updates[i]);
      }
      for (int threads : {1, 2}) {
        SCOPED_TRACE(absl::StrCat(runtime::ShapeToString(c.indices), " axis ", c.axis, " ",
                                  reduction, " threads ", threads));
        const std::vector<Tensor> inputs = {Tensor::Of<float>(c.data, data),
                                            Tensor::Of<int64_t>(c.indices, indices),
                                            Tensor::Of<float>(c.indices, updates)};
        auto kernel =
            h.Prepare("ScatterElements", inputs,
                      Attrs({{"axis", c.axis}, {"reduction", reduction}}), 18, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, inputs);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].Values<float>(), want);
      }
    }
  }
}

TEST(CoverageOpsTest, OneHotAndWindows) {
  KernelHarness h;
  auto out = h.Run(
      "OneHot", {Tensor::Of<int64_t>({3}, {0, -1, 7}), Tensor::Of<int64_t>({}, {3}, /*known=*/true),
                 Tensor::Of<float>({2}, {0, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{3, 3}));
  // -1 counts from the end; 7 is out of range and gives a row of `off`.
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(5, 0, 0, 0, 0, 5, 0, 0, 0));
  EXPECT_FALSE(h.Prepare("OneHot", {Tensor::Of<int64_t>({1}, {0}),
                                    Tensor::Of<int64_t>({}, {0}, /*known=*/true),
                                    Tensor::Of<float>({2}, {0, 1})})
                   .ok());

  out = h.Run("HannWindow", {Tensor::Of<int64_t>({}, {4}, /*known=*/true)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> hann = (*out)[0].Values<float>();
  ASSERT_EQ(hann.size(), 4u);
  EXPECT_NEAR(hann[0], 0.0f, 1e-6);
  EXPECT_NEAR(hann[1], 0.5f, 1e-6);
  EXPECT_NEAR(hann[2], 1.0f, 1e-6);
  out = h.Run("HannWindow", {Tensor::Of<int64_t>({}, {3}, /*known=*/true)},
              Attrs({{"periodic", int64_t{0}}}));
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].Values<float>()[2], 0.0f, 1e-6);  // symmetric: both ends 0
  EXPECT_FALSE(h.Prepare("BlackmanWindow", {Tensor::Of<int64_t>({}, {-2}, true)}).ok());
}

TEST(CoverageOpsTest, DetAndReverseSequence) {
  KernelHarness h;
  auto out = h.Run("Det", {Tensor::Of<float>({2, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> det = (*out)[0].Values<float>();
  ASSERT_EQ(det.size(), 2u);
  EXPECT_NEAR(det[0], -2.0f, 1e-5);
  EXPECT_NEAR(det[1], -1.0f, 1e-5);

  // [time 3, batch 2]: batch 0 reverses 3 steps, batch 1 only 2.
  const Tensor x = Tensor::Of<float>({3, 2}, {0, 10, 1, 11, 2, 12});
  out = h.Run("ReverseSequence", {x, Tensor::Of<int64_t>({2}, {3, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(2, 11, 1, 10, 0, 12));
  auto bad = h.Run("ReverseSequence", {x, Tensor::Of<int64_t>({2}, {4, 0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("sequence length 4"));
}

TEST(CoverageOpsTest, RoiAlignAveragesSamplesAndChecksTheBatchIndex) {
  KernelHarness h;
  // A 1x1x2x2 image; one region covering it all, one output bin, 2x2 samples (output_half_pixel
  // coordinates): the samples sit at 0.5 and 1.5 on each axis, clamped at the last pixel.
  const Tensor x = Tensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor rois = Tensor::Of<float>({1, 4}, {0, 0, 2, 2});
  auto out = h.Run("RoiAlign", {x, rois, Tensor::Of<int64_t>({1}, {0})},
                   Attrs({{"sampling_ratio", int64_t{2}},
                          {"coordinate_transformation_mode", std::string("output_half_pixel")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  // Samples: (0.5,0.5)=2.5, (1.5,0.5)->x clamped to 1: 3.0, (0.5,1.5)->y clamped: 3.5, (1.5,1.5)=4.
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(3.25f));
  auto bad = h.Run("RoiAlign", {x, rois, Tensor::Of<int64_t>({1}, {1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("batch index 1"));
}

TEST(CoverageOpsTest, GridSampleBilinearAndPadding) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  // The centre, and a point far outside.
  const Tensor grid = Tensor::Of<float>({1, 1, 2, 2}, {0, 0, 5, 5});
  auto out = h.Run("GridSample", {x, grid});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(2.5f, 0.0f));  // zeros padding
  out = h.Run("GridSample", {x, grid}, Attrs({{"padding_mode", std::string("border")}}));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(2.5f, 4.0f));
  EXPECT_FALSE(h.Prepare("GridSample", {x, Tensor::Of<float>({1, 1, 1, 3}, {0, 0, 0})}).ok());
}

// GridSample's taps are computed once per point and shared by the channels: a tap outside
// the plane adds nothing (an infinity in the plane does not turn a zero-padded point into NaN),
// every mode gives the same bits on 1 and 2 threads, and an empty plane samples zeros.
TEST(CoverageOpsTest, GridSampleTapsSkipOutsideAndSplitOverThreads) {
  KernelHarness h;
  std::vector<float> plane = RandomFloats(2 * 3 * 4 * 5, 17, -2.0f, 2.0f);
  plane[0] = INFINITY;  // pixel (0, 0) of channel 0
  const Tensor x = Tensor::Of<float>({2, 3, 4, 5}, plane);
  // (1, 1) is the bottom-right corner; (3, 3) and (-3, 0.2) lie outside the plane.
  const std::vector<float> points = {1, 1, 3, 3, -3, 0.2f};
  std::vector<float> g;
  for (int b = 0; b < 2; ++b) g.insert(g.end(), points.begin(), points.end());
  for (const std::string mode : {"bilinear", "nearest", "bicubic"}) {
    SCOPED_TRACE(mode);
    auto out = h.Run("GridSample", {x, Tensor::Of<float>({2, 1, 3, 2}, g)},
                     Attrs({{"mode", mode}, {"align_corners", int64_t{1}}}), 16);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), 2u * 3 * 3);
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 3; ++c) {
        const float* y = got.data() + (b * 3 + c) * 3;
        // The corner pixel itself (bicubic's other taps there weigh 0).
        EXPECT_EQ(y[0], plane[((b * 3 + c) * 4 + 3) * 5 + 4]) << b << "," << c;
        EXPECT_EQ(y[1], 0.0f) << b << "," << c;
        EXPECT_EQ(y[2], 0.0f) << b << "," << c;
      }
    }
  }
  const std::vector<float> grid = RandomFloats(2 * 9 * 11 * 2, 19, -1.3f, 1.3f);
  const Tensor many = Tensor::Of<float>({2, 40, 6, 7}, RandomFloats(2 * 40 * 6 * 7, 23));
  for (const std::string mode : {"bilinear", "nearest", "bicubic"}) {
    for (const std::string padding : {"zeros", "border", "reflection"}) {
      SCOPED_TRACE(mode + " " + padding);
      std::vector<std::vector<float>> results;
      for (int threads : {1, 2}) {
        auto kernel = h.Prepare("GridSample", {many, Tensor::Of<float>({2, 9, 11, 2}, grid)},
                                Attrs({{"mode", mode}, {"padding_mode", padding}}), 16, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, {many, Tensor::Of<float>({2, 9, 11, 2}, grid)});
        ASSERT_TRUE(out.ok()) << out.status();
        results.push_back((*out)[0].Values<float>());
      }
      EXPECT_EQ(results[0], results[1]);
    }
  }
  auto empty = h.Run("GridSample", {Tensor::Of<float>({1, 2, 0, 3}, std::vector<float>{}),
                                    Tensor::Of<float>({1, 1, 2, 2}, {0, 0, 0.5f, 0.5f})});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT((*empty)[0].Values<float>(), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
}

TEST(CoverageOpsTest, OldOpsetForms) {
  KernelHarness h;
  // TopK before opset 10 takes k from its attribute.
  auto out = h.Run("TopK", {Tensor::Of<float>({4}, {1, 4, 2, 3})}, Attrs({{"k", int64_t{2}}}),
                   /*opset=*/9, /*num_outputs=*/2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(4, 3));
  EXPECT_THAT((*out)[1].Values<int64_t>(), ElementsAre(1, 3));
  // Upsample before opset 9: scales from the attribute, nearest rounding down.
  out = h.Run("Upsample", {Tensor::Of<float>({1, 2}, {1, 2})},
              Attrs({{"scales", std::vector<float>{1.0f, 2.0f}}}), /*opset=*/7);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1, 1, 2, 2));
}

TEST(CoverageOpsTest, ElementwiseAdditions) {
  KernelHarness h;
  auto out = h.Run("IsInf", {Tensor::Of<float>({3}, {INFINITY, -INFINITY, 1})},
                   Attrs({{"detect_negative", int64_t{0}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<bool>(), ElementsAre(true, false, false));
  out = h.Run("Shrink", {Tensor::Of<int32_t>({3}, {-5, 0, 5})},
              Attrs({{"lambd", 1.0f}, {"bias", 2.0f}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<int32_t>(), ElementsAre(-3, 0, 3));
  out = h.Run("Celu", {Tensor::Of<float>({2}, {-1, 2})}, Attrs({{"alpha", 2.0f}}));
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].Values<float>()[0], 2.0f * std::expm1(-0.5f), 1e-6);
  EXPECT_EQ((*out)[0].Values<float>()[1], 2.0f);
}

// Recurrent ops by their properties: the reverse direction is the forward one on the
// time-reversed input, bidirectional stacks the two, and a sequence length cuts the run short
// (Y zero past it, Y_h the state at its last step).
TEST(CoverageOpsTest, RecurrentDirectionsAndSequenceLengths) {
  KernelHarness h;
  constexpr int64_t kSeq = 3, kIn = 2, kHidden = 2;
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    SCOPED_TRACE(op);
    const int64_t gates = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
    const std::vector<float> x = RandomFloats(kSeq * kIn, 1);
    std::vector<float> x_rev;
    for (int64_t t = kSeq; t-- > 0;) {
      x_rev.insert(x_rev.end(), x.begin() + t * kIn, x.begin() + (t + 1) * kIn);
    }
    const std::vector<float> w = RandomFloats(gates * kHidden * kIn, 2);
    const std::vector<float> r = RandomFloats(gates * kHidden * kHidden, 3);
    const std::vector<float> b = RandomFloats(2 * gates * kHidden, 4);
    auto run = [&](const std::vector<float>& input, const std::string& direction, int dirs,
                   const Tensor& lens) {
      auto twice = [&](const std::vector<float>& v) {
        std::vector<float> out = v;
        if (dirs == 2) out.insert(out.end(), v.begin(), v.end());
        return out;
      };
      return h.Run(op,
                   {Tensor::Of<float>({kSeq, 1, kIn}, input),
                    Tensor::Of<float>({dirs, gates * kHidden, kIn}, twice(w)),
                    Tensor::Of<float>({dirs, gates * kHidden, kHidden}, twice(r)),
                    Tensor::Of<float>({dirs, 2 * gates * kHidden}, twice(b)), lens},
                   Attrs({{"hidden_size", kHidden}, {"direction", direction}}), 14, 2);
    };
    auto forward = run(x_rev, "forward", 1, Tensor::Absent());
    auto reverse = run(x, "reverse", 1, Tensor::Absent());
    ASSERT_TRUE(forward.ok()) << forward.status();
    ASSERT_TRUE(reverse.ok()) << reverse.status();
    const std::vector<float> yf = (*forward)[0].Values<float>();
    const std::vector<float> yr = (*reverse)[0].Values<float>();
    for (int64_t t = 0; t < kSeq; ++t) {
      for (int64_t k = 0; k < kHidden; ++k) {
        EXPECT_FLOAT_EQ(yr[t * kHidden + k], yf[(kSeq - 1 - t) * kHidden + k]);
      }
    }
    EXPECT_EQ((*forward)[1].Values<float>(), (*reverse)[1].Values<float>());

    auto forward_x = run(x, "forward", 1, Tensor::Absent());
    auto both = run(x, "bidirectional", 2, Tensor::Absent());
    ASSERT_TRUE(forward_x.ok() && both.ok());
    const std::vector<float> yb = (*both)[0].Values<float>();  // [seq, 2, 1, hidden]
    const std::vector<float> yx = (*forward_x)[0].Values<float>();
    for (int64_t t = 0; t < kSeq; ++t) {
      for (int64_t k = 0; k < kHidden; ++k) {
        EXPECT_FLOAT_EQ(yb[(t * 2) * kHidden + k], yx[t * kHidden + k]);
        EXPECT_FLOAT_EQ(yb[(t * 2 + 1) * kHidden + k], yr[t * kHidden + k]);
      }
    }

    // Length 2 of 3: the state after step 1 is the forward run's Y at step 1; Y at step 2 is 0.
    auto cut = run(x, "forward", 1, Tensor::Of<int32_t>({1}, {2}));
    ASSERT_TRUE(cut.ok()) << cut.status();
    const std::vector<float> yc = (*cut)[0].Values<float>();
    const std::vector<float> hc = (*cut)[1].Values<float>();
    for (int64_t k = 0; k < kHidden; ++k) {
      EXPECT_FLOAT_EQ(hc[k], yx[kHidden + k]);
      EXPECT_EQ(yc[2 * kHidden + k], 0.0f);
    }
    auto bad = run(x, "forward", 1, Tensor::Of<int32_t>({1}, {4}));
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr("sequence_lens"));
  }
}

// NonZero lists the flat positions of the elements that are not zero, as one row of indices per
// dimension: -0 is zero, NaN is not, and a bool byte other than 0 or 1 counts as true.
TEST(CoverageOpsTest, NonZeroListsTheIndicesOfEveryElementThatIsNotZero) {
  KernelHarness h;
  const float nan = std::nanf("");
  auto flat = h.Run("NonZero", {Tensor::Of<float>({6}, {0, 1.5f, -0.0f, nan, -2, 0}, true)}, {});
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ((*flat)[0].shape, (Shape{1, 3}));
  EXPECT_THAT((*flat)[0].Values<int64_t>(), ElementsAre(1, 3, 4));

  auto grid = h.Run("NonZero", {Tensor::Of<int32_t>({2, 3}, {0, 7, 0, -1, 0, 3}, true)}, {});
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ((*grid)[0].shape, (Shape{2, 3}));
  EXPECT_THAT((*grid)[0].Values<int64_t>(), ElementsAre(0, 1, 1, 1, 0, 2));

  Tensor flags = Tensor::Of<bool>({2, 2}, {false, true, false, false}, true);
  flags.bytes[2] = 2;  // not a bool's byte; still not zero
  auto marked = h.Run("NonZero", {flags}, {});
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_EQ((*marked)[0].shape, (Shape{2, 2}));
  EXPECT_THAT((*marked)[0].Values<int64_t>(), ElementsAre(0, 1, 1, 0));

  auto none = h.Run("NonZero", {Tensor::Of<int64_t>({3}, {0, 0, 0}, true)}, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[0].shape, (Shape{1, 0}));
}

// The ops whose output size follows their values compute at Prepare from known inputs, and
// say so when an input is not known.
TEST(CoverageOpsTest, ValueDependentOpsNeedTheirInputsAtPlanTime) {
  KernelHarness h;
  auto unknown = h.Prepare("NonZero", {Tensor::Of<float>({2}, {1, 0})});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(unknown.status().message(), HasSubstr("must be known at plan time"));

  // Unique with NaNs: they compare equal to one another and sort last.
  const float nan = std::nanf("");
  auto out = h.Run("Unique", {Tensor::Of<float>({5}, {2, nan, 1, nan, 2}, true)}, {}, 17, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> y = (*out)[0].Values<float>();
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_THAT((*out)[1].Values<int64_t>(), ElementsAre(2, 0, 1));        // first indices
  EXPECT_THAT((*out)[2].Values<int64_t>(), ElementsAre(1, 2, 0, 2, 1));  // inverse
  EXPECT_THAT((*out)[3].Values<int64_t>(), ElementsAre(1, 2, 2));        // counts

  // Compress: a condition longer than the axis is refused.
  EXPECT_FALSE(h.Prepare("Compress", {Tensor::Of<float>({2}, {1, 2}, true),
                                      Tensor::Of<bool>({3}, {true, false, true}, true)})
                   .ok());

  // NonMaxSuppression: two overlapping boxes and one apart, one class; the lower-scored of the
  // overlapping pair goes.
  const Tensor boxes =
      Tensor::Of<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 5, 5, 6, 6}, true);
  const Tensor scores = Tensor::Of<float>({1, 1, 3}, {0.9f, 0.8f, 0.7f}, true);
  out = h.Run("NonMaxSuppression", {boxes, scores, Tensor::Of<int64_t>({1}, {3}, true),
                                    Tensor::Of<float>({1}, {0.5f}, true)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_THAT((*out)[0].Values<int64_t>(), ElementsAre(0, 0, 0, 0, 0, 2));
  EXPECT_FALSE(
      h.Prepare("NonMaxSuppression", {boxes, Tensor::Of<float>({1, 1, 2}, {1, 1}, true)}).ok());
}

TEST(CoverageOpsTest, TfIdfModesAndPoolChecks) {
  KernelHarness h;
  const Tensor tokens = Tensor::Of<int64_t>({3}, {1, 2, 1});
  auto attrs = [](const std::string& mode) {
    return Attrs({{"mode", mode},
                  {"min_gram_length", int64_t{1}},
                  {"max_gram_length", int64_t{1}},
                  {"ngram_counts", std::vector<int64_t>{0}},
                  {"ngram_indexes", std::vector<int64_t>{0, 1}},
                  {"pool_int64s", std::vector<int64_t>{1, 2}},
                  {"weights", std::vector<float>{0.5f, 2.0f}}});
  };
  auto out = h.Run("TfIdfVectorizer", {tokens}, attrs("TF"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(2.0f, 1.0f));
  out = h.Run("TfIdfVectorizer", {tokens}, attrs("IDF"));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(0.5f, 2.0f));
  out = h.Run("TfIdfVectorizer", {tokens}, attrs("TFIDF"));
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].Values<float>(), ElementsAre(1.0f, 2.0f));
  // A pool whose bigram section is not whole bigrams.
  EXPECT_FALSE(h.Prepare("TfIdfVectorizer", {tokens},
                         Attrs({{"mode", std::string("TF")},
                                {"min_gram_length", int64_t{2}},
                                {"max_gram_length", int64_t{2}},
                                {"ngram_counts", std::vector<int64_t>{0, 0}},
                                {"ngram_indexes", std::vector<int64_t>{0}},
                                {"pool_int64s", std::vector<int64_t>{1, 2, 3}}}))
                   .ok());
}

// DFT: the FFT path (power-of-two length) and the direct path (other lengths) against the
// defining sum; a direct transform too costly to run is refused at Prepare.
TEST(CoverageOpsTest, DftMatchesTheDefiningSum) {
  KernelHarness h;
  for (int64_t n : {16, 12}) {
    SCOPED_TRACE(n);
    const std::vector<float> x = RandomFloats(static_cast<size_t>(n), 3);
    auto out = h.Run("DFT", {Tensor::Of<float>({1, n, 1}, x)}, Attrs({{"axis", int64_t{1}}}));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> y = (*out)[0].Values<float>();
    ASSERT_EQ(y.size(), static_cast<size_t>(2 * n));
    for (int64_t k = 0; k < n; ++k) {
      double re = 0, im = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double angle = -2 * M_PI * static_cast<double>(j * k) / static_cast<double>(n);
        re += x[j] * std::cos(angle);
        im += x[j] * std::sin(angle);
      }
      EXPECT_NEAR(y[2 * k], re, 1e-4);
      EXPECT_NEAR(y[2 * k + 1], im, 1e-4);
    }
  }
  // 4096 vectors of a 65535-point direct transform: refused, not run.
  auto costly = h.Prepare("DFT",
                          {Tensor::Of<float>({4096, 8, 1}, std::vector<float>(4096 * 8)),
                           Tensor::Of<int64_t>({}, {65535}, true)},
                          Attrs({{"axis", int64_t{1}}}));
  ASSERT_FALSE(costly.ok());
  EXPECT_THAT(costly.status().message(), HasSubstr("too costly"));
}

// Random ops are checked by their distribution: mean and variance of many draws, the range, and
// that a seed makes a kernel's draws reproducible while successive runs differ.
TEST(CoverageOpsTest, RandomOpsFollowTheirDistributions) {
  KernelHarness h;
  constexpr int64_t kN = 200000;
  const Tensor p = Tensor::Of<float>({kN}, std::vector<float>(kN, 0.3f));
  auto out = h.Run("Bernoulli", {p});
  ASSERT_TRUE(out.ok()) << out.status();
  double ones = 0;
  for (float v : (*out)[0].Values<float>()) {
    ASSERT_TRUE(v == 0.0f || v == 1.0f) << v;
    ones += v;
  }
  // Standard error of the mean: sqrt(0.3 * 0.7 / 200000) ~ 0.001; 0.006 is six of them.
  EXPECT_NEAR(ones / kN, 0.3, 0.006);

  const Tensor like = Tensor::Of<float>({kN}, std::vector<float>(kN, 0.0f));
  out = h.Run("RandomUniformLike", {like}, Attrs({{"low", -2.0f}, {"high", 4.0f}}));
  ASSERT_TRUE(out.ok()) << out.status();
  double sum = 0;
  for (float v : (*out)[0].Values<float>()) {
    ASSERT_TRUE(v >= -2.0f && v < 4.0f) << v;
    sum += v;
  }
  EXPECT_NEAR(sum / kN, 1.0, 0.03);  // mean 1, standard error 6 / sqrt(12 * 200000) ~ 0.004
  // A range one float wide: about half the draws would round up to `high`; none may.
  const float one_up = std::nextafter(1.0f, 2.0f);
  out = h.Run("RandomUniformLike", {Tensor::Of<float>({1000}, std::vector<float>(1000, 0.0f))},
              Attrs({{"low", 1.0f}, {"high", one_up}}));
  ASSERT_TRUE(out.ok()) << out.status();
  for (float v : (*out)[0].Values<float>()) ASSERT_EQ(v, 1.0f);

  out = h.Run("RandomNormalLike", {like}, Attrs({{"mean", 5.0f}, {"scale", 2.0f}}));
  ASSERT_TRUE(out.ok()) << out.status();
  double s1 = 0, s2 = 0;
  for (float v : (*out)[0].Values<float>()) {
    s1 += v;
    s2 += static_cast<double>(v) * v;
  }
  const double mean = s1 / kN;
  EXPECT_NEAR(mean, 5.0, 0.03);
  EXPECT_NEAR(s2 / kN - mean * mean, 4.0, 0.1);

  // A seed: two kernels prepared alike draw alike; one kernel's successive runs differ.
  const runtime::Attributes seeded = Attrs({{"seed", 7.0f}, {"shape", std::vector<int64_t>{8}}});
  auto k1 = h.Prepare("RandomUniform", {}, seeded);
  auto k2 = h.Prepare("RandomUniform", {}, seeded);
  ASSERT_TRUE(k1.ok() && k2.ok());
  auto a = h.RunPrepared(**k1, {});
  auto b = h.RunPrepared(**k2, {});
  auto c = h.RunPrepared(**k1, {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)[0].Values<float>(), (*b)[0].Values<float>());
  EXPECT_NE((*a)[0].Values<float>(), (*c)[0].Values<float>());
  EXPECT_FALSE(h.Prepare("RandomUniform", {}, Attrs({{"shape", std::vector<int64_t>{-1}}})).ok());
}

// The greedy NonMaxSuppression of the spec, one pair at a time, as the test's own reference:
// per batch and class, boxes above the score threshold by decreasing score (ties by index), each
// kept unless its IoU with a kept box exceeds the threshold (0 where either box has no area).
std::vector<int64_t> ReferenceNms(const std::vector<float>& boxes, const std::vector<float>& scores,
                                  int64_t batches, int64_t classes, int64_t n,
                                  int64_t max_per_class, float iou_threshold, float score_threshold,
                                  bool center) {
  auto corners = [&](const float* p) {
    std::vector<double> c(4);  // y1, x1, y2, x2
    if (center) {
      c = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0};
    } else {
      c = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    }
    return c;
  };
  auto iou = [&](const float* a, const float* b) {
    const std::vector<double> p = corners(a), q = corners(b);
    const double area_p = (p[2] - p[0]) * (p[3] - p[1]), area_q = (q[2] - q[0]) * (q[3] - q[1]);
    if (!(area_p > 0) || !(area_q > 0)) return 0.0;
    const double ih = std::max(0.0, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const double iw = std::max(0.0, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    return ih * iw / (area_p + area_q - ih * iw);
  };
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores.data() + (b * classes + c) * n;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i) {
        if (s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [s](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        bool keep = true;
        for (int64_t j : kept) {
          if (iou(&boxes[(b * n + i) * 4], &boxes[(b * n + j) * 4]) > iou_threshold) keep = false;
        }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  return selected;
}

// Many boxes (a few hundred kept per class, so the kernel checks each candidate against long
// runs of kept boxes), both corner orders, boxes without area (one of them kept first), tied
// scores, corner and centre forms, and thresholds at 0.5, 0 and below 0 (where a pair without
// area counts as overlapping): the kernel selects what the one-pair-at-a-time reference selects.
TEST(CoverageOpsTest, NonMaxSuppressionOfManyBoxesFollowsTheGreedyReference) {
  KernelHarness h;
  constexpr int64_t kBatches = 2, kClasses = 3, kBoxes = 700;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> where(0.0f, 100.0f), size(0.5f, 6.0f);
  std::uniform_int_distribution<int> tie(0, 40);
  std::vector<float> boxes;
  for (int64_t i = 0; i < kBatches * kBoxes; ++i) {
    const float y = where(rng), x = where(rng), hgt = i % 37 == 0 ? 0.0f : size(rng), w = size(rng);
    if (i % 2 == 0) {
      boxes.insert(boxes.end(), {y, x, y + hgt, x + w});
    } else {
      boxes.insert(boxes.end(), {y + hgt, x + w, y, x});  // the other diagonal
    }
  }
  std::vector<float> scores;
  for (int64_t i = 0; i < kBatches * kClasses * kBoxes; ++i) {
    scores.push_back(static_cast<float>(tie(rng)) / 40.0f);
  }
  scores[0] = 1.0f;  // batch 0, class 0: the first box kept is box 0, which has no area
  for (bool center : {false, true}) {
    for (float iou_threshold : {0.5f, 0.0f, -0.1f}) {
      SCOPED_TRACE(::testing::Message() << "center " << center << " iou " << iou_threshold);
      const std::vector<int64_t> want = ReferenceNms(boxes, scores, kBatches, kClasses, kBoxes,
                                                     1000, iou_threshold, 0.1f, center);
      auto out = h.Run(
          "NonMaxSuppression",
          {Tensor::Of<float>({kBatches, kBoxes, 4}, boxes, true),
           Tensor::Of<float>({kBatches, kClasses, kBoxes}, scores, true),
           Tensor::Of<int64_t>({1}, {1000}, true), Tensor::Of<float>({1}, {iou_threshold}, true),
           Tensor::Of<float>({1}, {0.1f}, true)},
          Attrs({{"center_point_box", int64_t{center ? 1 : 0}}}));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].Values<int64_t>(), want);
      if (iou_threshold == 0.5f && !center) {
        EXPECT_GT(want.size() / 3, 6u * 200u);  // long runs of kept boxes per class
      }
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
