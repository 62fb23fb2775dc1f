// Resize (opset 10 and 11+; float32, any rank), Upsample (opsets 7-9, as Resize-10) and GridSample.
// Resize: nearest (all four rounding modes), linear and cubic,
// with every coordinate_transformation_mode of ONNX (tf_crop_and_resize with roi and
// extrapolation_value; tf_half_pixel_for_nn of opset 11). Each output position along each axis
// gets up to four taps (input index, weight) at Prepare; Run sums over the taps' product,
// so n-linear and n-cubic interpolation come out separable as in ONNX's reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

constexpr int kMaxTaps = 4;

struct AxisTaps {
  std::vector<int64_t> index;  // kMaxTaps per output position (clamped to the input)
  std::vector<float> weight;   // kMaxTaps per output position
  std::vector<int8_t> count;   // taps used per output position
  std::vector<bool> outside;   // tf_crop_and_resize: the position takes extrapolation_value
};

struct ResizeOptions {
  std::string coord_mode;
  std::string mode;
  std::string nearest_mode;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
};

absl::StatusOr<double> SourceCoordinate(const PrepareContext& context, const ResizeOptions& opt,
                                        double x, double scale, int64_t in_len, double roi_start,
                                        double roi_end) {
  const double out_len = scale * static_cast<double>(in_len);
  const std::string& m = opt.coord_mode;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out_len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "align_corners") return out_len == 1 ? 0.0 : x * (in_len - 1) / (out_len - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "tf_crop_and_resize") {
    const double span = (roi_end - roi_start) * (in_len - 1);
    const double x_ori = out_len == 1 ? span / 2 : x * span / (out_len - 1);
    return x_ori + roi_start * (in_len - 1);
  }
  return InvalidArgument(context, "coordinate_transformation_mode \"", m, "\" is not known");
}

// One plane [in_h, in_w] resized to [rows.count.size(), cols.count.size()], separably: every
// input row interpolated along W first (into `across`, in double), then each output row is the
// weighted sum of its source rows there (vectorised across the row). The same sums as the
// general loop's, grouped by row.
void PlanarResize(const float* in, int64_t in_h, int64_t in_w, const AxisTaps& rows,
                  const AxisTaps& cols, std::vector<double>& across, float* out) {
  const int64_t out_h = static_cast<int64_t>(rows.count.size());
  const int64_t out_w = static_cast<int64_t>(cols.count.size());
  across.resize(static_cast<size_t>(in_h * out_w));
  for (int64_t r = 0; r < in_h; ++r) {
    const float* row = in + r * in_w;
    double* dst = across.data() + r * out_w;
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const size_t ck = static_cast<size_t>(ow * kMaxTaps);
      double sum = 0;
      for (int b = 0; b < cols.count[ow]; ++b) {
        sum += static_cast<double>(cols.weight[ck + b]) * row[cols.index[ck + b]];
      }
      dst[ow] = sum;
    }
  }
  for (int64_t oh = 0; oh < out_h; ++oh, out += out_w) {
    const size_t rk = static_cast<size_t>(oh * kMaxTaps);
    const int taps = rows.count[oh];
    const double w0 = rows.weight[rk];
    const double* r0 = across.data() + rows.index[rk] * out_w;
    if (taps == 2) {
      const double w1 = rows.weight[rk + 1];
      const double* r1 = across.data() + rows.index[rk + 1] * out_w;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        out[ow] = static_cast<float>(0.0 + w0 * r0[ow] + w1 * r1[ow]);
      }
      continue;
    }
    for (int64_t ow = 0; ow < out_w; ++ow) {
      double sum = 0;
      for (int a = 0; a < taps; ++a) {
        sum += static_cast<double>(rows.weight[rk + a]) * across[rows.index[rk + a] * out_w + ow];
      }
      out[ow] = static_cast<float>(sum);
    }
  }
}

// One plane [.., in_w] resized where each output row and column takes one input row and column
// (nearest, or any mode whose taps come out whole): each output row gathers its source row's
// columns, or copies the output row above when that came from the same source row (upsampling
// by a whole factor gathers one row in every factor).
// `twice`: the columns are each input column twice in order (cols[ow] = ow / 2), written as
// pairs.
void PlanarGather(const float* in, int64_t in_w, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& cols, bool twice, float* out) {
  const int64_t out_w = static_cast<int64_t>(cols.size());
  for (size_t oh = 0; oh < rows.size(); ++oh, out += out_w) {
    if (oh > 0 && rows[oh] == rows[oh - 1]) {
      std::memcpy(out, out - out_w, static_cast<size_t>(out_w) * sizeof(float));
      continue;
    }
    const float* __restrict row = in + rows[oh] * in_w;
    float* __restrict dst = out;
    if (twice) {
      for (int64_t c = 0; c < in_w; ++c) {
        dst[2 * c] = row[c];
        dst[2 * c + 1] = row[c];
      }
      continue;
    }
    for (int64_t ow = 0; ow < out_w; ++ow) dst[ow] = row[cols[ow]];
  }
}

constexpr int64_t kMaxResizeAxis = int64_t{1} << 22;

