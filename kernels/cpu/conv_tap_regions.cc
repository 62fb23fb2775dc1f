// Tap regions (conv.h): a 2-D convolution as one product per tap over only the output pixels
// where that tap reads inside its input. A dilated convolution wider than its input reads
// padding with most of its taps (DeepLabV3's rate-12 3x3 convolution over a 14x14 map: 324 of
// its 1764 tap-pixel pairs read the input); the direct kernels multiply that padding all the
// same. Here X is read channels-last, each tap's pixels gathered into rows of C, multiplied by
// the tap's [C, M] weights (sgemm) and added into Y channels-last. In place of oneDNN's gemm
// convolution the same kernel also runs the whole window, gathered per image (whole_window).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

namespace {

using dnnl::memory;

// Where the kernel's buffers lie in its workspace (offsets in bytes, 64-byte aligned).
struct TapRegionsWorkspace {
  size_t x = 0;         // X channels-last, when not stored so
  size_t y = 0;         // Y channels-last, when not stored so
  size_t gathered = 0;  // one tap's input pixels, [N x region, C]
  size_t product = 0;   // one tap's product, [N x region, M], for a region short of Y
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
        y_nhwc_(StoredDesc(c_.y, Storage::kNhwc, chain)) {
    const dnnl::engine& engine = CpuEngine();
    if (x_stored_ != x_nhwc_) {
      x_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_stored_, engine, x_nhwc_));
    }
    if (y_stored_ != y_nhwc_) {
      y_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, y_nhwc_, engine, y_stored_));
    }
    LayOut();
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return ws_.total; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_.get_size() : 0; }
  std::string implementation() const override {
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
      dnnl::stream stream(engine);
      if (x_reorder_) {
        memory from(x_stored_, engine, const_cast<void*>(args.inputs[0]));
        memory to(x_nhwc_, engine, ws + ws_.x);
        x_reorder_.execute(stream, from, to);
        stream.wait();
        x = reinterpret_cast<const float*>(ws + ws_.x);
      }
      // Y = B (or 0), channels-last: one row of M per output pixel.
      const float* bias = c_.has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
      const size_t row_bytes = static_cast<size_t>(m) * sizeof(float);
      ParallelFor(n * oh * ow, threads_, static_cast<double>(m) * 0.25,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t p = begin; p < end; ++p) {
                      if (bias != nullptr) {
                        std::memcpy(acc + p * m, bias, row_bytes);
                      } else {
                        std::memset(acc + p * m, 0, row_bytes);
                      }
                    }
                  });
      const float* wt = static_cast<const float*>(weights_->get_data_handle());
      if (c_.whole_window) {
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
    if (c_.whole_window) {
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
  memory::desc x_stored_, y_stored_, x_nhwc_, y_nhwc_;
  dnnl::reorder x_reorder_, y_reorder_;
  TapRegionsWorkspace ws_;
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
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, conv.y)};
  auto kernel = std::make_unique<TapRegionsKernel>(
      context.op, NodeLabel(context), std::move(outputs), std::move(conv), std::move(weights),
      context.intra_op_threads, ChainTag(context));
  return kernel;
}

}  // namespace reprise::kernels::cpu
