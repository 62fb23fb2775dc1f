// Pooling pieces shared by pool.cc (the ONNX pooling ops over plain values) and onednn_pool.cc
// (the pooling inside convolution chains, over the chains' stored layouts).
#ifndef REPRISE_KERNELS_CPU_POOL_H_
#define REPRISE_KERNELS_CPU_POOL_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/window.h"

namespace reprise::kernels::cpu {

/// Per output position along one axis: where its window starts in the input (`origin`, may be
/// negative), the range of taps [first, last) that fall inside the input, and how many taps fall
/// inside the explicitly padded input (count_include_pad's divisor).
struct AxisTaps {
  std::vector<int64_t> origin, first, last, padded;
};

/// The taps of `g`'s axis `axis`, computed per output position (not counted tap by tap: a model
/// may declare a kernel of 2^40 taps).
AxisTaps MakeAxisTaps(const Window& g, int axis);

/// 2-D max or average pooling without dilation of float values stored with the channels
/// innermost, [N][groups][H][W][lanes]: the convolution chains' blocked layout (lanes 8 or 16,
/// channels padded to a whole number of groups with zeros) or channels-last (one group of C
/// lanes). Per output row, the rows of its window are reduced into a row of W x lanes floats,
/// then each output's columns from it: every step runs over `lanes` contiguous floats, which
/// the compiler vectorises (compiled per instruction set). Padding lanes of Y are zero. Rows are
/// split over the threads.
class InterleavedPool {
 public:
  /// `win`: a 2-D window (ForwardWindow) with dilations 1. `include_pad`: the average's divisor
  /// counts the explicit padding (ONNX count_include_pad).
  InterleavedPool(const Window& win, bool max, bool include_pad, int64_t channels, int64_t lanes);

  /// Y from X, both stored as above with `batch` images, on up to `threads` threads.
  void Run(const float* x, float* y, int64_t batch, int threads) const;

  int64_t lanes() const { return lanes_; }

 private:
  AxisTaps th_, tw_;
  bool max_, include_pad_;
  int64_t channels_, lanes_, groups_;
  int64_t in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, stride_w_;
  std::pair<int64_t, int64_t> interior_;  // the outputs along W whose window lies inside
};

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_POOL_H_