absl::StatusOr<AxisTaps> MakeTaps(const PrepareContext& context, const ResizeOptions& opt,
                                  int64_t in_len, int64_t out_len, double scale, double roi_start,
                                  double roi_end) {
  AxisTaps taps;
  if (in_len < 1 && out_len > 0) {
    return InvalidArgument(context, "cannot resize an empty axis to ", out_len, " elements");
  }
  taps.index.assign(out_len * kMaxTaps, 0);
  taps.weight.assign(out_len * kMaxTaps, 0.0f);
  taps.count.assign(out_len, 0);
  taps.outside.assign(out_len, false);
  for (int64_t o = 0; o < out_len; ++o) {
    ASSIGN_OR_RETURN(double x, SourceCoordinate(context, opt, static_cast<double>(o), scale, in_len,
                                                roi_start, roi_end));
    if (opt.coord_mode == "tf_crop_and_resize" && (x < 0 || x > in_len - 1)) {
      taps.outside[o] = true;
      continue;
    }
    if (!std::isfinite(x) || std::abs(x) > 1e15) {
      return InvalidArgument(context, "output index ", o, " maps to source coordinate ", x,
                             " (scales or roi out of range)");
    }
    const double fl = std::floor(x);
    const double ratio = x - fl;
    const int64_t base = static_cast<int64_t>(fl);
    int64_t idx[kMaxTaps];
    double w[kMaxTaps];
    int n = 0;
    if (opt.mode == "nearest") {
      int64_t pick = base;
      if (ratio != 0) {
        const std::string& r = opt.nearest_mode;
        const bool up = r == "ceil" || (r == "round_prefer_floor" && ratio > 0.5) ||
                        (r == "round_prefer_ceil" && ratio >= 0.5);
        pick = up ? base + 1 : base;
      }
      idx[0] = pick;
      w[0] = 1;
      n = 1;
    } else if (opt.mode == "linear") {
      idx[0] = base;
      idx[1] = base + 1;
      w[0] = 1 - ratio;
      w[1] = ratio;
      n = 2;
    } else {  // cubic
      const double a = opt.cubic_a;
      const double r = ratio;
      const double s = 1 - r;
      w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
      w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
      w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
      w[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
      for (int t = 0; t < 4; ++t) idx[t] = base - 1 + t;
      n = 4;
      if (opt.exclude_outside) {
        double sum = 0;
        for (int t = 0; t < 4; ++t) {
          if (idx[t] < 0 || idx[t] >= in_len) w[t] = 0;
          sum += w[t];
        }
        for (int t = 0; t < 4; ++t) w[t] = sum != 0 ? w[t] / sum : 0;
      }
    }
    // Drop zero-weight taps so that unscaled axes cost one tap.
    int kept = 0;
    for (int t = 0; t < n; ++t) {
      if (w[t] == 0 && n > 1) continue;
      taps.index[o * kMaxTaps + kept] = std::clamp<int64_t>(idx[t], 0, in_len - 1);
      taps.weight[o * kMaxTaps + kept] = static_cast<float>(w[t]);
      ++kept;
    }
    if (kept == 0) {  // every weight was zero (cannot normally happen)
      taps.index[o * kMaxTaps] = std::clamp<int64_t>(base, 0, in_len - 1);
      taps.weight[o * kMaxTaps] = 0;
      kept = 1;
    }
    taps.count[o] = static_cast<int8_t>(kept);
  }
  return taps;
}

// Where a 4-D value's elements lie, channels taken `lanes` at a time (LanesResizeKernel): the
// lanes of image n's group g at pixel (h, w) start at base(n, g) + (h W + w) pixel and lie
// lane_stride apart. Channels-last: one group of all C lanes; channel blocks: a group per block
// (padding lanes past C stored as zeros); plain: the other end's grouping, lanes H W apart.
struct LaneLayout {
  int64_t lanes = 0, groups = 0, pixel = 0, lane_stride = 0, group_stride = 0, image_stride = 0;
  bool plain = false;  // lanes past C are not stored
};

// `v` stored as `how` (PlacementOf), taken `plain_lanes` channels at a time where plain. The
// rows of a pixel's lanes must be the image's width apart (every stored layout here is).
absl::StatusOr<LaneLayout> LaneLayoutOf(const PrepareContext& context, const Shape& v, Storage how,
                                        int64_t plain_lanes) {
  ASSIGN_OR_RETURN(const Placement p, PlacementOf(context, v, how));
  LaneLayout l;
  l.plain = how == Storage::kPlain;  // (a 1x1 plain map also has its channels next to each other)
  l.lanes = l.plain ? plain_lanes : Lanes(p, v[1]);
  l.groups = (v[1] + l.lanes - 1) / l.lanes;
  l.pixel = p.w_stride;
  l.lane_stride = l.plain ? p.c_stride : 1;
  l.group_stride = l.plain ? l.lanes * p.c_stride : p.c_stride;
  l.image_stride = p.n_stride;
  if (p.h_stride != v[3] * p.w_stride) {
    return Unimplemented(context, "rows of the stored ", runtime::ShapeToString(v),
                         " are not its width apart");
  }
  return l;
}

// One output row of LanesResizeKernel with both ends storing a pixel's L lanes together: each
// pixel the weighted sum of its taps' pixels, in registers.
template <int L>
void LaneRow(const float* in, int64_t in_w, const AxisTaps& rows, int64_t oh, const AxisTaps& cols,
             int64_t out_w, float* out) {
  const size_t rk = static_cast<size_t>(oh * kMaxTaps);
  for (int64_t ow = 0; ow < out_w; ++ow, out += L) {
    const size_t ck = static_cast<size_t>(ow * kMaxTaps);
    float acc[L] = {};
    for (int a = 0; a < rows.count[oh]; ++a) {
      const float* row = in + rows.index[rk + a] * in_w * L;
      for (int b = 0; b < cols.count[ow]; ++b) {
        const float w = rows.weight[rk + a] * cols.weight[ck + b];
        const float* px = row + cols.index[ck + b] * L;
        for (int l = 0; l < L; ++l) acc[l] += w * px[l];
      }
    }
    for (int l = 0; l < L; ++l) out[l] = acc[l];
  }
}

// Resize of an image in H and W only, from and to a conv chain's layouts (channels-last or
// channel blocks at either end, or plain at one): each output pixel's lanes are the weighted
// sum of its row and column taps' pixels, so that a chain's value is resized without leaving
// its layout (a detector's or a segmentation decoder's upsampling between convolutions).
class LanesResizeKernel final : public PreparedKernel {
 public:
  LanesResizeKernel(std::string op, Shape out, LaneLayout in, LaneLayout to, int64_t images,
                    int64_t channels, int64_t in_w, AxisTaps rows, AxisTaps cols, int threads)
      : op_(std::move(op)),
        outputs_({Desc(DataType::kFloat32, out)}),
        in_(in),
        to_(to),
        images_(images),
        channels_(channels),
        in_w_(in_w),
        out_h_(out[2]),
        out_w_(out[3]),
        rows_(std::move(rows)),
        cols_(std::move(cols)),
        threads_(threads) {
    // One tap of weight 1 per output row and column (nearest), both ends storing a pixel's
    // lanes together: pixels are copied, and a row from the same source row as the one above
    // is that row copied (upsampling by a whole factor).
    auto single = [](const AxisTaps& t) {
      for (size_t i = 0; i < t.count.size(); ++i) {
        if (t.count[i] != 1 || t.weight[i * kMaxTaps] != 1.0f) return false;
      }
      return true;
    };
    copies_ = single(rows_) && single(cols_) && in_.lane_stride == 1 && to_.lane_stride == 1;
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? static_cast<size_t>(images_ * to_.image_stride) * sizeof(float) : 0;
  }
  std::string implementation() const override { return "reprise_resize_lanes"; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    const int64_t lanes = in_.lanes, groups = in_.groups;
    if (copies_) {
      ParallelFor(
          images_ * groups * out_h_, threads_, static_cast<double>(out_w_ * lanes) / 4,
          [&](int64_t first, int64_t end) {
            for (int64_t r = first; r < end; ++r) {
              const int64_t oh = r % out_h_, g = r / out_h_ % groups, n = r / out_h_ / groups;
              const float* in = xp + n * in_.image_stride + g * in_.group_stride;
              float* out = yp + n * to_.image_stride + g * to_.group_stride + oh * out_w_ * lanes;
              const int64_t source = rows_.index[oh * kMaxTaps];
              if (oh > 0 && r > first && rows_.index[(oh - 1) * kMaxTaps] == source) {
                std::copy_n(out - out_w_ * lanes, out_w_ * lanes, out);
                continue;
              }
              const float* row = in + source * in_w_ * lanes;
              for (int64_t ow = 0; ow < out_w_; ++ow) {
                std::copy_n(row + cols_.index[ow * kMaxTaps] * lanes, lanes, out + ow * lanes);
              }
            }
          },
          1);
      return absl::OkStatus();
    }
    ParallelFor(
        images_ * groups * out_h_, threads_, static_cast<double>(out_w_ * lanes) * 2,
        [&](int64_t first, int64_t end) {
          std::vector<float> acc(static_cast<size_t>(lanes));
          std::vector<float> pixels(to_.lane_stride == 1 ? 0 : static_cast<size_t>(out_w_ * lanes));
          for (int64_t r = first; r < end; ++r) {
            const int64_t oh = r % out_h_, g = r / out_h_ % groups, n = r / out_h_ / groups;
            // Lanes that hold channels (a group of plain channels may be short).
            const int64_t valid = std::min(lanes, channels_ - g * lanes);
            const int64_t in_lanes = in_.plain ? valid : lanes;
            const int64_t out_lanes = to_.plain ? valid : lanes;
            const float* in = xp + n * in_.image_stride + g * in_.group_stride;
            float* out = yp + n * to_.image_stride + g * to_.group_stride;
            if (in_.lane_stride == 1 && (lanes == 16 || lanes == 8)) {
              // In registers; into a plain output through a row of pixels, then plane by plane.
              float* row = to_.lane_stride == 1 ? out + oh * out_w_ * lanes : pixels.data();
              if (lanes == 16) {
                LaneRow<16>(in, in_w_, rows_, oh, cols_, out_w_, row);
              } else {
                LaneRow<8>(in, in_w_, rows_, oh, cols_, out_w_, row);
              }
              for (int64_t l = 0; to_.lane_stride != 1 && l < out_lanes; ++l) {
                float* o = out + l * to_.lane_stride + oh * out_w_;
                for (int64_t ow = 0; ow < out_w_; ++ow) o[ow] = row[ow * lanes + l];
              }
              continue;
            }
            const size_t rk = static_cast<size_t>(oh * kMaxTaps);
            for (int64_t ow = 0; ow < out_w_; ++ow) {
              const size_t ck = static_cast<size_t>(ow * kMaxTaps);
              std::fill(acc.begin(), acc.end(), 0.0f);
              for (int a = 0; a < rows_.count[oh]; ++a) {
                const int64_t row = rows_.index[rk + a] * in_w_;
                for (int b = 0; b < cols_.count[ow]; ++b) {
                  const float w = rows_.weight[rk + a] * cols_.weight[ck + b];
                  const float* px = in + (row + cols_.index[ck + b]) * in_.pixel;
                  if (in_.lane_stride == 1) {
                    for (int64_t l = 0; l < in_lanes; ++l) acc[l] += w * px[l];
                  } else {
                    for (int64_t l = 0; l < in_lanes; ++l) {
                      acc[l] += w * px[l * in_.lane_stride];
                    }
                  }
                }
              }
              float* o = out + (oh * out_w_ + ow) * to_.pixel;
              if (to_.lane_stride == 1) {
                std::copy_n(acc.begin(), out_lanes, o);
              } else {
                for (int64_t l = 0; l < out_lanes; ++l) o[l * to_.lane_stride] = acc[l];
              }
            }
          }
        },
        1);
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  LaneLayout in_, to_;
  int64_t images_, channels_, in_w_, out_h_, out_w_;
  AxisTaps rows_, cols_;
  int threads_;
  bool copies_ = false;
};

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareResize(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 4));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  const size_t rank = x.size();
  const Attributes& attrs = AttrsOf(context);
  ResizeOptions opt;
  ASSIGN_OR_RETURN(opt.coord_mode, attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  ASSIGN_OR_RETURN(opt.mode, attrs.GetString("mode", "nearest"));
  ASSIGN_OR_RETURN(opt.nearest_mode, attrs.GetString("nearest_mode", "round_prefer_floor"));
  ASSIGN_OR_RETURN(opt.cubic_a, attrs.GetFloat("cubic_coeff_a", -0.75f));
  ASSIGN_OR_RETURN(int64_t exclude, attrs.GetInt("exclude_outside", 0));
  ASSIGN_OR_RETURN(float extrapolation, attrs.GetFloat("extrapolation_value", 0.0f));
  opt.exclude_outside = exclude != 0;
  if (opt.mode != "nearest" && opt.mode != "linear" && opt.mode != "cubic") {
    return Unimplemented(context, "mode \"", opt.mode, "\" is not supported");
  }
  const std::string& nm = opt.nearest_mode;
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil") {
    return InvalidArgument(context, "nearest_mode \"", nm, "\" is not known");
  }
  if (attrs.Has("antialias") || attrs.Has("axes") || attrs.Has("keep_aspect_ratio_policy")) {
    return Unimplemented(context,
                         "the opset 18 attributes antialias/axes/"
                         "keep_aspect_ratio_policy are not supported");
  }
  // Inputs: X, roi, scales, sizes (opset 10: X, scales).
  const size_t scales_at = context.opset < 11 ? 1 : 2;
  const size_t sizes_at = 3;
  if (context.opset < 11) {  // opset 10: asymmetric coordinates, nearest rounds down
    opt.coord_mode = "asymmetric";
    opt.nearest_mode = "floor";
  }
  std::vector<double> scales(rank, 1.0);
  Shape out(rank);
  const bool has_sizes = context.opset >= 11 && HasInput(context, sizes_at) &&
                         runtime::NumElements(context.inputs[sizes_at].shape) > 0;
  const bool has_scales =
      HasInput(context, scales_at) && runtime::NumElements(context.inputs[scales_at].shape) > 0;
  if (has_sizes == has_scales) {
    return InvalidArgument(context, "exactly one of scales and sizes must be given");
  }
  if (has_sizes) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReadInts(context, sizes_at, "sizes"));
    if (sizes.size() != rank) {
      return InvalidArgument(context, "sizes ", runtime::ShapeToString(sizes),
                             " do not match input ", runtime::ShapeToString(x));
    }
    for (size_t i = 0; i < rank; ++i) {
      if (sizes[i] < 0 || (x[i] == 0 && sizes[i] != 0)) {
        return InvalidArgument(context, "sizes ", runtime::ShapeToString(sizes),
                               " are invalid for input ", runtime::ShapeToString(x));
      }
      out[i] = sizes[i];
      scales[i] = x[i] == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(x[i]);
    }
  } else {
    const TensorDesc& s = context.inputs[scales_at];
    if (s.data == nullptr) {
      return Unimplemented(context, "scales must be known at plan time");
    }
    if (s.dtype != DataType::kFloat32 ||
        runtime::NumElements(s.shape) != static_cast<int64_t>(rank)) {
      return InvalidArgument(context, "scales must be ", rank, " float32 values, got ",
                             runtime::DataTypeName(s.dtype), runtime::ShapeToString(s.shape));
    }
    for (size_t i = 0; i < rank; ++i) {
      scales[i] = static_cast<const float*>(s.data)[i];
      if (!(scales[i] > 0)) {
        return InvalidArgument(context, "scale ", scales[i], " on axis ", i, " is not positive");
      }
      const double size = scales[i] * static_cast<double>(x[i]);
      if (!(size < 9.0e18)) {  // also NaN and infinity; an int64 cast of more is undefined
        return InvalidArgument(context, "scale ", scales[i], " on axis ", i, " of input ",
                               runtime::ShapeToString(x), " gives an output too large");
      }
      out[i] = static_cast<int64_t>(size);
    }
  }
  // The taps below take a few words per output position along each axis.
  if (!runtime::CheckedElementCount(out, std::numeric_limits<int64_t>::max() / 64).has_value()) {
    return InvalidArgument(context, "output shape ", runtime::ShapeToString(out), " is too large");
  }
  std::vector<double> roi(2 * rank, 0.0);
  for (size_t i = 0; i < rank; ++i) roi[rank + i] = 1.0;
  if (opt.coord_mode == "tf_crop_and_resize") {
    if (context.opset < 11 || !HasInput(context, 1) || context.inputs[1].data == nullptr ||
        runtime::NumElements(context.inputs[1].shape) != static_cast<int64_t>(2 * rank)) {
      return InvalidArgument(context, "tf_crop_and_resize needs a plan-time roi of ", 2 * rank,
                             " values");
    }
    for (size_t i = 0; i < 2 * rank; ++i) {
      roi[i] =
          ElementAsDouble(context.inputs[1].dtype, context.inputs[1].data, static_cast<int64_t>(i));
    }
  }
  // The taps are tables per output index of each axis: refuse an axis so long that they
  // would dwarf any real image or signal, before allocating them (sizes come from the model).
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] > kMaxResizeAxis) {
      return absl::ResourceExhaustedError(
          absl::StrCat(NodeLabel(context), ": output axis ", i, " of ", out[i],
                       " elements is over the kernel's limit of ", kMaxResizeAxis));
    }
  }
  std::vector<AxisTaps> taps;
  for (size_t i = 0; i < rank; ++i) {
    if (x[i] == 0) {
      taps.emplace_back();
      continue;
    }
    ASSIGN_OR_RETURN(AxisTaps t,
                     MakeTaps(context, opt, x[i], out[i], scales[i], roi[i], roi[rank + i]));
    taps.push_back(std::move(t));
  }
  const int threads = context.intra_op_threads;
  // A conv chain's value (kFusedResizeOp, x_layout / y_layout): images and channels kept, no
  // extrapolated position. An empty output has no bytes in any layout: the plain kernel below.
  ASSIGN_OR_RETURN(const Storage x_layout, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(const Storage y_layout, LayoutAttr(context, "y_layout"));
  if ((x_layout != Storage::kPlain || y_layout != Storage::kPlain) &&
      runtime::NumElements(out) > 0) {
    const bool outside =
        rank == 4 &&
        (std::any_of(taps[2].outside.begin(), taps[2].outside.end(), [](bool o) { return o; }) ||
         std::any_of(taps[3].outside.begin(), taps[3].outside.end(), [](bool o) { return o; }));
    // Each image and channel its own (one tap of weight 1 on itself), as the fusion's
    // conditions give.
    auto same = [&](size_t d) {
      for (int64_t i = 0; i < out[d]; ++i) {
        const size_t k = static_cast<size_t>(i * kMaxTaps);
        for (int t = 0; t < taps[d].count[i]; ++t) {
          const bool self = taps[d].index[k + t] == i;
          if (taps[d].weight[k + t] != (self ? 1.0f : 0.0f)) return false;
        }
      }
      return true;
    };
    if (rank != 4 || x[0] != out[0] || x[1] != out[1] || outside || !same(0) || !same(1)) {
      return Unimplemented(context, "a resize in the chain's layout keeps images and channels, ",
                           "without extrapolation");
    }
    // The lanes come from the chain's end (both ends alike when both are the chain's).
    const Storage chain_end = x_layout != Storage::kPlain ? x_layout : y_layout;
    ASSIGN_OR_RETURN(const LaneLayout end, LaneLayoutOf(context, x, chain_end, 1));
    ASSIGN_OR_RETURN(const LaneLayout in, LaneLayoutOf(context, x, x_layout, end.lanes));
    ASSIGN_OR_RETURN(const LaneLayout to, LaneLayoutOf(context, out, y_layout, end.lanes));
    if (in.lanes != to.lanes) {
      return Unimplemented(context, "a resize from channels-last to channel blocks");
    }
    return std::make_unique<LanesResizeKernel>(std::string(context.op), out, in, to, x[0], x[1],
                                               x[3], taps[2], taps[3], threads);
  }
  const std::vector<int64_t> strides = ContiguousStrides(x);
  const int64_t count = runtime::NumElements(out);
  // Rough cost of an output element: its taps (2 per resized axis when linear, 4 when cubic).
  double cost = 2;
  for (size_t i = 0; i < rank; ++i) {
    if (x[i] != out[i]) cost *= 3;
  }
  // NCHW images resized in H and W only, with no extrapolated position (the common upsampling
  // of segmentation heads and decoders): plane by plane, each output from its row and column
  // taps directly (PlanarResize), instead of the general loop over every axis's taps.
  auto identity = [&](size_t d) {
    for (int64_t i = 0; i < out[d]; ++i) {
      const size_t k = static_cast<size_t>(i * kMaxTaps);
      if (taps[d].count[i] != 1 || taps[d].index[k] != i || taps[d].weight[k] != 1.0f ||
          taps[d].outside[i]) {
        return false;
      }
    }
    return true;
  };
  auto inside = [&](size_t d) {
    return std::none_of(taps[d].outside.begin(), taps[d].outside.end(), [](bool o) { return o; });
  };
  const bool planar = rank == 4 && x[0] == out[0] && x[1] == out[1] && identity(0) && identity(1) &&
                      inside(2) && inside(3);
  // Planar with one tap of weight 1 per output row and column: their source indices.
  auto sources = [&](size_t d) {
    std::vector<int64_t> index;
    for (int64_t i = 0; i < out[d]; ++i) {
      const size_t k = static_cast<size_t>(i * kMaxTaps);
      if (taps[d].count[i] != 1 || taps[d].weight[k] != 1.0f) return std::vector<int64_t>();
      index.push_back(taps[d].index[k]);
    }
    return index;
  };
  std::vector<int64_t> row_sources, col_sources;
  if (planar) {
    row_sources = sources(2);
    col_sources = sources(3);
  }
  const bool gather = planar && !row_sources.empty() && !col_sources.empty();
  bool twice = gather && out[3] == 2 * x[3];
  for (int64_t i = 0; twice && i < out[3]; ++i) twice = col_sources[i] == i / 2;
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    if (count == 0) return absl::OkStatus();
    if (rank == 0) {
      yp[0] = xp[0];
      return absl::OkStatus();
    }
    if (gather) {
      const int64_t in_plane = x[2] * x[3], out_plane = out[2] * out[3];
      ParallelFor(out[0] * out[1], threads, static_cast<double>(out_plane),
                  [&](int64_t first, int64_t end) {
                    for (int64_t p = first; p < end; ++p) {
                      PlanarGather(xp + p * in_plane, x[3], row_sources, col_sources, twice,
                                   yp + p * out_plane);
                    }
                  });
      return absl::OkStatus();
    }
    if (planar) {
      const int64_t in_plane = x[2] * x[3], out_plane = out[2] * out[3];
      ParallelFor(
          out[0] * out[1], threads, cost * static_cast<double>(out_plane),
          [&](int64_t first, int64_t end) {
            std::vector<double> across;
            for (int64_t p = first; p < end; ++p) {
              PlanarResize(xp + p * in_plane, x[2], x[3], taps[2], taps[3], across,
                           yp + p * out_plane);
            }
          },
          1);
      return absl::OkStatus();
    }
    // Output elements split over the intra-op threads; each is computed as serially.
    ParallelFor(count, threads, cost, [&](int64_t first, int64_t end) {
      absl::InlinedVector<int64_t, 8> index(rank, 0);
      absl::InlinedVector<int, 8> tap(rank, 0);
      for (int64_t rest = first, d = static_cast<int64_t>(rank); d-- > 0;) {
        index[d] = rest % out[d];
        rest /= out[d];
      }
      for (int64_t o = first; o < end; ++o) {
        bool outside = false;
        for (size_t d = 0; d < rank; ++d) outside = outside || taps[d].outside[index[d]];
        float value = extrapolation;
        if (!outside) {
          double sum = 0;
          std::fill(tap.begin(), tap.end(), 0);
          while (true) {
            double weight = 1;
            int64_t at = 0;
            for (size_t d = 0; d < rank; ++d) {
              const int64_t k = index[d] * kMaxTaps + tap[d];
              weight *= taps[d].weight[k];
              at += taps[d].index[k] * strides[d];
            }
            sum += weight * xp[at];
            size_t d = rank;
            while (d-- > 0) {
              if (++tap[d] < taps[d].count[index[d]]) break;
              tap[d] = 0;
            }
            if (d == static_cast<size_t>(-1)) break;
          }
          value = static_cast<float>(sum);
        }
        yp[o] = value;
        for (size_t d = rank; d-- > 0;) {
          if (++index[d] < out[d]) break;
          index[d] = 0;
        }
      }
    });
    return absl::OkStatus();
  });
}

