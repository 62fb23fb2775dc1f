// MatMulInteger and QLinearMatMul (MatMul's shapes: 1-D operands, broadcast batch dims) and
// ConvInteger and QLinearConv (Conv's attributes: 1-D/2-D/3-D, pads or auto_pad, strides,
// dilations, groups) on uint8 / int8 operands, as direct loops. Zero points are subtracted
// before multiplying (so padding adds nothing); products accumulate in int32, wrapping as ONNX
// allows ("accumulation may overflow if and only if in 32 bits"). The integer ops output the
// accumulator. The QLinear ops scale it (plus QLinearConv's int32 bias) by
// a_scale * b_scale / y_scale, taken in float32 as ONNX's reference does, multiply in double,
// round half to even, add y's zero point and saturate to y_zero_point's type.
// Zero points and scales: one per tensor, or one per row of A / column of B (the MatMul ops),
// one per output channel of W (the Conv ops); x's and y's are one per tensor.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantize_util.h"
#include "kernels/cpu/quantized_ops.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

using runtime::ShapeToString;

// Calls fn.template operator()<T>() with int8_t or uint8_t (the caller checked the type).
template <typename F>
void DispatchInt8(DataType dtype, F&& fn) {
  if (dtype == DataType::kInt8) {
    fn.template operator()<int8_t>();
  } else {
    fn.template operator()<uint8_t>();
  }
}

// Element `i` of a uint8 or int8 buffer.
int32_t Int8At(const void* data, bool is_signed, int64_t i) {
  return is_signed ? static_cast<const int8_t*>(data)[i] : static_cast<const uint8_t*>(data)[i];
}

// y[o] = the quantization of `value` with `zero`, in y's type (int8 or uint8).
void StoreQuantized(void* y, bool is_signed, int64_t o, double value, int32_t zero) {
  if (is_signed) {
    static_cast<int8_t*>(y)[o] = Saturate<int8_t>(value, zero);
  } else {
    static_cast<uint8_t*>(y)[o] = Saturate<uint8_t>(value, zero);
  }
}

// acc += x * w for two zero-point-adjusted 8-bit values (|x|, |w| <= 255: the product fits
// int32). The accumulator is an int32 held as uint32, so that it wraps modulo 2^32 without
// signed overflow; the caller reads it back as int32.
inline void MultiplyAdd(uint32_t* acc, int32_t x, int32_t w) {
  *acc += static_cast<uint32_t>(x * w);
}

// Error unless inputs 0 .. names.size() - 1 are present (`names` name them).
absl::Status ExpectPresent(const PrepareContext& context,
                           std::initializer_list<absl::string_view> names) {
  size_t i = 0;
  for (absl::string_view name : names) {
    if (!HasInput(context, i)) {
      return InvalidArgument(context, "input ", i, " (", name, ") is missing");
    }
    ++i;
  }
  return absl::OkStatus();
}

absl::Status ExpectInt8(const PrepareContext& context, size_t index) {
  return ExpectType(context, index, {DataType::kUInt8, DataType::kInt8});
}

// Error unless input `index` (`name`) has one element (a scalar, or [1]).
absl::Status ExpectOneElement(const PrepareContext& context, size_t index, absl::string_view name) {
  const Shape& shape = context.inputs[index].shape;
  if (runtime::NumElements(shape) == 1) return absl::OkStatus();
  return InvalidArgument(context, name, " has shape ", ShapeToString(shape),
                         ", expected a scalar (one per tensor)");
}

absl::Status CheckOutputShape(const PrepareContext& context, const Shape& y) {
  if (runtime::CheckedElementCount(y).has_value()) return absl::OkStatus();
  return InvalidArgument(context, "output shape ", ShapeToString(y), " overflows");
}

