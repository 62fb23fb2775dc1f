// Pooling (pool.cc) against a plain reference loop; tolerance 1e-4 absolute + 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
  }
}

// Reference 2-D pooling of one plane.
std::vector<float> ReferencePool(bool max, const std::vector<float>& x, int64_t h, int64_t w,
                                 int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil_mode,
                                 bool include_pad, int64_t* oh_out) {
  const int64_t extent = (k - 1) * dil + 1;
  const int64_t span = h + 2 * pad - extent;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= h + pad) --o;
  *oh_out = o;
  (void)w;
  std::vector<float> y;
  for (int64_t i = 0; i < o; ++i)
    for (int64_t j = 0; j < o; ++j) {
      float best = -std::numeric_limits<float>::infinity();
      double sum = 0;
      int64_t valid = 0, padded = 0;
      for (int64_t a = 0; a < k; ++a)
        for (int64_t b = 0; b < k; ++b) {
          const int64_t r = i * s - pad + a * dil, c = j * s - pad + b * dil;
          if (r >= h + pad || c >= h + pad) continue;
          ++padded;
          if (r < 0 || c < 0 || r >= h || c >= h) continue;
          ++valid;
          best = std::max(best, x[r * h + c]);
          sum += x[r * h + c];
        }
      y.push_back(max ? best : static_cast<float>(sum / (include_pad ? padded : valid)));
    }
  return y;
}

// Without dilation the 2-D windows go separably (rows, then columns, vectorised over the
// outputs whose windows are inside); with it, the general loop. 19x19 gives long inside runs.
// Strides 1 and 2 have their own column loops; strides 3 and 4 read the row's phases, with the
// kernel longer than the stride (every phase read) and shorter (some phases never read).
TEST(PoolTest, MaxAndAverageMatchReference) {
  KernelHarness h;
  struct Case {
    int64_t k, s, pad, dil;
    bool ceil, include_pad;
  };
  for (const int64_t size : {int64_t{7}, int64_t{19}}) {
    const auto x = RandomFloats(size * size, 21);
    for (const Case& c : {Case{3, 2, 1, 1, false, false}, Case{3, 2, 1, 1, true, false},
                          Case{2, 2, 0, 1, true, true}, Case{3, 1, 1, 2, false, false},
                          Case{4, 3, 2, 1, true, true}, Case{3, 1, 1, 1, false, false},
                          Case{3, 1, 1, 1, false, true}, Case{5, 1, 2, 1, true, false},
                          Case{1, 1, 0, 1, false, false}, Case{2, 3, 0, 1, false, false},
                          Case{3, 4, 1, 1, true, true}, Case{5, 4, 2, 1, false, true},
                          Case{2, 2, 1, 1, true, false}}) {
      for (bool max : {true, false}) {
        if (!max && c.dil != 1) continue;
        SCOPED_TRACE(::testing::Message()
                     << (max ? "MaxPool" : "AveragePool") << " size=" << size << " k=" << c.k
                     << " s=" << c.s << " pad=" << c.pad << " ceil=" << c.ceil
                     << " include_pad=" << c.include_pad);
        int64_t o = 0;
        const auto want =
            ReferencePool(max, x, size, size, c.k, c.s, c.pad, c.dil, c.ceil, c.include_pad, &o);
        auto out =
            h.Run(max ? "MaxPool" : "AveragePool", {Tensor::Of<float>({1, 1, size, size}, x)},
                  Attrs({{"kernel_shape", std::vector<int64_t>{c.k, c.k}},
                         {"strides", std::vector<int64_t>{c.s, c.s}},
                         {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}},
                         {"dilations", std::vector<int64_t>{c.dil, c.dil}},
                         {"ceil_mode", int64_t{c.ceil}},
                         {"count_include_pad", int64_t{c.include_pad}}}));
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, (Shape{1, 1, o, o}));
        ExpectNear((*out)[0].Values<float>(), want);
      }
    }
  }
}

