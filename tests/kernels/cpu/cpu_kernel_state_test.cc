// Kernel state per device: two CPU devices whose kernels were registered with different
// CpuKernelOptions choose differently (Winograd or not, the layout of conv chains) without any
// environment variable, and each device has its own packed-weight cache, freed with the device.
// Results are compared with a plain loop (tolerance 1e-4 absolute + 1e-4 relative).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernel_state.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/core/device.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A CPU backend (one device) whose registry holds the CPU kernels with `options`.
struct TestDevice {
  std::unique_ptr<runtime::Backend> backend;
  runtime::Device* device = nullptr;
  const runtime::KernelRegistry* kernels() const { return device->kernels(); }
};

TestDevice MakeDevice(const CpuKernelOptions& options) {
  TestDevice d;
  auto backend = runtime::CreateBackend("cpu");
  if (!backend.ok()) return d;
  d.backend = *std::move(backend);
  auto device = d.backend->device(0);
  if (!device.ok()) return d;
  d.device = *device;
  if (!RegisterCpuKernels(d.device->kernels(), options).ok()) d.device = nullptr;
  return d;
}

CpuKernelOptions WithoutWinograd() {
  CpuKernelOptions options;
  options.conv_winograd = false;
  return options;
}

// Our own Winograd also where oneDNN has one (AVX-512).
CpuKernelOptions OwnWinograd() {
  CpuKernelOptions options;
  options.conv_own_winograd_always = true;
  return options;
}

CpuKernelOptions WithoutTapsAsChannels() {
  CpuKernelOptions options;
  options.conv_taps_as_channels = false;
  return options;
}

CpuKernelOptions WithoutTapRegions() {
  CpuKernelOptions options;
  options.conv_tap_regions = false;
  return options;
}

CpuKernelOptions NhwcChains() {
  CpuKernelOptions options;
  options.conv_chain_layout = ConvChainLayout::kNhwc;
  return options;
}

// A same-size convolution of C channels to C (stride 1, pads k/2) whose weights and bias are
// known at Prepare: Winograd's shape when k is 3 and H x W >= 49.
struct SameConv {
  int64_t c, h, w, k, m, n;
  std::vector<float> x, weights, bias;

  // `outputs` channels out (0: as many as in), over `images` images.
  SameConv(int64_t channels, int64_t height, int64_t width, int64_t kernel, int64_t outputs = 0,
           int64_t images = 1)
      : c(channels),
        h(height),
        w(width),
        k(kernel),
        m(outputs > 0 ? outputs : channels),
        n(images),
        x(RandomFloats(n * c * h * w, 1)),
        weights(RandomFloats(m * c * k * k, 2)),
        bias(RandomFloats(m, 3)) {}

  std::vector<Tensor> Inputs() const {
    return {Tensor::Of<float>({n, c, h, w}, x), Tensor::Of<float>({m, c, k, k}, weights, true),
            Tensor::Of<float>({m}, bias, true)};
  }

  // Conv's attributes; FusedConv's with `y_layout`.
  runtime::Attributes Attributes(const std::string& y_layout = "") const {
    const int64_t p = k / 2;
    runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{p, p, p, p}}});
    if (!y_layout.empty()) attrs.Set("y_layout", y_layout);
    return attrs;
  }

  // Y [N, M, H, W], plain NCHW.
  std::vector<float> Reference() const {
    const int64_t p = k / 2;
    std::vector<float> y(n * m * h * w);
    for (int64_t b = 0; b < n; ++b) {
      const float* image = x.data() + b * c * h * w;
      for (int64_t o = 0; o < m; ++o) {
        for (int64_t i = 0; i < h; ++i) {
          for (int64_t j = 0; j < w; ++j) {
            double acc = bias[o];
            for (int64_t ci = 0; ci < c; ++ci) {
              for (int64_t ki = 0; ki < k; ++ki) {
                for (int64_t kj = 0; kj < k; ++kj) {
                  const int64_t hi = i - p + ki, wj = j - p + kj;
                  if (hi < 0 || hi >= h || wj < 0 || wj >= w) continue;
                  acc += image[(ci * h + hi) * w + wj] * weights[((o * c + ci) * k + ki) * k + kj];
                }
              }
            }
            y[((b * m + o) * h + i) * w + j] = static_cast<float>(acc);
          }
        }
      }
    }
    return y;
  }
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
  }
}

// `v` as a [rows, cols] matrix, transposed: NCHW to NHWC (C rows of H x W), or back.
std::vector<float> Transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) t[col * rows + r] = v[r * cols + col];
  }
  return t;
}

// NCHW -> NHWC of `images` images of `channels` x `pixels` floats each.
std::vector<float> ToChannelsLast(const std::vector<float>& v, int64_t images, int64_t channels,
                                  int64_t pixels) {
  std::vector<float> t;
  for (int64_t i = 0; i < images; ++i) {
    const std::vector<float> moved =
        Transposed(std::vector<float>(v.begin() + i * channels * pixels,
                                      v.begin() + (i + 1) * channels * pixels),
                   channels, pixels);
    t.insert(t.end(), moved.begin(), moved.end());
  }
  return t;
}

// A FusedConv prepared (with `threads` intra-op threads) and run on each of two devices: the
// values of its output, and the implementation each chose.
struct OnTwoDevices {
  std::vector<float> got[2];
  std::string implementation[2];
};

