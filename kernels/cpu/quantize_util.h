// Pieces shared by the quantize kernels (quantize.cc) and the integer / quantized linear ops
// (quantized_ops.cc): rounding a real value to a quantized type, and the zero point's type check.
#ifndef REPRISE_KERNELS_CPU_QUANTIZE_UTIL_H_
#define REPRISE_KERNELS_CPU_QUANTIZE_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

/// round_half_to_even(scaled) + zero, saturated to Q; a NaN becomes the zero point. `Real` is
/// float (QuantizeLinear) or double (the requantization of an int32 accumulator). std::nearbyint
/// rounds in the current rounding mode, which nothing in the process changes from the default
/// (to nearest, ties to even).
template <typename Q, typename Real>
Q Saturate(Real scaled, int32_t zero) {
  Real q = std::nearbyint(scaled);
  if (std::isnan(q)) return static_cast<Q>(zero);
  q += static_cast<Real>(zero);
  constexpr Real kLow = static_cast<Real>(std::numeric_limits<Q>::min());
  constexpr Real kHigh = static_cast<Real>(std::numeric_limits<Q>::max());
  return static_cast<Q>(std::clamp(q, kLow, kHigh));
}

/// Error unless input `zero` (a zero point, called `zero_name`) has the element type of input
/// `of` (called `of_name`).
inline absl::Status ExpectZeroPointType(const PrepareContext& context, size_t zero,
                                        absl::string_view zero_name, size_t of,
                                        absl::string_view of_name) {
  const DataType want = context.inputs[of].dtype;
  if (context.inputs[zero].dtype == want) return absl::OkStatus();
  return InvalidArgument(context, zero_name, " has element type ",
                         runtime::DataTypeName(context.inputs[zero].dtype), ", expected ", of_name,
                         "'s ", runtime::DataTypeName(want));
}

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_QUANTIZE_UTIL_H_
