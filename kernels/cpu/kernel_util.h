// Helpers shared by the CPU kernels: error messages that name the node, attribute and plan-time
// value access, axis normalisation, typed dispatch and broadcast iteration.
#ifndef REPRISE_KERNELS_CPU_KERNEL_UTIL_H_
#define REPRISE_KERNELS_CPU_KERNEL_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/function_kernel.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

using runtime::Attributes;
using runtime::DataType;
using runtime::KernelArgs;
using runtime::PrepareContext;
using runtime::PreparedKernel;
using runtime::Shape;
using runtime::TensorDesc;

/// Output shape of numpy-style broadcasting of `a` and `b`; error naming both when they do not
/// broadcast.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

/// The node's attributes; an empty set when the context carries none.
const Attributes& AttrsOf(const PrepareContext& context);

/// `Conv "conv1"` (or just `Conv` for an unnamed node): the prefix of every kernel error.
std::string NodeLabel(const PrepareContext& context);

/// INVALID_ARGUMENT "<node>: <pieces...>".
template <typename... Args>
absl::Status InvalidArgument(const PrepareContext& context, const Args&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat(NodeLabel(context), ": ", pieces...));
}

/// UNIMPLEMENTED "<node>: <pieces...>".
template <typename... Args>
absl::Status Unimplemented(const PrepareContext& context, const Args&... pieces) {
  return absl::UnimplementedError(absl::StrCat(NodeLabel(context), ": ", pieces...));
}

/// Error unless the node has between `min` and `max` inputs (absent optional ones included).
absl::Status ExpectInputCount(const PrepareContext& context, size_t min, size_t max);

/// True when input `index` exists and is present.
bool HasInput(const PrepareContext& context, size_t index);

/// Error unless input `index` has one of `types`.
absl::Status ExpectType(const PrepareContext& context, size_t index,
                        std::initializer_list<DataType> types);

/// Error unless input `index` has exactly `rank` dimensions.
absl::Status ExpectRank(const PrepareContext& context, size_t index, size_t rank);

/// Maps `axis` in [-rank, rank) to [0, rank); error naming the op and the values otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const PrepareContext& context, int64_t axis, int64_t rank);

/// The integer values (int32 or int64) of input `index`, which must be known at plan time;
/// `what` names the input in errors (e.g. "shape").
absl::StatusOr<std::vector<int64_t>> ReadInts(const PrepareContext& context, size_t index,
                                              absl::string_view what);

/// Element `i` of an index buffer of int32 (`is64` false) or int64 values.
inline int64_t IndexAt(const void* indices, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(indices)[i] : static_cast<const int32_t*>(indices)[i];
}

/// INVALID_ARGUMENT "<node>: index <index> is out of range for an axis of size <dim>", the
/// error a kernel's Run returns for an index read from data (`node` is NodeLabel's text).
absl::Status IndexError(absl::string_view node, int64_t index, int64_t dim);

/// The first value of input `index` (any numeric type) as a double; must be known at plan time.
absl::StatusOr<double> ReadScalar(const PrepareContext& context, size_t index,
                                  absl::string_view what);

/// The value at `index` of a numeric buffer of type `dtype`, as a double.
double ElementAsDouble(DataType dtype, const void* data, int64_t index);

/// Row-major strides of `shape`.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

/// "int64, int32" style list for messages.
std::string TypeList(std::initializer_list<DataType> types);

/// Calls `fn.template operator()<T>()` with the C++ type of `dtype` among the numeric types
/// float32, float64, int8, uint8, int16, uint16, int32, uint32, int64 and uint64 (the types
/// arithmetic is defined on). Returns false when the type is not one of them.
template <typename F>
bool DispatchNumeric(DataType dtype, F&& fn) {
  switch (dtype) {
    case DataType::kFloat32:
      fn.template operator()<float>();
      return true;
    case DataType::kFloat64:
      fn.template operator()<double>();
      return true;
    case DataType::kInt8:
      fn.template operator()<int8_t>();
      return true;
    case DataType::kUInt8:
      fn.template operator()<uint8_t>();
      return true;
    case DataType::kInt16:
      fn.template operator()<int16_t>();
      return true;
    case DataType::kUInt16:
      fn.template operator()<uint16_t>();
      return true;
    case DataType::kInt32:
      fn.template operator()<int32_t>();
      return true;
    case DataType::kUInt32:
      fn.template operator()<uint32_t>();
      return true;
    case DataType::kInt64:
      fn.template operator()<int64_t>();
      return true;
    case DataType::kUInt64:
      fn.template operator()<uint64_t>();
      return true;
    default:
      return false;
  }
}

