// Resize (opset 11+; float32, any rank): nearest (all four rounding modes), linear and cubic,
// with every coordinate_transformation_mode of ONNX (tf_crop_and_resize with roi and
// extrapolation_value; tf_half_pixel_for_nn of opset 11). Each output position along each axis
// gets up to four taps (input index, weight) at Prepare; Run sums over the taps' product,
// so n-linear and n-cubic interpolation come out separable as in ONNX's reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/status_macros.h"

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
  const std::vector<int64_t> strides = ContiguousStrides(x);
  const int64_t count = runtime::NumElements(out);
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    if (count == 0) return absl::OkStatus();
    if (rank == 0) {
      yp[0] = xp[0];
      return absl::OkStatus();
    }
    absl::InlinedVector<int64_t, 8> index(rank, 0);
    absl::InlinedVector<int, 8> tap(rank, 0);
    for (int64_t o = 0; o < count; ++o) {
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
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterResizeKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Resize", &PrepareResize));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
