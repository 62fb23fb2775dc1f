#include "kernels/cpu/binary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

enum class Arith { kAdd, kSub, kMul, kDiv, kPow, kMin, kMax, kSum, kMean };
enum class Compare { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };
enum class Logic { kAnd, kOr, kXor };

template <typename T>
T IntDiv(T a, T b) {
  // Integer division by zero (and INT_MIN / -1) would trap; they yield 0 / a instead.
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(0 - a);
  }
  return a / b;
}

template <typename T>
T ApplyArith(Arith op, T a, T b) {
  switch (op) {
    case Arith::kAdd:
    case Arith::kSum:
    case Arith::kMean:
      return a + b;
    case Arith::kSub:
      return a - b;
    case Arith::kMul:
      return a * b;
    case Arith::kDiv:
      if constexpr (std::is_integral_v<T>) {
        return IntDiv(a, b);
      } else {
        return a / b;
      }
    case Arith::kMin:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
      }
      return std::min(a, b);
    case Arith::kMax:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
      }
      return std::max(a, b);
    case Arith::kPow:
      return static_cast<T>(std::pow(a, b));
  }
  return a;
}

// out[i] = f(a[i], b[i]) over a broadcast plan of two operands (a, b), split over up to
// `threads` threads when large enough (each element is computed as serially: same bits).
template <typename TA, typename TB, typename TO, typename F>
void BinaryLoop(const BroadcastPlan& plan, const TA* a, const TB* b, TO* out, F f, int threads = 1,
                double cost = 1.0) {
  const int64_t sa = plan.strides[0].back();
  const int64_t sb = plan.strides[1].back();
  ForEachRowParallel(plan, threads, cost, [&](int64_t o, const int64_t* offs, int64_t n) {
    const TA* pa = a + offs[0];
    const TB* pb = b + offs[1];
    TO* po = out + o;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const TB bv = *pb;
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const TA av = *pa;
      for (int64_t i = 0; i < n; ++i) po[i] = f(av, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i * sa], pb[i * sb]);
    }
  });
}

absl::StatusOr<Shape> OutputShape(const PrepareContext& context) {
  Shape out = context.inputs[0].shape;
  for (size_t i = 1; i < context.inputs.size(); ++i) {
    auto next = BroadcastShapes(out, context.inputs[i].shape);
    if (!next.ok()) return InvalidArgument(context, next.status().message());
    out = *std::move(next);
  }
  return out;
}

absl::Status SameTypes(const PrepareContext& context, size_t first, size_t last) {
  for (size_t i = first + 1; i <= last; ++i) {
    if (context.inputs[i].dtype != context.inputs[first].dtype) {
      return InvalidArgument(context, "input ", i, " has element type ",
                             runtime::DataTypeName(context.inputs[i].dtype), ", input ", first,
                             " has ", runtime::DataTypeName(context.inputs[first].dtype));
    }
  }
  return absl::OkStatus();
}

