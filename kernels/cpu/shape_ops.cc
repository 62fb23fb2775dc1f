// Ops that compute or change only shapes: Shape, Size (their values are set at Prepare so the
// engine can fold them), Reshape, Flatten, Squeeze, Unsqueeze (copies), ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/layout_views.h"
#include "kernels/cpu/output_clearing.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

size_t ByteSize(const TensorDesc& desc) {
  return static_cast<size_t>(runtime::NumElements(desc.shape)) * runtime::DataTypeSize(desc.dtype);
}

std::unique_ptr<PreparedKernel> Int64Constant(const PrepareContext& context, Shape shape,
                                              const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return std::make_unique<ConstantKernel>(context.op, DataType::kInt64, std::move(shape),
                                          std::move(bytes));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareShape(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const Shape& shape = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  ASSIGN_OR_RETURN(int64_t start, AttrsOf(context).GetInt("start", 0));
  ASSIGN_OR_RETURN(int64_t end, AttrsOf(context).GetInt("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> values;
  for (int64_t i = start; i < end; ++i) values.push_back(shape[i]);
  const int64_t n = static_cast<int64_t>(values.size());
  return Int64Constant(context, {n}, values);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSize(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  return Int64Constant(context, {}, {runtime::NumElements(context.inputs[0].shape)});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> Reshaped(const PrepareContext& context, Shape out) {
  const TensorDesc& in = context.inputs[0];
  if (runtime::NumElements(out) != runtime::NumElements(in.shape)) {
    return InvalidArgument(context, "cannot reshape ", runtime::ShapeToString(in.shape), " to ",
                           runtime::ShapeToString(out));
  }
  return MakeKernel(context, {Desc(in.dtype, std::move(out))}, CopyInputToOutput(ByteSize(in)));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReshape(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> spec, ReadInts(context, 1, "shape"));
  ASSIGN_OR_RETURN(int64_t allowzero, AttrsOf(context).GetInt("allowzero", 0));
  ASSIGN_OR_RETURN(Shape out, ReshapeTarget(context, context.inputs[0].shape, spec, allowzero));
  return Reshaped(context, std::move(out));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFlatten(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const Shape& in = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  ASSIGN_OR_RETURN(int64_t axis, AttrsOf(context).GetInt("axis", 1));
  if (axis < -rank || axis > rank) {
    return InvalidArgument(context, "axis ", axis, " is out of range for shape ",
                           runtime::ShapeToString(in));
  }
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in[i];
  int64_t inner = 1;
  for (int64_t i = axis; i < rank; ++i) inner *= in[i];
  return Reshaped(context, {outer, inner});
}

// Axes from the attribute (before opset 13) or from input 1 (since); `present` says whether
// the node gave any.
absl::StatusOr<std::vector<int64_t>> AxesOf(const PrepareContext& context, bool* present) {
  *present = false;
  if (context.opset < 13 || !HasInput(context, 1)) {
    if (!AttrsOf(context).Has("axes")) return std::vector<int64_t>{};
    *present = true;
    return AttrsOf(context).GetInts("axes", {});
  }
  *present = true;
  return ReadInts(context, 1, "axes");
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSqueeze(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  const Shape& in = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  bool given = false;
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(context, &given));
  std::vector<bool> drop(in.size(), false);
  if (!given) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  for (int64_t axis : axes) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(context, axis, rank));
    if (in[a] != 1) {
      return InvalidArgument(context, "cannot squeeze axis ", axis, " of shape ",
                             runtime::ShapeToString(in), ": its size is not 1");
    }
    drop[a] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return Reshaped(context, std::move(out));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareUnsqueeze(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  const Shape& in = context.inputs[0].shape;
  bool given = false;
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(context, &given));
  if (!given) return InvalidArgument(context, "axes are required");
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t axis : axes) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(context, axis, out_rank));
    if (inserted[a]) return InvalidArgument(context, "axis ", axis, " is repeated");
    inserted[a] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? 1 : in[next++]);
  return Reshaped(context, std::move(out));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConstantOfShape(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(context, 0, "shape"));
  for (int64_t d : dims) {
    if (d < 0) {
      return InvalidArgument(context, "shape ", runtime::ShapeToString(dims),
                             " has a negative dim");
    }
  }
  DataType dtype = DataType::kFloat32;
  std::vector<uint8_t> value(sizeof(float), 0);
  if (AttrsOf(context).Has("value")) {
    ASSIGN_OR_RETURN(const runtime::TensorValue* tensor, AttrsOf(context).GetTensor("value"));
    const size_t size = runtime::DataTypeSize(tensor->dtype);
    if (size == 0 || tensor->bytes.size() != size) {
      return InvalidArgument(context, "value must hold one element of a numeric type, got ",
                             runtime::DataTypeName(tensor->dtype), " with ", tensor->bytes.size(),
                             " bytes");
    }
    dtype = tensor->dtype;
    value.assign(tensor->bytes.begin(), tensor->bytes.end());
  }
  const int64_t n = runtime::NumElements(dims);
  // Zeros (the usual value) are streamed over a large output, another value is filled as its
  // type; either split over the intra-op threads (a detector's RoI pooling starts from zeros of
  // [1000, 256, 7, 7] per image).
  const int threads = context.intra_op_threads;
  const size_t bytes = static_cast<size_t>(n) * value.size();
  if (std::all_of(value.begin(), value.end(), [](uint8_t b) { return b == 0; })) {
    return MakeKernel(context, {Desc(dtype, dims)}, [bytes, threads](const KernelArgs& args) {
      if (bytes >= kClearOutputMinBytes) {
        StreamZeros(args.outputs[0], bytes, threads);
      } else if (bytes > 0) {
        std::memset(args.outputs[0], 0, bytes);
      }
      return absl::OkStatus();
    });
  }
  FunctionKernel::RunFn run;
  const bool typed = DispatchBySize(value.size(), [&]<typename T>() {
    T element;
    std::memcpy(&element, value.data(), sizeof(T));
    run = [element, n, threads](const KernelArgs& args) {
      T* out = static_cast<T*>(args.outputs[0]);
      ParallelFor(n, threads, 0.25,
                  [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, element); });
      return absl::OkStatus();
    };
  });
  if (!typed) {
    run = [value, n](const KernelArgs& args) {
      uint8_t* out = static_cast<uint8_t*>(args.outputs[0]);
      const size_t size = value.size();
      for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * size, value.data(), size);
      return absl::OkStatus();
    };
  }
  return MakeKernel(context, {Desc(dtype, dims)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareRange(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  const DataType dtype = context.inputs[0].dtype;
  for (size_t i = 1; i < 3; ++i) {
    if (context.inputs[i].dtype != dtype) {
      return InvalidArgument(context, "start, limit and delta must have one type, got ",
                             runtime::DataTypeName(dtype), " and ",
                             runtime::DataTypeName(context.inputs[i].dtype));
    }
  }
  ASSIGN_OR_RETURN(double start, ReadScalar(context, 0, "start"));
  ASSIGN_OR_RETURN(double limit, ReadScalar(context, 1, "limit"));
  ASSIGN_OR_RETURN(double delta, ReadScalar(context, 2, "delta"));
  if (delta == 0) return InvalidArgument(context, "delta is 0");
  const double steps = std::ceil((limit - start) / delta);
  if (!(steps < 1e12)) {
    return InvalidArgument(context, "range [", start, ", ", limit, ") by ", delta, " is too long");
  }
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(steps), 0);
  FunctionKernel::RunFn run;
  const bool ok = DispatchArithmetic(dtype, [&]<typename T>() {
    const T s = static_cast<T>(start);
    const T d = static_cast<T>(delta);
    run = [s, d, n](const KernelArgs& args) {
      T* out = static_cast<T*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(s + static_cast<T>(i) * d);
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  return MakeKernel(context, {Desc(dtype, {n})}, std::move(run));
}

}  // namespace

absl::StatusOr<Shape> ReshapeTarget(const PrepareContext& context, const Shape& in,
                                    const std::vector<int64_t>& spec, int64_t allowzero) {
  Shape out(spec.size());
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && allowzero == 0) {
      if (i >= in.size()) {
        return InvalidArgument(context, "shape ", runtime::ShapeToString(spec), " copies dim ", i,
                               " of input ", runtime::ShapeToString(in), " which has none");
      }
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) {
        return InvalidArgument(context, "shape ", runtime::ShapeToString(spec),
                               " has more than one -1");
      }
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) {
      return InvalidArgument(context, "shape ", runtime::ShapeToString(spec),
                             " has a negative dim");
    }
    out[i] = d;
    if (!runtime::CheckedMul(known, d, &known)) {
      return InvalidArgument(context, "shape ", runtime::ShapeToString(spec), " overflows");
    }
  }
  if (infer_at >= 0) {
    const int64_t total = runtime::NumElements(in);
    if (known == 0 || total % known != 0) {
      return InvalidArgument(context, "cannot reshape ", runtime::ShapeToString(in), " to ",
                             runtime::ShapeToString(spec));
    }
    out[infer_at] = total / known;
  }
  if (runtime::NumElements(out) != runtime::NumElements(in)) {
    return InvalidArgument(context, "cannot reshape ", runtime::ShapeToString(in), " to ",
                           runtime::ShapeToString(out));
  }
  return out;
}

absl::Status RegisterShapeKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Shape", &PrepareShape));
  RETURN_IF_ERROR(registry->Register("Size", &PrepareSize));
  RETURN_IF_ERROR(registry->Register("Reshape", &PrepareReshape));
  RETURN_IF_ERROR(registry->Register("Flatten", &PrepareFlatten));
  RETURN_IF_ERROR(registry->Register("Squeeze", &PrepareSqueeze));
  RETURN_IF_ERROR(registry->Register("Unsqueeze", &PrepareUnsqueeze));
  RETURN_IF_ERROR(registry->Register("ConstantOfShape", &PrepareConstantOfShape));
  RETURN_IF_ERROR(registry->Register("Range", &PrepareRange));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
