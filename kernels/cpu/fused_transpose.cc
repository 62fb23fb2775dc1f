// kFusedTransposeOp: Concat -> Reshape -> Transpose -> Reshape -> Slices as one pass over the
// elements (a channel shuffle between two halves and its split, as in ShuffleNet), or the shape
// of one of the chain's inner values.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/layout_views.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

// The shapes along the chain, as far as `upto` (0: the concatenation, 1: the first Reshape's,
// 2: the Transpose's, 3: the result).
struct ChainShapes {
  Shape concat, reshaped, transposed, result;
  StridedView transpose;  // the transposed value as a view of the concatenation
};

absl::StatusOr<ChainShapes> ChainShapesOf(const PrepareContext& context, size_t parts, int upto) {
  const Attributes& attrs = AttrsOf(context);
  ChainShapes chain;
  if (parts == 1) {
    chain.concat = context.inputs[0].shape;
  } else {
    ASSIGN_OR_RETURN(int64_t axis, attrs.GetInt("axis", 0));
    ASSIGN_OR_RETURN(chain.concat, ConcatShape(context, 0, parts, axis));
  }
  chain.reshaped = chain.concat;
  if (upto >= 1 && HasInput(context, parts)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> spec, ReadInts(context, parts, "shape"));
    ASSIGN_OR_RETURN(int64_t allowzero, attrs.GetInt("allowzero", 0));
    ASSIGN_OR_RETURN(chain.reshaped, ReshapeTarget(context, chain.concat, spec, allowzero));
  }
  if (upto < 2) return chain;
  std::vector<int64_t> perm(chain.reshaped.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // Transpose's default: reverse the axes
  ASSIGN_OR_RETURN(perm, attrs.GetInts("perm", perm));
  ASSIGN_OR_RETURN(chain.transpose, TransposeView(context, chain.reshaped, perm));
  chain.transposed = chain.transpose.shape;
  chain.result = chain.transposed;
  if (upto >= 3 && HasInput(context, parts + 1)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> spec, ReadInts(context, parts + 1, "shape"));
    ASSIGN_OR_RETURN(int64_t allowzero, attrs.GetInt("allowzero_2", 0));
    ASSIGN_OR_RETURN(chain.result, ReshapeTarget(context, chain.transposed, spec, allowzero));
  }
  return chain;
}

// The concatenation read where it lies: per index before the axis, `block` elements, of which
// part k holds [begin[k], begin[k] + size[k]).
struct Parts {
  int64_t block = 0;
  std::vector<int64_t> begin, size;
};

// One output: a view of the result (contiguous, in the transposed value's order).
struct Output {
  BroadcastPlan plan;  // over the output's shape; operand 0: the result's element
  int64_t offset = 0;
  int64_t first = 0;  // its first element in the range all outputs share
};

// Calls emit(k, src, dst, n) for the contiguous runs that elements [begin, end) of `out` are made
// of: n elements from element src of part k to element dst of the output.
template <typename Emit>
void FromParts(const Parts& parts, int64_t c, int64_t n, int64_t dst, Emit&& emit) {
  while (n > 0) {
    const int64_t outer = c / parts.block;
    const int64_t at = c % parts.block;
    size_t k = 0;
    while (at >= parts.begin[k] + parts.size[k]) ++k;
    const int64_t within = at - parts.begin[k];
    const int64_t take = std::min(n, parts.size[k] - within);
    emit(k, outer * parts.size[k] + within, dst, take);
    dst += take;
    c += take;
    n -= take;
  }
}

template <typename Emit>
void FromTransposed(const Parts& parts, const BroadcastPlan& transpose, int64_t t, int64_t n,
                    int64_t dst, Emit&& emit) {
  const int64_t stride = transpose.strides[0].back();
  ForEachRowIn(transpose, t, t + n, [&](int64_t at, const int64_t* offs, int64_t m) {
    const int64_t d = dst + (at - t);
    if (stride == 1) {
      FromParts(parts, offs[0], m, d, emit);
      return;
    }
    for (int64_t i = 0; i < m; ++i) FromParts(parts, offs[0] + i * stride, 1, d + i, emit);
  });
}

