// Vectorised float32 math shared by the CPU kernels: e^x for x <= 0 and a rational tanh in
// arithmetic only (no libm calls, so that GCC vectorises the loops using them), and in-place
// Sigmoid / Tanh over arrays, compiled once per instruction set and picked on first use.
#ifndef REPRISE_KERNELS_CPU_VECTOR_MATH_H_
#define REPRISE_KERNELS_CPU_VECTOR_MATH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace reprise::kernels::cpu {

/// 16 floats / ints (GCC vector extension: one AVX-512 register, two AVX2 ones, four SSE ones).
typedef float Floats16 __attribute__((vector_size(64)));
typedef int32_t Ints16 __attribute__((vector_size(64)));
/// 8 and 4 floats / ints: one AVX2 register, one SSE one. An array loop's copy for an instruction
/// set takes that set's own register width: GCC 12 moves a wider type through the stack in
/// halves and reloads it whole, a store-forwarding stall on every vector.
typedef float Floats8 __attribute__((vector_size(32)));
typedef int32_t Ints8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));
typedef int32_t Ints4 __attribute__((vector_size(16)));

/// The vector V of floats at p loaded into *v, and V stored at p, at any float alignment: one
/// unaligned move each (by pointer and reference: a vector passed by value would change the ABI
/// between the copies). (A loop of std::memcpy's over consecutive vectors can become one memcpy
/// into a stack array, which GCC 12 then keeps in memory instead of registers.)
template <typename V>
struct __attribute__((packed, may_alias)) UnalignedFloats {
  V v;
};
template <typename V>
__attribute__((always_inline)) inline void LoadFloats(const float* p, V* v) {
  *v = reinterpret_cast<const UnalignedFloats<V>*>(p)->v;
}
template <typename V>
__attribute__((always_inline)) inline void StoreFloats(float* p, const V& v) {
  reinterpret_cast<UnalignedFloats<V>*>(p)->v = v;
}

/// e^x for x <= 0 in arithmetic only, for float or a vector type T with its int counterpart I:
/// x = n ln2 + r with |r| <= ln2/2 (n rounded by adding 1.5 * 2^23, whose low mantissa bits
/// then hold n), e^r by its degree-6 Taylor polynomial (relative error < 2e-7 there), 2^n built
/// in the exponent bits. Below -87 (e^x under float's normal range) it gives 0; NaN stays NaN.
/// (By reference: a 64-byte vector passed by value would change the ABI between the copies.)
template <typename T, typename I>
__attribute__((always_inline)) inline void ExpNonPositive(const T& x, T* out) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 in two parts: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-06f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  constexpr int32_t kRoundBits = 0x4B400000;
  const T c = x < -87.0f ? T{} - 87.0f : x;
  const T t = c * kLog2e + kRound;
  const T n = t - kRound;
  const T r = (c - n * kLn2Hi) - n * kLn2Lo;
  T p = r * (1.0f / 720.0f) + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  I bits;
  std::memcpy(&bits, &t, sizeof(bits));
  bits = (bits - kRoundBits + 127) << 23;
  T scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  *out = x < -87.0f ? T{} : p * scale;
}

/// Clamps x to [-limit, limit] in selects (no branches: std::min / std::max on references keep
/// GCC from vectorising a loop for AVX2); NaN stays NaN. float or a vector type T.
template <typename T>
__attribute__((always_inline)) inline void ClampSymmetric(float limit, T* x) {
  *x = *x < -limit ? T{} - limit : *x;
  *x = *x > limit ? T{} + limit : *x;
}

/// *out = x * P(x^2) / Q(x^2), x being `in` clamped to [-limit, limit]: an odd rational
/// approximation; P and Q by Horner's rule from their highest coefficient. float or a vector T.
template <typename T, size_t kP, size_t kQ>
__attribute__((always_inline)) inline void OddRational(const T& in, float limit,
                                                       const float (&p)[kP], const float (&q)[kQ],
                                                       T* out) {
  static_assert(kP >= 2 && kQ >= 2);
  T x = in;
  ClampSymmetric(limit, &x);
  const T x2 = x * x;
  T pv = x2 * p[0] + p[1];
  for (size_t i = 2; i < kP; ++i) pv = pv * x2 + p[i];
  T qv = x2 * q[0] + q[1];
  for (size_t i = 2; i < kQ; ++i) qv = qv * x2 + q[i];
  *out = x * pv / qv;
}

/// tanh(x) on [-7.905, 7.905] (beyond, tanh rounds to +-1 in float): a minimax rational
/// approximation, within 5e-7 of tanh in float arithmetic; NaN stays NaN. For float or a vector
/// type T (by reference, as ExpNonPositive).
template <typename T>
__attribute__((always_inline)) inline void TanhOf(const T& in, T* out) {
  static constexpr float kP[] = {
      -2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f,
      1.48572235717979e-05f,  6.37261928875436e-04f, 4.89352455891786e-03f};
  static constexpr float kQ[] = {1.19825839466702e-06f, 1.18534705686654e-04f,
                                 2.26843463243900e-03f, 4.89352518554385e-03f};
  OddRational(in, 7.90531110763549805f, kP, kQ, out);
}

