// ConvTranspose: a GEMM (oneDNN sgemm) per image and group followed by a col2im scatter, which
// covers every output_padding / output_shape combination.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvTranspose(
    const PrepareContext& context) {
  ASSIGN_OR_RETURN(int64_t group, CheckConvInputs(context, /*transposed=*/true));
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(
      Window win, TransposedWindow(context, spatial, std::vector<int64_t>(w.begin() + 2, w.end())));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (win.kernel[i] != w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", runtime::ShapeToString(win.kernel),
                             " does not match weights ", runtime::ShapeToString(w));
    }
  }
  const int64_t batch = x[0];
  const int64_t in_group = x[1] / group;  // input channels per group
  const int64_t out_group = w[1];         // output channels per group
  Shape y = {batch, out_group * group};
  y.insert(y.end(), win.output.begin(), win.output.end());
  const Window g = To3d(win);
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const int64_t out_size = g.output[0] * g.output[1] * g.output[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t rows = out_group * taps;  // rows of the column buffer
  const bool has_bias = HasInput(context, 2);
  const size_t workspace = static_cast<size_t>(rows * in_size) * sizeof(float);
  const int threads = context.intra_op_threads;
  return MakeKernel(
      context, {Desc(DataType::kFloat32, y)},
      [=](const KernelArgs& args) -> absl::Status {
        UseIntraOpThreads(threads);
        const float* xp = static_cast<const float*>(args.inputs[0]);
        const float* wp = static_cast<const float*>(args.inputs[1]);
        const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
        float* yp = static_cast<float*>(args.outputs[0]);
        float* cols = static_cast<float*>(args.workspace);
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t gi = 0; gi < group; ++gi) {
            // cols[rows, in_size] = W_g^T [rows, in_group] * X_g [in_group, in_size]
            const float* wg = wp + gi * in_group * rows;
            const float* xg = xp + (n * group + gi) * in_group * in_size;
            RETURN_IF_ERROR(Sgemm(true, false, rows, in_size, in_group, 1.0f, wg, rows, xg, in_size,
                                  0.0f, cols, in_size));
            for (int64_t m = 0; m < out_group; ++m) {
              const int64_t channel = gi * out_group + m;
              float* out = yp + (n * group * out_group + channel) * out_size;
              std::fill(out, out + out_size, bias != nullptr ? bias[channel] : 0.0f);
              for (int64_t t = 0; t < taps; ++t) {
                const int64_t kd = t / (g.kernel[1] * g.kernel[2]);
                const int64_t kh = (t / g.kernel[2]) % g.kernel[1];
                const int64_t kw = t % g.kernel[2];
                const float* col = cols + (m * taps + t) * in_size;
                for (int64_t id = 0; id < g.input[0]; ++id) {
                  const int64_t od = id * g.strides[0] - g.pads_begin[0] + kd * g.dilations[0];
                  if (od < 0 || od >= g.output[0]) continue;
                  for (int64_t ih = 0; ih < g.input[1]; ++ih) {
                    const int64_t oh = ih * g.strides[1] - g.pads_begin[1] + kh * g.dilations[1];
                    if (oh < 0 || oh >= g.output[1]) continue;
                    const float* src = col + (id * g.input[1] + ih) * g.input[2];
                    float* dst = out + (od * g.output[1] + oh) * g.output[2];
                    for (int64_t iw = 0; iw < g.input[2]; ++iw) {
                      const int64_t ow = iw * g.strides[2] - g.pads_begin[2] + kw * g.dilations[2];
                      if (ow >= 0 && ow < g.output[2]) dst[ow] += src[iw];
                    }
                  }
                }
              }
            }
          }
        }
        return absl::OkStatus();
      },
      workspace);
}

}  // namespace

absl::Status RegisterConvTransposeKernels(runtime::KernelRegistry* registry) {
  return registry->Register("ConvTranspose", &PrepareConvTranspose);
}

}  // namespace reprise::kernels::cpu
