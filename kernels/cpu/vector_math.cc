#include "kernels/cpu/vector_math.h"

#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {
namespace {

// 1 / (1 + e^-x) through e^-|x|.
struct SigmoidMap {
  template <typename T>
  __attribute__((always_inline)) static void Of(const T& in, T* out) {
    const T v = in;
    T e;
    ExpNonPositive<T, IntsFor<T>>(v < 0.0f ? v : -v, &e);
    const T one = T{} + 1.0f;
    *out = (v >= 0.0f ? one : e) / (e + 1.0f);
  }
};

// x / (1 + e^-x): x times SigmoidMap's value.
struct SwishMap {
  template <typename T>
  __attribute__((always_inline)) static void Of(const T& in, T* out) {
    T s;
    SigmoidMap::Of(in, &s);
    *out = in * s;
  }
};

struct TanhMap {
  template <typename T>
  __attribute__((always_inline)) static void Of(const T& in, T* out) {
    TanhOf(in, out);
  }
};

#define REPRISE_ARRAY_ARGS const float *x, float *y, int64_t n
__attribute__((target("avx512f"))) void SigmoidAvx512(REPRISE_ARRAY_ARGS) {
  MapArray<Floats16, SigmoidMap>(x, y, n);
}
__attribute__((target("avx2,fma"))) void SigmoidAvx2(REPRISE_ARRAY_ARGS) {
  MapArray<Floats8, SigmoidMap>(x, y, n);
}
void SigmoidBaseline(REPRISE_ARRAY_ARGS) { MapArray<Floats4, SigmoidMap>(x, y, n); }
__attribute__((target("avx512f"))) void SwishAvx512(REPRISE_ARRAY_ARGS) {
  MapArray<Floats16, SwishMap>(x, y, n);
}
__attribute__((target("avx2,fma"))) void SwishAvx2(REPRISE_ARRAY_ARGS) {
  MapArray<Floats8, SwishMap>(x, y, n);
}
void SwishBaseline(REPRISE_ARRAY_ARGS) { MapArray<Floats4, SwishMap>(x, y, n); }
__attribute__((target("avx512f"))) void TanhAvx512(REPRISE_ARRAY_ARGS) {
  MapArray<Floats16, TanhMap>(x, y, n);
}
__attribute__((target("avx2,fma"))) void TanhAvx2(REPRISE_ARRAY_ARGS) {
  MapArray<Floats8, TanhMap>(x, y, n);
}
void TanhBaseline(REPRISE_ARRAY_ARGS) { MapArray<Floats4, TanhMap>(x, y, n); }

}  // namespace

void SigmoidArray(REPRISE_ARRAY_ARGS) {
  static const auto fn = PickForThisCpu(&SigmoidAvx512, &SigmoidAvx2, &SigmoidBaseline);
  fn(x, y, n);
}

void SwishArray(REPRISE_ARRAY_ARGS) {
  static const auto fn = PickForThisCpu(&SwishAvx512, &SwishAvx2, &SwishBaseline);
  fn(x, y, n);
}

void TanhArray(REPRISE_ARRAY_ARGS) {
  static const auto fn = PickForThisCpu(&TanhAvx512, &TanhAvx2, &TanhBaseline);
  fn(x, y, n);
}
#undef REPRISE_ARRAY_ARGS

}  // namespace reprise::kernels::cpu