/// erf(x) on [-4, 4] (erf is 1 - 1.5e-8 at 4): a minimax rational approximation, within 5e-7
/// of erf in float arithmetic; NaN stays NaN. float or a vector T.
template <typename T>
__attribute__((always_inline)) inline void ErfOf(const T& in, T* out) {
  static constexpr float kP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f,
                                 -2.10102402082508e-06f, -5.69250639462346e-05f,
                                 -7.34990630326855e-04f, -2.95459980854025e-03f,
                                 -1.60960333262415e-02f};
  static constexpr float kQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f,
                                 -1.68282697438203e-03f, -7.37332916720468e-03f,
                                 -1.42647390514189e-02f};
  OddRational(in, 4.0f, kP, kQ, out);
}

/// The int type of float or float vector type T's width (ExpNonPositive's I): a vector
/// comparison's result is the signed int vector of its width.
template <typename T>
using IntsFor = std::conditional_t<std::is_same_v<T, float>, int32_t,
                                   decltype(std::declval<T>() < std::declval<T>())>;

/// y[i] = F(x[i]) for i < n, whole vectors of V (the copy's register width) first, then the
/// tail one float at a time; F::Of(const T& in, T* out) for float and V (`in` may be `*out`).
/// `x` may equal `y`.
template <typename V, typename F>
__attribute__((always_inline)) inline void MapArray(const float* x, float* y, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    std::memcpy(&v, x + i, sizeof(v));
    F::Of(v, &v);
    std::memcpy(y + i, &v, sizeof(v));
  }
  for (; i < n; ++i) {
    float v = x[i];
    F::Of(v, &v);
    y[i] = v;
  }
}

/// e^x - 1 for x <= 0 (NaN stays NaN): by its Taylor polynomial to x^7 above -0.25 (so that
/// small results keep their relative accuracy), else ExpNonPositive(x) - 1. float or a vector T.
template <typename T>
__attribute__((always_inline)) inline void Expm1NonPositive(const T& x, T* out) {
  T e;
  ExpNonPositive<T, IntsFor<T>>(x, &e);
  T p = x * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * x + 1.0f / 120.0f;
  p = p * x + 1.0f / 24.0f;
  p = p * x + 1.0f / 6.0f;
  p = p * x + 0.5f;
  p = p * x + 1.0f;
  p = p * x;
  *out = x > -0.25f ? p : e - 1.0f;
}

/// e^x for any x: ExpNonPositive for x <= 0; above, the square of 1 / e^(-x/2), which stays
/// finite up to float's largest value (x ~ 88.72) and is +inf past it; NaN stays NaN. float or
/// a vector T.
template <typename T>
__attribute__((always_inline)) inline void ExpOf(const T& x, T* out) {
  using I = IntsFor<T>;
  T below, half;
  ExpNonPositive<T, I>(x > 0.0f ? T{} + 0.0f : x, &below);
  ExpNonPositive<T, I>(x > 0.0f ? x * -0.5f : T{} + 0.0f, &half);
  const T r = 1.0f / half;
  *out = x > 0.0f ? r * r : below;
}

/// ln(1 + u) for u in [0, 1] as 2 atanh(s), s = u / (2 + u) in [0, 1/3], by atanh's series to
/// s^15 (relative error under 1e-8 there). float or a vector T.
template <typename T>
__attribute__((always_inline)) inline void Log1pUnit(const T& u, T* out) {
  const T s = u / (u + 2.0f);
  const T s2 = s * s;
  T p = s2 * (1.0f / 15.0f) + 1.0f / 13.0f;
  p = p * s2 + 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  *out = 2.0f * s * p;
}

/// ln(1 + e^x) as max(x, 0) + ln(1 + e^-|x|) (no overflow for large x; NaN stays NaN). float or
/// a vector T.
template <typename T>
__attribute__((always_inline)) inline void SoftplusOf(const T& x, T* out) {
  const T negative_abs = x < 0.0f ? x : -x;
  T e;
  ExpNonPositive<T, IntsFor<T>>(negative_abs, &e);
  T l;
  Log1pUnit(e, &l);
  *out = (x > 0.0f ? x : T{} + 0.0f) + l;
}