void RunFusedConvOnTwo(const TestDevice& first, const TestDevice& second,
                       const std::vector<Tensor>& inputs, const runtime::Attributes& attrs,
                       int threads, OnTwoDevices* runs) {
  for (int d = 0; d < 2; ++d) {
    KernelHarness harness((d == 0 ? first : second).kernels());
    auto kernel = harness.Prepare(kFusedConvOp, inputs, attrs, 17, 1, threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    runs->implementation[d] = (*kernel)->implementation();
    auto out = harness.RunPrepared(**kernel, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    runs->got[d] = (*out)[0].Values<float>();
  }
}

// Conv of `conv` prepared on `device`, run `runs` times, and checked against the reference each
// time: its implementation ("" when Prepare failed, which is reported).
std::string RunSameConv(const TestDevice& device, const SameConv& conv, int threads = 1,
                        int runs = 1) {
  KernelHarness h(device.kernels());
  auto kernel = h.Prepare("Conv", conv.Inputs(), conv.Attributes(), 17, 1, threads);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return "";
  for (int run = 0; run < runs; ++run) {
    auto out = h.RunPrepared(**kernel, conv.Inputs());
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) ExpectNear((*out)[0].Values<float>(), conv.Reference());
  }
  return (*kernel)->implementation();
}

TEST(CpuKernelStateTest, RegistryHoldsTheOptionsItWasRegisteredWith) {
  TestDevice fast = MakeDevice({});
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  const CpuKernelState* fast_state = CpuKernelStateOf(*fast.kernels());
  const CpuKernelState* direct_state = CpuKernelStateOf(*direct.kernels());
  ASSERT_NE(fast_state, nullptr);
  ASSERT_NE(direct_state, nullptr);
  EXPECT_NE(fast_state, direct_state);
  EXPECT_TRUE(fast_state->options().conv_winograd);
  EXPECT_FALSE(direct_state->options().conv_winograd);
  // A registry holds one library's state.
  EXPECT_FALSE(RegisterCpuKernels(fast.device->kernels()).ok());
  EXPECT_EQ(CpuKernelStateOf(runtime::KernelRegistry()), nullptr);
}

TEST(CpuKernelStateTest, WinogradIsADeviceOption) {
  TestDevice fast = MakeDevice({});
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  // 256 output pixels of 64 channels: oneDNN's Winograd with AVX-512, our own otherwise.
  const SameConv conv(64, 16, 16, 3);
  const std::string implementation[2] = {RunSameConv(fast, conv), RunSameConv(direct, conv)};
  EXPECT_FALSE(implementation[1].empty());
  EXPECT_THAT(implementation[1], Not(HasSubstr("wino")));
  EXPECT_THAT(implementation[0], HasSubstr("wino"));
}

// Whether `device`'s Winograd is only ours (no AVX-512, so no oneDNN Winograd): ours names
// itself "winograd F(2x2,3x3)" in the implementation of a 64-channel 16x16 convolution, which
// both take.
bool OnlyOurWinograd(const TestDevice& device) {
  const std::string at16 = RunSameConv(device, SameConv(64, 16, 16, 3));
  EXPECT_THAT(at16, HasSubstr("wino"));
  return absl::StrContains(at16, "winograd F(2x2,3x3)");
}

// Where Winograd starts: oneDNN's from 49 output pixels (7x7, ResNet's last stage at batch 1;
// with more threads, below 196 only for enough work per thread), our own F(2x2, 3x3) from 196
// (14x14); below, the direct kernel.
TEST(CpuKernelStateTest, WinogradStartsAtSevenBySevenOnOneDnnAndFourteenOnOurs) {
  TestDevice fast = MakeDevice({});
  ASSERT_NE(fast.device, nullptr);
  const bool ours = OnlyOurWinograd(fast);
  const std::string at7 = RunSameConv(fast, SameConv(64, 7, 7, 3));
  const std::string at6 = RunSameConv(fast, SameConv(64, 6, 6, 3));
  EXPECT_FALSE(at7.empty());
  EXPECT_FALSE(at6.empty());
  EXPECT_THAT(at6, Not(HasSubstr("wino")));
  if (ours) {
    EXPECT_THAT(at7, Not(HasSubstr("wino")));
  } else {
    EXPECT_THAT(at7, HasSubstr("wino"));
    // On two threads below 14x14 only from 4M multiply-adds per thread: not 64 -> 64 over 7x7
    // (0.2M), 416 -> 416 (8.5M) yes.
    EXPECT_THAT(RunSameConv(fast, SameConv(64, 7, 7, 3), 2), Not(HasSubstr("wino")));
    EXPECT_THAT(RunSameConv(fast, SameConv(416, 7, 7, 3), 2), HasSubstr("wino"));
    EXPECT_THAT(RunSameConv(fast, SameConv(64, 16, 16, 3), 2), HasSubstr("wino"));
  }
  // Ours where oneDNN has its own too: from 14x14 only.
  TestDevice own = MakeDevice(OwnWinograd());
  ASSERT_NE(own.device, nullptr);
  EXPECT_THAT(RunSameConv(own, SameConv(64, 14, 14, 3)), HasSubstr("winograd F(2x2,3x3)"));
  const std::string own_at7 = RunSameConv(own, SameConv(64, 7, 7, 3));
  EXPECT_FALSE(own_at7.empty());
  EXPECT_THAT(own_at7, Not(HasSubstr("winograd F(2x2,3x3)")));
}

// oneDNN's F(4x4, 3x3) kernel is refused where it would multiply its tiles a few at a time: 31x31
// tiles (a 124x124 output) are one register block of 31 a row, 37x37 (145x145) blocks of one
// tile. Our own Winograd (no AVX-512) does not take 32 channels. Which Winograd kernel oneDNN
// offers depends on the CPU (with a 2 MiB L2 per core it offers F(2x2, 3x3) for all of these).
TEST(CpuKernelStateTest, OneDnnWinogradNeedsTilesThatBlock) {
  TestDevice fast = MakeDevice({});
  ASSERT_NE(fast.device, nullptr);
  const std::string at124 = RunSameConv(fast, SameConv(32, 124, 124, 3));
  const std::string at145 = RunSameConv(fast, SameConv(32, 145, 145, 3));
  EXPECT_FALSE(at124.empty());
  EXPECT_FALSE(at145.empty());
  EXPECT_THAT(at145, Not(HasSubstr("wino_4x3")));
  if (!OnlyOurWinograd(fast)) {
    EXPECT_THAT(at124, HasSubstr("wino"));
  }
}

// oneDNN's F(2x2, 3x3) kernel (its choice for 416 channels over 7x7, on one thread and on two:
// 8.5M multiply-adds pass the per-thread bound) runs as the faster by timed runs of it and the
// direct kernel, each checked against the reference (six runs take both ways: two untimed, two
// timed each); its F(4x4, 3x3) kernel (over 124x124 on CPUs where oneDNN offers it there) and
// the direct kernel run alone, but F(4x4, 3x3) with output channels short of a block races too.
TEST(CpuKernelStateTest, OneDnnWinogradF2x3RacesTheDirectKernel) {
  TestDevice fast = MakeDevice({});
  ASSERT_NE(fast.device, nullptr);
  if (OnlyOurWinograd(fast)) GTEST_SKIP() << "no oneDNN Winograd on this CPU";
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const std::string at7 = RunSameConv(fast, SameConv(416, 7, 7, 3), threads, 6);
    EXPECT_THAT(at7, HasSubstr("the faster by timed runs of [jit_fp32_wino_2x3"));
    EXPECT_THAT(at7, Not(HasSubstr("] and [jit_fp32_wino")));
  }
  // Over 124x124, the F(4x4, 3x3) kernel where oneDNN offers it here, else F(2x2, 3x3) raced.
  const std::string at124 = RunSameConv(fast, SameConv(32, 124, 124, 3));
  if (absl::StrContains(at124, "wino_4x3")) {
    EXPECT_THAT(at124, Not(HasSubstr("faster by timed runs")));
  } else {
    EXPECT_THAT(at124, HasSubstr("the faster by timed runs of [jit_fp32_wino_2x3"));
  }
  // Its F(4x4, 3x3) kernel too where the output channels fill no whole block of 16 (it
  // computes the padding channels): 16 -> 3 races, 16 -> 16 does not (8 images of 48x48, where
  // oneDNN offers F(4x4, 3x3)).
  const std::string to3 = RunSameConv(fast, SameConv(16, 48, 48, 3, 3, 8), 1, 3);
  if (absl::StrContains(to3, "wino_4x3")) {
    EXPECT_THAT(to3, HasSubstr("the faster by timed runs of [jit_wino_4x3"));
    EXPECT_THAT(to3, Not(HasSubstr("] and [jit_wino")));
  }
  const std::string to16 = RunSameConv(fast, SameConv(16, 48, 48, 3, 16, 8));
  if (absl::StrContains(to16, "wino_4x3")) {
    EXPECT_THAT(to16, Not(HasSubstr("faster by timed runs")));
  }
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(direct.device, nullptr);
  EXPECT_THAT(RunSameConv(direct, SameConv(416, 7, 7, 3)), Not(HasSubstr("wino")));
}

