#include "kernels/cpu/kernel_util.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/vector_math.h"

namespace reprise::kernels::cpu {

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", runtime::ShapeToString(a), " and ",
                                                     runtime::ShapeToString(b),
                                                     " do not broadcast"));
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

const Attributes& AttrsOf(const PrepareContext& context) {
  static const Attributes* const kEmpty = new Attributes();
  return context.attributes != nullptr ? *context.attributes : *kEmpty;
}

std::string NodeLabel(const PrepareContext& context) {
  if (context.name.empty()) return std::string(context.op);
  return absl::StrCat(context.op, " \"", context.name, "\"");
}

absl::Status ExpectInputCount(const PrepareContext& context, size_t min, size_t max) {
  const size_t n = context.inputs.size();
  if (n < min || n > max) {
    if (min == max) return InvalidArgument(context, "expected ", min, " inputs, got ", n);
    return InvalidArgument(context, "expected ", min, " to ", max, " inputs, got ", n);
  }
  for (size_t i = 0; i < min; ++i) {
    if (!context.inputs[i].present) {
      return InvalidArgument(context, "required input ", i, " is missing");
    }
  }
  return absl::OkStatus();
}

bool HasInput(const PrepareContext& context, size_t index) {
  return index < context.inputs.size() && context.inputs[index].present;
}

std::string TypeList(std::initializer_list<DataType> types) {
  std::vector<std::string> names;
  for (DataType t : types) names.emplace_back(runtime::DataTypeName(t));
  return absl::StrJoin(names, ", ");
}

absl::Status ExpectType(const PrepareContext& context, size_t index,
                        std::initializer_list<DataType> types) {
  const DataType dtype = context.inputs[index].dtype;
  if (std::find(types.begin(), types.end(), dtype) != types.end()) return absl::OkStatus();
  return Unimplemented(context, "input ", index, " has element type ", runtime::DataTypeName(dtype),
                       "; supported: ", TypeList(types));
}

absl::Status ExpectRank(const PrepareContext& context, size_t index, size_t rank) {
  const Shape& shape = context.inputs[index].shape;
  if (shape.size() == rank) return absl::OkStatus();
  return InvalidArgument(context, "input ", index, " has shape ", runtime::ShapeToString(shape),
                         ", expected rank ", rank);
}