/// Like DispatchNumeric, and bool as well.
template <typename F>
bool DispatchAnyType(DataType dtype, F&& fn) {
  if (dtype == DataType::kBool) {
    fn.template operator()<bool>();
    return true;
  }
  return DispatchNumeric(dtype, fn);
}

/// Like DispatchAnyType, for float32, float64, int32 and int64 only.
template <typename F>
bool DispatchArithmetic(DataType dtype, F&& fn) {
  switch (dtype) {
    case DataType::kFloat32:
      fn.template operator()<float>();
      return true;
    case DataType::kFloat64:
      fn.template operator()<double>();
      return true;
    case DataType::kInt32:
      fn.template operator()<int32_t>();
      return true;
    case DataType::kInt64:
      fn.template operator()<int64_t>();
      return true;
    default:
      return false;
  }
}

/// A 16-byte element moved as a whole (a string tensor's StringElement view).
struct Element16 {
  uint64_t lo = 0;
  uint64_t hi = 0;
};
static_assert(sizeof(Element16) == sizeof(runtime::StringElement));

/// Calls `fn.template operator()<U>()` with an unsigned integer type of `element_size` bytes
/// (1, 2, 4 or 8), or Element16 for 16 (string views), for kernels that only move elements.
/// False for other sizes.
template <typename F>
bool DispatchBySize(size_t element_size, F&& fn) {
  switch (element_size) {
    case 16:
      fn.template operator()<Element16>();
      return true;
    case 1:
      fn.template operator()<uint8_t>();
      return true;
    case 2:
      fn.template operator()<uint16_t>();
      return true;
    case 4:
      fn.template operator()<uint32_t>();
      return true;
    case 8:
      fn.template operator()<uint64_t>();
      return true;
    default:
      return false;
  }
}

/// Broadcast iteration over an output shape: axes are coalesced where every operand is
/// contiguous across them, and the innermost axis is handed out as rows.
struct BroadcastPlan {
  std::vector<int64_t> dims;                  // coalesced output dims (at least one)
  std::vector<std::vector<int64_t>> strides;  // per operand, per coalesced dim (0 = broadcast)
  int64_t count = 0;                          // output elements
};

/// Plan for broadcasting `inputs` (each broadcastable to `out`) into `out`.
BroadcastPlan MakeBroadcastPlan(const Shape& out, const std::vector<Shape>& inputs);

/// Plan over `out` for operands with the given per-axis element strides (any sign, 0 for
/// broadcast), coalescing axes where every operand is contiguous across them.
BroadcastPlan MakeStridedPlan(const Shape& out, std::vector<std::vector<int64_t>> strides);

