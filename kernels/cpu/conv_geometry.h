// The geometry of a convolution on oneDNN (conv.cc): its shapes checked against each other,
// taps that read only padding dropped, narrow groups merged. Internal to the CPU kernels.
#ifndef REPRISE_KERNELS_CPU_CONV_GEOMETRY_H_
#define REPRISE_KERNELS_CPU_CONV_GEOMETRY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/window.h"

namespace reprise::kernels::cpu {

// The shapes of one convolution, checked against each other.
struct ConvGeometry {
  int64_t group = 1;
  Shape x, w;  // input and weights as given
  Window win;
  Shape w_dims;  // the weights as oneDNN sees them: [group, M/group, C/group, k...] when grouped
  Shape y;       // the convolution's output
  Shape y_out;   // the kernel's output: y, or the fused depthwise convolution's output
  bool has_bias = false;
  bool known_weights = false;     // W is a plan-time constant (packed once)
  const void* weights = nullptr;  // W's plan-time value: the input's, or `trimmed`'s
  // W without the taps that read only padding (TrimPaddingTaps); null when none were.
  std::shared_ptr<const std::vector<float>> trimmed;

  bool empty() const { return runtime::NumElements(x) == 0 || runtime::NumElements(y) == 0; }
};

/// Drops the leading and trailing taps of each spatial axis that read only padding for every
/// output position, moving the pads so that the output stays the same (conv_geometry.cc).
void TrimPaddingTaps(ConvGeometry* g);

/// Whether oneDNN runs `pd` on its gemm or reference code.
bool OnGemmOrReference(const dnnl::convolution_forward::primitive_desc& pd);

/// Merges adjacent groups narrower than a channel block `block` into groups of whole blocks
/// (block-diagonal weights), where that applies (conv_geometry.cc); false (g unchanged) where
/// not.
bool MergeNarrowGroups(ConvGeometry* g, int64_t block);

/// Step 1 of a convolution: the inputs, the window and the output shapes (with a depthwise
/// post-op, Y is the depthwise convolution's output).
absl::StatusOr<ConvGeometry> CheckConvGeometry(const PrepareContext& context,
                                               const ConvPostOps& post);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CONV_GEOMETRY_H_