// Relu(B + a 3x3 convolution) of X `x_dims` [N, C, H, W] (NCHW) by W [M, C, 3, 3] (M: B's
// size) into [N, M, `out`...], NCHW: output (r, col) reads X at (r + kh * dilations[0] - pads[0],
// col + kw * dilations[1] - pads[1]), zero outside.
std::vector<float> Conv3x3Relu(const std::vector<float>& x, const std::vector<float>& weights,
                               const std::vector<float>& bias, const std::vector<int64_t>& x_dims,
                               const std::vector<int64_t>& out, const std::vector<int64_t>& pads,
                               const std::vector<int64_t>& dilations) {
  const int64_t n = x_dims[0], c = x_dims[1], h = x_dims[2], w = x_dims[3];
  const int64_t m = static_cast<int64_t>(bias.size()), oh = out[0], ow = out[1];
  std::vector<float> y(n * m * oh * ow);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t col = 0; col < ow; ++col) {
          double acc = bias[o];
          for (int64_t ci = 0; ci < c; ++ci) {
            for (int64_t t = 0; t < 9; ++t) {
              const int64_t hi = r + t / 3 * dilations[0] - pads[0];
              const int64_t wj = col + t % 3 * dilations[1] - pads[1];
              if (hi < 0 || hi >= h || wj < 0 || wj >= w) continue;
              acc += x[((i * c + ci) * h + hi) * w + wj] * weights[(o * c + ci) * 9 + t];
            }
          }
          y[((i * m + o) * oh + r) * ow + col] = static_cast<float>(std::max(acc, 0.0));
        }
      }
    }
  }
  return y;
}

