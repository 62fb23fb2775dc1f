// Elementwise ops of one input: activations and math functions (float32), Neg/Abs/Sign/Relu
// (also int32/int64), Shrink (numeric), IsNaN/IsInf (float32/float64), Identity (any type),
// Not (bool), Clip and Dropout (inference).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// A float32 map over the input, split over the intra-op threads when large enough (`cost`:
// rough ns per element; ParallelFor): `range(in, out, count)` maps `count` elements.
template <typename Range>
absl::StatusOr<std::unique_ptr<PreparedKernel>> FloatRangeMap(const PrepareContext& context,
                                                              Range range, double cost) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& shape = context.inputs[0].shape;
  const int64_t n = runtime::NumElements(shape);
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)},
                    [n, range, threads, cost](const KernelArgs& args) {
                      const float* in = static_cast<const float*>(args.inputs[0]);
                      float* out = static_cast<float*>(args.outputs[0]);
                      ParallelFor(n, threads, cost, [&](int64_t begin, int64_t end) {
                        range(in + begin, out + begin, end - begin);
                      });
                      return absl::OkStatus();
                    });
}

// y[i] = f(x[i]) in vector arithmetic for whole vectors of V (the copy's register width), then
// one float at a time: F has `template <typename T> void Of(const T& in, T* out) const` for
// float and V, its parameters as members (a local copy, so that they stay in registers).
template <typename V, typename F>
__attribute__((always_inline)) inline void MapWith(const F& f, const float* x, float* y,
                                                   int64_t n) {
  const F local = f;
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    LoadFloats(x + i, &v);
    local.Of(v, &v);
    StoreFloats(y + i, v);
  }
  for (; i < n; ++i) {
    float v = x[i];
    local.Of(v, &v);
    y[i] = v;
  }
}
template <typename F>
__attribute__((target("avx512f"))) void MapAvx512(const F& f, const float* x, float* y, int64_t n) {
  MapWith<Floats16>(f, x, y, n);
}
template <typename F>
__attribute__((target("avx2,fma"))) void MapAvx2(const F& f, const float* x, float* y, int64_t n) {
  MapWith<Floats8>(f, x, y, n);
}
template <typename F>
void MapBaseline(const F& f, const float* x, float* y, int64_t n) {
  MapWith<Floats4>(f, x, y, n);
}

// FloatRangeMap of F's map (MapWith), in this CPU's copy.
template <typename F>
absl::StatusOr<std::unique_ptr<PreparedKernel>> VectorMap(const PrepareContext& context, F f,
                                                          double cost = 1.0) {
  using Fn = void (*)(const F&, const float*, float*, int64_t);
  const Fn fn = PickForThisCpu<Fn>(&MapAvx512<F>, &MapAvx2<F>, &MapBaseline<F>);
  return FloatRangeMap(
      context, [f, fn](const float* in, float* out, int64_t count) { fn(f, in, out, count); },
      cost);
}

// The maps VectorMap runs (vector_math.h's approximations: erf within 5e-7, e^x, e^x - 1 and
// softplus within about 1e-6 relative).
struct ErfMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    ErfOf(in, out);
  }
};
struct ExpMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    ExpOf(in, out);
  }
};
struct SoftplusMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    SoftplusOf(in, out);
  }
};
// Sin (kCos false) and Cos: SinCosReduced, and libm for the lanes past kSinCosLimit (and
// infinities, NaN), whose reduction needs more than three parts of pi/2.
template <bool kCos>
struct SinCosMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    const T x = in;
    SinCosReduced<T, kCos>(x, out);
    if constexpr (std::is_same_v<T, float>) {
      if (!(std::fabs(x) <= kSinCosLimit)) *out = kCos ? std::cos(x) : std::sin(x);
    } else {
      const auto inside = (x < 0.0f ? -x : x) <= kSinCosLimit;  // NaN: outside
      constexpr int kLanes = sizeof(T) / sizeof(float);
      bool all = true;
      for (int i = 0; i < kLanes; ++i) all = all && inside[i] != 0;
      if (all) return;
      for (int i = 0; i < kLanes; ++i) {
        if (inside[i] == 0) (*out)[i] = kCos ? std::cos(x[i]) : std::sin(x[i]);
      }
    }
  }
};
struct AtanMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    AtanOf(in, out);
  }
};
struct RoundMap {
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    RoundHalfEvenOf(in, out);
  }
};
// x >= 0 ? x : alpha x.
struct LeakyReluMap {
  float alpha;
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    const T x = in;
    *out = x >= 0.0f ? x : x * alpha;
  }
};
// Elu (scale 1, x >= 0 kept), Selu (scale gamma, x > 0 kept; the same at 0) and Celu with
// alpha > 0 (inner 1 / alpha): x >= 0 ? scale x : scale alpha (e^(inner x) - 1).
struct ExpLinearMap {
  float alpha, scale, inner;
  template <typename T>
  __attribute__((always_inline)) void Of(const T& in, T* out) const {
    const T x = in;
    T m;
    Expm1NonPositive(x >= 0.0f ? T{} + 0.0f : x * inner, &m);  // NaN stays NaN
    *out = x >= 0.0f ? x * scale : m * (scale * alpha);
  }
};

