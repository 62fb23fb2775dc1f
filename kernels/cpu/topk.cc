// TopK: the k largest (or smallest) values along an axis and their int64 indices, always sorted;
// equal values keep the lower index first; NaN counts as larger than every number (first among
// the largest, last among the smallest). k must be known at plan time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

// Up to this k, each row keeps its best k in a sorted array that a value enters only when it
// beats the last of them (one comparison for most values: rows in parallel, no workspace);
// above it, a heap of k candidates per row (rows in turn, one workspace).
constexpr int64_t kInsertionK = 32;

// Whether a comes strictly before b in TopK's order (a total order: NaN above every number, NaNs
// equal to each other).
template <typename T>
inline bool Before(T a, T b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool a_nan = std::isnan(a);
    const bool b_nan = std::isnan(b);
    if (a_nan || b_nan) return largest ? a_nan && !b_nan : b_nan && !a_nan;
  }
  return largest ? a > b : a < b;
}

// The first index from j on of a contiguous row whose value may come before `last` (dim when
// none): float rows are screened sixteen values at a time by vector comparisons (most values of a
// long row lose to the k-th best so far); a flagged block is then offered value by value.
template <typename T>
inline int64_t SkipWorse(const T* p, int64_t j, int64_t dim, T last, bool largest) {
  if constexpr (std::is_same_v<T, float>) {
    if (std::isnan(last) && !largest) return j;  // every number beats NaN among the smallest
    for (; j + 16 <= dim; j += 16) {
      Floats4 v[4];
      for (int b = 0; b < 4; ++b) LoadFloats(p + j + 4 * b, &v[b]);
      Ints4 hit = Ints4{};
      for (int b = 0; b < 4; ++b) hit |= largest ? (v[b] > last) | (v[b] != v[b]) : v[b] < last;
      if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) return j;
    }
  }
  return j;
}

// Bit l set where p[l] (l < 16) may come before `last` in TopK's order: above it or NaN
// (largest), below it (smallest; every number when `last` is NaN). SSE, the x86-64 baseline.
inline uint32_t HitMask16(const float* p, float last, bool largest) {
  if (!largest && std::isnan(last)) return 0xFFFFu;
  const __m128 t = _mm_set1_ps(last);
  uint32_t mask = 0;
  for (int b = 0; b < 4; ++b) {
    const __m128 v = _mm_loadu_ps(p + 4 * b);
    const __m128 hit =
        largest ? _mm_or_ps(_mm_cmpgt_ps(v, t), _mm_cmpunord_ps(v, v)) : _mm_cmplt_ps(v, t);
    mask |= static_cast<uint32_t>(_mm_movemask_ps(hit)) << (4 * b);
  }
  return mask;
}

// From index j on, the whole blocks of 16 of a contiguous float row: each screened once against
// threshold() at the block's start (HitMask16; the threshold only improves, so a flagged value
// may still be turned away, an unflagged one would be), its flagged values offered in index
// order. Returns the index past the last whole block.
template <typename Threshold, typename Offer>
int64_t OfferFlaggedBlocks(const float* p, int64_t j, int64_t dim, bool largest,
                           Threshold threshold, Offer& offer) {
  for (; j + 16 <= dim; j += 16) {
    for (uint32_t hits = HitMask16(p + j, threshold(), largest); hits != 0; hits &= hits - 1) {
      const int64_t l = __builtin_ctz(hits);
      offer(p[j + l], j + l);
    }
  }
  return j;
}

// The k best of the `dim` values p[j * stride] (k <= kInsertionK, k <= dim) into values[j * out]
// and, unless null, indices[j * out]. Values enter in index order and stop at an equal one:
// ties keep the lower index first.
template <typename T>
void TopByInsertion(const T* p, int64_t dim, int64_t stride, int64_t k, bool largest, T* values,
                    int64_t* indices, int64_t out) {
  if (k <= 0) return;
  T best[kInsertionK];
  int64_t at[kInsertionK];
  int64_t filled = 0;
  auto offer = [&](T v, int64_t j) {
    if (filled == k && !Before(v, best[k - 1], largest)) return;
    int64_t slot = filled < k ? filled++ : k - 1;
    while (slot > 0 && Before(v, best[slot - 1], largest)) {
      best[slot] = best[slot - 1];
      at[slot] = at[slot - 1];
      --slot;
    }
    best[slot] = v;
    at[slot] = j;
  };
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {
      // The first k fill the array; then blocks of 16 screened against the k-th best at the
      // block's start, and only the values flagged offered, in index order (the k-th best only
      // improves, so a flagged value may still be turned away; an unflagged one would be).
      for (; j < k; ++j) offer(p[j], j);
      j = OfferFlaggedBlocks(
          p, j, dim, largest, [&] { return best[k - 1]; }, offer);
    }
  }
  for (; j < dim; ++j) {
    if (stride == 1 && filled == k) j = SkipWorse(p, j, dim, best[k - 1], largest);
    if (j < dim) offer(p[j * stride], j);
  }
  for (int64_t r = 0; r < k; ++r) {
    values[r * out] = best[r];
    if (indices != nullptr) indices[r * out] = at[r];
  }
}

// One of a row's candidates for TopK's larger k: its value and its index.
template <typename T>
struct Candidate {
  T value;
  int64_t index;
};