// The oneDNN max pooling of conv chains (kFusedMaxPoolOp), in plain layouts, against the same
// reference: ResNet's 3x3/2 pad 1 window, ceil_mode's extra window, an even kernel, auto_pad.
TEST(PoolTest, FusedMaxPoolMatchesReference) {
  KernelHarness h;
  const int64_t size = 7;
  const int64_t planes = 2 * 20;  // batch 2, 20 channels: not a whole number of 16-blocks
  const auto x = RandomFloats(planes * size * size, 22);
  struct Case {
    int64_t k, s, pad;
    bool ceil;
  };
  for (const Case& c : {Case{3, 2, 1, false}, Case{3, 2, 1, true}, Case{2, 2, 0, true},
                        Case{4, 3, 2, true}, Case{3, 1, 1, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "k=" << c.k << " s=" << c.s << " pad=" << c.pad << " ceil=" << c.ceil);
    std::vector<float> want;
    int64_t o = 0;
    for (int64_t p = 0; p < planes; ++p) {
      const std::vector<float> plane(x.begin() + p * size * size,
                                     x.begin() + (p + 1) * size * size);
      const auto y = ReferencePool(true, plane, size, size, c.k, c.s, c.pad, 1, c.ceil, false, &o);
      want.insert(want.end(), y.begin(), y.end());
    }
    auto out = h.Run(kFusedMaxPoolOp, {Tensor::Of<float>({2, 20, size, size}, x)},
                     Attrs({{"kernel_shape", std::vector<int64_t>{c.k, c.k}},
                            {"strides", std::vector<int64_t>{c.s, c.s}},
                            {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}},
                            {"ceil_mode", int64_t{c.ceil}}}));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (Shape{2, 20, o, o}));
    ExpectNear((*out)[0].Values<float>(), want);
  }
  // SAME_UPPER over an even size: the window helper's pads.
  const auto even = RandomFloats(4 * 4, 23);
  auto same = h.Run(kFusedMaxPoolOp, {Tensor::Of<float>({1, 1, 4, 4}, even)},
                    Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                           {"strides", std::vector<int64_t>{2, 2}},
                           {"auto_pad", std::string("SAME_UPPER")}}));
  auto plain = h.Run("MaxPool", {Tensor::Of<float>({1, 1, 4, 4}, even)},
                     Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                            {"strides", std::vector<int64_t>{2, 2}},
                            {"auto_pad", std::string("SAME_UPPER")}}));
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*same)[0].shape, (*plain)[0].shape);
  ExpectNear((*same)[0].Values<float>(), (*plain)[0].Values<float>());
  // Dilations and a second output are refused.
  EXPECT_FALSE(h.Run(kFusedMaxPoolOp, {Tensor::Of<float>({1, 1, 4, 4}, even)},
                     Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                            {"dilations", std::vector<int64_t>{2, 2}}}))
                   .ok());
}

// The oneDNN average pooling of conv chains (kFusedAveragePoolOp), in plain layouts, against
// the reference: count_include_pad on and off, Inception's 3x3/1 pad 1, strided and uneven
// windows, ceil_mode's extra window when padding is not counted (refused when it is).
TEST(PoolTest, FusedAveragePoolMatchesReference) {
  KernelHarness h;
  const int64_t size = 9;
  const int64_t planes = 2 * 20;
  const auto x = RandomFloats(planes * size * size, 24);
  struct Case {
    int64_t k, s, pad;
    bool ceil, include_pad;
  };
  for (const Case& c :
       {Case{3, 1, 1, false, true}, Case{3, 1, 1, false, false}, Case{3, 2, 1, false, true},
        Case{2, 2, 0, false, false}, Case{4, 3, 2, false, true}, Case{3, 2, 1, true, false},
        Case{4, 3, 2, true, false}}) {
    SCOPED_TRACE(::testing::Message() << "k=" << c.k << " s=" << c.s << " pad=" << c.pad
                                      << " ceil=" << c.ceil << " include_pad=" << c.include_pad);
    std::vector<float> want;
    int64_t o = 0;
    for (int64_t p = 0; p < planes; ++p) {
      const std::vector<float> plane(x.begin() + p * size * size,
                                     x.begin() + (p + 1) * size * size);
      const auto y =
          ReferencePool(false, plane, size, size, c.k, c.s, c.pad, 1, c.ceil, c.include_pad, &o);
      want.insert(want.end(), y.begin(), y.end());
    }
    auto out = h.Run(kFusedAveragePoolOp, {Tensor::Of<float>({2, 20, size, size}, x)},
                     Attrs({{"kernel_shape", std::vector<int64_t>{c.k, c.k}},
                            {"strides", std::vector<int64_t>{c.s, c.s}},
                            {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}},
                            {"ceil_mode", int64_t{c.ceil}},
                            {"count_include_pad", int64_t{c.include_pad}}}));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (Shape{2, 20, o, o}));
    ExpectNear((*out)[0].Values<float>(), want);
  }
  auto refused = h.Run(kFusedAveragePoolOp, {Tensor::Of<float>({1, 1, 9, 9}, RandomFloats(81, 25))},
                       Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                              {"strides", std::vector<int64_t>{2, 2}},
                              {"ceil_mode", int64_t{1}},
                              {"count_include_pad", int64_t{1}}}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented) << refused.status();
}

