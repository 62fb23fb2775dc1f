// QLinearConv and QLinearMatMul on oneDNN's int8 convolution and matmul primitives, created at
// Prepare: the int8 weights are reordered once into the primitive's layout (shared through
// PackWeights), the requantization is the primitive's output scales (one per output channel or
// column) and zero points. X and Y stay plain between steps; a convolution's are reordered into
// and out of the primitive's preferred layout (channels-last for int8) in the workspace, as the
// float Conv does.
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/quantized_ops.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

size_t AlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

memory::data_type EightBitType(DataType type) {
  return type == DataType::kInt8 ? memory::data_type::s8 : memory::data_type::u8;
}

// Element `i` of a uint8 or int8 buffer.
int32_t EightBitAt(const void* data, DataType type, size_t i) {
  return type == DataType::kInt8 ? static_cast<const int8_t*>(data)[i]
                                 : static_cast<const uint8_t*>(data)[i];
}

// An int8 oneDNN primitive (convolution or matmul) with X reordered into its src layout and Y
// out of its dst layout when they are not plain.
class OnednnInt8Kernel final : public PreparedKernel {
 public:
  struct Parts {
    dnnl::primitive primitive;
    memory::desc src_md, dst_md, scratch_md;  // the primitive's
    std::shared_ptr<const memory> weights;    // in the primitive's layout
    memory::desc src_plain, dst_plain, bias_md;
    bool has_bias = false;
    size_t bias_input = 0;
    // Zero points passed at Run (when oneDNN wants them as runtime arguments), else empty.
    std::vector<int32_t> src_zero, dst_zero;
    int threads = 1;
    size_t src_at = 0, dst_at = 0, total = 0;  // workspace: scratchpad, X, Y (when reordered)
  };

  OnednnInt8Kernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs,
                   Parts parts)
      : op_(op), label_(std::move(label)), outputs_(std::move(outputs)), p_(std::move(parts)) {
    const dnnl::engine& engine = CpuEngine();
    if (p_.src_md != p_.src_plain) {
      src_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, p_.src_plain, engine, p_.src_md));
    }
    if (p_.dst_md != p_.dst_plain) {
      dst_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, p_.dst_md, engine, p_.dst_plain));
    }
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return p_.total; }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    try {
      ReusedMemories::Run bound(memories_);
      auto* ws = static_cast<uint8_t*>(args.workspace);
      const memory& src_plain = bound.Bind(0, p_.src_plain, args.inputs[0]);
      const memory& dst_plain = bound.Bind(1, p_.dst_plain, args.outputs[0]);
      const memory* src = &src_plain;
      if (src_reorder_) {
        src = &bound.Bind(2, p_.src_md, ws + p_.src_at);
        ExecuteReorder(src_reorder_, src_plain, *src);
      }
      const memory& dst = dst_reorder_ ? bound.Bind(3, p_.dst_md, ws + p_.dst_at) : dst_plain;
      dnnl_exec_arg_t exec[7] = {{DNNL_ARG_SRC, src->get()},
                                 {DNNL_ARG_WEIGHTS, p_.weights->get()},
                                 {DNNL_ARG_DST, dst.get()}};
      int count = 3;
      if (p_.has_bias) {
        exec[count++] = {DNNL_ARG_BIAS,
                         bound.Bind(4, p_.bias_md, args.inputs[p_.bias_input]).get()};
      }
      const memory::desc zero_md({1}, memory::data_type::s32, memory::format_tag::a);
      if (!p_.src_zero.empty()) {
        exec[count++] = {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                         bound.Bind(5, zero_md, p_.src_zero.data()).get()};
      }
      if (!p_.dst_zero.empty()) {
        exec[count++] = {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST,
                         bound.Bind(6, zero_md, p_.dst_zero.data()).get()};
      }
      if (p_.scratch_md.get_size() > 0) {
        exec[count++] = {DNNL_ARG_SCRATCHPAD, bound.Bind(7, p_.scratch_md, ws).get()};
      }
      Execute(p_.primitive, exec, count);
      if (dst_reorder_) ExecuteReorder(dst_reorder_, dst, dst_plain);
      ThreadStream().wait();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(label_, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::string label_;
  std::vector<TensorDesc> outputs_;
  Parts p_;
  dnnl::reorder src_reorder_;  // plain X → the primitive's src layout (or empty)
  dnnl::reorder dst_reorder_;  // the primitive's dst layout → plain Y (or empty)
  ReusedMemories memories_;    // Run's: X, Y, src, dst, bias, zero points, scratchpad
};

// The attributes of an int8 primitive: user scratchpad, output scales (one, or one per index of
// dst axis `channel_axis`), x's and y's zero points as constants or, with `runtime`, as Run
// arguments.
dnnl::primitive_attr Int8Attr(const std::vector<float>& scales, int channel_axis, int32_t x_zero,
                              int32_t y_zero, bool runtime) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(scales.size() == 1 ? 0 : 1 << channel_axis, scales);
  const int32_t later = DNNL_RUNTIME_S32_VAL;
  if (x_zero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {runtime ? later : x_zero});
  if (y_zero != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {runtime ? later : y_zero});
  return attr;
}

}  // namespace

