#include "kernels/cpu/window.h"

#include <algorithm>
#include <optional>
#include <string>

#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

absl::StatusOr<std::vector<int64_t>> IntsOfLength(const PrepareContext& context,
                                                  absl::string_view name, size_t n,
                                                  std::vector<int64_t> fallback) {
  ASSIGN_OR_RETURN(std::vector<int64_t> values, AttrsOf(context).GetInts(name, fallback));
  if (values.size() != n) {
    return InvalidArgument(context, name, " ", runtime::ShapeToString(values), " should have ", n,
                           " values");
  }
  return values;
}

// Reads kernel_shape, strides, dilations and explicit pads.
absl::StatusOr<Window> ReadCommon(const PrepareContext& context, const std::vector<int64_t>& input,
                                  const std::vector<int64_t>& default_kernel) {
  const size_t n = input.size();
  Window w;
  w.input = input;
  ASSIGN_OR_RETURN(w.kernel, IntsOfLength(context, "kernel_shape", n, default_kernel));
  ASSIGN_OR_RETURN(w.strides, IntsOfLength(context, "strides", n, std::vector<int64_t>(n, 1)));
  ASSIGN_OR_RETURN(w.dilations, IntsOfLength(context, "dilations", n, std::vector<int64_t>(n, 1)));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                   IntsOfLength(context, "pads", 2 * n, std::vector<int64_t>(2 * n, 0)));
  w.pads_begin.assign(pads.begin(), pads.begin() + n);
  w.pads_end.assign(pads.begin() + n, pads.end());
  for (size_t i = 0; i < n; ++i) {
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1 || w.pads_begin[i] < 0 ||
        w.pads_end[i] < 0) {
      return InvalidArgument(context, "bad window on spatial axis ", i, ": kernel ", w.kernel[i],
                             ", stride ", w.strides[i], ", dilation ", w.dilations[i], ", pads ",
                             w.pads_begin[i], "/", w.pads_end[i]);
    }
  }
  return w;
}

// a * b + c for window sizes (operands from the model's attributes and the input's shape), or
// nullopt when an operand is negative or the result overflows int64.
std::optional<int64_t> MulAdd(int64_t a, int64_t b, int64_t c) {
  int64_t r = 0;
  if (!runtime::CheckedMul(a, b, &r) || !runtime::CheckedAdd(r, c, &r)) return std::nullopt;
  return r;
}

}  // namespace

absl::StatusOr<Window> ForwardWindow(const PrepareContext& context,
                                     const std::vector<int64_t>& input,
                                     const std::vector<int64_t>& default_kernel, bool ceil_mode) {
  ASSIGN_OR_RETURN(Window w, ReadCommon(context, input, default_kernel));
  ASSIGN_OR_RETURN(std::string auto_pad, AttrsOf(context).GetString("auto_pad", "NOTSET"));
  const size_t n = input.size();
  w.output.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto overflow = [&] {
      return InvalidArgument(context, "window on spatial axis ", i, " (input ", input[i],
                             ", kernel ", w.kernel[i], ", stride ", w.strides[i], ", dilation ",
                             w.dilations[i], ", pads ", w.pads_begin[i], "/", w.pads_end[i],
                             ") overflows");
    };
    const std::optional<int64_t> extent_or = MulAdd(w.kernel[i] - 1, w.dilations[i], 1);
    if (!extent_or.has_value() || input[i] < 0) return overflow();
    const int64_t extent = *extent_or;
    const int64_t s = w.strides[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.output[i] = input[i] / s + (input[i] % s != 0 ? 1 : 0);
      const std::optional<int64_t> reach = MulAdd(std::max<int64_t>(w.output[i] - 1, 0), s, extent);
      if (!reach.has_value()) return overflow();
      const int64_t total = std::max<int64_t>(0, *reach - input[i]);
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
      continue;
    }
    if (auto_pad == "VALID") {
      w.pads_begin[i] = 0;
      w.pads_end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      return InvalidArgument(context, "auto_pad \"", auto_pad, "\" is not known");
    }
    int64_t padded = 0;
    if (!runtime::CheckedAdd(input[i], w.pads_begin[i], &padded) ||
        !runtime::CheckedAdd(padded, w.pads_end[i], &padded)) {
      return overflow();
    }
    const int64_t span = padded - extent;
    if (span < 0) {
      return InvalidArgument(context, "window extent ", extent, " exceeds padded input ", padded,
                             " on spatial axis ", i);
    }
    w.output[i] = span / s + (ceil_mode && span % s != 0 ? 1 : 0) + 1;
    // A last window that would start in the end padding is dropped.
    int64_t last_start = 0;
    if (ceil_mode && runtime::CheckedMul(w.output[i] - 1, s, &last_start) &&
        last_start >= input[i] + w.pads_begin[i]) {
      --w.output[i];
    }
  }
  return w;
}

