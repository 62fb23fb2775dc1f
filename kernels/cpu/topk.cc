// TopK: the k largest (or smallest) values along an axis and their int64 indices, always sorted;
// equal values keep the lower index first. k must be known at plan time.
#include <algorithm>
#include <memory>
#include <numeric>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTopK(const PrepareContext& context) {
  // Before opset 10, k is an attribute; since, an input.
  const bool k_attribute = context.opset < 10;
  RETURN_IF_ERROR(ExpectInputCount(context, k_attribute ? 1 : 2, k_attribute ? 1 : 2));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> k_value;
  if (k_attribute) {
    ASSIGN_OR_RETURN(int64_t k_attr, AttrsOf(context).GetInt("k", -1));
    k_value = {k_attr};
  } else {
    ASSIGN_OR_RETURN(k_value, ReadInts(context, 1, "k"));
  }
  if (k_value.size() != 1) {
    return InvalidArgument(context, "k must hold one value, got ", runtime::ShapeToString(k_value));
  }
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t largest, AttrsOf(context).GetInt("largest", 1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  const int64_t k = k_value[0];
  const int64_t dim = in.shape[axis];
  if (k < 0 || k > dim) {
    return InvalidArgument(context, "k=", k, " is out of range for axis ", axis, " of ",
                           runtime::ShapeToString(in.shape));
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= in.shape[i];
  Shape out = in.shape;
  out[axis] = k;
  const bool with_indices = context.num_outputs > 1;
  FunctionKernel::RunFn run;
  const bool ok = DispatchArithmetic(in.dtype, [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* values = static_cast<T*>(args.outputs[0]);
      int64_t* indices = with_indices ? static_cast<int64_t*>(args.outputs[1]) : nullptr;
      int64_t* order = static_cast<int64_t*>(args.workspace);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* p = x + o * dim * inner + i;
          std::iota(order, order + dim, 0);
          auto before = [&](int64_t a, int64_t b) {
            const T va = p[a * inner];
            const T vb = p[b * inner];
            if (va != vb) return largest != 0 ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(order, order + k, order + dim, before);
          const int64_t at = o * k * inner + i;
          for (int64_t j = 0; j < k; ++j) {
            values[at + j * inner] = p[order[j] * inner];
            if (indices != nullptr) indices[at + j * inner] = order[j];
          }
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  return MakeKernel(context, {Desc(in.dtype, out), Desc(DataType::kInt64, out)}, std::move(run),
                    static_cast<size_t>(dim) * sizeof(int64_t));
}

}  // namespace

absl::Status RegisterTopKKernels(runtime::KernelRegistry* registry) {
  return registry->Register("TopK", &PrepareTopK);
}

}  // namespace reprise::kernels::cpu
