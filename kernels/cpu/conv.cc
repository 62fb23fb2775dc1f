// Conv (1-D/2-D/3-D, groups, depthwise) on oneDNN's convolution primitive, created at Prepare;
// weights known at plan time are reordered once into the primitive's preferred layout (and
// shared through the device's packed-weight cache). The algorithm (Winograd or direct) and the
// layout of conv chains follow the device's CpuKernelOptions.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Where the kernel's buffers lie in its workspace (offsets in bytes, 64-byte aligned).
struct ConvWorkspace {
  size_t scratch = 0;  // oneDNN's scratchpad
  size_t src = 0;      // X in the primitive's layout (when not plain)
  size_t dst = 0;      // Y in the primitive's layout (when not plain)
  size_t col = 0;      // X gathered per tap (taps as channels)
  size_t r = 0;        // R in Y's layout (a deferred sum of R stored otherwise)
  size_t total = 0;
};

// Output pixels (batch x height x width) from which oneDNN's Winograd is tried (WinogradShape),
// and from which our own F(2x2, 3x3) is (OwnWinogradFor; not measured below 14x14).
constexpr int64_t kWinogradMinPixels = 49;
constexpr int64_t kOwnWinogradMinPixels = 196;
// Below kOwnWinogradMinPixels with more than one intra-op thread, oneDNN's Winograd only from
// this many multiply-adds (C x M x output pixels) per thread: its F(2x2, 3x3) kernel splits the
// few tiles of a 7x7 output badly over threads (two threads, ms direct / Winograd, the middle of
// three runs of tools/bench/onednn_winograd_grid.cc: 512 -> 512 over 7x7, 6.4M per thread, 1.24
// / 0.99; 384 -> 256 over 13x13, 8.3M, 1.32 / 1.04; 256 -> 256 over 7x7, 1.6M, 0.23 / 0.28;
// 192 -> 384 over 7x7, 1.8M, 0.29 / 0.40; 64 -> 256 over 13x13, 1.4M, 0.24 / 0.24). On one
// thread it wins down to 64 -> 64 over 7x7 (0.027 / 0.022).
constexpr int64_t kWinogradMinThreadMacs = 4'000'000;
// Input channels from which Winograd is tried: its transforms work on whole channel blocks, so
// that a network's first convolution (3 channels, padded to 16) did 5x the work of its direct
// form (U-Net's 3 -> 16 at 128x128, batch 8, one thread: 6.2 ms; ONNX Runtime's 1.2 ms).
constexpr int64_t kWinogradMinInputChannels = 16;

