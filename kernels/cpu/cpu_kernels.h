// The CPU backend's kernel table and the options its kernels are registered with.
#ifndef REPRISE_KERNELS_CPU_CPU_KERNELS_H_
#define REPRISE_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// How values passed between convolutions (and the max pooling inside such chains) are stored.
enum class ConvChainLayout {
  /// Channel blocks of the vector width oneDNN's fastest convolutions use here: nChw16c with
  /// AVX-512, nChw8c with AVX2, channels-last (NHWC) without either.
  kAuto,
  /// Channels-last whatever the CPU (for comparisons).
  kNhwc,
};

/// "auto" / "nhwc".
absl::string_view ConvChainLayoutName(ConvChainLayout layout);
/// The layout named "auto" or "nhwc"; INVALID_ARGUMENT naming `name` otherwise.
absl::StatusOr<ConvChainLayout> ParseConvChainLayout(absl::string_view name);

/// When a plan of two or more intra-op threads clears its steps' large outputs and workspaces
/// with non-temporal stores before their kernels run (output_clearing.h).
enum class OutputClearing {
  kAuto,  // each step where its own timed runs say that is faster
  kOn,    // always
  kOff,   // never
};

/// "auto" / "on" / "off".
absl::string_view OutputClearingName(OutputClearing mode);
/// The mode named "auto", "on" or "off"; INVALID_ARGUMENT naming `name` otherwise.
absl::StatusOr<OutputClearing> ParseOutputClearing(absl::string_view name);

/// Choices of a device's CPU kernels (the daemon's `kernels:` config section, reprise-run's
/// --conv-winograd and --conv-chain-layout). The defaults are the fastest here.
struct CpuKernelOptions {
  /// Winograd for 2-D 3x3 stride-1 convolutions with weights known at plan time: oneDNN's
  /// where it has one (AVX-512), our own F(2x2, 3x3) otherwise (conv.cc's OwnWinogradFor);
  /// false: the direct algorithm always.
  bool conv_winograd = true;
  /// With conv_winograd, our own F(2x2, 3x3) also where oneDNN has its own (AVX-512), so that
  /// tests and benchmarks reach our kernel on every CPU. oneDNN's is faster there (one thread,
  /// AVX-512, ms oneDNN -> ours: 64 -> 64 over 56x56 1.21 -> 1.65, 128 over 28x28 0.71 -> 1.32,
  /// 512 over 14x14 5.0 -> 7.5): not a daemon setting.
  bool conv_own_winograd_always = false;
  /// Run a KxK convolution whose direct kernel here is oneDNN's AVX2 one, and whose reduction (C
  /// x KH x KW) is large, as a 1x1 convolution over its input gathered per tap (conv.h); false:
  /// oneDNN's direct kernel always.
  bool conv_taps_as_channels = true;
  /// Run a 2-D convolution whose taps mostly read padding (a dilated convolution wider than its
  /// input) as one product per tap over the output pixels where the tap reads the input
  /// (conv.h, tap regions), and race the whole window gathered channels-last (one sgemm per
  /// image) against oneDNN's direct kernel for a KxK convolution of at least 16 input and output
  /// channels and at most 1024 output pixels an image, keeping the faster by timed runs (conv.cc's
  /// WholeWindowRaceFor); false: neither.
  bool conv_tap_regions = true;
  /// Run a depthwise 2-D convolution, or one in groups of 2, 4 or 8 channels narrower than a
  /// block, with weights known at plan time and its input and output in the chain's
  /// channel-blocked layout on our own kernel (conv_depthwise.cc), its activation applied in
  /// registers; false: oneDNN's.
  bool conv_own_depthwise = true;
  ConvChainLayout conv_chain_layout = ConvChainLayout::kAuto;
  /// Clear a multi-threaded plan's large step outputs and workspaces first (output_clearing.h).
  OutputClearing clear_outputs = OutputClearing::kAuto;
};

/// Registers every CPU kernel into `registry` (a device's) and installs their state
/// (CpuKernelState: `options` and the device's packed-weight cache). Called once per registry;
/// no static initialisers, and no state shared with another registry.
absl::Status RegisterCpuKernels(runtime::KernelRegistry* registry,
                                const CpuKernelOptions& options = {});

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CPU_KERNELS_H_
