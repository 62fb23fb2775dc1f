// Run-time cost of a few representative CPU kernels (Prepare is outside the timed loop).
// Not a test: numbers drift on a shared machine. Example:
//   OMP_NUM_THREADS=1 build/release/kernels/kernels_cpu_benchmark --benchmark_repetitions=5
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/output_clearing.h"

namespace reprise::kernels::cpu {
namespace {

using runtime::DataType;
using runtime::Shape;

struct Buffer {
  runtime::TensorDesc desc;
  std::vector<float> values;
};

Buffer Floats(Shape shape, bool known, uint32_t seed) {
  Buffer b;
  b.desc.dtype = DataType::kFloat32;
  b.desc.shape = std::move(shape);
  b.values.resize(runtime::NumElements(b.desc.shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : b.values) v = dist(rng);
  if (known) b.desc.data = b.values.data();
  return b;
}

// Prepares `op` once (with `threads` intra-op threads, on kernels registered with `options`),
// then times Run.
void RunKernel(benchmark::State& state, const std::string& op, std::vector<Buffer> inputs,
               const runtime::Attributes& attrs, const CpuKernelOptions& options = {},
               int threads = 1) {
  runtime::KernelRegistry registry;
  if (!RegisterCpuKernels(&registry, options).ok()) std::abort();
  std::vector<runtime::TensorDesc> descs;
  std::vector<const void*> in_ptrs;
  for (const Buffer& b : inputs) {
    descs.push_back(b.desc);
    in_ptrs.push_back(b.values.data());
  }
  runtime::PrepareContext context;
  context.op = op;
  context.inputs = descs;
  context.attributes = &attrs;
  context.intra_op_threads = threads;
  auto kernel = registry.Prepare(context);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  state.SetLabel((*kernel)->implementation());
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<void*> out_ptrs;
  for (size_t i = 0; i < (*kernel)->outputs().size(); ++i) {
    const runtime::TensorDesc& d = (*kernel)->outputs()[i];
    outputs.emplace_back(std::max(runtime::NumElements(d.shape) * runtime::DataTypeSize(d.dtype),
                                  (*kernel)->output_storage_bytes(i)));
    out_ptrs.push_back(outputs.back().data());
  }
  std::vector<uint8_t> workspace((*kernel)->workspace_bytes());
  runtime::KernelArgs args{in_ptrs.data(), out_ptrs.data(), workspace.data()};
  for (auto _ : state) {
    if (!(*kernel)->Run(args).ok()) state.SkipWithError("run failed");
    benchmark::ClobberMemory();
  }
}

void BM_Conv3x3_64x56x56(benchmark::State& state) {
  runtime::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  RunKernel(
      state, "Conv",
      {Floats({1, 64, 56, 56}, false, 1), Floats({64, 64, 3, 3}, true, 2), Floats({64}, true, 3)},
      attrs);
  state.SetItemsProcessed(state.iterations() * 2 * 64 * 64 * 9 * 56 * 56);  // flops
}
BENCHMARK(BM_Conv3x3_64x56x56)->Unit(benchmark::kMillisecond);

// A 3x3 convolution (pads 1) of C channels over S x S, stride 1 to C channels or stride 2 to
// 2C, batch N, T intra-op threads, with taps as channels off or allowed (conv.h; it applies
// where oneDNN's direct kernel is its AVX2 one and the shape is in its bounds, conv.cc).
// Args: taps (0/1), C, S, stride, N, T.
void BM_Conv3x3Taps(benchmark::State& state) {
  const int64_t c = state.range(1), size = state.range(2), stride = state.range(3);
  const int64_t n = state.range(4), m = stride == 1 ? c : 2 * c;
  const int64_t out = (size - 1) / stride + 1;
  runtime::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  attrs.Set("strides", std::vector<int64_t>{stride, stride});
  CpuKernelOptions options;
  options.conv_taps_as_channels = state.range(0) != 0;
  RunKernel(
      state, "Conv",
      {Floats({n, c, size, size}, false, 1), Floats({m, c, 3, 3}, true, 2), Floats({m}, true, 3)},
      attrs, options, static_cast<int>(state.range(5)));
  state.SetItemsProcessed(state.iterations() * 2 * n * m * c * 9 * out * out);  // flops
}
BENCHMARK(BM_Conv3x3Taps)
    ->ArgNames({"taps", "c", "s", "stride", "n", "t"})
    ->ArgsProduct({{0, 1}, {512}, {7}, {1}, {1, 8}, {1, 2}})
    ->ArgsProduct({{0, 1}, {256}, {14}, {1}, {1, 8}, {1, 2}})
    ->ArgsProduct({{0, 1}, {192}, {28}, {1}, {1}, {1}})
    ->ArgsProduct({{0, 1}, {256}, {14}, {2}, {1, 8}, {1, 2}})
    ->ArgsProduct({{0, 1}, {160}, {56}, {2}, {1}, {1}})
    ->Unit(benchmark::kMillisecond);

// A 3x3 convolution of C channels to M at dilation D (pads D) over S x S, batch 1, one thread,
// with tap regions off or allowed (conv.h; where they apply: conv.cc's TapRegionsFor):
// DeepLabV3's atrous convolutions, the dilated ones of its backbone, and two without dilation
// for the bound. Items are the flops of the whole window, as the direct kernels do them.
// Args: regions (0/1), C, S, D, M.
void BM_AtrousConv(benchmark::State& state) {
  const int64_t c = state.range(1), size = state.range(2), d = state.range(3), m = state.range(4);
  runtime::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{d, d, d, d});
  attrs.Set("dilations", std::vector<int64_t>{d, d});
  CpuKernelOptions options;
  options.conv_tap_regions = state.range(0) != 0;
  RunKernel(
      state, "Conv",
      {Floats({1, c, size, size}, false, 1), Floats({m, c, 3, 3}, true, 2), Floats({m}, true, 3)},
      attrs, options, 1);
  state.SetItemsProcessed(state.iterations() * 2 * m * c * 9 * size * size);  // flops
}
BENCHMARK(BM_AtrousConv)
    ->ArgNames({"regions", "c", "s", "d", "m"})
    ->ArgsProduct({{0, 1}, {960}, {14}, {12}, {256}})
    ->ArgsProduct({{0, 1}, {2048}, {28}, {12, 24}, {256}})
    ->ArgsProduct({{0, 1}, {256}, {7}, {4}, {256}})
    ->ArgsProduct({{0, 1}, {512}, {14}, {4, 6}, {256}})
    ->ArgsProduct({{0, 1}, {512}, {28}, {8}, {256}})
    ->ArgsProduct({{0, 1}, {256}, {28}, {2}, {256}})
    ->ArgsProduct({{0, 1}, {512}, {28}, {4}, {512}})
    ->ArgsProduct({{0, 1}, {256}, {14}, {1}, {256}})
    ->ArgsProduct({{0, 1}, {512}, {7}, {1}, {512}})
    ->Unit(benchmark::kMillisecond);

// AlexNet's first layer: 3 channels to 64, 11x11 stride 4 (pads 2) over 224x224, batch N, one
// thread, with tap regions off (oneDNN's im2col-and-gemm convolution) or allowed (the window
// gathered channels-last, one sgemm per image; conv.cc's TapRegionsFor).
// Args: regions (0/1), N.
void BM_Conv11x11Stride4(benchmark::State& state) {
  const int64_t n = state.range(1);
  runtime::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{2, 2, 2, 2});
  attrs.Set("strides", std::vector<int64_t>{4, 4});
  CpuKernelOptions options;
  options.conv_tap_regions = state.range(0) != 0;
  RunKernel(
      state, "Conv",
      {Floats({n, 3, 224, 224}, false, 1), Floats({64, 3, 11, 11}, true, 2), Floats({64}, true, 3)},
      attrs, options, 1);
  state.SetItemsProcessed(state.iterations() * 2 * n * 64 * 3 * 121 * 55 * 55);  // flops
}
BENCHMARK(BM_Conv11x11Stride4)
    ->ArgNames({"regions", "n"})
    ->ArgsProduct({{0, 1}, {1, 8}})
    ->Unit(benchmark::kMillisecond);

// 3x3 stride-1 convolutions with Relu (pads 1), one thread, Winograd off (oneDNN's direct
// kernel here without AVX-512), allowed (oneDNN's where it has one, else conv.cc's
// OwnWinogradFor) or ours always (2): SqueezeNet's, Inception-v3's (147x147, where oneDNN's
// F(4x4, 3x3) is refused and ours races the direct kernel), ResNet's, VGG's and U-Net's shapes.
// Args: winograd (0/1/2), C, M, size, N.
void BM_Conv3x3Winograd(benchmark::State& state) {
  const int64_t c = state.range(1), m = state.range(2), size = state.range(3), n = state.range(4);
  runtime::Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  attrs.Set("activation", std::string("Relu"));
  CpuKernelOptions options;
  options.conv_winograd = state.range(0) != 0;
  options.conv_own_winograd_always = state.range(0) == 2;
  RunKernel(
      state, kFusedConvOp,
      {Floats({n, c, size, size}, false, 1), Floats({m, c, 3, 3}, true, 2), Floats({m}, true, 3)},
      attrs, options, 1);
  state.SetItemsProcessed(state.iterations() * 2 * n * m * c * 9 * size * size);  // flops
}
BENCHMARK(BM_Conv3x3Winograd)
    ->ArgNames({"wino", "c", "m", "s", "n"})
    ->ArgsProduct({{0, 1, 2}, {16}, {64}, {55}, {1}})
    ->ArgsProduct({{0, 1, 2}, {32}, {64}, {147}, {1}})
    ->ArgsProduct({{0, 1, 2}, {32}, {128}, {27}, {1}})
    ->ArgsProduct({{0, 1, 2}, {64}, {64}, {56}, {1}})
    ->ArgsProduct({{0, 1, 2}, {64}, {256}, {13}, {1}})
    ->ArgsProduct({{0, 1, 2}, {128}, {128}, {28}, {1}})
    ->ArgsProduct({{0, 1, 2}, {256}, {256}, {14}, {1}})
    ->ArgsProduct({{0, 1, 2}, {512}, {512}, {14}, {1}})
    ->ArgsProduct({{0, 1, 2}, {64}, {64}, {56}, {8}})
    ->Unit(benchmark::kMillisecond);

// Inception-v3's convolutions on oneDNN's direct kernel, one thread, with tap regions off (that
// kernel alone) or on (raced against the whole window gathered channels-last with one sgemm
// per image, conv.cc's WholeWindowRaceFor; the benchmark's runs settle the race): 288 -> 384 3x3
// stride 2 over 35x35 (shape 0), 384 -> 384 3x1 over 8x8 (1), 160 -> 160 1x7 over 17x17 (2),
// 96 -> 96 3x3 stride 2 over 35x35 (3). Args: regions (0/1), shape.
void BM_ConvGatheredWindow(benchmark::State& state) {
  struct ConvShape {
    int64_t c, m, size, kh, kw, stride;
  };
  constexpr ConvShape kShapes[] = {{288, 384, 35, 3, 3, 2},
                                   {384, 384, 8, 3, 1, 1},
                                   {160, 160, 17, 1, 7, 1},
                                   {96, 96, 35, 3, 3, 2}};
  const ConvShape& k = kShapes[state.range(1)];
  runtime::Attributes attrs;
  const int64_t ph = k.stride == 1 ? k.kh / 2 : 0, pw = k.stride == 1 ? k.kw / 2 : 0;
  attrs.Set("pads", std::vector<int64_t>{ph, pw, ph, pw});
  attrs.Set("strides", std::vector<int64_t>{k.stride, k.stride});
  attrs.Set("activation", std::string("Relu"));
  CpuKernelOptions options;
  options.conv_tap_regions = state.range(0) != 0;
  RunKernel(state, kFusedConvOp,
            {Floats({1, k.c, k.size, k.size}, false, 1), Floats({k.m, k.c, k.kh, k.kw}, true, 2),
             Floats({k.m}, true, 3)},
            attrs, options, 1);
  const int64_t oh = (k.size + 2 * ph - k.kh) / k.stride + 1;
  const int64_t ow = (k.size + 2 * pw - k.kw) / k.stride + 1;
  state.SetItemsProcessed(state.iterations() * 2 * k.m * k.c * k.kh * k.kw * oh * ow);  // flops
}
BENCHMARK(BM_ConvGatheredWindow)
    ->ArgNames({"regions", "shape"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond);

// What a run of a oneDNN primitive costs around the primitive, on a 16 -> 16 1x1 convolution over
// 4x4 (nChw16c, bias): arg 0 makes a stream, the memory objects and an argument map on every run
// (as the kernels did before ReusedMemories); arg 1 binds a kept ReusedMemories and executes on
// the thread's stream through the C interface (as they do now).
void BM_OneDnnRunBinding(benchmark::State& state) {
  using dnnl::memory;
  const dnnl::engine& engine = CpuEngine();
  const memory::desc x_md({1, 16, 4, 4}, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc w_md({16, 16, 1, 1}, memory::data_type::f32, memory::format_tag::OIhw16i16o);
  const memory::desc b_md({16}, memory::data_type::f32, memory::format_tag::x);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, x_md, w_md, b_md, x_md,
                                      {1, 1}, {0, 0}, {0, 0}),
      attr, engine);
  const dnnl::convolution_forward primitive(pd);
  std::vector<float> x(x_md.get_size() / 4, 1.0f), y(x.size()), w(w_md.get_size() / 4, 0.5f),
      b(16, 0.25f), scratch(pd.scratchpad_desc().get_size() / 4 + 1);
  const memory weights(w_md, engine, w.data());
  ReusedMemories memories;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      dnnl::stream stream(engine);
      std::unordered_map<int, memory> bound = {{DNNL_ARG_SRC, memory(x_md, engine, x.data())},
                                               {DNNL_ARG_WEIGHTS, weights},
                                               {DNNL_ARG_BIAS, memory(b_md, engine, b.data())},
                                               {DNNL_ARG_DST, memory(x_md, engine, y.data())}};
      bound.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine, scratch.data()));
      primitive.execute(stream, bound);
      stream.wait();
    } else {
      ReusedMemories::Run run(memories);
      const dnnl_exec_arg_t args[5] = {
          {DNNL_ARG_SRC, run.Bind(0, x_md, x.data()).get()},
          {DNNL_ARG_WEIGHTS, weights.get()},
          {DNNL_ARG_BIAS, run.Bind(1, b_md, b.data()).get()},
          {DNNL_ARG_DST, run.Bind(2, x_md, y.data()).get()},
          {DNNL_ARG_SCRATCHPAD, run.Bind(3, pd.scratchpad_desc(), scratch.data()).get()}};
      Execute(primitive, args, 5);
      ThreadStream().wait();
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(state.range(0) == 0 ? "made every run" : "kept (ReusedMemories)");
}
BENCHMARK(BM_OneDnnRunBinding)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_MatMul_384x768x768(benchmark::State& state) {
  RunKernel(state, "MatMul", {Floats({1, 384, 768}, false, 4), Floats({768, 768}, true, 5)}, {});
  state.SetItemsProcessed(state.iterations() * 2 * 384 * 768 * 768);
}
BENCHMARK(BM_MatMul_384x768x768)->Unit(benchmark::kMillisecond);

