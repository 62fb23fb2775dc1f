// Registration functions of the CPU kernel families, one per source file; called only by
// RegisterCpuKernels (kernels/cpu/cpu_kernels.cc).
#ifndef REPRISE_KERNELS_CPU_FAMILIES_H_
#define REPRISE_KERNELS_CPU_FAMILIES_H_

#include "absl/status/status.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// unary.cc: activations, math and trigonometric functions, Shrink, IsNaN, IsInf, Identity,
/// Not, Clip, Dropout.
absl::Status RegisterUnaryKernels(runtime::KernelRegistry* registry);
/// cast.cc: Cast.
absl::Status RegisterCastKernels(runtime::KernelRegistry* registry);
/// shape_ops.cc: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, ConstantOfShape, Range.
absl::Status RegisterShapeKernels(runtime::KernelRegistry* registry);
/// layout.cc: Transpose, Concat, Split, Slice, Expand, Tile, Pad, Trilu, DepthToSpace,
/// SpaceToDepth, ReverseSequence.
absl::Status RegisterLayoutKernels(runtime::KernelRegistry* registry);
/// fused_transpose.cc: kFusedTransposeOp (a Concat, Reshape, Transpose, Reshape, Slice chain).
absl::Status RegisterFusedTransposeKernels(runtime::KernelRegistry* registry);
/// gather.cc: Gather, GatherElements.
absl::Status RegisterGatherKernels(runtime::KernelRegistry* registry);
/// scatter.cc: ScatterElements, Scatter, ScatterND, GatherND.
absl::Status RegisterScatterKernels(runtime::KernelRegistry* registry);
/// generators.cc: EyeLike, OneHot, HannWindow, HammingWindow, BlackmanWindow.
absl::Status RegisterGeneratorKernels(runtime::KernelRegistry* registry);
/// signal.cc: DFT, STFT, MelWeightMatrix.
absl::Status RegisterSignalKernels(runtime::KernelRegistry* registry);
/// select.cc: NonZero, Compress, Unique, NonMaxSuppression.
absl::Status RegisterSelectKernels(runtime::KernelRegistry* registry);
/// tfidf.cc: TfIdfVectorizer.
absl::Status RegisterTfIdfKernels(runtime::KernelRegistry* registry);
/// recurrent.cc: RNN, GRU, LSTM.
absl::Status RegisterRecurrentKernels(runtime::KernelRegistry* registry);
/// random.cc: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli.
absl::Status RegisterRandomKernels(runtime::KernelRegistry* registry);
/// reduce.cc: Reduce*, ArgMax, ArgMin, CumSum.
absl::Status RegisterReduceKernels(runtime::KernelRegistry* registry);
/// topk.cc: TopK.
absl::Status RegisterTopKKernels(runtime::KernelRegistry* registry);
/// normalization.cc: Softmax, LogSoftmax, Hardmax, LayerNormalization, BatchNormalization,
/// InstanceNormalization, LRN, MeanVarianceNormalization.
absl::Status RegisterNormalizationKernels(runtime::KernelRegistry* registry);
/// channel_norm.cc: kFusedChannelNormOp (a layer normalisation over the channels).
absl::Status RegisterChannelNormKernels(runtime::KernelRegistry* registry);
/// gemm.cc: Gemm, MatMul, FusedGemm, FusedMatMul, Det.
absl::Status RegisterGemmKernels(runtime::KernelRegistry* registry);
/// einsum.cc: Einsum.
absl::Status RegisterEinsumKernels(runtime::KernelRegistry* registry);
/// conv.cc: Conv, FusedConv, FusedConvDw (oneDNN).
absl::Status RegisterConvKernels(runtime::KernelRegistry* registry);
/// conv_transpose.cc: ConvTranspose (sgemm + col2im) and kFusedConvTransposeOp (with an
/// activation).
absl::Status RegisterConvTransposeKernels(runtime::KernelRegistry* registry);
/// pool.cc: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, MaxUnpool.
absl::Status RegisterPoolKernels(runtime::KernelRegistry* registry);
/// roi_align.cc: RoiAlign.
absl::Status RegisterRoiAlignKernels(runtime::KernelRegistry* registry);
absl::Status RegisterOnednnPoolKernels(runtime::KernelRegistry* registry);
absl::Status RegisterOnednnConcatKernels(runtime::KernelRegistry* registry);
/// chain_ops.cc: FusedGlobalAveragePool, FusedGlobalMaxPool, FusedChannelScale, FusedAdd (our
/// loops over the chain's layouts).
absl::Status RegisterChainKernels(runtime::KernelRegistry* registry);
/// resize.cc: Resize, Upsample, GridSample.
absl::Status RegisterResizeKernels(runtime::KernelRegistry* registry);
/// gelu.cc: Gelu.
absl::Status RegisterGeluKernels(runtime::KernelRegistry* registry);
/// loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
absl::Status RegisterLossKernels(runtime::KernelRegistry* registry);
/// quantize.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
absl::Status RegisterQuantizeKernels(runtime::KernelRegistry* registry);
/// quantized_ops.cc: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
absl::Status RegisterQuantizedOpKernels(runtime::KernelRegistry* registry);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FAMILIES_H_
