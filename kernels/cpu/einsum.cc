// Einsum (float32, up to 4 operands): a general strided loop. Each label gets one size and,
// per operand, the sum of its strides (a repeated label walks the diagonal); output labels are
// iterated outside, the others are summed inside. Ellipsis dims broadcast like numpy.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_split.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

constexpr int kEllipsisBase = 1000;  // label ids of ellipsis dims: kEllipsisBase + i

// Parses one operand's term into label ids (letters as their char code, ellipsis dims as
// kEllipsisBase + position within the ellipsis, right-aligned to `ellipsis_rank`).
absl::StatusOr<std::vector<int>> ParseTerm(const PrepareContext& context, absl::string_view term,
                                           int64_t rank, int64_t* ellipsis_rank) {
  std::vector<int> labels;
  int64_t letters = 0;
  for (char c : term) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
  const size_t dots = term.find("...");
  // rank < 0: the output term, whose ellipsis is kept as one marker.
  const int64_t ell = dots == absl::string_view::npos ? 0 : (rank < 0 ? 1 : rank - letters);
  if (ell < 0 || (rank >= 0 && dots == absl::string_view::npos && letters != rank)) {
    return InvalidArgument(context, "term \"", term, "\" does not match an operand of rank ", rank);
  }
  if (rank >= 0) *ellipsis_rank = std::max(*ellipsis_rank, ell);
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (i == dots) {
      for (int64_t e = 0; e < ell; ++e) labels.push_back(kEllipsisBase + static_cast<int>(e));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      labels.push_back(c);
    } else {
      return InvalidArgument(context, "unexpected character '", std::string(1, c), "' in \"", term,
                             "\"");
    }
  }
  return labels;
}