// A transformer's feed-forward product as exported from a linear layer: 128 rows by constant
// weights [n, k] read transposed (perm_b folded into FusedMatMul), k x n = 512x2048 and 2048x512.
void BM_LinearProduct_128(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1);
  runtime::Attributes attrs;
  attrs.Set("perm_b", std::vector<int64_t>{1, 0});
  RunKernel(state, kFusedMatMulOp, {Floats({1, 128, k}, false, 8), Floats({n, k}, true, 9)}, attrs);
  state.SetItemsProcessed(state.iterations() * 2 * 128 * k * n);
}
BENCHMARK(BM_LinearProduct_128)
    ->Args({512, 2048})
    ->Args({2048, 512})
    ->Unit(benchmark::kMillisecond);

// m rows by constant weights [n, k] read transposed (Gemm transB, a fully connected layer at
// batch m): AlexNet's first two layers, a transformer's 768x3072, and weights from 2^21 floats
// (one row: our row kernel, packed_product.cc) down to 2^20 (oneDNN's matmul), and products of
// 2^18 multiply-adds or less (the small kernel, B in panels; rows of B 4 KiB apart, n = 1024,
// were its worst case when it read B row-major). Weights of 32 MiB or less stay in this VM's L3
// cache from one iteration to the next, unlike in a model. Args: m, k, n, intra-op threads.
void BM_FewRowsProduct(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  runtime::Attributes attrs;
  attrs.Set("transB", int64_t{1});
  RunKernel(state, "Gemm", {Floats({m, k}, false, 10), Floats({n, k}, true, 11)}, attrs, {},
            threads);
  state.SetItemsProcessed(state.iterations() * m * k * n);
}
BENCHMARK(BM_FewRowsProduct)
    ->Args({1, 9216, 4096, 1})
    ->Args({1, 4096, 4096, 1})
    ->Args({1, 768, 3072, 1})
    ->Args({1, 2048, 1024, 1})
    ->Args({1, 1024, 1024, 1})
    ->Args({1, 256, 1024, 1})
    ->Args({1, 256, 1000, 1})
    ->Args({1, 512, 512, 1})
    ->Args({16, 128, 128, 1})
    ->Args({2, 9216, 4096, 1})
    ->Args({3, 9216, 4096, 1})
    ->Args({4, 9216, 4096, 1})
    ->Args({8, 9216, 4096, 1})
    // Two threads: the small kernel splits the larger of its products by columns.
    ->Args({1, 256, 1024, 2})
    ->Args({1, 512, 512, 2})
    ->Args({1, 256, 256, 2})
    ->Args({1, 128, 1024, 2})
    ->Args({1, 256, 512, 2})
    ->Args({4, 64, 1024, 2})
    ->Args({16, 128, 128, 2})
    ->Unit(benchmark::kMicrosecond);

