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

// GELU of one float or a vector of them; `kTanhForm` picks ONNX's approximate="tanh".
template <bool kTanhForm>
struct GeluMap {
  template <typename T>
  __attribute__((always_inline)) static void Of(const T& in, T* out) {
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    const T v = in;
    T f;
    if constexpr (kTanhForm) {
      TanhOf<T>((v + v * v * v * 0.044715f) * kSqrt2OverPi, &f);
    } else {
      ErfOf<T>(v * kInvSqrt2, &f);
    }
    *out = v * 0.5f * (f + 1.0f);
  }
};

// V: the copy's register width (vector_math.h).
template <typename V>
__attribute__((always_inline)) inline void GeluBody(const float* x, float* y, int64_t n,
                                                    bool tanh_approx) {
  if (tanh_approx) {
    MapArray<V, GeluMap<true>>(x, y, n);
  } else {
    MapArray<V, GeluMap<false>>(x, y, n);
  }
}

#define REPRISE_GELU_ARGS const float *x, float *y, int64_t n, bool tanh_approx
__attribute__((target("avx512f"))) void GeluAvx512(REPRISE_GELU_ARGS) {
  GeluBody<Floats16>(x, y, n, tanh_approx);
}
__attribute__((target("avx2,fma"))) void GeluAvx2(REPRISE_GELU_ARGS) {
  GeluBody<Floats8>(x, y, n, tanh_approx);
}
void GeluBaseline(REPRISE_GELU_ARGS) { GeluBody<Floats4>(x, y, n, tanh_approx); }

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
