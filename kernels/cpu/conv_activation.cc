// The activations a fused convolution applies: oneDNN post-ops, or after the primitive on our
// own vector loops (conv.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

absl::StatusOr<ConvActivation> ReadConvActivation(const runtime::Attributes& attrs,
                                                  const std::string& prefix) {
  ConvActivation act;
  ASSIGN_OR_RETURN(act.name, attrs.GetString(prefix + "activation", ""));
  ASSIGN_OR_RETURN(act.clip_min, attrs.GetFloat(prefix + "clip_min", 0.0f));
  ASSIGN_OR_RETURN(act.clip_max, attrs.GetFloat(prefix + "clip_max", 0.0f));
  ASSIGN_OR_RETURN(act.alpha, attrs.GetFloat(prefix + "activation_alpha", 0.0f));
  ASSIGN_OR_RETURN(act.beta, attrs.GetFloat(prefix + "activation_beta", 0.0f));
  return act;
}

// Appends `act` (fused_ops.h lists the names; "" is none) to `ops` as oneDNN eltwise post-ops;
// false for another name.
bool AppendActivation(const ConvActivation& act, dnnl::post_ops* ops) {
  using dnnl::algorithm;
  const std::string& name = act.name;
  const float alpha = act.alpha, beta = act.beta;
  if (name.empty()) return true;
  if (name == "Relu") {
    ops->append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
  } else if (name == "LeakyRelu") {
    ops->append_eltwise(1.0f, algorithm::eltwise_relu, alpha, 0.0f);
  } else if (name == "Clip") {
    ops->append_eltwise(1.0f, algorithm::eltwise_clip, act.clip_min, act.clip_max);
  } else if (name == "Sigmoid") {
    ops->append_eltwise(1.0f, algorithm::eltwise_logistic, 0.0f, 0.0f);
  } else if (name == "Tanh") {
    ops->append_eltwise(1.0f, algorithm::eltwise_tanh, 0.0f, 0.0f);
  } else if (name == "HardSigmoid") {
    // max(0, min(1, alpha x + beta)): a linear map, then a clip.
    ops->append_eltwise(1.0f, algorithm::eltwise_linear, alpha, beta);
    ops->append_eltwise(1.0f, algorithm::eltwise_clip, 0.0f, 1.0f);
  } else if (name == "HardSwish") {
    ops->append_eltwise(1.0f, algorithm::eltwise_hardswish, 0.0f, 0.0f);  // x relu6(x + 3) / 6
  } else if (name == "Swish") {
    ops->append_eltwise(1.0f, algorithm::eltwise_swish, 1.0f, 0.0f);  // x sigmoid(x)
  } else if (name == "Gelu") {
    ops->append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  } else if (name == "GeluTanh") {
    ops->append_eltwise(1.0f, algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  } else {
    return false;
  }
  return true;
}

// The same activation on one value (the broadcast-residual epilogue, which runs outside oneDNN).
float ApplyActivation(const ConvActivation& act, float v) {
  const std::string& name = act.name;
  if (name.empty()) return v;
  if (name == "Relu") return v > 0.0f ? v : 0.0f;
  if (name == "LeakyRelu") return v >= 0.0f ? v : v * act.alpha;
  if (name == "Clip") return std::min(std::max(v, act.clip_min), act.clip_max);
  if (name == "Sigmoid") return 1.0f / (1.0f + std::exp(-v));
  if (name == "Tanh") return std::tanh(v);
  if (name == "HardSigmoid") return std::max(0.0f, std::min(1.0f, act.alpha * v + act.beta));
  if (name == "HardSwish") return v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f));
  if (name == "Swish") return v / (1.0f + std::exp(-v));
  if (name == "Gelu") return 0.5f * v * (1.0f + std::erf(v * 0.70710678f));
  if (name == "GeluTanh") {
    return 0.5f * v * (1.0f + std::tanh(0.79788456f * (v + 0.044715f * v * v * v)));
  }
  return v;  // not reached: Prepare refuses other names
}