// Upsample (opsets 7 to 9; deprecated since 10) is Resize with opset 10's semantics
// (asymmetric coordinates, nearest rounding down), its scales an attribute before opset 9 and
// its second input since.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareUpsample(const PrepareContext& context) {
  PrepareContext resize = context;
  resize.opset = 10;
  if (context.opset >= 9) return PrepareResize(resize);
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  ASSIGN_OR_RETURN(std::vector<float> scales, AttrsOf(context).GetFloats("scales", {}));
  // The attribute as a plan-time input, valid for the call below (which copies the values).
  std::vector<TensorDesc> inputs(context.inputs.begin(), context.inputs.end());
  TensorDesc scales_input = Desc(DataType::kFloat32, {static_cast<int64_t>(scales.size())});
  scales_input.data = scales.data();
  inputs.push_back(scales_input);
  resize.inputs = inputs;
  return PrepareResize(resize);
}

// GridSample (opset 16, 4-D float32): output[n, c, h, w] samples input[n, c] at the point
// grid[n, h, w] = (x, y) in [-1, 1], by `mode` bilinear / nearest / bicubic, with
// `padding_mode` zeros / border / reflection and `align_corners`.
struct GridSampleOptions {
  int mode = 0;     // 0 bilinear, 1 nearest, 2 bicubic
  int padding = 0;  // 0 zeros, 1 border, 2 reflection
  bool align_corners = false;
};

