// Cast between the numeric types, bool, float16 and bfloat16 (through float32; float16 rounds
// to nearest even, bfloat16 truncates like ONNX 1.12's reference). Strings are not supported.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// static_cast, except that float to integer conversions of NaN or out-of-range values (UB in
// C++) saturate instead.
template <typename To, typename From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x)) return To{0};
    if (x <= static_cast<From>(std::numeric_limits<To>::lowest())) {
      return std::numeric_limits<To>::lowest();
    }
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
    return sign != 0 ? -v : v;
  }
  if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;   // NaN
  if (abs >= 0x47800000u) return sign | 0x7C00u;  // overflow to infinity
  if (abs < 0x38800000u) {                        // half subnormal or zero
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  const uint32_t mant = abs & 0x7FFFFFu;
  uint32_t h = (((abs >> 23) - 112) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // may carry into infinity
  return sign | static_cast<uint16_t>(h);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  // Truncation, as ONNX 1.12's reference (and its node test data) does.
  return static_cast<uint16_t>(u >> 16);
}

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// Casts where a side is float16 or bfloat16: through float32.
absl::StatusOr<FunctionKernel::RunFn> HalfCast(DataType from, DataType to, int64_t n) {
  FunctionKernel::RunFn run;
  const bool bf_from = from == DataType::kBFloat16;
  const bool bf_to = to == DataType::kBFloat16;
  bool ok = true;
  if (IsHalf(from) && IsHalf(to)) {
    run = [=](const KernelArgs& args) {
      const uint16_t* x = static_cast<const uint16_t*>(args.inputs[0]);
      uint16_t* y = static_cast<uint16_t*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) {
        const float f = bf_from ? BFloat16ToFloat(x[i]) : HalfToFloat(x[i]);
        y[i] = bf_to ? FloatToBFloat16(f) : FloatToHalf(f);
      }
      return absl::OkStatus();
    };
  } else if (IsHalf(from)) {
    ok = DispatchAnyType(to, [&]<typename To>() {
      run = [=](const KernelArgs& args) {
        const uint16_t* x = static_cast<const uint16_t*>(args.inputs[0]);
        To* y = static_cast<To*>(args.outputs[0]);
        for (int64_t i = 0; i < n; ++i) {
          y[i] = Convert<To, float>(bf_from ? BFloat16ToFloat(x[i]) : HalfToFloat(x[i]));
        }
        return absl::OkStatus();
      };
    });
  } else {
    ok = DispatchAnyType(from, [&]<typename From>() {
      run = [=](const KernelArgs& args) {
        const From* x = static_cast<const From*>(args.inputs[0]);
        uint16_t* y = static_cast<uint16_t*>(args.outputs[0]);
        for (int64_t i = 0; i < n; ++i) {
          const float f = Convert<float, From>(x[i]);
          y[i] = bf_to ? FloatToBFloat16(f) : FloatToHalf(f);
        }
        return absl::OkStatus();
      };
    });
  }
  if (!ok) return absl::UnimplementedError("unsupported cast");
  return run;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCast(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const TensorDesc& in = context.inputs[0];
  ASSIGN_OR_RETURN(int64_t to_code, AttrsOf(context).GetInt("to", 0));
  auto to = runtime::DataTypeFromCode(static_cast<int32_t>(to_code));
  if (!to.ok()) return InvalidArgument(context, "attribute to=", to_code, " is not a type");
  const int64_t n = runtime::NumElements(in.shape);
  if (IsHalf(in.dtype) || IsHalf(*to)) {
    auto run = HalfCast(in.dtype, *to, n);
    if (!run.ok()) {
      return Unimplemented(context, "cast from ", runtime::DataTypeName(in.dtype), " to ",
                           runtime::DataTypeName(*to), " is not supported");
    }
    return MakeKernel(context, {Desc(*to, in.shape)}, *std::move(run));
  }
  FunctionKernel::RunFn run;
  bool to_ok = false;
  const bool from_ok = DispatchAnyType(in.dtype, [&]<typename From>() {
    to_ok = DispatchAnyType(*to, [&]<typename To>() {
      run = [n](const KernelArgs& args) {
        const From* x = static_cast<const From*>(args.inputs[0]);
        To* y = static_cast<To*>(args.outputs[0]);
        for (int64_t i = 0; i < n; ++i) y[i] = Convert<To, From>(x[i]);
        return absl::OkStatus();
      };
    });
  });
  if (!from_ok || !to_ok) {
    return Unimplemented(context, "cast from ", runtime::DataTypeName(in.dtype), " to ",
                         runtime::DataTypeName(*to), " is not supported");
  }
  return MakeKernel(context, {Desc(*to, in.shape)}, std::move(run));
}

}  // namespace

absl::Status RegisterCastKernels(runtime::KernelRegistry* registry) {
  return registry->Register("Cast", &PrepareCast);
}

}  // namespace reprise::kernels::cpu
