// Cast and CastLike between the numeric types, bool, float16 and bfloat16 (through float32;
// float16 rounds to nearest even, bfloat16 truncates like ONNX 1.12's reference), and between
// strings and all of those (ONNX's parsing and formatting rules; see docs/string-tensors.md).
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <system_error>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

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

// ---- Strings ----

using runtime::StringElement;

// The longest text FormatNumber writes ("-2.2250738585072014e-308" is 24 characters).
constexpr size_t kNumberText = 32;

// Writes `x` as ONNX's Cast to string does into `out` (kNumberText bytes); returns the length.
// Floating point: the shortest text that reads back as the same value ("0.1", "1e-05"), and
// "NaN", "INF", "-INF" (the literals Cast from string reads); integers in decimal; bool "1"/"0".
template <typename T>
size_t FormatNumber(T x, char* out) {
  if constexpr (std::is_same_v<T, bool>) {
    out[0] = x ? '1' : '0';
    return 1;
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) {
        std::memcpy(out, "NaN", 3);
        return 3;
      }
      if (std::isinf(x)) {
        std::memcpy(out, x < 0 ? "-INF" : "INF", x < 0 ? 4 : 3);
        return x < 0 ? 4 : 3;
      }
    }
    const std::to_chars_result r = std::to_chars(out, out + kNumberText, x);
    return static_cast<size_t>(r.ptr - out);
  }
}

// Parses a floating-point text: plain or scientific, an optional sign, and INF / +INF / -INF /
// NaN (also INFINITY) in any case.
template <typename T>
bool ParseFloat(absl::string_view text, T* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return false;
  const char* end = text.data() + text.size();
  const std::from_chars_result r = std::from_chars(text.data(), end, *out);
  if (r.ptr != end) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // Past T's range: through double, so that "1e50" is infinity and "1e-50" zero for float.
    double wide = 0;
    if (std::from_chars(text.data(), end, wide).ptr != end) return false;
    *out = static_cast<T>(wide);
    return true;
  }
  return r.ec == std::errc();
}

// Parses `text` into T as ONNX's Cast from string does. Integers: decimal with an optional
// sign; any other number ("100.5", "1e3") is read as a double and converted like a float cast
// (truncated, saturated, NaN to 0). Bool: "true" / "false" in any case, or a number (non-zero
// is true). False when the text is not a number.
template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    return ParseFloat(text, out);
  } else {
    if constexpr (std::is_same_v<T, bool>) {
      if (absl::EqualsIgnoreCase(text, "true") || absl::EqualsIgnoreCase(text, "false")) {
        *out = absl::EqualsIgnoreCase(text, "true");
        return true;
      }
    } else {
      absl::string_view digits = text;
      if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
      const char* end = digits.data() + digits.size();
      if (!digits.empty() && digits.front() != '+') {
        // Out of T's range, from_chars reports it and the double path below saturates.
        const std::from_chars_result r = std::from_chars(digits.data(), end, *out);
        if (r.ptr == end && r.ec == std::errc()) return true;
      }
    }
    double wide = 0;
    if (!ParseFloat(text, &wide)) return false;
    *out = Convert<T, double>(wide);
    return true;
  }
}

// A kernel whose string output keeps its strings in its own storage: output 0 is `n` views
// followed by n slots of kNumberText bytes, which the views point into.
class ToStringKernel final : public PreparedKernel {
 public:
  using Format = size_t (*)(const void* in, int64_t i, char* out);
  ToStringKernel(absl::string_view op, Shape shape, int64_t n, size_t storage, Format format)
      : op_(op),
        outputs_({Desc(DataType::kString, std::move(shape))}),
        n_(n),
        storage_(storage),
        format_(format) {}
  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? storage_ : 0; }
  absl::Status Run(const KernelArgs& args) const override {
    auto* views = static_cast<uint8_t*>(args.outputs[0]);
    char* text = reinterpret_cast<char*>(views) + n_ * sizeof(StringElement);
    for (int64_t i = 0; i < n_; ++i) {
      char* slot = text + i * static_cast<int64_t>(kNumberText);
      const StringElement e{slot, format_(args.inputs[0], i, slot)};
      std::memcpy(views + i * sizeof(StringElement), &e, sizeof(e));
    }
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  int64_t n_;
  size_t storage_;
  Format format_;
};

template <typename T>
size_t FormatAt(const void* in, int64_t i, char* out) {
  T x;
  std::memcpy(&x, static_cast<const uint8_t*>(in) + i * sizeof(T), sizeof(T));
  return FormatNumber(x, out);
}

template <bool kBFloat16>
size_t FormatHalfAt(const void* in, int64_t i, char* out) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(in) + i * sizeof(h), sizeof(h));
  return FormatNumber(kBFloat16 ? BFloat16ToFloat(h) : HalfToFloat(h), out);
}

