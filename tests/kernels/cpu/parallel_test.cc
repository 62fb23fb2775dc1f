// Intra-op parallelism of the CPU kernels' own loops (kernel_util.h, ParallelFor): every range
// covered once, never more threads than asked, small work serial, and kernels prepared with
// several threads giving the same bits as with one.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu {
namespace {

using testing::Attrs;
using testing::KernelHarness;
using testing::RandomFloats;
using testing::StoreInLanes;
using testing::Tensor;

TEST(ParallelForTest, CoversEveryIndexOnceWithinTheThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{100'003}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::set<int> ids;
      int calls = 0;
      ParallelFor(n, threads, 64.0, [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(omp_get_thread_num());
        ++calls;
        // Bounds are multiples of the grain (16) except the end.
        EXPECT_EQ(begin % 16, 0);
        EXPECT_TRUE(end == n || end % 16 == 0);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
      EXPECT_LE(calls, threads);
      EXPECT_LE(static_cast<int>(ids.size()), threads);
    }
  }
}

// ParallelCopy: every byte where it belongs, nothing past the end, for sizes below, at and
// past the 64 KiB pieces' split (an odd tail included), on one to three threads.
TEST(ParallelForTest, ParallelCopyCopiesEveryByteAndNoMore) {
  for (int threads : {1, 2, 3}) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{65536}, size_t{131072}, size_t{200'003},
                         size_t{1'048'577}}) {
      SCOPED_TRACE(::testing::Message() << bytes << " bytes, " << threads << " threads");
      std::vector<uint8_t> src(bytes), dst(bytes + 64, 0xEE);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + i / 65536);
      ParallelCopy(dst.data(), src.data(), bytes, threads);
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i], src[i]) << "byte " << i;
      for (size_t i = bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "past the end " << i;
    }
  }
}

