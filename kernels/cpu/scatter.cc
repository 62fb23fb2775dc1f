// ScatterElements (and Scatter, its name before opset 11), ScatterND and GatherND. Indices are
// int32 or int64, negative ones count from the end, and every index is checked at Run: one out
// of range makes Run return INVALID_ARGUMENT before anything is written past the data.
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// `index` in [-dim, dim) made non-negative; false when out of range.
inline bool Wrap(int64_t* index, int64_t dim) {
  if (*index < -dim || *index >= dim) return false;
  if (*index < 0) *index += dim;
  return true;
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::StatusOr<Reduction> ReadReduction(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::string r, AttrsOf(context).GetString("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return InvalidArgument(context, "reduction must be none, add, mul, max or min, got \"", r, "\"");
}

template <typename T>
void Combine(Reduction r, T* dst, T v) {
  if constexpr (!std::is_arithmetic_v<T>) {  // a 16-byte element, only ever moved
    *dst = v;
    return;
  } else {
    switch (r) {
      case Reduction::kNone:
        *dst = v;
        return;
      case Reduction::kAdd:
        if constexpr (std::is_same_v<T, bool>) {
          *dst = *dst || v;
        } else {
          *dst = static_cast<T>(*dst + v);
        }
        return;
      case Reduction::kMul:
        if constexpr (std::is_same_v<T, bool>) {
          *dst = *dst && v;
        } else {
          *dst = static_cast<T>(*dst * v);
        }
        return;
      case Reduction::kMax:
        if (v > *dst) *dst = v;
        return;
      case Reduction::kMin:
        if (v < *dst) *dst = v;
        return;
    }
  }
}

// Picks the element copy (reduction none, any type) or the typed combine (a reduction, numeric
// types and bool) for `dtype`; the functor gets the C++ type, or an unsigned type of its size
// when only moving.
template <typename F>
bool DispatchScatter(DataType dtype, Reduction reduction, F&& fn) {
  if (reduction == Reduction::kNone) return DispatchBySize(runtime::DataTypeSize(dtype), fn);
  return DispatchAnyType(dtype, fn);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareScatterElements(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const TensorDesc& data = context.inputs[0];
  const TensorDesc& indices = context.inputs[1];
  const TensorDesc& updates = context.inputs[2];
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (updates.dtype != data.dtype) {
    return InvalidArgument(context, "updates are ", runtime::DataTypeName(updates.dtype),
                           ", data is ", runtime::DataTypeName(data.dtype));
  }
  if (rank == 0 || indices.shape != updates.shape ||
      static_cast<int64_t>(indices.shape.size()) != rank) {
    return InvalidArgument(context, "data ", runtime::ShapeToString(data.shape), ", indices ",
                           runtime::ShapeToString(indices.shape), " and updates ",
                           runtime::ShapeToString(updates.shape),
                           " must have one rank >= 1, and indices the shape of updates");
  }
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && indices.shape[i] > data.shape[i]) {
      return InvalidArgument(context, "indices ", runtime::ShapeToString(indices.shape),
                             " exceed data ", runtime::ShapeToString(data.shape), " on axis ", i);
    }
  }
  Reduction reduction = Reduction::kNone;
  if (context.op != "Scatter") {
    ASSIGN_OR_RETURN(reduction, ReadReduction(context));
  }
  const std::vector<int64_t> data_strides = ContiguousStrides(data.shape);
  const Shape index_shape = indices.shape;
  const int64_t count = runtime::NumElements(indices.shape);
  const int64_t total = runtime::NumElements(data.shape);
  const int64_t axis_dim = data.shape[axis];
  const bool is64 = indices.dtype == DataType::kInt64;
  const bool last_axis = axis == rank - 1;
  const int64_t axis_stride = data_strides[axis];
  const int64_t row_length = index_shape[rank - 1];
  const int64_t rows = row_length == 0 ? 0 : count / row_length;
  const std::string op = NodeLabel(context);
  // Two elements whose coordinates differ on an axis other than `axis` never write one place, so
  // the elements are split over the intra-op threads along such an axis: the outermost one of the
  // rows' axes with more than one entry (rows of the index space along its last axis), else the
  // last axis itself when it is not `axis`. Each thread then writes its places in the order of
  // one thread, and repeated indices (a reduction's order too) come out as they would serially.
  int64_t split = -1;
  for (int64_t d = 0; d + 1 < rank && split < 0; ++d) {
    if (d != axis && index_shape[d] > 1) split = d;
  }
  if (split < 0 && !last_axis && row_length > 1) split = rank - 1;
  int64_t outer = 1, inner_rows = 1;  // rows' axes before and after `split` (split < rank - 1)
  if (split >= 0 && split + 1 < rank) {
    for (int64_t d = 0; d < split; ++d) outer *= index_shape[d];
    for (int64_t d = split + 1; d + 1 < rank; ++d) inner_rows *= index_shape[d];
  }
  const int64_t parts = split < 0 ? 1 : index_shape[split];
  const double part_cost =
      parts > 0 ? 2.0 * static_cast<double>(count) / static_cast<double>(parts) : 0.0;
  const int threads = context.intra_op_threads;
  FunctionKernel::RunFn run;
  const bool ok = DispatchScatter(data.dtype, reduction, [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      const T* u = static_cast<const T*>(args.inputs[2]);
      T* y = static_cast<T*>(args.outputs[0]);
      const void* indices_data = args.inputs[1];
      // Every index first: nothing is written when one is out of range.
      RETURN_IF_ERROR(ParallelForStatus(count, threads, 1.0, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          int64_t index = IndexAt(indices_data, is64, i);
          if (!Wrap(&index, axis_dim)) return IndexError(op, index, axis_dim);
        }
        return absl::OkStatus();
      }));
      if (y != x) std::memcpy(y, x, static_cast<size_t>(total) * sizeof(T));
      // Rows [row_begin, row_end), elements [j_begin, j_end) of each: the row's offset in the
      // data (without the axis's term where the axis is not the last) once, then each element's
      // own index.
      auto scatter_rows = [&](int64_t row_begin, int64_t row_end, int64_t j_begin, int64_t j_end) {
        std::vector<int64_t> pos(static_cast<size_t>(rank), 0);
        for (int64_t d = rank - 1, rest = row_begin; d-- > 0;) {
          pos[d] = rest % index_shape[d];
          rest /= index_shape[d];
        }
        for (int64_t row = row_begin; row < row_end; ++row) {
          int64_t base = 0;
          for (int64_t d = 0; d + 1 < rank; ++d) {
            if (d != axis) base += pos[d] * data_strides[d];
          }
          const int64_t first = row * row_length;
          for (int64_t j = j_begin; j < j_end; ++j) {
            int64_t index = IndexAt(indices_data, is64, first + j);
            Wrap(&index, axis_dim);
            const int64_t offset = last_axis ? base + index : base + index * axis_stride + j;
            Combine(reduction, y + offset, u[first + j]);
          }
          for (int64_t d = rank - 1; d-- > 0;) {
            if (++pos[d] < index_shape[d]) break;
            pos[d] = 0;
          }
        }
      };
      if (rows == 0) return absl::OkStatus();
      if (split < 0) {
        scatter_rows(0, rows, 0, row_length);
      } else if (split == rank - 1) {
        ParallelFor(parts, threads, part_cost,
                    [&](int64_t begin, int64_t end) { scatter_rows(0, rows, begin, end); });
      } else {
        ParallelFor(parts, threads, part_cost, [&](int64_t begin, int64_t end) {
          for (int64_t o = 0; o < outer; ++o) {
            scatter_rows((o * parts + begin) * inner_rows, (o * parts + end) * inner_rows, 0,
                         row_length);
          }
        });
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(data.dtype),
                         " is not supported with this reduction");
  }
  return MakeKernel(context, {Desc(data.dtype, data.shape)}, std::move(run));
}