// out[i] = f(in[i]), one element at a time.
template <typename F>
absl::StatusOr<std::unique_ptr<PreparedKernel>> FloatMap(const PrepareContext& context, F f,
                                                         double cost = 1.0) {
  return FloatRangeMap(
      context,
      [f](const float* in, float* out, int64_t count) {
        for (int64_t i = 0; i < count; ++i) out[i] = f(in[i]);
      },
      cost);
}

enum class Simple {
  kRelu,
  kSigmoid,
  kTanh,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSoftplus,
  kSoftsign,
  kHardSwish,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh
};

template <Simple kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSimple(const PrepareContext& context) {
  // Rough ns per element: a compare or a rounding, or a libm function.
  constexpr bool kCheap = kOp == Simple::kRelu || kOp == Simple::kReciprocal ||
                          kOp == Simple::kFloor || kOp == Simple::kCeil || kOp == Simple::kSqrt ||
                          kOp == Simple::kSoftsign || kOp == Simple::kHardSwish;
  constexpr double kCost = kCheap ? 1.0 : 8.0;
  // Sigmoid and Tanh in vectorised arithmetic (vector_math.h: within about 3e-7 relative and
  // 5e-7 absolute of libm's exp and tanh).
  if constexpr (kOp == Simple::kSigmoid) {
    return FloatRangeMap(context, &SigmoidArray, 1.0);
  } else if constexpr (kOp == Simple::kTanh) {
    return FloatRangeMap(context, &TanhArray, 1.0);
  } else if constexpr (kOp == Simple::kErf) {
    return VectorMap(context, ErfMap{});
  } else if constexpr (kOp == Simple::kExp) {
    return VectorMap(context, ExpMap{});
  } else if constexpr (kOp == Simple::kSoftplus) {
    return VectorMap(context, SoftplusMap{});
  } else if constexpr (kOp == Simple::kSin || kOp == Simple::kCos) {
    return VectorMap(context, SinCosMap<kOp == Simple::kCos>{});
  } else if constexpr (kOp == Simple::kAtan) {
    return VectorMap(context, AtanMap{});
  } else if constexpr (kOp == Simple::kRound) {
    return VectorMap(context, RoundMap{});
  } else {
    return FloatMap(
        context,
        [](float x) -> float {
          if constexpr (kOp == Simple::kRelu) return x > 0.0f ? x : 0.0f;
          if constexpr (kOp == Simple::kLog) return std::log(x);
          if constexpr (kOp == Simple::kSqrt) return std::sqrt(x);
          if constexpr (kOp == Simple::kReciprocal) return 1.0f / x;
          if constexpr (kOp == Simple::kFloor) return std::floor(x);
          if constexpr (kOp == Simple::kCeil) return std::ceil(x);
          if constexpr (kOp == Simple::kSoftsign) return x / (1.0f + std::fabs(x));
          if constexpr (kOp == Simple::kHardSwish) {
            return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
          }
          if constexpr (kOp == Simple::kTan) return std::tan(x);
          if constexpr (kOp == Simple::kAsin) return std::asin(x);
          if constexpr (kOp == Simple::kAcos) return std::acos(x);
          if constexpr (kOp == Simple::kSinh) return std::sinh(x);
          if constexpr (kOp == Simple::kCosh) return std::cosh(x);
          if constexpr (kOp == Simple::kAsinh) return std::asinh(x);
          if constexpr (kOp == Simple::kAcosh) return std::acosh(x);
          if constexpr (kOp == Simple::kAtanh) return std::atanh(x);
        },
        kCost);
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLeakyRelu(const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 0.01f));
  return VectorMap(context, LeakyReluMap{alpha});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareHardSigmoid(const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 0.2f));
  ASSIGN_OR_RETURN(float beta, AttrsOf(context).GetFloat("beta", 0.5f));
  return FloatMap(
      context, [alpha, beta](float x) { return std::max(0.0f, std::min(1.0f, alpha * x + beta)); });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareElu(const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 1.0f));
  return VectorMap(context, ExpLinearMap{alpha, 1.0f, 1.0f});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSelu(const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 1.67326319217681884765625f));
  ASSIGN_OR_RETURN(float gamma, AttrsOf(context).GetFloat("gamma", 1.05070102214813232421875f));
  return VectorMap(context, ExpLinearMap{alpha, gamma, 1.0f});
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareThresholdedRelu(
    const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 1.0f));
  return FloatMap(context, [alpha](float x) { return x > alpha ? x : 0.0f; });
}

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCelu(const PrepareContext& context) {
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 1.0f));
  if (alpha == 0.0f) return InvalidArgument(context, "alpha must not be 0");
  if (alpha > 0.0f) return VectorMap(context, ExpLinearMap{alpha, 1.0f, 1.0f / alpha});
  return FloatMap(context, [alpha](float x) {
    return std::max(0.0f, x) + std::min(0.0f, alpha * std::expm1(x / alpha));
  });
}