TEST(ParallelForTest, SmallWorkStaysOnTheCallingThread) {
  int calls = 0;
  bool in_parallel = true;
  // 1000 items x 1 ns is far below kMinParallelWork.
  ParallelFor(1000, 8, 1.0, [&](int64_t begin, int64_t end) {
    ++calls;
    in_parallel = omp_in_parallel() != 0;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(in_parallel);
}

// Items that cost a row or a plane each are handed out one at a time: 16 of them (fewer than
// the default grain) still go to two threads, and three items to three.
TEST(ParallelForTest, CoarseItemsSplitBelowTheGrain) {
  for (const auto& [n, threads] : {std::pair<int64_t, int>{16, 2}, {3, 3}}) {
    std::mutex mu;
    std::set<int> ids;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    ParallelFor(n, threads, kCoarseItemCost * 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(omp_get_thread_num());
    });
    EXPECT_EQ(static_cast<int>(ids.size()), threads) << n << " items";
    for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

// ParallelTeam names the number of ranges ParallelFor hands out (each range on its own thread):
// one per kMinParallelWork of work (8192), at most one per grain (one per item from
// kCoarseItemCost) and never more than the threads asked for.
TEST(ParallelForTest, TeamIsTheNumberOfRangesRun) {
  struct Case {
    int64_t n;
    int threads;
    double cost;
    int team;
  };
  for (const Case& c : {Case{1000, 8, 1.0, 1},                // 1000 ns of work
                        Case{100'000, 2, 1.0, 2},             // 12 by work, 2 threads
                        Case{30'000, 8, 1.0, 3},              // 3 by work
                        Case{40, 8, 1100.0, 5},               // coarse: 5 by work
                        Case{3, 8, kCoarseItemCost * 64, 3},  // one per item
                        Case{20, 8, 1200.0, 2},               // 20 items, but 24000 ns: 2
                        Case{48, 8, 1000.0, 3},               // 5 by work, 3 grains of 16
                        Case{10, 8, 1000.0, 1},               // 10000 ns of work
                        Case{256, 2, 192.0, 2},               // a GRU step of 256 units, one entry
                        Case{512, 2, 512.0, 2},               // an LSTM step of 512 units
                        Case{0, 4, 1e9, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << "n " << c.n << " threads " << c.threads << " cost " << c.cost);
    EXPECT_EQ(ParallelTeam(c.n, c.threads, c.cost), c.team);
    std::atomic<int> ranges{0};
    ParallelFor(c.n, c.threads, c.cost, [&](int64_t, int64_t) { ranges.fetch_add(1); });
    EXPECT_EQ(ranges.load(), c.n > 0 ? c.team : 0);
  }
}

// A kernel's own min_work: one range per min_work of work instead of per kMinParallelWork (the
// small product kernel's 1 x 256 by 256 x 1024, 32 ranges of 384 ns, at half the default).
TEST(ParallelForTest, MinWorkSetsTheWorkPerRange) {
  EXPECT_EQ(ParallelTeam(32, 2, 384.0, 1), 1);
  EXPECT_EQ(ParallelTeam(32, 2, 384.0, 1, kMinParallelWork / 2), 2);
  EXPECT_EQ(ParallelTeam(32, 8, 384.0, 1, kMinParallelWork / 2), 3);
  EXPECT_EQ(ParallelTeam(32, 8, 384.0, 1, 0.0), 8);  // at least 1 ns a range
  std::atomic<int> ranges{0};
  ParallelFor(
      32, 2, 384.0, [&](int64_t, int64_t) { ranges.fetch_add(1); }, 1, kMinParallelWork / 2);
  EXPECT_EQ(ranges.load(), 2);
}

// Every range runs even when one fails, and the failure is the result (one thread or two).
TEST(ParallelForTest, StatusVariantRunsEveryRangeAndReturnsTheError) {
  for (int threads : {1, 2}) {
    std::atomic<int64_t> covered{0};
    const absl::Status status = ParallelForStatus(
        64, threads, kMinParallelWork,
        [&](int64_t begin, int64_t end) {
          covered += end - begin;
          if (begin == 0) return absl::InvalidArgumentError("range at 0");
          return absl::OkStatus();
        },
        /*grain=*/1);
    EXPECT_EQ(covered.load(), 64) << threads << " threads";
    EXPECT_EQ(status, absl::InvalidArgumentError("range at 0")) << threads << " threads";
    EXPECT_TRUE(ParallelForStatus(64, threads, 1.0, [](int64_t, int64_t) {
                  return absl::OkStatus();
                }).ok());
  }
}

// Runs `op` prepared with 1 and with `threads` threads; the outputs must be bit-identical.
void ExpectSameBits(const std::string& op, const std::vector<Tensor>& inputs,
                    const runtime::Attributes& attrs = {}, int threads = 2) {
  SCOPED_TRACE(op);
  KernelHarness h;
  auto serial = h.Prepare(op, inputs, attrs, 17, 1, 1);
  auto parallel = h.Prepare(op, inputs, attrs, 17, 1, threads);
  ASSERT_TRUE(serial.ok()) << serial.status();
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  auto a = h.RunPrepared(**serial, inputs);
  auto b = h.RunPrepared(**parallel, inputs);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].bytes, (*b)[i].bytes) << "output " << i;
}

Tensor Random(const runtime::Shape& shape, uint32_t seed) {
  return Tensor::Of<float>(
      shape, RandomFloats(static_cast<size_t>(runtime::NumElements(shape)), seed, -3.0f, 3.0f));
}

TEST(ParallelKernelsTest, ElementwiseAndBroadcastGiveTheSerialBits) {
  const Tensor x = Random({2, 32, 28, 28}, 1);
  for (int threads : {2, 3}) {
    ExpectSameBits("Add", {x, Random({2, 32, 28, 28}, 2)}, {}, threads);
    ExpectSameBits("Mul", {x, Random({2, 32, 1, 1}, 3)}, {}, threads);   // per channel
    ExpectSameBits("Sub", {Random({1, 32, 1, 28}, 4), x}, {}, threads);  // strided rows
    ExpectSameBits("Div", {x, Random({28}, 5)}, {}, threads);
    ExpectSameBits("Relu", {x}, {}, threads);
    ExpectSameBits("Sigmoid", {x}, {}, threads);
    ExpectSameBits("Tanh", {x}, {}, threads);
    ExpectSameBits("PRelu", {x, Random({32, 1, 1}, 23)}, {}, threads);
    ExpectSameBits("Greater", {x, Random({2, 32, 28, 28}, 24)}, {}, threads);
    ExpectSameBits(
        "Pow",
        {Tensor::Of<float>({2, 32, 28, 28}, RandomFloats(50176, 25, 0.5f, 2.0f)), Random({28}, 26)},
        {}, threads);
    ExpectSameBits("Mod", {x, Random({32, 1, 1}, 27)}, Attrs({{"fmod", int64_t{1}}}), threads);
    // Over the channels (items of 256 columns: 784 per image in 4 chunks) and along rows.
    ExpectSameBits("ArgMax", {x}, Attrs({{"axis", int64_t{1}}}), threads);
    ExpectSameBits("ArgMin", {Random({300, 1000}, 28)}, Attrs({{"axis", int64_t{1}}}), threads);
  }
}

TEST(ParallelKernelsTest, PoolingNormalisationAndResizeGiveTheSerialBits) {
  const Tensor x = Random({2, 32, 28, 28}, 7);
  ExpectSameBits("MaxPool", {x},
                 Attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ExpectSameBits("AveragePool", {x},
                 Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                        {"strides", std::vector<int64_t>{2, 2}}}));
  ExpectSameBits("GlobalAveragePool", {x});
  ExpectSameBits("GlobalMaxPool", {x});
  ExpectSameBits("Softmax", {Random({64, 1000}, 8)});
  ExpectSameBits("Softmax", {Random({8, 64, 100}, 9)}, Attrs({{"axis", int64_t{1}}}));
  ExpectSameBits("LayerNormalization",
                 {Random({64, 512}, 10), Random({512}, 11), Random({512}, 12)});
  const Tensor var = Tensor::Of<float>({32}, RandomFloats(32, 13, 0.5f, 2.0f));
  ExpectSameBits("BatchNormalization",
                 {x, Random({32}, 14), Random({32}, 15), Random({32}, 16), var});
  ExpectSameBits("InstanceNormalization", {x, Random({32}, 17), Random({32}, 18)});
  ExpectSameBits("LRN", {x}, Attrs({{"size", int64_t{5}}}));
  const Tensor scales = Tensor::Of<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f}, true);
  ExpectSameBits("Resize", {x, Tensor::Absent(), scales}, Attrs({{"mode", std::string("linear")}}));
}

// Strided copies split by output elements: each range must start at its own place in the
// source (a transpose that moves the last axis gathers; a slice and a broadcast read rows).
TEST(ParallelKernelsTest, TransposeSliceAndExpandGiveTheSerialBits) {
  const Tensor x = Random({8, 128, 256}, 21);  // 2^18 elements: worth two threads and three
  const auto ints = [](std::vector<int64_t> v) {
    return Tensor::Of<int64_t>({static_cast<int64_t>(v.size())}, std::move(v), true);
  };
  for (int threads : {2, 3}) {
    ExpectSameBits("Transpose", {x}, Attrs({{"perm", std::vector<int64_t>{1, 0, 2}}}), threads);
    ExpectSameBits("Transpose", {x}, Attrs({{"perm", std::vector<int64_t>{2, 0, 1}}}), threads);
    ExpectSameBits("Slice", {x, ints({1, 32}), ints({7, 256}), ints({0, 2})}, {}, threads);
    ExpectSameBits("Slice", {x, ints({127}), ints({0}), ints({1}), ints({-3})}, {}, threads);
    ExpectSameBits("Expand", {Random({1, 128, 1}, 22), ints({8, 128, 256})}, {}, threads);
  }
}

// The fused concatenation copies all its inputs' runs as one range of floats split over the
// threads: three images of 8 + 24 + 5 channels of 40x40 (two and three threads split inside an
// image and inside an input's run), against the concatenation by index.
TEST(ParallelKernelsTest, FusedConcatenationSplitsItsCopyAnywhere) {
  KernelHarness h;
  const int64_t images = 3, plane = 40 * 40;
  const std::vector<int64_t> channels = {8, 24, 5};
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < channels.size(); ++k) {
    inputs.push_back(Tensor::Of<float>({images, channels[k], 40, 40},
                                       RandomFloats(images * channels[k] * plane, 31 + k)));
  }
  std::vector<float> want;
  for (int64_t n = 0; n < images; ++n) {
    for (size_t k = 0; k < channels.size(); ++k) {
      const std::vector<float> x = inputs[k].Values<float>();
      const int64_t run = channels[k] * plane;
      want.insert(want.end(), x.begin() + n * run, x.begin() + (n + 1) * run);
    }
  }
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    auto kernel = h.Prepare(kFusedConcatOp, inputs, Attrs({{"axis", int64_t{1}}}), 17, 1, threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto out = h.RunPrepared(**kernel, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, (Shape{images, 37, 40, 40}));
    EXPECT_EQ((*out)[0].Values<float>(), want);
  }
}

