// MaxPool (with dilations and the optional Indices output), AveragePool (count_include_pad),
// both with ceil_mode and auto_pad over 1-D/2-D/3-D, and GlobalAveragePool / GlobalMaxPool.
// Own loops (float32): they follow ONNX's ceil_mode and padding-count rules exactly, which
// oneDNN's pooling does not express directly.
#include <algorithm>
#include <limits>
#include <memory>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/window.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

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
  const Window g = To3d(win);
  const int64_t planes = x[0] * x[1];
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const int64_t out_size = g.output[0] * g.output[1] * g.output[2];
  const bool with_indices = kMax && context.num_outputs > 1;
  if (with_indices && storage_order != 0 && spatial.size() != 2) {
    return Unimplemented(context, "storage_order=1 is supported for 2-D pooling only");
  }
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y)};
  if (with_indices) outputs.push_back(Desc(DataType::kInt64, y));
  return MakeKernel(context, std::move(outputs), [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    int64_t* ip = with_indices ? static_cast<int64_t*>(args.outputs[1]) : nullptr;
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = xp + p * in_size;
      for (int64_t od = 0; od < g.output[0]; ++od) {
        for (int64_t oh = 0; oh < g.output[1]; ++oh) {
          for (int64_t ow = 0; ow < g.output[2]; ++ow) {
            const int64_t d0 = od * g.strides[0] - g.pads_begin[0];
            const int64_t h0 = oh * g.strides[1] - g.pads_begin[1];
            const int64_t w0 = ow * g.strides[2] - g.pads_begin[2];
            float best = -std::numeric_limits<float>::infinity();
            int64_t best_at = -1;
            double sum = 0;
            int64_t valid = 0;
            int64_t padded = 0;  // window taps inside the explicitly padded input
            for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
              const int64_t d = d0 + kd * g.dilations[0];
              if (d >= g.input[0] + g.pads_end[0]) break;
              const bool d_in = d >= 0 && d < g.input[0];
              for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                const int64_t h = h0 + kh * g.dilations[1];
                if (h >= g.input[1] + g.pads_end[1]) break;
                const bool h_in = h >= 0 && h < g.input[1];
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                  const int64_t w = w0 + kw * g.dilations[2];
                  if (w >= g.input[2] + g.pads_end[2]) break;
                  ++padded;
                  if (!d_in || !h_in || w < 0 || w >= g.input[2]) continue;
                  const int64_t at = (d * g.input[1] + h) * g.input[2] + w;
                  const float v = in[at];
                  ++valid;
                  if (kMax) {
                    if (v > best || best_at < 0) {
                      best = v;
                      best_at = at;
                    }
                  } else {
                    sum += v;
                  }
                }
              }
            }
            const int64_t o = p * out_size + (od * g.output[1] + oh) * g.output[2] + ow;
            if (kMax) {
              yp[o] = best;
              if (ip != nullptr) {
                int64_t index = best_at;
                if (storage_order != 0 && best_at >= 0) {
                  const int64_t h = best_at / g.input[2];
                  const int64_t w = best_at % g.input[2];
                  index = w * g.input[1] + h;
                }
                ip[o] = p * in_size + index;
              }
            } else {
              const int64_t divisor = include_pad != 0 ? padded : valid;
              yp[o] = divisor > 0 ? static_cast<float>(sum / divisor) : 0.0f;
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
