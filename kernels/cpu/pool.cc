// MaxPool (with dilations and the optional Indices output), AveragePool (count_include_pad),
// both with ceil_mode and auto_pad over 1-D/2-D/3-D, and GlobalAveragePool / GlobalMaxPool.
// Own loops (float32): they follow ONNX's ceil_mode and padding-count rules exactly, which
// oneDNN's pooling does not express directly.
#include <algorithm>
#include <array>
#include <limits>
#include <memory>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/window.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// Per output position along one axis: where its window starts in the input (`origin`, may be
// negative), the range of taps [first, last) that fall inside the input, and how many taps fall
// inside the explicitly padded input (count_include_pad's divisor).
struct AxisTaps {
  std::vector<int64_t> origin, first, last, padded;
};

AxisTaps MakeAxisTaps(const Window& g, int axis) {
  AxisTaps t;
  const int64_t k = g.kernel[axis], s = g.strides[axis], d = g.dilations[axis];
  const int64_t in = g.input[axis], pb = g.pads_begin[axis], pe = g.pads_end[axis];
  // The number of taps t in [0, k) with origin + t * d < limit, i.e. ceil((limit - origin) / d)
  // clamped to [0, k]: computed, not counted (a model may declare a kernel of 2^40 taps).
  auto taps_below = [k, d](int64_t origin, int64_t limit) -> int64_t {
    if (limit <= origin) return 0;
    const uint64_t span = static_cast<uint64_t>(limit) - static_cast<uint64_t>(origin);
    const uint64_t n = span / static_cast<uint64_t>(d) + (span % static_cast<uint64_t>(d) != 0);
    return n >= static_cast<uint64_t>(k) ? k : static_cast<int64_t>(n);
  };
  for (int64_t o = 0; o < g.output[axis]; ++o) {
    const int64_t origin = o * s - pb;
    const int64_t first = taps_below(origin, 0);
    const int64_t last = std::max(first, taps_below(origin, in));
    const int64_t padded = taps_below(origin, in + pe);
    t.origin.push_back(origin);
    t.first.push_back(first);
    t.last.push_back(std::max(first, last));
    t.padded.push_back(padded);
  }
  return t;
}

absl::StatusOr<Shape> CheckPoolInput(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() < 3 || x.size() > 5) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(x),
                           " is not [N,C,D1..Dk] with k in 1..3");
  }
  return x;
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePool(const PrepareContext& context) {
  ASSIGN_OR_RETURN(Shape x, CheckPoolInput(context));
  const Attributes& attrs = AttrsOf(context);
  if (!attrs.Has("kernel_shape")) return InvalidArgument(context, "kernel_shape is required");
  ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.GetInt("ceil_mode", 0));
  ASSIGN_OR_RETURN(int64_t include_pad, attrs.GetInt("count_include_pad", 0));
  ASSIGN_OR_RETURN(int64_t storage_order, attrs.GetInt("storage_order", 0));
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(Window win, ForwardWindow(context, spatial, {}, ceil_mode != 0));
  Shape y = {x[0], x[1]};
  y.insert(y.end(), win.output.begin(), win.output.end());
  // The taps below take a few words per output position along each axis.
  if (!runtime::CheckedElementCount(y, std::numeric_limits<int64_t>::max() / 64).has_value()) {
    return InvalidArgument(context, "output shape ", runtime::ShapeToString(y), " is too large");
  }
  const Window g = To3d(win);
  const int64_t planes = x[0] * x[1];
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const bool with_indices = kMax && context.num_outputs > 1;
  if (with_indices && storage_order != 0 && spatial.size() != 2) {
    return Unimplemented(context, "storage_order=1 is supported for 2-D pooling only");
  }
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y)};
  if (with_indices) outputs.push_back(Desc(DataType::kInt64, y));
  std::array<AxisTaps, 3> taps;
  for (int a = 0; a < 3; ++a) taps[a] = MakeAxisTaps(g, a);
  return MakeKernel(context, std::move(outputs), [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    int64_t* ip = with_indices ? static_cast<int64_t*>(args.outputs[1]) : nullptr;
    const AxisTaps& td = taps[0];
    const AxisTaps& th = taps[1];
    const AxisTaps& tw = taps[2];
    const int64_t dil_d = g.dilations[0], dil_h = g.dilations[1], dil_w = g.dilations[2];
    const int64_t in_h = g.input[1], in_w = g.input[2];
    int64_t o = 0;
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = xp + p * in_size;
      for (int64_t od = 0; od < g.output[0]; ++od) {
        for (int64_t oh = 0; oh < g.output[1]; ++oh) {
          for (int64_t ow = 0; ow < g.output[2]; ++ow, ++o) {
            float best = -std::numeric_limits<float>::infinity();
            int64_t best_at = -1;
            float sum = 0;
            for (int64_t kd = td.first[od]; kd < td.last[od]; ++kd) {
              const int64_t d = td.origin[od] + kd * dil_d;
              for (int64_t kh = th.first[oh]; kh < th.last[oh]; ++kh) {
                const int64_t row = (d * in_h + th.origin[oh] + kh * dil_h) * in_w + tw.origin[ow];
                const float* r = in + row;
                if (kMax && ip == nullptr) {
                  for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) {
                    best = std::max(best, r[kw * dil_w]);
                  }
                } else if (kMax) {
                  for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) {
                    const float v = r[kw * dil_w];
                    if (v > best || best_at < 0) {
                      best = v;
                      best_at = row + kw * dil_w;
                    }
                  }
                } else {
                  for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) sum += r[kw * dil_w];
                }
              }
            }
            if (kMax) {
              yp[o] = best;
              if (ip != nullptr) {
                int64_t index = best_at;
                if (storage_order != 0 && best_at >= 0)
                  index = (best_at % in_w) * in_h + best_at / in_w;
                ip[o] = p * in_size + index;
              }
            } else {
              const int64_t divisor =
                  include_pad != 0 ? td.padded[od] * th.padded[oh] * tw.padded[ow]
                                   : (td.last[od] - td.first[od]) * (th.last[oh] - th.first[oh]) *
                                         (tw.last[ow] - tw.first[ow]);
              yp[o] = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
            }
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGlobalPool(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() < 2) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(x),
                           " has no spatial axes");
  }
  Shape y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  const int64_t planes = x[0] * x[1];
  const int64_t size = planes == 0 ? 0 : runtime::NumElements(x) / planes;
  return MakeKernel(context, {Desc(DataType::kFloat32, y)}, [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = xp + p * size;
      if (kMax) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < size; ++i) best = std::max(best, in[i]);
        yp[p] = best;
      } else {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += in[i];
        yp[p] = size > 0 ? static_cast<float>(sum / size) : 0.0f;
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterPoolKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("MaxPool", &PreparePool<true>));
  RETURN_IF_ERROR(registry->Register("AveragePool", &PreparePool<false>));
  RETURN_IF_ERROR(registry->Register("GlobalMaxPool", &PrepareGlobalPool<true>));
  RETURN_IF_ERROR(registry->Register("GlobalAveragePool", &PrepareGlobalPool<false>));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