// The pooling of conv chains over values stored with the channels innermost, channels-last and
// blocked (InterleavedPool: our own loops, blocks of 8 or 16 lanes as the CPU's chain layout
// has them, or all 20 channels where that layout is channels-last), batch 2 of 20 channels (the
// last block part padding, which must stay zero), 9x9 and 40x40 (two threads split its rows), one
// and two threads, against the reference:
// windows inside and across the edges, ceil_mode's extra window, strides 1 to 3, kernels 2 and
// 3 (unrolled) and 4 (not), and a first window wholly in the padding (max: -inf; the average
// counting the padding: 0).
TEST(PoolTest, FusedPoolsOverChannelsInnermostStorage) {
  KernelHarness h;
  const int64_t n = 2, c = 20;
  // This CPU's blocked layout: 20 channels stored as 20 (channels-last), 24 (blocks of 8) or 32
  // (of 16) floats per pixel.
  auto probe =
      h.Prepare(kFusedMaxPoolOp, {Tensor::Of<float>({1, c, 2, 2}, RandomFloats(4 * c, 27))},
                Attrs({{"kernel_shape", std::vector<int64_t>{1, 1}},
                       {"x_layout", std::string("blocked")},
                       {"y_layout", std::string("blocked")}}));
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int64_t per_pixel = static_cast<int64_t>((*probe)->output_storage_bytes(0)) / (4 * 4);
  const int64_t block = per_pixel == c ? c : per_pixel == 32 ? 16 : 8;
  ASSERT_EQ(per_pixel, (c + block - 1) / block * block);
  for (const int64_t size : {int64_t{9}, int64_t{40}}) {
    const int64_t plane = size * size;
    const auto x = RandomFloats(n * c * plane, 26);
    // [N][groups][H][W][lanes] from NCHW, padding lanes zero (lanes 0: NCHW as it is).
    auto store = [&](const std::vector<float>& v, int64_t lanes, int64_t pixels) {
      return StoreInLanes(v, n, c, pixels, lanes);
    };
    struct Case {
      int64_t k, s, pad;
      bool ceil, include_pad;
    };
    for (const bool max : {true, false}) {
      for (const Case& w :
           {Case{3, 2, 1, true, false}, Case{3, 1, 1, false, true}, Case{3, 1, 1, false, false},
            Case{2, 2, 0, true, false}, Case{4, 3, 2, true, false}, Case{4, 3, 2, false, true},
            Case{2, 3, 2, false, true}}) {
        if (w.include_pad && w.ceil) continue;
        int64_t o = 0;
        std::vector<float> want;
        for (int64_t p = 0; p < n * c; ++p) {
          const std::vector<float> one(x.begin() + p * plane, x.begin() + (p + 1) * plane);
          const auto y =
              ReferencePool(max, one, size, size, w.k, w.s, w.pad, 1, w.ceil, w.include_pad, &o);
          want.insert(want.end(), y.begin(), y.end());
        }
        // Alike at both ends, or one end plain (reordered through the workspace).
        for (const auto& [x_layout, y_layout] :
             std::vector<std::pair<std::string, std::string>>{{"nhwc", "nhwc"},
                                                              {"blocked", "blocked"},
                                                              {"blocked", "nchw"},
                                                              {"nchw", "blocked"},
                                                              {"nchw", "nhwc"}}) {
          auto lanes_of = [&](const std::string& layout) -> int64_t {
            return layout == "nchw" ? 0 : layout == "nhwc" ? c : block;
          };
          const int64_t x_lanes = lanes_of(x_layout), lanes = lanes_of(y_layout);
          for (const int threads : {1, 2}) {
            SCOPED_TRACE(::testing::Message()
                         << (max ? "max" : "average") << " size=" << size << " k=" << w.k
                         << " s=" << w.s << " pad=" << w.pad << " ceil=" << w.ceil
                         << " include_pad=" << w.include_pad << " " << x_layout << " to "
                         << y_layout << " threads=" << threads);
            auto kernel = h.Prepare(max ? kFusedMaxPoolOp : kFusedAveragePoolOp,
                                    {Tensor::Of<float>({n, c, size, size}, x)},
                                    Attrs({{"kernel_shape", std::vector<int64_t>{w.k, w.k}},
                                           {"strides", std::vector<int64_t>{w.s, w.s}},
                                           {"pads", std::vector<int64_t>(4, w.pad)},
                                           {"ceil_mode", int64_t{w.ceil}},
                                           {"count_include_pad", int64_t{w.include_pad}},
                                           {"x_layout", x_layout},
                                           {"y_layout", y_layout}}),
                                    17, 1, threads);
            ASSERT_TRUE(kernel.ok()) << kernel.status();
            EXPECT_NE((*kernel)->implementation().find("own loops"), std::string::npos)
                << (*kernel)->implementation();
            ASSERT_EQ((*kernel)->outputs()[0].shape, (Shape{n, c, o, o}));
            const size_t floats =
                std::max((*kernel)->output_storage_bytes(0) / sizeof(float), want.size());
            ASSERT_EQ(static_cast<int64_t>(floats),
                      n * (lanes == 0 ? c : (c + lanes - 1) / lanes * lanes) * o * o);
            const std::vector<float> in = store(x, x_lanes, plane);
            std::vector<float> stored(floats, 7.0f);
            const std::vector<const void*> ins = {in.data()};
            ASSERT_TRUE(RunOnBuffers(**kernel, ins, stored.data()).ok());
            // Every stored float: the reference's value, or zero in a padding lane.
            const std::vector<float> expected = store(want, lanes, o * o);
            std::vector<float> padding_lanes =
                store(std::vector<float>(want.size(), 1.0f), lanes, o * o);
            for (size_t i = 0; i < floats; ++i) {
              if (padding_lanes[i] == 0.0f) {
                ASSERT_EQ(stored[i], 0.0f) << "padding lane at " << i;
              } else if (std::isinf(expected[i])) {
                ASSERT_EQ(stored[i], expected[i]) << "stored float " << i;
              } else {
                ASSERT_NEAR(stored[i], expected[i], 1e-4 + 1e-4 * std::fabs(expected[i]))
                    << "stored float " << i;
              }
            }
          }
        }
      }
    }
  }
  // No channels: prepared and run without dividing by zero lanes (an empty output).
  for (const char* layout : {"nhwc", "blocked"}) {
    auto none = h.Run(kFusedMaxPoolOp, {Tensor::Of<float>({1, 0, 4, 4}, {})},
                      Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                             {"x_layout", std::string(layout)},
                             {"y_layout", std::string(layout)}}));
    if (none.ok()) {
      EXPECT_EQ((*none)[0].shape, (Shape{1, 0, 3, 3})) << layout;
    }
  }
}

