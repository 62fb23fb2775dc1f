// Depthwise convolutions on the channel-blocked layout of convolution chains (our own kernel,
// kernels/cpu/conv_depthwise.cc, where the chain is nChw16c or nChw8c; oneDNN's elsewhere and
// with CpuKernelOptions::conv_own_depthwise off) against a reference loop: windows of the
// kernel's fixed forms (3, 5 and 7 columns, strides 1 and 2) and of its generic one (dilations,
// other widths and strides, asymmetric pads), maps narrower than a block of outputs and than the
// window, channels that leave padding lanes in the last block (which must stay zero), every
// activation the kernel applies, with and without bias, batch 2, one and two threads. Also 2-D
// convolutions in narrow groups (2, 4 or 8 input and output channels per group, fewer than a
// block), which the same kernel runs.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/fused_ops.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

struct DwCase {
  int64_t n, c, h, w, kh, kw, stride_h, stride_w, dil_h, dil_w;
  int64_t pad_t, pad_l, pad_b, pad_r;
  int64_t cg = 1;  // input (and output) channels per group: 1 is depthwise
};

struct DwActivation {
  std::string name;
  float p0 = 0.0f, p1 = 0.0f;  // Clip's min and max; LeakyRelu's alpha; HardSigmoid's alpha, beta
};

float Activate(const DwActivation& a, double v) {
  const std::string& n = a.name;
  if (n == "Relu") return static_cast<float>(std::max(v, 0.0));
  if (n == "LeakyRelu") return static_cast<float>(v >= 0 ? v : v * a.p0);
  if (n == "Clip") return static_cast<float>(std::min<double>(std::max<double>(v, a.p0), a.p1));
  if (n == "Sigmoid") return static_cast<float>(1.0 / (1.0 + std::exp(-v)));
  if (n == "HardSigmoid") return static_cast<float>(std::clamp(a.p0 * v + a.p1, 0.0, 1.0));
  if (n == "HardSwish") return static_cast<float>(v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0));
  if (n == "Swish") return static_cast<float>(v / (1.0 + std::exp(-v)));
  if (n == "Tanh") return static_cast<float>(std::tanh(v));
  if (n == "Gelu") return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  return static_cast<float>(v);
}

// NCHW reference (ReferenceConv in groups of cg channels, then the activation); w [C, cg, KH,
// KW]; b empty for none.
std::vector<float> Reference(const DwCase& p, const DwActivation& act, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& b) {
  std::vector<float> y =
      ReferenceConv({p.n, p.c, p.h, p.w, p.c, p.kh, p.kw, p.c / p.cg, p.stride_h, p.stride_w,
                     p.dil_h, p.dil_w, p.pad_t, p.pad_l, p.pad_b, p.pad_r},
                    x, w, b);
  for (float& v : y) v = Activate(act, v);
  return y;
}

// [N, C, H, W] in channel blocks of `block` ([N, C/block, H, W, block], zeros past C), and back.
std::vector<float> ToBlocked(const std::vector<float>& x, int64_t n, int64_t c, int64_t pixels,
                             int64_t block) {
  const int64_t blocks = (c + block - 1) / block;
  std::vector<float> out(n * blocks * block * pixels, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) {
        out[((i * blocks + ch / block) * pixels + p) * block + ch % block] =
            x[(i * c + ch) * pixels + p];
      }
  return out;
}

