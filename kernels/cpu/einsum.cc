// Einsum (float32, up to 4 operands): a general strided loop. Each label gets one size and,
// per operand, the sum of its strides (a repeated label walks the diagonal); output labels are
// iterated outside, the others are summed inside. Ellipsis dims broadcast like numpy.
// A float32 contraction of two operands (every label in the output or in both operands, none
// repeated or broadcast) is instead a batched matrix product on sgemm: its labels are batch
// (both operands and the output), M (first operand and output), N (second and output) and K
// (both operands only); an operand or output in another order than [batch, M, K] /
// [batch, K, N] / [batch, M, N] (or the operand's transpose) is permuted through the
// workspace.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_split.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

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

// A contiguous tensor with labels `from` read in the contiguous order `to` (the same labels,
// permuted): CopyStrided with a plan made at Prepare, when `to` differs from `from`.
struct Permute {
  bool needed = false;
  BroadcastPlan plan;  // over `to`'s shape, the source's strides
};

Permute MakePermute(const std::vector<int>& from, const std::vector<int>& to,
                    const std::map<int, int64_t>& size) {
  Permute p;
  p.needed = from != to;
  if (!p.needed) return p;
  Shape from_shape, to_shape;
  for (int l : from) from_shape.push_back(size.at(l));
  for (int l : to) to_shape.push_back(size.at(l));
  const std::vector<int64_t> contiguous = ContiguousStrides(from_shape);
  std::vector<int64_t> strides;
  for (int l : to) {
    strides.push_back(contiguous[std::find(from.begin(), from.end(), l) - from.begin()]);
  }
  p.plan = MakeStridedPlan(to_shape, {strides});
  return p;
}