// Shrink: x - bias above lambd, x + bias below -lambd, 0 between (any numeric type).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareShrink(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  ASSIGN_OR_RETURN(float bias, AttrsOf(context).GetFloat("bias", 0.0f));
  ASSIGN_OR_RETURN(float lambd, AttrsOf(context).GetFloat("lambd", 0.5f));
  const TensorDesc& in = context.inputs[0];
  const int64_t n = runtime::NumElements(in.shape);
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(in.dtype, [&]<typename T>() {
    run = [n, bias, lambd](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(x[i]);
        y[i] = v < -lambd ? static_cast<T>(v + bias) : v > lambd ? static_cast<T>(v - bias) : T{0};
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(in.dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, std::move(run));
}

// IsNaN and IsInf (float32, float64) into bool; IsInf's detect_negative / detect_positive pick
// the signs.
template <bool kIsNaN>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFloatClass(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32, DataType::kFloat64}));
  ASSIGN_OR_RETURN(int64_t negative, AttrsOf(context).GetInt("detect_negative", 1));
  ASSIGN_OR_RETURN(int64_t positive, AttrsOf(context).GetInt("detect_positive", 1));
  const TensorDesc& in = context.inputs[0];
  const int64_t n = runtime::NumElements(in.shape);
  FunctionKernel::RunFn run;
  DispatchNumeric(in.dtype, [&]<typename T>() {
    run = [n, negative, positive](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      bool* y = static_cast<bool*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kIsNaN) {
          (void)negative;  // IsInf's attributes
          (void)positive;
          y[i] = std::isnan(x[i]);
        } else {
          y[i] = std::isinf(x[i]) && (x[i] > 0 ? positive != 0 : negative != 0);
        }
      }
      return absl::OkStatus();
    };
  });
  return MakeKernel(context, {Desc(DataType::kBool, in.shape)}, std::move(run));
}

enum class Signed { kNeg, kAbs, kSign, kRelu };

