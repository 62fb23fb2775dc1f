// com.reprise.FusedConvDw: a 1x1 convolution followed by a depthwise 3x3 one, as one oneDNN
// primitive (the depthwise post-op) where the intermediate is large, else as two; on two or more
// threads, where it is large, whichever of the two forms runs faster (FasterOf).
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

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
    mid_at_ = ConvAlignUp(first_->workspace_bytes());
    const size_t mid = std::max(
        first_->output_storage_bytes(0),
        static_cast<size_t>(runtime::NumElements(first_->outputs()[0].shape)) * sizeof(float));
    second_ws_at_ = mid_at_ + ConvAlignUp(mid);
    total_ = second_ws_at_ + second_->workspace_bytes();
  }

  absl::string_view op() const override { return kFusedConvDwOp; }
  const std::vector<TensorDesc>& outputs() const override { return second_->outputs(); }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return second_->output_storage_bytes(i); }
  std::string implementation() const override {
    return absl::StrCat(first_->implementation(), " + ", second_->implementation());
  }

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

// The two convolutions as two primitives, the 1x1 one's output (blocked) in the workspace.
// `first` is the context of the 1x1 convolution (inputs X, W, B).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareApart(const PrepareContext& first,
                                                             const ConvPostOps& post,
                                                             const ConvPostOps::Depthwise& dw) {
  const TensorDesc& w = first.inputs[1];
  ConvPostOps one = post;
  one.y = Storage::kBlocked;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> pointwise, PrepareConvWith(first, one));
  Attributes dw_attrs;
  dw_attrs.Set("group", w.shape[0]);
  dw_attrs.Set("kernel_shape", std::vector<int64_t>{3, 3});
  dw_attrs.Set("strides", std::vector<int64_t>{dw.stride, dw.stride});
  dw_attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  std::vector<TensorDesc> dw_inputs = {pointwise->outputs()[0], *dw.weights};
  dw_inputs[0].data = nullptr;
  if (dw.bias != nullptr) dw_inputs.push_back(*dw.bias);
  PrepareContext second = first;
  second.inputs = dw_inputs;
  second.attributes = &dw_attrs;
  ConvPostOps two;
  two.activation = dw.activation;
  two.x = Storage::kBlocked;
  two.y = post.y;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> depthwise, PrepareConvWith(second, two));
  std::vector<int> rest = {3};
  if (dw.bias != nullptr) rest.push_back(4);
  return std::make_unique<TwoStageKernel>(std::move(pointwise), std::move(depthwise),
                                          std::move(rest));
}

}  // namespace

// kFusedConvDwOp: inputs X, W, B (1x1 convolution), W_dw, B_dw (depthwise 3x3, pads 1).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConvDw(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 5));
  if (!HasInput(context, 3)) return InvalidArgument(context, "the depthwise weights are missing");
  const Attributes& attrs = AttrsOf(context);
  ConvPostOps post;
  ASSIGN_OR_RETURN(post.activation, ReadConvActivation(attrs, ""));
  ASSIGN_OR_RETURN(post.x, LayoutAttr(context, "x_layout"));
  ASSIGN_OR_RETURN(post.y, LayoutAttr(context, "y_layout"));
  ConvPostOps::Depthwise dw;
  ASSIGN_OR_RETURN(dw.stride, attrs.GetInt("dw_stride", 1));
  ASSIGN_OR_RETURN(dw.activation, ReadConvActivation(attrs, "dw_"));
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
  // depthwise post-op on NHWC tensors computed wrong values (MobileNetV2 with the chain layout
  // nhwc, against PyTorch's output).
  const bool blocked = ChainTag(context) != memory::format_tag::nhwc && post.x != Storage::kNhwc &&
                       post.y != Storage::kNhwc;
  if (!blocked || mid_bytes < kDepthwiseFuseMinBytes) return PrepareApart(first, post, dw);
  ConvPostOps fused = post;
  fused.depthwise = dw;
  auto kernel = PrepareConvWith(first, fused);
  if (kernel.status().code() == absl::StatusCode::kUnimplemented) {
    return PrepareApart(first, post, dw);  // oneDNN has no fused form here
  }
  if (!kernel.ok() || context.intra_op_threads < 2) return kernel;
  // On more threads neither form wins everywhere (EfficientNet-B0 at batch 8, two threads: 5 %
  // faster apart; MobileNetV2: 8 % slower apart): the faster by timed runs.
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> apart, PrepareApart(first, post, dw));
  return FasterOf(*std::move(kernel), std::move(apart), NextTrialPhase());
}

}  // namespace reprise::kernels::cpu
