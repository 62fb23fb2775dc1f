// Load-time rewrites around Conv: BatchNormalization folded into the Conv's (or ConvTranspose's)
// weights, the residual Add and the activation (Relu, Clip) fused into one
// kernels::cpu::kFusedConvOp node (oneDNN post-ops), a ConvTranspose's activation into
// kernels::cpu::kFusedConvTransposeOp, and the convolutions' blocked layout kept between fused
// convolutions.
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_CONV_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_CONV_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Folds a BatchNormalization (inference form, one output) whose input is a float Conv or
/// ConvTranspose with constant weights (and constant bias, if any) used only by it, and whose
/// scale, B, mean and var are constants, into the node's weights and bias; likewise a Mul of such
/// a node's output by a constant of one value or one per output channel (a residual branch's
/// scale: Inception-ResNet's 0.17, EDSR's 0.1). Returns how many were folded.
absl::StatusOr<int> FoldBatchNormIntoConv(Graph* graph);

/// Folds a Pad (constant mode, constant pads on the spatial axes only, none negative, a value
/// of 0) whose output's only use is the data input of a Conv or an AveragePool into that node's
/// pads: the AveragePool then counts the padding (count_include_pad 1), which is what a window
/// over the zeros computes. Only an AveragePool with ceil_mode 0, dilations 1, no uncounted
/// padding of its own and every pad narrower than its window takes it. Returns how many Pads
/// were folded.
int FoldPadIntoConvAndPool(Graph* graph);

/// Rewrites Conv [→ Add(residual)] [→ an activation: Relu, LeakyRelu, Clip (constant bounds),
/// Sigmoid, Tanh, HardSigmoid, HardSwish, x * Sigmoid(x) as exported SiLU, or Gelu (FuseGelu's
/// from Erf or Tanh, or opset 20's)], or Conv → an activation → Add(residual) (attribute
/// sum_after_activation 1), into one fused conv
/// node when `registry` has the fused op; each intermediate must have no other use and not be a
/// graph output. Plain Convs become fused convs too (with no post-op) so that the layout pass
/// sees every 2-D convolution. Returns how many nodes were absorbed (Adds and activations).
int FuseConvPostOps(Graph* graph, const KernelRegistry& registry);

/// Rewrites ConvTranspose → an activation (any that FuseConvPostOps takes; the intermediate
/// with no other use and not a graph output) into one kernels::cpu::kFusedConvTransposeOp node,
/// when `registry` has it: a decoder's or a generator's upsampling (after
/// FoldBatchNormIntoConv has taken its BatchNormalization). Returns how many were fused.
int FuseConvTransposeActivations(Graph* graph, const KernelRegistry& registry);

/// Rewrites a 1x1 fused conv (stride 1, no pads, one group, no residual, constant weights) whose
/// output's only use is a depthwise 3x3 fused conv (pads 1, stride 1 or 2, constant weights, no
/// residual) into one kernels::cpu::kFusedConvDwOp node (both activations kept), when
/// `registry` has it: MobileNet's expand and depthwise convolutions. Returns how many pairs.
int FuseDepthwiseIntoPointwise(Graph* graph, const KernelRegistry& registry);

/// Rewrites a 2-D MaxPool (Indices unused, dilations 1) or AveragePool (ceil_mode 0, each pad
/// narrower than the window) whose input comes from a 2-D fused conv, a fused pooling or a fused
/// concatenation into kernels::cpu::kFusedMaxPoolOp / kFusedAveragePoolOp, which read and write the
/// blocked layout, when `registry` has them. Returns how many were rewritten.
int FusePoolsIntoConvChains(Graph* graph, const KernelRegistry& registry);

/// Rewrites a Concat along axis 1 (or -3) whose every input comes from a 2-D fused conv, a fused
/// max pooling or a fused concatenation into kernels::cpu::kFusedConcatOp, which reads and
/// writes the blocked layout, when `registry` has it. Returns how many were rewritten. With
/// FusePoolsIntoConvChains, repeated until neither rewrites (each enables the other).
int FuseConcatIntoConvChains(Graph* graph, const KernelRegistry& registry);

/// Rewrites, when `registry` has the fused ops, a GlobalAveragePool whose input comes from a node
/// that writes any layout (a 2-D fused conv, a fused pooling, concatenation or channel scale)
/// into kernels::cpu::kFusedGlobalAveragePoolOp, and a Mul of such a value by one value per
/// channel (by the inferred shapes: [N,C,1,1], [1,C,1,1], [C,1,1] or a single value; either
/// operand order) into kernels::cpu::kFusedChannelScaleOp: a squeeze-and-excitation block,
/// whose depthwise output and projection input then keep the blocked layout. An inference
/// BatchNormalization (constant parameters, only Y used) of such a value becomes the same op
/// with its factor and shift as new constants (DenseNet's after each concatenation), and a Relu
/// that is the only reader of a channel scale becomes its activation. A Resize of such a value
/// in H and W only (ResizesImagesOnly in fusion_conv.cc: nearest or linear, scales 1 on N and C)
/// becomes kernels::cpu::kFusedResizeOp, which reads and writes the chain's layouts (a
/// detector's upsampling between convolutions). Returns how many nodes were rewritten or
/// absorbed.
int FuseChannelOpsIntoConvChains(Graph* graph, const KernelRegistry& registry);

/// Marks values stored in the convolution kernels' blocked layout (channel blocks, e.g.
/// nChw16c; the kernels pick the block for the machine): a value produced by a 2-D fused conv
/// (or a fused pooling, concatenation, channel op or resize) whose every use is a 2-D fused conv
/// (as its input X or its residual) or one of those fused ops, and which is not a graph
/// output. A fused concatenation counts as such a use only when its own output is kept blocked
/// (otherwise each of its blocked inputs would be reordered there, once per concatenation that
/// reads it). The producer gets "y_layout"="blocked", each consumer "x_layout", "r_layout" or
/// (a concatenation's input k) "x<k>_layout".
/// A 1-D fused conv's value read only by 1-D fused convs is kept too: "nhwc" (stored nwc) where
/// its producer or a reader is wider than 1, else "blocked" (nCw16c or nCw8c). Only the ends of
/// a chain of convolutions are then reordered.
/// Returns how many values are kept blocked.
int KeepBlockedLayoutBetweenConvs(Graph* graph);

/// The attribute that names how a fused node reads its input `k`: "x_layout" for input 0 (X),
/// "r_layout" for input 3 (a fused convolution's residual), "x<k>_layout" for any input of a
/// fused concatenation; empty for the others (weights, bias: always plain). "y_layout" names
/// how the node writes its output. Values: "nchw" (the default), "nhwc" or "blocked".
std::string InputLayoutAttribute(const Node& node, size_t k);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_CONV_H_