// Neg, Abs, Sign: float32, float64, int32, int64 (Relu's float path is PrepareSimple).
template <Signed kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSigned(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const TensorDesc& in = context.inputs[0];
  if (kOp == Signed::kRelu && in.dtype == DataType::kFloat32) {
    return PrepareSimple<Simple::kRelu>(context);
  }
  const int64_t n = runtime::NumElements(in.shape);
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(in.dtype, [&]<typename T>() {
    run = [n](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kOp == Signed::kNeg) y[i] = static_cast<T>(-x[i]);
        if constexpr (kOp == Signed::kAbs) {
          if constexpr (std::is_signed_v<T>) {
            y[i] = x[i] < 0 ? static_cast<T>(-x[i]) : x[i];
          } else {
            y[i] = x[i];
          }
        }
        if constexpr (kOp == Signed::kSign) {
          y[i] = static_cast<T>(static_cast<int>(x[i] > T{0}) - static_cast<int>(x[i] < T{0}));
        }
        if constexpr (kOp == Signed::kRelu) y[i] = x[i] > 0 ? x[i] : T{0};
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(in.dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareIdentity(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const TensorDesc& in = context.inputs[0];
  const size_t bytes = runtime::NumElements(in.shape) * runtime::DataTypeSize(in.dtype);
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, CopyInputToOutput(bytes));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareNot(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kBool}));
  const Shape& shape = context.inputs[0].shape;
  const int64_t n = runtime::NumElements(shape);
  return MakeKernel(context, {Desc(DataType::kBool, shape)}, [n](const KernelArgs& args) {
    const bool* x = static_cast<const bool*>(args.inputs[0]);
    bool* y = static_cast<bool*>(args.outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = !x[i];
    return absl::OkStatus();
  });
}

// Clip: bounds from attributes before opset 11, from optional scalar inputs since (read at Run
// when they are not known at Prepare).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareClip(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 3));
  const TensorDesc& in = context.inputs[0];
  for (size_t i = 1; i < context.inputs.size(); ++i) {
    if (!HasInput(context, i)) continue;
    if (context.inputs[i].dtype != in.dtype || runtime::NumElements(context.inputs[i].shape) != 1) {
      return InvalidArgument(context, "bound input ", i, " must be a scalar of type ",
                             runtime::DataTypeName(in.dtype), ", got ",
                             runtime::DataTypeName(context.inputs[i].dtype), " ",
                             runtime::ShapeToString(context.inputs[i].shape));
    }
  }
  float attr_min = -std::numeric_limits<float>::infinity();
  float attr_max = std::numeric_limits<float>::infinity();
  if (context.opset < 11) {
    ASSIGN_OR_RETURN(attr_min, AttrsOf(context).GetFloat("min", attr_min));
    ASSIGN_OR_RETURN(attr_max, AttrsOf(context).GetFloat("max", attr_max));
  }
  const bool has_min = HasInput(context, 1);
  const bool has_max = HasInput(context, 2);
  const int64_t n = runtime::NumElements(in.shape);
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(in.dtype, [&]<typename T>() {
    T lo = std::numeric_limits<T>::lowest();
    T hi = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      lo = static_cast<T>(attr_min);
      hi = static_cast<T>(attr_max);
    }
    run = [n, lo, hi, has_min, has_max](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      const T min_v = has_min ? *static_cast<const T*>(args.inputs[1]) : lo;
      const T max_v = has_max ? *static_cast<const T*>(args.inputs[2]) : hi;
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], min_v), max_v);
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(in.dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, std::move(run));
}