// The chain's channel block here (16, 8, or 0 for channels-last): the padded size of a blocked
// 20-channel output (32, 24, or 20 floats per pixel).
int64_t ChainBlock(const KernelHarness& h) {
  const std::vector<Tensor> in = {Tensor::Of<float>({1, 20, 4, 4}, {}),
                                  Tensor::Of<float>({20, 1, 3, 3}, RandomFloats(180, 1), true)};
  auto kernel = h.Prepare(kFusedConvOp, in,
                          Attrs({{"group", int64_t{20}},
                                 {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                 {"y_layout", std::string("blocked")}}));
  if (!kernel.ok()) return -1;
  const int64_t per_pixel =
      static_cast<int64_t>((*kernel)->output_storage_bytes(0) / sizeof(float)) / 16;
  return per_pixel == 32 ? 16 : per_pixel == 24 ? 8 : 0;
}

// Runs the case from and to the blocked layout and compares every element, the padding lanes
// with zero. `own`: whether our kernel is expected (by its implementation's name).
void CheckCase(const KernelHarness& h, const DwCase& p, const DwActivation& act, bool bias,
               int threads, int64_t block, bool own) {
  SCOPED_TRACE(::testing::Message()
               << "n" << p.n << " c" << p.c << " " << p.h << "x" << p.w << " k" << p.kh << "x"
               << p.kw << " s" << p.stride_h << "," << p.stride_w << " d" << p.dil_h << ","
               << p.dil_w << " pads " << p.pad_t << "," << p.pad_l << "," << p.pad_b << ","
               << p.pad_r << " groups of " << p.cg << " act '" << act.name << "' bias " << bias
               << " threads " << threads);
  const auto x = RandomFloats(p.n * p.c * p.h * p.w, 11, -2.0f, 2.0f);
  const auto w = RandomFloats(p.c * p.cg * p.kh * p.kw, 12);
  const std::vector<float> b = bias ? RandomFloats(p.c, 13) : std::vector<float>{};
  const std::vector<float> want = Reference(p, act, x, w, b);
  const int64_t oh = OutSize(p.h, p.kh, p.stride_h, p.dil_h, p.pad_t, p.pad_b);
  const int64_t ow = OutSize(p.w, p.kw, p.stride_w, p.dil_w, p.pad_l, p.pad_r);
  std::vector<Tensor> in = {Tensor::Of<float>({p.n, p.c, p.h, p.w}, x),
                            Tensor::Of<float>({p.c, p.cg, p.kh, p.kw}, w, true)};
  if (bias) in.push_back(Tensor::Of<float>({p.c}, b, true));
  runtime::Attributes attrs =
      Attrs({{"group", p.c / p.cg},
             {"strides", std::vector<int64_t>{p.stride_h, p.stride_w}},
             {"dilations", std::vector<int64_t>{p.dil_h, p.dil_w}},
             {"pads", std::vector<int64_t>{p.pad_t, p.pad_l, p.pad_b, p.pad_r}},
             {"x_layout", std::string("blocked")},
             {"y_layout", std::string("blocked")},
             {"activation", act.name}});
  if (act.name == "Clip") {
    attrs.Set("clip_min", act.p0);
    attrs.Set("clip_max", act.p1);
  } else if (!act.name.empty()) {
    attrs.Set("activation_alpha", act.p0);
    attrs.Set("activation_beta", act.p1);
  }
  auto kernel = h.Prepare(kFusedConvOp, in, attrs, 17, 1, threads);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string impl = (*kernel)->implementation();
  EXPECT_EQ(impl.rfind("reprise_dw", 0) == 0, own) << impl;
  if (own) {
    EXPECT_EQ(impl.find(" (groups of ") != std::string::npos, p.cg > 1) << impl;
  }
  const std::vector<float> x_stored = ToBlocked(x, p.n, p.c, p.h * p.w, block);
  const int64_t blocks = (p.c + block - 1) / block, padded = blocks * block;
  ASSERT_EQ((*kernel)->output_storage_bytes(0),
            static_cast<size_t>(p.n * padded * oh * ow) * sizeof(float));
  std::vector<float> y(p.n * padded * oh * ow, 7.0f);  // every lane must be written
  std::vector<const void*> ins = {x_stored.data(), in[1].bytes.data()};
  if (bias) ins.push_back(in[2].bytes.data());
  ASSERT_TRUE(RunOnBuffers(**kernel, ins, y.data()).ok());
  const int64_t pixels = oh * ow;
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t ch = 0; ch < padded; ++ch)
      for (int64_t q = 0; q < pixels; ++q) {
        const float got = y[((i * blocks + ch / block) * pixels + q) * block + ch % block];
        if (ch >= p.c) {
          ASSERT_EQ(got, 0.0f) << "image " << i << " padding channel " << ch << " pixel " << q;
          continue;
        }
        const float v = want[(i * p.c + ch) * pixels + q];
        ASSERT_NEAR(got, v, 1e-5 + 1e-5 * std::fabs(v))
            << "image " << i << " channel " << ch << " pixel " << q << " (" << q / ow << ", "
            << q % ow << ")";
      }
}