// The squeeze-and-excitation ops of conv chains (chain_ops.cc) over plain and channels-last
// storage (the blocked one runs in the engine's fusion tests), at two threads: the global
// average, and the channel scale for every pair of input and output storage: with a scale per
// image and channel, and with one shared by the images ([C,1,1]), a shift and a Relu.
TEST(PoolTest, ChainGlobalAverageAndChannelScaleOverStorages) {
  KernelHarness h;
  const int64_t n = 2, c = 40, hh = 24, ww = 24, plane = hh * ww;
  const std::vector<float> x = RandomFloats(n * c * plane, 31);
  // NCHW -> NHWC bytes (the shape stays NCHW), or back.
  auto permute = [&](const std::vector<float>& v, bool to_nhwc) {
    std::vector<float> out(v.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t p = 0; p < plane; ++p) {
          const int64_t nchw = (i * c + k) * plane + p, nhwc = (i * plane + p) * c + k;
          out[to_nhwc ? nhwc : nchw] = v[to_nhwc ? nchw : nhwc];
        }
    return out;
  };
  auto to_nhwc = [&](const std::vector<float>& v) { return permute(v, true); };
  auto from_nhwc = [&](const std::vector<float>& v) { return permute(v, false); };
  std::vector<float> mean(n * c);
  for (int64_t i = 0; i < n * c; ++i) {
    double sum = 0;
    for (int64_t p = 0; p < plane; ++p) sum += x[i * plane + p];
    mean[i] = static_cast<float>(sum / plane);
  }
  for (const char* layout : {"nchw", "nhwc"}) {
    SCOPED_TRACE(layout);
    const bool nhwc = std::string(layout) == "nhwc";
    auto kernel = h.Prepare(kFusedGlobalAveragePoolOp, {Tensor::Of<float>({n, c, hh, ww}, x)},
                            Attrs({{"x_layout", std::string(layout)}}), 17, 1, 2);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto out = h.RunPrepared(**kernel, {Tensor::Of<float>({n, c, hh, ww}, nhwc ? to_nhwc(x) : x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (Shape{n, c, 1, 1}));
    ExpectNear((*out)[0].Values<float>(), mean);
  }
  // By image: X * S. Shared: Relu(X * S + B), a BatchNormalization's form.
  const std::vector<float> per_image = RandomFloats(n * c, 32), shared = RandomFloats(c, 33);
  const std::vector<float> shift = RandomFloats(c, 34);
  for (const bool by_image : {true, false}) {
    const Tensor scale = by_image ? Tensor::Of<float>({n, c, 1, 1}, per_image)
                                  : Tensor::Of<float>({c, 1, 1}, shared);
    std::vector<Tensor> extra = {scale};
    if (!by_image) extra.push_back(Tensor::Of<float>({1, c, 1, 1}, shift));
    std::vector<float> want(x.size());
    for (int64_t i = 0; i < n * c; ++i) {
      const float sv = by_image ? per_image[i] : shared[i % c];
      for (int64_t p = 0; p < plane; ++p) {
        want[i * plane + p] =
            by_image ? x[i * plane + p] * sv : std::max(x[i * plane + p] * sv + shift[i % c], 0.0f);
      }
    }
    for (const char* x_layout : {"nchw", "nhwc"}) {
      for (const char* y_layout : {"nchw", "nhwc"}) {
        SCOPED_TRACE(::testing::Message()
                     << "by_image=" << by_image << " x " << x_layout << " y " << y_layout);
        const bool x_nhwc = std::string(x_layout) == "nhwc";
        std::vector<Tensor> inputs = {Tensor::Of<float>({n, c, hh, ww}, x_nhwc ? to_nhwc(x) : x)};
        inputs.insert(inputs.end(), extra.begin(), extra.end());
        auto kernel = h.Prepare(kFusedChannelScaleOp, inputs,
                                Attrs({{"x_layout", std::string(x_layout)},
                                       {"y_layout", std::string(y_layout)},
                                       {"activation", std::string(by_image ? "" : "Relu")}}),
                                17, 1, 2);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, inputs);
        ASSERT_TRUE(out.ok()) << out.status();
        const std::vector<float> got = (*out)[0].Values<float>();
        ExpectNear(std::string(y_layout) == "nhwc" ? from_nhwc(got) : got, want);
      }
    }
  }
  // A scale that varies across H or W, or with more channels than X, is refused.
  for (const Shape& bad : {Shape{n, c, hh, 1}, Shape{1, 1, 1, ww}, Shape{n, 2 * c, 1, 1}}) {
    auto refused = h.Run(
        kFusedChannelScaleOp,
        {Tensor::Of<float>({n, c, hh, ww}, x),
         Tensor::Of<float>(bad, std::vector<float>(bad[0] * bad[1] * bad[2] * bad[3], 1.0f))});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  }
}

// The chain's global maximum (chain_ops.cc, kFusedGlobalMaxPoolOp) of a 4-D and a 3-D value
// (a 1-D convolution's [N, C, W]) over plain and channels-last storage (the blocked one runs in
// the engine's fusion tests), at two threads, into [N, C] (keepdims 0) or [N, C, 1...]: NaN is
// skipped as ReduceMax's kernel skips it, a plane of NaN gives -inf, and every maximum is exact.
TEST(PoolTest, ChainGlobalMaximumSkipsNaNOverStorages) {
  KernelHarness h;
  const int64_t n = 2, c = 40;
  for (const Shape& shape : {Shape{n, c, 5, 7}, Shape{n, c, 101}}) {
    const int64_t plane = shape.size() == 4 ? shape[2] * shape[3] : shape[2];
    std::vector<float> x = RandomFloats(n * c * plane, 35);
    x[3] = std::nanf("");                      // (0, 0): one NaN
    x[plane * 5 + plane - 1] = std::nanf("");  // (0, 5): the last element
    std::fill(x.begin() + plane * 7, x.begin() + plane * 8, std::nanf(""));  // (0, 7): all
    // (0, 9): its maximum in the first row of 16 and a NaN at the same place in the last whole
    // row (the NaN comes after the maximum in the same partial result).
    x[plane * 9 + 2] = 10.0f;
    x[plane * 9 + (plane / 16 - 1) * 16 + 2] = std::nanf("");
    std::vector<float> want(n * c);
    for (int64_t i = 0; i < n * c; ++i) {
      float best = -INFINITY;
      for (int64_t p = 0; p < plane; ++p) {
        const float v = x[i * plane + p];
        if (v > best) best = v;
      }
      want[i] = best;
    }
    ASSERT_EQ(want[7], -INFINITY);
    ASSERT_EQ(want[9], 10.0f);
    for (const char* layout : {"nchw", "nhwc"}) {
      for (const int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(::testing::Message()
                     << runtime::ShapeToString(shape) << " " << layout << " keepdims " << keepdims);
        const bool nhwc = std::string(layout) == "nhwc";
        auto kernel =
            h.Prepare(kFusedGlobalMaxPoolOp, {Tensor::Of<float>(shape, x)},
                      Attrs({{"x_layout", std::string(layout)}, {"keepdims", keepdims}}), 17, 1, 2);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        Shape y_shape = {n, c};
        if (keepdims != 0) y_shape.resize(shape.size(), 1);
        ASSERT_EQ((*kernel)->outputs()[0].shape, y_shape);
        const std::vector<float> stored = nhwc ? StoreInLanes(x, n, c, plane, c) : x;
        std::vector<float> got(n * c, 0.0f);
        ASSERT_TRUE(RunOnBuffers(**kernel, {stored.data()}, got.data()).ok());
        EXPECT_EQ(got, want);
      }
    }
  }
}

// The chain's sum (chain_ops.cc, kFusedAddOp) over plain and channels-last storage (the
// blocked one runs in the engine's fusion tests), at two threads: X0 + X1 and Relu(X0 - X1), the
// inputs and the output each in either storage (one storage: the flat loop; mixed: element by
// element). Inputs of two shapes are refused.
TEST(PoolTest, ChainSumOverStorages) {
  KernelHarness h;
  const int64_t n = 2, c = 12, hh = 5, ww = 7, plane = hh * ww;
  const std::vector<float> a = RandomFloats(n * c * plane, 35), b = RandomFloats(n * c * plane, 36);
  auto to_nhwc = [&](const std::vector<float>& v) {
    std::vector<float> out(v.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t p = 0; p < plane; ++p)
          out[(i * plane + p) * c + k] = v[(i * c + k) * plane + p];
    return out;
  };
  const std::vector<std::string> layouts = {"nchw", "nhwc"};
  for (const bool subtract : {false, true}) {
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      want[i] = subtract ? std::max(a[i] - b[i], 0.0f) : a[i] + b[i];
    for (const std::string& l0 : layouts) {
      for (const std::string& l1 : layouts) {
        for (const std::string& ly : layouts) {
          SCOPED_TRACE(::testing::Message()
                       << "subtract=" << subtract << " " << l0 << " " << l1 << " -> " << ly);
          const std::vector<Tensor> inputs = {
              Tensor::Of<float>({n, c, hh, ww}, l0 == "nhwc" ? to_nhwc(a) : a),
              Tensor::Of<float>({n, c, hh, ww}, l1 == "nhwc" ? to_nhwc(b) : b)};
          auto kernel = h.Prepare(kFusedAddOp, inputs,
                                  Attrs({{"x0_layout", l0},
                                         {"x1_layout", l1},
                                         {"y_layout", ly},
                                         {"subtract", int64_t{subtract}},
                                         {"activation", std::string(subtract ? "Relu" : "")}}),
                                  17, 1, 2);
          ASSERT_TRUE(kernel.ok()) << kernel.status();
          auto out = h.RunPrepared(**kernel, inputs);
          ASSERT_TRUE(out.ok()) << out.status();
          EXPECT_EQ((*out)[0].Values<float>(), ly == "nhwc" ? to_nhwc(want) : want);
        }
      }
    }
  }
  auto refused =
      h.Run(kFusedAddOp, {Tensor::Of<float>({n, c, hh, ww}, a),
                          Tensor::Of<float>({n, c, hh, 1}, RandomFloats(n * c * hh, 37))});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
}

TEST(PoolTest, MaxPoolIndicesAndGlobalPools) {
  KernelHarness h;
  // Two planes: indices count across the whole tensor.
  auto out = h.Run("MaxPool", {Tensor::Of<float>({1, 2, 2, 2}, {1, 4, 3, 2, 5, 0, 7, 6})},
                   Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}}), 17, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 7}));
  EXPECT_EQ((*out)[1].Values<int64_t>(), (std::vector<int64_t>{1, 6}));
  out = h.Run("GlobalAveragePool", {Tensor::Of<float>({1, 2, 2, 2}, {1, 4, 3, 2, 5, 0, 7, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 1, 1}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f, 4.5f}));
  out = h.Run("GlobalMaxPool", {Tensor::Of<float>({1, 2, 4}, {1, 4, 3, 2, 5, 0, 7, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{4, 7}));
  // Missing kernel_shape and a 2-D input are errors.
  EXPECT_FALSE(h.Prepare("MaxPool", {Tensor::Of<float>({1, 1, 4, 4}, {})}).ok());
  EXPECT_FALSE(h.Prepare("AveragePool", {Tensor::Of<float>({4, 4}, {})},
                         Attrs({{"kernel_shape", std::vector<int64_t>{2}}}))
                   .ok());
}

// Planes of 1517 values (not a multiple of the eight lanes, across several blocks of 256)
// against sums and maxima taken in double; one plane is all negative.
TEST(PoolTest, GlobalPoolsOfLargePlanes) {
  KernelHarness h;
  const int64_t planes = 3, size = 37 * 41;
  std::vector<float> x = RandomFloats(planes * size, 91, -2.0f, 1.0f);
  for (int64_t i = 0; i < size; ++i) x[2 * size + i] = -1.0f - std::fabs(x[2 * size + i]);
  std::vector<float> mean, best;
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < size; ++i) {
      sum += x[p * size + i];
      m = std::max(m, x[p * size + i]);
    }
    mean.push_back(static_cast<float>(sum / size));
    best.push_back(m);
  }
  auto avg = h.Run("GlobalAveragePool", {Tensor::Of<float>({1, planes, 37, 41}, x)});
  ASSERT_TRUE(avg.ok()) << avg.status();
  ExpectNear((*avg)[0].Values<float>(), mean);
  auto max = h.Run("GlobalMaxPool", {Tensor::Of<float>({1, planes, 37, 41}, x)});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ((*max)[0].Values<float>(), best);
}

