// Tap regions (conv.h): a 2-D convolution as one product per tap over only the output pixels
// where that tap reads inside its input. A dilated convolution wider than its input reads
// padding with most of its taps (DeepLabV3's rate-12 3x3 convolution over a 14x14 map: 324 of
// its 1764 tap-pixel pairs read the input); the direct kernels multiply that padding all the
// same. Here X is read channels-last, each tap's pixels gathered into rows of C, multiplied by
// the tap's [C, M] weights (sgemm) and added into Y channels-last. In place of oneDNN's gemm
// convolution the same kernel also runs the whole window, gathered per image (whole_window),
// and in place of oneDNN's direct 3x3 kernel, Winograd's F(2x2, 3x3) (winograd).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/float8.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

namespace {

using dnnl::memory;

// Winograd F(2x2, 3x3), eight channels at a time in vector registers (Float8), the rest one
// by one. Input: the 16 pixels d (row-major 4x4, each C floats) to v[k * stride + c], k = 4 i +
// j of B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <typename T>
__attribute__((always_inline)) inline void WinogradInputLanes(const T* a, T* v) {
  T b[16];
  for (int j = 0; j < 4; ++j) {  // B^T d, column j
    b[0 + j] = a[0 + j] - a[8 + j];
    b[4 + j] = a[4 + j] + a[8 + j];
    b[8 + j] = a[8 + j] - a[4 + j];
    b[12 + j] = a[4 + j] - a[12 + j];
  }
  for (int i = 0; i < 4; ++i) {  // (B^T d) B, row i
    const T* r = b + 4 * i;
    v[4 * i + 0] = r[0] - r[2];
    v[4 * i + 1] = r[1] + r[2];
    v[4 * i + 2] = r[2] - r[1];
    v[4 * i + 3] = r[1] - r[3];
  }
}

__attribute__((always_inline)) inline void WinogradInputBody(const float* const* d, float* v,
                                                             int64_t stride, int64_t ch) {
  int64_t c = 0;
  for (; c + 8 <= ch; c += 8) {
    Float8 a[16], t[16];
    for (int k = 0; k < 16; ++k) __builtin_memcpy(&a[k], d[k] + c, sizeof(Float8));
    WinogradInputLanes(a, t);
    for (int k = 0; k < 16; ++k) __builtin_memcpy(v + k * stride + c, &t[k], sizeof(Float8));
  }
  for (; c < ch; ++c) {
    float a[16], t[16];
    for (int k = 0; k < 16; ++k) a[k] = d[k][c];
    WinogradInputLanes(a, t);
    for (int k = 0; k < 16; ++k) v[k * stride + c] = t[k];
  }
}

// Output: the 16 products z[k * stride + o] of one tile to its 2x2 outputs A^T z A, A^T =
// [1 1 1 0; 0 1 -1 -1], added into y[0..3] (row-major; null: outside Y) over M channels.
template <typename T>
__attribute__((always_inline)) inline void WinogradOutputLanes(const T* a, T* out) {
  T s[8];
  for (int j = 0; j < 4; ++j) {  // A^T z, column j
    s[j] = a[j] + a[4 + j] + a[8 + j];
    s[4 + j] = a[4 + j] - a[8 + j] - a[12 + j];
  }
  out[0] = s[0] + s[1] + s[2];
  out[1] = s[1] - s[2] - s[3];
  out[2] = s[4] + s[5] + s[6];
  out[3] = s[5] - s[6] - s[7];
}

__attribute__((always_inline)) inline void WinogradOutputBody(const float* z, int64_t stride,
                                                              int64_t m, float* const* y) {
  int64_t o = 0;
  for (; o + 8 <= m; o += 8) {
    Float8 a[16], out[4];
    for (int k = 0; k < 16; ++k) __builtin_memcpy(&a[k], z + k * stride + o, sizeof(Float8));
    WinogradOutputLanes(a, out);
    for (int q = 0; q < 4; ++q) {
      if (y[q] == nullptr) continue;
      Float8 acc;
      __builtin_memcpy(&acc, y[q] + o, sizeof acc);
      acc += out[q];
      __builtin_memcpy(y[q] + o, &acc, sizeof acc);
    }
  }
  for (; o < m; ++o) {
    float a[16], out[4];
    for (int k = 0; k < 16; ++k) a[k] = z[k * stride + o];
    WinogradOutputLanes(a, out);
    for (int q = 0; q < 4; ++q) {
      if (y[q] != nullptr) y[q][o] += out[q];
    }
  }
}

#define REPRISE_WINO_IN_ARGS const float *const *d, float *v, int64_t stride, int64_t ch
#define REPRISE_WINO_OUT_ARGS const float *z, int64_t stride, int64_t m, float *const *y
using WinogradInputFn = void (*)(REPRISE_WINO_IN_ARGS);
using WinogradOutputFn = void (*)(REPRISE_WINO_OUT_ARGS);
__attribute__((target("avx512f"))) void WinogradInputAvx512(REPRISE_WINO_IN_ARGS) {
  WinogradInputBody(d, v, stride, ch);
}
__attribute__((target("avx2,fma"))) void WinogradInputAvx2(REPRISE_WINO_IN_ARGS) {
  WinogradInputBody(d, v, stride, ch);
}
void WinogradInputBaseline(REPRISE_WINO_IN_ARGS) { WinogradInputBody(d, v, stride, ch); }
__attribute__((target("avx512f"))) void WinogradOutputAvx512(REPRISE_WINO_OUT_ARGS) {
  WinogradOutputBody(z, stride, m, y);
}
__attribute__((target("avx2,fma"))) void WinogradOutputAvx2(REPRISE_WINO_OUT_ARGS) {
  WinogradOutputBody(z, stride, m, y);
}
void WinogradOutputBaseline(REPRISE_WINO_OUT_ARGS) { WinogradOutputBody(z, stride, m, y); }
#undef REPRISE_WINO_IN_ARGS
#undef REPRISE_WINO_OUT_ARGS

// Where the kernel's buffers lie in its workspace (offsets in bytes, 64-byte aligned).
struct TapRegionsWorkspace {
  size_t x = 0;         // X channels-last, when not stored so
  size_t y = 0;         // Y channels-last, when not stored so
  size_t gathered = 0;  // one tap's input pixels, [N x region, C]; Winograd: [16][chunk, C]
  size_t product = 0;   // one tap's product, [N x region, M], for a region short of Y;
                        // Winograd: [16][chunk, M]
  size_t total = 0;
};

class TapRegionsKernel final : public PreparedKernel {
 public:
  TapRegionsKernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs,
                   TapRegionsConv conv, std::shared_ptr<const memory> weights, int threads,
                   memory::format_tag chain)
      : op_(op),
        label_(std::move(label)),
        outputs_(std::move(outputs)),
        c_(std::move(conv)),
        weights_(std::move(weights)),
        threads_(std::max(1, threads)),
        x_stored_(StoredDesc(c_.x, c_.x_storage, chain)),
        y_stored_(StoredDesc(c_.y, c_.y_storage, chain)),
        x_nhwc_(StoredDesc(c_.x, Storage::kNhwc, chain)),
        y_nhwc_(StoredDesc(c_.y, Storage::kNhwc, chain)),
        r_stored_(StoredDesc(c_.y, c_.r_storage, chain)) {
    const dnnl::engine& engine = CpuEngine();
    if (x_stored_ != x_nhwc_) {
      x_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_stored_, engine, x_nhwc_));
    }
    if (y_stored_ != y_nhwc_) {
      y_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, y_nhwc_, engine, y_stored_));
    }
    if (c_.residual && r_stored_ != y_nhwc_) {
      r_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, r_stored_, engine, y_nhwc_));
    }
    LayOut();
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return ws_.total; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_.get_size() : 0; }
  std::string implementation() const override {
    if (c_.winograd) return "winograd F(2x2,3x3) channels-last, sgemm";
    if (c_.whole_window) return "im2col channels-last, sgemm";
    return absl::StrCat("tap regions (", c_.regions.size(), " taps, sgemm)");
  }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(threads_);
    const int64_t n = c_.x[0], ch = c_.x[1];
    const int64_t m = c_.y[1], oh = c_.y[2], ow = c_.y[3];
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    const float* x = static_cast<const float*>(args.inputs[0]);
    // Y channels-last: the output itself where it is stored so (a blocked layout is too on a
    // CPU without AVX2), else the workspace.
    float* acc =
        y_reorder_ ? reinterpret_cast<float*>(ws + ws_.y) : static_cast<float*>(args.outputs[0]);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream& stream = ThreadStream();
      if (x_reorder_) {
        memory from(x_stored_, engine, const_cast<void*>(args.inputs[0]));
        memory to(x_nhwc_, engine, ws + ws_.x);
        x_reorder_.execute(stream, from, to);
        stream.wait();
        x = reinterpret_cast<const float*>(ws + ws_.x);
      }
      // Y = R (or 0) + B, channels-last: one row of M per output pixel.
      const float* bias = c_.has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
      const size_t row_bytes = static_cast<size_t>(m) * sizeof(float);
      if (c_.residual) {
        if (r_reorder_) {
          memory from(r_stored_, engine, const_cast<void*>(args.inputs[3]));
          memory to(y_nhwc_, engine, acc);
          r_reorder_.execute(stream, from, to);
          stream.wait();
        } else if (args.inputs[3] != acc) {
          std::memcpy(acc, args.inputs[3], y_nhwc_.get_size());
        }
      }
      ParallelFor(n * oh * ow, threads_, static_cast<double>(m) * 0.25,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t p = begin; p < end; ++p) {
                      float* row = acc + p * m;
                      if (c_.residual) {
                        if (bias != nullptr) {
                          for (int64_t i = 0; i < m; ++i) row[i] += bias[i];
                        }
                      } else if (bias != nullptr) {
                        std::memcpy(row, bias, row_bytes);
                      } else {
                        std::memset(row, 0, row_bytes);
                      }
                    }
                  });
      const float* wt = static_cast<const float*>(weights_->get_data_handle());
      if (c_.winograd) {
        RETURN_IF_ERROR(AddWinograd(x, wt, acc, ws));
      } else if (c_.whole_window) {
        for (int64_t image = 0; image < n; ++image) {
          RETURN_IF_ERROR(AddWindow(image, x, wt, acc, ws));
        }
      } else {
        for (const TapRegion& r : c_.regions) {
          RETURN_IF_ERROR(AddTap(r, x, wt + r.tap * ch * m, acc, ws));
        }
      }
      ApplyConvActivation(c_.activation, acc, n * oh * ow * m, threads_);
      if (y_reorder_) {
        memory from(y_nhwc_, engine, acc);
        memory to(y_stored_, engine, args.outputs[0]);
        y_reorder_.execute(stream, from, to);
        stream.wait();
      }
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(label_, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  // Lays out the workspace.
  void LayOut() {
    const int64_t n = c_.x[0], ch = c_.x[1], m = c_.y[1], pixels = c_.y[2] * c_.y[3];
    // Rows gathered at once (of C x taps floats for the whole window, of C for one tap), and
    // rows of a product kept apart from Y (a tap's region short of Y).
    int64_t gathered = 0, apart = 0;
    if (c_.winograd) {
      // Tiles transformed at once: their 16 x (C + M) floats within about 2 MiB (kept in cache
      // between the transforms and the products), at least 32 (products of a few rows run
      // poorly), at most all of them.
      // With more threads, each takes whole chunks (its products on one thread: sgemm splits
      // products of a few hundred rows poorly), so that there is a chunk for every thread.
      const int64_t tiles = n * ((c_.y[2] + 1) / 2) * ((c_.y[3] + 1) / 2);
      // The chunks are then made equal, and their number a multiple of the threads, so that
      // no thread waits on another's extra or larger chunk.
      chunk_ = std::min(tiles, std::max<int64_t>(32, 32768 / (ch + m)));
      if (threads_ > 1) {
        chunk_ = std::min(chunk_, std::max<int64_t>(16, (tiles + threads_ - 1) / threads_));
      }
      int64_t chunks = (tiles + chunk_ - 1) / chunk_;
      if (threads_ > 1 && chunks > 1) chunks = (chunks + threads_ - 1) / threads_ * threads_;
      chunk_ = (tiles + chunks - 1) / chunks;
      gathered = 16 * chunk_ * threads_;
      apart = 16 * chunk_ * threads_;
    } else if (c_.whole_window) {
      gathered = pixels * c_.kernel[0] * c_.kernel[1];  // one image's window
    } else {
      for (const TapRegion& r : c_.regions) {
        gathered = std::max(gathered, n * r.pixels());
        if (r.pixels() < pixels) apart = std::max(apart, n * r.pixels());
      }
    }
    ws_.x = 0;
    ws_.y = ws_.x + ConvAlignUp(x_reorder_ ? x_nhwc_.get_size() : 0);
    ws_.gathered = ws_.y + ConvAlignUp(y_reorder_ ? y_nhwc_.get_size() : 0);
    ws_.product = ws_.gathered + ConvAlignUp(static_cast<size_t>(gathered * ch) * sizeof(float));
    ws_.total = ws_.product + ConvAlignUp(static_cast<size_t>(apart * m) * sizeof(float));
  }

  // acc += the convolution of X (channels-last) by Winograd's F(2x2, 3x3) (TapRegionsConv::
  // winograd), chunk_ tiles at a time; u: the transformed weights, [16][C, M]. One thread: the
  // chunks in turn, their transforms and products on the kernel's threads. More: chunks split
  // over the threads, each thread with its own buffers (slot = its OpenMP thread number).
  absl::Status AddWinograd(const float* x, const float* u, float* acc, uint8_t* ws) const {
    const int64_t ch = c_.x[1], m = c_.y[1];
    const int64_t tiles = c_.x[0] * ((c_.y[2] + 1) / 2) * ((c_.y[3] + 1) / 2);
    const int64_t chunks = (tiles + chunk_ - 1) / chunk_;
    float* v = reinterpret_cast<float*>(ws + ws_.gathered);         // per slot: [16][chunk, C]
    float* z = reinterpret_cast<float*>(ws + ws_.product);          // per slot: [16][chunk, M]
    const std::vector<float> zeros(static_cast<size_t>(ch), 0.0f);  // a pixel of padding
    if (threads_ == 1 || chunks == 1) {
      for (int64_t first = 0; first < tiles; first += chunk_) {
        RETURN_IF_ERROR(WinogradChunk(x, u, acc, first, std::min(chunk_, tiles - first), v, z,
                                      zeros.data(), threads_));
      }
      return absl::OkStatus();
    }
    const double chunk_cost = static_cast<double>(chunk_) * static_cast<double>(ch * m) * 8.0;
    return ParallelForStatus(
        chunks, threads_, chunk_cost,
        [&](int64_t begin, int64_t end) -> absl::Status {
          const int64_t slot = omp_get_thread_num();
          if (slot >= threads_) return absl::InternalError("more threads than buffers");
          float* sv = v + slot * 16 * chunk_ * ch;
          float* sz = z + slot * 16 * chunk_ * m;
          for (int64_t i = begin; i < end; ++i) {
            const int64_t first = i * chunk_;
            RETURN_IF_ERROR(WinogradChunk(x, u, acc, first, std::min(chunk_, tiles - first), sv, sz,
                                          zeros.data(), 1));
          }
          return absl::OkStatus();
        },
        1);
  }

  // The tiles [first, first + count) of AddWinograd through the buffers v, z, on `threads`.
  absl::Status WinogradChunk(const float* x, const float* u, float* acc, int64_t first,
                             int64_t count, float* v, float* z, const float* zeros,
                             int threads) const {
    const int64_t ch = c_.x[1], h = c_.x[2], w = c_.x[3];
    const int64_t m = c_.y[1], oh = c_.y[2], ow = c_.y[3];
    const int64_t ph = c_.pads_begin[0], pw = c_.pads_begin[1];
    const int64_t tiles_h = (oh + 1) / 2, tiles_w = (ow + 1) / 2, chunk = chunk_;
    static const WinogradInputFn input =
        PickForThisCpu(&WinogradInputAvx512, &WinogradInputAvx2, &WinogradInputBaseline);
    static const WinogradOutputFn output =
        PickForThisCpu(&WinogradOutputAvx512, &WinogradOutputAvx2, &WinogradOutputBaseline);
    ParallelFor(count, threads, static_cast<double>(ch) * 8.0, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t tile = first + t, image = tile / (tiles_h * tiles_w);
        const int64_t ti = tile / tiles_w % tiles_h, tj = tile % tiles_w;
        const float* d[16];  // the tile's 4x4 input pixels (padding: zeros)
        for (int64_t i = 0; i < 4; ++i) {
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t ih = 2 * ti - ph + i, iw = 2 * tj - pw + j;
            d[i * 4 + j] = ih >= 0 && ih < h && iw >= 0 && iw < w
                               ? x + ((image * h + ih) * w + iw) * ch
                               : zeros;
          }
        }
        input(d, v + t * ch, chunk * ch, ch);
      }
    });
    for (int64_t k = 0; k < 16; ++k) {
      RETURN_IF_ERROR(Sgemm(false, false, count, m, ch, 1.0f, v + k * chunk * ch, ch,
                            u + k * ch * m, m, 0.0f, z + k * chunk * m, m));
    }
    ParallelFor(count, threads, static_cast<double>(m) * 8.0, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t tile = first + t, image = tile / (tiles_h * tiles_w);
        const int64_t ti = tile / tiles_w % tiles_h, tj = tile % tiles_w;
        float* y[4];  // the tile's 2x2 outputs (outside Y: none)
        for (int64_t i = 0; i < 2; ++i) {
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t r = 2 * ti + i, col = 2 * tj + j;
            y[i * 2 + j] = r < oh && col < ow ? acc + ((image * oh + r) * ow + col) * m : nullptr;
          }
        }
        output(z + t * m, chunk * m, m, y);
      }
    });
    return absl::OkStatus();
  }

  // acc's rows of `image` += its whole window gathered, times the [taps x C, M] weights.
  absl::Status AddWindow(int64_t image, const float* x, const float* wt, float* acc,
                         uint8_t* ws) const {
    const int64_t ch = c_.x[1], h = c_.x[2], w = c_.x[3];
    const int64_t m = c_.y[1], oh = c_.y[2], ow = c_.y[3];
    const int64_t kh_count = c_.kernel[0], kw_count = c_.kernel[1];
    const int64_t sh = c_.strides[0], sw = c_.strides[1];
    const int64_t dh = c_.dilations[0], dw = c_.dilations[1];
    const int64_t ph = c_.pads_begin[0], pw = c_.pads_begin[1];
    const int64_t k = kh_count * kw_count * ch;  // a gathered row
    float* col = reinterpret_cast<float*>(ws + ws_.gathered);
    const float* xi = x + image * h * w * ch;
    const size_t pixel_bytes = static_cast<size_t>(ch) * sizeof(float);
    // Item: one output row.
    ParallelFor(oh, threads_, static_cast<double>(ow * k) * 0.5, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t o = 0; o < ow; ++o) {
          float* to = col + (row * ow + o) * k;
          const int64_t iw_first = o * sw - pw;
          // The taps kw whose column lies inside the input: [kw0, kw1).
          const auto [kw0, kw1] = InsideRange(w, kw_count, iw_first, dw);
          for (int64_t kh = 0; kh < kh_count; ++kh) {
            float* run = to + kh * kw_count * ch;
            const int64_t ih = row * sh + kh * dh - ph;
            if (ih < 0 || ih >= h || kw1 <= kw0) {
              std::memset(run, 0, static_cast<size_t>(kw_count) * pixel_bytes);
              continue;
            }
            std::memset(run, 0, static_cast<size_t>(kw0) * pixel_bytes);
            const float* from = xi + (ih * w + iw_first + kw0 * dw) * ch;  // tap kw0's pixel
            if (dw == 1) {
              std::memcpy(run + kw0 * ch, from, static_cast<size_t>(kw1 - kw0) * pixel_bytes);
            } else {
              for (int64_t kw = kw0; kw < kw1; ++kw) {
                std::memcpy(run + kw * ch, from + (kw - kw0) * dw * ch, pixel_bytes);
              }
            }
            std::memset(run + kw1 * ch, 0, static_cast<size_t>(kw_count - kw1) * pixel_bytes);
          }
        }
      }
    });
    return Sgemm(false, false, oh * ow, m, k, 1.0f, col, k, wt, m, 1.0f, acc + image * oh * ow * m,
                 m);
  }

  // acc += X's pixels under tap r.tap times wt [C, M], over r's rectangle.
  absl::Status AddTap(const TapRegion& r, const float* x, const float* wt, float* acc,
                      uint8_t* ws) const {
    const int64_t n = c_.x[0], ch = c_.x[1], h = c_.x[2], w = c_.x[3];
    const int64_t m = c_.y[1], oh = c_.y[2], ow = c_.y[3];
    const int64_t kh = r.tap / c_.kernel[1], kw = r.tap % c_.kernel[1];
    const int64_t sh = c_.strides[0], sw = c_.strides[1];
    const int64_t rows = r.oh1 - r.oh0, cols = r.ow1 - r.ow0, count = n * rows * cols;
    // The input pixel under the rectangle's first output pixel, per image.
    const int64_t ih0 = r.oh0 * sh + kh * c_.dilations[0] - c_.pads_begin[0];
    const int64_t iw0 = r.ow0 * sw + kw * c_.dilations[1] - c_.pads_begin[1];
    const float* a = nullptr;
    if (sh == 1 && sw == 1 && cols == w && (n == 1 || rows == h)) {
      a = x + (ih0 * w + iw0) * ch;  // whole input rows: already [count, C]
    } else {
      float* g = reinterpret_cast<float*>(ws + ws_.gathered);
      const size_t pixel_bytes = static_cast<size_t>(ch) * sizeof(float);
      // Item: one output row of the rectangle in one image.
      ParallelFor(n * rows, threads_, static_cast<double>(cols * ch) * 0.25,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const int64_t image = item / rows, row = item % rows;
                      const float* from = x + ((image * h + ih0 + row * sh) * w + iw0) * ch;
                      float* to = g + item * cols * ch;
                      if (sw == 1) {
                        std::memcpy(to, from, static_cast<size_t>(cols) * pixel_bytes);
                      } else {
                        for (int64_t j = 0; j < cols; ++j) {
                          std::memcpy(to + j * ch, from + j * sw * ch, pixel_bytes);
                        }
                      }
                    }
                  });
      a = g;
    }
    if (rows == oh && cols == ow) {  // the whole output: add in place
      return Sgemm(false, false, count, m, ch, 1.0f, a, ch, wt, m, 1.0f, acc, m);
    }
    float* z = reinterpret_cast<float*>(ws + ws_.product);
    RETURN_IF_ERROR(Sgemm(false, false, count, m, ch, 1.0f, a, ch, wt, m, 0.0f, z, m));
    ParallelFor(n * rows, threads_, static_cast<double>(cols * m) * 0.5,
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    const int64_t image = item / rows, row = item % rows;
                    float* to = acc + ((image * oh + r.oh0 + row) * ow + r.ow0) * m;
                    const float* from = z + item * cols * m;
                    for (int64_t i = 0; i < cols * m; ++i) to[i] += from[i];
                  }
                });
    return absl::OkStatus();
  }

  std::string op_;
  std::string label_;
  std::vector<TensorDesc> outputs_;
  TapRegionsConv c_;
  std::shared_ptr<const memory> weights_;  // [taps, C, M]
  int threads_ = 1;
  memory::desc x_stored_, y_stored_, x_nhwc_, y_nhwc_, r_stored_;
  dnnl::reorder x_reorder_, y_reorder_, r_reorder_;
  TapRegionsWorkspace ws_;
  int64_t chunk_ = 0;  // Winograd: tiles transformed at once
};

}  // namespace

