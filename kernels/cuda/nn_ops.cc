// Softmax, LayerNormalization, reductions, BatchNormalization (inference) and pooling.
#include <cmath>
#include <utility>

#include "kernels/cuda/op_kernel.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

absl::Status RequireFloatInput(const PrepareContext& context, size_t index) {
  if (context.inputs.size() <= index || context.inputs[index].dtype != DataType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat(
        context.op, " \"", context.name, "\": the cuda kernel supports float32 input ", index));
  }
  return absl::OkStatus();
}

int64_t IntAttr(const PrepareContext& context, const char* name, int64_t fallback) {
  if (context.attributes == nullptr) return fallback;
  auto value = context.attributes->GetInt(name, fallback);
  return value.ok() ? *value : fallback;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSoftmax(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloatInput(context, 0));
  const Shape& in = context.inputs[0].shape;
  if (context.opset < 13) {
    return absl::UnimplementedError(
        absl::StrCat(context.op, ": the cuda kernel implements opset >= 13 (one axis)"));
  }
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(IntAttr(context, "axis", -1), in.size(), context));
  const int64_t outer = Product(in, 0, axis);
  const int64_t n = in[axis];
  const int64_t inner = Product(in, axis + 1, in.size());
  const bool log = context.op == "LogSoftmax";
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (outer * n * inner == 0) return absl::OkStatus();
    return CheckLaunch(LaunchSoftmaxF32(outer, n, inner, static_cast<const float*>(args.inputs[0]),
                                        static_cast<float*>(args.outputs[0]), log, stream),
                       name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLayerNorm(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloatInput(context, 0));
  if (context.num_outputs > 1) {
    return absl::UnimplementedError("LayerNormalization: the cuda kernel has no mean / inv_std");
  }
  const Shape& in = context.inputs[0].shape;
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(IntAttr(context, "axis", -1), in.size(), context));
  float epsilon = 1e-5f;
  if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(epsilon, context.attributes->GetFloat("epsilon", 1e-5f));
  }
  const int64_t rows = Product(in, 0, axis);
  const int64_t norm = Product(in, axis, in.size());
  if (runtime::NumElements(context.inputs[1].shape) != norm ||
      (context.inputs.size() > 2 && context.inputs[2].present &&
       runtime::NumElements(context.inputs[2].shape) != norm)) {
    return absl::UnimplementedError(
        "LayerNormalization: the cuda kernel needs scale / bias of the normalised shape");
  }
  const bool has_bias = context.inputs.size() > 2 && context.inputs[2].present;
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (rows * norm == 0) return absl::OkStatus();
    return CheckLaunch(
        LaunchLayerNormF32(rows, norm, static_cast<const float*>(args.inputs[0]),
                           static_cast<const float*>(args.inputs[1]),
                           has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr, epsilon,
                           static_cast<float*>(args.outputs[0]), stream),
        name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReduce(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloatInput(context, 0));
  const Shape& in = context.inputs[0].shape;
  std::vector<int64_t> axes;
  if (context.inputs.size() > 1 && context.inputs[1].present) {
    if (context.inputs[1].data == nullptr) {
      return absl::UnimplementedError(absl::StrCat(context.op, ": axes must be known on cuda"));
    }
    const auto* values = static_cast<const int64_t*>(context.inputs[1].data);
    axes.assign(values, values + runtime::NumElements(context.inputs[1].shape));
  } else if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(axes, context.attributes->GetInts("axes", {}));
  }
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a, in.size(), context));
    reduced[axis] = true;
  }
  size_t first = in.size(), last = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      first = std::min(first, d);
      last = d;
    }
  }
  for (size_t d = first; d <= last && first < in.size(); ++d) {
    if (!reduced[d] && in[d] != 1) {
      return absl::UnimplementedError(
          absl::StrCat(context.op, ": the cuda kernel reduces contiguous axes only"));
    }
  }
  const int64_t outer = first < in.size() ? Product(in, 0, first) : 1;
  const int64_t reduce = first < in.size() ? Product(in, first, last + 1) : 1;
  const int64_t inner = first < in.size() ? Product(in, last + 1, in.size()) : 1;
  const int kind = context.op == "ReduceSum"    ? 0
                   : context.op == "ReduceMean" ? 1
                   : context.op == "ReduceMax"  ? 2
                                                : 3;
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (outer * inner == 0) return absl::OkStatus();
    return CheckLaunch(
        LaunchReduceF32(kind, outer, reduce, inner, static_cast<const float*>(args.inputs[0]),
                        static_cast<float*>(args.outputs[0]), stream),
        name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBatchNorm(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloatInput(context, 0));
  for (size_t i = 1; i < 5; ++i) {
    if (context.inputs.size() <= i || context.inputs[i].data == nullptr ||
        context.inputs[i].dtype != DataType::kFloat32) {
      return absl::UnimplementedError(
          "BatchNormalization: on cuda scale, bias, mean and var must be float32 initializers");
    }
  }
  float epsilon = 1e-5f;
  if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(epsilon, context.attributes->GetFloat("epsilon", 1e-5f));
  }
  const Shape& in = context.inputs[0].shape;
  const int64_t channels = in.size() > 1 ? in[1] : 1;
  std::vector<float> scale(channels), bias(channels);
  const auto* gamma = static_cast<const float*>(context.inputs[1].data);
  const auto* beta = static_cast<const float*>(context.inputs[2].data);
  const auto* mean = static_cast<const float*>(context.inputs[3].data);
  const auto* var = static_cast<const float*>(context.inputs[4].data);
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = gamma[c] / std::sqrt(var[c] + epsilon);
    bias[c] = beta[c] - mean[c] * scale[c];
  }
  absl::StatusOr<void*> d_scale = kernel->Upload(scale.data(), channels * sizeof(float));
  absl::StatusOr<void*> d_bias =
      d_scale.ok() ? kernel->Upload(bias.data(), channels * sizeof(float)) : d_scale;
  if (!d_bias.ok()) {
    // No device (a planning-only machine): Prepare succeeds, a launch reports why.
    kernel->set_launch(
        [error = d_bias.status()](const KernelArgs&, cudaStream_t) { return error; });
    return std::unique_ptr<PreparedKernel>(std::move(kernel));
  }
  const int64_t outer = in.empty() ? 1 : in[0];
  const int64_t inner = Product(in, 2, in.size());
  const std::string name(context.op);
  void* scale_ptr = *d_scale;
  void* bias_ptr = *d_bias;
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (outer * channels * inner == 0) return absl::OkStatus();
    return CheckLaunch(
        LaunchChannelAffineF32(outer, channels, inner, static_cast<const float*>(args.inputs[0]),
                               static_cast<const float*>(scale_ptr),
                               static_cast<const float*>(bias_ptr),
                               static_cast<float*>(args.outputs[0]), stream),
        name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePool(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloatInput(context, 0));
  const Shape& in = context.inputs[0].shape;
  const Shape& out = kernel->outputs()[0].shape;
  if (in.size() != 4 || context.num_outputs > 1) {
    return absl::UnimplementedError(
        absl::StrCat(context.op, ": the cuda kernel pools 2-D NCHW with one output"));
  }
  Pool2d p;
  p.n = in[0];
  p.c = in[1];
  p.h = in[2];
  p.w = in[3];
  p.out_h = out[2];
  p.out_w = out[3];
  const bool global = context.op.substr(0, 6) == "Global";
  const int kind = context.op.find("Max") != absl::string_view::npos ? 0 : 1;
  if (global) {
    p.kernel_h = p.h;
    p.kernel_w = p.w;
  } else {
    const Attributes& attrs = *context.attributes;
    ASSIGN_OR_RETURN(std::string auto_pad, attrs.GetString("auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      return absl::UnimplementedError(absl::StrCat(context.op, ": cuda auto_pad ", auto_pad));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> kernel_shape, attrs.GetInts("kernel_shape", {}));
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.GetInts("strides", {1, 1}));
    ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.GetInts("pads", {0, 0, 0, 0}));
    ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.GetInts("dilations", {1, 1}));
    ASSIGN_OR_RETURN(int64_t include_pad, attrs.GetInt("count_include_pad", 0));
    if (kernel_shape.size() != 2 || strides.size() != 2 || pads.size() != 4 ||
        dilations.size() != 2) {
      return absl::UnimplementedError(absl::StrCat(context.op, ": cuda pools 2-D windows only"));
    }
    p.kernel_h = kernel_shape[0];
    p.kernel_w = kernel_shape[1];
    p.stride_h = strides[0];
    p.stride_w = strides[1];
    p.pad_top = pads[0];
    p.pad_left = pads[1];
    p.dilation_h = dilations[0];
    p.dilation_w = dilations[1];
    p.count_include_pad = include_pad != 0;
  }
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (p.n * p.c * p.out_h * p.out_w == 0) return absl::OkStatus();
    return CheckLaunch(LaunchPool2dF32(kind, p, static_cast<const float*>(args.inputs[0]),
                                       static_cast<float*>(args.outputs[0]), stream),
                       name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

}  // namespace reprise::kernels::cuda