// Add, Sub, Mul, Div (two inputs) and Min, Max, Sum, Mean (one or more).
template <Arith kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareArith(const PrepareContext& context) {
  constexpr bool kVariadic =
      kOp == Arith::kMin || kOp == Arith::kMax || kOp == Arith::kSum || kOp == Arith::kMean;
  RETURN_IF_ERROR(ExpectInputCount(context, kVariadic ? 1 : 2, kVariadic ? 64 : 2));
  RETURN_IF_ERROR(SameTypes(context, 0, context.inputs.size() - 1));
  const DataType dtype = context.inputs[0].dtype;
  float alpha = 1.0f;
  if (kOp == Arith::kAdd) {
    ASSIGN_OR_RETURN(alpha, AttrsOf(context).GetFloat("alpha", 1.0f));
  }
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  // One plan per input after the first, each pairing the output (as accumulator) with it;
  // the first input is broadcast-copied (variadic) or paired directly (binary).
  const size_t n = context.inputs.size();
  std::vector<BroadcastPlan> plans;
  if (n == 1) {
    plans.push_back(MakeBroadcastPlan(out, {context.inputs[0].shape}));
  } else if (kVariadic && n > 2) {
    plans.push_back(MakeBroadcastPlan(out, {context.inputs[0].shape}));
    for (size_t i = 1; i < n; ++i)
      plans.push_back(MakeBroadcastPlan(out, {out, context.inputs[i].shape}));
  } else {
    plans.push_back(MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape}));
  }
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(dtype, [&]<typename T>() {
    const int threads = context.intra_op_threads;
    run = [plans, n, alpha, threads, count = runtime::NumElements(out)](const KernelArgs& args) {
      T* o = static_cast<T*>(args.outputs[0]);
      const auto in = [&](size_t i) { return static_cast<const T*>(args.inputs[i]); };
      if (n == 1) {
        CopyStrided(plans[0], in(0), o);
      } else if (plans.size() == 1) {
        if (kOp == Arith::kAdd && alpha != 1.0f) {
          const T a = static_cast<T>(alpha);
          BinaryLoop(
              plans[0], in(0), in(1), o, [a](T x, T y) { return static_cast<T>(x + y * a); },
              threads);
        } else {
          BinaryLoop(
              plans[0], in(0), in(1), o, [](T x, T y) { return ApplyArith(kOp, x, y); }, threads);
        }
      } else {
        CopyStrided(plans[0], in(0), o);
        for (size_t i = 1; i < n; ++i) {
          BinaryLoop(
              plans[i], static_cast<const T*>(o), in(i), o,
              [](T x, T y) { return ApplyArith(kOp, x, y); }, threads);
        }
      }
      if constexpr (kOp == Arith::kMean) {
        for (int64_t i = 0; i < count; ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(n));
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, out)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePow(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  const DataType base_type = context.inputs[0].dtype;
  const DataType exp_type = context.inputs[1].dtype;
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  // A float base raised to one known power of 1, 2, 3 or -1 (squares in decomposed norms, cubes
  // in tanh-form GELU): products, split over the threads, instead of powf per element. x * x
  // and 1 / x round as powf does; x * x * x can differ from it in the last place.
  const TensorDesc& e = context.inputs[1];
  if (base_type == DataType::kFloat32 && out == context.inputs[0].shape && e.data != nullptr &&
      runtime::NumElements(e.shape) == 1 &&
      (exp_type == DataType::kFloat32 || exp_type == DataType::kFloat64 ||
       exp_type == DataType::kInt32 || exp_type == DataType::kInt64)) {
    const double power = ElementAsDouble(exp_type, e.data, 0);
    if (power == 1.0 || power == 2.0 || power == 3.0 || power == -1.0) {
      const int64_t count = runtime::NumElements(out);
      const int threads = context.intra_op_threads;
      return MakeKernel(context, {Desc(base_type, out)}, [=](const KernelArgs& args) {
        const float* x = static_cast<const float*>(args.inputs[0]);
        float* y = static_cast<float*>(args.outputs[0]);
        ParallelFor(count, threads, 1.0, [&](int64_t begin, int64_t end) {
          if (power == 2.0) {
            for (int64_t i = begin; i < end; ++i) y[i] = x[i] * x[i];
          } else if (power == 3.0) {
            for (int64_t i = begin; i < end; ++i) y[i] = x[i] * x[i] * x[i];
          } else if (power == -1.0) {
            for (int64_t i = begin; i < end; ++i) y[i] = 1.0f / x[i];
          } else {
            std::copy(x + begin, x + end, y + begin);
          }
        });
        return absl::OkStatus();
      });
    }
  }
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  FunctionKernel::RunFn run;
  bool exp_ok = false;
  const bool base_ok = DispatchArithmetic(base_type, [&]<typename T>() {
    exp_ok = DispatchNumeric(exp_type, [&]<typename E>() {
      // powf per element: about 20 ns of one core (kernel_util.h's cost unit).
      run = [plan, threads = context.intra_op_threads](const KernelArgs& args) {
        BinaryLoop(
            plan, static_cast<const T*>(args.inputs[0]), static_cast<const E*>(args.inputs[1]),
            static_cast<T*>(args.outputs[0]),
            [](T x, E y) {
              if constexpr (std::is_same_v<T, float> && std::is_floating_point_v<E>) {
                return std::pow(x, static_cast<float>(y));
              } else {
                return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
              }
            },
            threads, 20.0);
        return absl::OkStatus();
      };
    });
  });
  if (!base_ok || !exp_ok) {
    return Unimplemented(context, "element types ", runtime::DataTypeName(base_type), " and ",
                         runtime::DataTypeName(exp_type), " are not supported");
  }
  return MakeKernel(context, {Desc(base_type, out)}, std::move(run));
}

template <Compare kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCompare(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(SameTypes(context, 0, 1));
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  if (kOp == Compare::kEqual && context.inputs[0].dtype == DataType::kString) {
    // Byte-wise equality of the strings the views point to.
    return MakeKernel(context, {Desc(DataType::kBool, out)}, [plan](const KernelArgs& args) {
      using runtime::StringElement;
      BinaryLoop(plan, static_cast<const StringElement*>(args.inputs[0]),
                 static_cast<const StringElement*>(args.inputs[1]),
                 static_cast<bool*>(args.outputs[0]), [](StringElement x, StringElement y) {
                   return absl::string_view(x.data, x.size) == absl::string_view(y.data, y.size);
                 });
      return absl::OkStatus();
    });
  }
  FunctionKernel::RunFn run;
  const bool ok = DispatchAnyType(context.inputs[0].dtype, [&]<typename T>() {
    run = [plan, threads = context.intra_op_threads](const KernelArgs& args) {
      BinaryLoop(
          plan, static_cast<const T*>(args.inputs[0]), static_cast<const T*>(args.inputs[1]),
          static_cast<bool*>(args.outputs[0]),
          [](T x, T y) {
            if constexpr (kOp == Compare::kEqual) return x == y;
            if constexpr (kOp == Compare::kLess) return x < y;
            if constexpr (kOp == Compare::kGreater) return x > y;
            if constexpr (kOp == Compare::kLessOrEqual) return x <= y;
            if constexpr (kOp == Compare::kGreaterOrEqual) return x >= y;
          },
          threads);
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(context.inputs[0].dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(DataType::kBool, out)}, std::move(run));
}

template <Logic kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLogic(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kBool}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kBool}));
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  return MakeKernel(context, {Desc(DataType::kBool, out)},
                    [plan, threads = context.intra_op_threads](const KernelArgs& args) {
                      BinaryLoop(
                          plan, static_cast<const bool*>(args.inputs[0]),
                          static_cast<const bool*>(args.inputs[1]),
                          static_cast<bool*>(args.outputs[0]),
                          [](bool x, bool y) {
                            if constexpr (kOp == Logic::kAnd) return x && y;
                            if constexpr (kOp == Logic::kOr) return x || y;
                            if constexpr (kOp == Logic::kXor) return x != y;
                          },
                          threads);
                      return absl::OkStatus();
                    });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePRelu(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  if (out != context.inputs[0].shape) {
    return InvalidArgument(context, "slope shape ", runtime::ShapeToString(context.inputs[1].shape),
                           " does not broadcast to input shape ",
                           runtime::ShapeToString(context.inputs[0].shape));
  }
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  return MakeKernel(context, {Desc(DataType::kFloat32, out)},
                    [plan, threads = context.intra_op_threads](const KernelArgs& args) {
                      BinaryLoop(
                          plan, static_cast<const float*>(args.inputs[0]),
                          static_cast<const float*>(args.inputs[1]),
                          static_cast<float*>(args.outputs[0]),
                          [](float x, float slope) { return x < 0 ? x * slope : x; }, threads);
                      return absl::OkStatus();
                    });
}

// a where c is not 0, else b: by a mask for the unsigned integer types that carry Where's
// elements (no branch, so that loops of it vectorise), by a branch for the 16-byte elements.
template <typename T>
inline T SelectBits(uint8_t c, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const T mask = static_cast<T>(T{0} - static_cast<T>(c != 0));
    return static_cast<T>((a & mask) | (b & static_cast<T>(~mask)));
  } else {
    return c != 0 ? a : b;
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareWhere(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kBool}));
  RETURN_IF_ERROR(SameTypes(context, 1, 2));
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  const DataType dtype = context.inputs[1].dtype;
  BroadcastPlan plan = MakeBroadcastPlan(
      out, {context.inputs[0].shape, context.inputs[1].shape, context.inputs[2].shape});
  FunctionKernel::RunFn run;
  const bool ok = DispatchBySize(runtime::DataTypeSize(dtype), [&]<typename T>() {
    run = [plan, threads = context.intra_op_threads](const KernelArgs& args) {
      const bool* cond = static_cast<const bool*>(args.inputs[0]);
      const T* x = static_cast<const T*>(args.inputs[1]);
      const T* y = static_cast<const T*>(args.inputs[2]);
      T* out_ptr = static_cast<T*>(args.outputs[0]);
      const int64_t sc = plan.strides[0].back();
      const int64_t sx = plan.strides[1].back();
      const int64_t sy = plan.strides[2].back();
      // Rows of contiguous conditions with contiguous or one-value operands select by masks,
      // without a branch (vector code; a branch per element mispredicts on mixed conditions);
      // other strides take the general loop. Condition bytes other than 0 count as true.
      ForEachRowParallel(plan, threads, 1.0, [&](int64_t o, const int64_t* offs, int64_t n) {
        const uint8_t* c = reinterpret_cast<const uint8_t*>(cond) + offs[0];
        const T* px = x + offs[1];
        const T* py = y + offs[2];
        T* po = out_ptr + o;
        if (sc == 1 && sx == 1 && sy == 1) {
          for (int64_t i = 0; i < n; ++i) po[i] = SelectBits(c[i], px[i], py[i]);
        } else if (sc == 1 && sx == 1 && sy == 0) {
          const T yv = *py;
          for (int64_t i = 0; i < n; ++i) po[i] = SelectBits(c[i], px[i], yv);
        } else if (sc == 1 && sx == 0 && sy == 1) {
          const T xv = *px;
          for (int64_t i = 0; i < n; ++i) po[i] = SelectBits(c[i], xv, py[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) po[i] = c[i * sc] != 0 ? px[i * sx] : py[i * sy];
        }
      });
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, out)}, std::move(run));
}

// Mod: `fmod` 0 takes the sign of the divisor (integers only), 1 that of the dividend (C's
// fmod; required for floating point). A zero integer divisor yields 0 rather than trapping.
// C's fmod for float, exactly and without libm's bit-by-bit loop for most operands: in double,
// r = a - trunc(a / b) * b is exact while the quotient stays under 2^29 (its product with b
// then fits double's 53 bits, and |r| < |b| keeps a's or b's granularity). The quotient's
// rounding cannot reach the next integer there: a quotient short of an integer falls short by
// more than 2^-24 (one unit in the last place of b over b, or of a over b), and double's half
// unit below 2^29 is 2^-25. A zero r takes a's sign. Larger quotients, a zero or infinite
// divisor, an infinite dividend and NaN take std::fmod.
inline float FmodOf(float a, float b) {
  const double ad = a, bd = b;
  const double q = std::trunc(ad / bd);
  if (!(std::fabs(q) < 536870912.0) || std::isinf(bd)) return std::fmod(a, b);
  const double r = ad - q * bd;
  return static_cast<float>(r == 0 ? std::copysign(0.0, ad) : r);
}

template <typename T>
T ModOf(T a, T b, bool c_fmod) {
  if constexpr (std::is_same_v<T, float>) {
    return FmodOf(a, b);
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;  // INT_MIN % -1 traps
      T r = static_cast<T>(a % b);
      if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMod(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(SameTypes(context, 0, 1));
  ASSIGN_OR_RETURN(int64_t fmod, AttrsOf(context).GetInt("fmod", 0));
  if (fmod != 0 && fmod != 1) return InvalidArgument(context, "fmod must be 0 or 1, got ", fmod);
  const DataType dtype = context.inputs[0].dtype;
  if ((dtype == DataType::kFloat32 || dtype == DataType::kFloat64) && fmod != 1) {
    return InvalidArgument(context, "fmod must be 1 for ", runtime::DataTypeName(dtype), " inputs");
  }
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  FunctionKernel::RunFn run;
  const bool ok = DispatchNumeric(dtype, [&]<typename T>() {
    run = [plan, c_fmod = fmod == 1, threads = context.intra_op_threads](const KernelArgs& args) {
      BinaryLoop(
          plan, static_cast<const T*>(args.inputs[0]), static_cast<const T*>(args.inputs[1]),
          static_cast<T*>(args.outputs[0]), [c_fmod](T x, T y) { return ModOf(x, y, c_fmod); },
          threads, 4.0);
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "element type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, out)}, std::move(run));
}

// BitShift on unsigned integers; a shift by the width or more yields 0.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBitShift(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(SameTypes(context, 0, 1));
  RETURN_IF_ERROR(ExpectType(
      context, 0, {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64}));
  ASSIGN_OR_RETURN(std::string direction, AttrsOf(context).GetString("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") {
    return InvalidArgument(context, "direction must be LEFT or RIGHT, got \"", direction, "\"");
  }
  const bool left = direction == "LEFT";
  ASSIGN_OR_RETURN(Shape out, OutputShape(context));
  BroadcastPlan plan = MakeBroadcastPlan(out, {context.inputs[0].shape, context.inputs[1].shape});
  FunctionKernel::RunFn run;
  DispatchNumeric(context.inputs[0].dtype, [&]<typename T>() {
    if constexpr (std::is_unsigned_v<T>) {
      run = [plan, left](const KernelArgs& args) {
        BinaryLoop(plan, static_cast<const T*>(args.inputs[0]),
                   static_cast<const T*>(args.inputs[1]), static_cast<T*>(args.outputs[0]),
                   [left](T x, T y) -> T {
                     if (y >= sizeof(T) * 8) return 0;
                     return static_cast<T>(left ? x << y : x >> y);
                   });
        return absl::OkStatus();
      };
    }
  });
  return MakeKernel(context, {Desc(context.inputs[0].dtype, out)}, std::move(run));
}

}  // namespace

absl::Status RegisterBinaryKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Add", &PrepareArith<Arith::kAdd>));
  RETURN_IF_ERROR(registry->Register("Sub", &PrepareArith<Arith::kSub>));
  RETURN_IF_ERROR(registry->Register("Mul", &PrepareArith<Arith::kMul>));
  RETURN_IF_ERROR(registry->Register("Div", &PrepareArith<Arith::kDiv>));
  RETURN_IF_ERROR(registry->Register("Min", &PrepareArith<Arith::kMin>));
  RETURN_IF_ERROR(registry->Register("Max", &PrepareArith<Arith::kMax>));
  RETURN_IF_ERROR(registry->Register("Sum", &PrepareArith<Arith::kSum>));
  RETURN_IF_ERROR(registry->Register("Mean", &PrepareArith<Arith::kMean>));
  RETURN_IF_ERROR(registry->Register("Pow", &PreparePow));
  RETURN_IF_ERROR(registry->Register("Mod", &PrepareMod));
  RETURN_IF_ERROR(registry->Register("BitShift", &PrepareBitShift));
  RETURN_IF_ERROR(registry->Register("Equal", &PrepareCompare<Compare::kEqual>));
  RETURN_IF_ERROR(registry->Register("Less", &PrepareCompare<Compare::kLess>));
  RETURN_IF_ERROR(registry->Register("Greater", &PrepareCompare<Compare::kGreater>));
  RETURN_IF_ERROR(registry->Register("LessOrEqual", &PrepareCompare<Compare::kLessOrEqual>));
  RETURN_IF_ERROR(registry->Register("GreaterOrEqual", &PrepareCompare<Compare::kGreaterOrEqual>));
  RETURN_IF_ERROR(registry->Register("And", &PrepareLogic<Logic::kAnd>));
  RETURN_IF_ERROR(registry->Register("Or", &PrepareLogic<Logic::kOr>));
  RETURN_IF_ERROR(registry->Register("Xor", &PrepareLogic<Logic::kXor>));
  RETURN_IF_ERROR(registry->Register("PRelu", &PreparePRelu));
  RETURN_IF_ERROR(registry->Register("Where", &PrepareWhere));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
