// Dilated convolutions as undilated ones over the input's phases (conv.h, MaybeDilatedAsPhases).
//
// A 2-D convolution dilated by (DH, DW) reads, for output pixel (y * DH + p, x * DW + q), only
// input pixels of the same phase (p, q): rows p, p + DH, ... and columns q, q + DW, .... With
// stride 1 and pads D x (K - 1) / 2 on every side, each phase of the output is the undilated
// convolution (pads (K - 1) / 2) of the same phase of the input, an image of ceil(H / DH) x
// ceil(W / DW) (zeros past the input's last row and column, as the dilated convolution's padding
// is). Only 3x3 convolutions, which Winograd takes, are run so. The phases of a
// batch of N are a batch of N x DH x DW such images, which Winograd takes where the dilated
// convolution only has the direct kernel (FCN's and DeepLabV3's ResNet-50 at output stride 8: 256
// -> 256 at dilation 2 and 512 -> 512 at dilation 4 over 28x28; one thread, ms direct over 28x28 /
// Winograd over the phases, tools/bench/onednn_winograd_grid.cc: 512 -> 512 as 16 phases of
// 7x7 17.2-17.8 / 12.7, 256 -> 256 as 4 of 14x14 4.3-4.5 / 3.4-3.5; two threads 8.7-10.6 / 6.1-7.0
// and 2.1-2.5 / 1.4-1.7). The copies into and out of phase order move each value once.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Phases of less than this many pixels per side are left to the dilated kernel: 7x7 is the
// smallest phase measured (Winograd's tiles cover a smaller image with more waste).
constexpr int64_t kMinPhaseSide = 7;

// How a 4-D value [N, C, H, W] lies in memory, as runs of contiguous floats: channel group g of
// pixel (h, w) of image n starts at n * n_stride + g * group_stride + h * h_stride +
// w * w_stride and holds `run` floats (plain: one channel; blocked: one channel block;
// channels-last: all the channels).
struct RunLayout {
  int64_t groups = 0, run = 0;
  int64_t n_stride = 0, group_stride = 0, h_stride = 0, w_stride = 0;
};

std::optional<RunLayout> RunLayoutOf(const runtime::Shape& s, Storage how,
                                     memory::format_tag chain) {
  const int64_t c = s[1], h = s[2], w = s[3];
  RunLayout l;
  if (how == Storage::kPlain) {
    l.groups = c;
    l.run = 1;
  } else if (how == Storage::kNhwc ||
             (how == Storage::kBlocked && chain == memory::format_tag::nhwc)) {
    l.groups = 1;
    l.run = c;
    l.w_stride = c;
    l.h_stride = w * c;
    l.n_stride = h * w * c;
    return l;
  } else if (how == Storage::kBlocked &&
             (chain == memory::format_tag::nChw16c || chain == memory::format_tag::nChw8c)) {
    l.run = chain == memory::format_tag::nChw16c ? 16 : 8;
    l.groups = (c + l.run - 1) / l.run;
  } else {
    return std::nullopt;
  }
  l.w_stride = l.run;
  l.h_stride = w * l.run;
  l.group_stride = h * l.h_stride;
  l.n_stride = l.groups * l.group_stride;
  return l;
}

// Copies between a value of N images [.., H, W] (`whole`) and its phases, N x DH x DW images
// [.., PH, PW] (`phases`, PH = ceil(H / DH), PW = ceil(W / DW); image (n * DH + p) * DW + q holds
// phase (p, q) of image n), both laid out as `whole` / `phase` say. Where DH or DW does not divide
// H or W, some phases reach past the last row or column: those pixels are zeros in the phases (the
// padding that the dilated convolution reads there) and are not copied back.
struct PhaseCopy {
  int64_t n = 0, h = 0, w = 0, dh = 1, dw = 1, ph = 0, pw = 0;
  RunLayout whole, phase;

