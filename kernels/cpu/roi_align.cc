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

// One row of a bin's samples (`taps`, `count` of them) added into acc[0..c) for every channel,
// or, with `max_mode`, their maximum taken (`first`: the bin's first row, whose first sample
// sets it). `image` is one image's pixels channels-last ([h * w][c]), so that each tap reads c
// consecutive floats. Each channel gets the same operations, in the same order, as the planar
// loop gives it.
// Products and sums stay separate operations (no fused multiply-add), as in the planar loop
// (clang: for the rest of the file, the planar loop included).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
#define REPRISE_ROI_ROW_ARGS                                                                   \
  const float *image, int64_t c, const RoiTap *taps, int64_t count, bool max_mode, bool first, \
      double *acc
__attribute__((always_inline)) inline void RoiRowChannelsLastBody(REPRISE_ROI_ROW_ARGS) {
  for (int64_t ix = 0; ix < count; ++ix) {
    const RoiTap& tap = taps[ix];
    const bool take = max_mode && first && ix == 0;
    if (!tap.valid) {
      for (int64_t ch = 0; ch < c; ++ch) {
        acc[ch] = take ? 0.0 : max_mode ? std::max(acc[ch], 0.0) : acc[ch] + 0.0;
      }
      continue;
    }
    const float* p1 = image + tap.at[0] * c;
    const float* p2 = image + tap.at[1] * c;
    const float* p3 = image + tap.at[2] * c;
    const float* p4 = image + tap.at[3] * c;
    const double w1 = tap.weight[0], w2 = tap.weight[1], w3 = tap.weight[2], w4 = tap.weight[3];
    if (max_mode) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const double v = std::max({w1 * p1[ch], w2 * p2[ch], w3 * p3[ch], w4 * p4[ch]});
        acc[ch] = take ? v : std::max(acc[ch], v);
      }
    } else {
      for (int64_t ch = 0; ch < c; ++ch) {
        acc[ch] += w1 * p1[ch] + w2 * p2[ch] + w3 * p3[ch] + w4 * p4[ch];
      }
    }
  }
}
using RoiRowFn = void (*)(REPRISE_ROI_ROW_ARGS);
__attribute__((target("avx512f"))) void RoiRowAvx512(REPRISE_ROI_ROW_ARGS) {
  RoiRowChannelsLastBody(image, c, taps, count, max_mode, first, acc);
}
__attribute__((target("avx2"))) void RoiRowAvx2(REPRISE_ROI_ROW_ARGS) {
  RoiRowChannelsLastBody(image, c, taps, count, max_mode, first, acc);
}
void RoiRowBaseline(REPRISE_ROI_ROW_ARGS) {
  RoiRowChannelsLastBody(image, c, taps, count, max_mode, first, acc);
}
#undef REPRISE_ROI_ROW_ARGS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// `images` images of c planes of hw floats each, written channels-last into `out`, in blocks of
// 16 pixels (one cache line of each plane) over the intra-op threads.
void ToChannelsLast(const float* in, int64_t images, int64_t c, int64_t hw, float* out,
                    int threads) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (hw + kBlock - 1) / kBlock;
  ParallelFor(
      images * blocks, threads, static_cast<double>(c * kBlock),
      [&](int64_t first, int64_t end) {
        for (int64_t item = first; item < end; ++item) {
          const int64_t image = item / blocks;
          const int64_t p0 = (item % blocks) * kBlock;
          const int64_t p1 = std::min(p0 + kBlock, hw);
          const float* src = in + image * c * hw;
          float* dst = out + image * hw * c;
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t p = p0; p < p1; ++p) dst[p * c + ch] = src[ch * hw + p];
          }
        }
      },
      1);
}

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
  // Many samples over a map of many channels: the map is first made channels-last in the
  // workspace, so that each tap's channels are read in vectors (the samples must outnumber the
  // map's pixels a quarter to one for the copy to pay).
  const bool channels_last =
      c >= 8 && 4.0 * static_cast<double>(r_count) * static_cast<double>(out_h * out_w) *
                        static_cast<double>(samples) >=
                    static_cast<double>(n) * static_cast<double>(h) * static_cast<double>(w);
  const size_t workspace =
      channels_last ? static_cast<size_t>(n * c * h * w) * sizeof(float) : size_t{0};
  const RoiRowFn row_fn = PickForThisCpu(&RoiRowAvx512, &RoiRowAvx2, &RoiRowBaseline);
  return MakeKernel(
      context, {Desc(DataType::kFloat32, {r_count, c, out_h, out_w})},
      [=](const KernelArgs& args) {
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
        float* nhwc = static_cast<float*>(args.workspace);
        if (channels_last) ToChannelsLast(in, n, c, h * w, nhwc, threads);
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
                      if (channels_last) {
                        row_fn(nhwc + batch[r] * h * w * c, c, taps.data(), grid_w, max_mode,
                               iy == 0, acc.data());
                        continue;
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
      },
      workspace);
}

}  // namespace

absl::Status RegisterRoiAlignKernels(runtime::KernelRegistry* registry) {
  return registry->Register("RoiAlign", &PrepareRoiAlign);
}

}  // namespace reprise::kernels::cpu