// TopByInsertion for any k (0 < k <= dim) with `heap` room for k candidates: a heap whose top is
// the worst of the best k so far; a value enters only when it beats that top (most do not: a
// row of n values costs about n comparisons plus k log(k) log(n / k)). Sorted at the end.
template <typename T>
void TopByHeap(const T* p, int64_t dim, int64_t stride, int64_t k, bool largest, T* values,
               int64_t* indices, int64_t out, Candidate<T>* heap) {
  auto better = [largest](const Candidate<T>& a, const Candidate<T>& b) {
    if (Before(a.value, b.value, largest)) return true;
    if (Before(b.value, a.value, largest)) return false;
    return a.index < b.index;
  };
  if (k <= 0) return;
  int64_t filled = 0;
  auto offer = [&](T v, int64_t j) {
    if (filled < k) {
      heap[filled++] = {v, j};
      std::push_heap(heap, heap + filled, better);
    } else if (Before(v, heap[0].value, largest)) {
      // Later indices lose ties, so only a strictly better value enters. It takes the top's
      // place (the worst's) and sinks while a child is worse than it: one pass down, where
      // popping and pushing took two.
      const Candidate<T> c{v, j};
      int64_t i = 0;
      for (int64_t child = 1; child < k; child = 2 * i + 1) {
        if (child + 1 < k && better(heap[child], heap[child + 1])) ++child;
        if (!better(c, heap[child])) break;
        heap[i] = heap[child];
        i = child;
      }
      heap[i] = c;
    }
  };
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {
      // As TopByInsertion: the first k fill the heap, then each block of 16 is screened once
      // against the heap's top at the block's start and only its flagged values are offered, in
      // index order. (Screening again from each offered value on rescanned a block per entry:
      // 300 of 25088, 8 rows, 1.02 ms.)
      for (; j < k; ++j) offer(p[j], j);
      j = OfferFlaggedBlocks(
          p, j, dim, largest, [&] { return heap[0].value; }, offer);
    }
  }
  for (; j < dim; ++j) {
    if (stride == 1 && filled == k) {
      j = SkipWorse(p, j, dim, heap[0].value, largest);
      if (j == dim) break;
    }
    offer(p[j * stride], j);
  }
  std::sort_heap(heap, heap + filled, better);
  for (int64_t r = 0; r < filled; ++r) {
    values[r * out] = heap[r].value;
    if (indices != nullptr) indices[r * out] = heap[r].index;
  }
}

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
  const bool by_insertion = k <= kInsertionK;
  size_t workspace = 0;
  const int threads = context.intra_op_threads;
  FunctionKernel::RunFn run;
  bool overflow = false;
  const bool ok = DispatchArithmetic(in.dtype, [&]<typename T>() {
    // A heap of k candidates for each of up to `slots` rows at once, one per thread.
    const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(outer * inner, threads));
    if (!by_insertion) {
      size_t heap_bytes = 0;
      if (!runtime::CheckedMulSize(static_cast<size_t>(k), sizeof(Candidate<T>), &heap_bytes) ||
          !runtime::CheckedMulSize(heap_bytes, static_cast<size_t>(slots), &heap_bytes)) {
        overflow = true;
        return;
      }
      workspace = heap_bytes;
    }
    run = [=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* values = static_cast<T*>(args.outputs[0]);
      int64_t* indices = with_indices ? static_cast<int64_t*>(args.outputs[1]) : nullptr;
      const bool big = largest != 0;
      // Row `row` of the [outer, inner] rows: by insertion, or by `heap` (the workspace).
      auto one_row = [&](int64_t row, Candidate<T>* heap) {
        const int64_t o = row / inner;
        const int64_t i = row % inner;
        const int64_t at = o * k * inner + i;
        const T* p = x + o * dim * inner + i;
        int64_t* row_indices = indices != nullptr ? indices + at : nullptr;
        if (heap == nullptr) {
          TopByInsertion(p, dim, inner, k, big, values + at, row_indices, inner);
        } else {
          TopByHeap(p, dim, inner, k, big, values + at, row_indices, inner, heap);
        }
      };
      if (by_insertion) {
        ParallelFor(outer * inner, threads, static_cast<double>(dim),
                    [&](int64_t first, int64_t end) {
                      for (int64_t row = first; row < end; ++row) one_row(row, nullptr);
                    });
      } else {
        // Rows in `slots` runs of consecutive rows, each run on its own heap.
        auto* heaps = static_cast<Candidate<T>*>(args.workspace);
        const int64_t rows = outer * inner;
        ParallelFor(
            slots, threads, static_cast<double>(rows / slots * dim),
            [&](int64_t first, int64_t end) {
              for (int64_t slot = first; slot < end; ++slot) {
                for (int64_t row = rows * slot / slots; row < rows * (slot + 1) / slots; ++row) {
                  one_row(row, heaps + slot * k);
                }
              }
            },
            1);
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  if (overflow) return InvalidArgument(context, "k=", k, " candidates overflow the workspace");
  return MakeKernel(context, {Desc(in.dtype, out), Desc(DataType::kInt64, out)}, std::move(run),
                    workspace);
}

}  // namespace

absl::Status RegisterTopKKernels(runtime::KernelRegistry* registry) {
  return registry->Register("TopK", &PrepareTopK);
}

}  // namespace reprise::kernels::cpu
