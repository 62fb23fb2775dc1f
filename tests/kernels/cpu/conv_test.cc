// Conv and ConvTranspose against plain reference loops (tolerance 1e-4 absolute + 1e-4
// relative), with weights known and unknown at Prepare, concurrent Runs, and error cases.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "gtest/gtest.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "element " << i;
  }
}

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, MatchesReferenceWithKnownAndUnknownWeights) {
  const ConvCase p = GetParam();
  KernelHarness h;
  const auto x = RandomFloats(p.n * p.c * p.h * p.w, 1);
  const auto w = RandomFloats(p.m * (p.c / p.group) * p.kh * p.kw, 2);
  const auto b = RandomFloats(p.m, 3);
  const auto want = ReferenceConv(p, x, w, b);
  runtime::Attributes attrs =
      Attrs({{"group", p.group},
             {"strides", std::vector<int64_t>{p.stride_h, p.stride_w}},
             {"dilations", std::vector<int64_t>{p.dil_h, p.dil_w}},
             {"pads", std::vector<int64_t>{p.pad_t, p.pad_l, p.pad_b, p.pad_r}}});
  for (bool known : {false, true}) {
    SCOPED_TRACE(known ? "weights known at prepare" : "weights bound at run");
    std::vector<Tensor> in = {Tensor::Of<float>({p.n, p.c, p.h, p.w}, x),
                              Tensor::Of<float>({p.m, p.c / p.group, p.kh, p.kw}, w, known),
                              Tensor::Of<float>({p.m}, b, known)};
    auto out = h.Run("Conv", in, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    const int64_t oh = OutSize(p.h, p.kh, p.stride_h, p.dil_h, p.pad_t, p.pad_b);
    const int64_t ow = OutSize(p.w, p.kw, p.stride_w, p.dil_w, p.pad_l, p.pad_r);
    EXPECT_EQ((*out)[0].shape, (Shape{p.n, p.m, oh, ow}));
    ExpectNear((*out)[0].Values<float>(), want);
    // Without the optional bias.
    in.pop_back();
    out = h.Run("Conv", in, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), ReferenceConv(p, x, w, {}));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Values(ConvCase{1, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 2, 0, 1, 2, 0},      // groups
                      ConvCase{1, 8, 6, 6, 8, 3, 3, 8, 1, 1, 1, 1, 1, 1, 1, 1},      // depthwise
                      ConvCase{1, 32, 14, 14, 64, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1},  // blocked
                      ConvCase{1, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{1, 16, 5, 5, 16, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                      // 3x3 stride 1 with >= 196 output pixels: Winograd where oneDNN has it.
                      ConvCase{1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{2, 64, 10, 10, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{4, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                      // Taps that read only padding (dropped when the weights are known): all
                      // but the centre (atrous 3x3 at dilation 24 over 14x14); along H only,
                      // grouped and strided; and along W where dropping them would need a
                      // negative pad (kept).
                      ConvCase{1, 16, 14, 14, 8, 3, 3, 1, 1, 1, 24, 24, 24, 24, 24, 24},
                      ConvCase{1, 8, 5, 7, 6, 3, 3, 2, 2, 1, 6, 2, 6, 2, 6, 2},
                      ConvCase{1, 4, 6, 4, 4, 1, 5, 1, 1, 1, 1, 3, 0, 7, 0, 2},
                      // A reduction (C x taps) of at least 1536: with known weights, a 1x1
                      // convolution over the input gathered per tap where oneDNN's direct
                      // kernel is its AVX2 one (conv.h); batch 2, and strided along H or W,
                      // dilated, 3x2, with uneven pads.
                      ConvCase{2, 176, 6, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{1, 264, 9, 7, 72, 3, 2, 1, 2, 1, 2, 2, 2, 1, 0, 1},
                      ConvCase{1, 160, 5, 9, 64, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1, 2},
                      // Taps that mostly read padding (at most half of the tap-pixel pairs read
                      // X): with known weights, one product per tap over its region (conv.h, tap
                      // regions). Atrous 3x3 at dilation 12 over 14x14 (18% inside); batch 2,
                      // strided along H, dilated 5x4, 3x2, uneven pads (40%); 3x3 over 2x2 (44%).
                      ConvCase{1, 32, 14, 14, 24, 3, 3, 1, 1, 1, 12, 12, 12, 12, 12, 12},
                      ConvCase{2, 20, 9, 7, 16, 3, 2, 1, 2, 1, 5, 4, 5, 3, 4, 2},
                      ConvCase{1, 16, 2, 2, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                      // Where oneDNN's choice is its im2col-and-gemm convolution and tap regions
                      // do not pay (more of the window inside X, or fewer than 16 channels):
                      // the window gathered channels-last in one product per image. An 11x11
                      // stride-4 first layer of 3 channels; batch 2 of 8 channels at dilation 2.
                      ConvCase{1, 3, 27, 26, 16, 11, 11, 1, 4, 4, 1, 1, 2, 2, 2, 3},
                      ConvCase{2, 8, 12, 11, 16, 3, 3, 1, 1, 1, 4, 5, 4, 5, 4, 5},
                      // Groups narrower than a channel block (4 channels): with known weights,
                      // pairs of groups merged into one with block-diagonal weights where that
                      // gives whole blocks of 8 (conv.cc); 8 groups of 4 to 4, and batch 2 of
                      // 4 groups of 4 to 8, strided along H, dilated along W.
                      ConvCase{1, 32, 10, 10, 32, 3, 3, 8, 1, 1, 1, 1, 1, 1, 1, 1},
                      ConvCase{2, 16, 7, 9, 32, 3, 3, 4, 2, 1, 1, 2, 1, 2, 0, 1}),
    [](const ::testing::TestParamInfo<ConvCase>& param_info) {
      const ConvCase& p = param_info.param;
      return absl::StrCat("n", p.n, "c", p.c, "m", p.m, "k", p.kh, "x", p.kw, "g", p.group, "s",
                          p.stride_h, "d", p.dil_w, "_", param_info.index);
    });

TEST(ConvMiscTest, AutoPadSameUpperAndOneD) {
  KernelHarness h;
  // SAME_UPPER with stride 2 on 5: out 3, total pad 2 -> 1/1 for a 3-wide kernel.
  auto out =
      h.Run("Conv",
            {Tensor::Of<float>({1, 1, 5}, {1, 2, 3, 4, 5}),
             Tensor::Of<float>({1, 1, 3}, {1, 1, 1}, true)},
            Attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 9, 9}));
  // SAME_LOWER with a 2-wide kernel puts the single pad first.
  out = h.Run("Conv",
              {Tensor::Of<float>({1, 1, 4}, {1, 2, 3, 4}), Tensor::Of<float>({1, 1, 2}, {1, 10})},
              Attrs({{"auto_pad", std::string("SAME_LOWER")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{10, 21, 32, 43}));
}

TEST(ConvMiscTest, ThreeD) {
  KernelHarness h;
  const auto x = RandomFloats(2 * 3 * 3 * 3, 5);
  auto out = h.Run("Conv", {Tensor::Of<float>({1, 2, 3, 3, 3}, x),
                            Tensor::Of<float>({1, 2, 3, 3, 3}, std::vector<float>(54, 1.0f))});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape, (Shape{1, 1, 1, 1, 1}));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR((*out)[0].Values<float>()[0], sum, 1e-4);
}

TEST(ConvMiscTest, ConcurrentRunsOfOnePreparedKernel) {
  KernelHarness h;
  const ConvCase p{1, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto w = RandomFloats(32 * 16 * 9, 7);
  // Plan-time values must outlive the prepared kernel (TensorDesc::data is borrowed).
  const std::vector<Tensor> prepare_inputs = {
      Tensor::Of<float>({1, 16, 12, 12}, RandomFloats(16 * 144, 8)),
      Tensor::Of<float>({32, 16, 3, 3}, w, true)};
  auto kernel =
      h.Prepare("Conv", prepare_inputs, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<std::vector<float>> inputs, wants, gots(4);
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(RandomFloats(16 * 144, 100 + t));
    wants.push_back(ReferenceConv(p, inputs[t], w, {}));
  }
  std::vector<std::thread> threads;
  std::vector<absl::Status> statuses(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        auto out = h.RunPrepared(**kernel, {Tensor::Of<float>({1, 16, 12, 12}, inputs[t]),
                                            Tensor::Of<float>({32, 16, 3, 3}, w)});
        if (!out.ok()) {
          statuses[t] = out.status();
          return;
        }
        gots[t] = (*out)[0].Values<float>();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(statuses[t].ok()) << statuses[t];
    ExpectNear(gots[t], wants[t]);
  }
}

// A kernel keeps the oneDNN memory objects of its runs (ReusedMemories): a run on other
// buffers (an eager run, another instance) must read and write those, and leave the earlier
// run's output alone.
TEST(ConvMiscTest, RunsFollowTheirBuffersFromRunToRun) {
  KernelHarness h;
  const ConvCase p{1, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto w = RandomFloats(32 * 16 * 9, 21);
  const std::vector<Tensor> prepare_inputs = {Tensor::Of<float>({1, 16, 12, 12}, {}),
                                              Tensor::Of<float>({32, 16, 3, 3}, w, true)};
  auto kernel =
      h.Prepare("Conv", prepare_inputs, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const auto x1 = RandomFloats(16 * 144, 22), x2 = RandomFloats(16 * 144, 23);
  const auto want1 = ReferenceConv(p, x1, w, {}), want2 = ReferenceConv(p, x2, w, {});
  std::vector<float> y1(want1.size()), y2(want1.size()), y3(want1.size());
  ASSERT_TRUE(RunOnBuffers(**kernel, {x1.data(), w.data()}, y1.data()).ok());
  ExpectNear(y1, want1);
  ASSERT_TRUE(RunOnBuffers(**kernel, {x2.data(), w.data()}, y2.data()).ok());
  ExpectNear(y2, want2);
  ExpectNear(y1, want1);
  ASSERT_TRUE(RunOnBuffers(**kernel, {x1.data(), w.data()}, y3.data()).ok());
  ExpectNear(y3, want1);
  ExpectNear(y2, want2);
}

TEST(ReusedMemoriesTest, KeptFromRunToRunFollowingMovedBuffersAndOwnToConcurrentRuns) {
  const dnnl::memory::desc md({1, 24, 4, 4}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::nChw16c);
  std::vector<float> a(md.get_size() / 4), b(a.size()), c(a.size());
  ReusedMemories memories;
  dnnl_memory_t kept = nullptr;
  {
    ReusedMemories::Run run(memories);
    const dnnl::memory& m = run.Bind(0, md, a.data());
    EXPECT_EQ(m.get_data_handle(), a.data());
    EXPECT_EQ(m.get_desc(), md);
    kept = m.get();
  }
  {
    ReusedMemories::Run run(memories);
    EXPECT_EQ(run.Bind(0, md, a.data()).get(), kept);  // the same object
    const dnnl::memory& moved = run.Bind(0, md, b.data());
    EXPECT_EQ(moved.get(), kept);
    EXPECT_EQ(moved.get_data_handle(), b.data());
    // While this run holds the objects, a concurrent one binds its own.
    dnnl_memory_t other = nullptr;
    void* other_handle = nullptr;
    std::thread([&] {
      ReusedMemories::Run concurrent(memories);
      const dnnl::memory& m = concurrent.Bind(0, md, c.data());
      other = m.get();
      other_handle = m.get_data_handle();
    }).join();
    EXPECT_NE(other, kept);
    EXPECT_EQ(other_handle, c.data());
    EXPECT_EQ(moved.get_data_handle(), b.data());
  }
}

// Plans of one model share the weights packed from the same plan-time buffer: a kernel must
// keep computing after the first kernel that packed them is gone, and kernels for another batch
// size (another packed layout, for Winograd) get their own.
TEST(ConvMiscTest, PackedWeightsAreSharedAndOutliveTheirFirstKernel) {
  KernelHarness h;
  const auto w = RandomFloats(32 * 32 * 9, 11);
  const Tensor weights = Tensor::Of<float>({32, 32, 3, 3}, w, true);
  const runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  // Plan-time values outlive the kernels (TensorDesc::data is borrowed); the first two kernels
  // see the same weights buffer, as two plans of one model do.
  const std::vector<Tensor> batch1 = {Tensor::Of<float>({1, 32, 16, 16}, {}), weights};
  const std::vector<Tensor> batch4 = {Tensor::Of<float>({4, 32, 16, 16}, {}), weights};
  std::vector<std::unique_ptr<runtime::PreparedKernel>> kernels;
  for (const auto* inputs : {&batch1, &batch1, &batch4}) {
    auto kernel = h.Prepare("Conv", *inputs, attrs);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernels.push_back(std::move(kernel).value());
  }
  kernels[0].reset();
  for (int64_t n : {1, 4}) {
    SCOPED_TRACE(absl::StrCat("batch ", n));
    const ConvCase p{n, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const auto x = RandomFloats(n * 32 * 256, 12 + n);
    auto out =
        h.RunPrepared(*kernels[n == 1 ? 1 : 2], {Tensor::Of<float>({n, 32, 16, 16}, x), weights});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), ReferenceConv(p, x, w, {}));
  }
}

// kFusedConvDwOp (1x1 conv + Clip, then depthwise 3x3 + Relu) against the reference loops, for a
// small intermediate (two primitives) and one of >= 4 MiB (one primitive with oneDNN's
// depthwise post-op at one thread, the faster of that and two primitives at two), strides 1 and
// 2, with and without the depthwise bias.
TEST(ConvMiscTest, PointwiseThenDepthwiseMatchesReference) {
  KernelHarness h;
  struct Case {
    int64_t n, c_in, c, size, stride;
    bool dw_bias;
  };
  for (const Case& k : {Case{1, 8, 32, 10, 1, true}, Case{2, 8, 32, 9, 2, false},
                        Case{2, 8, 64, 96, 2, true}, Case{1, 16, 96, 112, 1, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << k.n << " c=" << k.c << " size=" << k.size << " stride=" << k.stride);
    const auto x = RandomFloats(k.n * k.c_in * k.size * k.size, 31);
    const auto w = RandomFloats(k.c * k.c_in, 32);
    const auto b = RandomFloats(k.c, 33);
    const auto w_dw = RandomFloats(k.c * 9, 34);
    const auto b_dw = RandomFloats(k.c, 35);
    const ConvCase pw{k.n, k.c_in, k.size, k.size, k.c, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    std::vector<float> mid = ReferenceConv(pw, x, w, b);
    for (float& v : mid) v = std::min(std::max(v, 0.0f), 6.0f);
    const ConvCase dw{k.n,      k.c,      k.size, k.size, k.c, 3, 3, k.c,
                      k.stride, k.stride, 1,      1,      1,   1, 1, 1};
    std::vector<float> want = ReferenceConv(dw, mid, w_dw, k.dw_bias ? b_dw : std::vector<float>{});
    for (float& v : want) v = std::max(v, 0.0f);
    std::vector<Tensor> in = {Tensor::Of<float>({k.n, k.c_in, k.size, k.size}, x),
                              Tensor::Of<float>({k.c, k.c_in, 1, 1}, w, true),
                              Tensor::Of<float>({k.c}, b, true),
                              Tensor::Of<float>({k.c, 1, 3, 3}, w_dw, true)};
    if (k.dw_bias) in.push_back(Tensor::Of<float>({k.c}, b_dw, true));
    const bool large = k.n * k.c * k.size * k.size * 4 >= (int64_t{4} << 20);
    bool one_primitive = false;  // at one thread (two primitives name both: "a + b")
    for (int threads : {1, 2}) {
      auto kernel = h.Prepare(kFusedConvDwOp, in,
                              Attrs({{"activation", std::string("Clip")},
                                     {"clip_min", 0.0f},
                                     {"clip_max", 6.0f},
                                     {"dw_stride", k.stride},
                                     {"dw_activation", std::string("Relu")}}),
                              17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      if (threads == 1) {
        one_primitive = (*kernel)->implementation().find(" + ") == std::string::npos;
        // Small intermediates always run as two; large ones as one where oneDNN has the fused
        // form (not where it is capped at SSE4.1).
        if (!large) {
          EXPECT_FALSE(one_primitive) << (*kernel)->implementation();
        }
      }
      // A large intermediate on two threads, where oneDNN has the fused form: the faster of one
      // primitive and two, chosen by timed runs; six runs take each way (two untimed runs, two
      // timed runs each). Whether it has the fused form on two threads as well as on one depends
      // on the CPU (an Intel Xeon with AMX had it on one thread only): then two primitives.
      const std::string& implementation = (*kernel)->implementation();
      const bool chooses = implementation.find("faster by timed runs") != std::string::npos;
      if (!one_primitive || threads == 1) {
        EXPECT_FALSE(chooses) << implementation;
      } else if (!chooses) {
        EXPECT_NE(implementation.find(" + "), std::string::npos) << implementation;
      }
      for (int run = 0; run < (chooses ? 6 : 1); ++run) {
        auto out = h.RunPrepared(**kernel, in);
        ASSERT_TRUE(out.ok()) << out.status();
        const int64_t o = (k.size - 1) / k.stride + 1;
        EXPECT_EQ((*out)[0].shape, (Shape{k.n, k.c, o, o}));
        ExpectNear((*out)[0].Values<float>(), want);
      }
    }
  }
  // Weights that are not 1x1 / depthwise 3x3 are refused with the shapes.
  auto bad = h.Run(kFusedConvDwOp,
                   {Tensor::Of<float>({1, 4, 5, 5}, RandomFloats(100, 1)),
                    Tensor::Of<float>({4, 4, 3, 3}, RandomFloats(144, 2), true), Tensor::Absent(),
                    Tensor::Of<float>({4, 1, 3, 3}, RandomFloats(36, 3), true)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[4,4,3,3]"), std::string::npos) << bad.status();
}

// A 3x3 stride-1 convolution with SiLU, hard-swish, GELU or tanh fused, at one and two threads:
// where oneDNN's Winograd takes no such post-op the kernel runs Winograd and the activation after
// it (the implementation then names Winograd; the values must match either way), into a plain
// output and into a blocked one whose padding channels (20 of 32) must stay zero.
TEST(ConvMiscTest, ActivationsWinogradCannotFuseMatchReference) {
  KernelHarness h;
  const ConvCase p{1, 16, 18, 18, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto x = RandomFloats(16 * 18 * 18, 81);
  const auto w = RandomFloats(20 * 16 * 9, 82);
  const auto b = RandomFloats(20, 83);
  const std::vector<float> conv = ReferenceConv(p, x, w, b);
  for (const std::string act : {"Swish", "HardSwish", "Gelu", "Tanh"}) {
    std::vector<float> want = conv;
    for (float& v : want) {
      if (act == "Tanh") v = std::tanh(v);
      if (act == "Swish") v = v / (1.0f + std::exp(-v));
      if (act == "HardSwish") v = v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f));
      if (act == "Gelu") v = 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f)));
    }
    const std::vector<Tensor> in = {Tensor::Of<float>({1, 16, 18, 18}, x),
                                    Tensor::Of<float>({20, 16, 3, 3}, w, true),
                                    Tensor::Of<float>({20}, b, true)};
    for (int threads : {1, 2}) {
      SCOPED_TRACE(act + " threads " + std::to_string(threads));
      auto kernel = h.Prepare(
          kFusedConvOp, in,
          Attrs({{"activation", act}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}), 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto out = h.RunPrepared(**kernel, in);
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectNear((*out)[0].Values<float>(), want);
      // The same into the blocked layout (channel blocks of 16: 12 padding channels).
      auto blocked = h.Prepare(kFusedConvOp, in,
                               Attrs({{"activation", act},
                                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                      {"y_layout", std::string("blocked")}}),
                               17, 1, threads);
      ASSERT_TRUE(blocked.ok()) << blocked.status();
      const size_t floats = (*blocked)->output_storage_bytes(0) / sizeof(float);
      std::vector<float> stored(floats, 1.0f);
      std::vector<const void*> ins = {in[0].bytes.data(), in[1].bytes.data(), in[2].bytes.data()};
      ASSERT_TRUE(RunOnBuffers(**blocked, ins, stored.data()).ok());
      // nChw16c or nChw8c: element (c, i, j) of one image lies at block c / B, then i, j, c % B;
      // channels-last (the chain layout where oneDNN has no blocked code, e.g. capped at SSE4.1)
      // is one block of all 20 channels.
      const int64_t per_pixel = static_cast<int64_t>(floats) / (18 * 18);
      const int64_t block = per_pixel == 20 ? 20 : per_pixel >= 32 ? 16 : 8;
      const int64_t padded = (20 + block - 1) / block * block;
      ASSERT_EQ(static_cast<int64_t>(floats), padded * 18 * 18);
      for (int64_t c = 0; c < padded; ++c) {
        for (int64_t i = 0; i < 18 * 18; ++i) {
          const float v = stored[(c / block) * 18 * 18 * block + i * block + c % block];
          if (c < 20) {
            ASSERT_NEAR(v, want[c * 18 * 18 + i], 1e-4 + 1e-4 * std::fabs(want[c * 18 * 18 + i]))
                << "channel " << c << " pixel " << i;
          } else {
            ASSERT_EQ(v, 0.0f) << "padding channel " << c;
          }
        }
      }
    }
  }
}

// A network's first convolution (3 input channels) 3x3 at stride 1, over enough pixels for
// Winograd: it stays direct (Winograd's transforms would pad the channels to a whole block),
// into a plain and a blocked output, with the values of the reference. Skipped where the same
// convolution of 16 input channels does not run Winograd either (oneDNN 2.6 has none without
// AVX-512), since the choice is then never made.
TEST(ConvMiscTest, FewInputChannelsStayDirect) {
  KernelHarness h;
  const std::vector<Tensor> wide = {
      Tensor::Of<float>({4, 16, 32, 32}, RandomFloats(4 * 16 * 32 * 32, 110)),
      Tensor::Of<float>({16, 16, 3, 3}, RandomFloats(16 * 16 * 9, 109), true)};
  auto winograd =
      h.Prepare(kFusedConvOp, wide, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ASSERT_TRUE(winograd.ok()) << winograd.status();
  const bool has_winograd = (*winograd)->implementation().find("wino") != std::string::npos;
  const ConvCase p{4, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto x = RandomFloats(4 * 3 * 32 * 32, 111);
  const auto w = RandomFloats(16 * 3 * 9, 112);
  const auto b = RandomFloats(16, 113);
  const std::vector<Tensor> in = {Tensor::Of<float>({4, 3, 32, 32}, x),
                                  Tensor::Of<float>({16, 3, 3, 3}, w, true),
                                  Tensor::Of<float>({16}, b, true)};
  for (const std::string layout : {"", "blocked"}) {
    SCOPED_TRACE("y_layout " + layout);
    runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    if (!layout.empty()) attrs.Set("y_layout", layout);
    auto kernel = h.Prepare(kFusedConvOp, in, attrs);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ((*kernel)->implementation().find("wino"), std::string::npos)
        << (*kernel)->implementation();
    if (!layout.empty()) continue;  // values compared in the plain layout
    auto out = h.RunPrepared(**kernel, in);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), ReferenceConv(p, x, w, b));
  }
  if (!has_winograd) GTEST_SKIP() << "no Winograd here: " << (*winograd)->implementation();
}

// Tanh, SiLU and GELU, which oneDNN's direct convolutions take slowly as post-ops, run after the
// primitive (a 5x5 convolution, no Winograd, and a 1x1 one) over the plain output, with a
// residual (then they stay post-ops: the residual is added before them), at one and two threads.
TEST(ConvMiscTest, SlowActivationsAfterThePrimitiveMatchReference) {
  KernelHarness h;
  for (const int64_t k : {5, 1}) {
    const int64_t pad = k / 2;
    const ConvCase p{2, 3, 13, 11, 12, k, k, 1, 1, 1, 1, 1, pad, pad, pad, pad};
    const auto x = RandomFloats(2 * 3 * 13 * 11, 91);
    const auto w = RandomFloats(12 * 3 * k * k, 92);
    const auto b = RandomFloats(12, 93);
    const auto r = RandomFloats(2 * 12 * 13 * 11, 94);
    const std::vector<float> conv = ReferenceConv(p, x, w, b);
    for (const std::string act : {"Tanh", "Swish", "Gelu"}) {
      for (bool residual : {false, true}) {
        std::vector<float> want = conv;
        for (size_t i = 0; i < want.size(); ++i) {
          const float v = want[i] + (residual ? r[i] : 0);
          want[i] = act == "Tanh"    ? std::tanh(v)
                    : act == "Swish" ? v / (1.0f + std::exp(-v))
                                     : 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f)));
        }
        std::vector<Tensor> in = {Tensor::Of<float>({2, 3, 13, 11}, x),
                                  Tensor::Of<float>({12, 3, k, k}, w, true),
                                  Tensor::Of<float>({12}, b, true)};
        if (residual) in.push_back(Tensor::Of<float>({2, 12, 13, 11}, r));
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << act << " " << k << "x" << k << " residual "
                                            << residual << " threads " << threads);
          auto kernel = h.Prepare(
              kFusedConvOp, in,
              Attrs({{"activation", act}, {"pads", std::vector<int64_t>{pad, pad, pad, pad}}}), 17,
              1, threads);
          ASSERT_TRUE(kernel.ok()) << kernel.status();
          auto out = h.RunPrepared(**kernel, in);
          ASSERT_TRUE(out.ok()) << out.status();
          ExpectNear((*out)[0].Values<float>(), want);
        }
      }
    }
  }
}

// A 1x1 convolution with plain ends (a value that only part of a chain reads): the kernel runs the
// primitive it would run with blocked ends, reordering each end, where oneDNN's own choice for
// free ends is its channels-last brgemm kernel on AVX-512 (yolo_style at batch 8: plain to
// channels-last 2-4x the time of plain to blocked). With the values of the reference.
TEST(ConvMiscTest, PlainEndsTakeTheBlockedKernel) {
  KernelHarness h;
  const ConvCase p{8, 192, 20, 20, 128, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  const auto x = RandomFloats(8 * 192 * 20 * 20, 121);
  const auto w = RandomFloats(128 * 192, 122);
  const auto b = RandomFloats(128, 123);
  const std::vector<Tensor> in = {Tensor::Of<float>({8, 192, 20, 20}, x),
                                  Tensor::Of<float>({128, 192, 1, 1}, w, true),
                                  Tensor::Of<float>({128}, b, true)};
  runtime::Attributes blocked_ends = Attrs({});
  blocked_ends.Set("x_layout", std::string("blocked"));
  blocked_ends.Set("y_layout", std::string("blocked"));
  auto blocked = h.Prepare(kFusedConvOp, in, blocked_ends, 17, 1, 2);
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  auto plain = h.Prepare(kFusedConvOp, in, Attrs({}), 17, 1, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->implementation(), (*blocked)->implementation());
  auto out = h.RunPrepared(**plain, in);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), ReferenceConv(p, x, w, b));
}

// A convolution run once (computed when planning) takes Winograd only over a large output: its
// weight transform would cost more than it saves on 2 x 14 x 14 pixels, not on 2 x 64 x 64.
TEST(ConvMiscTest, AConvolutionRunOnceTakesWinogradOnlyOverALargeOutput) {
  KernelHarness h;
  int checked = 0;
  for (const int64_t size : {14, 64}) {
    SCOPED_TRACE(size);
    const ConvCase p{2, 32, size, size, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const auto x = RandomFloats(2 * 32 * size * size, 131);
    const auto w = RandomFloats(32 * 32 * 9, 132);
    const auto b = RandomFloats(32, 133);
    const std::vector<Tensor> in = {Tensor::Of<float>({2, 32, size, size}, x),
                                    Tensor::Of<float>({32, 32, 3, 3}, w, true),
                                    Tensor::Of<float>({32}, b, true)};
    const runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    auto many = h.Prepare("Conv", in, attrs, 17, 1, 1, false);
    ASSERT_TRUE(many.ok()) << many.status();
    const std::string all = (*many)->implementation();
    if (!absl::StrContains(all, "wino")) continue;  // none on this CPU
    ++checked;
    // Our own Winograd of so few channels only races the direct kernel: never for one run.
    const bool raced_ours =
        absl::StrContains(all, "winograd F(2x2,3x3)") && absl::StrContains(all, "timed runs");
    auto once = h.Prepare("Conv", in, attrs, 17, 1, 1, true);
    ASSERT_TRUE(once.ok()) << once.status();
    EXPECT_EQ(absl::StrContains((*once)->implementation(), "wino"), size == 64 && !raced_ours)
        << (*once)->implementation();
    auto out = h.RunPrepared(**once, in);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), ReferenceConv(p, x, w, b));
  }
  if (checked == 0) GTEST_SKIP() << "no Winograd convolution on this CPU";
}

// A depthwise convolution whose input is stored in the blocked layout and whose output is plain
// (MobileNet's and EfficientNet's depthwise convolutions before a squeeze-and-excitation):
// oneDNN 2.6 has only its reference code for a free destination there, so the kernel asks for
// the blocked layout at both ends and reorders only the output. Going channels-last instead
// would copy the input and the output through the workspace (twice the input's bytes).
TEST(ConvMiscTest, DepthwiseReadsABlockedInputInPlace) {
  KernelHarness h;
  const int64_t c = 32, size = 20;
  const std::vector<Tensor> in = {Tensor::Of<float>({1, c, size, size}, {}),
                                  Tensor::Of<float>({c, 1, 3, 3}, RandomFloats(c * 9, 41), true),
                                  Tensor::Of<float>({c}, RandomFloats(c, 42), true)};
  runtime::Attributes attrs = Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", c}});
  attrs.Set("x_layout", std::string("blocked"));
  auto kernel = h.Prepare(kFusedConvOp, in, attrs);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string impl = (*kernel)->implementation();
  EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
  if ((*kernel)->output_storage_bytes(0) != static_cast<size_t>(c * size * size) * sizeof(float)) {
    GTEST_SKIP() << "unexpected output storage";
  }
  EXPECT_LT((*kernel)->workspace_bytes(), 2 * static_cast<size_t>(c * size * size) * sizeof(float))
      << impl;
}

// A 1-D convolution's value between convolutions: "nhwc" stores it channels-last (nwc),
// "blocked" in channel blocks over its one axis (nCw16c or nCw8c, padding channels past 20),
// each element where that layout puts it.
TEST(ConvMiscTest, OneDimensionalValuesStoreChannelsLastOrBlocked) {
  KernelHarness h;
  const int64_t c = 16, m = 20, len = 30;
  const std::vector<Tensor> in = {Tensor::Of<float>({1, c, len}, RandomFloats(c * len, 71)),
                                  Tensor::Of<float>({m, c, 1}, RandomFloats(m * c, 72), true),
                                  Tensor::Of<float>({m}, RandomFloats(m, 73), true)};
  auto plain = h.Prepare(kFusedConvOp, in, Attrs({}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto want = h.RunPrepared(**plain, in);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> y = (*want)[0].Values<float>();
  for (const std::string layout : {"nhwc", "blocked"}) {
    SCOPED_TRACE(layout);
    auto kernel = h.Prepare(kFusedConvOp, in, Attrs({{"y_layout", layout}}));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const size_t floats = (*kernel)->output_storage_bytes(0) / sizeof(float);
    std::vector<float> stored(floats, 1.0f);
    std::vector<const void*> ins = {in[0].bytes.data(), in[1].bytes.data(), in[2].bytes.data()};
    ASSERT_TRUE(RunOnBuffers(**kernel, ins, stored.data()).ok());
    // Channels-last is one block of all 20 channels (also "blocked" where oneDNN has neither
    // AVX2 nor AVX-512 code); else blocks of 16 (AVX-512) or 8 (AVX2).
    const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
    const auto has = [&](dnnl::cpu_isa level) {
      return (isa & static_cast<int>(level)) == static_cast<int>(level);
    };
    const int64_t block = layout == "nhwc"                  ? m
                          : has(dnnl::cpu_isa::avx512_core) ? 16
                          : has(dnnl::cpu_isa::avx2)        ? 8
                                                            : m;
    ASSERT_EQ(static_cast<int64_t>(floats), (m + block - 1) / block * block * len);
    for (int64_t ch = 0; ch < m; ++ch) {
      for (int64_t l = 0; l < len; ++l) {
        const float got = stored[(ch / block * len + l) * block + ch % block];
        ASSERT_NEAR(got, y[ch * len + l], 1e-4f) << "channel " << ch << " position " << l;
      }
    }
  }
}

TEST(ConvMiscTest, ErrorsNameTheNodeAndShapes) {
  KernelHarness h;
  auto bad_channels =
      h.Prepare("Conv", {Tensor::Of<float>({1, 3, 5, 5}, {}), Tensor::Of<float>({4, 2, 3, 3}, {})});
  ASSERT_FALSE(bad_channels.ok());
  EXPECT_EQ(bad_channels.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_channels.status().message().find("Conv \"node\""), std::string::npos);
  EXPECT_NE(bad_channels.status().message().find("[4,2,3,3]"), std::string::npos);
  auto too_big =
      h.Prepare("Conv", {Tensor::Of<float>({1, 1, 2, 2}, {}), Tensor::Of<float>({1, 1, 3, 3}, {})});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  auto ints = h.Prepare(
      "Conv", {Tensor::Of<int64_t>({1, 1, 3, 3}, {}), Tensor::Of<int64_t>({1, 1, 1, 1}, {})});
  EXPECT_EQ(ints.status().code(), absl::StatusCode::kUnimplemented);
  auto bad_bias =
      h.Prepare("Conv", {Tensor::Of<float>({1, 1, 3, 3}, {}), Tensor::Of<float>({2, 1, 1, 1}, {}),
                         Tensor::Of<float>({3}, {})});
  EXPECT_EQ(bad_bias.status().code(), absl::StatusCode::kInvalidArgument);
  // A group whose product with the weights' channels overflows (a model file's attribute):
  // refused, not multiplied.
  const int64_t huge = int64_t{1} << 62;
  auto huge_group =
      h.Prepare("ConvTranspose",
                {Tensor::Of<float>({1, huge, 1, 1}, {}), Tensor::Of<float>({huge, 4, 1, 1}, {})},
                Attrs({{"group", huge}}));
  EXPECT_EQ(huge_group.status().code(), absl::StatusCode::kInvalidArgument);
  auto huge_conv_group = h.Prepare(
      "Conv", {Tensor::Of<float>({1, 2, 1, 1}, {}), Tensor::Of<float>({huge, 4, 1, 1}, {})},
      Attrs({{"group", huge}}));
  EXPECT_EQ(huge_conv_group.status().code(), absl::StatusCode::kInvalidArgument);
}

// Every kernel that `kernel` may run: the ways of its FasterOf choices, nested, or itself.
std::vector<const runtime::PreparedKernel*> EveryWay(const runtime::PreparedKernel& kernel) {
  std::vector<const runtime::PreparedKernel*> runs, pending = {&kernel};
  while (!pending.empty()) {
    const runtime::PreparedKernel* next = pending.back();
    pending.pop_back();
    const auto ways = FasterOfWays(*next);
    if (ways[0] == nullptr) {
      runs.push_back(next);
    } else {
      pending.insert(pending.end(), ways.begin(), ways.end());
    }
  }
  return runs;
}

// Reference ConvTranspose 2-D, weights [C, M/group, KH, KW], over windows that overlap (strides
// under the kernel, padding, output padding), that tile the output (strides equal to the kernel:
// one tap per output, written once), and that leave gaps (strides over the kernel); batch 2 and
// 5 (products of an image and a group split over the threads), with and without bias, one and
// two threads; images sharing one GEMM in chunks, the last one short; constant weights packed.
TEST(ConvTransposeTest, MatchesScatterReference) {
  KernelHarness h;
  struct Case {
    int64_t n, c, ih, iw, group, mg, kh, kw, sh, sw, pt, pl, pb, pr, oph, opw;
    bool bias;
    int threads;
    bool constant_weights = false;  // known at prepare: packed once where that pays
  };
  const Case cases[] = {
      {1, 4, 3, 4, 2, 3, 3, 2, 2, 3, 1, 0, 0, 1, 1, 0, true, 1},    // overlapping, padded
      {2, 6, 5, 7, 1, 20, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, true, 2},   // 2x2 / 2 tiles the output
      {2, 4, 3, 5, 2, 18, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, true, 2},   // 3x3 / 3 tiles
      {1, 3, 4, 3, 1, 17, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, 2},   // output padding: a gap row
      {1, 2, 3, 3, 1, 5, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, false, 1},   // gaps, no bias
      {1, 2, 3, 4, 1, 16, 2, 2, 2, 2, 1, 0, 0, 1, 0, 0, true, 2},   // 2x2 / 2 padded: not tiled
      {5, 6, 4, 5, 3, 4, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, true, 2},    // 15 small products
      {4, 16, 8, 8, 1, 16, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, true, 2},  // 4 split over 2 threads
      {4, 16, 8, 8, 2, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, 2},   // 8 split, overlapping
      // Images share a GEMM up to 256 columns: 3 + 2 images of 100 per group, split over 2
      // threads; 4 + 3 images of 81 on one thread; 272 columns each, one GEMM per image.
      {5, 4, 10, 10, 2, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, 2},
      {7, 2, 9, 9, 1, 5, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, false, 1},
      {3, 3, 16, 17, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, true, 1},
      // Constant weights of 2^18 values over 16 positions: the packed product, columns
      // position by position, overlapping windows and tiles, one and two threads.
      {2, 256, 4, 4, 1, 64, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, true, 2, true},
      {3, 256, 4, 4, 1, 256, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, false, 1, true},
      // 90 positions: two images per packed product, then one.
      {3, 256, 9, 10, 1, 256, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, true, 2, true},
      // oneDNN's deconvolution races too (constant weights and bias): a generator's first layer
      // (one input position), and uneven pads with output padding (its right padding then
      // absorbs the output padding).
      {2, 100, 1, 1, 1, 32, 4, 4, 1, 1, 0, 0, 0, 0, 0, 0, true, 1, true},
      {1, 16, 5, 6, 1, 24, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, true, 2, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "case kernel " << k.kh << "x" << k.kw << " stride " << k.sh << "x" << k.sw
                 << " group " << k.group << " threads " << k.threads);
    const int64_t oh = k.sh * (k.ih - 1) + k.oph + k.kh - k.pt - k.pb;
    const int64_t ow = k.sw * (k.iw - 1) + k.opw + k.kw - k.pl - k.pr;
    const int64_t m_all = k.group * k.mg, cg = k.c / k.group;
    const auto x = RandomFloats(k.n * k.c * k.ih * k.iw, 11);
    const auto w = RandomFloats(k.c * k.mg * k.kh * k.kw, 12);
    const auto b = RandomFloats(m_all, 13);
    std::vector<double> want(k.n * m_all * oh * ow, 0.0);
    for (int64_t i = 0; i < k.n * m_all * oh * ow; ++i)
      want[i] = k.bias ? b[i / (oh * ow) % m_all] : 0;
    for (int64_t img = 0; img < k.n; ++img)
      for (int64_t ci = 0; ci < k.c; ++ci)
        for (int64_t m = 0; m < k.mg; ++m)
          for (int64_t y = 0; y < k.ih; ++y)
            for (int64_t xx = 0; xx < k.iw; ++xx)
              for (int64_t ki = 0; ki < k.kh; ++ki)
                for (int64_t kj = 0; kj < k.kw; ++kj) {
                  const int64_t oy = y * k.sh - k.pt + ki, ox = xx * k.sw - k.pl + kj;
                  if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                  want[((img * m_all + ci / cg * k.mg + m) * oh + oy) * ow + ox] +=
                      x[((img * k.c + ci) * k.ih + y) * k.iw + xx] *
                      w[((ci * k.mg + m) * k.kh + ki) * k.kw + kj];
                }
    std::vector<Tensor> inputs = {
        Tensor::Of<float>({k.n, k.c, k.ih, k.iw}, x),
        Tensor::Of<float>({k.c, k.mg, k.kh, k.kw}, w, k.constant_weights)};
    if (k.bias) inputs.push_back(Tensor::Of<float>({m_all}, b, k.constant_weights));
    auto kernel = h.Prepare("ConvTranspose", inputs,
                            Attrs({{"group", k.group},
                                   {"kernel_shape", std::vector<int64_t>{k.kh, k.kw}},
                                   {"strides", std::vector<int64_t>{k.sh, k.sw}},
                                   {"pads", std::vector<int64_t>{k.pt, k.pl, k.pb, k.pr}},
                                   {"output_padding", std::vector<int64_t>{k.oph, k.opw}}}),
                            17, 1, k.threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    // With constant weights, the kernel times the packed product against sgemm's, and the
    // faster of ours against oneDNN's deconvolution where it has one (FasterOf): every way.
    if (!k.constant_weights) {
      EXPECT_EQ(FasterOfWays(**kernel)[0], nullptr);
    }
    const std::vector<const runtime::PreparedKernel*> runs = EveryWay(**kernel);
    // (oneDNN 2.6's direct deconvolution kernels are AVX2's and AVX-512's.)
    if (k.constant_weights && k.group == 1 && OwnCopyLevel() >= 1) {
      EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [](const runtime::PreparedKernel* r) {
        return absl::StartsWith(r->implementation(), "onednn deconvolution");
      }));
    }
    for (const runtime::PreparedKernel* run : runs) {
      SCOPED_TRACE(run->implementation());
      auto out = h.RunPrepared(*run, inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].shape, (Shape{k.n, m_all, oh, ow}));
      std::vector<float> want_f(want.begin(), want.end());
      ExpectNear((*out)[0].Values<float>(), want_f);
    }
  }
}

// The fused form (a decoder's ConvTranspose → activation): on every way it may run (our GEMM
// and scatter, over overlapping windows and tiles, the packed product, oneDNN's deconvolution
// with the activation after it), the plain ConvTranspose's output with the activation applied;
// an unknown activation is refused.
TEST(ConvTransposeTest, FusedActivationOnEveryWay) {
  KernelHarness h;
  struct Case {
    int64_t n, c, size, mg, k, stride, pad;
    bool constant_weights;
  };
  const Case cases[] = {
      {1, 8, 4, 16, 4, 2, 1, true},    // a generator's 4x4 / 2: oneDNN and packed race ours
      {2, 6, 5, 5, 2, 2, 0, false},    // tiles, one way
      {1, 256, 4, 32, 4, 2, 1, true},  // packed product
      {3, 4, 3, 3, 3, 1, 1, false},    // overlapping, several products
  };
  struct Act {
    const char* name;
    float alpha, beta;
    float (*f)(float, float, float);
  };
  const Act acts[] = {
      {"Relu", 0, 0, [](float v, float, float) { return std::max(v, 0.0f); }},
      {"LeakyRelu", 0.1f, 0, [](float v, float a, float) { return v >= 0 ? v : a * v; }},
      {"Tanh", 0, 0, [](float v, float, float) { return std::tanh(v); }},
      {"Swish", 0, 0, [](float v, float, float) { return v / (1.0f + std::exp(-v)); }},
      {"Sigmoid", 0, 0, [](float v, float, float) { return 1.0f / (1.0f + std::exp(-v)); }},
      {"HardSigmoid", 0.2f, 0.5f,
       [](float v, float a, float b) { return std::clamp(a * v + b, 0.0f, 1.0f); }},
  };
  for (const Case& k : cases) {
    const int64_t out = (k.size - 1) * k.stride + k.k - 2 * k.pad;
    const std::vector<Tensor> inputs = {
        Tensor::Of<float>({k.n, k.c, k.size, k.size},
                          RandomFloats(k.n * k.c * k.size * k.size, 21)),
        Tensor::Of<float>({k.c, k.mg, k.k, k.k},
                          RandomFloats(k.c * k.mg * k.k * k.k, 22, -0.3f, 0.3f),
                          k.constant_weights),
        Tensor::Of<float>({k.mg}, RandomFloats(k.mg, 23), k.constant_weights)};
    const runtime::Attributes geometry =
        Attrs({{"kernel_shape", std::vector<int64_t>{k.k, k.k}},
               {"strides", std::vector<int64_t>{k.stride, k.stride}},
               {"pads", std::vector<int64_t>{k.pad, k.pad, k.pad, k.pad}}});
    auto plain = h.Run("ConvTranspose", inputs, geometry);
    ASSERT_TRUE(plain.ok()) << plain.status();
    const std::vector<float> conv = (*plain)[0].Values<float>();
    for (const Act& act : acts) {
      SCOPED_TRACE(::testing::Message()
                   << act.name << " over " << k.c << "x" << k.size << "x" << k.size << " -> "
                   << k.mg << ", " << k.k << "/" << k.stride);
      runtime::Attributes attrs = geometry;
      attrs.Set("activation", std::string(act.name));
      attrs.Set("activation_alpha", act.alpha);
      attrs.Set("activation_beta", act.beta);
      auto kernel = h.Prepare(kFusedConvTransposeOp, inputs, attrs, 17, 1, 2);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      std::vector<float> want(conv.size());
      for (size_t i = 0; i < conv.size(); ++i) want[i] = act.f(conv[i], act.alpha, act.beta);
      const std::vector<const runtime::PreparedKernel*> runs = EveryWay(**kernel);
      if (k.constant_weights && OwnCopyLevel() >= 1) {
        EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [](const runtime::PreparedKernel* r) {
          return absl::StartsWith(r->implementation(), "onednn deconvolution");
        }));
      }
      for (const runtime::PreparedKernel* run : runs) {
        SCOPED_TRACE(run->implementation());
        EXPECT_EQ(run->op(), kFusedConvTransposeOp);
        auto got = h.RunPrepared(*run, inputs);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ((*got)[0].shape, (Shape{k.n, k.mg, out, out}));
        ExpectNear((*got)[0].Values<float>(), want);
      }
    }
  }
  runtime::Attributes unknown;
  unknown.Set("activation", std::string("Softplus"));
  auto refused = h.Prepare(
      kFusedConvTransposeOp,
      {Tensor::Of<float>({1, 2, 2, 2}, {}), Tensor::Of<float>({2, 3, 2, 2}, {})}, unknown);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("Softplus"), std::string::npos);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