  // to_phases: whole -> phases, else phases -> whole. Item: one row of one channel group of one
  // phase image.
  void Run(const float* from, float* to, bool to_phases, int threads) const {
    const int64_t rows = n * dh * dw * whole.groups * ph;
    const int64_t run = whole.run;
    ParallelFor(
        rows, threads, static_cast<double>(pw * run) * 0.25, [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            int64_t rest = item;
            const int64_t y = rest % ph;
            rest /= ph;
            const int64_t g = rest % whole.groups;
            rest /= whole.groups;
            const int64_t q = rest % dw;
            rest /= dw;
            const int64_t p = rest % dh;
            const int64_t image = rest / dh;
            const int64_t row = y * dh + p;
            // Columns x of the phase whose pixel x * DW + q lies inside the image.
            const int64_t inside = row < h ? (w - q + dw - 1) / dw : 0;
            const int64_t at_whole = image * whole.n_stride + g * whole.group_stride +
                                     row * whole.h_stride + q * whole.w_stride;
            const int64_t at_phase = item / (whole.groups * ph) * phase.n_stride +
                                     g * phase.group_stride + y * phase.h_stride;
            const int64_t step_whole = dw * whole.w_stride;
            if (run == 1 && whole.w_stride == 1 && phase.w_stride == 1) {
              // Plain rows: a strided gather or scatter of single floats (stride 2 unrolled by
              // the compiler; element by element, a plain [8, 32, 28, 28] in and out took 0.66 of
              // its 1.73 ms).
              const float* src = to_phases ? from + at_whole : from + at_phase;
              float* dst = to_phases ? to + at_phase : to + at_whole;
              if (to_phases) {
                if (dw == 2) {
                  for (int64_t x = 0; x < inside; ++x) dst[x] = src[2 * x];
                } else {
                  for (int64_t x = 0; x < inside; ++x) dst[x] = src[x * dw];
                }
                for (int64_t x = inside; x < pw; ++x) dst[x] = 0.0f;
              } else if (dw == 2) {
                for (int64_t x = 0; x < inside; ++x) dst[2 * x] = src[x];
              } else {
                for (int64_t x = 0; x < inside; ++x) dst[x * dw] = src[x];
              }
              continue;
            }
            for (int64_t x = 0; x < inside; ++x) {
              const float* src = to_phases ? from + at_whole + x * step_whole
                                           : from + at_phase + x * phase.w_stride;
              float* dst =
                  to_phases ? to + at_phase + x * phase.w_stride : to + at_whole + x * step_whole;
              for (int64_t i = 0; i < run; ++i) dst[i] = src[i];
            }
            if (!to_phases) continue;
            for (int64_t x = inside; x < pw; ++x) {
              float* dst = to + at_phase + x * phase.w_stride;
              for (int64_t i = 0; i < run; ++i) dst[i] = 0.0f;
            }
          }
        });
  }
};

class PhasesKernel final : public PreparedKernel {
 public:
  PhasesKernel(std::unique_ptr<PreparedKernel> inner, std::vector<TensorDesc> outputs, PhaseCopy x,
               PhaseCopy y, size_t x_bytes, size_t y_bytes, size_t y_stored_bytes, size_t inputs,
               int threads)
      : inner_(std::move(inner)),
        outputs_(std::move(outputs)),
        x_(x),
        y_(y),
        y_stored_bytes_(y_stored_bytes),
        inputs_(inputs),
        threads_(threads) {
    x_at_ = ConvAlignUp(inner_->workspace_bytes());
    y_at_ = x_at_ + ConvAlignUp(x_bytes);
    total_ = y_at_ + ConvAlignUp(y_bytes);
  }

  absl::string_view op() const override { return inner_->op(); }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_bytes_ : 0; }
  std::string implementation() const override {
    return absl::StrCat("dilated as ", x_.dh, "x", x_.dw, " phases of ", x_.ph, "x", x_.pw, ": ",
                        inner_->implementation());
  }
  uint64_t settling_runs() const override { return inner_->settling_runs(); }

  absl::Status Run(const KernelArgs& args) const override {
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    float* x = reinterpret_cast<float*>(ws + x_at_);
    float* y = reinterpret_cast<float*>(ws + y_at_);
    x_.Run(static_cast<const float*>(args.inputs[0]), x, /*to_phases=*/true, threads_);
    const void* inputs[3] = {x, args.inputs[1], inputs_ == 3 ? args.inputs[2] : nullptr};
    void* outputs[1] = {y};
    RETURN_IF_ERROR(inner_->Run(KernelArgs{inputs, outputs, ws}));
    y_.Run(y, static_cast<float*>(args.outputs[0]), /*to_phases=*/false, threads_);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PreparedKernel> inner_;
  std::vector<TensorDesc> outputs_;
  PhaseCopy x_, y_;
  size_t y_stored_bytes_ = 0;  // Y as stored (blocked: its channel blocks padded)
  size_t inputs_ = 2;          // X, W and perhaps B
  int threads_ = 1;
  size_t x_at_ = 0, y_at_ = 0, total_ = 0;
};

}  // namespace