// Our own Winograd F(2x2, 3x3) (conv.cc's OwnWinogradFor): a FusedConv with Relu of 64 channels
// to 72, batch 2, from and to plain, channels-last and blocked storage, at one and two threads,
// over sizes whose output leaves half tiles at the bottom and right (15x13 with pads 1) and with
// uneven pads (0/1 top/bottom, 1/0 left/right: 14x12), against the reference loop and the
// direct kernel of a device without Winograd.
TEST(CpuKernelStateTest, OwnWinogradOverStoragesAndEdges) {
  TestDevice fast = MakeDevice(OwnWinograd());
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  const int64_t n = 2, h = 15, w = 13;
  for (const auto& [c, m] : {std::pair<int64_t, int64_t>{64, 72}, {36, 116}}) {
    const std::vector<float> x = RandomFloats(n * c * h * w, 7);
    const std::vector<float> weights = RandomFloats(m * c * 9, 8);
    const std::vector<float> bias = RandomFloats(m, 9);
    for (const std::vector<int64_t>& pads :
         {std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{0, 1, 1, 0}}) {
      const int64_t oh = h + pads[0] + pads[2] - 2, ow = w + pads[1] + pads[3] - 2;
      const std::vector<float> want =
          Conv3x3Relu(x, weights, bias, {n, c, h, w}, {oh, ow}, {pads[0], pads[1]}, {1, 1});
      auto to_nhwc = [&](const std::vector<float>& v, int64_t channels, int64_t pixels) {
        return ToChannelsLast(v, n, channels, pixels);
      };
      for (const std::string layout : {"nchw", "nhwc", "blocked"}) {
        if (layout == "blocked" && c % 16 != 0) continue;  // X's size would be the blocked one
        for (const int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message()
                       << c << " to " << m << " " << layout << " pads " << pads[0] << pads[1]
                       << pads[2] << pads[3] << " threads " << threads);
          runtime::Attributes attrs = Attrs({{"pads", pads}});
          attrs.Set("activation", std::string("Relu"));
          attrs.Set("x_layout", layout);
          attrs.Set("y_layout", layout);
          // 64 channels fill whole channel blocks: the blocked X is as many floats as the plain
          // one (in another order, which both devices read the same way).
          const std::vector<Tensor> inputs = {
              Tensor::Of<float>({n, c, h, w}, layout == "nhwc" ? to_nhwc(x, c, h * w) : x),
              Tensor::Of<float>({m, c, 3, 3}, weights, true), Tensor::Of<float>({m}, bias, true)};
          OnTwoDevices runs;
          ASSERT_NO_FATAL_FAILURE(RunFusedConvOnTwo(fast, direct, inputs, attrs, threads, &runs));
          const auto& [got, implementation] = runs;
          EXPECT_THAT(implementation[0], HasSubstr("winograd F(2x2,3x3)"));
          EXPECT_THAT(implementation[1], Not(HasSubstr("wino")));
          ExpectNear(got[0], got[1]);
          if (layout == "nchw") ExpectNear(got[0], want);
          if (layout == "nhwc") ExpectNear(got[0], to_nhwc(want, m, oh * ow));
        }
      }
    }
  }
}

// The same with a residual R of Y's shape (a ResNet basic block's second convolution): Relu(conv
// + B + R), R stored plain or as Y is (channels-last, blocked), 64 channels to 64.
TEST(CpuKernelStateTest, OwnWinogradAddsTheResidual) {
  TestDevice fast = MakeDevice(OwnWinograd());
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  const int64_t n = 2, c = 64, h = 15, w = 13, pixels = h * w;
  const std::vector<float> x = RandomFloats(n * c * pixels, 10);
  const std::vector<float> weights = RandomFloats(c * c * 9, 11);
  const std::vector<float> bias = RandomFloats(c, 12);
  const std::vector<float> r = RandomFloats(n * c * pixels, 13);
  std::vector<float> want(n * c * pixels);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < c; ++o) {
      for (int64_t p = 0; p < pixels; ++p) {
        double acc = bias[o] + r[(i * c + o) * pixels + p];
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t t = 0; t < 9; ++t) {
            const int64_t hi = p / w + t / 3 - 1, wj = p % w + t % 3 - 1;
            if (hi < 0 || hi >= h || wj < 0 || wj >= w) continue;
            acc += x[((i * c + ci) * h + hi) * w + wj] * weights[(o * c + ci) * 9 + t];
          }
        }
        want[(i * c + o) * pixels + p] = static_cast<float>(std::max(acc, 0.0));
      }
    }
  }
  auto to_nhwc = [&](const std::vector<float>& v) { return ToChannelsLast(v, n, c, pixels); };
  for (const std::string layout : {"nchw", "nhwc", "blocked"}) {
    for (const std::string& r_layout : {std::string("nchw"), layout}) {
      SCOPED_TRACE(layout + " residual " + r_layout);
      runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
      attrs.Set("activation", std::string("Relu"));
      attrs.Set("x_layout", layout);
      attrs.Set("y_layout", layout);
      attrs.Set("r_layout", r_layout);
      const std::vector<Tensor> inputs = {
          Tensor::Of<float>({n, c, h, w}, layout == "nhwc" ? to_nhwc(x) : x),
          Tensor::Of<float>({c, c, 3, 3}, weights, true), Tensor::Of<float>({c}, bias, true),
          Tensor::Of<float>({n, c, h, w}, r_layout == "nhwc" ? to_nhwc(r) : r)};
      OnTwoDevices runs;
      ASSERT_NO_FATAL_FAILURE(RunFusedConvOnTwo(fast, direct, inputs, attrs, 1, &runs));
      const auto& [got, implementation] = runs;
      EXPECT_THAT(implementation[0], HasSubstr("winograd F(2x2,3x3)"));
      EXPECT_THAT(implementation[1], Not(HasSubstr("wino")));
      ExpectNear(got[0], got[1]);
      if (layout == "nchw") ExpectNear(got[0], want);
      if (layout == "nhwc") ExpectNear(got[0], to_nhwc(want));
    }
  }
}