// The batched-matrix-product form, or nullopt when the equation is not a plain contraction of
// two float32 operands.
absl::StatusOr<std::optional<std::unique_ptr<PreparedKernel>>> PrepareEinsumAsGemm(
    const PrepareContext& context, const std::vector<std::vector<int>>& op_labels,
    const std::map<int, int64_t>& size, const std::vector<int>& out_labels, const Shape& out) {
  using None = std::optional<std::unique_ptr<PreparedKernel>>;
  if (op_labels.size() != 2 || context.inputs[0].dtype != DataType::kFloat32) return None();
  const std::vector<int>& a = op_labels[0];
  const std::vector<int>& b = op_labels[1];
  auto has = [](const std::vector<int>& v, int l) {
    return std::find(v.begin(), v.end(), l) != v.end();
  };
  for (size_t k = 0; k < 2; ++k) {
    const std::vector<int>& labels = op_labels[k];
    for (size_t i = 0; i < labels.size(); ++i) {
      if (std::count(labels.begin(), labels.end(), labels[i]) != 1) return None();  // diagonal
      if (context.inputs[k].shape[i] != size.at(labels[i])) return None();          // broadcast
      const bool other = has(op_labels[1 - k], labels[i]);
      if (!other && !has(out_labels, labels[i])) return None();  // summed in one operand only
    }
  }
  std::vector<int> batch, m_labels, n_labels, k_labels;
  for (int l : out_labels) {
    if (has(a, l) && has(b, l)) {
      batch.push_back(l);
    } else if (has(a, l)) {
      m_labels.push_back(l);
    } else {
      n_labels.push_back(l);
    }
  }
  for (int l : a) {
    if (has(b, l) && !has(out_labels, l)) k_labels.push_back(l);
  }
  auto product = [&](const std::vector<int>& labels) {
    int64_t p = 1;
    for (int l : labels) p *= size.at(l);  // a factor of an input's size: no overflow
    return p;
  };
  const int64_t nb = product(batch), m = product(m_labels), n = product(n_labels),
                k = product(k_labels);
  // Many tiny products (an elementwise product, say) cost more in sgemm calls than the loop.
  if (nb > 1 && m * n * std::max<int64_t>(k, 1) < 64) return None();
  auto concat = [](std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> v;
    for (const std::vector<int>* part : parts) v.insert(v.end(), part->begin(), part->end());
    return v;
  };
  // Each operand as stored when it already is [batch, M, K] / [batch, K, N] or their
  // transposes, else permuted to the first form.
  const std::vector<int> a_mk = concat({&batch, &m_labels, &k_labels});
  const std::vector<int> a_km = concat({&batch, &k_labels, &m_labels});
  const std::vector<int> b_kn = concat({&batch, &k_labels, &n_labels});
  const std::vector<int> b_nk = concat({&batch, &n_labels, &k_labels});
  const std::vector<int> c_mn = concat({&batch, &m_labels, &n_labels});
  const bool trans_a = a == a_km && a != a_mk;
  const bool trans_b = b == b_nk && b != b_kn;
  const Permute pa = trans_a ? Permute{} : MakePermute(a, a_mk, size);
  const Permute pb = trans_b ? Permute{} : MakePermute(b, b_kn, size);
  const Permute pc = MakePermute(c_mn, out_labels, size);
  // Workspace: the permuted operands and the product before its permutation (nb * m * k and
  // nb * k * n are the operands' element counts, nb * m * n the output's).
  int64_t a_floats = pa.needed ? nb * m * k : 0, b_floats = pb.needed ? nb * k * n : 0,
          c_floats = 0, total = 0;
  if ((pc.needed &&
       (!runtime::CheckedMul(nb, m, &c_floats) || !runtime::CheckedMul(c_floats, n, &c_floats))) ||
      !runtime::CheckedAdd(a_floats, b_floats, &total) ||
      !runtime::CheckedAdd(total, c_floats, &total) ||
      !runtime::CheckedMul(total, int64_t{sizeof(float)}, &total)) {
    return InvalidArgument(context, "the workspace size overflows");
  }
  const int threads = context.intra_op_threads;
  auto run = [=](const KernelArgs& args) -> absl::Status {
    float* ws = static_cast<float*>(args.workspace);
    const float* pa_data = static_cast<const float*>(args.inputs[0]);
    const float* pb_data = static_cast<const float*>(args.inputs[1]);
    if (pa.needed) {
      CopyStrided(pa.plan, pa_data, ws);
      pa_data = ws;
    }
    if (pb.needed) {
      CopyStrided(pb.plan, pb_data, ws + a_floats);
      pb_data = ws + a_floats;
    }
    float* y = static_cast<float*>(args.outputs[0]);
    float* c = pc.needed ? ws + a_floats + b_floats : y;
    const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
    UseIntraOpThreads(threads);
    const absl::Status status =
        ForEachProductRange(nb, m * n * k, threads, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            RETURN_IF_ERROR(Sgemm(trans_a, trans_b, m, n, k, 1.0f, pa_data + i * m * k, lda,
                                  pb_data + i * k * n, ldb, 0.0f, c + i * m * n, n));
          }
          return absl::OkStatus();
        });
    RETURN_IF_ERROR(status);
    if (pc.needed) CopyStrided(pc.plan, static_cast<const float*>(c), y);
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> kernel,
                   MakeKernel(context, {Desc(DataType::kFloat32, out)}, std::move(run),
                              static_cast<size_t>(total)));
  return None(std::move(kernel));
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
    for (size_t i = 0; i < out_labels.size(); ++i) {
      if (!size.contains(out_labels[i])) {
        return InvalidArgument(context, "output label of \"", equation, "\" is not an input's");
      }
      if (std::find(out_labels.begin(), out_labels.begin() + i, out_labels[i]) !=
          out_labels.begin() + i) {
        return InvalidArgument(context, "an output label of \"", equation, "\" repeats");
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
  ASSIGN_OR_RETURN(std::optional<std::unique_ptr<PreparedKernel>> gemm,
                   PrepareEinsumAsGemm(context, op_labels, size, out_labels, out));
  if (gemm.has_value()) return *std::move(gemm);
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
