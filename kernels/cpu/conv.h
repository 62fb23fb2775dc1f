// The oneDNN convolution (conv.cc) that the fused convolution kernels build on (conv_dw.cc).
// Internal to the CPU kernels.
#ifndef REPRISE_KERNELS_CPU_CONV_H_
#define REPRISE_KERNELS_CPU_CONV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"

namespace reprise::kernels::cpu {

/// An activation applied by a fused convolution, with its parameters.
struct ConvActivation {
  std::string name;  // "" or a name of kFusedConvOp's "activation" (fused_ops.h)
  float clip_min = 0.0f;
  float clip_max = 0.0f;
  float alpha = 0.0f;  // LeakyRelu's alpha; HardSigmoid's alpha and beta
  float beta = 0.0f;
};

/// Reads an activation from a fused node's attributes `prefix`activation, `prefix`clip_min,
/// `prefix`clip_max, `prefix`activation_alpha, `prefix`activation_beta (prefix "" or "dw_").
absl::StatusOr<ConvActivation> ReadConvActivation(const runtime::Attributes& attrs,
                                                  const std::string& prefix);

/// The epilogue applied to the convolution's output: residual sum, then an activation.
struct ConvPostOps {
  bool residual = false;
  ConvActivation activation;
  Storage x = Storage::kPlain;
  Storage y = Storage::kPlain;
  Storage r = Storage::kPlain;
  // A depthwise 3x3 convolution (pads 1) applied to the result inside the same primitive
  // (oneDNN's depthwise post-op): the 1x1 convolution's output never leaves the cache.
  struct Depthwise {
    int64_t stride = 1;
    ConvActivation activation;
    const TensorDesc* weights = nullptr;  // [C, 1, 3, 3], known at plan time
    const TensorDesc* bias = nullptr;     // [C] known at plan time, or null
  };
  std::optional<Depthwise> depthwise;
};

/// A Conv with `post` fused, on oneDNN: inputs X, W, B and (with post.residual) R.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvWith(const PrepareContext& context,
                                                                const ConvPostOps& post);

/// kFusedConvDwOp (conv_dw.cc): a 1x1 convolution and a depthwise 3x3 one.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConvDw(const PrepareContext& context);

/// `bytes` rounded up to 64 (workspace offsets).
inline size_t ConvAlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CONV_H_
