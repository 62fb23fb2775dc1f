// QuantizeLinear and DequantizeLinear (one float32 scale and zero point for the tensor, or from
// opset 13 one per slice along `axis`) and DynamicQuantizeLinear (uint8). Quantizing divides by
// the scale in float32, rounds half to even, adds the zero point and saturates to its type
// (uint8 without one); a NaN quantizes to the zero point.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantize_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// x viewed as [outer, dim, inner]: element i takes scale and zero point number (i / inner) % dim.
// One scale for the tensor is dim 1.
struct ScaleLayout {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 0;
};

// Calls fn(i, k) for every element i of x with the index k of its scale, in order.
template <typename Fn>
void ForEachElement(const ScaleLayout& layout, Fn&& fn) {
  int64_t i = 0;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t k = 0; k < layout.dim; ++k) {
      for (int64_t j = 0; j < layout.inner; ++j) fn(i++, k);
    }
  }
}

// Checks the scale (input 1) and the optional zero point (input 2) against x (input 0). A scale
// of one element applies to the whole tensor; from opset 13 a 1-D scale has one element per
// index of x's axis `axis` (default 1). The zero point has the scale's shape.
absl::StatusOr<ScaleLayout> PrepareScale(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  const TensorDesc& x = context.inputs[0];
  const Shape& scale = context.inputs[1].shape;
  ScaleLayout layout;
  layout.inner = runtime::NumElements(x.shape);
  const bool per_tensor = scale.empty() || scale == Shape{1};
  if (!per_tensor) {
    if (context.opset < 13) {
      return InvalidArgument(context, "scale has shape ", runtime::ShapeToString(scale),
                             ", expected a scalar (per-axis scales need opset 13, the model has ",
                             context.opset, ")");
    }
    if (scale.size() != 1) {
      return InvalidArgument(context, "scale has shape ", runtime::ShapeToString(scale),
                             ", expected a scalar or a 1-D tensor");
    }
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 1));
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
    if (scale[0] != x.shape[axis]) {
      return InvalidArgument(context, "scale has shape ", runtime::ShapeToString(scale),
                             ", expected [", x.shape[axis], "] for axis ", axis, " of x ",
                             runtime::ShapeToString(x.shape));
    }
    // Parts of x's shape, whose element count was checked when it was planned.
    layout.outer = 1;
    for (int64_t i = 0; i < axis; ++i) layout.outer *= x.shape[i];
    layout.dim = x.shape[axis];
    layout.inner = 1;
    for (int64_t i = axis + 1; i < rank; ++i) layout.inner *= x.shape[i];
  }
  if (HasInput(context, 2)) {
    const Shape& zero = context.inputs[2].shape;
    const bool fits = per_tensor ? (zero.empty() || zero == Shape{1}) : zero == scale;
    if (!fits) {
      return InvalidArgument(context, "zero point has shape ", runtime::ShapeToString(zero),
                             ", expected the scale's ", runtime::ShapeToString(scale));
    }
  }
  return layout;
}

template <typename X, typename Q>
FunctionKernel::RunFn QuantizeRun(ScaleLayout layout, bool has_zero) {
  return [layout, has_zero](const KernelArgs& args) {
    const X* x = static_cast<const X*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const Q* zero = has_zero ? static_cast<const Q*>(args.inputs[2]) : nullptr;
    Q* y = static_cast<Q*>(args.outputs[0]);
    ForEachElement(layout, [&](int64_t i, int64_t k) {
      y[i] = Saturate<Q>(static_cast<float>(x[i]) / scale[k], zero != nullptr ? zero[k] : 0);
    });
    return absl::OkStatus();
  };
}