// A convolution on oneDNN in the layouts the primitive prefers (blocked, e.g. nChw8c, for most
// shapes): the plain NCHW input is reordered into the workspace, the output reordered back. The
// residual (if any) is reordered into the destination first and added by a sum post-op.
class ConvKernel final : public PreparedKernel {
 public:
  struct Parts {
    dnnl::convolution_forward::primitive_desc pd;
    memory::desc src_md;  // X as the kernel reads it: pd's source, or the source of `taps`
    // Set when pd is the 1x1 convolution over X gathered per tap (conv.h, TapGather).
    std::optional<TapGather> taps;
    // W in the primitive's layout, shared by the plans of the device (see PackWeights); null
    // when the weights are bound at Run.
    std::shared_ptr<const memory> packed_weights;
    std::shared_ptr<const std::vector<float>> trimmed_weights;  // what packed_weights came from
    memory::desc src_plain, dst_plain;  // X and Y as stored (plain or channels-last)
    memory::desc residual_md;           // R as stored
    bool has_bias = false;
    bool residual = false;
    int threads = 1;  // the stream's intra-op threads
    ConvWorkspace workspace;
    // Set when R only broadcasts to Y: Y += R, then post.activation, after the primitive.
    std::optional<BroadcastPlan> epilogue;
    // Set when the primitive is Winograd without post.activation (DeferrableActivation), or
    // any primitive without a SlowPostOp: Y = act(Y) after it, over the stored output (a
    // blocked layout's zero padding stays zero).
    bool deferred_activation = false;
    // Set for a residual added after the activation that the primitive leaves out: Y += R after
    // it (and after the deferred activation), R reordered into Y's layout where stored otherwise.
    bool deferred_sum = false;
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
        primitive_(p_.pd),
        primitive_src_md_(p_.pd.src_desc()),
        primitive_dst_md_(p_.pd.dst_desc()),
        weights_md_(p_.pd.weights_desc()),
        bias_md_(p_.has_bias ? p_.pd.bias_desc() : memory::desc()),
        scratch_md_(p_.pd.scratchpad_desc()) {
    const dnnl::engine& engine = CpuEngine();
    if (p_.src_md != p_.src_plain) {
      src_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, p_.src_plain, engine, p_.src_md));
    }
    if (p_.pd.dst_desc() != p_.dst_plain) {
      dst_reorder_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, p_.pd.dst_desc(), engine, p_.dst_plain));
    }
    const memory::desc& r_into = p_.deferred_sum ? p_.dst_plain : p_.pd.dst_desc();
    if ((p_.residual || p_.deferred_sum) && r_into != p_.residual_md) {
      residual_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, p_.residual_md, engine, r_into));
    }
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return p_.workspace.total; }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? p_.dst_plain.get_size() : 0;
  }
  std::string implementation() const override {
    return absl::StrCat(p_.pd.impl_info_str(), p_.taps.has_value() ? " (taps as channels)" : "");
  }
  // Whether the primitive is oneDNN's F(2x2, 3x3) Winograd kernel.
  bool winograd_2x3() const { return absl::StrContains(p_.pd.impl_info_str(), "wino_2x3"); }
  // Whether the primitive is a oneDNN Winograd kernel whose output channels fill no whole block
  // of 16 (it computes the block's padding channels too).
  bool winograd_partial_block() const {
    return absl::StrContains(p_.pd.impl_info_str(), "wino") && p_.pd.dst_desc().dims()[1] % 16 != 0;
  }
  // The residual, where Run copies it into Y as it is (same layout as the primitive's dst,
  // which is Y's): it can be Y's buffer. Not where it is reordered into the dst or Y is.
  int in_place_input() const override {
    return p_.residual && !residual_reorder_ && !dst_reorder_ && !p_.epilogue.has_value() &&
                   p_.residual_md.get_size() == p_.dst_plain.get_size()
               ? 3
               : -1;
  }

  // Plain Y += broadcast R, then the activation (or the activation, then the sum).
  void BroadcastEpilogue(const KernelArgs& args) const {
    float* y = static_cast<float*>(args.outputs[0]);
    const float* r = static_cast<const float*>(args.inputs[3]);
    const int64_t stride = p_.epilogue->strides[0].back();
    ForEachRow(*p_.epilogue, [&](int64_t at, const int64_t* offs, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        const float sum = r[offs[0] + i * stride];
        y[at + i] = p_.post.sum_after_activation
                        ? ApplyActivation(p_.post.activation, y[at + i]) + sum
                        : ApplyActivation(p_.post.activation, y[at + i] + sum);
      }
    });
  }

  absl::Status Run(const KernelArgs& args) const override {
    if (runtime::NumElements(outputs_[0].shape) == 0) return absl::OkStatus();
    UseIntraOpThreads(p_.threads);
    try {
      ReusedMemories::Run bound(memories_);
      uint8_t* ws = static_cast<uint8_t*>(args.workspace);
      const memory& src_plain = bound.Bind(kSrcPlain, p_.src_plain, args.inputs[0]);
      const memory& dst_plain = bound.Bind(kDstPlain, p_.dst_plain, args.outputs[0]);
      const memory* src = &src_plain;
      if (src_reorder_) {
        src = &bound.Bind(kSrc, p_.src_md, ws + p_.workspace.src);
        ExecuteReorder(src_reorder_, src_plain, *src);
      }
      if (p_.taps.has_value()) {
        ThreadStream().wait();
        const memory& col = bound.Bind(kCol, primitive_src_md_, ws + p_.workspace.col);
        GatherTaps(*p_.taps, static_cast<const float*>(src->get_data_handle()),
                   static_cast<float*>(col.get_data_handle()), p_.threads);
        src = &col;
      }
      const memory* dst = &dst_plain;
      if (dst_reorder_) dst = &bound.Bind(kDst, primitive_dst_md_, ws + p_.workspace.dst);
      if (p_.residual) {
        const memory& residual = bound.Bind(kResidual, p_.residual_md, args.inputs[3]);
        if (residual_reorder_) {
          ExecuteReorder(residual_reorder_, residual, *dst);
        } else if (args.inputs[3] != dst->get_data_handle()) {
          std::memcpy(dst->get_data_handle(), args.inputs[3], p_.residual_md.get_size());
        }
      }
      const memory& weights = p_.packed_weights ? *p_.packed_weights
                                                : bound.Bind(kWeights, weights_md_, args.inputs[1]);
      std::array<dnnl_exec_arg_t, 7> exec{{{DNNL_ARG_SRC, src->get()},
                                           {DNNL_ARG_WEIGHTS, weights.get()},
                                           {DNNL_ARG_DST, dst->get()}}};
      int count = 3;
      if (p_.has_bias) {
        exec[count++] = {DNNL_ARG_BIAS, bound.Bind(kBias, bias_md_, args.inputs[2]).get()};
      }
      if (scratch_md_.get_size() > 0) {
        exec[count++] = {DNNL_ARG_SCRATCHPAD,
                         bound.Bind(kScratch, scratch_md_, ws + p_.workspace.scratch).get()};
      }
      if (p_.dw_weights) {
        exec[count++] = {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, p_.dw_weights->get()};
        exec[count++] = {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS,
                         bound
                             .Bind(kDwBias, p_.dw_bias_md,
                                   p_.dw_bias != nullptr ? p_.dw_bias : p_.dw_zero_bias.data())
                             .get()};
      }
      Execute(primitive_, exec.data(), count);
      if (dst_reorder_) ExecuteReorder(dst_reorder_, *dst, dst_plain);
      ThreadStream().wait();
      if (p_.epilogue.has_value()) BroadcastEpilogue(args);
      const void* r = p_.deferred_sum ? args.inputs[3] : nullptr;
      if (p_.deferred_sum && residual_reorder_) {
        const memory& stored = bound.Bind(kStored, p_.residual_md, r);
        const memory& as_y = bound.Bind(kStoredAsY, p_.dst_plain, ws + p_.workspace.r);
        ExecuteReorder(residual_reorder_, stored, as_y);
        ThreadStream().wait();
        r = ws + p_.workspace.r;
      }
      if (p_.deferred_activation || p_.deferred_sum) {
        ApplyConvActivation(p_.deferred_activation ? p_.post.activation : ConvActivation{},
                            static_cast<float*>(args.outputs[0]),
                            static_cast<int64_t>(p_.dst_plain.get_size() / sizeof(float)),
                            p_.threads, static_cast<const float*>(r));
      }
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
  // Run's memory objects, by slot.
  enum Slot {
    kSrcPlain,
    kDstPlain,
    kSrc,
    kCol,
    kDst,
    kResidual,
    kWeights,
    kBias,
    kScratch,
    kDwBias,
    kStored,
    kStoredAsY,
  };
  // The primitive's descriptors Run binds, queried once (each query copies a descriptor).
  memory::desc primitive_src_md_, primitive_dst_md_, weights_md_, bias_md_, scratch_md_;
  ReusedMemories memories_;
};

// Step 2: a residual that only broadcasts to Y is added (then the activation applied) after the
// primitive, on plain Y: its plan. One of Y's exact shape goes through oneDNN's sum post-op
// (nullopt).
absl::StatusOr<std::optional<BroadcastPlan>> ResidualBroadcast(const PrepareContext& context,
                                                               const ConvPostOps& post,
                                                               const ConvGeometry& g) {
  if (!post.residual || context.inputs[3].shape == g.y) return std::optional<BroadcastPlan>();
  auto shape = BroadcastShapes(context.inputs[3].shape, g.y);
  if (!shape.ok() || *shape != g.y || post.y != Storage::kPlain || post.r != Storage::kPlain) {
    return InvalidArgument(context, "residual ", runtime::ShapeToString(context.inputs[3].shape),
                           " does not broadcast to the output's shape ",
                           runtime::ShapeToString(g.y));
  }
  return std::optional<BroadcastPlan>(MakeBroadcastPlan(g.y, {context.inputs[3].shape}));
}

// The oneDNN descriptors of a convolution's geometry.
struct ConvDescs {
  memory::dims dilations, strides, pad_l, pad_r;
  memory::desc w_plain;  // W as given
  memory::desc w_md;     // W for the primitive: any layout when packed at Prepare
  memory::desc b_md;     // the bias (empty without one)
};

// `plain`'s dimensions in whatever layout the primitive prefers.
memory::desc AnyLayout(const memory::desc& plain) {
  return memory::desc(plain.dims(), memory::data_type::f32, memory::format_tag::any);
}

// Step 3: the window and the weights as oneDNN describes them.
ConvDescs MakeConvDescs(const ConvGeometry& g) {
  ConvDescs d;
  for (size_t i = 0; i < g.win.kernel.size(); ++i) {
    d.dilations.push_back(g.win.dilations[i] - 1);  // oneDNN counts dilation from 0
    d.strides.push_back(g.win.strides[i]);
    d.pad_l.push_back(g.win.pads_begin[i]);
    d.pad_r.push_back(g.win.pads_end[i]);
  }
  d.w_plain = PlainDesc(g.w_dims);
  d.w_md = g.known_weights ? AnyLayout(d.w_plain) : d.w_plain;
  d.b_md = g.has_bias ? PlainDesc({g.w[0]}) : memory::desc();
  return d;
}

// Step 4: the post-ops (residual sum, activation, fused depthwise convolution and its
// activation), or the broadcast epilogue Run applies instead of the first two.
absl::StatusOr<dnnl::primitive_attr> MakeConvAttr(const PrepareContext& context,
                                                  const ConvPostOps& post,
                                                  std::optional<BroadcastPlan> broadcast,
                                                  ConvKernel::Parts* parts) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (broadcast.has_value()) {
    parts->epilogue = std::move(broadcast);
    parts->residual = false;
    parts->post = post;
  } else if (post.residual) {  // (a sum after the activation is Run's: deferred_sum)
    ops.append_sum(1.0f);
  }
  if (!parts->epilogue.has_value() &&  // else applied with the residual, in Run
      !AppendActivation(post.activation, &ops)) {
    return InvalidArgument(context, "activation \"", post.activation.name, "\" is not supported");
  }
  if (post.depthwise.has_value()) {
    const ConvPostOps::Depthwise& dw = *post.depthwise;
    ops.append_dw(memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 3,
                  dw.stride, 1, 0, {});
    if (!AppendActivation(dw.activation, &ops)) {
      return InvalidArgument(context, "activation \"", dw.activation.name, "\" is not supported");
    }
  }
  attr.set_post_ops(ops);
  return attr;
}

