// Shape and stride arithmetic of the ops that move elements (Reshape, Concat, Transpose,
// Slice), shared by their kernels and by the fused chain of them (kFusedTransposeOp).
#ifndef REPRISE_KERNELS_CPU_LAYOUT_VIEWS_H_
#define REPRISE_KERNELS_CPU_LAYOUT_VIEWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

/// A strided read: element i (a multi-index over `shape`) of the view is element
/// `offset + sum(i[a] * strides[a])` of the source.
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

/// Reshape's output shape for an input of shape `in` and the "shape" input `spec` (0 copies the
/// input's dim unless `allowzero`, one -1 is inferred); errors name the context's node.
absl::StatusOr<Shape> ReshapeTarget(const PrepareContext& context, const Shape& in,
                                    const std::vector<int64_t>& spec, int64_t allowzero);

/// Concat's output shape for the context's inputs [first, first + count) along `axis_attr`
/// (negative counts from the end): same dtype and rank, equal dims off the axis.
absl::StatusOr<Shape> ConcatShape(const PrepareContext& context, size_t first, size_t count,
                                  int64_t axis_attr);

/// Transpose of a contiguous `in` by `perm` (a permutation of its axes) as a view of it.
absl::StatusOr<StridedView> TransposeView(const PrepareContext& context, const Shape& in,
                                          const std::vector<int64_t>& perm);

/// Slice (opset 10 and later: starts, ends, optional axes and steps, ONNX's clamping rules) of a
/// contiguous `in` as a view of it. Empty `axes` means 0, 1, ...; empty `steps` all 1.
absl::StatusOr<StridedView> SliceView(const PrepareContext& context, const Shape& in,
                                      const std::vector<int64_t>& starts,
                                      const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                      std::vector<int64_t> steps);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_LAYOUT_VIEWS_H_