// Where the zero point or scale of a row of A (a column of B, an output channel of W) lies:
// element batch * batch_stride + index * index_stride, for matrix number `batch` of the operand
// (counted in its own batch dims; 0 for W) and row (column, channel) `index`.
struct ParamLayout {
  int64_t batch_stride = 0;
  int64_t index_stride = 0;
  int64_t At(int64_t batch, int64_t index) const {
    return batch * batch_stride + index * index_stride;
  }
};

// An 8-bit operand as Run sees it: its data and its zero point (null for 0).
template <typename T>
struct Operand {
  const T* data = nullptr;
  const T* zero = nullptr;
  ParamLayout zero_layout;
  int32_t ZeroAt(int64_t batch, int64_t index) const {
    return zero != nullptr ? static_cast<int32_t>(zero[zero_layout.At(batch, index)]) : 0;
  }
};

// Run's input `data` as an operand of type T, with input `zero` as its zero point when
// `has_zero`.
template <typename T>
Operand<T> OperandOf(const KernelArgs& args, size_t data, size_t zero, bool has_zero,
                     ParamLayout layout) {
  return Operand<T>{static_cast<const T*>(args.inputs[data]),
                    has_zero ? static_cast<const T*>(args.inputs[zero]) : nullptr, layout};
}

// ---- MatMulInteger, QLinearMatMul ----

// MatMul's shapes: A [..., M, K] times B [..., K, N]; a 1-D A [K] is [1, K] and a 1-D B [K] is
// [K, 1] (the added axis is not in the output); the batch dims broadcast.
struct MatMulPlan {
  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 0;
  Shape out;
  BroadcastPlan batches;  // over the output's batch dims; operands A and B, counted in matrices
};

absl::StatusOr<MatMulPlan> PlanMatMul(const PrepareContext& context, size_t a_index,
                                      size_t b_index) {
  const Shape& a_shape = context.inputs[a_index].shape;
  const Shape& b_shape = context.inputs[b_index].shape;
  if (a_shape.empty() || b_shape.empty()) {
    return InvalidArgument(context, "operands ", ShapeToString(a_shape), " and ",
                           ShapeToString(b_shape), " must have rank >= 1");
  }
  Shape a = a_shape;
  Shape b = b_shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatMulPlan plan;
  plan.m = a[a.size() - 2];
  plan.k = a.back();
  plan.n = b.back();
  if (b[b.size() - 2] != plan.k) {
    return InvalidArgument(context, "operands ", ShapeToString(a_shape), " and ",
                           ShapeToString(b_shape), " do not multiply");
  }
  const Shape a_batch(a.begin(), a.end() - 2);
  const Shape b_batch(b.begin(), b.end() - 2);
  absl::StatusOr<Shape> batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return InvalidArgument(context, "batch dims of ", ShapeToString(a_shape), " and ",
                           ShapeToString(b_shape), " do not broadcast");
  }
  plan.out = *batch;
  if (a_shape.size() > 1) plan.out.push_back(plan.m);
  if (b_shape.size() > 1) plan.out.push_back(plan.n);
  RETURN_IF_ERROR(CheckOutputShape(context, plan.out));
  plan.batches = MakeBroadcastPlan(*batch, {a_batch, b_batch});
  return plan;
}

// The layout of input `index` (`name`), a zero point or scale of input `operand` (`operand_name`),
// which is A when `rows`, else B. One element: one for the tensor. For an operand of rank >= 2,
// also [M] ([N]): one per row of A (column of B), the same for every matrix; or the operand's
// shape with K replaced by 1: one per row (column) of each matrix.
absl::StatusOr<ParamLayout> MatMulParam(const PrepareContext& context, size_t index,
                                        absl::string_view name, size_t operand,
                                        absl::string_view operand_name, bool rows) {
  const Shape& param = context.inputs[index].shape;
  if (runtime::NumElements(param) == 1) return ParamLayout{};
  const Shape& x = context.inputs[operand].shape;
  const size_t rank = x.size();
  if (rank < 2) {
    return InvalidArgument(context, name, " has shape ", ShapeToString(param),
                           ", expected a scalar for the 1-D ", operand_name, " ", ShapeToString(x));
  }
  const int64_t count = rows ? x[rank - 2] : x[rank - 1];
  if (param == Shape{count}) return ParamLayout{0, 1};
  Shape per_matrix = x;
  per_matrix[rows ? rank - 1 : rank - 2] = 1;
  if (param == per_matrix) return ParamLayout{count, 1};
  return InvalidArgument(context, name, " has shape ", ShapeToString(param),
                         ", expected a scalar, [", count, "] or ", ShapeToString(per_matrix),
                         " for ", operand_name, " ", ShapeToString(x));
}