template <typename Emit>
void Walk(const Parts& parts, const BroadcastPlan& transpose, const Output& out, int64_t begin,
          int64_t end, Emit&& emit) {
  const int64_t stride = out.plan.strides[0].back();
  ForEachRowIn(out.plan, begin, end, [&](int64_t at, const int64_t* offs, int64_t m) {
    const int64_t t = out.offset + offs[0];
    if (stride == 1) {
      FromTransposed(parts, transpose, t, m, at, emit);
      return;
    }
    for (int64_t i = 0; i < m; ++i)
      FromTransposed(parts, transpose, t + i * stride, 1, at + i, emit);
  });
}

// One contiguous copy of the whole chain, found at Prepare.
struct Run {
  int32_t output = 0;
  int32_t part = 0;
  int64_t src = 0;
  int64_t dst = 0;
  int64_t n = 0;
};

// The chain's copies as a list of runs when they are few (on average 16 elements or more):
// then Run copies without any index arithmetic. Empty otherwise.
std::vector<Run> ListRuns(const Parts& parts, const BroadcastPlan& transpose,
                          const std::vector<Output>& outputs, int64_t total) {
  const size_t limit = static_cast<size_t>(std::max<int64_t>(64, total / 16));
  std::vector<Run> runs;
  for (size_t j = 0; j < outputs.size(); ++j) {
    bool over = false;
    Walk(parts, transpose, outputs[j], 0, outputs[j].plan.count,
         [&](size_t k, int64_t src, int64_t dst, int64_t n) {
           if (over) return;
           if (!runs.empty()) {
             Run& last = runs.back();
             if (last.output == static_cast<int32_t>(j) && last.part == static_cast<int32_t>(k) &&
                 last.src + last.n == src && last.dst + last.n == dst) {
               last.n += n;
               return;
             }
           }
           if (runs.size() == limit) {
             over = true;
             return;
           }
           runs.push_back(Run{static_cast<int32_t>(j), static_cast<int32_t>(k), src, dst, n});
         });
    if (over) return {};
  }
  return runs;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedTranspose(
    const PrepareContext& context) {
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(int64_t parts_attr, attrs.GetInt("concat_inputs", 1));
  ASSIGN_OR_RETURN(int64_t slices, attrs.GetInt("slices", 0));
  ASSIGN_OR_RETURN(int64_t shape_of, attrs.GetInt("shape_of", -1));
  // Each count is checked against the inputs there are before anything is sized from it.
  const int64_t inputs = static_cast<int64_t>(context.inputs.size());
  if (parts_attr < 1 || parts_attr > inputs - 2 || slices < 0 ||
      slices > (inputs - 2 - parts_attr) / 4 || shape_of < -1 || shape_of > 3) {
    return InvalidArgument(context, "concat_inputs ", parts_attr, ", slices ", slices,
                           " and shape_of ", shape_of, " do not fit its ", context.inputs.size(),
                           " inputs");
  }
  const size_t parts = static_cast<size_t>(parts_attr);
  for (size_t k = 0; k < parts; ++k) {
    if (!context.inputs[k].present) return InvalidArgument(context, "input ", k, " is absent");
  }
  if (shape_of >= 0) {
    if (context.inputs.size() != parts + 2) {
      return InvalidArgument(context, "expected ", parts + 2, " inputs, got ",
                             context.inputs.size());
    }
    ASSIGN_OR_RETURN(ChainShapes chain, ChainShapesOf(context, parts, static_cast<int>(shape_of)));
    const Shape* shapes[] = {&chain.concat, &chain.reshaped, &chain.transposed, &chain.result};
    const Shape& shape = *shapes[shape_of];
    ConstantOutput out{DataType::kInt64, {static_cast<int64_t>(shape.size())}, {}};
    out.bytes.resize(shape.size() * sizeof(int64_t));
    if (!shape.empty()) std::memcpy(out.bytes.data(), shape.data(), out.bytes.size());
    std::vector<ConstantOutput> outs;
    outs.push_back(std::move(out));
    return std::make_unique<ConstantKernel>(context.op, std::move(outs));
  }
  const size_t expected = parts + 2 + 4 * static_cast<size_t>(slices);
  // S1, S2 and a slice's axes and steps may be absent.
  if (context.inputs.size() != expected) {
    return InvalidArgument(context, "expected ", expected, " inputs, got ", context.inputs.size());
  }
  ASSIGN_OR_RETURN(ChainShapes chain, ChainShapesOf(context, parts, 3));

  auto parts_of = std::make_shared<Parts>();
  if (parts == 1) {
    parts_of->block = std::max<int64_t>(1, runtime::NumElements(chain.concat));
    parts_of->begin = {0};
    parts_of->size = {runtime::NumElements(chain.concat)};
  } else {
    ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 0));
    const int64_t rank = static_cast<int64_t>(chain.concat.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
    int64_t inner = 1;
    for (int64_t i = axis + 1; i < rank; ++i) inner *= chain.concat[i];
    parts_of->block = std::max<int64_t>(1, chain.concat[axis] * inner);
    int64_t begin = 0;
    for (size_t k = 0; k < parts; ++k) {
      const int64_t size = context.inputs[k].shape[axis] * inner;
      parts_of->begin.push_back(begin);
      parts_of->size.push_back(size);
      begin += size;
    }
  }
  auto transpose =
      std::make_shared<BroadcastPlan>(MakeStridedPlan(chain.transposed, {chain.transpose.strides}));

  auto outputs = std::make_shared<std::vector<Output>>();
  std::vector<TensorDesc> descs;
  const DataType dtype = context.inputs[0].dtype;
  int64_t total = 0;
  const size_t count = slices == 0 ? 1 : static_cast<size_t>(slices);
  for (size_t j = 0; j < count; ++j) {
    StridedView view{chain.result, ContiguousStrides(chain.result), 0};
    if (slices > 0) {
      const size_t at = parts + 2 + 4 * j;
      ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadInts(context, at, "starts"));
      ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadInts(context, at + 1, "ends"));
      std::vector<int64_t> axes, steps;
      if (HasInput(context, at + 2)) {
        ASSIGN_OR_RETURN(axes, ReadInts(context, at + 2, "axes"));
      }
      if (HasInput(context, at + 3)) {
        ASSIGN_OR_RETURN(steps, ReadInts(context, at + 3, "steps"));
      }
      ASSIGN_OR_RETURN(
          view, SliceView(context, chain.result, starts, ends, std::move(axes), std::move(steps)));
    }
    Output out;
    out.plan = MakeStridedPlan(view.shape, {view.strides});
    out.offset = view.offset;
    out.first = total;
    total += out.plan.count;
    outputs->push_back(std::move(out));
    descs.push_back(Desc(dtype, std::move(view.shape)));
  }
  const size_t esize = runtime::DataTypeSize(dtype);
  auto runs =
      std::make_shared<const std::vector<Run>>(ListRuns(*parts_of, *transpose, *outputs, total));
  const int threads = context.intra_op_threads;
  if (!runs->empty()) {
    // Copies of equal size in the common case: handed out one by one.
    const double per_run = 0.5 * static_cast<double>(total) / static_cast<double>(runs->size());
    return MakeKernel(
        context, std::move(descs), [runs, esize, per_run, threads](const KernelArgs& args) {
          ParallelFor(
              static_cast<int64_t>(runs->size()), threads, per_run,
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  const Run& run = (*runs)[r];
                  std::memcpy(static_cast<uint8_t*>(args.outputs[run.output]) + run.dst * esize,
                              static_cast<const uint8_t*>(args.inputs[run.part]) + run.src * esize,
                              static_cast<size_t>(run.n) * esize);
                }
              },
              1);
          return absl::OkStatus();
        });
  }
  return MakeKernel(context, std::move(descs),
                    [parts_of, transpose, outputs, esize, total, threads](const KernelArgs& args) {
                      ParallelFor(total, threads, 0.5, [&](int64_t begin, int64_t end) {
                        for (size_t j = 0; j < outputs->size(); ++j) {
                          const Output& out = (*outputs)[j];
                          const int64_t lo = std::max(begin, out.first);
                          const int64_t hi = std::min(end, out.first + out.plan.count);
                          if (lo >= hi) continue;
                          uint8_t* dst = static_cast<uint8_t*>(args.outputs[j]);
                          Walk(*parts_of, *transpose, out, lo - out.first, hi - out.first,
                               [&](size_t k, int64_t src, int64_t at, int64_t n) {
                                 std::memcpy(
                                     dst + at * esize,
                                     static_cast<const uint8_t*>(args.inputs[k]) + src * esize,
                                     static_cast<size_t>(n) * esize);
                               });
                        }
                      });
                      return absl::OkStatus();
                    });
}

}  // namespace

absl::Status RegisterFusedTransposeKernels(runtime::KernelRegistry* registry) {
  return registry->Register(kFusedTransposeOp, &PrepareFusedTranspose);
}

}  // namespace reprise::kernels::cpu