std::vector<TapRegion> TapRegions(const runtime::Shape& in, const runtime::Shape& out,
                                  const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dilations,
                                  const std::vector<int64_t>& pads_begin) {
  std::vector<TapRegion> regions;
  for (int64_t kh = 0; kh < kernel[0]; ++kh) {
    const auto [oh0, oh1] =
        InsideRange(in[0], out[0], kh * dilations[0] - pads_begin[0], strides[0]);
    for (int64_t kw = 0; kw < kernel[1]; ++kw) {
      const auto [ow0, ow1] =
          InsideRange(in[1], out[1], kw * dilations[1] - pads_begin[1], strides[1]);
      if (oh1 > oh0 && ow1 > ow0) regions.push_back({kh * kernel[1] + kw, oh0, oh1, ow0, ow1});
    }
  }
  return regions;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTapRegionsConv(const PrepareContext& context,
                                                                      TapRegionsConv conv) {
  const int64_t m = conv.y[1], c = conv.x[1], taps = conv.kernel[0] * conv.kernel[1];
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, conv.y)};
  if (conv.winograd) {
    // [16, C, M]: G g G^T of each 3x3 g = W[o, ch], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1];
    // read from W [M, C, 9] as it lies (the cache key: dimensions [M, C, 9] to [16 C, M]).
    const memory::desc read({m, c, 9}, memory::data_type::f32, memory::dims{c * 9, 9, 1});
    const float* w = conv.weights;
    std::shared_ptr<const memory> weights =
        PackWeightsVia(context, conv.weights, read, PlainDesc({16 * c, m}), [&](memory& to) {
          float* out = static_cast<float*>(to.get_data_handle());
          for (int64_t o = 0; o < m; ++o) {
            for (int64_t ch = 0; ch < c; ++ch) {
              const float* g = w + (o * c + ch) * 9;
              float gg[12];  // G g, 4x3
              for (int b = 0; b < 3; ++b) {
                gg[b] = g[b];
                gg[3 + b] = 0.5f * (g[b] + g[3 + b] + g[6 + b]);
                gg[6 + b] = 0.5f * (g[b] - g[3 + b] + g[6 + b]);
                gg[9 + b] = g[6 + b];
              }
              for (int i = 0; i < 4; ++i) {
                const float* q = gg + 3 * i;
                const float row[4] = {q[0], 0.5f * (q[0] + q[1] + q[2]),
                                      0.5f * (q[0] - q[1] + q[2]), q[2]};
                for (int j = 0; j < 4; ++j) out[((4 * i + j) * c + ch) * m + o] = row[j];
              }
            }
          }
        });
    return std::make_unique<TapRegionsKernel>(context.op, NodeLabel(context), std::move(outputs),
                                              std::move(conv), std::move(weights),
                                              context.intra_op_threads, ChainTag(context));
  }
  // [taps, C, M]: tap t's weights W[:, :, t] transposed, read from W [M, C, taps] with strides
  // (1, taps, C taps): the packed-weight cache's key.
  const memory::desc read({taps, c, m}, memory::data_type::f32, memory::dims{1, taps, c * taps});
  const float* w = conv.weights;
  std::shared_ptr<const memory> weights =
      PackWeightsVia(context, conv.weights, read, PlainDesc({taps * c, m}), [&](memory& to) {
        float* out = static_cast<float*>(to.get_data_handle());
        for (int64_t t = 0; t < taps; ++t) {
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t o = 0; o < m; ++o) out[(t * c + ch) * m + o] = w[(o * c + ch) * taps + t];
          }
        }
      });
  auto kernel = std::make_unique<TapRegionsKernel>(
      context.op, NodeLabel(context), std::move(outputs), std::move(conv), std::move(weights),
      context.intra_op_threads, ChainTag(context));
  return kernel;
}

}  // namespace reprise::kernels::cpu