// A coordinate reflected into [low/2, high/2] (twice the bounds, so that half-pixel bounds are
// whole numbers).
double Reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  const double low = twice_low / 2;
  const double span = (twice_high - twice_low) / 2;
  v = std::fabs(v - low);
  const double extra = std::fmod(v, span);
  const int64_t flips = static_cast<int64_t>(std::floor(v / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

// Applies border or reflection padding to a source coordinate along an axis of `size`.
double PadCoordinate(double v, int64_t size, const GridSampleOptions& o) {
  const double last = static_cast<double>(size - 1);
  if (o.padding == 1) return std::clamp(v, 0.0, last);
  if (o.padding == 2) {
    v = o.align_corners ? Reflect(v, 0, 2 * last)
                        : Reflect(v, -1, 2 * static_cast<double>(size) - 1);
    return std::clamp(v, 0.0, last);
  }
  return v;
}

double CubicWeight(double t, int tap) {
  constexpr double a = -0.75;
  const double d = std::fabs(t - static_cast<double>(tap - 1));  // distance to tap -1..2
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// The taps of one output point: kTaps (1 nearest, 4 bilinear, 16 bicubic) offsets into an
// H x W plane with their weights; a tap outside the plane (zeros padding) keeps offset -1 and
// adds nothing (not even an infinity or NaN of the plane times 0).
struct GridTapsOut {
  int64_t* at;
  float* weight;
  int64_t h, w;
  void Put(int tap, int64_t y, int64_t x, double wt) const {
    if (x < 0 || x >= w || y < 0 || y >= h) return;
    at[tap] = y * w + x;
    weight[tap] = static_cast<float>(wt);
  }
};

// Fills `out` (offsets -1) for the point at pixel coordinates (x, y), both finite and under 1e15
// in magnitude.
void GridTapsAt(double x, double y, const GridSampleOptions& o, const GridTapsOut& out) {
  if (o.mode == 2) {
    const double fx = std::floor(x), fy = std::floor(y);
    for (int j = 0; j < 4; ++j) {
      const double ty = fy - 1 + j;
      const auto py = static_cast<int64_t>(o.padding == 0 ? ty : PadCoordinate(ty, out.h, o));
      const double wy = CubicWeight(y - fy, j);
      for (int i = 0; i < 4; ++i) {
        const double tx = fx - 1 + i;
        const auto px = static_cast<int64_t>(o.padding == 0 ? tx : PadCoordinate(tx, out.w, o));
        out.Put(j * 4 + i, py, px, wy * CubicWeight(x - fx, i));
      }
    }
    return;
  }
  x = PadCoordinate(x, out.w, o);
  y = PadCoordinate(y, out.h, o);
  if (o.mode == 1) {
    out.Put(0, static_cast<int64_t>(std::nearbyint(y)), static_cast<int64_t>(std::nearbyint(x)),
            1.0);
    return;
  }
  const double x0 = std::floor(x), y0 = std::floor(y);
  const double dx = x - x0, dy = y - y0;
  const auto ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
  out.Put(0, iy, ix, (1 - dy) * (1 - dx));
  out.Put(1, iy, ix + 1, (1 - dy) * dx);
  out.Put(2, iy + 1, ix, dy * (1 - dx));
  out.Put(3, iy + 1, ix + 1, dy * dx);
}

// out[p] = the sum over kTaps of plane[at] * weight for each of `points` outputs, taps at -1
// left out (a select: plane[0] is read in their place and dropped).
template <int kTaps>
void SampleByTaps(const float* plane, const int64_t* at, const float* weight, int64_t points,
                  float* out) {
  for (int64_t p = 0; p < points; ++p) {
    float sum = 0;
    for (int t = 0; t < kTaps; ++t) {
      const int64_t a = at[p * kTaps + t];
      const float v = plane[a < 0 ? 0 : a] * weight[p * kTaps + t];
      sum += a < 0 ? 0.0f : v;
    }
    out[p] = sum;
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGridSample(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectRank(context, 0, 4));
  RETURN_IF_ERROR(ExpectRank(context, 1, 4));
  const Shape& x = context.inputs[0].shape;
  const Shape& grid = context.inputs[1].shape;
  if (grid[0] != x[0] || grid[3] != 2) {
    return InvalidArgument(context, "grid must be [", x[0], ", H_out, W_out, 2], got ",
                           runtime::ShapeToString(grid));
  }
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "bilinear"));
  ASSIGN_OR_RETURN(std::string padding, attrs.GetString("padding_mode", "zeros"));
  ASSIGN_OR_RETURN(int64_t align, attrs.GetInt("align_corners", 0));
  GridSampleOptions o;
  o.align_corners = align != 0;
  if (mode == "bilinear") {
    o.mode = 0;
  } else if (mode == "nearest") {
    o.mode = 1;
  } else if (mode == "bicubic") {
    o.mode = 2;
  } else {
    return InvalidArgument(context, "mode \"", mode, "\" is not bilinear, nearest or bicubic");
  }
  if (padding == "zeros") {
    o.padding = 0;
  } else if (padding == "border") {
    o.padding = 1;
  } else if (padding == "reflection") {
    o.padding = 2;
  } else {
    return InvalidArgument(context, "padding_mode \"", padding,
                           "\" is not zeros, border or reflection");
  }
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  const int64_t points = grid[1] * grid[2];
  // Per batch item, the taps of every output point (computed once, read by every channel).
  const int taps = o.mode == 0 ? 4 : o.mode == 1 ? 1 : 16;
  int64_t tap_count = 0;
  if (!runtime::CheckedMul(points, taps, &tap_count) ||
      tap_count > std::numeric_limits<int64_t>::max() /
                      static_cast<int64_t>(sizeof(int64_t) + sizeof(float))) {
    return InvalidArgument(context, "grid ", runtime::ShapeToString(grid), " is too large");
  }
  const size_t workspace = static_cast<size_t>(tap_count) * (sizeof(int64_t) + sizeof(float));
  const int threads = context.intra_op_threads;
  return MakeKernel(
      context, {Desc(DataType::kFloat32, {n, c, grid[1], grid[2]})},
      [=](const KernelArgs& args) {
        const float* in = static_cast<const float*>(args.inputs[0]);
        const float* g = static_cast<const float*>(args.inputs[1]);
        float* out = static_cast<float*>(args.outputs[0]);
        auto* at = static_cast<int64_t*>(args.workspace);
        auto* weight = reinterpret_cast<float*>(at + tap_count);
        if (h == 0 || w == 0) {  // nothing to sample: every point is outside
          std::fill(out, out + n * c * points, 0.0f);
          return absl::OkStatus();
        }
        for (int64_t b = 0; b < n; ++b) {
          ParallelFor(points, threads, 20.0 * taps, [&](int64_t first, int64_t end) {
            std::fill(at + first * taps, at + end * taps, -1);
            std::fill(weight + first * taps, weight + end * taps, 0.0f);
            for (int64_t p = first; p < end; ++p) {
              const double gx = g[(b * points + p) * 2];
              const double gy = g[(b * points + p) * 2 + 1];
              // Normalised [-1, 1] to pixel coordinates.
              const double px = o.align_corners ? (gx + 1) / 2 * static_cast<double>(w - 1)
                                                : ((gx + 1) * static_cast<double>(w) - 1) / 2;
              const double py = o.align_corners ? (gy + 1) / 2 * static_cast<double>(h - 1)
                                                : ((gy + 1) * static_cast<double>(h) - 1) / 2;
              // A point that is not finite, or too far out to convert, samples 0 (no taps).
              if (std::isfinite(px) && std::isfinite(py) && std::fabs(px) < 1e15 &&
                  std::fabs(py) < 1e15) {
                GridTapsAt(px, py, o, {at + p * taps, weight + p * taps, h, w});
              }
            }
          });
          ParallelFor(c, threads, static_cast<double>(points * taps),
                      [&](int64_t first, int64_t end) {
                        for (int64_t ch = first; ch < end; ++ch) {
                          const float* plane = in + (b * c + ch) * h * w;
                          float* dst = out + (b * c + ch) * points;
                          if (taps == 1) {
                            SampleByTaps<1>(plane, at, weight, points, dst);
                          } else if (taps == 4) {
                            SampleByTaps<4>(plane, at, weight, points, dst);
                          } else {
                            SampleByTaps<16>(plane, at, weight, points, dst);
                          }
                        }
                      });
        }
        return absl::OkStatus();
      },
      workspace);
}

}  // namespace

absl::Status RegisterResizeKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Resize", &PrepareResize));
  RETURN_IF_ERROR(registry->Register(kFusedResizeOp, &PrepareResize));
  RETURN_IF_ERROR(registry->Register("Upsample", &PrepareUpsample));
  RETURN_IF_ERROR(registry->Register("GridSample", &PrepareGridSample));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