// Calls emit(y_index, acc, a_batch, row, b_batch, column) with the int32 accumulator of every
// output element, a_batch and b_batch being the operands' matrix numbers.
template <typename TA, typename TB, typename Emit>
void MatMulLoop(const MatMulPlan& p, const Operand<TA>& a, const Operand<TB>& b, Emit&& emit) {
  const int64_t m = p.m;
  const int64_t n = p.n;
  const int64_t k = p.k;
  const int64_t a_step = p.batches.strides[0].back();
  const int64_t b_step = p.batches.strides[1].back();
  ForEachRow(p.batches, [&](int64_t at, const int64_t* offsets, int64_t length) {
    for (int64_t t = 0; t < length; ++t) {
      const int64_t a_batch = offsets[0] + t * a_step;
      const int64_t b_batch = offsets[1] + t * b_step;
      const TA* am = a.data + a_batch * m * k;
      const TB* bm = b.data + b_batch * k * n;
      const int64_t y = (at + t) * m * n;
      for (int64_t i = 0; i < m; ++i) {
        const int32_t za = a.ZeroAt(a_batch, i);
        for (int64_t j = 0; j < n; ++j) {
          const int32_t zb = b.ZeroAt(b_batch, j);
          uint32_t acc = 0;
          for (int64_t r = 0; r < k; ++r) MultiplyAdd(&acc, am[i * k + r] - za, bm[r * n + j] - zb);
          emit(y + i * n + j, static_cast<int32_t>(acc), a_batch, i, b_batch, j);
        }
      }
    }
  });
}

// MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> int32.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMatMulInteger(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  RETURN_IF_ERROR(ExpectInt8(context, 0));
  RETURN_IF_ERROR(ExpectInt8(context, 1));
  ASSIGN_OR_RETURN(MatMulPlan plan, PlanMatMul(context, 0, 1));
  const bool has_a_zero = HasInput(context, 2);
  const bool has_b_zero = HasInput(context, 3);
  ParamLayout a_zero;
  ParamLayout b_zero;
  if (has_a_zero) {
    RETURN_IF_ERROR(ExpectZeroPointType(context, 2, "a_zero_point", 0, "A"));
    ASSIGN_OR_RETURN(a_zero, MatMulParam(context, 2, "a_zero_point", 0, "A", /*rows=*/true));
  }
  if (has_b_zero) {
    RETURN_IF_ERROR(ExpectZeroPointType(context, 3, "b_zero_point", 1, "B"));
    ASSIGN_OR_RETURN(b_zero, MatMulParam(context, 3, "b_zero_point", 1, "B", /*rows=*/false));
  }
  FunctionKernel::RunFn run;
  DispatchInt8(context.inputs[0].dtype, [&]<typename TA>() {
    DispatchInt8(context.inputs[1].dtype, [&]<typename TB>() {
      run = [=](const KernelArgs& args) {
        int32_t* y = static_cast<int32_t*>(args.outputs[0]);
        MatMulLoop(plan, OperandOf<TA>(args, 0, 2, has_a_zero, a_zero),
                   OperandOf<TB>(args, 1, 3, has_b_zero, b_zero),
                   [y](int64_t o, int32_t acc, int64_t, int64_t, int64_t, int64_t) { y[o] = acc; });
        return absl::OkStatus();
      };
    });
  });
  return MakeKernel(context, {Desc(DataType::kInt32, plan.out)}, std::move(run));
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
// the direct loop, or only oneDNN (`onednn`), or oneDNN where it applies (`fallback`).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearMatMulWith(
    const PrepareContext& context, bool onednn, bool fallback) {
  RETURN_IF_ERROR(ExpectInputCount(context, 8, 8));
  RETURN_IF_ERROR(ExpectPresent(context, {"a", "a_scale", "a_zero_point", "b", "b_scale",
                                          "b_zero_point", "y_scale", "y_zero_point"}));
  for (size_t i : {0, 3, 7}) RETURN_IF_ERROR(ExpectInt8(context, i));
  for (size_t i : {1, 4, 6}) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectZeroPointType(context, 2, "a_zero_point", 0, "a"));
  RETURN_IF_ERROR(ExpectZeroPointType(context, 5, "b_zero_point", 3, "b"));
  ASSIGN_OR_RETURN(MatMulPlan plan, PlanMatMul(context, 0, 3));
  ASSIGN_OR_RETURN(ParamLayout a_scale, MatMulParam(context, 1, "a_scale", 0, "a", true));
  ASSIGN_OR_RETURN(ParamLayout a_zero, MatMulParam(context, 2, "a_zero_point", 0, "a", true));
  ASSIGN_OR_RETURN(ParamLayout b_scale, MatMulParam(context, 4, "b_scale", 3, "b", false));
  ASSIGN_OR_RETURN(ParamLayout b_zero, MatMulParam(context, 5, "b_zero_point", 3, "b", false));
  RETURN_IF_ERROR(ExpectOneElement(context, 6, "y_scale"));
  RETURN_IF_ERROR(ExpectOneElement(context, 7, "y_zero_point"));
  if (onednn) {
    auto kernel = PrepareOnednnQLinearMatMul(context, plan.out);
    if (kernel.ok() || !absl::IsUnimplemented(kernel.status()) || !fallback) return kernel;
  }
  const DataType y_type = context.inputs[7].dtype;
  const bool y_signed = y_type == DataType::kInt8;
  FunctionKernel::RunFn run;
  DispatchInt8(context.inputs[0].dtype, [&]<typename TA>() {
    DispatchInt8(context.inputs[3].dtype, [&]<typename TB>() {
      run = [=](const KernelArgs& args) {
        const float* a_scales = static_cast<const float*>(args.inputs[1]);
        const float* b_scales = static_cast<const float*>(args.inputs[4]);
        const float y_scale = *static_cast<const float*>(args.inputs[6]);
        const int32_t y_zero = Int8At(args.inputs[7], y_signed, 0);
        void* y = args.outputs[0];
        MatMulLoop(
            plan, OperandOf<TA>(args, 0, 2, true, a_zero), OperandOf<TB>(args, 3, 5, true, b_zero),
            [&](int64_t o, int32_t acc, int64_t a_batch, int64_t i, int64_t b_batch, int64_t j) {
              const float multiplier =
                  a_scales[a_scale.At(a_batch, i)] * b_scales[b_scale.At(b_batch, j)] / y_scale;
              StoreQuantized(y, y_signed, o, static_cast<double>(acc) * multiplier, y_zero);
            });
        return absl::OkStatus();
      };
    });
  });
  return MakeKernel(context, {Desc(y_type, plan.out)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearMatMul(
    const PrepareContext& context) {
  return PrepareQLinearMatMulWith(context, /*onednn=*/true, /*fallback=*/true);
}

// ---- ConvInteger, QLinearConv ----

// Conv's geometry: X [N, C, spatial...], W [M, C / group, kernel...], Y [N, M, output...].
struct ConvPlan {
  int64_t batch = 0;
  int64_t group = 1;
  int64_t in_channels = 0;   // per group
  int64_t out_channels = 0;  // per group
  Window window;             // padded to three spatial axes (To3d)
  Window spatial;            // over X's own spatial axes
  Shape out;
};

absl::StatusOr<ConvPlan> PlanConv(const PrepareContext& context, size_t x_index, size_t w_index) {
  const Shape& x = context.inputs[x_index].shape;
  const Shape& w = context.inputs[w_index].shape;
  ASSIGN_OR_RETURN(int64_t group, AttrsOf(context).GetInt("group", 1));
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || group < 1) {
    return InvalidArgument(context, "input ", ShapeToString(x), " and weights ", ShapeToString(w),
                           " (group ", group, ") are not a 1-D, 2-D or 3-D convolution");
  }
  if (x[1] % group != 0 || x[1] / group != w[1] || w[0] % group != 0) {
    return InvalidArgument(context, "weights ", ShapeToString(w), " do not match input ",
                           ShapeToString(x), " with group ", group);
  }
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(Window window,
                   ForwardWindow(context, spatial, std::vector<int64_t>(w.begin() + 2, w.end()),
                                 /*ceil_mode=*/false));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (window.kernel[i] != w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", ShapeToString(window.kernel),
                             " does not match weights ", ShapeToString(w));
    }
  }
  ConvPlan plan;
  plan.out = {x[0], w[0]};
  plan.out.insert(plan.out.end(), window.output.begin(), window.output.end());
  RETURN_IF_ERROR(CheckOutputShape(context, plan.out));
  plan.batch = x[0];
  plan.group = group;
  plan.in_channels = w[1];
  plan.out_channels = w[0] / group;
  plan.spatial = window;
  plan.window = To3d(std::move(window));
  return plan;
}

