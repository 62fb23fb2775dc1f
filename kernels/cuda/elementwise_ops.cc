// Element-wise and layout ops: binary with broadcast, unary, Cast, copies (Reshape & co.),
// Transpose, Slice, Expand, Concat and Gather.
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "kernels/cuda/op_kernel.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

absl::Status RequireFloat(const PrepareContext& context) {
  for (const TensorDesc& input : context.inputs) {
    if (input.present && input.dtype != DataType::kFloat32) {
      return absl::UnimplementedError(absl::StrCat(context.op, " \"", context.name,
                                                   "\": the cuda kernel supports float32, got ",
                                                   runtime::DataTypeName(input.dtype)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> TypeCode(DataType type, const PrepareContext& context) {
  switch (type) {
    case DataType::kFloat32:
      return 0;
    case DataType::kInt64:
      return 1;
    case DataType::kInt32:
      return 2;
    case DataType::kBool:
    case DataType::kUInt8:
      return 3;
    default:
      return absl::UnimplementedError(
          absl::StrCat(context.op, ": cuda Cast does not support ", runtime::DataTypeName(type)));
  }
}

std::vector<int64_t> ConstInts(const TensorDesc& desc) {
  std::vector<int64_t> values;
  const int64_t n = runtime::NumElements(desc.shape);
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(desc.dtype == DataType::kInt32 ? static_cast<const int32_t*>(desc.data)[i]
                                                    : static_cast<const int64_t*>(desc.data)[i]);
  }
  return values;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBinary(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  RETURN_IF_ERROR(RequireFloat(context));
  if (context.inputs.size() != 2) {
    return absl::UnimplementedError(
        absl::StrCat(context.op, ": the cuda kernel takes exactly 2 inputs"));
  }
  static const auto* ops = new absl::flat_hash_map<std::string, BinaryOp>{
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul},
      {"Div", BinaryOp::kDiv}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin},
      {"Pow", BinaryOp::kPow}};
  const BinaryOp op = ops->at(std::string(context.op));
  float alpha = 1.0f;
  if (context.attributes != nullptr && (op == BinaryOp::kAdd || op == BinaryOp::kSub)) {
    ASSIGN_OR_RETURN(alpha, context.attributes->GetFloat("alpha", 1.0f));
  }
  const Shape out = kernel->outputs()[0].shape;
  ASSIGN_OR_RETURN(StridedView view, MakeView(out, BroadcastStrides(context.inputs[0].shape, out),
                                              BroadcastStrides(context.inputs[1].shape, out)));
  const int64_t count = runtime::NumElements(out);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    return CheckLaunch(LaunchBinaryF32(op, view, count, static_cast<const float*>(args.inputs[0]),
                                       static_cast<const float*>(args.inputs[1]),
                                       static_cast<float*>(args.outputs[0]), alpha, stream),
                       name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareUnary(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloat(context));
  static const auto* ops = new absl::flat_hash_map<std::string, UnaryOp>{
      {"Relu", UnaryOp::kRelu}, {"Sigmoid", UnaryOp::kSigmoid},
      {"Tanh", UnaryOp::kTanh}, {"Exp", UnaryOp::kExp},
      {"Log", UnaryOp::kLog},   {"Sqrt", UnaryOp::kSqrt},
      {"Neg", UnaryOp::kNeg},   {"Abs", UnaryOp::kAbs},
      {"Erf", UnaryOp::kErf},   {"Reciprocal", UnaryOp::kReciprocal}};
  const UnaryOp op = ops->at(std::string(context.op));
  const int64_t count = runtime::NumElements(kernel->outputs()[0].shape);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    return CheckLaunch(LaunchUnaryF32(op, count, static_cast<const float*>(args.inputs[0]),
                                      static_cast<float*>(args.outputs[0]), stream),
                       name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareClip(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloat(context));
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  if (context.attributes != nullptr && context.opset < 11) {
    ASSIGN_OR_RETURN(lo, context.attributes->GetFloat("min", lo));
    ASSIGN_OR_RETURN(hi, context.attributes->GetFloat("max", hi));
  }
  for (size_t i = 1; i < 3 && i < context.inputs.size(); ++i) {
    if (!context.inputs[i].present) continue;
    if (context.inputs[i].data == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("Clip \"", context.name, "\": on cuda min / max must be known"));
    }
    (i == 1 ? lo : hi) = *static_cast<const float*>(context.inputs[i].data);
  }
  const int64_t count = runtime::NumElements(kernel->outputs()[0].shape);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    return CheckLaunch(LaunchClampF32(count, static_cast<const float*>(args.inputs[0]),
                                      static_cast<float*>(args.outputs[0]), lo, hi, stream),
                       name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCast(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  ASSIGN_OR_RETURN(int from, TypeCode(context.inputs[0].dtype, context));
  ASSIGN_OR_RETURN(int to, TypeCode(kernel->outputs()[0].dtype, context));
  const int64_t count = runtime::NumElements(kernel->outputs()[0].shape);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    return CheckLaunch(LaunchCast(from, to, count, args.inputs[0], args.outputs[0], stream), name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCopy(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const TensorDesc& out = kernel->outputs()[0];
  const size_t bytes = runtime::NumElements(out.shape) * runtime::DataTypeSize(out.dtype);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (bytes == 0 || args.outputs[0] == args.inputs[0]) return absl::OkStatus();
    return CheckLaunch(
        cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes, cudaMemcpyDeviceToDevice, stream),
        name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

namespace {

// A kernel that copies input 0 through `view` into output 0.
std::unique_ptr<PreparedKernel> StridedCopyKernel(std::unique_ptr<OpKernel> kernel,
                                                  StridedView view, const std::string& name) {
  const TensorDesc& out = kernel->outputs()[0];
  const int64_t count = runtime::NumElements(out.shape);
  const size_t element = runtime::DataTypeSize(out.dtype);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (count == 0) return absl::OkStatus();
    return CheckLaunch(
        LaunchStridedCopy(view, count, element, args.inputs[0], args.outputs[0], stream), name);
  });
  return kernel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTranspose(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const Shape& in = context.inputs[0].shape;
  std::vector<int64_t> perm;
  for (size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(perm, context.attributes->GetInts("perm", perm));
  }
  const std::vector<int64_t> in_stride = Strides(in);
  std::vector<int64_t> a_stride;
  for (int64_t p : perm) a_stride.push_back(in_stride[p]);
  ASSIGN_OR_RETURN(StridedView view, MakeView(kernel->outputs()[0].shape, a_stride, {}));
  return StridedCopyKernel(std::move(kernel), view, std::string(context.op));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSlice(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const Shape& in = context.inputs[0].shape;
  for (size_t i = 1; i < context.inputs.size(); ++i) {
    if (context.inputs[i].present && context.inputs[i].data == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "Slice \"", context.name, "\": on cuda starts / ends / axes / steps must be known"));
    }
  }
  if (context.inputs.size() < 3) {
    return absl::UnimplementedError("Slice: the cuda kernel needs opset >= 10 inputs");
  }
  const std::vector<int64_t> starts = ConstInts(context.inputs[1]);
  std::vector<int64_t> axes, steps;
  if (context.inputs.size() > 3 && context.inputs[3].present) {
    axes = ConstInts(context.inputs[3]);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (context.inputs.size() > 4 && context.inputs[4].present) {
    steps = ConstInts(context.inputs[4]);
  } else {
    steps.assign(starts.size(), 1);
  }
  const std::vector<int64_t> in_stride = Strides(in);
  std::vector<int64_t> a_stride = in_stride;
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axes[i], in.size(), context));
    const int64_t dim = in[axis];
    const int64_t step = steps[i];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    // Clamped without std::clamp, whose bounds cross for an empty axis (dim 0).
    start = step > 0 ? std::min(std::max<int64_t>(start, 0), dim)
                     : std::max<int64_t>(std::min(start, dim - 1), 0);
    offset += start * in_stride[axis];
    a_stride[axis] = in_stride[axis] * step;
  }
  ASSIGN_OR_RETURN(StridedView view, MakeView(kernel->outputs()[0].shape, a_stride, {}));
  view.a_offset = offset;
  return StridedCopyKernel(std::move(kernel), view, std::string(context.op));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareExpand(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const Shape& out = kernel->outputs()[0].shape;
  ASSIGN_OR_RETURN(StridedView view,
                   MakeView(out, BroadcastStrides(context.inputs[0].shape, out), {}));
  return StridedCopyKernel(std::move(kernel), view, std::string(context.op));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConcat(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const TensorDesc& out = kernel->outputs()[0];
  int64_t axis_attr = 0;
  if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(axis_attr, context.attributes->GetInt("axis", 0));
  }
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, out.shape.size(), context));
  const std::vector<int64_t> out_stride = Strides(out.shape);
  std::vector<std::pair<StridedView, int64_t>> parts;  // view, output element offset
  int64_t position = 0;
  for (const TensorDesc& input : context.inputs) {
    ASSIGN_OR_RETURN(StridedView view, MakeView(input.shape, Strides(input.shape), {}));
    for (size_t d = 0; d < out.shape.size(); ++d) view.out_stride[d] = out_stride[d];
    parts.emplace_back(view, position * out_stride[axis]);
    position += input.shape[axis];
  }
  const size_t element = runtime::DataTypeSize(out.dtype);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    for (size_t i = 0; i < parts.size(); ++i) {
      int64_t count = 1;
      for (int d = 0; d < parts[i].first.ndim; ++d) count *= parts[i].first.shape[d];
      if (count == 0) continue;
      void* dst = static_cast<char*>(args.outputs[0]) + parts[i].second * element;
      RETURN_IF_ERROR(CheckLaunch(
          LaunchStridedCopy(parts[i].first, count, element, args.inputs[i], dst, stream), name));
    }
    return absl::OkStatus();
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGather(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (constant) return std::unique_ptr<PreparedKernel>(std::move(kernel));
  const TensorDesc& data = context.inputs[0];
  const TensorDesc& indices = context.inputs[1];
  const size_t element = runtime::DataTypeSize(data.dtype);
  if (indices.dtype != DataType::kInt64 || (element != 4 && element != 8)) {
    return absl::UnimplementedError(
        absl::StrCat("Gather \"", context.name,
                     "\": the cuda kernel takes int64 indices and 4- or 8-byte data"));
  }
  int64_t axis_attr = 0;
  if (context.attributes != nullptr) {
    ASSIGN_OR_RETURN(axis_attr, context.attributes->GetInt("axis", 0));
  }
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, data.shape.size(), context));
  const int64_t outer = Product(data.shape, 0, axis);
  const int64_t axis_size = data.shape[axis];
  const int64_t inner = Product(data.shape, axis + 1, data.shape.size());
  const int64_t num_indices = runtime::NumElements(indices.shape);
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) {
    if (outer * num_indices * inner == 0) return absl::OkStatus();
    return CheckLaunch(
        LaunchGather(outer, axis_size, num_indices, inner, element, args.inputs[0],
                     static_cast<const int64_t*>(args.inputs[1]), args.outputs[0], stream),
        name);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

}  // namespace reprise::kernels::cuda
