// Conv (1-D/2-D/3-D, groups, depthwise) on oneDNN's convolution primitive, created at Prepare;
// weights known at plan time are reordered once into the primitive's preferred layout.
// ConvTranspose is a GEMM (oneDNN sgemm) per image and group followed by a col2im scatter,
// which covers every output_padding / output_shape combination.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "dnnl.hpp"
#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/window.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Where the kernel's buffers lie in its workspace (offsets in bytes, 64-byte aligned).
struct ConvWorkspace {
  size_t scratch = 0;  // oneDNN's scratchpad
  size_t src = 0;      // X in the primitive's layout (when not plain)
  size_t dst = 0;      // Y in the primitive's layout (when not plain)
  size_t total = 0;
};

// The epilogue applied to the convolution's output: residual sum, then an activation.
struct ConvPostOps {
  bool residual = false;
  std::string activation;  // "", "Relu" or "Clip"
  float clip_min = 0.0f;
  float clip_max = 0.0f;
  Storage x = Storage::kPlain;
  Storage y = Storage::kPlain;
  Storage r = Storage::kPlain;
  // A depthwise 3x3 convolution (pads 1) applied to the result inside the same primitive
  // (oneDNN's depthwise post-op): the 1x1 convolution's output never leaves the cache.
  struct Depthwise {
    int64_t stride = 1;
    std::string activation;  // "", "Relu" or "Clip"
    float clip_min = 0.0f;
    float clip_max = 0.0f;
    const TensorDesc* weights = nullptr;  // [C, 1, 3, 3], known at plan time
    const TensorDesc* bias = nullptr;     // [C] known at plan time, or null
  };
  std::optional<Depthwise> depthwise;
};

// Appends `activation` ("", "Relu", "Clip") to `ops`; false for another name.
bool AppendActivation(const std::string& activation, float lo, float hi, dnnl::post_ops* ops) {
  if (activation == "Relu") {
    ops->append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  } else if (activation == "Clip") {
    ops->append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
  } else if (!activation.empty()) {
    return false;
  }
  return true;
}

// Output pixels (batch x height x width) from which Winograd is tried.
constexpr int64_t kWinogradMinPixels = 196;

// Winograd is tried for 3x3 stride-1 convolutions unless REPRISE_CONV_WINOGRAD=0.
bool WinogradAllowed() {
  static const bool allowed = [] {
    const char* flag = std::getenv("REPRISE_CONV_WINOGRAD");
    return flag == nullptr || std::string(flag) != "0";
  }();
  return allowed;
}

// A convolution on oneDNN in the layouts the primitive prefers (blocked, e.g. nChw8c, for most
// shapes): the plain NCHW input is reordered into the workspace, the output reordered back. The
// residual (if any) is reordered into the destination first and added by a sum post-op.
class ConvKernel final : public PreparedKernel {
 public:
  struct Parts {
    dnnl::convolution_forward::primitive_desc pd;
    // W in the primitive's layout, shared by every plan of the model (see PackWeights); null
    // when the weights are bound at Run.
    std::shared_ptr<const memory> packed_weights;
    memory::desc src_plain, dst_plain;  // X and Y as stored (plain or channels-last)
    memory::desc residual_md;           // R as stored
    bool has_bias = false;
    bool residual = false;
    int threads = 1;  // the stream's intra-op threads
    ConvWorkspace workspace;
    // Set when R only broadcasts to Y: Y += R, then post.activation, after the primitive.
    std::optional<BroadcastPlan> epilogue;
    ConvPostOps post;
    // The depthwise post-op's weights (packed) and bias (borrowed constant, or zeros).
    std::shared_ptr<const memory> dw_weights;
    memory::desc dw_bias_md;
    const void* dw_bias = nullptr;
    std::vector<float> dw_zero_bias;
  };

  ConvKernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs, Parts parts)
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
    if (p_.residual && p_.pd.dst_desc() != p_.residual_md) {
      residual_reorder_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, p_.residual_md, engine, p_.pd.dst_desc()));
    }
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return p_.workspace.total; }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? p_.dst_plain.get_size() : 0;
  }

  // Plain Y += broadcast R, then the activation.
  void BroadcastEpilogue(const KernelArgs& args) const {
    float* y = static_cast<float*>(args.outputs[0]);
    const float* r = static_cast<const float*>(args.inputs[3]);
    const int64_t stride = p_.epilogue->strides[0].back();
    const bool relu = p_.post.activation == "Relu";
    const bool clip = p_.post.activation == "Clip";
    const float lo = p_.post.clip_min, hi = p_.post.clip_max;
    ForEachRow(*p_.epilogue, [&](int64_t at, const int64_t* offs, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        float v = y[at + i] + r[offs[0] + i * stride];
        if (relu) v = v > 0.0f ? v : 0.0f;
        if (clip) v = std::min(std::max(v, lo), hi);
        y[at + i] = v;
      }
    });
  }

  absl::Status Run(const KernelArgs& args) const override {
    if (runtime::NumElements(outputs_[0].shape) == 0) return absl::OkStatus();
    UseIntraOpThreads(p_.threads);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream stream(engine);
      uint8_t* ws = static_cast<uint8_t*>(args.workspace);
      memory src_plain(p_.src_plain, engine, const_cast<void*>(args.inputs[0]));
      memory dst_plain(p_.dst_plain, engine, args.outputs[0]);
      memory src = src_plain;
      if (src_reorder_) {
        src = memory(p_.pd.src_desc(), engine, ws + p_.workspace.src);
        src_reorder_.execute(stream, src_plain, src);
      }
      memory dst = dst_plain;
      if (dst_reorder_) dst = memory(p_.pd.dst_desc(), engine, ws + p_.workspace.dst);
      if (p_.residual) {
        memory residual(p_.residual_md, engine, const_cast<void*>(args.inputs[3]));
        if (residual_reorder_) {
          residual_reorder_.execute(stream, residual, dst);
        } else if (args.inputs[3] != dst.get_data_handle()) {
          std::memcpy(dst.get_data_handle(), args.inputs[3], p_.residual_md.get_size());
        }
      }
      std::unordered_map<int, memory> bound;
      bound.emplace(DNNL_ARG_SRC, src);
      bound.emplace(DNNL_ARG_WEIGHTS,
                    p_.packed_weights
                        ? *p_.packed_weights
                        : memory(p_.pd.weights_desc(), engine, const_cast<void*>(args.inputs[1])));
      if (p_.has_bias) {
        bound.emplace(DNNL_ARG_BIAS,
                      memory(p_.pd.bias_desc(), engine, const_cast<void*>(args.inputs[2])));
      }
      bound.emplace(DNNL_ARG_DST, dst);
      if (p_.dw_weights) {
        bound.emplace(DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, *p_.dw_weights);
        bound.emplace(
            DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS,
            memory(p_.dw_bias_md, engine,
                   const_cast<void*>(p_.dw_bias != nullptr ? p_.dw_bias : p_.dw_zero_bias.data())));
      }
      if (p_.pd.scratchpad_desc().get_size() > 0) {
        bound.emplace(DNNL_ARG_SCRATCHPAD,
                      memory(p_.pd.scratchpad_desc(), engine, ws + p_.workspace.scratch));
      }
      primitive_.execute(stream, bound);
      if (dst_reorder_) dst_reorder_.execute(stream, dst, dst_plain);
      stream.wait();
      if (p_.epilogue.has_value()) BroadcastEpilogue(args);
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(label_, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::string label_;  // op and node name, for messages
  std::vector<TensorDesc> outputs_;
  Parts p_;
  dnnl::convolution_forward primitive_;
  dnnl::reorder src_reorder_;       // plain X → the primitive's src layout (or empty)
  dnnl::reorder dst_reorder_;       // the primitive's dst layout → plain Y (or empty)
  dnnl::reorder residual_reorder_;  // plain R → the primitive's dst layout (or empty)
};

size_t AlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Checks X [N,C,...], W [M,C/group,...] (Conv) and the optional bias [M]; returns group.
absl::StatusOr<int64_t> CheckConvInputs(const PrepareContext& context, bool transposed,
                                        size_t max_inputs = 3) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, max_inputs));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  ASSIGN_OR_RETURN(int64_t group, AttrsOf(context).GetInt("group", 1));
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || group < 1) {
    return InvalidArgument(context, "input ", runtime::ShapeToString(x), " and weights ",
                           runtime::ShapeToString(w), " (group ", group,
                           ") are not a 1-D, 2-D or 3-D convolution");
  }
  // Conv: W [M, C/g, k...]; ConvTranspose: W [C, M/g, k...].
  const int64_t channels = x[1];
  // ConvTranspose's output channels, w[1] * group, checked (group comes from the model file).
  int64_t transposed_out = 0;
  const bool ok = transposed
                      ? (w[0] == channels && channels % group == 0 &&
                         runtime::CheckedMul(w[1], group, &transposed_out))
                      : (channels % group == 0 && w[1] == channels / group && w[0] % group == 0);
  if (!ok) {
    return InvalidArgument(context, "weights ", runtime::ShapeToString(w), " do not match input ",
                           runtime::ShapeToString(x), " with group ", group);
  }
  if (HasInput(context, 2)) {
    const int64_t out_channels = transposed ? transposed_out : w[0];
    if (runtime::NumElements(context.inputs[2].shape) != out_channels) {
      return InvalidArgument(context, "bias ", runtime::ShapeToString(context.inputs[2].shape),
                             " does not match ", out_channels, " output channels");
    }
  }
  return group;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvWith(const PrepareContext& context,
                                                                const ConvPostOps& post) {
  ASSIGN_OR_RETURN(int64_t group,
                   CheckConvInputs(context, /*transposed=*/false, post.residual ? 4 : 3));
  const Shape& x = context.inputs[0].shape;
  const TensorDesc& weights = context.inputs[1];
  const Shape& w = weights.shape;
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(Window win,
                   ForwardWindow(context, spatial, std::vector<int64_t>(w.begin() + 2, w.end()),
                                 /*ceil_mode=*/false));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (win.kernel[i] != w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", runtime::ShapeToString(win.kernel),
                             " does not match weights ", runtime::ShapeToString(w));
    }
  }
  Shape y = {x[0], w[0]};
  y.insert(y.end(), win.output.begin(), win.output.end());
  // With a depthwise post-op, Y is the depthwise convolution's output.
  Shape y_out = y;
  if (post.depthwise.has_value()) {
    if (x.size() != 4 || post.residual) {
      return InvalidArgument(context,
                             "a depthwise post-op needs a 2-D convolution and no residual");
    }
    for (size_t i = 2; i < 4; ++i) y_out[i] = (y[i] - 1) / post.depthwise->stride + 1;
  }
  Shape w_dims = w;
  if (group > 1) {
    w_dims[0] = w[0] / group;
    w_dims.insert(w_dims.begin(), group);
  }
  const bool has_bias = HasInput(context, 2);
  const bool known_weights = weights.data != nullptr;
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y_out)};
  if (runtime::NumElements(x) == 0 || runtime::NumElements(y) == 0) {
    return MakeKernel(context, std::move(outputs),
                      [](const KernelArgs&) { return absl::OkStatus(); });
  }
  // A residual that only broadcasts to Y is added (then the activation applied) after the
  // primitive, on plain Y; one of Y's exact shape goes through oneDNN's sum post-op.
  std::optional<BroadcastPlan> broadcast;
  if (post.residual && context.inputs[3].shape != y) {
    auto shape = BroadcastShapes(context.inputs[3].shape, y);
    if (!shape.ok() || *shape != y || post.y != Storage::kPlain || post.r != Storage::kPlain) {
      return InvalidArgument(context, "residual ", runtime::ShapeToString(context.inputs[3].shape),
                             " does not broadcast to the output's shape ",
                             runtime::ShapeToString(y));
    }
    broadcast = MakeBroadcastPlan(y, {context.inputs[3].shape});
  }
  try {
    const dnnl::engine& engine = CpuEngine();
    memory::dims dilations, strides, pad_l, pad_r;
    for (size_t i = 0; i < spatial.size(); ++i) {
      dilations.push_back(win.dilations[i] - 1);  // oneDNN counts dilation from 0
      strides.push_back(win.strides[i]);
      pad_l.push_back(win.pads_begin[i]);
      pad_r.push_back(win.pads_end[i]);
    }
    const memory::desc w_plain = PlainDesc(w_dims);
    auto any = [](const memory::desc& plain) {
      return memory::desc(plain.dims(), memory::data_type::f32, memory::format_tag::any);
    };
    const memory::desc w_md = known_weights ? any(w_plain) : w_plain;
    const memory::desc b_md = has_bias ? PlainDesc({w[0]}) : memory::desc();
    ConvKernel::Parts parts;
    const bool two_d = x.size() == 4;
    const auto stored = &StoredDesc;
    parts.src_plain = stored(x, post.x);
    parts.dst_plain = stored(y_out, post.y);
    parts.residual_md = stored(y, post.r);
    parts.has_bias = has_bias;
    parts.residual = post.residual;
    parts.threads = context.intra_op_threads;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops ops;
    if (broadcast.has_value()) {
      parts.epilogue = std::move(broadcast);
      parts.residual = false;
      parts.post = post;
    } else if (post.residual) {
      ops.append_sum(1.0f);
    }
    if (!parts.epilogue.has_value() &&  // else applied after the residual, in Run
        !AppendActivation(post.activation, post.clip_min, post.clip_max, &ops)) {
      return InvalidArgument(context, "activation \"", post.activation, "\" is not supported");
    }
    if (post.depthwise.has_value()) {
      const ConvPostOps::Depthwise& dw = *post.depthwise;
      ops.append_dw(memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 3,
                    dw.stride, 1, 0, {});
      if (!AppendActivation(dw.activation, dw.clip_min, dw.clip_max, &ops)) {
        return InvalidArgument(context, "activation \"", dw.activation, "\" is not supported");
      }
    }
    attr.set_post_ops(ops);
    // A primitive for the given layouts, or none when oneDNN has only its reference code
    // for them (orders of magnitude slower than a reorder at either end).
    auto make = [&](dnnl::algorithm algorithm, const memory::desc& src_md,
                    const memory::desc& dst_md)
        -> std::optional<dnnl::convolution_forward::primitive_desc> {
      try {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, src_md,
                                             w_md, b_md, dst_md, strides, dilations, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
        if (absl::StartsWith(pd.impl_info_str(), "ref")) return std::nullopt;
        return pd;
      } catch (const dnnl::error&) {
        return std::nullopt;
      }
    };
    // Stored non-plain ends are used as they are (a chain of convolutions then needs no
    // reorder); a plain end lets oneDNN choose. Channels-last at either end: the primitive
    // works channels-last throughout.
    const bool nhwc = post.x == Storage::kNhwc || post.y == Storage::kNhwc;
    const memory::desc src_md = nhwc                        ? stored(x, Storage::kNhwc)
                                : post.x == Storage::kPlain ? any(parts.src_plain)
                                                            : parts.src_plain;
    // The fused depthwise convolution wants the blocked layout for the 1x1's output.
    const memory::desc dst_md = post.depthwise.has_value()  ? stored(y, Storage::kBlocked)
                                : nhwc                      ? stored(y, Storage::kNhwc)
                                : post.y == Storage::kPlain ? any(parts.dst_plain)
                                                            : parts.dst_plain;
    // Winograd (F(2x3) / F(4x3) tiles: about half the multiplications of a direct 3x3
    // convolution) where oneDNN has it: 2-D, 3x3, stride 1, no dilation, one group, and
    // weights known at plan time (they are transformed once).
    // Below 196 output pixels (14x14) per batch the transform of the weights at plan time
    // costs more than the runs save: ResNet's 512x512 3x3 weights take ~45 ms to transform and
    // save ~0.4 ms per 7x7 image.
    const bool winograd_shape = two_d && known_weights && group == 1 && w[2] == 3 && w[3] == 3 &&
                                win.strides[0] == 1 && win.strides[1] == 1 &&
                                win.dilations[0] == 1 && win.dilations[1] == 1 &&
                                y[0] * y[2] * y[3] >= kWinogradMinPixels;
    std::optional<dnnl::convolution_forward::primitive_desc> chosen;
    if (winograd_shape && !nhwc && WinogradAllowed()) {
      chosen = make(dnnl::algorithm::convolution_winograd, src_md, dst_md);
    }
    if (!chosen.has_value()) chosen = make(dnnl::algorithm::convolution_direct, src_md, dst_md);
    if (!chosen.has_value() && post.depthwise.has_value()) {
      return Unimplemented(context, "onednn has no fused 1x1 and depthwise convolution of ",
                           runtime::ShapeToString(x));
    }
    if (!chosen.has_value()) {
      chosen =
          make(dnnl::algorithm::convolution_direct, any(parts.src_plain), any(parts.dst_plain));
    }
    if (!chosen.has_value()) {
      // Whatever oneDNN has, reference code included; its error if none.
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          any(parts.src_plain), w_md, b_md, any(parts.dst_plain), strides, dilations, pad_l, pad_r);
      chosen = dnnl::convolution_forward::primitive_desc(desc, attr, engine);
    }
    parts.pd = *chosen;
    const dnnl::convolution_forward::primitive_desc& pd = parts.pd;
    if (known_weights) parts.packed_weights = PackWeights(weights.data, w_plain, pd.weights_desc());
    if (post.depthwise.has_value()) {
      const ConvPostOps::Depthwise& dw = *post.depthwise;
      if (pd.dst_desc().dims() != memory::dims(y_out.begin(), y_out.end())) {
        return Unimplemented(context, "onednn's fused depthwise output is not ",
                             runtime::ShapeToString(y_out));
      }
      const int64_t c = y[1];
      parts.dw_weights = PackWeights(
          dw.weights->data, PlainDesc({c, 1, 1, 3, 3}),
          pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS));
      parts.dw_bias_md =
          pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
      if (parts.dw_bias_md != PlainDesc({c})) {
        return Unimplemented(context, "onednn wants the depthwise bias in another layout");
      }
      if (dw.bias != nullptr) {
        parts.dw_bias = dw.bias->data;
      } else {
        parts.dw_zero_bias.assign(static_cast<size_t>(c), 0.0f);
      }
    }
    ConvWorkspace& ws = parts.workspace;
    ws.scratch = 0;
    ws.src = AlignUp(pd.scratchpad_desc().get_size());
    const size_t src_bytes = pd.src_desc() != parts.src_plain ? pd.src_desc().get_size() : 0;
    ws.dst = ws.src + AlignUp(src_bytes);
    const size_t dst_bytes = pd.dst_desc() != parts.dst_plain ? pd.dst_desc().get_size() : 0;
    ws.total = ws.dst + AlignUp(dst_bytes);
    return std::make_unique<ConvKernel>(context.op, NodeLabel(context), std::move(outputs),
                                        std::move(parts));
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the convolution of ", runtime::ShapeToString(x),
                         " by ", runtime::ShapeToString(w), ": ", e.what());
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConv(const PrepareContext& context) {
  return PrepareConvWith(context, ConvPostOps{});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConv(const PrepareContext& context) {
  ConvPostOps post;
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(post.activation, attrs.GetString("activation", ""));
  ASSIGN_OR_RETURN(post.clip_min, attrs.GetFloat("clip_min", 0.0f));
  ASSIGN_OR_RETURN(post.clip_max, attrs.GetFloat("clip_max", 0.0f));
  ASSIGN_OR_RETURN(post.x, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(post.y, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(post.r, LayoutAttr(context, "r_layout"));
  if (context.inputs.size() == 4) {
    if (!HasInput(context, 3)) return InvalidArgument(context, "the residual input is absent");
    RETURN_IF_ERROR(ExpectType(context, 3, {DataType::kFloat32}));
    post.residual = true;
  }
  return PrepareConvWith(context, post);
}

// The intermediate size (bytes of the 1x1 convolution's output) from which the 1x1 and the
// depthwise convolution run as one oneDNN primitive: below it the intermediate stays in the
// cache anyway and two primitives are as fast or faster (MobileNetV2's 24->144 channels at 56x56:
// 0.39 ms apart, 0.47 ms fused at batch 1; 4.1 ms apart, 3.5 ms fused at batch 8; 1 thread).
constexpr int64_t kDepthwiseFuseMinBytes = int64_t{4} << 20;

// Two prepared kernels in sequence, the first one's output in the workspace.
class TwoStageKernel final : public PreparedKernel {
 public:
  TwoStageKernel(std::unique_ptr<PreparedKernel> first, std::unique_ptr<PreparedKernel> second,
                 std::vector<int> second_inputs)
      : first_(std::move(first)),
        second_(std::move(second)),
        second_inputs_(std::move(second_inputs)) {
    mid_at_ = AlignUp(first_->workspace_bytes());
    const size_t mid = std::max(
        first_->output_storage_bytes(0),
        static_cast<size_t>(runtime::NumElements(first_->outputs()[0].shape)) * sizeof(float));
    second_ws_at_ = mid_at_ + AlignUp(mid);
    total_ = second_ws_at_ + second_->workspace_bytes();
  }

  absl::string_view op() const override { return kFusedConvDwOp; }
  const std::vector<TensorDesc>& outputs() const override { return second_->outputs(); }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return second_->output_storage_bytes(i); }

  absl::Status Run(const KernelArgs& args) const override {
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    void* mid = ws + mid_at_;
    void* first_out[] = {mid};
    RETURN_IF_ERROR(first_->Run(KernelArgs{args.inputs, first_out, ws}));
    std::vector<const void*> inputs = {mid};
    for (int i : second_inputs_) inputs.push_back(args.inputs[i]);
    return second_->Run(KernelArgs{inputs.data(), args.outputs, ws + second_ws_at_});
  }

 private:
  std::unique_ptr<PreparedKernel> first_, second_;
  std::vector<int> second_inputs_;  // inputs of this kernel after the first stage's output
  size_t mid_at_ = 0, second_ws_at_ = 0, total_ = 0;
};

// kFusedConvDwOp: inputs X, W, B (1x1 convolution), W_dw, B_dw (depthwise 3x3, pads 1).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConvDw(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 5));
  if (!HasInput(context, 3)) return InvalidArgument(context, "the depthwise weights are missing");
  const Attributes& attrs = AttrsOf(context);
  ConvPostOps post;
  ASSIGN_OR_RETURN(post.activation, attrs.GetString("activation", ""));
  ASSIGN_OR_RETURN(post.clip_min, attrs.GetFloat("clip_min", 0.0f));
  ASSIGN_OR_RETURN(post.clip_max, attrs.GetFloat("clip_max", 0.0f));
  ASSIGN_OR_RETURN(post.x, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(post.y, LayoutAttr(context, "y_layout"));
  ConvPostOps::Depthwise dw;
  ASSIGN_OR_RETURN(dw.stride, attrs.GetInt("dw_stride", 1));
  ASSIGN_OR_RETURN(dw.activation, attrs.GetString("dw_activation", ""));
  ASSIGN_OR_RETURN(dw.clip_min, attrs.GetFloat("dw_clip_min", 0.0f));
  ASSIGN_OR_RETURN(dw.clip_max, attrs.GetFloat("dw_clip_max", 0.0f));
  const Shape& x = context.inputs[0].shape;
  const TensorDesc& w = context.inputs[1];
  const TensorDesc& w_dw = context.inputs[3];
  if (x.size() != 4 || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1 ||
      w_dw.data == nullptr || w_dw.shape != Shape{w.shape[0], 1, 3, 3} ||
      (dw.stride != 1 && dw.stride != 2)) {
    return InvalidArgument(context, "needs a 1x1 convolution of ", runtime::ShapeToString(x),
                           " by ", runtime::ShapeToString(w.shape),
                           " and constant depthwise weights [C,1,3,3] of stride 1 or 2, not ",
                           runtime::ShapeToString(w_dw.shape), " stride ", dw.stride);
  }
  RETURN_IF_ERROR(ExpectType(context, 3, {DataType::kFloat32}));
  if (HasInput(context, 4)) {
    RETURN_IF_ERROR(ExpectType(context, 4, {DataType::kFloat32}));
    if (context.inputs[4].data == nullptr ||
        runtime::NumElements(context.inputs[4].shape) != w.shape[0]) {
      return InvalidArgument(context, "the depthwise bias must be a constant of ", w.shape[0],
                             " values");
    }
    dw.bias = &context.inputs[4];
  }
  dw.weights = &w_dw;
  const std::span<const TensorDesc> conv_inputs = context.inputs.subspan(0, 3);
  PrepareContext first = context;
  first.inputs = conv_inputs;
  const int64_t mid_bytes = x[0] * w.shape[0] * x[2] * x[3] * static_cast<int64_t>(sizeof(float));
  // One primitive only in a channel-blocked layout: oneDNN 2.6's 1x1 convolution with the
  // depthwise post-op on NHWC tensors computed wrong values (MobileNetV2 with
  // REPRISE_CONV_CHAIN_LAYOUT=nhwc, against PyTorch's output).
  const bool blocked = ChainTag() != memory::format_tag::nhwc && post.x != Storage::kNhwc &&
                       post.y != Storage::kNhwc;
  if (blocked && mid_bytes >= kDepthwiseFuseMinBytes) {
    ConvPostOps fused = post;
    fused.depthwise = dw;
    auto kernel = PrepareConvWith(first, fused);
    if (kernel.ok() || kernel.status().code() != absl::StatusCode::kUnimplemented) return kernel;
    // oneDNN has no fused form here: two primitives.
  }
  ConvPostOps one = post;
  one.y = Storage::kBlocked;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> pointwise, PrepareConvWith(first, one));
  Attributes dw_attrs;
  dw_attrs.Set("group", w.shape[0]);
  dw_attrs.Set("kernel_shape", std::vector<int64_t>{3, 3});
  dw_attrs.Set("strides", std::vector<int64_t>{dw.stride, dw.stride});
  dw_attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  std::vector<TensorDesc> dw_inputs = {pointwise->outputs()[0], w_dw};
  dw_inputs[0].data = nullptr;
  if (dw.bias != nullptr) dw_inputs.push_back(*dw.bias);
  PrepareContext second = context;
  second.inputs = dw_inputs;
  second.attributes = &dw_attrs;
  ConvPostOps two;
  two.activation = dw.activation;
  two.clip_min = dw.clip_min;
  two.clip_max = dw.clip_max;
  two.x = Storage::kBlocked;
  two.y = post.y;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> depthwise, PrepareConvWith(second, two));
  std::vector<int> rest = {3};
  if (dw.bias != nullptr) rest.push_back(4);
  return std::make_unique<TwoStageKernel>(std::move(pointwise), std::move(depthwise),
                                          std::move(rest));
}