/// Calls `row(out_offset, in_offsets, length)` for the output elements [begin, end), one call per
/// piece of an innermost row; `in_offsets[k]` is the element offset of operand k at the piece's
/// start; along the piece operand k advances by `plan.strides[k].back()` (0 or 1 after
/// coalescing, or a larger stride). Operands: at most 4.
template <typename Row>
void ForEachRowIn(const BroadcastPlan& plan, int64_t begin, int64_t end, Row&& row) {
  if (begin >= end) return;
  const size_t rank = plan.dims.size();
  const size_t n = plan.strides.size();
  const int64_t length = plan.dims[rank - 1];
  absl::InlinedVector<int64_t, 8> index(rank, 0);
  int64_t offsets[4] = {0, 0, 0, 0};
  // The multi-index of `begin`'s row over the outer axes.
  int64_t rest = begin / length;
  for (size_t axis = rank - 1; axis-- > 0 && rest > 0;) {
    index[axis] = rest % plan.dims[axis];
    rest /= plan.dims[axis];
    for (size_t k = 0; k < n; ++k) offsets[k] += index[axis] * plan.strides[k][axis];
  }
  int64_t within = begin % length;
  for (int64_t out = begin; out < end;) {
    const int64_t take = std::min(length - within, end - out);
    int64_t at[4] = {0, 0, 0, 0};
    for (size_t k = 0; k < n; ++k) at[k] = offsets[k] + within * plan.strides[k][rank - 1];
    row(out, static_cast<const int64_t*>(at), take);
    out += take;
    within = 0;
    // Advance the multi-index over the outer axes, innermost first.
    for (size_t axis = rank - 1; axis-- > 0;) {
      ++index[axis];
      for (size_t k = 0; k < n; ++k) offsets[k] += plan.strides[k][axis];
      if (index[axis] < plan.dims[axis]) break;
      for (size_t k = 0; k < n; ++k) offsets[k] -= plan.strides[k][axis] * plan.dims[axis];
      index[axis] = 0;
    }
  }
}

/// ForEachRowIn over every output element, in order, on the calling thread.
template <typename Row>
void ForEachRow(const BroadcastPlan& plan, Row&& row) {
  ForEachRowIn(plan, 0, plan.count, row);
}

/// Work (elements x cost per element, roughly in nanoseconds of one core) per thread of a
/// ParallelFor: below it a loop stays on the calling thread. A ParallelFor of two threads costs
/// 0.8-3.4 us beyond its work here (BM_ParallelForFork, medians: 0.8 us right after the last
/// region, 2.0 after 20 us of serial work, 3.4 after 200 us, when the workers have gone to
/// sleep), so two threads pay from a few microseconds of work; at 32768 (two
/// threads from 65 us), at batch 1 on two threads, MobileNetV3, DenseNet-121, ShuffleNetV2 and
/// a transformer encoder took 0.70-0.97x the time with 8192 (medians of 7 alternated runs;
/// docs/benchmarks.md, session 24).
inline constexpr double kMinParallelWork = 8192;

/// Cost of one item (roughly nanoseconds) from which ParallelFor hands out single items: such an
/// item is a row or a plane, not an element, and the grain that keeps elementwise ranges on whole
/// cache lines would only leave threads idle (16 planes of a batch on one thread).
inline constexpr double kCoarseItemCost = 1024;

/// The number of threads ParallelFor(n, threads, cost_per_item, fn, grain, min_work) runs `fn`
/// on (1: the calling thread alone), for kernels that choose other work by it.
int ParallelTeam(int64_t n, int threads, double cost_per_item, int64_t grain = 16,
                 double min_work = kMinParallelWork);

/// Calls `fn(begin, end)` over disjoint ranges that cover [0, n), on up to `threads` OpenMP
/// threads of the calling thread (never more; one per `min_work` of n * cost_per_item, so one
/// below it: then just fn(0, n) here). Range bounds are multiples of `grain` except n (of 1 when
/// an item costs kCoarseItemCost or more). `fn` runs concurrently: it may only write what its
/// range owns, so an elementwise loop gives the same bits as a serial one. A kernel passes a
/// `min_work` other than kMinParallelWork only where it measured its own.
void ParallelFor(int64_t n, int threads, double cost_per_item,
                 absl::FunctionRef<void(int64_t, int64_t)> fn, int64_t grain = 16,
                 double min_work = kMinParallelWork);

/// Copies `bytes` from `src` to `dst` (which do not overlap) in 64 KiB pieces over up to
/// `threads` OpenMP threads of the calling thread (one below 128 KiB): a request's input
/// staged into a plan's buffer comes from memory, not the cache, and one core copied 4.8 MB in
/// 382 us, two in 224 us (9.8 MB: 938 and 451 us; this VM, source evicted first).
void ParallelCopy(void* dst, const void* src, size_t bytes, int threads);