absl::StatusOr<int64_t> NormalizeAxis(const PrepareContext& context, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(context, "axis ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> ReadInts(const PrepareContext& context, size_t index,
                                              absl::string_view what) {
  if (!HasInput(context, index)) {
    return InvalidArgument(context, "input ", index, " (", what, ") is missing");
  }
  const TensorDesc& desc = context.inputs[index];
  const int64_t n = runtime::NumElements(desc.shape);
  if (desc.data == nullptr && n > 0) {
    return Unimplemented(context, "input ", index, " (", what,
                         ") must be known at plan time (a constant or initializer)");
  }
  if (n == 0) return std::vector<int64_t>{};
  std::vector<int64_t> values(static_cast<size_t>(n));
  if (desc.dtype == DataType::kInt64) {
    std::memcpy(values.data(), desc.data, static_cast<size_t>(n) * sizeof(int64_t));
  } else if (desc.dtype == DataType::kInt32) {
    const auto* p = static_cast<const int32_t*>(desc.data);
    for (int64_t i = 0; i < n; ++i) values[i] = p[i];
  } else {
    return InvalidArgument(context, "input ", index, " (", what, ") has element type ",
                           runtime::DataTypeName(desc.dtype), ", expected int64 or int32");
  }
  return values;
}

double ElementAsDouble(DataType dtype, const void* data, int64_t index) {
  double value = 0;
  DispatchAnyType(dtype, [&]<typename T>() {
    value = static_cast<double>(static_cast<const T*>(data)[index]);
  });
  return value;
}

absl::StatusOr<double> ReadScalar(const PrepareContext& context, size_t index,
                                  absl::string_view what) {
  if (!HasInput(context, index)) {
    return InvalidArgument(context, "input ", index, " (", what, ") is missing");
  }
  const TensorDesc& desc = context.inputs[index];
  if (desc.data == nullptr) {
    return Unimplemented(context, "input ", index, " (", what,
                         ") must be known at plan time (a constant or initializer)");
  }
  if (runtime::NumElements(desc.shape) < 1) {
    return InvalidArgument(context, "input ", index, " (", what, ") is empty");
  }
  bool known = DispatchAnyType(desc.dtype, []<typename T>() {});
  if (!known) {
    return Unimplemented(context, "input ", index, " (", what, ") has element type ",
                         runtime::DataTypeName(desc.dtype));
  }
  return ElementAsDouble(desc.dtype, desc.data, 0);
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

BroadcastPlan MakeBroadcastPlan(const Shape& out, const std::vector<Shape>& inputs) {
  const size_t rank = out.size();
  const size_t n = inputs.size();
  // Full-rank strides per operand (0 where it broadcasts).
  std::vector<std::vector<int64_t>> full(n, std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < n; ++k) {
    const Shape& shape = inputs[k];
    int64_t stride = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      const size_t in_axis = shape.size() - 1 - i;
      const size_t out_axis = rank - 1 - i;
      full[k][out_axis] = shape[in_axis] == 1 ? 0 : stride;
      stride *= shape[in_axis];
    }
  }
  return MakeStridedPlan(out, std::move(full));
}

BroadcastPlan MakeStridedPlan(const Shape& out, std::vector<std::vector<int64_t>> full) {
  const size_t rank = out.size();
  const size_t n = full.size();
  BroadcastPlan plan;
  plan.count = runtime::NumElements(out);
  plan.strides.assign(n, {});
  for (size_t axis = 0; axis < rank; ++axis) {
    if (out[axis] == 1) continue;  // size-1 axes never move an offset
    if (!plan.dims.empty()) {
      // Merge into the previous kept axis when every operand is contiguous across both.
      bool merge = true;
      for (size_t k = 0; k < n && merge; ++k) {
        merge = plan.strides[k].back() == full[k][axis] * out[axis];
      }
      if (merge) {
        plan.dims.back() *= out[axis];
        for (size_t k = 0; k < n; ++k) plan.strides[k].back() = full[k][axis];
        continue;
      }
    }
    plan.dims.push_back(out[axis]);
    for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(full[k][axis]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (size_t k = 0; k < n; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

namespace {

// ParallelFor's grain: 1 for items of kCoarseItemCost or more.
int64_t EffectiveGrain(double cost_per_item, int64_t grain) {
  return cost_per_item >= kCoarseItemCost ? 1 : std::max<int64_t>(grain, 1);
}

}  // namespace

int ParallelTeam(int64_t n, int threads, double cost_per_item, int64_t grain, double min_work) {
  if (n <= 0) return 1;
  grain = EffectiveGrain(cost_per_item, grain);
  const double work = static_cast<double>(n) * std::max(cost_per_item, 0.0);
  // One thread per min_work of work, at most `threads` and one per grain.
  const int64_t by_work = static_cast<int64_t>(work / std::max(min_work, 1.0));
  const int64_t by_grain = (n + grain - 1) / grain;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({threads, by_work, by_grain})));
}

void ParallelFor(int64_t n, int threads, double cost_per_item,
                 absl::FunctionRef<void(int64_t, int64_t)> fn, int64_t grain, double min_work) {
  if (n <= 0) return;
  const int team = ParallelTeam(n, threads, cost_per_item, grain, min_work);
  if (team <= 1) {
    fn(0, n);
    return;
  }
  grain = EffectiveGrain(cost_per_item, grain);
  const int64_t grains = (n + grain - 1) / grain;
#pragma omp parallel num_threads(team)
  {
    const int64_t id = omp_get_thread_num();
    const int64_t count = omp_get_num_threads();
    const int64_t begin = std::min(n, grains * id / count * grain);
    const int64_t end = std::min(n, grains * (id + 1) / count * grain);
    if (begin < end) fn(begin, end);
  }
}

void ParallelCopy(void* dst, const void* src, size_t bytes, int threads) {
  constexpr size_t kPiece = size_t{64} << 10;
  if (bytes < 2 * kPiece || threads <= 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  const int64_t pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  ParallelFor(
      pieces, threads, static_cast<double>(kPiece),
      [&](int64_t begin, int64_t end) {
        const size_t from = static_cast<size_t>(begin) * kPiece;
        const size_t to = std::min(bytes, static_cast<size_t>(end) * kPiece);
        std::memcpy(static_cast<uint8_t*>(dst) + from, static_cast<const uint8_t*>(src) + from,
                    to - from);
      },
      1);
}

absl::Status ParallelForStatus(int64_t n, int threads, double cost_per_item,
                               absl::FunctionRef<absl::Status(int64_t, int64_t)> fn,
                               int64_t grain) {
  std::mutex mu;
  absl::Status first;
  ParallelFor(
      n, threads, cost_per_item,
      [&](int64_t begin, int64_t end) {
        absl::Status status = fn(begin, end);
        if (status.ok()) return;
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = std::move(status);
      },
      grain);
  return first;
}

namespace {

// RowSum in four vectors of V (the copy's register width) of independent sums, added pairwise.
template <typename V, bool kSquares>
__attribute__((always_inline)) inline float RowSumBody(const float* p, int64_t n, float center) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V a[4];
  for (V& v : a) v = V{};
  int64_t k = 0;
  for (; k + 4 * kLanes <= n; k += 4 * kLanes) {
    for (int j = 0; j < 4; ++j) {
      V v;
      LoadFloats(p + k + j * kLanes, &v);
      if constexpr (kSquares) {
        v -= center;
        a[j] += v * v;
      } else {
        a[j] += v;
      }
    }
  }
  for (; k + kLanes <= n; k += kLanes) {
    V v;
    LoadFloats(p + k, &v);
    if constexpr (kSquares) {
      v -= center;
      a[0] += v * v;
    } else {
      a[0] += v;
    }
  }
  a[0] = (a[0] + a[1]) + (a[2] + a[3]);
  float tail = 0;
  for (; k < n; ++k) tail += kSquares ? (p[k] - center) * (p[k] - center) : p[k];
  for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
    for (int64_t j = 0; j < width; ++j) a[0][j] += a[0][j + width];
  }
  return a[0][0] + tail;
}
template <bool kSquares>
__attribute__((target("avx512f"))) float RowSumAvx512(const float* p, int64_t n, float center) {
  return RowSumBody<Floats16, kSquares>(p, n, center);
}
template <bool kSquares>
__attribute__((target("avx2,fma"))) float RowSumAvx2(const float* p, int64_t n, float center) {
  return RowSumBody<Floats8, kSquares>(p, n, center);
}
template <bool kSquares>
float RowSumBaseline(const float* p, int64_t n, float center) {
  return RowSumBody<Floats4, kSquares>(p, n, center);
}

}  // namespace

float RowSum(const float* p, int64_t n, float center, bool squares) {
  static const auto sums =
      PickForThisCpu(&RowSumAvx512<false>, &RowSumAvx2<false>, &RowSumBaseline<false>);
  static const auto squared =
      PickForThisCpu(&RowSumAvx512<true>, &RowSumAvx2<true>, &RowSumBaseline<true>);
  return squares ? squared(p, n, center) : sums(p, n, center);
}

double LongRowSum(const float* p, int64_t n, float center, bool squares) {
  constexpr int64_t kBlock = 2048;
  double total = 0;
  for (int64_t at = 0; at < n; at += kBlock) {
    total += RowSum(p + at, std::min(kBlock, n - at), center, squares);
  }
  return total;
}

int OwnCopyLevel() {
  static const int level = [] {
    __builtin_cpu_init();
    int supported = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) supported = 1;
    if (__builtin_cpu_supports("avx512f")) supported = 2;
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (cap == nullptr) return supported;
    const std::string isa = absl::AsciiStrToUpper(cap);
    if (absl::StartsWith(isa, "SSE") || isa == "AVX") return 0;
    if (absl::StartsWith(isa, "AVX2")) return std::min(supported, 1);
    return supported;
  }();
  return level;
}

void UseIntraOpThreads(int threads) {
  const int wanted = threads < 1 ? 1 : threads;
  // The ICV is per thread: this changes only the calling (stream) thread's parallel regions.
  if (omp_get_max_threads() != wanted) omp_set_num_threads(wanted);
}

absl::Status IndexError(absl::string_view node, int64_t index, int64_t dim) {
  return absl::InvalidArgumentError(
      absl::StrCat(node, ": index ", index, " is out of range for an axis of size ", dim));
}

}  // namespace reprise::kernels::cpu