// Output pixels of a 2-D convolution, batch included.
int64_t OutputPixels(const ConvGeometry& g) { return g.y[0] * g.y[2] * g.y[3]; }

// Whether Winograd (F(2x3) / F(4x3) tiles: about half the multiplications of a direct 3x3
// convolution) is worth trying: 2-D, 3x3, stride 1, no dilation, one group, and weights known at
// plan time (they are transformed once). From 49 output pixels (7x7) per batch: ResNet's last
// stage at batch 1 (512x512 3x3 over 7x7) is where the bound sits, and Winograd there took
// resnet18 b1 from 32.2 to 27.3 ms at one thread and 17.4 to 15.5 at two (resnet50 69.7 -> 66.8,
// 40.8 -> 39.6; densenet121's 128 -> 32 over 7x7 45.8 -> 45.4), for ~100 ms more plan time per
// such layer to transform its weights (resnet18's plan 437 -> 821 ms).
bool WinogradShape(const ConvGeometry& g) {
  return g.x.size() == 4 && g.known_weights && g.group == 1 && g.w[2] == 3 && g.w[3] == 3 &&
         g.win.strides[0] == 1 && g.win.strides[1] == 1 && g.win.dilations[0] == 1 &&
         g.win.dilations[1] == 1 && OutputPixels(g) >= kWinogradMinPixels &&
         g.w[1] >= kWinogradMinInputChannels;
}

// Output pixels (batch x height x width) from which a convolution run once (computed when
// planning: PrepareContext::run_once) takes Winograd: its weight transform, made for that one run,
// costs more than it saves on a smaller output (keypointrcnn_resnet50_fpn's keypoint head,
// 512 -> 512 over 2-4 regions of 14x14, per image: oneDNN's F(4x4, 3x3) transform about 43 ms
// per layer, eight layers; maskrcnn's mask head, 256 -> 256 over 100 regions of 14x14: about
// 11 ms of transform for about 24 ms saved).
constexpr int64_t kRunOnceWinogradMinPixels = 8192;

bool WinogradPaysOnce(const PrepareContext& context, const ConvGeometry& g) {
  return !context.run_once || OutputPixels(g) >= kRunOnceWinogradMinPixels;
}

// Whether oneDNN's Winograd gives each intra-op thread enough work (kWinogradMinThreadMacs).
// C x M x pixels is checked: a product beyond the bound (or int64) is enough work.
bool WinogradFeedsThreads(const PrepareContext& context, const ConvGeometry& g) {
  const int64_t threads = std::max(1, context.intra_op_threads);
  const int64_t pixels = OutputPixels(g);
  if (threads == 1 || pixels >= kOwnWinogradMinPixels) return true;
  const int64_t enough = kWinogradMinThreadMacs * threads;
  const std::optional<int64_t> macs =
      runtime::CheckedElementCount({g.w[0], g.w[1], pixels}, enough);
  return !macs.has_value() || *macs >= enough;
}

// oneDNN 2.6's F(4x4, 3x3) kernel (jit_wino_4x3) multiplies the tiles of a batch (N x
// ceil(OH/4) x ceil(OW/4)) a register block at a time, the block being the largest divisor of
// their count below 32. When that is under 7 and not all the tiles (a prime number of tiles per
// side from 37 up), the gemm does a few multiplies per load of the weights and the direct kernel
// wins (one thread, ms direct / Winograd: 32 -> 32 over 147x147, 37x37 tiles, block 1: 3.4 / 5.9,
// Inception-v3's first two 3x3 convolutions; at batch 4, block 4: 13.1 / 19.8; batch 6: 23.4 /
// 28.1; batch 7: 27.2 / 22.9; over 164x164, 41x41 tiles: 3.9 / 7.4; over 124x124, 31x31 tiles:
// 2.5 / 1.7; over 28x28, 7x7 tiles, block 7, 64 -> 64: 0.51 / 0.30).
bool WinogradTilesBlock(const ConvGeometry& g,
                        const dnnl::convolution_forward::primitive_desc& pd) {
  if (!absl::StrContains(pd.impl_info_str(), "wino_4x3")) return true;
  const int64_t tiles = g.y[0] * ((g.y[2] + 3) / 4) * ((g.y[3] + 3) / 4);
  int64_t block = 1;
  for (int64_t d = std::min<int64_t>(tiles, 31); d > 1; --d) {
    if (tiles % d == 0) {
      block = d;
      break;
    }
  }
  return block >= 7 || block == tiles;
}

