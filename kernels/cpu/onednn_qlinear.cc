// QLinearConv on oneDNN's int8 convolution primitive, created at Prepare: the int8 weights are
// reordered once into the primitive's layout (shared through PackWeights), the requantization
// is the primitive's output scales (one per output channel) and zero points. X and Y stay plain
// NCHW between steps; they are reordered into and out of the primitive's preferred layout
// (channels-last for int8) in the workspace, as the float Conv does.
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/quantized_ops.h"

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

class OnednnQLinearConvKernel final : public PreparedKernel {
 public:
  struct Parts {
    dnnl::convolution_forward::primitive_desc pd;
    std::shared_ptr<const memory> weights;  // in the primitive's layout
    memory::desc src_plain, dst_plain, bias_md;
    bool has_bias = false;
    // Zero points passed at Run (when oneDNN wants them as runtime arguments), else empty.
    std::vector<int32_t> src_zero, dst_zero;
    int threads = 1;
    size_t src_at = 0, dst_at = 0, total = 0;  // workspace: scratchpad, X, Y (when reordered)
  };

  OnednnQLinearConvKernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs,
                          Parts parts)
      : op_(op),
        label_(std::move(label)),
        outputs_(std::move(outputs)),
        p_(std::move(parts)),
        primitive_(p_.pd) {
    const dnnl::engine& engine = CpuEngine();
    if (p_.pd.src_desc() != p_.src_plain) {
      src_reorder_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, p_.src_plain, engine, p_.pd.src_desc()));
    }
    if (p_.pd.dst_desc() != p_.dst_plain) {
      dst_reorder_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, p_.pd.dst_desc(), engine, p_.dst_plain));
    }
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return p_.total; }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream stream(engine);
      uint8_t* ws = static_cast<uint8_t*>(args.workspace);
      memory src_plain(p_.src_plain, engine, const_cast<void*>(args.inputs[0]));
      memory dst_plain(p_.dst_plain, engine, args.outputs[0]);
      memory src = src_plain;
      if (src_reorder_) {
        src = memory(p_.pd.src_desc(), engine, ws + p_.src_at);
        src_reorder_.execute(stream, src_plain, src);
      }
      memory dst = dst_plain;
      if (dst_reorder_) dst = memory(p_.pd.dst_desc(), engine, ws + p_.dst_at);
      std::unordered_map<int, memory> bound;
      bound.emplace(DNNL_ARG_SRC, src);
      bound.emplace(DNNL_ARG_WEIGHTS, *p_.weights);
      if (p_.has_bias) {
        bound.emplace(DNNL_ARG_BIAS, memory(p_.bias_md, engine, const_cast<void*>(args.inputs[8])));
      }
      bound.emplace(DNNL_ARG_DST, dst);
      const memory::desc zero_md({1}, memory::data_type::s32, memory::format_tag::a);
      if (!p_.src_zero.empty()) {
        bound.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                      memory(zero_md, engine, const_cast<int32_t*>(p_.src_zero.data())));
      }
      if (!p_.dst_zero.empty()) {
        bound.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST,
                      memory(zero_md, engine, const_cast<int32_t*>(p_.dst_zero.data())));
      }
      if (p_.pd.scratchpad_desc().get_size() > 0) {
        bound.emplace(DNNL_ARG_SCRATCHPAD, memory(p_.pd.scratchpad_desc(), engine, ws));
      }
      primitive_.execute(stream, bound);
      if (dst_reorder_) dst_reorder_.execute(stream, dst, dst_plain);
      stream.wait();
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
  dnnl::convolution_forward primitive_;
  dnnl::reorder src_reorder_;  // plain X → the primitive's src layout (or empty)
  dnnl::reorder dst_reorder_;  // the primitive's dst layout → plain Y (or empty)
};

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareOnednnQLinearConv(
    const PrepareContext& context, const QLinearConvGeometry& geometry) {
  const auto& in = context.inputs;
  const bool has_bias = HasInput(context, 8);
  for (size_t i = 1; i < (has_bias ? 9u : 8u); ++i) {
    if (in[i].data == nullptr) {
      return Unimplemented(context, "input ", i, " is not known at plan time");
    }
  }
  if (in[3].dtype != DataType::kInt8) return Unimplemented(context, "w is not int8");
  const Shape& x = in[0].shape;
  const Shape& w = in[3].shape;
  const Shape& y = geometry.y;
  if (runtime::NumElements(x) == 0 || runtime::NumElements(y) == 0) {
    return Unimplemented(context, "an empty tensor");
  }
  const int64_t channels = y[1];
  const size_t w_params = static_cast<size_t>(runtime::NumElements(in[4].shape));
  const size_t w_zeros = static_cast<size_t>(runtime::NumElements(in[5].shape));
  for (size_t c = 0; c < w_zeros; ++c) {
    if (static_cast<const int8_t*>(in[5].data)[c] != 0) {
      return Unimplemented(context, "w_zero_point is not 0");
    }
  }
  const float x_scale = *static_cast<const float*>(in[1].data);
  const float y_scale = *static_cast<const float*>(in[6].data);
  const int32_t x_zero = EightBitAt(in[2].data, in[2].dtype, 0);
  const int32_t y_zero = EightBitAt(in[7].data, in[7].dtype, 0);
  // The multipliers the direct loop uses, in the same float32 arithmetic.
  std::vector<float> scales(w_params == 1 ? 1 : static_cast<size_t>(channels));
  for (size_t c = 0; c < scales.size(); ++c) {
    scales[c] = x_scale * static_cast<const float*>(in[4].data)[c] / y_scale;
    if (!std::isfinite(scales[c])) return Unimplemented(context, "a multiplier is not finite");
  }
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
    OnednnQLinearConvKernel::Parts parts;
    parts.src_plain = PlainDesc(x, x_type);
    parts.dst_plain = PlainDesc(y, y_type);
    parts.has_bias = has_bias;
    parts.bias_md = has_bias ? PlainDesc({channels}, memory::data_type::s32) : memory::desc();
    parts.threads = context.intra_op_threads;
    // Zero points as constants of the primitive or, where oneDNN takes only those, as runtime
    // arguments.
    auto make =
        [&](bool runtime_zero_points) -> std::optional<dnnl::convolution_forward::primitive_desc> {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
      const int32_t runtime = DNNL_RUNTIME_S32_VAL;
      if (x_zero != 0)
        attr.set_zero_points(DNNL_ARG_SRC, 0, {runtime_zero_points ? runtime : x_zero});
      if (y_zero != 0)
        attr.set_zero_points(DNNL_ARG_DST, 0, {runtime_zero_points ? runtime : y_zero});
      try {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, any(x, x_type),
                                             any(w_dims, memory::data_type::s8), parts.bias_md,
                                             any(y, y_type), strides, dilations, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
        if (absl::StartsWith(pd.impl_info_str(), "ref")) return std::nullopt;
        return pd;
      } catch (const dnnl::error&) {
        return std::nullopt;
      }
    };
    std::optional<dnnl::convolution_forward::primitive_desc> chosen = make(false);
    if (!chosen.has_value() && (x_zero != 0 || y_zero != 0)) {
      chosen = make(true);
      if (chosen.has_value()) {
        if (x_zero != 0) parts.src_zero = {x_zero};
        if (y_zero != 0) parts.dst_zero = {y_zero};
      }
    }
    if (!chosen.has_value()) {
      return Unimplemented(context, "onednn has no int8 convolution but its reference code for ",
                           runtime::ShapeToString(x), " by ", runtime::ShapeToString(w));
    }
    parts.pd = *chosen;
    const dnnl::convolution_forward::primitive_desc& pd = parts.pd;
    parts.weights =
        PackWeights(in[3].data, PlainDesc(w_dims, memory::data_type::s8), pd.weights_desc());
    parts.src_at = AlignUp(pd.scratchpad_desc().get_size());
    const size_t src_bytes = pd.src_desc() != parts.src_plain ? pd.src_desc().get_size() : 0;
    parts.dst_at = parts.src_at + AlignUp(src_bytes);
    const size_t dst_bytes = pd.dst_desc() != parts.dst_plain ? pd.dst_desc().get_size() : 0;
    parts.total = parts.dst_at + AlignUp(dst_bytes);
    return std::make_unique<OnednnQLinearConvKernel>(context.op, NodeLabel(context),
                                                     std::vector<TensorDesc>{Desc(in[7].dtype, y)},
                                                     std::move(parts));
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the int8 convolution of ",
                         runtime::ShapeToString(x), " by ", runtime::ShapeToString(w), ": ",
                         e.what());
  }
}

}  // namespace reprise::kernels::cpu
