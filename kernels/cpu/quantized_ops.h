// QLinearConv's and QLinearMatMul's two implementations: the direct loops (quantized_ops.cc,
// every case ONNX allows, the reference) and oneDNN's int8 convolution and matmul
// (onednn_qlinear.cc, the common cases, fast). The registered kernels take oneDNN's when it
// applies and the loops otherwise.
#ifndef REPRISE_KERNELS_CPU_QUANTIZED_OPS_H_
#define REPRISE_KERNELS_CPU_QUANTIZED_OPS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cpu/window.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// A QLinearConv's geometry as the direct kernel checked it: groups, the window over X's
/// spatial axes (1 to 3 of them), the output shape.
struct QLinearConvGeometry {
  int64_t group = 1;
  Window window;
  runtime::Shape y;
};

/// True when oneDNN's int8 kernels compute exact int32 sums on this CPU (as capped by
/// ONEDNN_MAX_CPU_ISA): it has VNNI (AVX512-VNNI or AVX-VNNI). Without it, oneDNN 2.6's int8
/// kernels add u8 x s8 products in pairs into saturating int16 (vpmaddubsw), which makes
/// outputs wrong by many steps for full-range weights; the direct loops then run everything.
bool OnednnInt8IsExact();

/// QLinearConv on oneDNN's int8 convolution (uint8 or int8 x and y, int8 w, int32 bias;
/// requantization by per-channel output scales x_scale * w_scale[c] / y_scale and x's and y's
/// zero points as primitive attributes). `context` has passed the direct kernel's checks.
/// UNIMPLEMENTED, naming the reason, where it does not apply: w, the scales, the zero points or
/// the bias unknown at plan time; no VNNI (OnednnInt8IsExact); uint8 w; a nonzero w_zero_point; an
/// empty tensor; a multiplier that is not finite; or oneDNN offering only its reference code.
/// oneDNN rounds the float32 product scale * accumulator, the loop the double one: results may
/// differ by one step.
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareOnednnQLinearConv(
    const runtime::PrepareContext& context, const QLinearConvGeometry& geometry);

/// QLinearConv by the direct loop only (the registered kernel's fallback; tests' reference).
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareQLinearConvDirect(
    const runtime::PrepareContext& context);

/// QLinearConv on oneDNN only: the direct kernel's checks, then PrepareOnednnQLinearConv.
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareQLinearConvOnednn(
    const runtime::PrepareContext& context);

/// QLinearMatMul on oneDNN's int8 matmul, `y` being the output shape the direct kernel computed:
/// a of rank >= 2 (its batch dims and rows taken as one row axis) with one scale and zero point;
/// b a 2-D int8 constant, scales one or one per column, zero points 0; y one scale and zero
/// point; everything but a known at plan time; VNNI (OnednnInt8IsExact). UNIMPLEMENTED
/// otherwise (the loop runs it).
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareOnednnQLinearMatMul(
    const runtime::PrepareContext& context, const runtime::Shape& y);

/// QLinearMatMul by the direct loop only, and on oneDNN only (for tests, as for QLinearConv).
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareQLinearMatMulDirect(
    const runtime::PrepareContext& context);
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> PrepareQLinearMatMulOnednn(
    const runtime::PrepareContext& context);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_QUANTIZED_OPS_H_