// Input `index` (`name`), a zero point or scale of W: one element for the tensor, or [M], one
// per output channel.
absl::StatusOr<ParamLayout> ChannelParam(const PrepareContext& context, size_t index,
                                         absl::string_view name, int64_t channels) {
  const Shape& param = context.inputs[index].shape;
  if (runtime::NumElements(param) == 1) return ParamLayout{};
  if (param == Shape{channels}) return ParamLayout{0, 1};
  return InvalidArgument(context, name, " has shape ", ShapeToString(param),
                         ", expected a scalar or [", channels, "] (one per output channel)");
}

// Calls emit(y_index, acc, channel) with the int32 accumulator of every output element; taps
// that fall in the padding are skipped (x - x_zero is 0 there).
template <typename TX, typename TW, typename Emit>
void ConvLoop(const ConvPlan& p, const TX* x, int32_t x_zero, const Operand<TW>& w, Emit&& emit) {
  const Window& g = p.window;
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t channels = p.group * p.out_channels;
  int64_t o = 0;
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t oc = 0; oc < channels; ++oc) {
      const int64_t gi = oc / p.out_channels;
      const TX* xg = x + (n * p.group + gi) * p.in_channels * in_size;
      const TW* wo = w.data + oc * p.in_channels * taps;
      const int32_t zw = w.ZeroAt(0, oc);
      for (int64_t od = 0; od < g.output[0]; ++od) {
        for (int64_t oh = 0; oh < g.output[1]; ++oh) {
          for (int64_t ow = 0; ow < g.output[2]; ++ow) {
            uint32_t acc = 0;
            for (int64_t c = 0; c < p.in_channels; ++c) {
              const TX* xc = xg + c * in_size;
              const TW* wc = wo + c * taps;
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t id = od * g.strides[0] - g.pads_begin[0] + kd * g.dilations[0];
                if (id < 0 || id >= g.input[0]) continue;
                for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                  const int64_t ih = oh * g.strides[1] - g.pads_begin[1] + kh * g.dilations[1];
                  if (ih < 0 || ih >= g.input[1]) continue;
                  const TX* xrow = xc + (id * g.input[1] + ih) * g.input[2];
                  const TW* wrow = wc + (kd * g.kernel[1] + kh) * g.kernel[2];
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const int64_t iw = ow * g.strides[2] - g.pads_begin[2] + kw * g.dilations[2];
                    if (iw < 0 || iw >= g.input[2]) continue;
                    MultiplyAdd(&acc, xrow[iw] - x_zero, wrow[kw] - zw);
                  }
                }
              }
            }
            emit(o++, static_cast<int32_t>(acc), oc);
          }
        }
      }
    }
  }
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?) -> int32.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvInteger(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  RETURN_IF_ERROR(ExpectInt8(context, 0));
  RETURN_IF_ERROR(ExpectInt8(context, 1));
  ASSIGN_OR_RETURN(ConvPlan plan, PlanConv(context, 0, 1));
  const bool has_x_zero = HasInput(context, 2);
  const bool has_w_zero = HasInput(context, 3);
  if (has_x_zero) {
    RETURN_IF_ERROR(ExpectZeroPointType(context, 2, "x_zero_point", 0, "x"));
    RETURN_IF_ERROR(ExpectOneElement(context, 2, "x_zero_point"));
  }
  ParamLayout w_zero;
  if (has_w_zero) {
    RETURN_IF_ERROR(ExpectZeroPointType(context, 3, "w_zero_point", 1, "w"));
    ASSIGN_OR_RETURN(w_zero, ChannelParam(context, 3, "w_zero_point", plan.out[1]));
  }
  const bool x_signed = context.inputs[0].dtype == DataType::kInt8;
  FunctionKernel::RunFn run;
  DispatchInt8(context.inputs[0].dtype, [&]<typename TX>() {
    DispatchInt8(context.inputs[1].dtype, [&]<typename TW>() {
      run = [=](const KernelArgs& args) {
        const int32_t x_zero = has_x_zero ? Int8At(args.inputs[2], x_signed, 0) : 0;
        int32_t* y = static_cast<int32_t*>(args.outputs[0]);
        ConvLoop(plan, static_cast<const TX*>(args.inputs[0]), x_zero,
                 OperandOf<TW>(args, 1, 3, has_w_zero, w_zero),
                 [y](int64_t o, int32_t acc, int64_t) { y[o] = acc; });
        return absl::OkStatus();
      };
    });
  });
  return MakeKernel(context, {Desc(DataType::kInt32, plan.out)}, std::move(run));
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?):
// the checks, and the plan of the direct loop.
absl::StatusOr<ConvPlan> CheckQLinearConv(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 8, 9));
  RETURN_IF_ERROR(ExpectPresent(context, {"x", "x_scale", "x_zero_point", "w", "w_scale",
                                          "w_zero_point", "y_scale", "y_zero_point"}));
  for (size_t i : {0, 3, 7}) RETURN_IF_ERROR(ExpectInt8(context, i));
  for (size_t i : {1, 4, 6}) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectZeroPointType(context, 2, "x_zero_point", 0, "x"));
  RETURN_IF_ERROR(ExpectZeroPointType(context, 5, "w_zero_point", 3, "w"));
  ASSIGN_OR_RETURN(ConvPlan plan, PlanConv(context, 0, 3));
  const int64_t channels = plan.out[1];
  RETURN_IF_ERROR(ExpectOneElement(context, 1, "x_scale"));
  RETURN_IF_ERROR(ExpectOneElement(context, 2, "x_zero_point"));
  RETURN_IF_ERROR(ChannelParam(context, 4, "w_scale", channels).status());
  RETURN_IF_ERROR(ChannelParam(context, 5, "w_zero_point", channels).status());
  RETURN_IF_ERROR(ExpectOneElement(context, 6, "y_scale"));
  RETURN_IF_ERROR(ExpectOneElement(context, 7, "y_zero_point"));
  if (HasInput(context, 8)) {
    RETURN_IF_ERROR(ExpectType(context, 8, {DataType::kInt32}));
    if (context.inputs[8].shape != Shape{channels}) {
      return InvalidArgument(context, "bias B has shape ", ShapeToString(context.inputs[8].shape),
                             ", expected [", channels, "] (one per output channel)");
    }
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> DirectQLinearConv(const PrepareContext& context,
                                                                  const ConvPlan& plan) {
  const bool has_bias = HasInput(context, 8);
  ParamLayout w_scale, w_zero;
  if (runtime::NumElements(context.inputs[4].shape) != 1) w_scale = ParamLayout{0, 1};
  if (runtime::NumElements(context.inputs[5].shape) != 1) w_zero = ParamLayout{0, 1};
  const bool x_signed = context.inputs[0].dtype == DataType::kInt8;
  const DataType y_type = context.inputs[7].dtype;
  const bool y_signed = y_type == DataType::kInt8;
  FunctionKernel::RunFn run;
  DispatchInt8(context.inputs[0].dtype, [&]<typename TX>() {
    DispatchInt8(context.inputs[3].dtype, [&]<typename TW>() {
      run = [=](const KernelArgs& args) {
        const float x_scale = *static_cast<const float*>(args.inputs[1]);
        const int32_t x_zero = Int8At(args.inputs[2], x_signed, 0);
        const float* w_scales = static_cast<const float*>(args.inputs[4]);
        const float y_scale = *static_cast<const float*>(args.inputs[6]);
        const int32_t y_zero = Int8At(args.inputs[7], y_signed, 0);
        const int32_t* bias = has_bias ? static_cast<const int32_t*>(args.inputs[8]) : nullptr;
        void* y = args.outputs[0];
        ConvLoop(plan, static_cast<const TX*>(args.inputs[0]), x_zero,
                 OperandOf<TW>(args, 3, 5, true, w_zero), [&](int64_t o, int32_t acc, int64_t oc) {
                   // The bias joins the int32 accumulator, wrapping like it.
                   const uint32_t sum = static_cast<uint32_t>(acc) +
                                        static_cast<uint32_t>(bias != nullptr ? bias[oc] : 0);
                   const float multiplier = x_scale * w_scales[w_scale.At(0, oc)] / y_scale;
                   StoreQuantized(y, y_signed, o,
                                  static_cast<double>(static_cast<int32_t>(sum)) * multiplier,
                                  y_zero);
                 });
        return absl::OkStatus();
      };
    });
  });
  return MakeKernel(context, {Desc(y_type, plan.out)}, std::move(run));
}

QLinearConvGeometry GeometryOf(const ConvPlan& plan) {
  return QLinearConvGeometry{plan.group, plan.spatial, plan.out};
}

// oneDNN where it applies (see quantized_ops.h), else the direct loop.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearConv(const PrepareContext& context) {
  ASSIGN_OR_RETURN(ConvPlan plan, CheckQLinearConv(context));
  auto onednn = PrepareOnednnQLinearConv(context, GeometryOf(plan));
  if (onednn.ok() || !absl::IsUnimplemented(onednn.status())) return onednn;
  return DirectQLinearConv(context, plan);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearConvDirect(
    const PrepareContext& context) {
  ASSIGN_OR_RETURN(ConvPlan plan, CheckQLinearConv(context));
  return DirectQLinearConv(context, plan);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearConvOnednn(
    const PrepareContext& context) {
  ASSIGN_OR_RETURN(ConvPlan plan, CheckQLinearConv(context));
  return PrepareOnednnQLinearConv(context, GeometryOf(plan));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearMatMulDirect(
    const PrepareContext& context) {
  return PrepareQLinearMatMulWith(context, /*onednn=*/false, /*fallback=*/true);
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareQLinearMatMulOnednn(
    const PrepareContext& context) {
  return PrepareQLinearMatMulWith(context, /*onednn=*/true, /*fallback=*/false);
}

absl::Status RegisterQuantizedOpKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("MatMulInteger", &PrepareMatMulInteger));
  RETURN_IF_ERROR(registry->Register("QLinearMatMul", &PrepareQLinearMatMul));
  RETURN_IF_ERROR(registry->Register("ConvInteger", &PrepareConvInteger));
  RETURN_IF_ERROR(registry->Register("QLinearConv", &PrepareQLinearConv));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