absl::StatusOr<Window> TransposedWindow(const PrepareContext& context,
                                        const std::vector<int64_t>& input,
                                        const std::vector<int64_t>& default_kernel) {
  ASSIGN_OR_RETURN(Window w, ReadCommon(context, input, default_kernel));
  const Attributes& attrs = AttrsOf(context);
  const size_t n = input.size();
  ASSIGN_OR_RETURN(std::string auto_pad, attrs.GetString("auto_pad", "NOTSET"));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                   IntsOfLength(context, "output_padding", n, std::vector<int64_t>(n, 0)));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, attrs.GetInts("output_shape", {}));
  if (output_shape.size() > n) {
    // Some exporters give the full shape; keep the spatial part.
    output_shape.erase(output_shape.begin(), output_shape.end() - n);
  }
  if (!output_shape.empty() && output_shape.size() != n) {
    return InvalidArgument(context, "output_shape ", runtime::ShapeToString(output_shape),
                           " should have ", n, " values");
  }
  w.output.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::optional<int64_t> extent = MulAdd(w.kernel[i] - 1, w.dilations[i], 1);
    std::optional<int64_t> full;
    if (extent.has_value() && input[i] >= 1) {
      full = MulAdd(w.strides[i], input[i] - 1, *extent);
      if (full.has_value()) full = MulAdd(1, *full, output_padding[i]);
    } else if (extent.has_value() && input[i] == 0) {
      full = MulAdd(1, *extent, output_padding[i]);
      if (full.has_value()) *full -= w.strides[i];
    }
    int64_t same_size = 0;
    if (!full.has_value() || !runtime::CheckedMul(input[i], w.strides[i], &same_size)) {
      return InvalidArgument(context, "transposed window on spatial axis ", i, " (input ", input[i],
                             ", kernel ", w.kernel[i], ", stride ", w.strides[i], ", dilation ",
                             w.dilations[i], ", output_padding ", output_padding[i],
                             ") overflows or has a negative output_padding");
    }
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!output_shape.empty() || same) {
      w.output[i] = !output_shape.empty() ? output_shape[i] : same_size;
      // An output_shape beyond the natural size needs no padding: the extra positions at the
      // end hold only the bias (ONNX Runtime's rule, which the node test data follows).
      const int64_t total = std::max<int64_t>(0, *full - std::max<int64_t>(w.output[i], 0));
      if (auto_pad == "SAME_UPPER") {
        w.pads_begin[i] = total / 2;
        w.pads_end[i] = total - total / 2;
      } else {
        w.pads_begin[i] = total - total / 2;
        w.pads_end[i] = total / 2;
      }
    } else {
      if (auto_pad == "VALID") {
        w.pads_begin[i] = 0;
        w.pads_end[i] = 0;
      } else if (auto_pad != "NOTSET") {
        return InvalidArgument(context, "auto_pad \"", auto_pad, "\" is not known");
      }
      w.output[i] = *full - w.pads_begin[i] - w.pads_end[i];
    }
    if (w.output[i] < 0) {
      return InvalidArgument(context, "negative output size ", w.output[i], " on spatial axis ", i);
    }
  }
  return w;
}

absl::StatusOr<int64_t> CheckConvInputs(const PrepareContext& context, bool transposed,
                                        size_t max_inputs) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, max_inputs));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  ASSIGN_OR_RETURN(int64_t group, AttrsOf(context).GetInt("group", 1));
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || group < 1) {
    return InvalidArgument(context, "input ", runtime::ShapeToString(x), " and weights ",
                           runtime::ShapeToString(w), " (group ", group,
                           ") are not a 1-D, 2-D or 3-D convolution");
  }
  // Conv: W [M, C/g, k...]; ConvTranspose: W [C, M/g, k...].
  const int64_t channels = x[1];
  // ConvTranspose's output channels, w[1] * group, checked (group comes from the model file).
  int64_t transposed_out = 0;
  const bool ok = transposed
                      ? (w[0] == channels && channels % group == 0 &&
                         runtime::CheckedMul(w[1], group, &transposed_out))
                      : (channels % group == 0 && w[1] == channels / group && w[0] % group == 0);
  if (!ok) {
    return InvalidArgument(context, "weights ", runtime::ShapeToString(w), " do not match input ",
                           runtime::ShapeToString(x), " with group ", group);
  }
  if (HasInput(context, 2)) {
    const int64_t out_channels = transposed ? transposed_out : w[0];
    if (runtime::NumElements(context.inputs[2].shape) != out_channels) {
      return InvalidArgument(context, "bias ", runtime::ShapeToString(context.inputs[2].shape),
                             " does not match ", out_channels, " output channels");
    }
  }
  return group;
}

Window To3d(Window w) {
  const size_t missing = w.input.size() < 3 ? 3 - w.input.size() : 0;
  auto front = [missing](std::vector<int64_t>& v, int64_t value) {
    v.insert(v.begin(), missing, value);
  };
  front(w.input, 1);
  front(w.kernel, 1);
  front(w.strides, 1);
  front(w.dilations, 1);
  front(w.pads_begin, 0);
  front(w.pads_end, 0);
  front(w.output, 1);
  return w;
}

}  // namespace reprise::kernels::cpu
