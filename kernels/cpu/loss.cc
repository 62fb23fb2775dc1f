// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: float32 or float64 input [N,C,d1..dk]
// (k >= 0), int32 or int64 target [N,d1..dk], an optional per-class weight [C]; reduction none
// (loss per position), sum, or mean (divided by the summed weights of the positions counted).
// A position whose target equals ignore_index counts with weight 0; any other target outside
// [0, C) makes Run return INVALID_ARGUMENT. Sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

enum class Reduction { kNone, kSum, kMean };

// The input viewed as [N, C, D] (D the product of d1..dk, 1 without them) and the node's options.
struct LossPlan {
  int64_t n = 0;
  int64_t c = 0;
  int64_t d = 0;
  bool target64 = false;
  bool has_weight = false;
  bool has_ignore = false;
  int64_t ignore_index = 0;
  Reduction reduction = Reduction::kMean;
  std::string label;  // the node, for Run's errors
};

// Checks inputs and attributes common to both losses and fills `*out_shape` with the loss shape.
absl::StatusOr<LossPlan> PrepareLoss(const PrepareContext& context, Shape* out_shape) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32, DataType::kFloat64}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64, DataType::kInt32}));
  const TensorDesc& in = context.inputs[0];
  const TensorDesc& target = context.inputs[1];
  if (in.shape.size() < 2) {
    return InvalidArgument(context, "input has shape ", runtime::ShapeToString(in.shape),
                           ", expected rank >= 2 ([N,C,d1..dk])");
  }
  Shape target_shape = in.shape;
  target_shape.erase(target_shape.begin() + 1);
  if (target.shape != target_shape) {
    return InvalidArgument(context, "target has shape ", runtime::ShapeToString(target.shape),
                           ", expected ", runtime::ShapeToString(target_shape), " for input ",
                           runtime::ShapeToString(in.shape));
  }
  LossPlan plan;
  plan.n = in.shape[0];
  plan.c = in.shape[1];
  // The input's element count was checked when its shape was planned, so this cannot overflow.
  plan.d = 1;
  for (size_t i = 2; i < in.shape.size(); ++i) plan.d *= in.shape[i];
  plan.target64 = target.dtype == DataType::kInt64;
  plan.has_weight = HasInput(context, 2);
  if (plan.has_weight) {
    const TensorDesc& weight = context.inputs[2];
    if (weight.dtype != in.dtype) {
      return InvalidArgument(context, "weight has element type ",
                             runtime::DataTypeName(weight.dtype), ", expected the input's ",
                             runtime::DataTypeName(in.dtype));
    }
    if (weight.shape != Shape{plan.c}) {
      return InvalidArgument(context, "weight has shape ", runtime::ShapeToString(weight.shape),
                             ", expected [", plan.c, "] (one per class)");
    }
  }
  const Attributes& attrs = AttrsOf(context);
  plan.has_ignore = attrs.Has("ignore_index");
  ASSIGN_OR_RETURN(plan.ignore_index, attrs.GetInt("ignore_index", 0));
  ASSIGN_OR_RETURN(std::string reduction, attrs.GetString("reduction", "mean"));
  if (reduction == "none") {
    plan.reduction = Reduction::kNone;
    *out_shape = std::move(target_shape);
  } else if (reduction == "sum" || reduction == "mean") {
    plan.reduction = reduction == "sum" ? Reduction::kSum : Reduction::kMean;
    *out_shape = Shape{};
  } else {
    return InvalidArgument(context, "reduction \"", reduction,
                           "\" is not one of \"none\", \"sum\", \"mean\"");
  }
  plan.label = NodeLabel(context);
  return plan;
}

// -weight[t] * value(n, t, d) at every position (n, d) with target t, into `out` (per position
// for reduction none, else one value). `value` returns the log-probability of class t there.
template <typename T, typename Value>
absl::Status ReduceLoss(const LossPlan& plan, const void* target, const T* weight, Value&& value,
                        T* out) {
  double sum = 0;
  double weight_sum = 0;
  for (int64_t n = 0; n < plan.n; ++n) {
    for (int64_t d = 0; d < plan.d; ++d) {
      const int64_t i = n * plan.d + d;
      const int64_t t = plan.target64 ? static_cast<const int64_t*>(target)[i]
                                      : static_cast<const int32_t*>(target)[i];
      double loss = 0;
      double w = 0;
      if (!plan.has_ignore || t != plan.ignore_index) {
        if (t < 0 || t >= plan.c) {
          return absl::InvalidArgumentError(absl::StrCat(
              plan.label, ": target ", t, " at ", i, " is outside the classes [0, ", plan.c, ")"));
        }
        w = weight != nullptr ? static_cast<double>(weight[t]) : 1.0;
        loss = -w * value(n, t, d);
      }
      if (plan.reduction == Reduction::kNone) out[i] = static_cast<T>(loss);
      sum += loss;
      weight_sum += w;
    }
  }
  // Mean over no counted position is 0/0 (NaN), as in the operator's definition.
  if (plan.reduction == Reduction::kSum) out[0] = static_cast<T>(sum);
  if (plan.reduction == Reduction::kMean) out[0] = static_cast<T>(sum / weight_sum);
  return absl::OkStatus();
}