bool OnednnInt8IsExact() {
  static const bool exact = [] {
    const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
    const int avx512_vnni = static_cast<int>(dnnl::cpu_isa::avx512_core_vnni);
    const int avx2_vnni = static_cast<int>(dnnl::cpu_isa::avx2_vnni);
    return (isa & avx512_vnni) == avx512_vnni || (isa & avx2_vnni) == avx2_vnni;
  }();
  return exact;
}

namespace {

// Tries `make(runtime_zero_points)` with constant zero points, then runtime ones; records in
// `parts` the zero points Run must pass. nullopt when neither gives a primitive.
template <typename Pd, typename Make>
std::optional<Pd> MakeInt8Pd(Make&& make, int32_t x_zero, int32_t y_zero,
                             OnednnInt8Kernel::Parts* parts) {
  std::optional<Pd> pd = make(false);
  if (!pd.has_value() && (x_zero != 0 || y_zero != 0)) {
    pd = make(true);
    if (pd.has_value()) {
      if (x_zero != 0) parts->src_zero = {x_zero};
      if (y_zero != 0) parts->dst_zero = {y_zero};
    }
  }
  return pd;
}

// The workspace offsets of `parts` (scratchpad, reordered X, reordered Y).
void LayOutWorkspace(OnednnInt8Kernel::Parts* parts) {
  parts->src_at = AlignUp(parts->scratch_md.get_size());
  const size_t src_bytes = parts->src_md != parts->src_plain ? parts->src_md.get_size() : 0;
  parts->dst_at = parts->src_at + AlignUp(src_bytes);
  const size_t dst_bytes = parts->dst_md != parts->dst_plain ? parts->dst_md.get_size() : 0;
  parts->total = parts->dst_at + AlignUp(dst_bytes);
}

// Error unless inputs 1, 2, 4..7 of a QLinear op are known at plan time and w_zero_point
// (input 5) is all zeros; then the multipliers x_scale * w_scale[c] / y_scale (float32, as the
// loops take them), one per w scale.
// The primitive descriptor of `desc` with `attr`, or nullopt when oneDNN has only its reference
// code for it (slower than the direct loop). Throws dnnl::error as the constructor does.
template <typename Pd, typename OpDesc>
std::optional<Pd> JitPd(const OpDesc& desc, const dnnl::primitive_attr& attr,
                        const dnnl::engine& engine) {
  Pd pd(desc, attr, engine);
  if (absl::StartsWith(pd.impl_info_str(), "ref")) return std::nullopt;
  return pd;
}

// The kernel of `pd`: its primitive and memory descriptors in `parts`, the int8 weights (input
// 3, plain of `w_dims`) packed into the primitive's layout, output y's descriptor.
template <typename Primitive, typename Pd>
std::unique_ptr<PreparedKernel> MakeInt8Kernel(const PrepareContext& context, const Pd& pd,
                                               const Shape& w_dims, const Shape& y,
                                               OnednnInt8Kernel::Parts parts) {
  parts.primitive = Primitive(pd);
  parts.src_md = pd.src_desc();
  parts.dst_md = pd.dst_desc();
  parts.scratch_md = pd.scratchpad_desc();
  parts.weights = PackWeights(context, context.inputs[3].data,
                              PlainDesc(w_dims, memory::data_type::s8), pd.weights_desc());
  LayOutWorkspace(&parts);
  return std::make_unique<OnednnInt8Kernel>(
      context.op, NodeLabel(context), std::vector<TensorDesc>{Desc(context.inputs[7].dtype, y)},
      std::move(parts));
}

absl::StatusOr<std::vector<float>> Multipliers(const PrepareContext& context) {
  const auto& in = context.inputs;
  for (size_t i : {1, 2, 4, 5, 6, 7}) {
    if (in[i].data == nullptr) {
      return Unimplemented(context, "input ", i, " is not known at plan time");
    }
  }
  const auto w_zeros = static_cast<size_t>(runtime::NumElements(in[5].shape));
  for (size_t c = 0; c < w_zeros; ++c) {
    if (static_cast<const uint8_t*>(in[5].data)[c] != 0) {
      return Unimplemented(context, "the weights' zero point is not 0");
    }
  }
  const float x_scale = *static_cast<const float*>(in[1].data);
  const float y_scale = *static_cast<const float*>(in[6].data);
  std::vector<float> scales(static_cast<size_t>(runtime::NumElements(in[4].shape)));
  for (size_t c = 0; c < scales.size(); ++c) {
    scales[c] = x_scale * static_cast<const float*>(in[4].data)[c] / y_scale;
    if (!std::isfinite(scales[c])) return Unimplemented(context, "a multiplier is not finite");
  }
  return scales;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareOnednnQLinearConv(
    const PrepareContext& context, const QLinearConvGeometry& geometry) {
  // oneDNN keeps the OpenMP thread count a primitive is created with: create it with the
  // stream's intra-op threads, not the preparing thread's count (the core count by default).
  UseIntraOpThreads(context.intra_op_threads);
  if (!OnednnInt8IsExact()) return Unimplemented(context, "no VNNI: int16 sums would saturate");
  const auto& in = context.inputs;
  const bool has_bias = HasInput(context, 8);
  if (in[3].data == nullptr || (has_bias && in[8].data == nullptr)) {
    return Unimplemented(context, "w or B is not known at plan time");
  }
  if (in[3].dtype != DataType::kInt8) return Unimplemented(context, "w is not int8");
  const Shape& x = in[0].shape;
  const Shape& w = in[3].shape;
  const Shape& y = geometry.y;
  if (runtime::NumElements(x) == 0 || runtime::NumElements(y) == 0) {
    return Unimplemented(context, "an empty tensor");
  }
  ASSIGN_OR_RETURN(std::vector<float> scales, Multipliers(context));
  const int32_t x_zero = EightBitAt(in[2].data, in[2].dtype, 0);
  const int32_t y_zero = EightBitAt(in[7].data, in[7].dtype, 0);
  const int64_t channels = y[1];
  const int64_t group = geometry.group;
  Shape w_dims = w;
  if (group > 1) {
    w_dims[0] = w[0] / group;
    w_dims.insert(w_dims.begin(), group);
  }
  try {
    const dnnl::engine& engine = CpuEngine();
    const Window& win = geometry.window;
    memory::dims dilations, strides, pad_l, pad_r;
    for (size_t i = 0; i < win.kernel.size(); ++i) {
      dilations.push_back(win.dilations[i] - 1);  // oneDNN counts dilation from 0
      strides.push_back(win.strides[i]);
      pad_l.push_back(win.pads_begin[i]);
      pad_r.push_back(win.pads_end[i]);
    }
    const memory::data_type x_type = EightBitType(in[0].dtype);
    const memory::data_type y_type = EightBitType(in[7].dtype);
    auto any = [](const Shape& dims, memory::data_type type) {
      return memory::desc(memory::dims(dims.begin(), dims.end()), type, memory::format_tag::any);
    };
    OnednnInt8Kernel::Parts parts;
    parts.src_plain = PlainDesc(x, x_type);
    parts.dst_plain = PlainDesc(y, y_type);
    parts.has_bias = has_bias;
    parts.bias_input = 8;
    parts.bias_md = has_bias ? PlainDesc({channels}, memory::data_type::s32) : memory::desc();
    parts.threads = context.intra_op_threads;
    using Pd = dnnl::convolution_forward::primitive_desc;
    auto make = [&](bool runtime_zero_points) -> std::optional<Pd> {
      try {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, any(x, x_type),
                                             any(w_dims, memory::data_type::s8), parts.bias_md,
                                             any(y, y_type), strides, dilations, pad_l, pad_r);
        // Output scales per output channel: dst axis 1.
        return JitPd<Pd>(desc, Int8Attr(scales, 1, x_zero, y_zero, runtime_zero_points), engine);
      } catch (const dnnl::error&) {
        return std::nullopt;
      }
    };
    std::optional<Pd> pd = MakeInt8Pd<Pd>(make, x_zero, y_zero, &parts);
    if (!pd.has_value()) {
      return Unimplemented(context, "onednn has no int8 convolution but its reference code for ",
                           runtime::ShapeToString(x), " by ", runtime::ShapeToString(w));
    }
    return MakeInt8Kernel<dnnl::convolution_forward>(context, *pd, w_dims, y, std::move(parts));
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the int8 convolution of ",
                         runtime::ShapeToString(x), " by ", runtime::ShapeToString(w), ": ",
                         e.what());
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareOnednnQLinearMatMul(
    const PrepareContext& context, const runtime::Shape& y) {
  // oneDNN keeps the OpenMP thread count a primitive is created with: create it with the
  // stream's intra-op threads, not the preparing thread's count (the core count by default).
  UseIntraOpThreads(context.intra_op_threads);
  if (!OnednnInt8IsExact()) return Unimplemented(context, "no VNNI: int16 sums would saturate");
  const auto& in = context.inputs;
  const Shape& a = in[0].shape;
  const Shape& b = in[3].shape;
  if (a.size() < 2 || b.size() != 2) {
    return Unimplemented(context, "a is not of rank >= 2 or b not of rank 2");
  }
  if (in[3].data == nullptr) return Unimplemented(context, "b is not known at plan time");
  if (in[3].dtype != DataType::kInt8) return Unimplemented(context, "b is not int8");
  if (runtime::NumElements(in[1].shape) != 1 || runtime::NumElements(in[2].shape) != 1) {
    return Unimplemented(context, "a's scale or zero point is not one for the tensor");
  }
  if (runtime::NumElements(a) == 0 || runtime::NumElements(y) == 0) {
    return Unimplemented(context, "an empty tensor");
  }
  ASSIGN_OR_RETURN(std::vector<float> scales, Multipliers(context));
  const int32_t x_zero = EightBitAt(in[2].data, in[2].dtype, 0);
  const int32_t y_zero = EightBitAt(in[7].data, in[7].dtype, 0);
  // A's batch dims and rows as one row axis (B is one matrix for all of them).
  const int64_t k = a.back();
  const int64_t n = b[1];
  const int64_t rows = runtime::NumElements(a) / k;
  try {
    const dnnl::engine& engine = CpuEngine();
    const memory::data_type x_type = EightBitType(in[0].dtype);
    const memory::data_type y_type = EightBitType(in[7].dtype);
    OnednnInt8Kernel::Parts parts;
    parts.src_plain = PlainDesc({rows, k}, x_type);
    parts.dst_plain = PlainDesc({rows, n}, y_type);
    parts.threads = context.intra_op_threads;
    const memory::desc b_any({k, n}, memory::data_type::s8, memory::format_tag::any);
    using Pd = dnnl::matmul::primitive_desc;
    auto make = [&](bool runtime_zero_points) -> std::optional<Pd> {
      try {
        dnnl::matmul::desc desc(parts.src_plain, b_any, parts.dst_plain);
        // Output scales per column: dst axis 1.
        return JitPd<Pd>(desc, Int8Attr(scales, 1, x_zero, y_zero, runtime_zero_points), engine);
      } catch (const dnnl::error&) {
        return std::nullopt;
      }
    };
    std::optional<Pd> pd = MakeInt8Pd<Pd>(make, x_zero, y_zero, &parts);
    if (!pd.has_value()) {
      return Unimplemented(context, "onednn has no int8 matmul but its reference code for ",
                           runtime::ShapeToString(a), " by ", runtime::ShapeToString(b));
    }
    return MakeInt8Kernel<dnnl::matmul>(context, *pd, {k, n}, y, std::move(parts));
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the int8 matmul of ", runtime::ShapeToString(a),
                         " by ", runtime::ShapeToString(b), ": ", e.what());
  }
}

}  // namespace reprise::kernels::cpu