// A dilated 3x3 FusedConv with Relu, 64 -> 64 channels, batch 2, over 28x30 (pads as the
// dilations), from and to plain, channels-last and blocked storage, at one and two threads. At
// dilations 2x2, 4x2, 3x3 and 2x4 it runs as the undilated convolution over the input's phases
// (14x15, 7x15, 10x10 and 14x8, the last two reaching past the input; batches of 8, 8, 18 and 8)
// exactly where that convolution alone runs Winograd on the device (the default one, and one with
// our own Winograd always, which takes channels-last too; conv_phases.cc); at 7x7 (phases of 4x5)
// as dilated. The values match the reference loop and a device without Winograd (the dilated
// direct kernel).
TEST(CpuKernelStateTest, DilatedConvolutionRunsOverPhases) {
  TestDevice fast = MakeDevice({});
  TestDevice own = MakeDevice(OwnWinograd());
  TestDevice direct = MakeDevice(WithoutWinograd());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(own.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  const int64_t n = 2, c = 64, m = 64, h = 28, w = 30;
  const std::vector<float> x = RandomFloats(n * c * h * w, 21);
  const std::vector<float> weights = RandomFloats(m * c * 9, 22);
  const std::vector<float> bias = RandomFloats(m, 23);
  int phases_seen = 0;
  for (const auto& [dh, dw] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {3, 3}, {2, 4}, {7, 7}}) {
    const std::vector<float> want =
        Conv3x3Relu(x, weights, bias, {n, c, h, w}, {h, w}, {dh, dw}, {dh, dw});
    const int64_t ph = (h + dh - 1) / dh, pw = (w + dw - 1) / dw;  // a phase's size
    const bool phases = ph >= 7 && pw >= 7;
    for (const std::string layout : {"nchw", "nhwc", "blocked"}) {
      for (const auto& [threads, device] :
           {std::pair<int, const TestDevice*>{1, &fast}, {2, &fast}, {1, &own}, {2, &own}}) {
        SCOPED_TRACE(::testing::Message()
                     << "dilations " << dh << "x" << dw << " " << layout << " threads " << threads
                     << (device == &own ? " own Winograd" : ""));
        auto attributes = [&](std::vector<int64_t> dilations, std::vector<int64_t> pads) {
          runtime::Attributes attrs = Attrs({{"pads", pads}, {"dilations", dilations}});
          attrs.Set("activation", std::string("Relu"));
          attrs.Set("x_layout", layout);
          attrs.Set("y_layout", layout);
          return attrs;
        };
        const std::vector<Tensor> inputs = {
            Tensor::Of<float>({n, c, h, w}, layout == "nhwc" ? ToChannelsLast(x, n, c, h * w) : x),
            Tensor::Of<float>({m, c, 3, 3}, weights, true), Tensor::Of<float>({m}, bias, true)};
        OnTwoDevices runs;
        ASSERT_NO_FATAL_FAILURE(RunFusedConvOnTwo(
            *device, direct, inputs, attributes({dh, dw}, {dh, dw, dh, dw}), threads, &runs));
        const auto& [got, implementation] = runs;
        EXPECT_THAT(implementation[1], Not(HasSubstr("phases")));
        ExpectNear(got[0], got[1]);
        if (layout == "nchw") ExpectNear(got[0], want);
        if (layout == "nhwc") ExpectNear(got[0], ToChannelsLast(want, n, m, h * w));
        if (!phases) {
          EXPECT_THAT(implementation[0], Not(HasSubstr("phases")));
          continue;
        }
        // The undilated convolution over the phases, alone.
        KernelHarness harness(device->kernels());
        const std::vector<Tensor> phase_inputs = {
            Tensor::Of<float>({n * dh * dw, c, ph, pw},
                              std::vector<float>(n * dh * dw * c * ph * pw)),
            inputs[1], inputs[2]};
        auto alone = harness.Prepare(kFusedConvOp, phase_inputs, attributes({1, 1}, {1, 1, 1, 1}),
                                     17, 1, threads);
        ASSERT_TRUE(alone.ok()) << alone.status();
        if (absl::StrContains((*alone)->implementation(), "wino")) {
          EXPECT_THAT(implementation[0], HasSubstr(absl::StrCat("dilated as ", dh, "x", dw,
                                                                " phases of ", ph, "x", pw, ": ")));
          EXPECT_THAT(implementation[0], HasSubstr("wino"));
          ++phases_seen;
        } else {
          EXPECT_THAT(implementation[0], Not(HasSubstr("phases")));
        }
      }
    }
  }
  if (phases_seen == 0) GTEST_SKIP() << "no Winograd over these phases on this device";
}