// Row-major sgemm through oneDNN's C API.
absl::Status Sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return absl::OkStatus();
  }
  if (dnnl_sgemm(trans_a ? 'T' : 'N', 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc) !=
      dnnl_success) {
    return absl::InternalError(absl::StrCat("dnnl_sgemm failed for m=", m, " n=", n, " k=", k));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvTranspose(
    const PrepareContext& context) {
  ASSIGN_OR_RETURN(int64_t group, CheckConvInputs(context, /*transposed=*/true));
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(
      Window win, TransposedWindow(context, spatial, std::vector<int64_t>(w.begin() + 2, w.end())));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (win.kernel[i] != w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", runtime::ShapeToString(win.kernel),
                             " does not match weights ", runtime::ShapeToString(w));
    }
  }
  const int64_t batch = x[0];
  const int64_t in_group = x[1] / group;  // input channels per group
  const int64_t out_group = w[1];         // output channels per group
  Shape y = {batch, out_group * group};
  y.insert(y.end(), win.output.begin(), win.output.end());
  const Window g = To3d(win);
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const int64_t out_size = g.output[0] * g.output[1] * g.output[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t rows = out_group * taps;  // rows of the column buffer
  const bool has_bias = HasInput(context, 2);
  const size_t workspace = static_cast<size_t>(rows * in_size) * sizeof(float);
  const int threads = context.intra_op_threads;
  return MakeKernel(
      context, {Desc(DataType::kFloat32, y)},
      [=](const KernelArgs& args) -> absl::Status {
        UseIntraOpThreads(threads);
        const float* xp = static_cast<const float*>(args.inputs[0]);
        const float* wp = static_cast<const float*>(args.inputs[1]);
        const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
        float* yp = static_cast<float*>(args.outputs[0]);
        float* cols = static_cast<float*>(args.workspace);
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t gi = 0; gi < group; ++gi) {
            // cols[rows, in_size] = W_g^T [rows, in_group] * X_g [in_group, in_size]
            const float* wg = wp + gi * in_group * rows;
            const float* xg = xp + (n * group + gi) * in_group * in_size;
            RETURN_IF_ERROR(
                Sgemm(true, rows, in_size, in_group, wg, rows, xg, in_size, cols, in_size));
            for (int64_t m = 0; m < out_group; ++m) {
              const int64_t channel = gi * out_group + m;
              float* out = yp + (n * group * out_group + channel) * out_size;
              std::fill(out, out + out_size, bias != nullptr ? bias[channel] : 0.0f);
              for (int64_t t = 0; t < taps; ++t) {
                const int64_t kd = t / (g.kernel[1] * g.kernel[2]);
                const int64_t kh = (t / g.kernel[2]) % g.kernel[1];
                const int64_t kw = t % g.kernel[2];
                const float* col = cols + (m * taps + t) * in_size;
                for (int64_t id = 0; id < g.input[0]; ++id) {
                  const int64_t od = id * g.strides[0] - g.pads_begin[0] + kd * g.dilations[0];
                  if (od < 0 || od >= g.output[0]) continue;
                  for (int64_t ih = 0; ih < g.input[1]; ++ih) {
                    const int64_t oh = ih * g.strides[1] - g.pads_begin[1] + kh * g.dilations[1];
                    if (oh < 0 || oh >= g.output[1]) continue;
                    const float* src = col + (id * g.input[1] + ih) * g.input[2];
                    float* dst = out + (od * g.output[1] + oh) * g.output[2];
                    for (int64_t iw = 0; iw < g.input[2]; ++iw) {
                      const int64_t ow = iw * g.strides[2] - g.pads_begin[2] + kw * g.dilations[2];
                      if (ow >= 0 && ow < g.output[2]) dst[ow] += src[iw];
                    }
                  }
                }
              }
            }
          }
        }
        return absl::OkStatus();
      },
      workspace);
}

}  // namespace

absl::Status RegisterConvKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Conv", &PrepareConv));
  RETURN_IF_ERROR(registry->Register("ConvTranspose", &PrepareConvTranspose));
  RETURN_IF_ERROR(registry->Register(kFusedConvOp, &PrepareFusedConv));
  RETURN_IF_ERROR(registry->Register(kFusedConvDwOp, &PrepareFusedConvDw));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