/// x rounded to the nearest integer, halves to even (ONNX Round), for float or a vector T:
/// (|x| + 2^23) - 2^23 in the default rounding mode for |x| < 2^23 (larger floats are integers),
/// x's sign bit put back (-0.3 and -0 give -0); infinities and NaN unchanged. Sign and magnitude
/// by bit masks, one comparison: with two comparisons combined by `&`, GCC compared lane by lane
/// (7x Floor's time over 1.2 M floats).
template <typename T>
__attribute__((always_inline)) inline void RoundHalfEvenOf(const T& x, T* out) {
  using I = IntsFor<T>;
  constexpr float kBig = 8388608.0f;  // 2^23
  I bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const I sign = bits & static_cast<int32_t>(0x80000000u);
  const I magnitude = bits & 0x7fffffff;
  T a;
  std::memcpy(&a, &magnitude, sizeof(a));
  const T r = (a + kBig) - kBig;
  I r_bits;
  std::memcpy(&r_bits, &r, sizeof(r_bits));
  r_bits = r_bits | sign;
  T s;
  std::memcpy(&s, &r_bits, sizeof(s));
  *out = a < kBig ? s : x;
}

/// The largest |x| that SinCosReduced takes (Cody-Waite reduction exact up to it).
inline constexpr float kSinCosLimit = 8192.0f;

/// sin(x), or cos(x) when kCos, for |x| <= kSinCosLimit, float or a vector T: x = j pi/2 + r
/// with |r| <= pi/4 (pi/2 in three parts, so that each product and difference is exact), then
/// sin r or cos r by their minimax polynomials (cephes' sinf / cosf coefficients; a few ulp) and
/// the quadrant j mod 4 (read from the rounding sum's low mantissa bits) choosing the sign.
template <typename T, bool kCos>
__attribute__((always_inline)) inline void SinCosReduced(const T& x, T* out) {
  using I = IntsFor<T>;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const T t = x * 0.636619772367581343f + kRound;
  const T j = t - kRound;
  T r = x - j * 1.5703125f;
  r = r - j * 4.837512969970703125e-4f;
  r = r - j * 7.54978995489188216e-8f;
  I q;
  std::memcpy(&q, &t, sizeof(q));
  if constexpr (kCos) q = q + 1;
  const T r2 = r * r;
  const T sin_r =
      ((r2 * -1.9515295891e-4f + 8.3321608736e-3f) * r2 - 1.6666654611e-1f) * r2 * r + r;
  const T cos_r =
      ((r2 * 2.443315711809948e-5f - 1.388731625493765e-3f) * r2 + 4.166664568298827e-2f) * r2 *
          r2 -
      r2 * 0.5f + 1.0f;
  const T v = (q & 1) != 0 ? cos_r : sin_r;
  const T signed_v = (q & 2) != 0 ? -v : v;
  *out = kCos || x != 0.0f ? signed_v : x;  // sin(-0) is -0
}

/// atan(x) for float or a vector T: x reduced by atan(x) = pi/2 + atan(-1/x) above tan(3pi/8)
/// and pi/4 + atan((x-1)/(x+1)) above tan(pi/8), then cephes' atanf polynomial (a few ulp); the
/// sign restored (atan(-0) is -0); +-inf give +-pi/2, NaN stays NaN.
template <typename T>
__attribute__((always_inline)) inline void AtanOf(const T& x, T* out) {
  const T a = x < 0.0f ? -x : x;
  const auto high = a > 2.414213562373095f;
  const auto middle = a > 0.4142135623730950f;
  const T num = high ? T{} - 1.0f : middle ? a - 1.0f : a;
  const T den = high ? a : middle ? a + 1.0f : T{} + 1.0f;
  const T base = high ? T{} + 1.5707963267948966f : middle ? T{} + 0.7853981633974483f : T{};
  const T z = num / den;
  const T z2 = z * z;
  const T p = (((z2 * 8.05374449538e-2f - 1.38776856032e-1f) * z2 + 1.99777106478e-1f) * z2 -
               3.33329491539e-1f) *
                  z2 * z +
              z;
  const T y = base + p;
  *out = x < 0.0f ? -y : x == 0.0f ? x : y;
}

/// TanhOf for one float.
__attribute__((always_inline)) inline float TanhApprox(float x) {
  float y;
  TanhOf(x, &y);
  return y;
}

/// y[i] = 1 / (1 + e^-x[i]) for i < n, through e^-|x| (never a large exponent), so that tiny
/// results keep their relative accuracy (~3e-7); `x` may equal `y`. Thread-safe.
void SigmoidArray(const float* x, float* y, int64_t n);

/// y[i] = x[i] / (1 + e^-x[i]) (Swish / SiLU) for i < n, x times SigmoidArray's value; `x` may
/// equal `y`. Thread-safe.
void SwishArray(const float* x, float* y, int64_t n);

/// y[i] = tanh(x[i]) for i < n by TanhApprox; `x` may equal `y`. Thread-safe.
void TanhArray(const float* x, float* y, int64_t n);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_VECTOR_MATH_H_