// Step 5: the algorithm and the layouts. Any layout/algorithm for which oneDNN has only
// reference code is refused in favour of the next: Winograd (where `winograd`, the device's
// options and the bounds above allow it) → direct in the stored layouts → direct with oneDNN's
// choice of layouts plus reorders → whatever oneDNN has, reference code included.
absl::StatusOr<dnnl::convolution_forward::primitive_desc> ChooseConvPrimitive(
    const PrepareContext& context, const ConvGeometry& g, const ConvDescs& d,
    const ConvPostOps& post, const ConvKernel::Parts& parts, const dnnl::primitive_attr& attr,
    bool winograd) {
  const dnnl::engine& engine = CpuEngine();
  auto desc = [&](dnnl::algorithm algorithm, const memory::desc& src_md,
                  const memory::desc& dst_md) {
    return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src_md,
                                           d.w_md, d.b_md, dst_md, d.strides, d.dilations, d.pad_l,
                                           d.pad_r);
  };
  // A primitive for the given layouts, or none when oneDNN has only its reference code
  // for them (orders of magnitude slower than a reorder at either end).
  auto make =
      [&](dnnl::algorithm algorithm, const memory::desc& src_md,
          const memory::desc& dst_md) -> std::optional<dnnl::convolution_forward::primitive_desc> {
    try {
      dnnl::convolution_forward::primitive_desc pd(desc(algorithm, src_md, dst_md), attr, engine);
      if (absl::StartsWith(pd.impl_info_str(), "ref")) return std::nullopt;
      return pd;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  // Stored non-plain ends are used as they are (a chain of convolutions then needs no
  // reorder); a plain end lets oneDNN choose. Channels-last at either end: the primitive
  // works channels-last throughout.
  const memory::format_tag chain = ChainTag(context);
  const bool nhwc = post.x == Storage::kNhwc || post.y == Storage::kNhwc;
  const memory::desc src_md = nhwc                        ? StoredDesc(g.x, Storage::kNhwc, chain)
                              : post.x == Storage::kPlain ? AnyLayout(parts.src_plain)
                                                          : parts.src_plain;
  // The fused depthwise convolution wants the blocked layout for the 1x1's output.
  const memory::desc dst_md = post.depthwise.has_value() ? StoredDesc(g.y, Storage::kBlocked, chain)
                              : nhwc                     ? StoredDesc(g.y, Storage::kNhwc, chain)
                              : post.y == Storage::kPlain ? AnyLayout(parts.dst_plain)
                                                          : parts.dst_plain;
  std::optional<dnnl::convolution_forward::primitive_desc> chosen;
  if (winograd && WinogradShape(g) && !nhwc && WinogradFeedsThreads(context, g) &&
      WinogradPaysOnce(context, g)) {
    chosen = make(dnnl::algorithm::convolution_winograd, src_md, dst_md);
    if (chosen.has_value() && !WinogradTilesBlock(g, *chosen)) chosen.reset();
  }
  if (!chosen.has_value()) chosen = make(dnnl::algorithm::convolution_direct, src_md, dst_md);
  // Free plain ends that oneDNN resolved to channels-last (its brgemm 1x1 kernels) cost a
  // transposing reorder at each end, 2-4x the blocked layout's (yolo_style, batch 8: 8x192x40x40
  // plain to channels-last 1.23 ms, to blocked 0.55 ms): the blocked layout where it has one.
  // Of 1-D convolutions only pointwise ones: wider ones ran 6-10% slower blocked than on oneDNN's
  // channels-last brgemm kernels, reorders included (a text CNN's 300 -> 256 widths 3, 4 and 5
  // over 400 positions, batch 16, one thread: 79.7-81.5 against 86.2-87.8 ms).
  const bool pointwise_or_2d = g.x.size() != 3 || g.w[2] == 1;
  if (chosen.has_value() && post.x == Storage::kPlain && post.y == Storage::kPlain &&
      !post.depthwise.has_value() && pointwise_or_2d &&
      chosen->src_desc() == StoredDesc(g.x, Storage::kNhwc, chain)) {
    auto blocked =
        make(dnnl::algorithm::convolution_direct, StoredDesc(g.x, Storage::kBlocked, chain),
             StoredDesc(g.y, Storage::kBlocked, chain));
    if (blocked.has_value()) chosen = std::move(blocked);
  }
  if (!chosen.has_value() && post.x == Storage::kBlocked && post.y == Storage::kPlain &&
      !post.depthwise.has_value()) {
    // oneDNN 2.6 resolves a free destination to the blocked source's layout for most
    // convolutions but not for depthwise ones (only its reference code is left): ask for the
    // blocked layout at both ends and reorder the output, rather than reorder the input to
    // channels-last and back.
    chosen = make(dnnl::algorithm::convolution_direct, src_md,
                  StoredDesc(g.y, Storage::kBlocked, chain));
  }
  if (!chosen.has_value() && post.depthwise.has_value()) {
    return Unimplemented(context, "onednn has no fused 1x1 and depthwise convolution of ",
                         runtime::ShapeToString(g.x));
  }
  if (!chosen.has_value()) {
    chosen = make(dnnl::algorithm::convolution_direct, AnyLayout(parts.src_plain),
                  AnyLayout(parts.dst_plain));
  }
  if (chosen.has_value()) return *std::move(chosen);
  // Whatever oneDNN has, reference code included; its error (thrown) if none.
  return dnnl::convolution_forward::primitive_desc(
      desc(dnnl::algorithm::convolution_direct, AnyLayout(parts.src_plain),
           AnyLayout(parts.dst_plain)),
      attr, engine);
}

// Where taps as channels (conv.h) is tried: oneDNN's direct AVX2 convolution (its AVX-512 one and
// its other algorithms are left alone), 2-D, one group, weights known at plan time, more than one
// tap, a reduction (C x taps) of at least kTapsMinReduction, at least kTapsMinOutputChannels
// output channels, a gathered input of at most kTapsMaxColBytes, and few output pixels: strided,
// at most kTapsMaxThreadPixels per image and intra-op thread; stride 1, at most
// kTapsMaxStrideOnePixels (batch x OH x OW) per thread, and with more than one thread at least
// kTapsMinStrideOnePixels per thread. Measured on a grid of 3x3 convolutions (C 64-512, outputs
// 7x7-56x56, stride 1 and 2, batch 1 and 8, one and two threads; docs/benchmarks.md), this VM
// has two states: while its cache is contended from outside, the direct kernel slows (50-70
// GFLOP/s) and the 1x1 form took 0.6-0.9x its time inside these bounds; while quiet, the direct
// kernel runs at 80-93 GFLOP/s and the 1x1 form took 0.87-0.91x its time strided, 0.96-1.03x at
// stride 1 within these bounds, and 1.05-1.09x at stride 1 beyond them (512 channels over 7x7 at
// batch 8; 256 over 14x14 at batch 8), and at two threads over 7x7 at batch 1 1.3x.
constexpr int64_t kTapsMinReduction = 1440;
constexpr int64_t kTapsMinOutputChannels = 64;
constexpr int64_t kTapsMaxThreadPixels = 28 * 28;
constexpr int64_t kTapsMaxStrideOnePixels = 14 * 14;
constexpr int64_t kTapsMinStrideOnePixels = 64;
constexpr size_t kTapsMaxColBytes = size_t{64} << 20;

// Step 5b: the direct convolution replaced by a 1x1 convolution over X gathered per tap where
// that shape calls for it and oneDNN runs the 1x1 with its 1x1 kernel; the weights are packed
// here (through the device's cache, keyed by how they read W).
void TryTapsAsChannels(const PrepareContext& context, const ConvGeometry& g, const ConvDescs& d,
                       const ConvPostOps& post, const dnnl::primitive_attr& attr,
                       ConvKernel::Parts* parts) {
  const int64_t m = g.w[0], c = g.x[1];
  if (!CpuOptionsOf(context).conv_taps_as_channels || g.x.size() != 4 || g.group != 1 ||
      !g.known_weights || post.depthwise.has_value() || parts->deferred_activation ||
      !absl::StartsWith(parts->pd.impl_info_str(), "jit:avx2")) {
    return;
  }
  const int64_t taps = g.w[2] * g.w[3];
  // The gathered input [N, C x taps, OH, OW], counted with checks before anything else uses its
  // dimensions: within kTapsMaxColBytes, so are the products below.
  const std::optional<int64_t> col_floats = runtime::CheckedElementCount(
      {g.y[0], c, taps, g.y[2], g.y[3]}, static_cast<int64_t>(kTapsMaxColBytes / sizeof(float)));
  if (!col_floats.has_value() || *col_floats == 0) return;
  const int64_t threads = std::max(1, context.intra_op_threads);
  const bool strided = g.win.strides[0] > 1 || g.win.strides[1] > 1;
  const int64_t pixels = OutputPixels(g);
  const bool few_pixels = strided
                              ? g.y[2] * g.y[3] * threads <= kTapsMaxThreadPixels
                              : pixels <= kTapsMaxStrideOnePixels * threads &&
                                    (threads == 1 || pixels >= kTapsMinStrideOnePixels * threads);
  if (taps < 2 || c * taps < kTapsMinReduction || m < kTapsMinOutputChannels || !few_pixels) {
    return;
  }
  // The layout X is gathered from: the direct primitive's source, nChw8c or channels-last.
  const memory::desc& src = parts->pd.src_desc();
  memory::format_tag tag = memory::format_tag::undef;
  for (memory::format_tag t : {memory::format_tag::nChw8c, memory::format_tag::nhwc}) {
    if (src == memory::desc(src.dims(), memory::data_type::f32, t)) tag = t;
  }
  const std::optional<TapGather> gather = MakeTapGather(
      g.x, {g.y[2], g.y[3]}, g.win.kernel, g.win.strides, g.win.dilations, g.win.pads_begin, tag);
  if (!gather.has_value()) return;
  const dnnl::engine& engine = CpuEngine();
  const memory::desc col_md({g.y[0], c * taps, g.y[2], g.y[3]}, memory::data_type::f32, tag);
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  try {
    pd.emplace(dnnl::convolution_forward::desc(
                   dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, col_md,
                   AnyLayout(PlainDesc({m, c * taps, 1, 1})), d.b_md, parts->pd.dst_desc(), {1, 1},
                   {0, 0}, {0, 0}, {0, 0}),
               attr, engine);
  } catch (const dnnl::error&) {
    return;
  }
  if (!absl::StartsWith(pd->impl_info_str(), "jit_1x1") || pd->dst_desc() != parts->pd.dst_desc()) {
    return;
  }
  // The 1x1 weights [M, taps * C] read W [M, C, taps] as [M, taps, C]: strides (C taps, 1, taps).
  const memory::desc read({m, taps, c}, memory::data_type::f32, memory::dims{c * taps, 1, taps});
  const float* w = static_cast<const float*>(g.weights);
  parts->packed_weights =
      PackWeightsVia(context, g.weights, read, pd->weights_desc(), [&](memory& to) {
        std::vector<float> plain = TapsAsChannelsWeights(w, m, c, taps);
        memory from(PlainDesc({m, c * taps, 1, 1}), engine, plain.data());
        dnnl::stream stream(engine);
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      });
  parts->trimmed_weights = g.trimmed;  // the cache's key; keeps the address in use
  parts->src_md = src;
  parts->pd = *std::move(pd);
  parts->taps = gather;
}

// Tap regions (conv.h) replace the chosen primitive where they skip enough multiplications:
// the tap-pixel pairs that read inside X are at most kTapRegionsMaxShare of all of them, or at
// most kTapRegionsMaxShareOverGemm where oneDNN's choice is its im2col-and-gemm convolution
// (which it takes for most dilated ones). Measured with BM_AtrousConv (one thread, this VM's
// AVX2; the share in brackets): against gemm:jit, 2048 -> 256 over 28x28 at dilation 24 (18%)
// 110-127 -> 24-27 ms, at 12 (51%) 125 -> 65 ms, 512 -> 512 at 4 (82%) 55 -> 44 ms, 512 -> 256
// over 14x14 at 4 (66%) 7.3 -> 4.9 ms; 960 -> 256 over 14x14 at 12 (18%) 14.2 -> 3.5 ms.
// Against oneDNN's direct kernels they lose above the bound: 512 -> 512 over 7x7 without
// dilation (82%) 3.2 ms (jit_1x1, taps as channels) -> 4.0 ms, 256 over 14x14 (91%) 2.9 -> 3.2.
// The products run on sgemm with a reduction of C: at least kTapRegionsMinChannels input and
// output channels keep them efficient. Where oneDNN's choice is its gemm convolution and tap
// regions do not apply (more of the window inside X, or fewer input channels), the same kernel
// gathers the whole window channels-last and runs one sgemm per image (TapRegionsConv::
// whole_window): AlexNet's 11x11 stride-4 first layer of 3 channels (BM_Conv11x11Stride4) took
// 3.9 -> 2.8 ms at batch 1, 29.9 -> 27.0 ms at batch 8, where gemm:jit gathers it plain.
constexpr double kTapRegionsMaxShare = 0.5;
constexpr double kTapRegionsMaxShareOverGemm = 0.9;
constexpr int64_t kTapRegionsMinChannels = 16;

// The geometry, weights, bias, activation and storages of g in `conv` (the tap-regions kernel's
// operands, in every form).
void SetConvOperands(const ConvGeometry& g, const ConvPostOps& post, TapRegionsConv* conv) {
  conv->x = g.x;
  conv->y = g.y;
  conv->kernel = g.win.kernel;
  conv->strides = g.win.strides;
  conv->dilations = g.win.dilations;
  conv->pads_begin = g.win.pads_begin;
  conv->weights = static_cast<const float*>(g.weights);
  conv->weights_owner = g.trimmed;
  conv->has_bias = g.has_bias;
  conv->activation = post.activation;
  conv->x_storage = post.x;
  conv->y_storage = post.y;
  conv->residual = post.residual;
  conv->r_storage = post.r;
}

// The tap-regions form of g in place of the primitive `parts` has chosen, where the device
// allows it and it pays (above); nullopt otherwise.
std::optional<TapRegionsConv> TapRegionsFor(const PrepareContext& context, const ConvGeometry& g,
                                            const ConvPostOps& post,
                                            const ConvKernel::Parts& parts) {
  if (!CpuOptionsOf(context).conv_tap_regions || g.x.size() != 4 || g.group != 1 ||
      !g.known_weights || post.residual || parts.epilogue.has_value() ||
      post.depthwise.has_value() || g.w[0] < kTapRegionsMinChannels) {
    return std::nullopt;
  }
  const bool over_gemm = absl::StrContains(parts.pd.impl_info_str(), "gemm");
  dnnl::post_ops supported;
  if (!AppendActivation(post.activation, &supported)) return std::nullopt;  // refused before
  TapRegionsConv conv;
  conv.regions = TapRegions({g.x[2], g.x[3]}, {g.y[2], g.y[3]}, g.win.kernel, g.win.strides,
                            g.win.dilations, g.win.pads_begin);
  int64_t inside = 0;
  for (const TapRegion& r : conv.regions) inside += r.pixels();
  const double all = static_cast<double>(g.w[2] * g.w[3]) * static_cast<double>(g.y[2] * g.y[3]);
  const double bound = over_gemm ? kTapRegionsMaxShareOverGemm : kTapRegionsMaxShare;
  if (static_cast<double>(inside) > bound * all || g.x[1] < kTapRegionsMinChannels) {
    // Over oneDNN's gemm convolution: its im2col and gemm, channels-last, one image at a time
    // (window gathered within kTapsMaxColBytes).
    const std::optional<int64_t> window =
        runtime::CheckedElementCount({g.y[2], g.y[3], g.w[1], g.w[2], g.w[3]},
                                     static_cast<int64_t>(kTapsMaxColBytes / sizeof(float)));
    if (!over_gemm || !window.has_value()) return std::nullopt;
    conv.whole_window = true;
  }
  SetConvOperands(g, post, &conv);
  return conv;
}

// The whole window gathered channels-last and one sgemm per image (TapRegionsConv::
// whole_window) to race against oneDNN's direct kernel (`parts`, not run once: a race needs
// runs to time), where the device allows tap regions: 2-D convolutions wider than 1x1, one
// group, weights known, at least kTapRegionsMinChannels input and output channels, an image's
// window within kWholeWindowRaceMaxBytes (a larger one leaves the caches) and at most
// kWholeWindowRaceMaxPixels output pixels per image: the direct kernel loses on short rows of
// many channels, and a wider race, though each way timed alone was close, left a model slower
// (a detector's 32 -> 64 3x3 stride-2 stem over 8 images of 64x64 outputs, two threads: the model
// 11.2-11.4 ms a run with tap regions off, 11.8-12.9 on). Neither wins everywhere. Inception-v3 at
// batch 1, each step on oneDNN's jit:avx512_core against each on the gathered window (ms a run,
// medians of 20 runs in one process each, reprise-run --profile):
// - one thread: 288 -> 384 3x3 stride 2 over 35x35 3.55 -> 3.11, 384 -> 384 3x1 over 8x8
//   0.45 -> 0.30, 192 -> 192 7x1 over 17x17 0.87 -> 0.81, yet 160 -> 160 1x7 0.56 -> 0.59 and
//   96 -> 96 3x3 stride 2 0.29 -> 0.32;
// - two threads: the 3x1 0.29 -> 0.25, yet the 1x7 and 7x1 ones 0.23-0.40 -> 0.35-0.50.
constexpr size_t kWholeWindowRaceMaxBytes = size_t{8} << 20;
constexpr int64_t kWholeWindowRaceMaxPixels = 1024;

std::optional<TapRegionsConv> WholeWindowRaceFor(const PrepareContext& context,
                                                 const ConvGeometry& g, const ConvPostOps& post,
                                                 const ConvKernel::Parts& parts) {
  if (context.run_once || !CpuOptionsOf(context).conv_tap_regions || g.x.size() != 4 ||
      g.group != 1 || !g.known_weights || post.residual || parts.epilogue.has_value() ||
      post.depthwise.has_value() || parts.taps.has_value() || g.w[2] * g.w[3] < 2 ||
      g.w[0] < kTapRegionsMinChannels || g.w[1] < kTapRegionsMinChannels ||
      !absl::StartsWith(parts.pd.impl_info_str(), "jit:")) {
    return std::nullopt;
  }
  dnnl::post_ops supported;
  if (!AppendActivation(post.activation, &supported)) return std::nullopt;
  const std::optional<int64_t> window =
      runtime::CheckedElementCount({g.y[2], g.y[3], g.w[1], g.w[2], g.w[3]},
                                   static_cast<int64_t>(kWholeWindowRaceMaxBytes / sizeof(float)));
  if (!window.has_value() || g.y[2] * g.y[3] > kWholeWindowRaceMaxPixels) return std::nullopt;
  TapRegionsConv conv;
  conv.whole_window = true;
  SetConvOperands(g, post, &conv);
  return conv;
}

// Our own Winograd F(2x2, 3x3) (TapRegionsConv::winograd) in place of oneDNN's direct 3x3
// stride-1 kernel, where the device's options allow Winograd and oneDNN has none of its own
// here (AVX-512 only; conv_own_winograd_always takes ours there too): with at least
// kOwnWinogradMinChannels input and output channels, and kOwnWinogradMinProduct of them multiplied,
// the products keep up (BM_Conv3x3Winograd, one thread, ms direct -> ours: 32 -> 128 channels over
// 27x27 0.63 -> 0.51, 64 -> 64 over 56x56 2.61 -> 2.07, 128 over 28x28 2.87 -> 1.84, 256 over
// 14x14 2.84 -> 1.74, 512 over 14x14 11.2
// -> 9.7; 16 -> 64 over 55x55 0.69 -> 0.90 and, in U-Net, 32 -> 32 over 64x64 1.00 -> 1.34 and
// 64 -> 32 even stay direct). Below kOwnWinogradMinProduct it races the direct kernel (*race;
// not for a convolution run once): Inception-v3's 32 -> 64 over 147x147, where oneDNN's
// F(4x4, 3x3) is refused (WinogradTilesBlock), took 4.6 ms direct and 4.0 ours (one thread,
// AVX-512, BM_Conv3x3Winograd). A residual of Y's shape starts Y (a broadcast one is refused).
constexpr int64_t kOwnWinogradMinChannels = 32;
constexpr int64_t kOwnWinogradMinProduct = 4096;

std::optional<TapRegionsConv> OwnWinogradFor(const PrepareContext& context, const ConvGeometry& g,
                                             const ConvPostOps& post,
                                             const ConvKernel::Parts& parts, bool winograd,
                                             bool* race) {
  // (Each factor below the bound first: their product then cannot overflow.)
  *race = g.x[1] < kOwnWinogradMinProduct && g.w[0] < kOwnWinogradMinProduct &&
          g.x[1] * g.w[0] < kOwnWinogradMinProduct;
  if (!winograd || g.x.size() != 4 || g.group != 1 || !g.known_weights ||
      parts.epilogue.has_value() || post.depthwise.has_value() || !WinogradShape(g) ||
      !WinogradPaysOnce(context, g) || OutputPixels(g) < kOwnWinogradMinPixels ||
      g.win.kernel[0] != 3 || g.win.kernel[1] != 3 || g.x[1] < kOwnWinogradMinChannels ||
      g.w[0] < kOwnWinogradMinChannels || (*race && context.run_once) ||
      (absl::StrContains(parts.pd.impl_info_str(), "wino") &&
       !CpuOptionsOf(context).conv_own_winograd_always)) {
    return std::nullopt;
  }
  dnnl::post_ops supported;
  if (!AppendActivation(post.activation, &supported)) return std::nullopt;
  TapRegionsConv conv;
  conv.winograd = true;
  SetConvOperands(g, post, &conv);
  return conv;
}

// Step 6: the weights known at plan time in the primitive's layout (shared through the device's
// cache), and the fused depthwise convolution's weights and bias.
absl::Status PackConvWeights(const PrepareContext& context, const ConvGeometry& g,
                             const ConvDescs& d, const ConvPostOps& post,
                             ConvKernel::Parts* parts) {
  const dnnl::convolution_forward::primitive_desc& pd = parts->pd;
  if (g.known_weights && parts->packed_weights == nullptr) {
    parts->packed_weights = PackWeights(context, g.weights, d.w_plain, pd.weights_desc());
    parts->trimmed_weights = g.trimmed;  // PackWeights may borrow them
  }
  if (!post.depthwise.has_value()) return absl::OkStatus();
  const ConvPostOps::Depthwise& dw = *post.depthwise;
  if (pd.dst_desc().dims() != memory::dims(g.y_out.begin(), g.y_out.end())) {
    return Unimplemented(context, "onednn's fused depthwise output is not ",
                         runtime::ShapeToString(g.y_out));
  }
  const int64_t c = g.y[1];
  parts->dw_weights = PackWeights(
      context, dw.weights->data, PlainDesc({c, 1, 1, 3, 3}),
      pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS));
  parts->dw_bias_md =
      pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
  if (parts->dw_bias_md != PlainDesc({c})) {
    return Unimplemented(context, "onednn wants the depthwise bias in another layout");
  }
  if (dw.bias != nullptr) {
    parts->dw_bias = dw.bias->data;
  } else {
    parts->dw_zero_bias.assign(static_cast<size_t>(c), 0.0f);
  }
  return absl::OkStatus();
}