// Activations that map 0 to 0 and that oneDNN 2.6's Winograd convolution takes no post-op for:
// the convolution then runs Winograd without them and DeferredActivation applies them after.
// Tanh too, which every oneDNN 2.6 convolution takes slowly (SlowPostOp).
bool DeferrableActivation(const ConvActivation& act) {
  return act.name == "Swish" || act.name == "HardSwish" || act.name == "Gelu" ||
         act.name == "GeluTanh" || act.name == "Tanh";
}

// oneDNN 2.6's tanh post-op costs 3-5 ns per output on an AVX2 VM (a 1 -> 64-channel 5x5
// convolution over 120x160, one thread: 1.6 ms bare, 7-8 ms with it), our TanhArray pass
// about 1 ms for the same 1.2M outputs. Its SiLU and GELU post-ops cost about 0.55 ns per output
// on an AVX-512 VM (a 24 -> 144-channel 1x1 convolution over 56x56, one thread: 0.21 ms bare,
// 0.47 ms with SiLU, 0.45 ms with GELU), more than a pass of SwishArray / Gelu over the stored
// output. For these the primitive is made without the activation and DeferredActivation applies
// it (each maps 0 to 0, so a blocked layout's zero padding stays zero).
bool SlowPostOp(const ConvActivation& act) {
  return act.name == "Tanh" || act.name == "Swish" || act.name == "Gelu";
}

namespace {

// y[0, n) = act(y) for a DeferrableActivation, vectorised where it has a transcendental.
void DeferredActivation(const ConvActivation& act, float* y, int64_t n) {
  if (act.name == "Gelu" || act.name == "GeluTanh") {
    Gelu(y, y, n, act.name == "GeluTanh");
  } else if (act.name == "Tanh") {
    TanhArray(y, y, n);
  } else if (act.name == "Swish") {
    SwishArray(y, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] *= std::max(0.0f, std::min(1.0f, y[i] / 6.0f + 0.5f));
  }
}

// `act` applied to p[0, len) in place, each name by a loop of its own (ApplyActivation's
// comparisons of the name per value cost more than most activations: a fused ConvTranspose's
// LeakyRelu over 64 x 32 x 32 values took about 0.5 ms that way).
void ActivateRange(const ConvActivation& act, float* p, int64_t len) {
  if (act.name.empty()) return;
  if (act.name == "Relu") {
    for (int64_t i = 0; i < len; ++i) p[i] = std::max(p[i], 0.0f);
  } else if (act.name == "Clip") {
    for (int64_t i = 0; i < len; ++i) p[i] = std::min(std::max(p[i], act.clip_min), act.clip_max);
  } else if (act.name == "LeakyRelu") {
    const float alpha = act.alpha;
    for (int64_t i = 0; i < len; ++i) p[i] = p[i] >= 0.0f ? p[i] : p[i] * alpha;
  } else if (act.name == "HardSigmoid") {
    const float alpha = act.alpha, beta = act.beta;
    for (int64_t i = 0; i < len; ++i) p[i] = std::max(0.0f, std::min(1.0f, alpha * p[i] + beta));
  } else if (act.name == "Sigmoid") {
    SigmoidArray(p, p, len);
  } else if (DeferrableActivation(act)) {
    DeferredActivation(act, p, len);
  } else {
    for (int64_t i = 0; i < len; ++i) p[i] = ApplyActivation(act, p[i]);
  }
}

}  // namespace

void ApplyConvActivation(const ConvActivation& act, float* y, int64_t n, int threads,
                         const float* add) {
  if (act.name.empty() && add == nullptr) return;
  ParallelFor(n, threads, 4.0, [&](int64_t begin, int64_t end) {
    if (add == nullptr) return ActivateRange(act, y + begin, end - begin);
    // 32 KiB at a time, while it is in the cache: the activation, then the sum.
    constexpr int64_t kPiece = 8192;
    for (int64_t at = begin; at < end; at += kPiece) {
      const int64_t len = std::min(kPiece, end - at);
      float* p = y + at;
      ActivateRange(act, p, len);
      const float* r = add + at;
      for (int64_t i = 0; i < len; ++i) p[i] += r[i];
    }
  });
}

}  // namespace reprise::kernels::cpu
