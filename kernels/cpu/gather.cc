// Gather and GatherElements (int32 or int64 indices, negative indices count from the end; an
// out-of-range index makes Run return INVALID_ARGUMENT).
#include <cstring>
#include <memory>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGather(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const TensorDesc& data = context.inputs[0];
  const TensorDesc& indices = context.inputs[1];
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (rank == 0) return InvalidArgument(context, "data must have rank >= 1, got a scalar");
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data.shape[i];
  const int64_t dim = data.shape[axis];
  int64_t inner = static_cast<int64_t>(runtime::DataTypeSize(data.dtype));
  for (int64_t i = axis + 1; i < rank; ++i) inner *= data.shape[i];
  const int64_t count = runtime::NumElements(indices.shape);
  const bool is64 = indices.dtype == DataType::kInt64;
  const std::string op = NodeLabel(context);
  return MakeKernel(context, {Desc(data.dtype, out)}, [=](const KernelArgs& args) {
    const uint8_t* x = static_cast<const uint8_t*>(args.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(args.outputs[0]);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t index = IndexAt(args.inputs[1], is64, i);
      if (index < -dim || index >= dim) return IndexError(op, index, dim);
    }
    if (inner == 0) return absl::OkStatus();
    for (int64_t o = 0; o < outer; ++o) {
      const uint8_t* block = x + o * dim * inner;
      uint8_t* dst = y + o * count * inner;
      for (int64_t i = 0; i < count; ++i) {
        int64_t index = IndexAt(args.inputs[1], is64, i);
        if (index < 0) index += dim;
        std::memcpy(dst + i * inner, block + index * inner, static_cast<size_t>(inner));
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGatherElements(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const TensorDesc& data = context.inputs[0];
  const TensorDesc& indices = context.inputs[1];
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (rank == 0 || indices.shape.size() != data.shape.size()) {
    return InvalidArgument(context, "data ", runtime::ShapeToString(data.shape), " and indices ",
                           runtime::ShapeToString(indices.shape), " must have one rank >= 1");
  }
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && indices.shape[i] > data.shape[i]) {
      return InvalidArgument(context, "indices ", runtime::ShapeToString(indices.shape),
                             " exceed data ", runtime::ShapeToString(data.shape), " on axis ", i);
    }
  }
  const std::vector<int64_t> strides = ContiguousStrides(data.shape);
  const Shape out = indices.shape;
  const int64_t count = runtime::NumElements(out);
  const bool is64 = indices.dtype == DataType::kInt64;
  const int64_t dim = data.shape[axis];
  const std::string op = NodeLabel(context);
  FunctionKernel::RunFn run;
  const bool ok = DispatchBySize(runtime::DataTypeSize(data.dtype), [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      absl::InlinedVector<int64_t, 8> index(out.size(), 0);
      int64_t base = 0;  // data offset of the current index without the axis term
      for (int64_t i = 0; i < count; ++i) {
        int64_t k = IndexAt(args.inputs[1], is64, i);
        if (k < -dim || k >= dim) return IndexError(op, k, dim);
        if (k < 0) k += dim;
        y[i] = x[base + k * strides[axis]];
        for (size_t a = out.size(); a-- > 0;) {
          ++index[a];
          if (a != static_cast<size_t>(axis)) base += strides[a];
          if (index[a] < out[a]) break;
          if (a != static_cast<size_t>(axis)) base -= strides[a] * out[a];
          index[a] = 0;
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(data.dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(data.dtype, out)}, std::move(run));
}

}  // namespace

absl::Status RegisterGatherKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Gather", &PrepareGather));
  RETURN_IF_ERROR(registry->Register("GatherElements", &PrepareGatherElements));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