// Reference RoiAlign: every output element computed on its own, each sample's bilinear value
// from the four pixels around it (0 outside the image).
std::vector<float> ReferenceRoiAlign(const std::vector<float>& x, int64_t c, int64_t h, int64_t w,
                                     const std::vector<float>& rois,
                                     const std::vector<int64_t>& batch, int64_t out_h,
                                     int64_t out_w, int64_t ratio, double scale, bool half_pixel,
                                     bool max) {
  std::vector<float> y;
  const double shift = half_pixel ? 0.5 : 0.0;
  for (size_t r = 0; r < batch.size(); ++r) {
    const double x0 = rois[4 * r] * scale - shift, y0 = rois[4 * r + 1] * scale - shift;
    double rw = rois[4 * r + 2] * scale - shift - x0, rh = rois[4 * r + 3] * scale - shift - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / out_h));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / out_w));
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* p = x.data() + (batch[r] * c + ch) * h * w;
      auto pixel = [&](int64_t i, int64_t j) { return static_cast<double>(p[i * w + j]); };
      for (int64_t i = 0; i < out_h; ++i) {
        for (int64_t j = 0; j < out_w; ++j) {
          std::vector<double> values;
          for (int64_t a = 0; a < gh; ++a) {
            for (int64_t b = 0; b < gw; ++b) {
              double sy = y0 + (i + (a + 0.5) / gh) * rh / out_h;
              double sx = x0 + (j + (b + 0.5) / gw) * rw / out_w;
              if (sy < -1 || sy > h || sx < -1 || sx > w) {
                values.push_back(0);
                continue;
              }
              sy = std::min(std::max(sy, 0.0), static_cast<double>(h - 1));
              sx = std::min(std::max(sx, 0.0), static_cast<double>(w - 1));
              const int64_t y_lo = static_cast<int64_t>(sy), x_lo = static_cast<int64_t>(sx);
              const int64_t y_hi = std::min(y_lo + 1, h - 1), x_hi = std::min(x_lo + 1, w - 1);
              const double ly = sy - y_lo, lx = sx - x_lo;
              const double corners[4] = {
                  (1 - ly) * (1 - lx) * pixel(y_lo, x_lo), (1 - ly) * lx * pixel(y_lo, x_hi),
                  ly * (1 - lx) * pixel(y_hi, x_lo), ly * lx * pixel(y_hi, x_hi)};
              values.push_back(max ? *std::max_element(corners, corners + 4)
                                   : corners[0] + corners[1] + corners[2] + corners[3]);
            }
          }
          double v = 0;
          if (max && !values.empty()) v = *std::max_element(values.begin(), values.end());
          if (!max) {
            for (double s : values) v += s;
            v /= std::max<double>(static_cast<double>(values.size()), 1.0);
          }
          y.push_back(static_cast<float>(v));
        }
      }
    }
  }
  return y;
}