// Taps as channels (conv.h): a 3x3 convolution of 192 channels (a reduction of 1728) whose
// direct kernel is oneDNN's AVX2 one runs as a 1x1 convolution over its input gathered per tap,
// from a plain input (gathered from the blocked layout) and from a channels-last one; with the
// option off, on the direct kernel. The same values every way.
TEST(CpuKernelStateTest, TapsAsChannelsIsADeviceOption) {
  TestDevice taps = MakeDevice({});
  CpuKernelOptions onednn = WithoutTapsAsChannels();
  onednn.conv_tap_regions = false;  // no gathered window racing oneDNN's kernel either
  TestDevice direct = MakeDevice(onednn);
  TestDevice nhwc = MakeDevice(NhwcChains());
  ASSERT_NE(taps.device, nullptr);
  ASSERT_NE(direct.device, nullptr);
  ASSERT_NE(nhwc.device, nullptr);
  const SameConv conv(192, 7, 6, 3);  // 42 output pixels: not Winograd's shape
  const std::vector<float> want = conv.Reference();
  const std::string implementation[2] = {RunSameConv(taps, conv), RunSameConv(direct, conv)};
  EXPECT_THAT(implementation[1], Not(HasSubstr("taps")));

  // Channels-last at both ends (a chain on the nhwc device): X and Y as NHWC bytes.
  const int64_t pixels = conv.h * conv.w;
  std::vector<Tensor> inputs = conv.Inputs();
  inputs[0] = Tensor::Of<float>({1, conv.c, conv.h, conv.w}, Transposed(conv.x, conv.c, pixels));
  runtime::Attributes attrs = conv.Attributes("nhwc");
  attrs.Set("x_layout", std::string("nhwc"));
  KernelHarness h_nhwc(nhwc.kernels());
  auto kernel = h_nhwc.Prepare(kFusedConvOp, inputs, attrs);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string nhwc_implementation = (*kernel)->implementation();
  auto out = h_nhwc.RunPrepared(**kernel, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> got = (*out)[0].Values<float>();
  ASSERT_EQ(got.size(), want.size());
  ExpectNear(Transposed(got, pixels, conv.c), want);

  if (!absl::StartsWith(implementation[1], "jit:avx2")) {
    GTEST_SKIP() << "oneDNN's direct convolution here is " << implementation[1]
                 << ", not its AVX2 one";
  }
  EXPECT_THAT(implementation[0], HasSubstr("taps as channels"));
  EXPECT_THAT(nhwc_implementation, HasSubstr("taps as channels"));
}

// Tap regions (conv.h): an atrous 3x3 FusedConv with a Relu, 32 -> 24 channels at dilation 12
// over 14x14 (18% of its tap-pixel pairs read X), runs per tap over the taps' regions from and
// to plain, channels-last and blocked storage (channels-last too without AVX2: then the kernel
// adds into the output itself); with the option off, on oneDNN. The same values (the same bytes
// as stored) either way, and the plain and channels-last ones match the reference loop.
TEST(CpuKernelStateTest, TapRegionsIsADeviceOption) {
  TestDevice regions = MakeDevice({});
  TestDevice whole = MakeDevice(WithoutTapRegions());
  ASSERT_NE(regions.device, nullptr);
  ASSERT_NE(whole.device, nullptr);
  const int64_t c = 32, m = 24, size = 14, d = 12, pixels = size * size;
  const std::vector<float> x = RandomFloats(c * pixels, 4);
  const std::vector<float> weights = RandomFloats(m * c * 9, 5);
  const std::vector<float> bias = RandomFloats(m, 6);
  auto reference = [&](const std::vector<float>& xin) {  // Relu(conv), NCHW
    std::vector<float> y(m * pixels);
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t p = 0; p < pixels; ++p) {
        double acc = bias[o];
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t t = 0; t < 9; ++t) {
            const int64_t hi = p / size + (t / 3 - 1) * d, wj = p % size + (t % 3 - 1) * d;
            if (hi < 0 || hi >= size || wj < 0 || wj >= size) continue;
            acc += xin[ci * pixels + hi * size + wj] * weights[(o * c + ci) * 9 + t];
          }
        }
        y[o * pixels + p] = static_cast<float>(std::max(acc, 0.0));
      }
    }
    return y;
  };
  const std::vector<float> want = reference(x);
  for (const std::string layout : {"nchw", "nhwc", "blocked"}) {
    SCOPED_TRACE(layout);
    runtime::Attributes attrs = Attrs(
        {{"pads", std::vector<int64_t>{d, d, d, d}}, {"dilations", std::vector<int64_t>{d, d}}});
    attrs.Set("activation", std::string("Relu"));
    attrs.Set("x_layout", layout);
    attrs.Set("y_layout", layout);
    // 32 channels fill whole channel blocks: the blocked X is as many floats as the plain one
    // (its order is not the plain one, but both devices read it the same way).
    const std::vector<Tensor> inputs = {
        Tensor::Of<float>({1, c, size, size}, layout == "nhwc" ? Transposed(x, c, pixels) : x),
        Tensor::Of<float>({m, c, 3, 3}, weights, true), Tensor::Of<float>({m}, bias, true)};
    OnTwoDevices runs;
    ASSERT_NO_FATAL_FAILURE(RunFusedConvOnTwo(regions, whole, inputs, attrs, 1, &runs));
    const auto& [got, implementation] = runs;
    EXPECT_THAT(implementation[0], HasSubstr("tap regions"));
    EXPECT_THAT(implementation[1], Not(HasSubstr("tap regions")));
    ExpectNear(got[0], got[1]);
    if (layout == "nchw") ExpectNear(got[0], want);
    if (layout == "nhwc") ExpectNear(Transposed(got[0], pixels, m), want);
  }
}