// The geometry shared by ScatterND and GatherND: indices [..., k] address slices of `data`'s
// trailing dims after `batch` leading batch dims.
struct NdGeometry {
  int64_t batch = 1;             // product of the batch dims
  int64_t tuples = 0;            // index tuples per batch entry
  int64_t k = 0;                 // length of each tuple
  int64_t slice = 1;             // elements per addressed slice
  int64_t data_batch = 0;        // data elements per batch entry
  std::vector<int64_t> dims;     // the k addressed dims of data
  std::vector<int64_t> strides;  // their strides, in elements
};

absl::StatusOr<NdGeometry> MakeNdGeometry(const PrepareContext& context, int64_t batch_dims) {
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const Shape& data = context.inputs[0].shape;
  const Shape& indices = context.inputs[1].shape;
  const int64_t r = static_cast<int64_t>(data.size());
  const int64_t q = static_cast<int64_t>(indices.size());
  if (r < 1 || q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return InvalidArgument(context, "data ", runtime::ShapeToString(data), " and indices ",
                           runtime::ShapeToString(indices), " do not fit batch_dims ", batch_dims);
  }
  NdGeometry g;
  g.k = indices.back();
  if (g.k < 1 || g.k > r - batch_dims) {
    return InvalidArgument(context, "the last dim of indices ", runtime::ShapeToString(indices),
                           " must be in [1, ", r - batch_dims, "]");
  }
  for (int64_t i = 0; i < batch_dims; ++i) {
    if (data[i] != indices[i]) {
      return InvalidArgument(context, "batch dim ", i, " differs: data ",
                             runtime::ShapeToString(data), ", indices ",
                             runtime::ShapeToString(indices));
    }
    g.batch *= data[i];
  }
  g.tuples = 1;
  for (int64_t i = batch_dims; i < q - 1; ++i) g.tuples *= indices[i];
  const std::vector<int64_t> strides = ContiguousStrides(data);
  for (int64_t i = batch_dims; i < batch_dims + g.k; ++i) {
    g.dims.push_back(data[i]);
    g.strides.push_back(strides[i]);
  }
  for (int64_t i = batch_dims + g.k; i < r; ++i) g.slice *= data[i];
  g.data_batch = 1;
  for (int64_t i = batch_dims; i < r; ++i) g.data_batch *= data[i];
  return g;
}