// Concat splits its copies over the threads: along axis 0 (each input one run, copied in
// pieces: 150 KiB and 50 KiB) and along the last axis (rows of 13 + 7 floats, DGCNN's edge
// features), at one to three threads, against the concatenation by index.
TEST(ParallelKernelsTest, ConcatenationCopiesOverTheThreads) {
  KernelHarness h;
  for (const int64_t axis : {int64_t{0}, int64_t{2}}) {
    const Shape a_shape = axis == 0 ? Shape{3, 100, 128} : Shape{4, 2000, 13};
    const Shape b_shape = axis == 0 ? Shape{1, 100, 128} : Shape{4, 2000, 7};
    const std::vector<float> a = RandomFloats(a_shape[0] * a_shape[1] * a_shape[2], 51);
    const std::vector<float> b = RandomFloats(b_shape[0] * b_shape[1] * b_shape[2], 52);
    std::vector<float> want;
    if (axis == 0) {
      want = a;
      want.insert(want.end(), b.begin(), b.end());
    } else {
      for (int64_t r = 0; r < 4 * 2000; ++r) {
        want.insert(want.end(), a.begin() + r * 13, a.begin() + (r + 1) * 13);
        want.insert(want.end(), b.begin() + r * 7, b.begin() + (r + 1) * 7);
      }
    }
    const std::vector<Tensor> inputs = {Tensor::Of<float>(a_shape, a),
                                        Tensor::Of<float>(b_shape, b)};
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << "axis " << axis << " threads " << threads);
      auto kernel = h.Prepare("Concat", inputs, Attrs({{"axis", axis}}), 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto out = h.RunPrepared(**kernel, inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].Values<float>(), want);
    }
  }
}