// Where oneDNN runs its direct kernel ("jit:"), the whole window gathered channels-last with one
// sgemm per image races it (conv.cc's WholeWindowRaceFor): a strided 3x3, a 1x7 and a 3x1
// FusedConv with Relu, batch 1 and 2, from and to plain and blocked storage, at one and two
// threads. Each way is run and checked against the reference loop (plain) or against the other
// way (blocked). Without tap regions, prepared to run once, or over more than 1024 output pixels,
// oneDNN's kernel runs alone.
TEST(CpuKernelStateTest, GatheredWindowRacesTheDirectKernel) {
  TestDevice fast = MakeDevice({});
  TestDevice onednn = MakeDevice(WithoutTapRegions());
  ASSERT_NE(fast.device, nullptr);
  ASSERT_NE(onednn.device, nullptr);
  struct Case {
    int64_t n, c, m, h, w, kh, kw, sh, sw, ph, pw;
  };
  for (const Case& k :
       {Case{1, 48, 40, 15, 13, 3, 3, 2, 2, 1, 1}, Case{2, 32, 32, 9, 11, 1, 7, 1, 1, 0, 3},
        Case{1, 64, 48, 8, 8, 3, 1, 1, 1, 1, 0}}) {
    const std::vector<float> x = RandomFloats(k.n * k.c * k.h * k.w, 21);
    const std::vector<float> weights = RandomFloats(k.m * k.c * k.kh * k.kw, 22);
    const std::vector<float> bias = RandomFloats(k.m, 23);
    std::vector<float> want = ReferenceConv(
        {k.n, k.c, k.h, k.w, k.m, k.kh, k.kw, 1, k.sh, k.sw, 1, 1, k.ph, k.pw, k.ph, k.pw}, x,
        weights, bias);
    for (float& v : want) v = std::max(v, 0.0f);  // Relu
    for (const std::string layout : {"nchw", "blocked"}) {
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << k.kh << "x" << k.kw << " stride " << k.sh << " "
                                          << layout << " threads " << threads);
        runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{k.ph, k.pw, k.ph, k.pw}},
                                           {"strides", std::vector<int64_t>{k.sh, k.sw}}});
        attrs.Set("activation", std::string("Relu"));
        attrs.Set("x_layout", layout);
        attrs.Set("y_layout", layout);
        // The input channels fill whole blocks: the blocked X is as many floats as the plain one.
        const std::vector<Tensor> inputs = {
            Tensor::Of<float>({k.n, k.c, k.h, k.w}, x),
            Tensor::Of<float>({k.m, k.c, k.kh, k.kw}, weights, true),
            Tensor::Of<float>({k.m}, bias, true)};
        KernelHarness h(fast.kernels());
        auto kernel = h.Prepare(kFusedConvOp, inputs, attrs, 17, 1, threads);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        const auto ways = FasterOfWays(**kernel);
        ASSERT_NE(ways[0], nullptr) << (*kernel)->implementation();
        EXPECT_THAT(ways[0]->implementation(), ::testing::StartsWith("jit:"));
        EXPECT_EQ(ways[1]->implementation(), "im2col channels-last, sgemm");
        std::vector<float> got[2];
        for (int way = 0; way < 2; ++way) {
          auto out = h.RunPrepared(*ways[way], inputs);
          ASSERT_TRUE(out.ok()) << out.status();
          got[way] = (*out)[0].Values<float>();
        }
        ExpectNear(got[1], got[0]);
        if (layout == "nchw") ExpectNear(got[0], want);
        for (int run = 0; run < 6; ++run) {  // the race itself: both ways, then the faster
          auto out = h.RunPrepared(**kernel, inputs);
          ASSERT_TRUE(out.ok()) << out.status();
          ExpectNear((*out)[0].Values<float>(), got[0]);
        }
        auto once = h.Prepare(kFusedConvOp, inputs, attrs, 17, 1, threads, /*run_once=*/true);
        ASSERT_TRUE(once.ok()) << once.status();
        EXPECT_EQ(FasterOfWays(**once)[0], nullptr) << (*once)->implementation();
        KernelHarness without(onednn.kernels());
        auto alone = without.Prepare(kFusedConvOp, inputs, attrs, 17, 1, threads);
        ASSERT_TRUE(alone.ok()) << alone.status();
        EXPECT_THAT((*alone)->implementation(), ::testing::StartsWith("jit:"));
      }
    }
  }
  // More than 1024 output pixels (33x33): oneDNN's kernel alone.
  const std::vector<Tensor> wide = {
      Tensor::Of<float>({1, 16, 65, 65}, RandomFloats(16 * 65 * 65, 24)),
      Tensor::Of<float>({16, 16, 3, 3}, RandomFloats(16 * 16 * 9, 25), true)};
  KernelHarness h(fast.kernels());
  auto kernel = h.Prepare(
      "Conv", wide,
      Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}}));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT((*kernel)->implementation(), ::testing::StartsWith("jit:"));
}

// Our own Winograd F(2x2, 3x3) below kOwnWinogradMinProduct (32 -> 32 channels) races the direct
// kernel where oneDNN takes no Winograd of its own (over 145x145, where it offers F(4x4, 3x3),
// 37x37 tiles are refused: WinogradTilesBlock); each way matches the reference loop.
TEST(CpuKernelStateTest, OwnWinogradOfFewChannelsRacesTheDirectKernel) {
  TestDevice fast = MakeDevice({});
  ASSERT_NE(fast.device, nullptr);
  const SameConv conv(32, 145, 145, 3);
  KernelHarness h(fast.kernels());
  auto kernel = h.Prepare("Conv", conv.Inputs(), conv.Attributes());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string implementation = (*kernel)->implementation();
  if (absl::StrContains(implementation, "_wino")) {
    GTEST_SKIP() << "oneDNN offers its own Winograd here: " << implementation;
  }
  const auto ways = FasterOfWays(**kernel);
  ASSERT_NE(ways[0], nullptr) << implementation;
  EXPECT_THAT(ways[0]->implementation(), ::testing::StartsWith("jit:"));
  EXPECT_THAT(ways[1]->implementation(), HasSubstr("winograd F(2x2,3x3)"));
  for (int way = 0; way < 2; ++way) {
    auto out = h.RunPrepared(*ways[way], conv.Inputs());
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), conv.Reference());
  }
}