// Numbers (or bool) to strings.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareToString(const PrepareContext& context,
                                                                const TensorDesc& in, int64_t n) {
  ToStringKernel::Format format = nullptr;
  if (in.dtype == DataType::kFloat16) format = &FormatHalfAt<false>;
  if (in.dtype == DataType::kBFloat16) format = &FormatHalfAt<true>;
  DispatchAnyType(in.dtype, [&]<typename T>() { format = &FormatAt<T>; });
  if (format == nullptr) {
    return Unimplemented(context, "cast from ", runtime::DataTypeName(in.dtype),
                         " to string is not supported");
  }
  const std::optional<int64_t> storage =
      runtime::CheckedByteSize(n, static_cast<int64_t>(sizeof(StringElement) + kNumberText));
  if (!storage.has_value()) {
    return InvalidArgument(context, runtime::ShapeToString(in.shape), " is too large");
  }
  return std::make_unique<ToStringKernel>(context.op, in.shape, n, static_cast<size_t>(*storage),
                                          format);
}

// Strings to numbers (or bool); a text that is not a number fails the run, naming the element.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFromString(const PrepareContext& context,
                                                                  DataType to, const Shape& shape,
                                                                  int64_t n) {
  const std::string label = NodeLabel(context);
  auto refuse = [label](int64_t i, absl::string_view text) {
    constexpr size_t kShown = 40;
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": string element ", i, " \"", absl::CHexEscape(text.substr(0, kShown)),
                     text.size() > kShown ? "...\"" : "\"", " is not a number"));
  };
  FunctionKernel::RunFn run;
  if (IsHalf(to)) {
    const bool bf = to == DataType::kBFloat16;
    run = [n, bf, refuse](const KernelArgs& args) {
      auto* y = static_cast<uint16_t*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) {
        const absl::string_view text = runtime::StringAt(args.inputs[0], i);
        float f = 0;
        if (!ParseNumber(text, &f)) return refuse(i, text);
        y[i] = bf ? FloatToBFloat16(f) : FloatToHalf(f);
      }
      return absl::OkStatus();
    };
  } else if (!DispatchAnyType(to, [&]<typename To>() {
               run = [n, refuse](const KernelArgs& args) {
                 To* y = static_cast<To*>(args.outputs[0]);
                 for (int64_t i = 0; i < n; ++i) {
                   const absl::string_view text = runtime::StringAt(args.inputs[0], i);
                   if (!ParseNumber(text, &y[i])) return refuse(i, text);
                 }
                 return absl::OkStatus();
               };
             })) {
    return Unimplemented(context, "cast from string to ", runtime::DataTypeName(to),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(to, shape)}, std::move(run));
}

// Cast of input 0 to `to` (Cast's attribute, or CastLike's second input's type).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCastTo(const PrepareContext& context,
                                                              DataType to) {
  const TensorDesc& in = context.inputs[0];
  const int64_t n = runtime::NumElements(in.shape);
  if (in.dtype == DataType::kString && to == DataType::kString) {
    return MakeKernel(context, {Desc(to, in.shape)},
                      CopyInputToOutput(static_cast<size_t>(n) * sizeof(StringElement)));
  }
  if (to == DataType::kString) return PrepareToString(context, in, n);
  if (in.dtype == DataType::kString) return PrepareFromString(context, to, in.shape, n);
  if (IsHalf(in.dtype) || IsHalf(to)) {
    auto run = HalfCast(in.dtype, to, n);
    if (!run.ok()) {
      return Unimplemented(context, "cast from ", runtime::DataTypeName(in.dtype), " to ",
                           runtime::DataTypeName(to), " is not supported");
    }
    return MakeKernel(context, {Desc(to, in.shape)}, *std::move(run));
  }
  FunctionKernel::RunFn run;
  bool to_ok = false;
  const bool from_ok = DispatchAnyType(in.dtype, [&]<typename From>() {
    to_ok = DispatchAnyType(to, [&]<typename To>() {
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
                         runtime::DataTypeName(to), " is not supported");
  }
  return MakeKernel(context, {Desc(to, in.shape)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCast(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  ASSIGN_OR_RETURN(int64_t to_code, AttrsOf(context).GetInt("to", 0));
  auto to = runtime::DataTypeFromCode(static_cast<int32_t>(to_code));
  if (!to.ok()) return InvalidArgument(context, "attribute to=", to_code, " is not a type");
  return PrepareCastTo(context, *to);
}

// CastLike: Cast to the element type of input 1 (whose values are not read).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCastLike(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  return PrepareCastTo(context, context.inputs[1].dtype);
}

}  // namespace

absl::Status RegisterCastKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Cast", &PrepareCast));
  return registry->Register("CastLike", &PrepareCastLike);
}

}  // namespace reprise::kernels::cpu