const DwCase kCases[] = {
    // n, c, h, w, kh, kw, sh, sw, dh, dw, pads t l b r
    {1, 20, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // 3x3: padding lanes, one block of pixels
    {2, 40, 14, 30, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},  // 5x5, batch 2, interior blocks
    {1, 16, 13, 29, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2, odd sizes
    {1, 24, 15, 37, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},  // 5x5 stride 2
    {1, 8, 12, 40, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},   // 7x7
    {1, 12, 10, 41, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},  // 7x7 stride 2
    {1, 16, 6, 30, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},   // no padding
    {1, 16, 7, 7, 3, 3, 1, 1, 1, 1, 0, 2, 1, 0},    // asymmetric pads
    {1, 16, 5, 5, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},    // the window as wide as the map
    {1, 16, 3, 4, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},    // wider than the map
    {1, 20, 9, 26, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},   // dilated: the generic kernel
    {1, 16, 11, 31, 4, 4, 1, 1, 1, 1, 1, 2, 2, 1},  // four columns: generic
    {1, 32, 20, 50, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},  // stride 3: generic
    {1, 16, 8, 27, 3, 1, 1, 2, 1, 1, 1, 0, 1, 0},   // one column, stride 2 across
    {1, 40, 16, 33, 1, 5, 2, 1, 1, 1, 0, 2, 0, 2},  // one row
};

TEST(DepthwiseConvTest, BlockedMatchesReferenceForEveryWindow) {
  KernelHarness h;
  const int64_t block = ChainBlock(h);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  const DwActivation swish{"Swish"};
  for (const DwCase& p : kCases) {
    for (int threads : {1, 2}) CheckCase(h, p, swish, /*bias=*/true, threads, block, true);
    CheckCase(h, p, DwActivation{}, /*bias=*/false, 1, block, true);
  }
}

TEST(DepthwiseConvTest, BlockedAppliesEveryActivation) {
  KernelHarness h;
  const int64_t block = ChainBlock(h);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  // Clip from 0.5 and HardSigmoid and Sigmoid map 0 to a value other than 0: the padding lanes
  // must still be zero.
  const DwActivation acts[] = {
      {"Relu"},    {"LeakyRelu", 0.1f},         {"Clip", 0.0f, 6.0f}, {"Clip", 0.5f, 1.0f},
      {"Sigmoid"}, {"HardSigmoid", 0.2f, 0.5f}, {"HardSwish"},        {"Tanh"},
      {"Swish"}};
  for (const DwActivation& act : acts) {
    for (const DwCase& p : {kCases[0], kCases[3], kCases[10]}) {
      CheckCase(h, p, act, /*bias=*/true, 1, block, true);
    }
  }
}

// Groups of 2, 4 and 8 channels (ResNeXt's and RegNetY's 3x3 convolutions): the fixed 3x3 forms
// at strides 1 and 2 and the generic one, channels that leave padding lanes, batch 2, one and
// two threads. Groups as wide as the block (8 on AVX2) stay on oneDNN, whose kernels take them
// without reorders.
TEST(DepthwiseConvTest, NarrowGroupsMatchReference) {
  KernelHarness h;
  const int64_t block = ChainBlock(h);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  const DwCase cases[] = {
      // n, c, h, w, kh, kw, sh, sw, dh, dw, pads t l b r, cg
      {1, 32, 14, 29, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4},  // 3x3 stride 1, tail of a row block
      {2, 24, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8},   // padding lanes (24 of 32 on AVX-512)
      {1, 20, 11, 23, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2},  // stride 2, padding lanes
      {1, 48, 15, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8},  // stride 2
      {1, 16, 10, 19, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 4},  // 5x5: generic
      {1, 32, 12, 21, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 8},  // dilated: generic
      {1, 16, 6, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2},    // 1x1 (ShuffleNet's grouped 1x1)
      {1, 32, 7, 7, 3, 3, 1, 1, 1, 1, 0, 2, 1, 0, 4},    // asymmetric pads
  };
  for (const DwCase& p : cases) {
    const bool own = p.cg < block;
    for (int threads : {1, 2}) {
      CheckCase(h, p, DwActivation{"Swish"}, /*bias=*/true, threads, block, own);
    }
    CheckCase(h, p, DwActivation{}, /*bias=*/false, 1, block, own);
    CheckCase(h, p, DwActivation{"Clip", 0.5f, 1.0f}, /*bias=*/true, 1, block, own);
  }
}

// Groups our kernel does not take run on oneDNN: more output than input channels per group,
// groups of 3, and groups as wide as a block.
TEST(DepthwiseConvTest, OtherGroupsStayOnOneDnn) {
  KernelHarness h;
  const int64_t block = ChainBlock(h);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  struct Case {
    int64_t c, m, group;
  };
  for (const Case& k : {Case{16, 32, 4}, Case{24, 24, 8}, Case{32, 32, 32 / block}}) {
    SCOPED_TRACE(::testing::Message() << k.c << " -> " << k.m << " in " << k.group << " groups");
    const int64_t cg = k.c / k.group;
    std::vector<Tensor> in = {
        Tensor::Of<float>({1, k.c, 8, 8}, RandomFloats(k.c * 64, 31)),
        Tensor::Of<float>({k.m, cg, 3, 3}, RandomFloats(k.m * cg * 9, 32), true)};
    auto kernel = h.Prepare(kFusedConvOp, in,
                            Attrs({{"group", k.group},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                   {"x_layout", std::string("blocked")},
                                   {"y_layout", std::string("blocked")}}));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_NE((*kernel)->implementation().rfind("reprise_dw", 0), 0u)
        << (*kernel)->implementation();
  }
}

// With conv_own_depthwise off, and for an activation the kernel does not apply (Gelu), oneDNN's
// kernel runs the same cases.
TEST(DepthwiseConvTest, OneDnnWhereOursIsOffOrCannot) {
  CpuKernelOptions options;
  options.conv_own_depthwise = false;
  runtime::KernelRegistry registry;
  ASSERT_TRUE(RegisterCpuKernels(&registry, options).ok());
  KernelHarness off(&registry);
  const int64_t block = ChainBlock(off);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  for (const DwCase& p : {kCases[0], kCases[2], kCases[10]}) {
    CheckCase(off, p, DwActivation{"Swish"}, /*bias=*/true, 1, block, false);
  }
  KernelHarness on;
  CheckCase(on, kCases[0], DwActivation{"Gelu"}, true, 1, block, false);
}

// 1-D depthwise convolutions ([N, C, L], a Conformer's width 31 among them) go to our kernel
// over [N, C, 1, L] in the blocked layout, their plain or channels-last ends reordered into and
// out of it: every output against the reference, a padding lane past 20 channels included.
TEST(DepthwiseConvTest, OneDimensionalOnesRunOursThroughTheBlockedLayout) {
  KernelHarness h;
  const int64_t block = ChainBlock(h);
  ASSERT_GE(block, 0);
  if (block == 0) GTEST_SKIP() << "the chain layout here is channels-last";
  struct Case {
    int64_t n, c, len, k, stride, dilation, pad_l, pad_r;
    std::string x_layout, y_layout;
    bool bias = true;
  };
  const Case cases[] = {
      {2, 20, 49, 31, 1, 1, 15, 15, "nchw", "nchw"},      // a Conformer's, padding lanes
      {1, 32, 40, 5, 2, 2, 3, 1, "nhwc", "nchw"},         // strided, dilated, channels-last in
      {3, 16, 17, 3, 1, 1, 1, 1, "nchw", "nhwc", false},  // channels-last out, no bias
  };
  for (const Case& k : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "c" << k.c << " k" << k.k << " " << k.x_layout << " -> "
                                        << k.y_layout << " threads " << threads);
      const DwCase p = {k.n,      k.c, 1,          k.len, 1,       k.k, 1,
                        k.stride, 1,   k.dilation, 0,     k.pad_l, 0,   k.pad_r};
      const DwActivation act{"Swish"};
      const auto x = RandomFloats(k.n * k.c * k.len, 21, -2.0f, 2.0f);
      const auto w = RandomFloats(k.c * k.k, 22);
      const auto b = k.bias ? RandomFloats(k.c, 23) : std::vector<float>{};
      const std::vector<float> want = Reference(p, act, x, w, b);
      const int64_t out_len = OutSize(k.len, k.k, k.stride, k.dilation, k.pad_l, k.pad_r);
      std::vector<Tensor> in = {Tensor::Of<float>({k.n, k.c, k.len}, x),
                                Tensor::Of<float>({k.c, 1, k.k}, w, true)};
      if (k.bias) in.push_back(Tensor::Of<float>({k.c}, b, true));
      runtime::Attributes attrs = Attrs({{"group", k.c},
                                         {"strides", std::vector<int64_t>{k.stride}},
                                         {"dilations", std::vector<int64_t>{k.dilation}},
                                         {"pads", std::vector<int64_t>{k.pad_l, k.pad_r}},
                                         {"activation", act.name}});
      attrs.Set("x_layout", k.x_layout);
      attrs.Set("y_layout", k.y_layout);
      auto kernel = h.Prepare(kFusedConvOp, in, attrs, 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_NE((*kernel)->implementation().find("(1-D, blocked)"), std::string::npos)
          << (*kernel)->implementation();
      // X and Y as stored: [N, C, L], or channels-last [N, L, C].
      const auto stored = [](const std::vector<float>& v, int64_t n, int64_t c, int64_t len,
                             bool last) {
        std::vector<float> out(v.size());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t l = 0; l < len; ++l) {
              out[last ? (i * len + l) * c + ch : (i * c + ch) * len + l] =
                  v[(i * c + ch) * len + l];
            }
        return out;
      };
      const std::vector<float> x_in = stored(x, k.n, k.c, k.len, k.x_layout == "nhwc");
      ASSERT_EQ((*kernel)->output_storage_bytes(0),
                static_cast<size_t>(k.n * k.c * out_len) * sizeof(float));
      std::vector<float> y(k.n * k.c * out_len, 7.0f);
      std::vector<const void*> ins = {x_in.data(), in[1].bytes.data()};
      if (k.bias) ins.push_back(in[2].bytes.data());
      ASSERT_TRUE(RunOnBuffers(**kernel, ins, y.data()).ok());
      const std::vector<float> want_stored = stored(want, k.n, k.c, out_len, k.y_layout == "nhwc");
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], want_stored[i], 1e-5 + 1e-5 * std::fabs(want_stored[i])) << "at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