// Dropout in inference: the identity, with an all-true mask as the optional second output.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDropout(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 3));
  if (HasInput(context, 2)) {
    const TensorDesc& training = context.inputs[2];
    if (training.data == nullptr) {
      return Unimplemented(context, "training_mode must be known at plan time");
    }
    if (*static_cast<const bool*>(training.data)) {
      return Unimplemented(context, "training_mode=true is not supported (inference only)");
    }
  }
  const TensorDesc& in = context.inputs[0];
  const size_t bytes = runtime::NumElements(in.shape) * runtime::DataTypeSize(in.dtype);
  std::vector<TensorDesc> outputs = {Desc(in.dtype, in.shape)};
  if (context.num_outputs < 2)
    return MakeKernel(context, std::move(outputs), CopyInputToOutput(bytes));
  outputs.push_back(Desc(DataType::kBool, in.shape));
  const size_t n = static_cast<size_t>(runtime::NumElements(in.shape));
  FunctionKernel::RunFn copy = CopyInputToOutput(bytes);
  return MakeKernel(context, std::move(outputs), [copy, n](const KernelArgs& args) {
    RETURN_IF_ERROR(copy(args));
    if (args.outputs[1] != nullptr) std::memset(args.outputs[1], 1, n);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterUnaryKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Relu", &PrepareSigned<Signed::kRelu>));
  RETURN_IF_ERROR(registry->Register("Sigmoid", &PrepareSimple<Simple::kSigmoid>));
  RETURN_IF_ERROR(registry->Register("Tanh", &PrepareSimple<Simple::kTanh>));
  RETURN_IF_ERROR(registry->Register("Erf", &PrepareSimple<Simple::kErf>));
  RETURN_IF_ERROR(registry->Register("Exp", &PrepareSimple<Simple::kExp>));
  RETURN_IF_ERROR(registry->Register("Log", &PrepareSimple<Simple::kLog>));
  RETURN_IF_ERROR(registry->Register("Sqrt", &PrepareSimple<Simple::kSqrt>));
  RETURN_IF_ERROR(registry->Register("Reciprocal", &PrepareSimple<Simple::kReciprocal>));
  RETURN_IF_ERROR(registry->Register("Floor", &PrepareSimple<Simple::kFloor>));
  RETURN_IF_ERROR(registry->Register("Ceil", &PrepareSimple<Simple::kCeil>));
  RETURN_IF_ERROR(registry->Register("Round", &PrepareSimple<Simple::kRound>));
  RETURN_IF_ERROR(registry->Register("Softplus", &PrepareSimple<Simple::kSoftplus>));
  RETURN_IF_ERROR(registry->Register("Softsign", &PrepareSimple<Simple::kSoftsign>));
  RETURN_IF_ERROR(registry->Register("HardSwish", &PrepareSimple<Simple::kHardSwish>));
  RETURN_IF_ERROR(registry->Register("Sin", &PrepareSimple<Simple::kSin>));
  RETURN_IF_ERROR(registry->Register("Cos", &PrepareSimple<Simple::kCos>));
  RETURN_IF_ERROR(registry->Register("Tan", &PrepareSimple<Simple::kTan>));
  RETURN_IF_ERROR(registry->Register("Asin", &PrepareSimple<Simple::kAsin>));
  RETURN_IF_ERROR(registry->Register("Acos", &PrepareSimple<Simple::kAcos>));
  RETURN_IF_ERROR(registry->Register("Atan", &PrepareSimple<Simple::kAtan>));
  RETURN_IF_ERROR(registry->Register("Sinh", &PrepareSimple<Simple::kSinh>));
  RETURN_IF_ERROR(registry->Register("Cosh", &PrepareSimple<Simple::kCosh>));
  RETURN_IF_ERROR(registry->Register("Asinh", &PrepareSimple<Simple::kAsinh>));
  RETURN_IF_ERROR(registry->Register("Acosh", &PrepareSimple<Simple::kAcosh>));
  RETURN_IF_ERROR(registry->Register("Atanh", &PrepareSimple<Simple::kAtanh>));
  RETURN_IF_ERROR(registry->Register("ThresholdedRelu", &PrepareThresholdedRelu));
  RETURN_IF_ERROR(registry->Register("Celu", &PrepareCelu));
  RETURN_IF_ERROR(registry->Register("Shrink", &PrepareShrink));
  RETURN_IF_ERROR(registry->Register("IsNaN", &PrepareFloatClass<true>));
  RETURN_IF_ERROR(registry->Register("IsInf", &PrepareFloatClass<false>));
  RETURN_IF_ERROR(registry->Register("LeakyRelu", &PrepareLeakyRelu));
  RETURN_IF_ERROR(registry->Register("HardSigmoid", &PrepareHardSigmoid));
  RETURN_IF_ERROR(registry->Register("Elu", &PrepareElu));
  RETURN_IF_ERROR(registry->Register("Selu", &PrepareSelu));
  RETURN_IF_ERROR(registry->Register("Neg", &PrepareSigned<Signed::kNeg>));
  RETURN_IF_ERROR(registry->Register("Abs", &PrepareSigned<Signed::kAbs>));
  RETURN_IF_ERROR(registry->Register("Sign", &PrepareSigned<Signed::kSign>));
  RETURN_IF_ERROR(registry->Register("Identity", &PrepareIdentity));
  RETURN_IF_ERROR(registry->Register("Not", &PrepareNot));
  RETURN_IF_ERROR(registry->Register("Clip", &PrepareClip));
  RETURN_IF_ERROR(registry->Register("Dropout", &PrepareDropout));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