void BM_AddChannelBias_64x56x56(benchmark::State& state) {
  RunKernel(state, "Add", {Floats({1, 64, 56, 56}, false, 6), Floats({1, 64, 1, 1}, true, 7)}, {});
  state.SetItemsProcessed(state.iterations() * 64 * 56 * 56);
}
BENCHMARK(BM_AddChannelBias_64x56x56)->Unit(benchmark::kMicrosecond);

// One op over 12x384x384 floats: Softmax and LogSoftmax along the last axis and our own vector
// loops (vector_math.h, gelu.cc, unary.cc's VectorMap).
void BM_Array_12x384x384(benchmark::State& state, const char* op, uint32_t seed) {
  RunKernel(state, op, {Floats({12, 384, 384}, false, seed)}, {});
  state.SetItemsProcessed(state.iterations() * 12 * 384 * 384);
}
BENCHMARK_CAPTURE(BM_Array_12x384x384, Softmax, "Softmax", 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Sigmoid, "Sigmoid", 10)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Tanh, "Tanh", 11)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Gelu, "Gelu", 12)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, LogSoftmax, "LogSoftmax", 13)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Erf, "Erf", 14)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Exp, "Exp", 15)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Softplus, "Softplus", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, LeakyRelu, "LeakyRelu", 17)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Array_12x384x384, Elu, "Elu", 18)->Unit(benchmark::kMillisecond);