/// ParallelFor for ranges that can fail: every range runs, and the result is the first error
/// a range returned (OK when none did).
absl::Status ParallelForStatus(int64_t n, int threads, double cost_per_item,
                               absl::FunctionRef<absl::Status(int64_t, int64_t)> fn,
                               int64_t grain = 16);

/// Copies the elements that `plan` (MakeStridedPlan over the output's index space, one
/// operand: the source's strides) reads from `in` into the contiguous `out`, in plan order: a
/// transpose or any other permutation, a slice, a broadcast. The Range form copies the output
/// elements [begin, end) only.
template <typename T>
void CopyStridedRange(const BroadcastPlan& plan, const T* in, T* out, int64_t begin, int64_t end) {
  const int64_t stride = plan.strides[0].back();
  ForEachRowIn(plan, begin, end, [&](int64_t out_at, const int64_t* offs, int64_t n) {
    const T* p = in + offs[0];
    if (stride == 1) {
      std::memcpy(out + out_at, p, static_cast<size_t>(n) * sizeof(T));
    } else if (stride == 0) {  // one element repeated (a broadcast's innermost axis)
      std::fill(out + out_at, out + out_at + n, *p);
    } else {
      for (int64_t i = 0; i < n; ++i) out[out_at + i] = p[i * stride];
    }
  });
}

template <typename T>
void CopyStrided(const BroadcastPlan& plan, const T* in, T* out) {
  CopyStridedRange(plan, in, out, 0, plan.count);
}

/// ForEachRow split over up to `threads` threads by output elements (ParallelFor); `row` runs
/// concurrently on disjoint pieces.
template <typename Row>
void ForEachRowParallel(const BroadcastPlan& plan, int threads, double cost_per_element,
                        Row&& row) {
  ParallelFor(plan.count, threads, cost_per_element,
              [&](int64_t begin, int64_t end) { ForEachRowIn(plan, begin, end, row); });
}

/// Sum of p[k] (or of (p[k] - center)^2 when `squares`) over k < n, in four vector registers
/// of float lanes (the CPU's width: 16 to 64 independent sums), then added pairwise. For rows up
/// to a few thousand values; LongRowSum for longer ones.
float RowSum(const float* p, int64_t n, float center, bool squares);

/// RowSum in double over blocks of 2048 values: as fast as RowSum, and as exact as a double sum
/// for rows of millions of values (each block's float lanes add at most 256 values).
double LongRowSum(const float* p, int64_t n, float center, bool squares);

/// Sets the OpenMP thread count of the calling thread (what oneDNN's primitives and sgemm use
/// there) to `threads` (at least 1), so that each stream's kernels use its intra-op threads and
/// streams x threads stay within the cores. Cheap when already set; other threads unaffected.
void UseIntraOpThreads(int threads);

/// Which of our own per-instruction-set copies this process runs: 2 AVX-512F, 1 AVX2 with FMA,
/// 0 the baseline. What the CPU supports, capped by ONEDNN_MAX_CPU_ISA as oneDNN reads it, so
/// that one variable caps both (SSE41 or AVX: the baseline copies; AVX2*: the AVX2 ones; other
/// values cap nothing). Read once.
int OwnCopyLevel();

/// Of three copies of one function compiled for AVX-512F, for AVX2 with FMA and for the
/// baseline (`__attribute__((target(...)))`), the one OwnCopyLevel picks. Call it once and keep
/// the result (a function-local static); not an ifunc, whose resolver runs before the sanitizer
/// runtimes start and crashes the process under TSan.
template <typename Fn>
Fn PickForThisCpu(Fn avx512, Fn avx2, Fn baseline) {
  const int level = OwnCopyLevel();
  return level == 2 ? avx512 : level == 1 ? avx2 : baseline;
}

/// Output descriptor of type `dtype` and shape `shape`.
inline TensorDesc Desc(DataType dtype, Shape shape) {
  TensorDesc desc;
  desc.dtype = dtype;
  desc.shape = std::move(shape);
  return desc;
}

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_KERNEL_UTIL_H_