// log(sum over c of exp(x[c * stride])) for `count` classes, shifted by the maximum.
template <typename T>
double LogSumExp(const T* x, int64_t count, int64_t stride) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < count; ++c) max = std::max(max, static_cast<double>(x[c * stride]));
  if (std::isinf(max)) return max;
  double sum = 0;
  for (int64_t c = 0; c < count; ++c) sum += std::exp(static_cast<double>(x[c * stride]) - max);
  return max + std::log(sum);
}

template <typename T>
FunctionKernel::RunFn NllRun(LossPlan plan) {
  return [plan = std::move(plan)](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    const T* weight = plan.has_weight ? static_cast<const T*>(args.inputs[2]) : nullptr;
    auto value = [&](int64_t n, int64_t t, int64_t d) {
      return static_cast<double>(x[(n * plan.c + t) * plan.d + d]);
    };
    return ReduceLoss<T>(plan, args.inputs[1], weight, value, static_cast<T*>(args.outputs[0]));
  };
}

// With the log_prob output, it is written first and read back; without it, each position's
// log-sum-exp is computed where the loss needs it.
template <typename T>
FunctionKernel::RunFn SceRun(LossPlan plan, bool with_log_prob) {
  return [plan = std::move(plan), with_log_prob](const KernelArgs& args) {
    const T* x = static_cast<const T*>(args.inputs[0]);
    const T* weight = plan.has_weight ? static_cast<const T*>(args.inputs[2]) : nullptr;
    T* out = static_cast<T*>(args.outputs[0]);
    if (!with_log_prob) {
      auto value = [&](int64_t n, int64_t t, int64_t d) {
        const T* p = x + n * plan.c * plan.d + d;
        return static_cast<double>(p[t * plan.d]) - LogSumExp(p, plan.c, plan.d);
      };
      return ReduceLoss<T>(plan, args.inputs[1], weight, value, out);
    }
    T* log_prob = static_cast<T*>(args.outputs[1]);
    for (int64_t n = 0; n < plan.n; ++n) {
      for (int64_t d = 0; d < plan.d; ++d) {
        const int64_t base = n * plan.c * plan.d + d;
        const double lse = LogSumExp(x + base, plan.c, plan.d);
        for (int64_t c = 0; c < plan.c; ++c) {
          const int64_t at = base + c * plan.d;
          log_prob[at] = static_cast<T>(static_cast<double>(x[at]) - lse);
        }
      }
    }
    auto value = [&](int64_t n, int64_t t, int64_t d) {
      return static_cast<double>(log_prob[(n * plan.c + t) * plan.d + d]);
    };
    return ReduceLoss<T>(plan, args.inputs[1], weight, value, out);
  };
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareNll(const PrepareContext& context) {
  if (context.num_outputs != 1) {
    return InvalidArgument(context, "expected 1 output, got ", context.num_outputs);
  }
  Shape out;
  ASSIGN_OR_RETURN(LossPlan plan, PrepareLoss(context, &out));
  const DataType dtype = context.inputs[0].dtype;
  FunctionKernel::RunFn run = dtype == DataType::kFloat32 ? NllRun<float>(std::move(plan))
                                                          : NllRun<double>(std::move(plan));
  return MakeKernel(context, {Desc(dtype, std::move(out))}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSce(const PrepareContext& context) {
  if (context.num_outputs < 1 || context.num_outputs > 2) {
    return InvalidArgument(context, "expected 1 or 2 outputs (loss, log_prob), got ",
                           context.num_outputs);
  }
  Shape out;
  ASSIGN_OR_RETURN(LossPlan plan, PrepareLoss(context, &out));
  const TensorDesc& in = context.inputs[0];
  const bool with_log_prob = context.num_outputs == 2;
  std::vector<TensorDesc> outputs = {Desc(in.dtype, std::move(out))};
  if (with_log_prob) outputs.push_back(Desc(in.dtype, in.shape));
  FunctionKernel::RunFn run = in.dtype == DataType::kFloat32
                                  ? SceRun<float>(std::move(plan), with_log_prob)
                                  : SceRun<double>(std::move(plan), with_log_prob);
  return MakeKernel(context, std::move(outputs), std::move(run));
}

}  // namespace

absl::Status RegisterLossKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("NegativeLogLikelihoodLoss", &PrepareNll));
  RETURN_IF_ERROR(registry->Register("SoftmaxCrossEntropyLoss", &PrepareSce));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