void BM_MaxPool3x3s2_64x112x112(benchmark::State& state) {
  runtime::Attributes attrs;
  attrs.Set("kernel_shape", std::vector<int64_t>{3, 3});
  attrs.Set("strides", std::vector<int64_t>{2, 2});
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  RunKernel(state, "MaxPool", {Floats({1, 64, 112, 112}, false, 9)}, attrs);
  state.SetItemsProcessed(state.iterations() * 64 * 56 * 56);
}
BENCHMARK(BM_MaxPool3x3s2_64x112x112)->Unit(benchmark::kMillisecond);

// A depthwise KxK convolution (pads K/2) of C channels over S x S at stride 1 or 2, batch 1, in
// the chain's blocked layout, with an activation (0 none, 1 Relu, 2 Swish), on oneDNN's kernel
// or ours (conv.cc's OwnDepthwiseFor), `t` threads: the depthwise layers of MobileNetV2,
// MnasNet and EfficientNet. Args: own (0/1), C, S, K, stride, activation, t.
void BM_DepthwiseConv(benchmark::State& state) {
  const int64_t c = state.range(1), size = state.range(2), k = state.range(3);
  const int64_t stride = state.range(4), out = (size - 1) / stride + 1;
  runtime::Attributes attrs;
  attrs.Set("group", c);
  attrs.Set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
  attrs.Set("strides", std::vector<int64_t>{stride, stride});
  attrs.Set("x_layout", std::string("blocked"));
  attrs.Set("y_layout", std::string("blocked"));
  static const char* const kActivations[] = {"", "Relu", "Swish"};
  attrs.Set("activation", std::string(kActivations[state.range(5)]));
  CpuKernelOptions options;
  options.conv_own_depthwise = state.range(0) != 0;
  RunKernel(
      state, kFusedConvOp,
      {Floats({1, c, size, size}, false, 1), Floats({c, 1, k, k}, true, 2), Floats({c}, true, 3)},
      attrs, options, static_cast<int>(state.range(6)));
  state.SetItemsProcessed(state.iterations() * c * out * out);
}
BENCHMARK(BM_DepthwiseConv)
    ->ArgNames({"own", "c", "s", "k", "stride", "act", "t"})
    ->ArgsProduct({{0, 1}, {32}, {112}, {3}, {1}, {2}, {1}})
    ->ArgsProduct({{0, 1}, {144}, {56}, {3}, {1}, {1, 2}, {1}})
    ->ArgsProduct({{0, 1}, {96}, {112}, {3}, {2}, {2}, {1}})
    ->ArgsProduct({{0, 1}, {240}, {28}, {5}, {1}, {2}, {1}})
    ->ArgsProduct({{0, 1}, {672}, {14}, {5}, {1}, {2}, {1}})
    ->ArgsProduct({{0, 1}, {960}, {7}, {3}, {1}, {1}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// A 3x3 convolution (pads 1) of C channels in groups of G channels over S x S at stride 1 or 2,
// batch 1, Relu, in the chain's blocked layout, on oneDNN's kernel (X and Y reordered to and from
// blocks of G channels inside the step) or ours (conv_depthwise.cc's narrow groups), `t`
// threads: ResNeXt-50 32x4d's first two stages and RegNetY-400MF's width-8 groups. Args: own
// (0/1), C, S, G, stride, t.
void BM_GroupedConv(benchmark::State& state) {
  const int64_t c = state.range(1), size = state.range(2), cg = state.range(3);
  const int64_t stride = state.range(4), out = (size - 1) / stride + 1;
  runtime::Attributes attrs;
  attrs.Set("group", c / cg);
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  attrs.Set("strides", std::vector<int64_t>{stride, stride});
  attrs.Set("x_layout", std::string("blocked"));
  attrs.Set("y_layout", std::string("blocked"));
  attrs.Set("activation", std::string("Relu"));
  CpuKernelOptions options;
  options.conv_own_depthwise = state.range(0) != 0;
  RunKernel(
      state, kFusedConvOp,
      {Floats({1, c, size, size}, false, 1), Floats({c, cg, 3, 3}, true, 2), Floats({c}, true, 3)},
      attrs, options, static_cast<int>(state.range(5)));
  state.SetItemsProcessed(state.iterations() * c * out * out);
}
BENCHMARK(BM_GroupedConv)
    ->ArgNames({"own", "c", "s", "g", "stride", "t"})
    ->ArgsProduct({{0, 1}, {128}, {56}, {4}, {1}, {1, 2}})
    ->ArgsProduct({{0, 1}, {256}, {56}, {8}, {2}, {1}})
    ->ArgsProduct({{0, 1}, {256}, {28}, {8}, {1}, {1, 2}})
    ->ArgsProduct({{0, 1}, {208}, {14}, {8}, {1}, {1}})
    ->ArgsProduct({{0, 1}, {64}, {56}, {2}, {1}, {1}})
    ->Unit(benchmark::kMicrosecond);

// What a ParallelFor that takes two threads costs beyond its work: one OpenMP fork and join
// around two ranges of nothing, after `gap` microseconds of work on the calling thread alone (a
// stream runs other kernels between its parallel loops). kMinParallelWork (kernel_util.h) is
// chosen from this. Args: gap (us).
void BM_ParallelForFork(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const double gap_us = static_cast<double>(state.range(0));
  volatile int64_t sink = 0;
  for (auto _ : state) {
    const auto gap_start = Clock::now();
    while (std::chrono::duration<double, std::micro>(Clock::now() - gap_start).count() < gap_us) {
      sink = sink + 1;
    }
    const auto start = Clock::now();
    ParallelFor(2, 2, kMinParallelWork, [&](int64_t begin, int64_t) { sink = sink + begin; });
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
}
BENCHMARK(BM_ParallelForFork)
    ->ArgName("gap")
    ->Arg(0)
    ->Arg(20)
    ->Arg(200)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Rewriting a buffer on two threads, each its half, after the halves were written by the same
// threads and then read by the same thread (other 0) or by the other one (other 1); with clear 1
// each thread first zeros its half with non-temporal stores (StreamZeros, output_clearing.h),
// inside the timed part. Where a core's stores to lines another core read are slow (this
// project's two-core VM), other 1 costs several times other 0 from a few MiB on, and clearing
// first wins that back; OutputClearing::kAuto decides per step as it runs. Args: KiB, other,
// clear.
void BM_RewriteAcrossCores(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const size_t n = static_cast<size_t>(state.range(0)) * 1024 / sizeof(float);
  const bool other = state.range(1) != 0, clear = state.range(2) != 0;
  std::vector<float> data(n, 1.0f);
  auto half = [&](int64_t i) { return data.data() + n / 2 * static_cast<size_t>(i); };
  const size_t half_n = n / 2;
  volatile float sink = 0.0f;
  float value = 0.0f;
  for (auto _ : state) {
    value += 1.0f;
    // One item per thread: item i runs on thread i.
    ParallelFor(2, 2, kCoarseItemCost * 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) std::fill(half(i), half(i) + half_n, value);
    });
    ParallelFor(2, 2, kCoarseItemCost * 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* h = half(other ? 1 - i : i);
        float sum = 0.0f;
        for (size_t k = 0; k < half_n; k += 16) sum += h[k];
        sink = sink + sum;
      }
    });
    const auto start = Clock::now();
    ParallelFor(2, 2, kCoarseItemCost * 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (clear) StreamZeros(half(i), half_n * sizeof(float), 1);
        std::fill(half(i), half(i) + half_n, value + 0.5f);
      }
    });
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
}
BENCHMARK(BM_RewriteAcrossCores)
    ->ArgNames({"kib", "other", "clear"})
    ->ArgsProduct({{256, 1024, 4096, 12288}, {0, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The pooling of convolution chains (kFusedMaxPoolOp, kFusedAveragePoolOp) over values stored
// in the chain's blocked layout (C a multiple of 16: no padding channels), batch 1, one thread:
// GoogLeNet's, ResNet's, Inception-v3's and DenseNet's windows. Args: max (1) or average (0), C,
// size, kernel, stride, pad, and for averages count_include_pad.
void BM_ChainPool(benchmark::State& state) {
  const int64_t c = state.range(1), size = state.range(2), k = state.range(3);
  const int64_t s = state.range(4), pad = state.range(5);
  runtime::Attributes attrs;
  attrs.Set("kernel_shape", std::vector<int64_t>{k, k});
  attrs.Set("strides", std::vector<int64_t>{s, s});
  attrs.Set("pads", std::vector<int64_t>{pad, pad, pad, pad});
  attrs.Set("count_include_pad", int64_t{state.range(6)});
  attrs.Set("x_layout", std::string("blocked"));
  attrs.Set("y_layout", std::string("blocked"));
  RunKernel(state, state.range(0) != 0 ? kFusedMaxPoolOp : kFusedAveragePoolOp,
            {Floats({1, c, size, size}, false, 9)}, attrs);
  const int64_t out = (size + 2 * pad - k) / s + 1;
  state.SetItemsProcessed(state.iterations() * c * out * out);
}
BENCHMARK(BM_ChainPool)
    ->ArgNames({"max", "c", "size", "k", "s", "pad", "incl"})
    ->Args({1, 64, 112, 3, 2, 1, 0})
    ->Args({1, 192, 56, 3, 2, 0, 0})
    ->Args({1, 192, 28, 3, 1, 1, 0})
    ->Args({1, 512, 14, 3, 1, 1, 0})
    ->Args({0, 192, 35, 3, 1, 1, 1})
    ->Args({0, 768, 17, 3, 1, 1, 0})
    ->Args({0, 256, 56, 2, 2, 0, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace reprise::kernels::cpu

BENCHMARK_MAIN();
