// RoiAlign (opset 10 and 16): regions of interest of a feature map pooled by bilinear samples.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// One sample's position along one axis of a RoiAlign bin: the two pixels it lies between and
// the weight of the second (`frac`). `valid` is false for a sample outside the image (its value
// is 0).
struct RoiAxisSample {
  int64_t lo = 0;
  int64_t hi = 0;
  double frac = 0;
  bool valid = false;
};

RoiAxisSample RoiSampleAt(double v, int64_t size) {
  RoiAxisSample s;
  if (size <= 0 || v < -1.0 || v > static_cast<double>(size)) return s;
  double at = std::max(v, 0.0);
  s.lo = static_cast<int64_t>(at);
  s.hi = s.lo + 1;
  if (s.lo >= size - 1) {
    s.hi = s.lo = size - 1;
    at = static_cast<double>(s.lo);
  }
  s.frac = at - static_cast<double>(s.lo);
  s.valid = true;
  return s;
}

// A bilinear sample's four pixels (offsets in a plane) and their weights.
struct RoiTap {
  std::array<int64_t, 4> at{};
  std::array<double, 4> weight{};
  bool valid = false;
};

// RoiAlign (opset 10 and 16; float32): each region of interest [x1, y1, x2, y2] of image
// batch_indices[r] pooled into output_height x output_width bins, each the average (or maximum)
// of sampling_ratio^2 bilinear samples (adaptive, ceil(bin size), when sampling_ratio is 0).
// coordinate_transformation_mode half_pixel (opset 16's default) shifts by half a pixel;
// output_half_pixel (opset 10's behaviour) does not and makes each region at least 1 x 1.
// A bin's samples are placed once for all channels (a row of them at a time, so the scratch is
// bounded by the grid's width), and the regions are split over the intra-op threads.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareRoiAlign(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 2, {DataType::kInt64}));
  RETURN_IF_ERROR(ExpectRank(context, 0, 4));
  const Shape& x = context.inputs[0].shape;
  const Shape& rois = context.inputs[1].shape;
  const Shape& batch_indices = context.inputs[2].shape;
  if (rois.size() != 2 || rois[1] != 4 || batch_indices != Shape{rois[0]}) {
    return InvalidArgument(context, "rois must be [R, 4] and batch_indices [R], got ",
                           runtime::ShapeToString(rois), " and ",
                           runtime::ShapeToString(batch_indices));
  }
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "avg"));
  ASSIGN_OR_RETURN(int64_t out_h, attrs.GetInt("output_height", 1));
  ASSIGN_OR_RETURN(int64_t out_w, attrs.GetInt("output_width", 1));
  ASSIGN_OR_RETURN(int64_t sampling_ratio, attrs.GetInt("sampling_ratio", 0));
  ASSIGN_OR_RETURN(float spatial_scale, attrs.GetFloat("spatial_scale", 1.0f));
  ASSIGN_OR_RETURN(std::string coords,
                   attrs.GetString("coordinate_transformation_mode",
                                   context.opset < 16 ? "output_half_pixel" : "half_pixel"));
  if (mode != "avg" && mode != "max") {
    return InvalidArgument(context, "mode \"", mode, "\" is not avg or max");
  }
  if (coords != "half_pixel" && coords != "output_half_pixel") {
    return InvalidArgument(context, "coordinate_transformation_mode \"", coords,
                           "\" is not half_pixel or output_half_pixel");
  }
  if (out_h < 1 || out_w < 1 || out_h > 65536 || out_w > 65536 || sampling_ratio < 0 ||
      sampling_ratio > 1024) {
    return InvalidArgument(context, "output_height ", out_h, ", output_width ", out_w,
                           " and sampling_ratio ", sampling_ratio, " are out of range");
  }
  const bool half_pixel = coords == "half_pixel";
  const bool max_mode = mode == "max";
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  const int64_t r_count = rois[0];
  const std::string op = NodeLabel(context);
  // Per region: every channel's bins, four pixels per sample (2 x 2 samples when adaptive).
  const int64_t samples = sampling_ratio > 0 ? sampling_ratio * sampling_ratio : 4;
  const double region_cost = static_cast<double>(c) * static_cast<double>(out_h) *
                             static_cast<double>(out_w) * static_cast<double>(samples) * 8.0;
  const int threads = context.intra_op_threads;
  return MakeKernel(
      context, {Desc(DataType::kFloat32, {r_count, c, out_h, out_w})}, [=](const KernelArgs& args) {
        const float* in = static_cast<const float*>(args.inputs[0]);
        const float* roi = static_cast<const float*>(args.inputs[1]);
        const int64_t* batch = static_cast<const int64_t*>(args.inputs[2]);
        float* out = static_cast<float*>(args.outputs[0]);
        const double offset = half_pixel ? 0.5 : 0.0;
        // Region r's corner and size in the feature map's pixels.
        auto region = [&](int64_t r, double* x1, double* y1, double* roi_w, double* roi_h) {
          *x1 = roi[r * 4] * spatial_scale - offset;
          *y1 = roi[r * 4 + 1] * spatial_scale - offset;
          *roi_w = roi[r * 4 + 2] * spatial_scale - offset - *x1;
          *roi_h = roi[r * 4 + 3] * spatial_scale - offset - *y1;
          if (!half_pixel) {
            *roi_w = std::max(*roi_w, 1.0);
            *roi_h = std::max(*roi_h, 1.0);
          }
        };
        for (int64_t r = 0; r < r_count; ++r) {
          if (batch[r] < 0 || batch[r] >= n) {
            return absl::InvalidArgumentError(absl::StrCat(op, ": batch index ", batch[r],
                                                           " is out of range for a batch of ", n));
          }
          double x1, y1, roi_w, roi_h;
          region(r, &x1, &y1, &roi_w, &roi_h);
          if (!std::isfinite(roi_w) || !std::isfinite(roi_h) || std::fabs(roi_w) > 1e9 ||
              std::fabs(roi_h) > 1e9) {
            return absl::InvalidArgumentError(
                absl::StrCat(op, ": region ", r, " is not finite or too large"));
          }
        }
        ParallelFor(
            r_count, threads, region_cost,
            [&](int64_t first_region, int64_t end_region) {
              std::vector<double> acc(static_cast<size_t>(c));
              std::vector<RoiAxisSample> columns;
              std::vector<RoiTap> taps;
              for (int64_t r = first_region; r < end_region; ++r) {
                double x1, y1, roi_w, roi_h;
                region(r, &x1, &y1, &roi_w, &roi_h);
                const double bin_h = roi_h / static_cast<double>(out_h);
                const double bin_w = roi_w / static_cast<double>(out_w);
                const int64_t grid_h =
                    sampling_ratio > 0
                        ? sampling_ratio
                        : std::clamp<int64_t>(static_cast<int64_t>(std::ceil(bin_h)), 0, 1024);
                const int64_t grid_w =
                    sampling_ratio > 0
                        ? sampling_ratio
                        : std::clamp<int64_t>(static_cast<int64_t>(std::ceil(bin_w)), 0, 1024);
                const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
                columns.resize(static_cast<size_t>(grid_w));
                taps.resize(static_cast<size_t>(grid_w));
                const float* image = in + batch[r] * c * h * w;
                for (int64_t ph = 0; ph < out_h; ++ph) {
                  for (int64_t pw = 0; pw < out_w; ++pw) {
                    for (int64_t ix = 0; ix < grid_w; ++ix) {
                      columns[ix] = RoiSampleAt(
                          x1 + static_cast<double>(pw) * bin_w +
                              (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w),
                          w);
                    }
                    std::fill(acc.begin(), acc.end(), 0.0);
                    for (int64_t iy = 0; iy < grid_h; ++iy) {
                      const RoiAxisSample row = RoiSampleAt(
                          y1 + static_cast<double>(ph) * bin_h +
                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h),
                          h);
                      for (int64_t ix = 0; ix < grid_w; ++ix) {
                        const RoiAxisSample& col = columns[ix];
                        RoiTap& tap = taps[ix];
                        tap.valid = row.valid && col.valid;
                        const double ly = row.frac, lx = col.frac;
                        tap.at = {row.lo * w + col.lo, row.lo * w + col.hi, row.hi * w + col.lo,
                                  row.hi * w + col.hi};
                        tap.weight = {(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx};
                      }
                      for (int64_t ch = 0; ch < c; ++ch) {
                        const float* plane = image + ch * h * w;
                        double a = acc[ch];
                        for (int64_t ix = 0; ix < grid_w; ++ix) {
                          const RoiTap& tap = taps[ix];
                          double v = 0;
                          if (tap.valid) {
                            const double w1 = tap.weight[0] * plane[tap.at[0]];
                            const double w2 = tap.weight[1] * plane[tap.at[1]];
                            const double w3 = tap.weight[2] * plane[tap.at[2]];
                            const double w4 = tap.weight[3] * plane[tap.at[3]];
                            v = max_mode ? std::max({w1, w2, w3, w4}) : w1 + w2 + w3 + w4;
                          }
                          if (!max_mode) {
                            a += v;
                          } else if (iy == 0 && ix == 0) {
                            a = v;
                          } else {
                            a = std::max(a, v);
                          }
                        }
                        acc[ch] = a;
                      }
                    }
                    for (int64_t ch = 0; ch < c; ++ch) {
                      out[((r * c + ch) * out_h + ph) * out_w + pw] =
                          static_cast<float>(max_mode ? acc[ch] : acc[ch] / count);
                    }
                  }
                }
              }
            },
            1);
        return absl::OkStatus();
      });
}

}  // namespace

absl::Status RegisterRoiAlignKernels(runtime::KernelRegistry* registry) {
  return registry->Register("RoiAlign", &PrepareRoiAlign);
}

}  // namespace reprise::kernels::cpu
