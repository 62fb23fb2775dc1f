// Ops that move elements without arithmetic: Transpose, Slice, Expand, Tile, DepthToSpace,
// SpaceToDepth (strided copies), Concat, Split, Pad, Trilu, ReverseSequence. All work on any
// element type by element size.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/layout_views.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

// Rows [r0, r1), columns [c_begin, c_end) of one [rows, cols] output matrix of a batched 2-D
// transpose whose source column c starts at src + c * sc (contiguous along the rows): 8 x 8
// tiles of 4-byte elements transposed in vector registers (unpack, shuffle, then swap of
// 128-bit halves), the tiles at the range's right edge element by element. r1 - r0 is at most 8.
#define REPRISE_TILE_ARGS                                                                          \
  const float *src, int64_t sc, float *dst, int64_t cols, int64_t r0, int64_t r1, int64_t c_begin, \
      int64_t c_end
__attribute__((always_inline)) inline void TransposeRowsBody(REPRISE_TILE_ARGS) {
  typedef float V __attribute__((vector_size(32)));
  int64_t c0 = c_begin;
  if (r1 - r0 == 8) {
    for (; c0 + 8 <= c_end; c0 += 8) {
      V v[8], t[8], s[8];
      for (int c = 0; c < 8; ++c) std::memcpy(&v[c], src + r0 + (c0 + c) * sc, sizeof(V));
      for (int c = 0; c < 8; c += 2) {
        t[c] = __builtin_shufflevector(v[c], v[c + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[c + 1] = __builtin_shufflevector(v[c], v[c + 1], 2, 10, 3, 11, 6, 14, 7, 15);
      }
      for (int c = 0; c < 8; c += 4) {
        s[c] = __builtin_shufflevector(t[c], t[c + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        s[c + 1] = __builtin_shufflevector(t[c], t[c + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        s[c + 2] = __builtin_shufflevector(t[c + 1], t[c + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        s[c + 3] = __builtin_shufflevector(t[c + 1], t[c + 3], 2, 3, 10, 11, 6, 7, 14, 15);
      }
      for (int r = 0; r < 4; ++r) {
        const V lo = __builtin_shufflevector(s[r], s[r + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const V hi = __builtin_shufflevector(s[r], s[r + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        std::memcpy(dst + (r0 + r) * cols + c0, &lo, sizeof(V));
        std::memcpy(dst + (r0 + r + 4) * cols + c0, &hi, sizeof(V));
      }
    }
  }
  for (; c0 < c_end; c0 += 8) {
    const int64_t c1 = std::min(c_end, c0 + 8);
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) dst[r * cols + c] = src[r + c * sc];
    }
  }
}
__attribute__((target("avx2"))) void TransposeRowsAvx2(REPRISE_TILE_ARGS) {
  TransposeRowsBody(src, sc, dst, cols, r0, r1, c_begin, c_end);
}
#undef REPRISE_TILE_ARGS

// CopyStrided of a plan of 4-byte elements whose last two dims [R, C] read the source with
// strides [1, s] (the source runs along the output's columns: a batched 2-D transpose, such as
// NCHW <-> NHWC) in 8 x 8 tiles transposed in AVX2 registers, split over up to `threads`
// threads by (outer index, chunk of columns). False, copying nothing, for any other plan, other
// element sizes or a CPU without AVX2 (the element-wise copy then).
template <typename T>
bool CopyTransposedTiles(const BroadcastPlan& plan, const T* in, T* out, int threads) {
  const int64_t rank = static_cast<int64_t>(plan.dims.size());
  if (sizeof(T) != sizeof(float) || OwnCopyLevel() < 1 || rank < 2) return false;
  const std::vector<int64_t>& stride = plan.strides[0];
  const int64_t rows = plan.dims[rank - 2], cols = plan.dims[rank - 1], sc = stride[rank - 1];
  if (stride[rank - 2] != 1 || sc == 0 || sc == 1 || rows < 8 || cols < 8) return false;
  // Items of (outer index, chunk of up to 512 columns), row block by row block in each: a row
  // block's pass over a chunk reads 512 source lines (32 KiB), which hold the next row block's
  // elements too and are still in the cache then; the output's rows are written in runs of 512
  // elements. (Row block by row block over all the columns, a source line of a wide matrix was
  // read from memory once per row block it holds: 16384 columns of 128 rows took 2.4 ms, 1.6 to
  // 1.7 ms in chunks of 128 columns, whose output runs are short, and 1.3 to 1.4 ms in chunks
  // of 512.)
  const int64_t chunk = std::min<int64_t>(512, cols);
  const int64_t outer = plan.count / (rows * cols), chunks = (cols + chunk - 1) / chunk;
  ParallelFor(
      outer * chunks, threads, static_cast<double>(rows * chunk),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t o = item / chunks, c_begin = item % chunks * chunk;
          int64_t at = 0;  // the source offset of outer index o
          for (int64_t i = rank - 3, rest = o; i >= 0; --i) {
            at += rest % plan.dims[i] * stride[i];
            rest /= plan.dims[i];
          }
          for (int64_t r0 = 0; r0 < rows; r0 += 8) {
            TransposeRowsAvx2(reinterpret_cast<const float*>(in + at), sc,
                              reinterpret_cast<float*>(out + o * rows * cols), cols, r0,
                              std::min(rows, r0 + 8), c_begin, std::min(cols, c_begin + chunk));
          }
        }
      },
      1);
  return true;
}

// One output block of an interleaving copy: dst[r * C + c] = src[r + c * s] for r < rows (the
// compiler's interleaved stores; C is a constant).
template <typename T, int C>
void InterleaveBlock(const T* __restrict src, int64_t s, T* __restrict dst, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < C; ++c) dst[r * C + c] = src[r + c * s];
  }
}

// CopyStrided of a plan whose last two dims [R, C] read the source with strides [1, s] and whose
// C is 2 to 4: C source runs interleaved into each block of R x C output elements (DepthToSpace
// of blocksize 2 and 3 in either mode; a transpose that moves a small axis last), split over up
// to `threads` threads by block. Element by element, each piece of two to four elements was a
// call of its own: DepthToSpace of [1, 64, 64, 64] by 2 took 485 us on one thread. False,
// copying nothing, for any other plan.
template <typename T>
bool CopyInterleaved(const BroadcastPlan& plan, const T* in, T* out, int threads) {
  const size_t rank = plan.dims.size();
  if (rank < 2) return false;
  const std::vector<int64_t>& stride = plan.strides[0];
  const int64_t rows = plan.dims[rank - 2], cols = plan.dims[rank - 1], s = stride[rank - 1];
  if (stride[rank - 2] != 1 || s == 0 || s == 1 || cols < 2 || cols > 4 || rows < 8) return false;
  void (*block)(const T*, int64_t, T*, int64_t) = cols == 2   ? &InterleaveBlock<T, 2>
                                                  : cols == 3 ? &InterleaveBlock<T, 3>
                                                              : &InterleaveBlock<T, 4>;
  // The outer dims with a last dim of 1: ForEachRowIn then calls once per output block.
  BroadcastPlan outer;
  outer.dims.assign(plan.dims.begin(), plan.dims.end() - 2);
  outer.dims.push_back(1);
  outer.strides.assign(1, std::vector<int64_t>(stride.begin(), stride.end() - 2));
  outer.strides[0].push_back(0);
  outer.count = plan.count / (rows * cols);
  const int64_t size = rows * cols;
  ParallelFor(
      outer.count, threads, 0.5 * static_cast<double>(size),
      [&](int64_t begin, int64_t end) {
        ForEachRowIn(outer, begin, end, [&](int64_t at, const int64_t* offs, int64_t) {
          block(in + offs[0], s, out + at * size, rows);
        });
      },
      1);
  return true;
}

// CopyStrided split over up to `threads` threads by output elements (a gathering copy, whose
// rows are strided, costs more per element than a contiguous one); batched 2-D transposes in
// tiles (CopyTransposedTiles), small axes moved last by interleaving (CopyInterleaved).
template <typename T>
void CopyStridedParallel(const BroadcastPlan& plan, const T* in, T* out, int threads) {
  if (CopyTransposedTiles(plan, in, out, threads)) return;
  if (CopyInterleaved(plan, in, out, threads)) return;
  const double cost = plan.strides[0].back() == 1 ? 0.5 : 2.0;
  ParallelFor(plan.count, threads, cost,
              [&](int64_t begin, int64_t end) { CopyStridedRange(plan, in, out, begin, end); });
}

// A kernel copying input 0, read from `offset` with `in_strides` over the index space `view`,
// into output 0 of shape `out` (the same elements as `view`).
absl::StatusOr<std::unique_ptr<PreparedKernel>> StridedCopy(const PrepareContext& context,
                                                            Shape out, const Shape& view,
                                                            std::vector<int64_t> in_strides,
                                                            int64_t offset) {
  // Shapes here can come from a model's constants (Tile's repeats, Expand's shape).
  if (!runtime::CheckedElementCount(out).has_value() ||
      !runtime::CheckedElementCount(view).has_value()) {
    return InvalidArgument(context, "output shape ", runtime::ShapeToString(out), " overflows");
  }
  const DataType dtype = context.inputs[0].dtype;
  BroadcastPlan plan = MakeStridedPlan(view, {std::move(in_strides)});
  FunctionKernel::RunFn run;
  const bool ok = DispatchBySize(runtime::DataTypeSize(dtype), [&]<typename T>() {
    run = [plan, offset, threads = context.intra_op_threads](const KernelArgs& args) {
      CopyStridedParallel(plan, static_cast<const T*>(args.inputs[0]) + offset,
                          static_cast<T*>(args.outputs[0]), threads);
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, std::move(out))}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTranspose(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const Shape& in = context.inputs[0].shape;
  std::vector<int64_t> perm(in.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the axes
  ASSIGN_OR_RETURN(perm, AttrsOf(context).GetInts("perm", perm));
  ASSIGN_OR_RETURN(StridedView view, TransposeView(context, in, perm));
  return StridedCopy(context, view.shape, view.shape, std::move(view.strides), 0);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSlice(const PrepareContext& context) {
  std::vector<int64_t> starts, ends, axes, steps;
  const Attributes& attrs = AttrsOf(context);
  if (context.opset < 10) {
    RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
    ASSIGN_OR_RETURN(starts, attrs.GetInts("starts", {}));
    ASSIGN_OR_RETURN(ends, attrs.GetInts("ends", {}));
    ASSIGN_OR_RETURN(axes, attrs.GetInts("axes", {}));
  } else {
    RETURN_IF_ERROR(ExpectInputCount(context, 3, 5));
    ASSIGN_OR_RETURN(starts, ReadInts(context, 1, "starts"));
    ASSIGN_OR_RETURN(ends, ReadInts(context, 2, "ends"));
    if (HasInput(context, 3)) {
      ASSIGN_OR_RETURN(axes, ReadInts(context, 3, "axes"));
    }
    if (HasInput(context, 4)) {
      ASSIGN_OR_RETURN(steps, ReadInts(context, 4, "steps"));
    }
  }
  ASSIGN_OR_RETURN(StridedView view, SliceView(context, context.inputs[0].shape, starts, ends,
                                               std::move(axes), std::move(steps)));
  return StridedCopy(context, view.shape, view.shape, std::move(view.strides), view.offset);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareExpand(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(context, 1, "shape"));
  const Shape& in = context.inputs[0].shape;
  auto out = BroadcastShapes(in, shape);
  if (!out.ok()) return InvalidArgument(context, out.status().message());
  std::vector<int64_t> in_strides(out->size(), 0);
  const std::vector<int64_t> strides = ContiguousStrides(in);
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t o = out->size() - in.size() + i;
    in_strides[o] = in[i] == 1 ? 0 : strides[i];
  }
  return StridedCopy(context, *out, *out, std::move(in_strides), 0);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTile(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadInts(context, 1, "repeats"));
  const Shape& in = context.inputs[0].shape;
  if (repeats.size() != in.size()) {
    return InvalidArgument(context, "repeats ", runtime::ShapeToString(repeats),
                           " do not match input shape ", runtime::ShapeToString(in));
  }
  // The output [r0*d0, r1*d1, ...] seen as [r0, d0, r1, d1, ...] is a strided read of the
  // input with stride 0 on the repeat axes.
  const std::vector<int64_t> strides = ContiguousStrides(in);
  Shape view, out;
  std::vector<int64_t> in_strides;
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0) {
      return InvalidArgument(context, "repeats ", runtime::ShapeToString(repeats),
                             " has a negative value");
    }
    int64_t tiled = 0;
    if (!runtime::CheckedMul(repeats[i], in[i], &tiled)) {
      return InvalidArgument(context, "repeats ", runtime::ShapeToString(repeats), " of shape ",
                             runtime::ShapeToString(in), " overflow");
    }
    view.push_back(repeats[i]);
    view.push_back(in[i]);
    in_strides.push_back(0);
    in_strides.push_back(strides[i]);
    out.push_back(tiled);
  }
  return StridedCopy(context, std::move(out), view, std::move(in_strides), 0);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConcat(const PrepareContext& context) {
  if (context.inputs.empty()) return InvalidArgument(context, "expected at least 1 input");
  const TensorDesc& first = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  ASSIGN_OR_RETURN(Shape out, ConcatShape(context, 0, context.inputs.size(), axis_attr));
  const size_t esize = runtime::DataTypeSize(first.dtype);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out[i];
  int64_t inner = esize;
  for (int64_t i = axis + 1; i < rank; ++i) inner *= out[i];
  std::vector<int64_t> chunk;  // bytes per outer index, per input
  for (const TensorDesc& in : context.inputs) chunk.push_back(in.shape[axis] * inner);
  const int64_t row = out[axis] * inner;
  const int threads = context.intra_op_threads;
  auto kernel = std::make_unique<FunctionKernel>(
      context.op, std::vector<TensorDesc>{Desc(first.dtype, out)},
      [chunk, outer, row, threads](const KernelArgs& args) {
        uint8_t* o = static_cast<uint8_t*>(args.outputs[0]);
        if (outer == 1) {
          // Each input one run: copied in pieces over the threads, unless its producer wrote it
          // in place (input_offsets_in_output).
          int64_t at = 0;
          for (size_t k = 0; k < chunk.size(); ++k) {
            if (args.inputs[k] != o + at) {
              ParallelCopy(o + at, args.inputs[k], static_cast<size_t>(chunk[k]), threads);
            }
            at += chunk[k];
          }
          return absl::OkStatus();
        }
        // Output rows (one run of each input) split over the threads (a float's copy costing 1).
        ParallelFor(outer, threads, static_cast<double>(row) / 4.0,
                    [&](int64_t begin, int64_t end) {
                      int64_t at = 0;
                      for (size_t k = 0; k < chunk.size(); ++k) {
                        const uint8_t* in = static_cast<const uint8_t*>(args.inputs[k]);
                        const size_t bytes = static_cast<size_t>(chunk[k]);
                        if (bytes > 0) {
                          for (int64_t j = begin; j < end; ++j) {
                            std::memcpy(o + j * row + at, in + j * bytes, bytes);
                          }
                        }
                        at += chunk[k];
                      }
                    });
        return absl::OkStatus();
      });
  // With one outer index each input is one run of the output: its bytes' offset there.
  if (outer == 1 && first.dtype != DataType::kString) {
    std::vector<size_t> offsets;
    size_t at = 0;
    for (int64_t bytes : chunk) {
      offsets.push_back(at);
      at += static_cast<size_t>(bytes);
    }
    kernel->set_input_offsets_in_output(std::move(offsets));
  }
  return kernel;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSplit(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  std::vector<int64_t> split;
  if (HasInput(context, 1)) {
    ASSIGN_OR_RETURN(split, ReadInts(context, 1, "split"));
  } else if (AttrsOf(context).Has("split")) {
    ASSIGN_OR_RETURN(split, AttrsOf(context).GetInts("split", {}));
  } else {
    const int64_t parts = context.num_outputs;
    if (parts < 1) return InvalidArgument(context, "no outputs");
    const int64_t each = (in.shape[axis] + parts - 1) / parts;  // opset 18 rule when uneven
    for (int64_t i = 0, left = in.shape[axis]; i < parts; ++i, left -= each) {
      split.push_back(std::clamp<int64_t>(left, 0, each));
    }
  }
  int64_t total = 0;
  bool fits = true;
  for (int64_t s : split) fits = fits && runtime::CheckedAdd(total, s, &total);
  if (static_cast<int>(split.size()) != context.num_outputs || !fits || total != in.shape[axis]) {
    return InvalidArgument(context, "split ", runtime::ShapeToString(split), " into ",
                           context.num_outputs, " outputs does not fit axis ", axis, " of ",
                           runtime::ShapeToString(in.shape));
  }
  const size_t esize = runtime::DataTypeSize(in.dtype);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.shape[i];
  int64_t inner = esize;
  for (int64_t i = axis + 1; i < rank; ++i) inner *= in.shape[i];
  std::vector<TensorDesc> outputs;
  std::vector<int64_t> chunk;
  for (int64_t s : split) {
    Shape shape = in.shape;
    shape[axis] = s;
    outputs.push_back(Desc(in.dtype, shape));
    chunk.push_back(s * inner);
  }
  const int64_t row = in.shape[axis] * inner;
  return MakeKernel(context, std::move(outputs), [chunk, outer, row](const KernelArgs& args) {
    const uint8_t* in_ptr = static_cast<const uint8_t*>(args.inputs[0]);
    int64_t at = 0;
    for (size_t k = 0; k < chunk.size(); ++k) {
      uint8_t* o = static_cast<uint8_t*>(args.outputs[k]);
      const size_t bytes = static_cast<size_t>(chunk[k]);
      if (o != nullptr && bytes > 0) {
        for (int64_t j = 0; j < outer; ++j)
          std::memcpy(o + j * bytes, in_ptr + j * row + at, bytes);
      }
      at += chunk[k];
    }
    return absl::OkStatus();
  });
}

enum class PadMode { kConstant, kReflect, kEdge };

// Source index along one axis for output position `o` (-1: use the constant).
// o >= 0; `begin` is the model's pad, any int64 (o - begin overflows only upwards, for a pad
// near INT64_MIN: past the axis's end, reflected by residues taken first).
int64_t PadSource(PadMode mode, int64_t o, int64_t begin, int64_t dim) {
  int64_t i = 0;
  const bool beyond = __builtin_sub_overflow(o, begin, &i);
  if (!beyond && i >= 0 && i < dim) return i;
  if (mode == PadMode::kConstant || dim == 0) return -1;
  if (mode == PadMode::kEdge || dim == 1) return !beyond && i < 0 ? 0 : dim - 1;
  const int64_t period = 2 * (dim - 1);
  if (beyond) i = o % period - begin % period;  // in (-period, 2 period)
  i %= period;
  if (i < 0) i += period;
  return i < dim ? i : period - i;
}

// Pad's source index of each output index per axis: from a table, or computed.
struct PadSources {
  PadMode mode;
  std::vector<int64_t> begin;  // the pads (begin of each axis first)
  Shape dim;
  std::vector<std::vector<int64_t>> table;  // empty: compute
  int64_t operator()(size_t axis, int64_t o) const {
    return table.empty() ? PadSource(mode, o, begin[axis], dim[axis]) : table[axis][o];
  }
};
constexpr int64_t kMaxPadTable = int64_t{1} << 20;

absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePad(const PrepareContext& context) {
  const TensorDesc& in = context.inputs.empty() ? TensorDesc{} : context.inputs[0];
  const Attributes& attrs = AttrsOf(context);
  std::vector<int64_t> pads;
  double value_attr = 0;
  if (context.opset < 11) {
    RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
    ASSIGN_OR_RETURN(pads, attrs.GetInts("pads", {}));
    ASSIGN_OR_RETURN(float v, attrs.GetFloat("value", 0.0f));
    value_attr = v;
  } else {
    RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
    ASSIGN_OR_RETURN(pads, ReadInts(context, 1, "pads"));
    if (HasInput(context, 2) && context.inputs[2].dtype != in.dtype) {
      return InvalidArgument(context, "constant_value type ",
                             runtime::DataTypeName(context.inputs[2].dtype), " differs from ",
                             runtime::DataTypeName(in.dtype));
    }
  }
  ASSIGN_OR_RETURN(std::string mode_name, attrs.GetString("mode", "constant"));
  PadMode mode;
  if (mode_name == "constant") {
    mode = PadMode::kConstant;
  } else if (mode_name == "reflect") {
    mode = PadMode::kReflect;
  } else if (mode_name == "edge") {
    mode = PadMode::kEdge;
  } else {
    return Unimplemented(context, "mode \"", mode_name, "\" is not supported");
  }
  const size_t rank = in.shape.size();
  if (pads.size() != 2 * rank) {
    return InvalidArgument(context, "pads ", runtime::ShapeToString(pads), " do not match shape ",
                           runtime::ShapeToString(in.shape));
  }
  Shape out(rank);
  for (size_t a = 0; a < rank; ++a) {
    if (__builtin_add_overflow(in.shape[a], pads[a], &out[a]) ||
        __builtin_add_overflow(out[a], pads[a + rank], &out[a])) {
      return InvalidArgument(context, "pads ", runtime::ShapeToString(pads), " of shape ",
                             runtime::ShapeToString(in.shape), " overflow");
    }
    if (out[a] < 0) {
      return InvalidArgument(context, "pads ", runtime::ShapeToString(pads), " crop shape ",
                             runtime::ShapeToString(in.shape), " below zero");
    }
    if (mode == PadMode::kReflect && in.shape[a] == 0 && out[a] > 0) {
      return InvalidArgument(context, "cannot reflect-pad an empty axis ", a);
    }
  }
  const int64_t count = runtime::NumElements(out);
  if (count < 0) {
    return InvalidArgument(context, "output shape ", runtime::ShapeToString(out), " overflows");
  }
  // Where each output index of each axis reads: a table when the axes are small (the usual
  // case), else computed as it goes, so that pads from a model file cannot make Prepare
  // allocate in proportion to a huge axis before the plan's limits see the output.
  PadSources sources{mode, pads, in.shape, {}};
  int64_t table = 0;
  for (int64_t d : out) table += d;  // no overflow: each d <= count when count > 0
  if (count > 0 && table <= kMaxPadTable) {
    sources.table.resize(rank);
    for (size_t a = 0; a < rank; ++a) {
      sources.table[a].reserve(static_cast<size_t>(out[a]));
      for (int64_t o = 0; o < out[a]; ++o) {
        sources.table[a].push_back(PadSource(mode, o, pads[a], in.shape[a]));
      }
    }
  }
  const std::vector<int64_t> strides = ContiguousStrides(in.shape);
  const bool value_input = context.opset >= 11 && HasInput(context, 2);
  // Constant mode: each output row of the last axis is `lead` values, then `run` input values
  // from `first` on, then values to its end (copied as such, not looked up one by one).
  int64_t lead = 0, first = 0, run_length = 0;
  if (rank > 0) {
    // No subtraction can overflow: pads come from the model (a crop of INT64_MIN included).
    const int64_t width = out[rank - 1], pad = pads[rank - 1], dim = in.shape[rank - 1];
    lead = std::clamp<int64_t>(pad, 0, width);
    first = pad >= 0 ? 0 : pad > -dim ? -pad : dim;  // a crop of the whole row: no run
    run_length = std::max<int64_t>(0, std::min(width - lead, dim - first));
  }
  const bool rows_in_runs = mode == PadMode::kConstant;
  FunctionKernel::RunFn run;
  const bool ok = DispatchAnyType(in.dtype, [&]<typename T>() {
    const T fixed = static_cast<T>(value_attr);
    run = [sources, strides, out, count, fixed, value_input, rows_in_runs, lead, first,
           run_length](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      const T value = value_input ? *static_cast<const T*>(args.inputs[2]) : fixed;
      const size_t r = out.size();
      if (count == 0) return absl::OkStatus();
      if (r == 0) {
        y[0] = x[0];
        return absl::OkStatus();
      }
      absl::InlinedVector<int64_t, 8> index(r, 0);
      for (int64_t at = 0; at < count; at += out[r - 1]) {
        // Offset of the row in the input, or -1 when an outer axis is in constant padding.
        int64_t base = 0;
        for (size_t a = 0; a + 1 < r && base >= 0; ++a) {
          const int64_t s = sources(a, index[a]);
          base = s < 0 ? -1 : base + s * strides[a];
        }
        if (rows_in_runs) {
          T* row = y + at;
          if (base < 0) {
            std::fill(row, row + out[r - 1], value);
          } else {
            std::fill(row, row + lead, value);
            std::copy(x + base + first, x + base + first + run_length, row + lead);
            std::fill(row + lead + run_length, row + out[r - 1], value);
          }
        } else {
          for (int64_t j = 0; j < out[r - 1]; ++j) {
            const int64_t last = base < 0 ? -1 : sources(r - 1, j);
            y[at + j] = last < 0 ? value : x[base + last];
          }
        }
        for (size_t a = r - 1; a-- > 0;) {
          if (++index[a] < out[a]) break;
          index[a] = 0;
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(in.dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(in.dtype, out)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTrilu(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  const TensorDesc& in = context.inputs[0];
  if (in.shape.size() < 2) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(in.shape),
                           " has rank below 2");
  }
  ASSIGN_OR_RETURN(int64_t upper, AttrsOf(context).GetInt("upper", 1));
  const bool k_input = HasInput(context, 1);
  const int64_t rows = in.shape[in.shape.size() - 2];
  const int64_t cols = in.shape.back();
  const int64_t mats = rows * cols == 0 ? 0 : runtime::NumElements(in.shape) / (rows * cols);
  FunctionKernel::RunFn run;
  const bool ok = DispatchBySize(runtime::DataTypeSize(in.dtype), [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const int64_t k = k_input ? *static_cast<const int64_t*>(args.inputs[1]) : 0;
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t m = 0; m < mats; ++m) {
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t at = (m * rows + i) * cols;
          for (int64_t j = 0; j < cols; ++j) {
            const bool keep = upper != 0 ? j - i >= k : j - i <= k;
            y[at + j] = keep ? x[at + j] : T{0};
          }
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(in.dtype),
                         " is not supported");
  }
  if (k_input && context.inputs[1].dtype != DataType::kInt64) {
    return InvalidArgument(context, "k must be int64, got ",
                           runtime::DataTypeName(context.inputs[1].dtype));
  }
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, std::move(run));
}

// DepthToSpace / SpaceToDepth: a reshape to 6-D, a transpose, a reshape back.
template <bool kToSpace>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDepthSpace(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectRank(context, 0, 4));
  const Shape& x = context.inputs[0].shape;
  ASSIGN_OR_RETURN(int64_t b, AttrsOf(context).GetInt("blocksize", 0));
  ASSIGN_OR_RETURN(std::string mode, AttrsOf(context).GetString("mode", "DCR"));
  const int64_t n = x[0], c = x[1], hh = x[2], ww = x[3];
  const bool ok = b > 0 && (kToSpace ? c % (b * b) == 0 : hh % b == 0 && ww % b == 0) &&
                  (mode == "DCR" || mode == "CRD");
  if (!ok) {
    return InvalidArgument(context, "blocksize ", b, " and mode ", mode, " do not fit input ",
                           runtime::ShapeToString(x));
  }
  Shape six, out;
  std::vector<int64_t> perm;
  if (kToSpace) {
    const int64_t cb = c / (b * b);
    six = mode == "DCR" ? Shape{n, b, b, cb, hh, ww} : Shape{n, cb, b, b, hh, ww};
    perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 4, 1, 5, 2}
                         : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    out = {n, cb, hh * b, ww * b};
  } else {
    six = {n, c, hh / b, b, ww / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {n, c * b * b, hh / b, ww / b};
  }
  const std::vector<int64_t> strides = ContiguousStrides(six);
  Shape view;
  std::vector<int64_t> in_strides;
  for (int64_t p : perm) {
    view.push_back(six[p]);
    in_strides.push_back(strides[p]);
  }
  return StridedCopy(context, std::move(out), view, std::move(in_strides), 0);
}

// ReverseSequence: along `time_axis`, the first sequence_lens[b] elements of each batch entry
// b (on `batch_axis`) reversed, the rest copied. A length outside [0, time] fails Run.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReverseSequence(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank < 2) return InvalidArgument(context, "input must have rank >= 2");
  ASSIGN_OR_RETURN(int64_t batch_axis, AttrsOf(context).GetInt("batch_axis", 1));
  ASSIGN_OR_RETURN(int64_t time_axis, AttrsOf(context).GetInt("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return InvalidArgument(context,
                           "batch_axis and time_axis must be 0 and 1 in either order, got ",
                           batch_axis, " and ", time_axis);
  }
  const int64_t batch = in.shape[batch_axis];
  const int64_t time = in.shape[time_axis];
  if (context.inputs[1].shape != Shape{batch}) {
    return InvalidArgument(context, "sequence_lens must be [", batch, "], got ",
                           runtime::ShapeToString(context.inputs[1].shape));
  }
  int64_t inner = static_cast<int64_t>(runtime::DataTypeSize(in.dtype));
  for (int64_t i = 2; i < rank; ++i) inner *= in.shape[i];
  // Byte strides of one step along each of the two leading axes.
  const int64_t batch_stride = batch_axis == 0 ? time * inner : inner;
  const int64_t time_stride = time_axis == 0 ? batch * inner : inner;
  const bool is64 = context.inputs[1].dtype == DataType::kInt64;
  const std::string op = NodeLabel(context);
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, [=](const KernelArgs& args) {
    const uint8_t* x = static_cast<const uint8_t*>(args.inputs[0]);
    uint8_t* y = static_cast<uint8_t*>(args.outputs[0]);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = IndexAt(args.inputs[1], is64, b);
      if (len < 0 || len > time) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": sequence length ", len, " is outside [0, ", time, "]"));
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = IndexAt(args.inputs[1], is64, b);
      for (int64_t t = 0; t < time; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        std::memcpy(y + b * batch_stride + t * time_stride,
                    x + b * batch_stride + from * time_stride, static_cast<size_t>(inner));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<Shape> ConcatShape(const PrepareContext& context, size_t first_input, size_t count,
                                  int64_t axis_attr) {
  if (count == 0 || first_input + count > context.inputs.size()) {
    return InvalidArgument(context, "expected at least 1 input to concatenate");
  }
  const TensorDesc& first = context.inputs[first_input];
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  Shape out = first.shape;
  out[axis] = 0;
  for (size_t k = 0; k < count; ++k) {
    const TensorDesc& in = context.inputs[first_input + k];
    bool ok = in.dtype == first.dtype && in.shape.size() == first.shape.size();
    for (int64_t i = 0; ok && i < rank; ++i) ok = i == axis || in.shape[i] == first.shape[i];
    if (!ok) {
      return InvalidArgument(context, "input ", k, " ", runtime::DataTypeName(in.dtype),
                             runtime::ShapeToString(in.shape), " does not match input 0 ",
                             runtime::DataTypeName(first.dtype),
                             runtime::ShapeToString(first.shape), " off axis ", axis);
    }
    out[axis] += in.shape[axis];
  }
  return out;
}

absl::StatusOr<StridedView> TransposeView(const PrepareContext& context, const Shape& in,
                                          const std::vector<int64_t>& perm) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(perm.size()) != rank) {
    return InvalidArgument(context, "perm ", runtime::ShapeToString(perm),
                           " does not match input shape ", runtime::ShapeToString(in));
  }
  std::vector<bool> seen(rank, false);
  const std::vector<int64_t> strides = ContiguousStrides(in);
  StridedView view;
  view.shape.resize(rank);
  view.strides.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
    if (p < 0 || p >= rank || seen[p]) {
      return InvalidArgument(context, "perm ", runtime::ShapeToString(perm),
                             " is not a permutation of rank ", rank);
    }
    seen[p] = true;
    view.shape[i] = in[p];
    view.strides[i] = strides[p];
  }
  return view;
}

absl::StatusOr<StridedView> SliceView(const PrepareContext& context, const Shape& in,
                                      const std::vector<int64_t>& starts,
                                      const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                      std::vector<int64_t> steps) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return InvalidArgument(context, "starts ", runtime::ShapeToString(starts), ", ends ",
                           runtime::ShapeToString(ends), ", axes ", runtime::ShapeToString(axes),
                           " and steps ", runtime::ShapeToString(steps), " differ in length");
  }
  const std::vector<int64_t> strides = ContiguousStrides(in);
  Shape out = in;
  std::vector<int64_t> in_strides = strides;
  std::vector<bool> seen(rank, false);
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axes[i], rank));
    if (seen[axis]) return InvalidArgument(context, "axis ", axes[i], " is repeated");
    seen[axis] = true;
    const int64_t dim = in[axis];
    const int64_t step = steps[i];
    if (step == 0) return InvalidArgument(context, "step 0 on axis ", axes[i]);
    // ONNX's rules, without overflow: starts / ends / steps may be any int64 (INT64_MIN and
    // INT64_MAX mean "from the far end"), and an empty axis (dim 0) has no valid index.
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t count;
    // Clamped first, so that the differences below stay within [0, dim]; a step of any size
    // (INT64_MIN included) then cannot overflow.
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const int64_t back =
          step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
      count = start > end ? (start - end - 1) / back + 1 : 0;
    }
    out[axis] = count;
    // With two or more elements |step| < dim, so the stride stays within the tensor.
    in_strides[axis] = count > 1 ? strides[axis] * step : 0;
    if (count > 0) offset += start * strides[axis];
  }
  return StridedView{std::move(out), std::move(in_strides), offset};
}

absl::Status RegisterLayoutKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Transpose", &PrepareTranspose));
  RETURN_IF_ERROR(registry->Register("Slice", &PrepareSlice));
  RETURN_IF_ERROR(registry->Register("Expand", &PrepareExpand));
  RETURN_IF_ERROR(registry->Register("Tile", &PrepareTile));
  RETURN_IF_ERROR(registry->Register("Concat", &PrepareConcat));
  RETURN_IF_ERROR(registry->Register("Split", &PrepareSplit));
  RETURN_IF_ERROR(registry->Register("Pad", &PreparePad));
  RETURN_IF_ERROR(registry->Register("Trilu", &PrepareTrilu));
  RETURN_IF_ERROR(registry->Register("DepthToSpace", &PrepareDepthSpace<true>));
  RETURN_IF_ERROR(registry->Register("SpaceToDepth", &PrepareDepthSpace<false>));
  RETURN_IF_ERROR(registry->Register("ReverseSequence", &PrepareReverseSequence));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