template <typename Q>
FunctionKernel::RunFn DequantizeRun(ScaleLayout layout, bool has_zero) {
  return [layout, has_zero](const KernelArgs& args) {
    const Q* x = static_cast<const Q*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const Q* zero = has_zero ? static_cast<const Q*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    ForEachElement(layout, [&](int64_t i, int64_t k) {
      // In int64: an int32 difference may overflow int32.
      const int64_t z = zero != nullptr ? static_cast<int64_t>(zero[k]) : 0;
      y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - z) * scale[k];
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQuantize(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32, DataType::kInt32}));
  const bool has_zero = HasInput(context, 2);
  if (has_zero) RETURN_IF_ERROR(ExpectType(context, 2, {DataType::kUInt8, DataType::kInt8}));
  ASSIGN_OR_RETURN(ScaleLayout layout, PrepareScale(context));
  const TensorDesc& x = context.inputs[0];
  const DataType out = has_zero ? context.inputs[2].dtype : DataType::kUInt8;
  const bool from_float = x.dtype == DataType::kFloat32;
  FunctionKernel::RunFn run;
  if (out == DataType::kUInt8) {
    run = from_float ? QuantizeRun<float, uint8_t>(layout, has_zero)
                     : QuantizeRun<int32_t, uint8_t>(layout, has_zero);
  } else {
    run = from_float ? QuantizeRun<float, int8_t>(layout, has_zero)
                     : QuantizeRun<int32_t, int8_t>(layout, has_zero);
  }
  return MakeKernel(context, {Desc(out, x.shape)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDequantize(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kUInt8, DataType::kInt8, DataType::kInt32}));
  const TensorDesc& x = context.inputs[0];
  const bool has_zero = HasInput(context, 2);
  if (has_zero) RETURN_IF_ERROR(ExpectZeroPointType(context, 2, "zero point", 0, "x"));
  ASSIGN_OR_RETURN(ScaleLayout layout, PrepareScale(context));
  FunctionKernel::RunFn run;
  switch (x.dtype) {
    case DataType::kUInt8:
      run = DequantizeRun<uint8_t>(layout, has_zero);
      break;
    case DataType::kInt8:
      run = DequantizeRun<int8_t>(layout, has_zero);
      break;
    default:
      run = DequantizeRun<int32_t>(layout, has_zero);
      break;
  }
  return MakeKernel(context, {Desc(DataType::kFloat32, x.shape)}, std::move(run));
}

// y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = saturate(round(-min / y_scale)),
// y = the uint8 quantization of x with them (all zero when the range is empty, x all zeros).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDynamicQuantize(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  if (context.num_outputs != 3) {
    return InvalidArgument(context, "expected 3 outputs (y, y_scale, y_zero_point), got ",
                           context.num_outputs);
  }
  const Shape& shape = context.inputs[0].shape;
  const int64_t count = runtime::NumElements(shape);
  std::vector<TensorDesc> outputs = {Desc(DataType::kUInt8, shape), Desc(DataType::kFloat32, {}),
                                     Desc(DataType::kUInt8, {})};
  return MakeKernel(context, std::move(outputs), [count](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(args.outputs[0]);
    // The range always holds 0 (so that 0 quantizes exactly); NaNs do not move it.
    float low = 0.0f;
    float high = 0.0f;
    for (int64_t i = 0; i < count; ++i) {
      low = std::min(low, x[i]);
      high = std::max(high, x[i]);
    }
    const float scale = (high - low) / 255.0f;
    const uint8_t zero = scale > 0.0f ? Saturate<uint8_t>((0.0f - low) / scale, 0) : 0;
    for (int64_t i = 0; i < count; ++i) {
      y[i] = scale > 0.0f ? Saturate<uint8_t>(x[i] / scale, zero) : 0;
    }
    *static_cast<float*>(args.outputs[1]) = scale;
    *static_cast<uint8_t*>(args.outputs[2]) = zero;
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterQuantizeKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("QuantizeLinear", &PrepareQuantize));
  RETURN_IF_ERROR(registry->Register("DequantizeLinear", &PrepareDequantize));
  RETURN_IF_ERROR(registry->Register("DynamicQuantizeLinear", &PrepareDynamicQuantize));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