std::unique_ptr<PreparedKernel> MaybeDilatedAsPhases(const PrepareContext& context,
                                                     const ConvPostOps& post) {
  if (post.residual || post.depthwise.has_value() || context.inputs.size() < 2 ||
      context.inputs.size() > 3) {
    return nullptr;
  }
  const TensorDesc& x = context.inputs[0];
  const TensorDesc& w = context.inputs[1];
  if (x.dtype != DataType::kFloat32 || w.dtype != DataType::kFloat32 || x.shape.size() != 4 ||
      w.shape.size() != 4 || w.shape[2] != 3 || w.shape[3] != 3 || w.data == nullptr ||
      x.shape[1] != w.shape[1] || runtime::NumElements(x.shape) <= 0 || w.shape[0] <= 0) {
    return nullptr;
  }
  absl::StatusOr<int64_t> group = AttrsOf(context).GetInt("group", 1);
  if (!group.ok() || *group != 1) return nullptr;
  absl::StatusOr<Window> win =
      ForwardWindow(context, {x.shape[2], x.shape[3]}, {w.shape[2], w.shape[3]},
                    /*ceil_mode=*/false);
  if (!win.ok() || win->kernel != std::vector<int64_t>{w.shape[2], w.shape[3]}) return nullptr;
  bool dilated = false;
  std::vector<int64_t> pads(4);
  for (int i = 0; i < 2; ++i) {
    const int64_t k = win->kernel[i], d = win->dilations[i], side = x.shape[2 + i];
    if (win->strides[i] != 1 || d < 1 || k % 2 == 0 ||
        side / d + (side % d != 0 ? 1 : 0) < kMinPhaseSide || win->pads_begin[i] != d * (k / 2) ||
        win->pads_end[i] != d * (k / 2)) {
      return nullptr;
    }
    dilated = dilated || d > 1;
    pads[i] = pads[i + 2] = k / 2;
  }
  if (!dilated) return nullptr;
  const int64_t n = x.shape[0], dh = win->dilations[0], dw = win->dilations[1];
  const int64_t ph = x.shape[2] / dh + (x.shape[2] % dh != 0 ? 1 : 0);
  const int64_t pw = x.shape[3] / dw + (x.shape[3] % dw != 0 ? 1 : 0), m = w.shape[0];
  // The phases hold less than twice X's pixels (each side rounds up by less than D, which is at
  // most a sixth of it), but X's shape comes from outside: counted checked.
  if (!runtime::CheckedElementCount({n, dh, dw, std::max(x.shape[1], m), ph, pw},
                                    std::numeric_limits<int64_t>::max() / 64)
           .has_value()) {
    return nullptr;
  }
  const memory::format_tag chain = ChainTag(context);

  // The undilated convolution over the phases, prepared as any other (Winograd by the same
  // bounds, or the direct kernel).
  Attributes attrs;
  attrs.Set("kernel_shape", win->kernel);
  attrs.Set("pads", pads);
  std::vector<TensorDesc> inputs(context.inputs.begin(), context.inputs.end());
  inputs[0].shape = {n * dh * dw, x.shape[1], ph, pw};
  inputs[0].data = nullptr;  // a constant X (folded at load) is X, not its phases
  PrepareContext phases = context;
  phases.inputs = inputs;
  phases.attributes = &attrs;
  absl::StatusOr<std::unique_ptr<PreparedKernel>> inner = PrepareConvWith(phases, post);
  if (!inner.ok() || !absl::StrContains((*inner)->implementation(), "wino")) return nullptr;

  const runtime::Shape y_whole = {n, m, x.shape[2], x.shape[3]};
  const runtime::Shape y_phases = {n * dh * dw, m, ph, pw};
  std::optional<RunLayout> xw = RunLayoutOf(x.shape, post.x, chain);
  std::optional<RunLayout> xp = RunLayoutOf(inputs[0].shape, post.x, chain);
  std::optional<RunLayout> yw = RunLayoutOf(y_whole, post.y, chain);
  std::optional<RunLayout> yp = RunLayoutOf(y_phases, post.y, chain);
  if (!xw || !xp || !yw || !yp || (*inner)->outputs().size() != 1 ||
      (*inner)->outputs()[0].shape != y_phases) {
    return nullptr;
  }
  const PhaseCopy x_copy{n, x.shape[2], x.shape[3], dh, dw, ph, pw, *xw, *xp};
  const PhaseCopy y_copy{n, x.shape[2], x.shape[3], dh, dw, ph, pw, *yw, *yp};
  try {
    const size_t x_bytes = StoredDesc(inputs[0].shape, post.x, chain).get_size();
    const size_t y_bytes =
        std::max(StoredDesc(y_phases, post.y, chain).get_size(), (*inner)->output_storage_bytes(0));
    const size_t y_stored_bytes = StoredDesc(y_whole, post.y, chain).get_size();
    return std::make_unique<PhasesKernel>(
        *std::move(inner), std::vector<TensorDesc>{Desc(DataType::kFloat32, y_whole)}, x_copy,
        y_copy, x_bytes, y_bytes, y_stored_bytes, context.inputs.size(), context.intra_op_threads);
  } catch (const dnnl::error&) {
    return nullptr;  // oneDNN refused a descriptor: the dilated convolution as it is
  }
}

}  // namespace reprise::kernels::cpu