// An output in channel blocks whose inputs are not all whole blocks is gathered lane by lane
// from the inputs' blocks: GhostNet's 36 + 36 channels, and 5 + 20 + 3 + 17 channels (an
// output block taking lanes from up to four inputs, an input's channels crossing its own block
// boundary) with inputs stored blocked, plain and channels-last, at one to three threads. Every
// stored float is the concatenation's, and the padding lanes are zeros.
TEST(ParallelKernelsTest, FusedConcatenationGathersPartialChannelBlocks) {
  KernelHarness h;
  const int64_t images = 2, plane = 7 * 9;
  // This CPU's blocked layout: 20 channels stored as 32 (blocks of 16), 24 (of 8) or 20 floats
  // per pixel (channels-last, no blocks: the copies of runs through the plain layout).
  const std::vector<Tensor> probe_in = {Tensor::Of<float>({1, 20, 1, 1}, RandomFloats(20, 40))};
  auto probe = h.Prepare(kFusedConcatOp, probe_in,
                         Attrs({{"axis", int64_t{1}},
                                {"x0_layout", std::string("blocked")},
                                {"y_layout", std::string("blocked")}}));
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int64_t per_pixel = static_cast<int64_t>((*probe)->output_storage_bytes(0)) / 4;
  const int64_t block = per_pixel == 32 ? 16 : per_pixel == 24 ? 8 : 0;
  struct Case {
    std::vector<int64_t> channels;
    std::vector<std::string> layouts;
  };
  for (const Case& c : {Case{{36, 36}, {"blocked", "blocked"}},
                        Case{{5, 20, 3, 17}, {"blocked", "blocked", "blocked", "blocked"}},
                        Case{{5, 20, 3, 17}, {"nchw", "blocked", "nhwc", "blocked"}}}) {
    std::vector<Tensor> inputs;
    std::vector<std::vector<float>> stored_inputs;
    runtime::Attributes attrs = Attrs({{"axis", int64_t{1}}, {"y_layout", std::string("blocked")}});
    int64_t total = 0;
    for (size_t k = 0; k < c.channels.size(); ++k) {
      const int64_t ch = c.channels[k];
      const auto x = RandomFloats(images * ch * plane, 41 + static_cast<int>(k));
      inputs.push_back(Tensor::Of<float>({images, ch, 7, 9}, x));
      attrs.Set(absl::StrCat("x", k, "_layout"), c.layouts[k]);
      const int64_t lanes = c.layouts[k] == "nchw"   ? 0
                            : c.layouts[k] == "nhwc" ? ch
                                                     : (block == 0 ? ch : block);
      stored_inputs.push_back(StoreInLanes(x, images, ch, plane, lanes));
      total += ch;
    }
    // The concatenation in NCHW, then as the output is stored.
    std::vector<float> want;
    for (int64_t n = 0; n < images; ++n) {
      for (size_t k = 0; k < inputs.size(); ++k) {
        const std::vector<float> x = inputs[k].Values<float>();
        const int64_t run = c.channels[k] * plane;
        want.insert(want.end(), x.begin() + n * run, x.begin() + (n + 1) * run);
      }
    }
    const int64_t y_lanes = block == 0 ? total : block;
    const std::vector<float> expected = StoreInLanes(want, images, total, plane, y_lanes);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << c.channels.size() << " inputs, " << threads << " threads, block " << block);
      auto kernel = h.Prepare(kFusedConcatOp, inputs, attrs, 17, 1, threads);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_EQ((*kernel)->implementation(),
                block == 0 ? "own copies of runs" : "own gather of channel blocks");
      ASSERT_EQ((*kernel)->output_storage_bytes(0), expected.size() * sizeof(float));
      std::vector<float> stored(expected.size(), 7.0f);
      std::vector<const void*> ins;
      for (const auto& x : stored_inputs) ins.push_back(x.data());
      ASSERT_TRUE(testing::RunOnBuffers(**kernel, ins, stored.data()).ok());
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_EQ(stored[i], expected[i]) << "stored float " << i;
      }
    }
  }
}