// Step 7: the scratchpad, then X and Y in the primitive's layouts where they are not stored so.
ConvWorkspace LayOutConvWorkspace(const ConvKernel::Parts& parts) {
  const dnnl::convolution_forward::primitive_desc& pd = parts.pd;
  ConvWorkspace ws;
  ws.scratch = 0;
  ws.src = ConvAlignUp(pd.scratchpad_desc().get_size());
  const size_t src_bytes = parts.src_md != parts.src_plain ? parts.src_md.get_size() : 0;
  ws.dst = ws.src + ConvAlignUp(src_bytes);
  const size_t dst_bytes = pd.dst_desc() != parts.dst_plain ? pd.dst_desc().get_size() : 0;
  ws.col = ws.dst + ConvAlignUp(dst_bytes);
  const size_t col_bytes = parts.taps.has_value() ? pd.src_desc().get_size() : 0;
  ws.r = ws.col + ConvAlignUp(col_bytes);
  const bool r_reordered = parts.deferred_sum && parts.residual_md != parts.dst_plain;
  ws.total = ws.r + ConvAlignUp(r_reordered ? parts.dst_plain.get_size() : 0);
  return ws;
}

// A convolution with `post` fused: the steps above, Winograd only where `winograd`.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvAs(const PrepareContext& context,
                                                              const ConvPostOps& given,
                                                              bool winograd) {
  // oneDNN keeps the OpenMP thread count a primitive is created with: create it with the
  // stream's intra-op threads, not the preparing thread's count (the core count by default).
  UseIntraOpThreads(context.intra_op_threads);
  ASSIGN_OR_RETURN(ConvGeometry g, CheckConvGeometry(context, given));
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, g.y_out)};
  if (g.empty()) {
    return MakeKernel(context, std::move(outputs),
                      [](const KernelArgs&) { return absl::OkStatus(); });
  }
  ASSIGN_OR_RETURN(std::optional<BroadcastPlan> broadcast, ResidualBroadcast(context, given, g));
  if (std::unique_ptr<PreparedKernel> own = OwnDepthwiseFor(context, g, given)) return own;
  const memory::format_tag chain = ChainTag(context);
  // Y = act(conv) + R: the primitive without R, then R (reordered to Y's layout where stored
  // otherwise) added over the stored Y, after the activation where that is deferred too.
  // oneDNN's direct kernels refuse a sum after an activation and its Winograd kernels any sum,
  // which left YOLO's bottlenecks (x + SiLU(conv)) on channels-last kernels with a reorder at
  // each end.
  ConvPostOps post = given;
  const bool deferred_sum = given.residual && given.sum_after_activation &&
                            !broadcast.has_value() && !given.depthwise.has_value();
  if (deferred_sum) post.residual = false;
  try {
    ConvDescs descs = MakeConvDescs(g);
    ConvKernel::Parts parts;
    parts.deferred_sum = deferred_sum;
    parts.src_plain = StoredDesc(g.x, post.x, chain);
    parts.dst_plain = StoredDesc(g.y_out, post.y, chain);
    parts.residual_md = StoredDesc(g.y, post.r, chain);
    parts.has_bias = g.has_bias;
    parts.residual = post.residual;
    parts.threads = context.intra_op_threads;
    parts.post = post;
    ASSIGN_OR_RETURN(const dnnl::primitive_attr attr,
                     MakeConvAttr(context, post, std::move(broadcast), &parts));
    ASSIGN_OR_RETURN(parts.pd, ChooseConvPrimitive(context, g, descs, post, parts, attr, winograd));
    ConvGeometry merged = g;
    if (OnGemmOrReference(parts.pd) &&
        MergeNarrowGroups(&merged, chain == memory::format_tag::nChw16c  ? 16
                                   : chain == memory::format_tag::nChw8c ? 8
                                                                         : 0)) {
      ConvDescs merged_descs = MakeConvDescs(merged);
      absl::StatusOr<dnnl::convolution_forward::primitive_desc> pd =
          absl::UnimplementedError("no merged primitive");
      try {
        pd = ChooseConvPrimitive(context, merged, merged_descs, post, parts, attr, winograd);
      } catch (const dnnl::error&) {
        // keep the groups as they are
      }
      if (pd.ok() && !OnGemmOrReference(*pd)) {
        g = std::move(merged);
        descs = std::move(merged_descs);
        parts.pd = *std::move(pd);
      }
    }
    // The primitive for `post` without its activation (DeferredActivation applies it after).
    auto without_activation = [&]() {
      ConvPostOps bare = post;
      bare.activation = ConvActivation{};
      dnnl::primitive_attr bare_attr;
      bare_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      return ChooseConvPrimitive(context, g, descs, bare, parts, bare_attr, winograd);
    };
    if (DeferrableActivation(post.activation) && !post.residual && !post.depthwise.has_value() &&
        !parts.epilogue.has_value() && winograd && WinogradShape(g) &&
        !absl::StrContains(parts.pd.impl_info_str(), "wino")) {
      // oneDNN's Winograd refused the activation: Winograd without it, the activation after
      // (EfficientNetV2-S's 48 -> 192 3x3 convolution at 56x56 with SiLU: 2.7 ms direct, 1.0 ms
      // Winograd plus the SiLU pass; one thread).
      ASSIGN_OR_RETURN(auto bare, without_activation());
      if (absl::StrContains(bare.impl_info_str(), "wino")) {
        parts.pd = std::move(bare);
        parts.post = post;
        parts.deferred_activation = true;
      }
    }
    if (SlowPostOp(post.activation) && !post.residual && !post.depthwise.has_value() &&
        !parts.epilogue.has_value() && !parts.deferred_activation) {
      ASSIGN_OR_RETURN(auto without, without_activation());
      if (without.impl_info_str() == parts.pd.impl_info_str() &&
          without.dst_desc() == parts.pd.dst_desc()) {
        parts.pd = std::move(without);
        parts.post = post;
        parts.deferred_activation = true;
      }
    }
    // Our own kernel in place of oneDNN's, or raced against it (rival).
    std::optional<TapRegionsConv> rival;
    if (!deferred_sum) {  // (our own kernels add no deferred sum)
      bool race = false;
      if (std::optional<TapRegionsConv> own =
              OwnWinogradFor(context, g, post, parts, winograd, &race)) {
        if (!race) return PrepareTapRegionsConv(context, *std::move(own));
        rival = std::move(own);
      } else if (std::optional<TapRegionsConv> regions = TapRegionsFor(context, g, post, parts)) {
        return PrepareTapRegionsConv(context, *std::move(regions));
      }
    }
    parts.src_md = parts.pd.src_desc();
    TryTapsAsChannels(context, g, descs, post, attr, &parts);
    RETURN_IF_ERROR(PackConvWeights(context, g, descs, post, &parts));
    parts.workspace = LayOutConvWorkspace(parts);
    if (!deferred_sum && !rival.has_value()) rival = WholeWindowRaceFor(context, g, post, parts);
    auto kernel = std::make_unique<ConvKernel>(context.op, NodeLabel(context), std::move(outputs),
                                               std::move(parts));
    if (!rival.has_value()) return kernel;
    // oneDNN's kernel alone where ours cannot be prepared: the race is only a choice.
    absl::StatusOr<std::unique_ptr<PreparedKernel>> ours =
        PrepareTapRegionsConv(context, *std::move(rival));
    if (!ours.ok()) return kernel;
    return FasterOf(std::move(kernel), *std::move(ours), NextTrialPhase());
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the convolution of ",
                         runtime::ShapeToString(g.x), " by ", runtime::ShapeToString(g.w), ": ",
                         e.what());
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConv(const PrepareContext& context) {
  return PrepareConvWith(context, ConvPostOps{});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConv(const PrepareContext& context) {
  ConvPostOps post;
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(post.activation, ReadConvActivation(attrs, ""));
  ASSIGN_OR_RETURN(post.x, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(post.y, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(post.r, LayoutAttr(context, "r_layout"));
  if (context.inputs.size() == 4) {
    if (!HasInput(context, 3)) return InvalidArgument(context, "the residual input is absent");
    RETURN_IF_ERROR(ExpectType(context, 3, {DataType::kFloat32}));
    post.residual = true;
    ASSIGN_OR_RETURN(const int64_t after, attrs.GetInt("sum_after_activation", 0));
    post.sum_after_activation = after != 0;
  }
  return PrepareConvWith(context, post);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvWith(const PrepareContext& context,
                                                                const ConvPostOps& post) {
  const bool winograd = CpuOptionsOf(context).conv_winograd;
  std::unique_ptr<PreparedKernel> phases = winograd ? MaybeDilatedAsPhases(context, post) : nullptr;
  if (phases != nullptr) return phases;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> kernel, PrepareConvAs(context, post, winograd));
  const auto* conv = dynamic_cast<const ConvKernel*>(kernel.get());
  // A kernel run once has no runs to time: oneDNN's choice stands.
  if (conv == nullptr || !(conv->winograd_2x3() || conv->winograd_partial_block()) ||
      context.run_once) {
    return kernel;
  }
  // oneDNN's F(2x2, 3x3) kernel loses to the direct one on shapes its own choice and the bounds
  // above miss (onednn_winograd_grid, 14x14, batch 1, ms direct / Winograd: one thread 96 -> 208
  // 0.36 / 0.65, yet 128 -> 256 0.55 / 0.29; two threads 224 -> 224 0.37 / 0.80, yet 176 -> 352
  // 0.48 / 0.28): both, the faster by timed runs (resnet18 at one thread: plan 391 -> 536 ms,
  // peak RSS 377 -> 414 MiB for the direct kernel's packed weights). So does its F(4x4, 3x3)
  // one with output channels short of a block (an image-restoration network's last layer,
  // 16 -> 3 over 8x128x128, one thread: 11.5 ms against the direct kernel's 7.8; yet 64 -> 3
  // over 4x128x128: 13.1 against 14.3).
  absl::StatusOr<std::unique_ptr<PreparedKernel>> direct = PrepareConvAs(context, post, false);
  if (!direct.ok()) return kernel;
  return FasterOf(std::move(kernel), *std::move(direct), NextTrialPhase());
}

absl::Status RegisterConvKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Conv", &PrepareConv));
  RETURN_IF_ERROR(registry->Register(kFusedConvOp, &PrepareFusedConv));
  RETURN_IF_ERROR(registry->Register(kFusedConvDwOp, &PrepareFusedConvDw));  // conv_dw.cc
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
