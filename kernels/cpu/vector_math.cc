#include "kernels/cpu/vector_math.h"

#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {
namespace {

__attribute__((always_inline)) inline void SigmoidBody(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Floats16 v;
    std::memcpy(&v, x + i, sizeof(v));
    const Floats16 neg_abs = v < 0.0f ? v : -v;
    Floats16 e;
    ExpNonPositive<Floats16, Ints16>(neg_abs, &e);
    const Floats16 num = v >= 0.0f ? Floats16{} + 1.0f : e;
    const Floats16 s = num / (e + 1.0f);
    std::memcpy(y + i, &s, sizeof(s));
  }
  for (; i < n; ++i) {
    const float v = x[i];
    float e;
    ExpNonPositive<float, int32_t>(v < 0.0f ? v : -v, &e);
    y[i] = (v >= 0.0f ? 1.0f : e) / (e + 1.0f);
  }
}

__attribute__((always_inline)) inline void TanhBody(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = TanhApprox(x[i]);
}

#define REPRISE_ARRAY_ARGS const float *x, float *y, int64_t n
__attribute__((target("avx512f"))) void SigmoidAvx512(REPRISE_ARRAY_ARGS) { SigmoidBody(x, y, n); }
__attribute__((target("avx2,fma"))) void SigmoidAvx2(REPRISE_ARRAY_ARGS) { SigmoidBody(x, y, n); }
void SigmoidBaseline(REPRISE_ARRAY_ARGS) { SigmoidBody(x, y, n); }
__attribute__((target("avx512f"))) void TanhAvx512(REPRISE_ARRAY_ARGS) { TanhBody(x, y, n); }
__attribute__((target("avx2,fma"))) void TanhAvx2(REPRISE_ARRAY_ARGS) { TanhBody(x, y, n); }
void TanhBaseline(REPRISE_ARRAY_ARGS) { TanhBody(x, y, n); }

}  // namespace

void SigmoidArray(REPRISE_ARRAY_ARGS) {
  static const auto fn = PickForThisCpu(&SigmoidAvx512, &SigmoidAvx2, &SigmoidBaseline);
  fn(x, y, n);
}

void TanhArray(REPRISE_ARRAY_ARGS) {
  static const auto fn = PickForThisCpu(&TanhAvx512, &TanhAvx2, &TanhBaseline);
  fn(x, y, n);
}
#undef REPRISE_ARRAY_ARGS

}  // namespace reprise::kernels::cpu
