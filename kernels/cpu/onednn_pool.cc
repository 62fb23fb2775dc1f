// kFusedMaxPoolOp / kFusedAveragePoolOp: 2-D max and average pooling on oneDNN, for a MaxPool or
// AveragePool inside a chain of convolutions whose input and/or output is stored in the
// convolutions' blocked layout (x_layout / y_layout), so that the chain is not reordered around
// it. ONNX's window (pads, auto_pad, strides) comes from window.h; padded positions never win
// (oneDNN's max pooling ignores them, as ONNX does). Averages divide as count_include_pad says:
// oneDNN's include-padding average counts the explicit pads (ceil_mode's extra positions too,
// so that form is refused), its exclude-padding average counts only the input's elements.
// Where X or Y is stored with the channels innermost (blocked or channels-last), our own loops
// run instead, in that storage (InterleavedPool, pool.h; the other side reordered): oneDNN
// 2.6's AVX2 pooling took 0.58 ms for a 3x3 window over 192 channels of 28x28, ours 0.08.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

size_t AlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

class OnednnPoolKernel final : public PreparedKernel {
 public:
  OnednnPoolKernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs,
                   dnnl::pooling_forward::primitive_desc pd, memory::desc x_stored,
                   memory::desc y_stored, int threads)
      : op_(op),
        label_(std::move(label)),
        outputs_(std::move(outputs)),
        pd_(std::move(pd)),
        x_stored_(std::move(x_stored)),
        y_stored_(std::move(y_stored)),
        threads_(threads),
        primitive_(pd_) {
    const dnnl::engine& engine = CpuEngine();
    if (pd_.src_desc() != x_stored_) {
      src_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_stored_, engine, pd_.src_desc()));
    }
    if (pd_.dst_desc() != y_stored_) {
      dst_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, pd_.dst_desc(), engine, y_stored_));
    }
    src_at_ = AlignUp(pd_.scratchpad_desc().get_size());
    dst_at_ = src_at_ + (src_reorder_ ? AlignUp(pd_.src_desc().get_size()) : 0);
    total_ = dst_at_ + (dst_reorder_ ? AlignUp(pd_.dst_desc().get_size()) : 0);
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_.get_size() : 0; }

  std::string implementation() const override { return pd_.impl_info_str(); }

  absl::Status Run(const KernelArgs& args) const override {
    if (runtime::NumElements(outputs_[0].shape) == 0) return absl::OkStatus();
    UseIntraOpThreads(threads_);
    try {
      ReusedMemories::Run bound(memories_);
      uint8_t* ws = static_cast<uint8_t*>(args.workspace);
      const memory& x = bound.Bind(0, x_stored_, args.inputs[0]);
      const memory& y = bound.Bind(1, y_stored_, args.outputs[0]);
      const memory* src = &x;
      if (src_reorder_) {
        src = &bound.Bind(2, pd_.src_desc(), ws + src_at_);
        ExecuteReorder(src_reorder_, x, *src);
      }
      const memory& dst = dst_reorder_ ? bound.Bind(3, pd_.dst_desc(), ws + dst_at_) : y;
      dnnl_exec_arg_t exec[3] = {{DNNL_ARG_SRC, src->get()}, {DNNL_ARG_DST, dst.get()}};
      int count = 2;
      if (pd_.scratchpad_desc().get_size() > 0) {
        exec[count++] = {DNNL_ARG_SCRATCHPAD, bound.Bind(4, pd_.scratchpad_desc(), ws).get()};
      }
      Execute(primitive_, exec, count);
      if (dst_reorder_) ExecuteReorder(dst_reorder_, dst, y);
      ThreadStream().wait();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(label_, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  absl::string_view op_;
  std::string label_;
  std::vector<TensorDesc> outputs_;
  dnnl::pooling_forward::primitive_desc pd_;
  memory::desc x_stored_, y_stored_;
  int threads_;
  dnnl::pooling_forward primitive_;
  dnnl::reorder src_reorder_, dst_reorder_;  // stored ↔ the primitive's layout (or empty)
  size_t src_at_ = 0, dst_at_ = 0, total_ = 0;
  ReusedMemories memories_;  // Run's: X, Y, src, dst, scratchpad
};

// The same on our own loops (InterleavedPool) in a storage with the channels innermost: X's,
// or Y's where X is plain. A side stored otherwise is reordered through the workspace.
class InterleavedPoolKernel final : public PreparedKernel {
 public:
  InterleavedPoolKernel(absl::string_view op, std::string label, std::vector<TensorDesc> outputs,
                        InterleavedPool pool, int64_t batch, int threads, memory::desc x_stored,
                        memory::desc x_pooled, memory::desc y_pooled, memory::desc y_stored)
      : op_(op),
        label_(std::move(label)),
        outputs_(std::move(outputs)),
        pool_(std::move(pool)),
        batch_(batch),
        threads_(threads),
        x_stored_(std::move(x_stored)),
        x_pooled_(std::move(x_pooled)),
        y_pooled_(std::move(y_pooled)),
        y_stored_(std::move(y_stored)) {
    const dnnl::engine& engine = CpuEngine();
    if (x_pooled_ != x_stored_) {
      src_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_stored_, engine, x_pooled_));
      dst_at_ = AlignUp(x_pooled_.get_size());
    }
    if (y_pooled_ != y_stored_) {
      dst_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, y_pooled_, engine, y_stored_));
      total_ = dst_at_ + AlignUp(y_pooled_.get_size());
    } else {
      total_ = dst_at_;
    }
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_.get_size() : 0; }
  std::string implementation() const override {
    return absl::StrCat("own loops, ", pool_.lanes(), " channels innermost",
                        src_reorder_ ? ", input reordered" : "",
                        dst_reorder_ ? ", output reordered" : "");
  }

  absl::Status Run(const KernelArgs& args) const override {
    if (runtime::NumElements(outputs_[0].shape) == 0) return absl::OkStatus();
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    const void* x = args.inputs[0];
    void* y = dst_reorder_ ? ws + dst_at_ : args.outputs[0];
    try {
      ReusedMemories::Run bound(memories_);
      if (src_reorder_) {
        UseIntraOpThreads(threads_);
        ExecuteReorder(src_reorder_, bound.Bind(0, x_stored_, x), bound.Bind(1, x_pooled_, ws));
        ThreadStream().wait();
        x = ws;
      }
      pool_.Run(static_cast<const float*>(x), static_cast<float*>(y), batch_, threads_);
      if (dst_reorder_) {
        UseIntraOpThreads(threads_);
        ExecuteReorder(dst_reorder_, bound.Bind(2, y_pooled_, y),
                       bound.Bind(3, y_stored_, args.outputs[0]));
        ThreadStream().wait();
      }
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(label_, ": onednn reorder failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  absl::string_view op_;
  std::string label_;
  std::vector<TensorDesc> outputs_;
  InterleavedPool pool_;
  int64_t batch_;
  int threads_;
  memory::desc x_stored_, x_pooled_, y_pooled_, y_stored_;
  dnnl::reorder src_reorder_, dst_reorder_;  // stored <-> the pooled storage (or empty)
  size_t dst_at_ = 0, total_ = 0;
  ReusedMemories memories_;  // Run's: X and its pooled copy, Y's pooled copy and Y
};

// The lanes of InterleavedPool for values stored as `how` in a chain of layout `chain`: the
// channel block of the blocked layout, all channels for channels-last; none for plain storage.
std::optional<int64_t> InterleavedLanes(Storage how, memory::format_tag chain, int64_t channels) {
  if (how == Storage::kPlain || channels <= 0) return std::nullopt;  // no channels: oneDNN
  if (how == Storage::kNhwc || chain == memory::format_tag::nhwc) return channels;
  if (chain == memory::format_tag::nChw8c) return 8;
  if (chain == memory::format_tag::nChw16c) return 16;
  return std::nullopt;
}

template <bool kAverage>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedPool(const PrepareContext& context) {
  // oneDNN keeps the OpenMP thread count a primitive is created with: create it with the
  // stream's intra-op threads, not the preparing thread's count (the core count by default).
  UseIntraOpThreads(context.intra_op_threads);
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  if (context.num_outputs != 1) {
    return InvalidArgument(context, "has ", context.num_outputs,
                           " outputs; Indices is not produced");
  }
  const Shape& x = context.inputs[0].shape;
  if (x.size() != 4) {
    return InvalidArgument(context, "input ", runtime::ShapeToString(x), " is not 4-D");
  }
  const Attributes& attrs = AttrsOf(context);
  if (!attrs.Has("kernel_shape")) return InvalidArgument(context, "kernel_shape is required");
  ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.GetInt("ceil_mode", 0));
  ASSIGN_OR_RETURN(int64_t include_pad, attrs.GetInt("count_include_pad", 0));
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
  if (kAverage) {
    if (include_pad != 0 && ceil_mode != 0) {
      return Unimplemented(context, "ceil_mode with count_include_pad is not supported here");
    }
    algorithm = include_pad != 0 ? dnnl::algorithm::pooling_avg_include_padding
                                 : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  ASSIGN_OR_RETURN(Storage x_storage, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(Storage y_storage, LayoutAttr(context, "y_layout"));
  ASSIGN_OR_RETURN(Window win, ForwardWindow(context, {x[2], x[3]}, {}, ceil_mode != 0));
  for (int64_t d : win.dilations) {
    if (d != 1) return InvalidArgument(context, "dilations must be 1");
  }
  const Shape y = {x[0], x[1], win.output[0], win.output[1]};
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y)};
  const memory::format_tag chain = ChainTag(context);
  const memory::desc x_stored = StoredDesc(x, x_storage, chain);
  const memory::desc y_stored = StoredDesc(y, y_storage, chain);
  // oneDNN wants (in + pad_l + pad_r - kernel) / stride + 1 == out: ceil_mode's extra window
  // becomes more right padding, which max pooling and the exclude-padding average ignore.
  memory::dims strides, kernel, pad_l, pad_r;
  for (int i = 0; i < 2; ++i) {
    const int64_t need =
        (win.output[i] - 1) * win.strides[i] + win.kernel[i] - win.input[i] - win.pads_begin[i];
    strides.push_back(win.strides[i]);
    kernel.push_back(win.kernel[i]);
    pad_l.push_back(win.pads_begin[i]);
    pad_r.push_back(std::max(win.pads_end[i], need));
  }
  const Storage pooled = x_storage != Storage::kPlain ? x_storage : y_storage;
  const std::optional<int64_t> lanes = InterleavedLanes(pooled, chain, x[1]);
  if (lanes.has_value()) {
    try {
      return std::make_unique<InterleavedPoolKernel>(
          kAverage ? kFusedAveragePoolOp : kFusedMaxPoolOp, NodeLabel(context), std::move(outputs),
          InterleavedPool(win, !kAverage, include_pad != 0, x[1], *lanes), x[0],
          context.intra_op_threads, x_stored, StoredDesc(x, pooled, chain),
          StoredDesc(y, pooled, chain), y_stored);
    } catch (const dnnl::error& e) {
      return Unimplemented(context, "onednn rejected a reorder of ", runtime::ShapeToString(x),
                           ": ", e.what());
    }
  }
  auto make = [&](const memory::desc& src,
                  const memory::desc& dst) -> std::optional<dnnl::pooling_forward::primitive_desc> {
    try {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, src, dst,
                                       strides, kernel, pad_l, pad_r);
      dnnl::pooling_forward::primitive_desc pd(desc, attr, CpuEngine());
      if (absl::StartsWith(pd.impl_info_str(), "ref")) return std::nullopt;
      return pd;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  // The stored layouts as they are; else the blocked layout at both ends, with reorders.
  std::optional<dnnl::pooling_forward::primitive_desc> pd = make(x_stored, y_stored);
  if (!pd.has_value())
    pd = make(StoredDesc(x, Storage::kBlocked, chain), StoredDesc(y, Storage::kBlocked, chain));
  if (!pd.has_value()) pd = make(PlainDesc(x), PlainDesc(y));
  if (!pd.has_value()) {
    return Unimplemented(context, "onednn has no pooling of ", runtime::ShapeToString(x));
  }
  try {
    return std::make_unique<OnednnPoolKernel>(
        kAverage ? kFusedAveragePoolOp : kFusedMaxPoolOp, NodeLabel(context), std::move(outputs),
        std::move(*pd), x_stored, y_stored, context.intra_op_threads);
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected the pooling of ", runtime::ShapeToString(x),
                         ": ", e.what());
  }
}

}  // namespace

absl::Status RegisterOnednnPoolKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register(kFusedMaxPoolOp, &PrepareFusedPool<false>));
  return registry->Register(kFusedAveragePoolOp, &PrepareFusedPool<true>);
}

}  // namespace reprise::kernels::cpu
