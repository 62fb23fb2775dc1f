// Gelu (ONNX opset 20: approximate "none" or "tanh"), float32. The loops use rational
// approximations of erf and tanh (no calls into libm) so that the compiler vectorises them;
// one copy per instruction set, picked on first use.
#include "kernels/cpu/gelu.h"

#include <algorithm>
#include <memory>
#include <string>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4] (erf is 1 - 1.5e-8 at 4): a minimax rational
// approximation, within 5e-7 of erf in float arithmetic.
__attribute__((always_inline)) inline float ErfApprox(float x) {
  x = std::min(std::max(x, -4.0f), 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

__attribute__((always_inline)) inline void GeluBody(const float* x, float* y, int64_t n,
                                                    bool tanh_approx) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  if (tanh_approx) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + TanhApprox(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + ErfApprox(v * kInvSqrt2));
    }
  }
}

#define REPRISE_GELU_ARGS const float *x, float *y, int64_t n, bool tanh_approx
__attribute__((target("avx512f"))) void GeluAvx512(REPRISE_GELU_ARGS) {
  GeluBody(x, y, n, tanh_approx);
}
__attribute__((target("avx2,fma"))) void GeluAvx2(REPRISE_GELU_ARGS) {
  GeluBody(x, y, n, tanh_approx);
}
void GeluBaseline(REPRISE_GELU_ARGS) { GeluBody(x, y, n, tanh_approx); }

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGelu(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  // Read through a StatusOr kept alive (GCC 12 warns of a string moved out of one).
  const absl::StatusOr<std::string> approximate = AttrsOf(context).GetString("approximate", "none");
  if (!approximate.ok()) return approximate.status();
  const absl::string_view form = *approximate;
  if (form != "none" && form != "tanh") {
    return InvalidArgument(context, "approximate \"", form,
                           "\" is not supported (\"none\" or \"tanh\")");
  }
  const bool tanh_approx = form == "tanh";
  const Shape& shape = context.inputs[0].shape;
  const int64_t n = runtime::NumElements(shape);
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    Gelu(static_cast<const float*>(args.inputs[0]), static_cast<float*>(args.outputs[0]), n,
         tanh_approx);
    return absl::OkStatus();
  });
}

}  // namespace

void Gelu(REPRISE_GELU_ARGS) {
  static const auto fn = PickForThisCpu(&GeluAvx512, &GeluAvx2, &GeluBaseline);
  fn(x, y, n, tanh_approx);
}
#undef REPRISE_GELU_ARGS

absl::Status RegisterGeluKernels(runtime::KernelRegistry* registry) {
  return registry->Register("Gelu", &PrepareGelu);
}

}  // namespace reprise::kernels::cpu
