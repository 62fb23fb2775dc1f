// onednn_winograd_grid: oneDNN's direct and Winograd algorithms for one 3x3 stride-1
// convolution (pads 1, f32, inference, layouts of oneDNN's choosing), timed side by side over a
// grid of shapes, for the bounds in kernels/cpu/conv.cc (kWinogradMinPixels,
// WinogradTilesBlock). It calls oneDNN directly, without Reprise's kernels, so that the
// Winograd primitive can be timed where Reprise refuses it. Not built by CMake:
//
//   g++ -O2 -std=c++17 tools/bench/onednn_winograd_grid.cc -ldnnl -o /tmp/winograd_grid
//   OMP_NUM_THREADS=1 taskset -c 0 /tmp/winograd_grid [C,M,S,N ...]
//
// Each argument is one shape (input channels, output channels, size, batch); without arguments
// a built-in grid runs. Prints per shape the median of 7 runs (after one unmeasured) of each
// algorithm in ms, their ratio, oneDNN's Winograd implementation, and the register block that
// WinogradTilesBlock computes for its F(4x4, 3x3) kernel.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"

namespace {

struct Shape {
  int c, m, s, n;
};

struct Timed {
  double ms = -1;  // -1: oneDNN has no primitive of this algorithm for the shape
  std::string impl;
};

Timed TimeConv(const dnnl::engine& engine, dnnl::stream& stream, dnnl::algorithm algorithm,
               const Shape& shape) {
  using dnnl::memory;
  const memory::desc src({shape.n, shape.c, shape.s, shape.s}, memory::data_type::f32,
                         memory::format_tag::any);
  const memory::desc weights({shape.m, shape.c, 3, 3}, memory::data_type::f32,
                             memory::format_tag::any);
  const memory::desc bias({shape.m}, memory::data_type::f32, memory::format_tag::x);
  const memory::desc dst({shape.n, shape.m, shape.s, shape.s}, memory::data_type::f32,
                         memory::format_tag::any);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src, weights,
                                        bias, dst, {1, 1}, {1, 1}, {1, 1}),
        engine);
  } catch (const dnnl::error&) {
    return {};
  }
  memory src_m(pd.src_desc(), engine), weights_m(pd.weights_desc(), engine);
  memory bias_m(pd.bias_desc(), engine), dst_m(pd.dst_desc(), engine);
  for (memory* m : {&src_m, &weights_m, &bias_m}) {
    float* p = static_cast<float*>(m->get_data_handle());
    const size_t count = m->get_desc().get_size() / sizeof(float);
    for (size_t i = 0; i < count; ++i) p[i] = 0.01f * static_cast<float>(i % 13);
  }
  dnnl::convolution_forward conv(pd);
  const std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_m},
                                                {DNNL_ARG_WEIGHTS, weights_m},
                                                {DNNL_ARG_BIAS, bias_m},
                                                {DNNL_ARG_DST, dst_m}};
  std::vector<double> ms;
  for (int run = 0; run < 8; ++run) {
    const auto start = std::chrono::steady_clock::now();
    conv.execute(stream, args);
    stream.wait();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (run > 0) ms.push_back(took.count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], pd.impl_info_str()};
}

// The register block of conv.cc's WinogradTilesBlock: the largest divisor below 32 of the
// batch's 4x4 output tiles.
int TileBlock(const Shape& shape) {
  const long tiles = static_cast<long>(shape.n) * ((shape.s + 3) / 4) * ((shape.s + 3) / 4);
  for (long d = std::min<long>(tiles, 31); d > 1; --d) {
    if (tiles % d == 0) return static_cast<int>(d);
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    Shape shape{};
    if (std::sscanf(argv[i], "%d,%d,%d,%d", &shape.c, &shape.m, &shape.s, &shape.n) != 4 ||
        shape.c < 1 || shape.m < 1 || shape.s < 1 || shape.n < 1 || shape.c > 4096 ||
        shape.m > 4096 || shape.s > 1024 || shape.n > 64) {
      std::fprintf(stderr, "want C,M,S,N (positive; C, M <= 4096, S <= 1024, N <= 64): %s\n",
                   argv[i]);
      return 2;
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) {
    for (int c : {32, 64, 128, 256, 512}) {
      for (int s : {7, 14, 28, 56, 124, 147}) {
        const double flops = 2.0 * c * c * 9 * s * s;
        if (flops >= 2e6 && flops <= 2e9) shapes.push_back({c, c, s, 1});
      }
    }
    for (int n : {2, 4, 7, 8}) shapes.push_back({32, 32, 147, n});
  }
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::printf("%5s %5s %5s %3s %10s %10s %7s %6s  %s\n", "C", "M", "S", "N", "direct_ms", "wino_ms",
              "ratio", "block", "winograd");
  for (const Shape& shape : shapes) {
    const Timed direct = TimeConv(engine, stream, dnnl::algorithm::convolution_direct, shape);
    const Timed wino = TimeConv(engine, stream, dnnl::algorithm::convolution_winograd, shape);
    const double ratio = direct.ms > 0 && wino.ms > 0 ? wino.ms / direct.ms : -1;
    std::printf("%5d %5d %5d %3d %10.3f %10.3f %7.2f %6d  %s\n", shape.c, shape.m, shape.s, shape.n,
                direct.ms, wino.ms, ratio, TileBlock(shape),
                wino.impl.empty() ? "-" : wino.impl.c_str());
    std::fflush(stdout);
  }
  return 0;
}