// The chain's sum in channel blocks with an activation that does not keep zero at zero:
// Sigmoid(X0 + X1) over 20 channels (a partial block) at one and two threads. Every stored float
// is the reference's, and the padding lanes are zeros again after the activation.
TEST(ParallelKernelsTest, FusedSumActivatesAndKeepsThePaddingZero) {
  KernelHarness h;
  const int64_t images = 2, channels = 20, plane = 6 * 5;
  const std::vector<float> a = RandomFloats(images * channels * plane, 61);
  const std::vector<float> b = RandomFloats(images * channels * plane, 62);
  const std::vector<Tensor> inputs = {Tensor::Of<float>({images, channels, 6, 5}, a),
                                      Tensor::Of<float>({images, channels, 6, 5}, b)};
  const runtime::Attributes attrs = Attrs({{"x0_layout", std::string("blocked")},
                                           {"x1_layout", std::string("blocked")},
                                           {"y_layout", std::string("blocked")},
                                           {"activation", std::string("Sigmoid")}});
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = 1.0f / (1.0f + std::exp(-(a[i] + b[i])));
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    auto kernel = h.Prepare(kFusedAddOp, inputs, attrs, 17, 1, threads);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    // This CPU's blocked layout: 32 (blocks of 16), 24 (of 8) or 20 floats per pixel.
    const int64_t per_pixel =
        static_cast<int64_t>((*kernel)->output_storage_bytes(0)) / 4 / (images * plane);
    const int64_t lanes = per_pixel == channels ? channels : per_pixel == 32 ? 16 : 8;
    const std::vector<float> a_stored = StoreInLanes(a, images, channels, plane, lanes);
    const std::vector<float> b_stored = StoreInLanes(b, images, channels, plane, lanes);
    const std::vector<float> expected = StoreInLanes(want, images, channels, plane, lanes);
    const std::vector<float> lane_used =
        StoreInLanes(std::vector<float>(want.size(), 1.0f), images, channels, plane, lanes);
    std::vector<float> stored(expected.size(), 7.0f);
    ASSERT_TRUE(
        testing::RunOnBuffers(**kernel, {a_stored.data(), b_stored.data()}, stored.data()).ok());
    for (size_t i = 0; i < expected.size(); ++i) {
      if (lane_used[i] == 0.0f) {
        ASSERT_EQ(stored[i], 0.0f) << "padding lane at " << i;
      } else {
        ASSERT_NEAR(stored[i], expected[i], 1e-6f) << "stored float " << i;
      }
    }
  }
}

}  // namespace
}  // namespace reprise::kernels::cpu