TEST(CpuKernelStateTest, ChainLayoutIsADeviceOption) {
  TestDevice blocked = MakeDevice({});
  TestDevice nhwc = MakeDevice(NhwcChains());
  ASSERT_NE(blocked.device, nullptr);
  ASSERT_NE(nhwc.device, nullptr);
  // Four channels: a channel block (8 or 16) pads them, channels-last does not.
  const SameConv conv(4, 6, 5, 1);
  const std::vector<float> want = conv.Reference();
  const size_t dense = want.size() * sizeof(float);
  const int64_t pixels = conv.h * conv.w;

  KernelHarness h_nhwc(nhwc.kernels());
  auto kernel = h_nhwc.Prepare(kFusedConvOp, conv.Inputs(), conv.Attributes("blocked"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->output_storage_bytes(0), dense);
  auto out = h_nhwc.RunPrepared(**kernel, conv.Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> channels_last = (*out)[0].Values<float>();
  ASSERT_EQ(channels_last.size(), want.size());
  ExpectNear(Transposed(channels_last, pixels, conv.c), want);

  KernelHarness h_blocked(blocked.kernels());
  kernel = h_blocked.Prepare(kFusedConvOp, conv.Inputs(), conv.Attributes("blocked"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const size_t stored = (*kernel)->output_storage_bytes(0);
  if (stored == dense) GTEST_SKIP() << "the automatic chain layout is channels-last on this CPU";
  // nChw16c or nChw8c: one block of `block` channels, the last ones zero padding.
  const int64_t block = static_cast<int64_t>(stored / (pixels * sizeof(float)));
  ASSERT_TRUE(block == 8 || block == 16) << stored << " bytes";
  out = h_blocked.RunPrepared(**kernel, conv.Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> blocks = (*out)[0].Values<float>();
  ASSERT_EQ(blocks.size(), static_cast<size_t>(block * pixels));
  std::vector<float> got(want.size());
  for (int64_t m = 0; m < conv.c; ++m) {
    for (int64_t p = 0; p < pixels; ++p) got[m * pixels + p] = blocks[p * block + m];
  }
  ExpectNear(got, want);
}

// A 5x5 convolution without tap regions: one kernel, one set of packed weights (a 3x3 one may
// run as the faster of Winograd and the direct kernel, and with tap regions the direct kernel
// races the gathered window, each with weights of its own).
TEST(CpuKernelStateTest, PackedWeightsArePerDevice) {
  TestDevice a = MakeDevice(WithoutTapRegions());
  TestDevice b = MakeDevice(WithoutTapRegions());
  ASSERT_NE(a.device, nullptr);
  ASSERT_NE(b.device, nullptr);
  const CpuKernelState* state_a = CpuKernelStateOf(*a.kernels());
  const CpuKernelState* state_b = CpuKernelStateOf(*b.kernels());
  ASSERT_NE(state_a, nullptr);
  ASSERT_NE(state_b, nullptr);
  const SameConv conv(16, 16, 16, 5);
  const std::vector<Tensor> inputs = conv.Inputs();  // the same weights' address for every Prepare
  const runtime::Attributes attrs = conv.Attributes();
  KernelHarness h_a(a.kernels()), h_b(b.kernels());

  auto first = h_a.Prepare("Conv", inputs, attrs);
  ASSERT_TRUE(first.ok()) << first.status();
  PackedWeightStats stats = state_a->weight_stats();
  if (stats.packed == 0) GTEST_SKIP() << "oneDNN uses the plain weights here: nothing is packed";
  EXPECT_EQ(stats.packed, 1u);
  EXPECT_EQ(stats.reused, 0u);
  EXPECT_EQ(stats.live, 1u);
  // A second plan on the same device reuses the packed weights.
  auto second = h_a.Prepare("Conv", inputs, attrs);
  ASSERT_TRUE(second.ok()) << second.status();
  stats = state_a->weight_stats();
  EXPECT_EQ(stats.packed, 1u);
  EXPECT_EQ(stats.reused, 1u);
  // Another device packs its own.
  auto other = h_b.Prepare("Conv", inputs, attrs);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(state_b->weight_stats().packed, 1u);
  EXPECT_EQ(state_b->weight_stats().reused, 0u);
  EXPECT_EQ(state_a->weight_stats().packed, 1u);

  // The cache holds its entries weakly: the kernels of device a gone, it holds nothing live.
  first->reset();
  second->reset();
  EXPECT_EQ(state_a->weight_stats().live, 0u);
  EXPECT_EQ(state_b->weight_stats().live, 1u);

  // Destroying device a frees its state and cache, while a kernel prepared on it still runs
  // from the packed weights it holds.
  auto survivor = h_a.Prepare("Conv", inputs, attrs);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  std::weak_ptr<runtime::KernelState> weak = a.kernels()->state();
  ASSERT_FALSE(weak.expired());
  a.backend.reset();
  EXPECT_TRUE(weak.expired());
  auto out = h_b.RunPrepared(**survivor, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), conv.Reference());
  // Device b is unaffected.
  auto again = h_b.Prepare("Conv", inputs, attrs);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(state_b->weight_stats().reused, 1u);
}

// oneDNN keeps the OpenMP thread count a primitive was created with, so a kernel prepared on a
// thread whose count is the machine's would use every core at Run: the oneDNN kernels set the
// preparing thread's count to the context's intra-op threads first.
TEST(CpuKernelStateTest, PrepareUsesTheIntraOpThreadsOfTheContext) {
  TestDevice d = MakeDevice({});
  ASSERT_NE(d.device, nullptr);
  KernelHarness h(d.kernels());
  const SameConv conv(8, 6, 6, 3);
  for (int threads : {1, 3, 2}) {
    omp_set_num_threads(threads == 1 ? 4 : 1);
    auto kernel = h.Prepare("Conv", conv.Inputs(), conv.Attributes(), 17, 1, threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(omp_get_max_threads(), threads);
  }
}

TEST(CpuKernelStateTest, FactoryOutsideARegistryUsesTheDefaults) {
  runtime::PrepareContext context;
  EXPECT_EQ(CpuKernelStateOf(context), nullptr);
  EXPECT_TRUE(CpuOptionsOf(context).conv_winograd);
  EXPECT_EQ(CpuOptionsOf(context).conv_chain_layout, ConvChainLayout::kAuto);
  EXPECT_EQ(ConvChainLayoutName(ConvChainLayout::kNhwc), "nhwc");
  EXPECT_EQ(*ParseConvChainLayout("auto"), ConvChainLayout::kAuto);
  EXPECT_FALSE(ParseConvChainLayout("nchw16c").ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