// The element offset (within a batch entry) of tuple `t`, or an error naming the bad index.
absl::StatusOr<int64_t> TupleOffset(const NdGeometry& g, const void* indices, bool is64, int64_t t,
                                    const std::string& op) {
  int64_t offset = 0;
  for (int64_t j = 0; j < g.k; ++j) {
    int64_t index = IndexAt(indices, is64, t * g.k + j);
    if (!Wrap(&index, g.dims[j])) return IndexError(op, index, g.dims[j]);
    offset += index * g.strides[j];
  }
  return offset;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGatherNd(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  ASSIGN_OR_RETURN(int64_t batch_dims, AttrsOf(context).GetInt("batch_dims", 0));
  ASSIGN_OR_RETURN(NdGeometry g, MakeNdGeometry(context, batch_dims));
  const TensorDesc& data = context.inputs[0];
  const Shape& indices = context.inputs[1].shape;
  Shape out(indices.begin(), indices.end() - 1);
  out.insert(out.end(), data.shape.begin() + batch_dims + g.k, data.shape.end());
  const size_t element = runtime::DataTypeSize(data.dtype);
  const bool is64 = context.inputs[1].dtype == DataType::kInt64;
  const std::string op = NodeLabel(context);
  return MakeKernel(context, {Desc(data.dtype, out)}, [=](const KernelArgs& args) {
    const uint8_t* x = static_cast<const uint8_t*>(args.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(args.outputs[0]);
    const size_t slice_bytes = static_cast<size_t>(g.slice) * element;
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t t = 0; t < g.tuples; ++t) {
        const int64_t tuple = b * g.tuples + t;
        ASSIGN_OR_RETURN(int64_t offset, TupleOffset(g, args.inputs[1], is64, tuple, op));
        std::memcpy(y + tuple * slice_bytes, x + (b * g.data_batch + offset) * element,
                    slice_bytes);
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareScatterNd(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  ASSIGN_OR_RETURN(NdGeometry g, MakeNdGeometry(context, 0));
  ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(context));
  const TensorDesc& data = context.inputs[0];
  const TensorDesc& updates = context.inputs[2];
  const Shape& indices = context.inputs[1].shape;
  Shape expected(indices.begin(), indices.end() - 1);
  expected.insert(expected.end(), data.shape.begin() + g.k, data.shape.end());
  if (updates.dtype != data.dtype || updates.shape != expected) {
    return InvalidArgument(context, "updates must be ", runtime::DataTypeName(data.dtype), " ",
                           runtime::ShapeToString(expected), ", got ",
                           runtime::DataTypeName(updates.dtype), " ",
                           runtime::ShapeToString(updates.shape));
  }
  const int64_t total = runtime::NumElements(data.shape);
  const bool is64 = context.inputs[1].dtype == DataType::kInt64;
  const std::string op = NodeLabel(context);
  FunctionKernel::RunFn run;
  const bool ok = DispatchScatter(data.dtype, reduction, [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      for (int64_t t = 0; t < g.tuples; ++t) {
        RETURN_IF_ERROR(TupleOffset(g, args.inputs[1], is64, t, op).status());
      }
      const T* x = static_cast<const T*>(args.inputs[0]);
      const T* u = static_cast<const T*>(args.inputs[2]);
      T* y = static_cast<T*>(args.outputs[0]);
      if (y != x) std::memcpy(y, x, static_cast<size_t>(total) * sizeof(T));
      for (int64_t t = 0; t < g.tuples; ++t) {
        const int64_t offset = *TupleOffset(g, args.inputs[1], is64, t, op);
        for (int64_t e = 0; e < g.slice; ++e)
          Combine(reduction, y + offset + e, u[t * g.slice + e]);
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(data.dtype),
                         " is not supported with this reduction");
  }
  return MakeKernel(context, {Desc(data.dtype, data.shape)}, std::move(run));
}

}  // namespace

absl::Status RegisterScatterKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("ScatterElements", &PrepareScatterElements));
  RETURN_IF_ERROR(registry->Register("Scatter", &PrepareScatterElements));
  RETURN_IF_ERROR(registry->Register("ScatterND", &PrepareScatterNd));
  RETURN_IF_ERROR(registry->Register("GatherND", &PrepareGatherNd));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
