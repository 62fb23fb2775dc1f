// Ops that generate tensors from a shape or a few values: EyeLike, OneHot and the window
// functions HannWindow, HammingWindow and BlackmanWindow. Sizes read from inputs (OneHot's depth,
// a window's size) must be known at plan time, as Range's bounds are.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// The element type named by attribute `name` (a TensorProto data type code), or `fallback`.
absl::StatusOr<DataType> TypeAttribute(const PrepareContext& context, absl::string_view name,
                                       DataType fallback) {
  if (!AttrsOf(context).Has(name)) return fallback;
  ASSIGN_OR_RETURN(int64_t code, AttrsOf(context).GetInt(name, 0));
  absl::StatusOr<DataType> dtype = runtime::DataTypeFromCode(static_cast<int32_t>(code));
  if (!dtype.ok()) return InvalidArgument(context, name, ": ", dtype.status().message());
  return *dtype;
}

// EyeLike: a 2-D tensor of the input's shape with ones on diagonal `k`.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareEyeLike(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectRank(context, 0, 2));
  ASSIGN_OR_RETURN(DataType dtype, TypeAttribute(context, "dtype", context.inputs[0].dtype));
  ASSIGN_OR_RETURN(int64_t k, AttrsOf(context).GetInt("k", 0));
  const int64_t rows = context.inputs[0].shape[0];
  const int64_t cols = context.inputs[0].shape[1];
  FunctionKernel::RunFn run;
  const bool ok = DispatchAnyType(dtype, [&]<typename T>() {
    run = [rows, cols, k](const KernelArgs& args) {
      T* y = static_cast<T*>(args.outputs[0]);
      std::fill(y, y + rows * cols, T{0});
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t c = r + k;
        if (c >= 0 && c < cols) y[r * cols + c] = T{1};
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, context.inputs[0].shape)}, std::move(run));
}

// OneHot(indices, depth, values = [off, on]): `depth` inserted at `axis`; an index outside
// [-depth, depth) gives a row of `off`.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareOneHot(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  const TensorDesc& indices = context.inputs[0];
  const TensorDesc& values = context.inputs[2];
  if (runtime::NumElements(values.shape) != 2 || values.shape.size() != 1) {
    return InvalidArgument(context, "values must be [off, on] (shape [2]), got ",
                           runtime::ShapeToString(values.shape));
  }
  ASSIGN_OR_RETURN(double depth_value, ReadScalar(context, 1, "depth"));
  if (!(depth_value >= 1 && depth_value < 1e9)) {
    return InvalidArgument(context, "depth ", depth_value, " is not in [1, 1e9)");
  }
  const int64_t depth = static_cast<int64_t>(depth_value);
  const int64_t rank = static_cast<int64_t>(indices.shape.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank + 1));
  Shape out = indices.shape;
  out.insert(out.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= indices.shape[i];
  const DataType index_type = indices.dtype;
  FunctionKernel::RunFn run;
  const bool index_ok = DispatchNumeric(index_type, []<typename T>() {});
  const bool ok = DispatchBySize(runtime::DataTypeSize(values.dtype), [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const T* v = static_cast<const T*>(args.inputs[2]);
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t d = 0; d < depth; ++d) {
          for (int64_t i = 0; i < inner; ++i) y[(o * depth + d) * inner + i] = v[0];
        }
        for (int64_t i = 0; i < inner; ++i) {
          const double raw = ElementAsDouble(index_type, args.inputs[0], o * inner + i);
          if (!(raw >= static_cast<double>(-depth) && raw < static_cast<double>(depth))) continue;
          int64_t index = static_cast<int64_t>(raw);
          if (index < 0) index += depth;
          y[(o * depth + index) * inner + i] = v[1];
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok || !index_ok) {
    return Unimplemented(context, "indices of ", runtime::DataTypeName(index_type),
                         " or values of ", runtime::DataTypeName(values.dtype),
                         " are not supported");
  }
  return MakeKernel(context, {Desc(values.dtype, out)}, std::move(run));
}

enum class Window { kHann, kHamming, kBlackman };

template <Window kWindow>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareWindow(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kInt32, DataType::kInt64}));
  ASSIGN_OR_RETURN(double size_value, ReadScalar(context, 0, "size"));
  if (!(size_value >= 0 && size_value < 1e9)) {
    return InvalidArgument(context, "size ", size_value, " is not in [0, 1e9)");
  }
  const int64_t size = static_cast<int64_t>(size_value);
  ASSIGN_OR_RETURN(int64_t periodic, AttrsOf(context).GetInt("periodic", 1));
  ASSIGN_OR_RETURN(DataType dtype, TypeAttribute(context, "output_datatype", DataType::kFloat32));
  // A periodic window has period `size`; a symmetric one spans size - 1.
  const double span = static_cast<double>(periodic != 0 ? size : size - 1);
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(dtype, [&]<typename T>() {
    run = [size, span](const KernelArgs& args) {
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t n = 0; n < size; ++n) {
        const double phase = span > 0 ? 2 * std::numbers::pi * static_cast<double>(n) / span : 0;
        double w = 0;
        if constexpr (kWindow == Window::kHann) w = 0.5 - 0.5 * std::cos(phase);
        if constexpr (kWindow == Window::kHamming) {
          w = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(phase);
        }
        if constexpr (kWindow == Window::kBlackman) {
          w = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase);
        }
        y[n] = static_cast<T>(w);
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "output_datatype ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, {size})}, std::move(run));
}

}  // namespace

absl::Status RegisterGeneratorKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("EyeLike", &PrepareEyeLike));
  RETURN_IF_ERROR(registry->Register("OneHot", &PrepareOneHot));
  RETURN_IF_ERROR(registry->Register("HannWindow", &PrepareWindow<Window::kHann>));
  RETURN_IF_ERROR(registry->Register("HammingWindow", &PrepareWindow<Window::kHamming>));
  RETURN_IF_ERROR(registry->Register("BlackmanWindow", &PrepareWindow<Window::kBlackman>));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