TEST(PoolTest, RoiAlignMatchesTheReferenceOnOneAndTwoThreads) {
  KernelHarness h;
  // 5 channels run the planar loop; 19 make the map channels-last first (8 or more, and many
  // samples for the 13 x 11 map).
  for (const int64_t c : {5, 19}) {
    SCOPED_TRACE(c);
    const int64_t n = 2, ih = 13, iw = 11;
    const std::vector<float> image = RandomFloats(n * c * ih * iw, 41);
    const Tensor x = Tensor::Of<float>({n, c, ih, iw}, image);
    // Regions inside, partly and wholly outside the image, one of no size, one reversed.
    const std::vector<float> boxes = {1, 2, 9, 11, -3, -2, 6,   5,   8,  1,  30,  20,  0,    0,
                                      0, 0, 4, 7,  2,  3,  -20, -20, -9, -9, 0.5, 0.5, 10.5, 12.5};
    const std::vector<int64_t> batch = {0, 1, 1, 0, 1, 0, 1};
    const Tensor rois = Tensor::Of<float>({7, 4}, boxes);
    const Tensor indices = Tensor::Of<int64_t>({7}, batch);
    struct Case {
      std::string mode, coords;
      int64_t out_h, out_w, ratio;
      float scale;
    };
    for (const Case& k :
         {Case{"avg", "half_pixel", 3, 4, 2, 1.0f}, Case{"avg", "output_half_pixel", 2, 3, 0, 1.0f},
          Case{"max", "half_pixel", 4, 2, 0, 0.75f}, Case{"avg", "half_pixel", 3, 3, 3, 0.5f}}) {
      SCOPED_TRACE(k.mode + " " + k.coords + " ratio " + std::to_string(k.ratio));
      const runtime::Attributes attrs = Attrs({{"mode", k.mode},
                                               {"coordinate_transformation_mode", k.coords},
                                               {"output_height", k.out_h},
                                               {"output_width", k.out_w},
                                               {"sampling_ratio", k.ratio},
                                               {"spatial_scale", k.scale}});
      const std::vector<float> want =
          ReferenceRoiAlign(image, c, ih, iw, boxes, batch, k.out_h, k.out_w, k.ratio, k.scale,
                            k.coords == "half_pixel", k.mode == "max");
      for (int threads : {1, 2}) {
        auto kernel = h.Prepare("RoiAlign", {x, rois, indices}, attrs, 16, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        auto out = h.RunPrepared(**kernel, {x, rois, indices});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].shape, (Shape{7, c, k.out_h, k.out_w}));
        ExpectNear((*out)[0].Values<float>(), want);
      }
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
