// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: reading
// kernel_shape/strides/dilations/pads/auto_pad and computing output sizes and pads.
#ifndef REPRISE_KERNELS_CPU_WINDOW_H_
#define REPRISE_KERNELS_CPU_WINDOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

/// Window geometry over the spatial axes (one entry per spatial axis).
struct Window {
  std::vector<int64_t> input;  // spatial input sizes
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output;  // spatial output sizes
};

/// Reads the window attributes of a forward sliding window (Conv, pooling) over the spatial
/// sizes `input`, with `kernel` taken from `kernel_shape` or, when absent, from `default_kernel`
/// (Conv's weights). `ceil_mode` rounds output sizes up (pooling), dropping a last window that
/// would start in the end padding.
absl::StatusOr<Window> ForwardWindow(const PrepareContext& context,
                                     const std::vector<int64_t>& input,
                                     const std::vector<int64_t>& default_kernel, bool ceil_mode);

/// The same for ConvTranspose (output_padding, output_shape and auto_pad as ONNX defines them).
absl::StatusOr<Window> TransposedWindow(const PrepareContext& context,
                                        const std::vector<int64_t>& input,
                                        const std::vector<int64_t>& default_kernel);

/// Checks Conv's inputs X [N,C,...], W [M,C/group,...] and the optional bias [M] (ConvTranspose's:
/// W [C,M/group,...], bias [M]), all float32, 2 to `max_inputs` of them; returns group.
absl::StatusOr<int64_t> CheckConvInputs(const PrepareContext& context, bool transposed,
                                        size_t max_inputs = 3);

/// Pads every vector of `window` at the front to three spatial axes (size 1, kernel 1,
/// stride 1, dilation 1, no padding), so that loops can be written for 3-D only.
Window To3d(Window window);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_WINDOW_H_