// The strided sum-of-products loop for element type T.
template <typename T>
FunctionKernel::RunFn EinsumRun(const BroadcastPlan& out_plan, const BroadcastPlan& red_plan,
                                size_t n) {
  return [=](const KernelArgs& args) {
    const T* in[4] = {nullptr, nullptr, nullptr, nullptr};
    for (size_t k = 0; k < n; ++k) in[k] = static_cast<const T*>(args.inputs[k]);
    T* y = static_cast<T*>(args.outputs[0]);
    ForEachRow(out_plan, [&](int64_t at, const int64_t* oo, int64_t olen) {
      for (int64_t j = 0; j < olen; ++j) {
        int64_t base[4] = {0, 0, 0, 0};
        for (size_t k = 0; k < n; ++k) base[k] = oo[k] + j * out_plan.strides[k].back();
        double acc = 0;
        ForEachRow(red_plan, [&](int64_t, const int64_t* ro, int64_t rlen) {
          for (int64_t r = 0; r < rlen; ++r) {
            double prod = 1;
            for (size_t k = 0; k < n; ++k) {
              prod *= in[k][base[k] + ro[k] + r * red_plan.strides[k].back()];
            }
            acc += prod;
          }
        });
        y[at + j] = static_cast<T>(acc);
      }
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareEinsum(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 4));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32, DataType::kFloat64}));
    if (context.inputs[i].dtype != context.inputs[0].dtype) {
      return InvalidArgument(context, "operands have different element types");
    }
  }
  ASSIGN_OR_RETURN(std::string equation, AttrsOf(context).GetString("equation", ""));
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != context.inputs.size()) {
    return InvalidArgument(context, "equation \"", equation, "\" has ", terms.size(),
                           " operands, the node ", context.inputs.size());
  }
  // Ellipsis dims are right-aligned across operands; relabel them so that they line up.
  int64_t ellipsis_rank = 0;
  std::vector<std::vector<int>> op_labels;
  for (size_t k = 0; k < terms.size(); ++k) {
    ASSIGN_OR_RETURN(auto labels, ParseTerm(context, terms[k],
                                            static_cast<int64_t>(context.inputs[k].shape.size()),
                                            &ellipsis_rank));
    op_labels.push_back(std::move(labels));
  }
  for (auto& labels : op_labels) {
    int64_t ell = 0;
    for (int l : labels) ell += l >= kEllipsisBase ? 1 : 0;
    for (int& l : labels) {
      if (l >= kEllipsisBase) l += static_cast<int>(ellipsis_rank - ell);
    }
  }
  // Sizes of labels; 1 broadcasts for ellipsis dims.
  std::map<int, int64_t> size;
  std::map<int, int> uses;
  for (size_t k = 0; k < op_labels.size(); ++k) {
    for (size_t i = 0; i < op_labels[k].size(); ++i) {
      const int l = op_labels[k][i];
      const int64_t d = context.inputs[k].shape[i];
      ++uses[l];
      auto [it, inserted] = size.emplace(l, d);
      if (!inserted && it->second != d) {
        if (l >= kEllipsisBase && (it->second == 1 || d == 1)) {
          it->second = std::max(it->second, d);
        } else {
          return InvalidArgument(context, "label sizes disagree in \"", equation, "\" for ",
                                 runtime::ShapeToString(context.inputs[k].shape));
        }
      }
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    int64_t unused = 0;
    ASSIGN_OR_RETURN(out_labels, ParseTerm(context, equation.substr(arrow + 2), -1, &unused));
    // An output "..." stands for all ellipsis dims.
    std::vector<int> expanded;
    for (int l : out_labels) {
      if (l == kEllipsisBase) {
        for (int64_t e = 0; e < ellipsis_rank; ++e) {
          expanded.push_back(kEllipsisBase + static_cast<int>(e));
        }
      } else if (l < kEllipsisBase) {
        expanded.push_back(l);
      }
    }
    out_labels = std::move(expanded);
    for (int l : out_labels) {
      if (!size.contains(l)) {
        return InvalidArgument(context, "output label of \"", equation, "\" is not an input's");
      }
    }
  } else {
    for (int64_t e = 0; e < ellipsis_rank; ++e) out_labels.push_back(kEllipsisBase + e);
    for (const auto& [l, count] : uses) {
      if (l < kEllipsisBase && count == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> red_labels;
  for (const auto& [l, d] : size) {
    if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) {
      red_labels.push_back(l);
    }
  }
  // Strides of each operand in the output space and in the reduction space.
  auto strides_for = [&](const std::vector<int>& space) {
    std::vector<std::vector<int64_t>> result;
    for (size_t k = 0; k < op_labels.size(); ++k) {
      const std::vector<int64_t> contiguous = ContiguousStrides(context.inputs[k].shape);
      std::vector<int64_t> s(space.size(), 0);
      for (size_t i = 0; i < op_labels[k].size(); ++i) {
        if (context.inputs[k].shape[i] == 1) continue;  // broadcast (or size 1)
        auto pos = std::find(space.begin(), space.end(), op_labels[k][i]);
        if (pos != space.end()) s[pos - space.begin()] += contiguous[i];
      }
      result.push_back(std::move(s));
    }
    return result;
  };
  Shape out, red;
  for (int l : out_labels) out.push_back(size[l]);
  for (int l : red_labels) red.push_back(size[l]);
  const BroadcastPlan out_plan = MakeStridedPlan(out, strides_for(out_labels));
  const BroadcastPlan red_plan = MakeStridedPlan(red, strides_for(red_labels));
  const size_t n = context.inputs.size();
  const DataType dtype = context.inputs[0].dtype;
  if (dtype == DataType::kFloat64) {
    return MakeKernel(context, {Desc(dtype, out)}, EinsumRun<double>(out_plan, red_plan, n));
  }
  return MakeKernel(context, {Desc(dtype, out)}, EinsumRun<float>(out_plan, red_plan, n));
}

}  // namespace

absl::Status RegisterEinsumKernels(runtime::KernelRegistry* registry) {
  return registry->Register("Einsum", &PrepareEinsum);
}

}  // namespace reprise::kernels::cpu
