#include "runtime/engine/fusion_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine {
namespace {

using fusion::IsDefaultDomain;
using fusion::IsGraphOutput;

// The graph's def-use links, computed once per pass; the pass marks the nodes it takes in
// `drop` and replaces the last node of each match in place.
class Matcher {
 public:
  explicit Matcher(Graph* graph)
      : graph_(*graph),
        uses_(graph->UseCounts()),
        consumers_(graph->values.size()),
        producer_(graph->values.size(), -1),
        drop_(graph->nodes.size(), false) {
    for (size_t i = 0; i < graph->nodes.size(); ++i) {
      const Node& node = graph->nodes[i];
      for (int in : node.inputs) {
        if (in == Graph::kNoValue) continue;
        std::vector<int>& list = consumers_[in];
        if (list.empty() || list.back() != static_cast<int>(i)) list.push_back(i);
      }
      for (int out : node.outputs) {
        if (out != Graph::kNoValue) producer_[out] = static_cast<int>(i);
      }
    }
  }

  Graph& graph() { return graph_; }
  const Graph& graph() const { return graph_; }
  const Node& node(int i) const { return graph_.nodes[i]; }
  bool dropped(int i) const { return drop_[i]; }

  // The node (default domain, one output, not taken) computing `op` from `value` when that is
  // `value`'s only use; -1 otherwise.
  int Sole(int value, absl::string_view op) const {
    const int at = fusion::SoleConsumer(graph_, uses_, value);
    if (at < 0 || drop_[at]) return -1;
    const Node& n = graph_.nodes[at];
    if (n.op != op || !IsDefaultDomain(n) || n.outputs.size() != 1) return -1;
    return at;
  }

  // Nodes reading `value` (each once), or empty when it is a graph output.
  const std::vector<int>& Consumers(int value) const {
    static const std::vector<int> kNone;
    if (value == Graph::kNoValue || IsGraphOutput(graph_, value)) return kNone;
    return consumers_[value];
  }
  int Uses(int value) const { return uses_[value]; }
  const std::vector<int>& UsesVector() const { return uses_; }

  // The node producing `value` when it computes `op` (default domain, not taken), else -1.
  int Producer(int value, absl::string_view op) const {
    if (value == Graph::kNoValue) return -1;
    const int at = producer_[value];
    if (at < 0 || drop_[at]) return -1;
    const Node& n = graph_.nodes[at];
    return n.op == op && IsDefaultDomain(n) ? at : -1;
  }

  // For a binary node with `value` as one operand: the other one (kNoValue when both are it).
  static int Other(const Node& n, int value) {
    if (n.inputs.size() != 2) return Graph::kNoValue;
    if (n.inputs[0] == value) return n.inputs[1] == value ? Graph::kNoValue : n.inputs[1];
    return n.inputs[1] == value ? n.inputs[0] : Graph::kNoValue;
  }

  // The value of a float32 (or float64) constant with one element and rank 0 or 1 (a
  // [1,1,1] constant would widen the rank of what it is applied to).
  bool Scalar(int value, float* out) const {
    const TensorValue* t = value == Graph::kNoValue ? nullptr : graph_.FindConstant(value);
    if (t == nullptr || NumElements(t->shape) != 1 || t->shape.size() > 1) return false;
    if (t->dtype == DataType::kFloat32 && t->bytes.size() == 4) {
      std::memcpy(out, t->bytes.data(), 4);
      return true;
    }
    if (t->dtype == DataType::kFloat64 && t->bytes.size() == 8) {
      double d;
      std::memcpy(&d, t->bytes.data(), 8);
      *out = static_cast<float>(d);
      return true;
    }
    return false;
  }
  bool ScalarNear(int value, float want, float tolerance) const {
    float v;
    return Scalar(value, &v) && std::fabs(v - want) <= tolerance;
  }

  // Replaces the matched nodes: `taken` are dropped, `fused` takes the place of `last`.
  void Replace(const std::vector<int>& taken, int last, Node fused) {
    for (int t : taken) drop_[t] = true;
    drop_[last] = false;
    graph_.nodes[last] = std::move(fused);
  }

  // Removes the dropped nodes; returns how many.
  int Finish() {
    int removed = 0;
    for (bool d : drop_) removed += d ? 1 : 0;
    fusion::DropNodes(&graph_, drop_);
    return removed;
  }

 private:
  Graph& graph_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> consumers_;
  std::vector<int> producer_;
  std::vector<bool> drop_;
};

// Rank of `value` when its shape is declared, else -1.
int RankOf(const Graph& graph, int value) {
  const Value& v = graph.values[value];
  return v.has_shape ? static_cast<int>(v.dims.size()) : -1;
}

// The one axis a ReduceMean keeping dims averages over (axes from the attribute before opset 18,
// from a constant input after): the last axis of its input, or its channels (axis 1 of an input
// of rank 3 or more, as LayerNorm2d writes it), or axis 1 of an input of unknown rank (ONNX's
// shape inference loses shapes behind a Slice whose bounds come from a Shape, as NAFNet's
// gates are exported); kNone for any other.
enum class MeanAxis { kNone, kLast, kChannels, kAxisOne };

MeanAxis MeanAxisOf(const Graph& graph, const Node& node) {
  if (node.op != "ReduceMean" || !IsDefaultDomain(node) || node.inputs.empty() ||
      node.outputs.size() != 1) {
    return MeanAxis::kNone;
  }
  auto keepdims = node.attributes.GetInt("keepdims", 1);
  if (!keepdims.ok() || *keepdims != 1) return MeanAxis::kNone;
  std::vector<int64_t> axes;
  if (node.inputs.size() >= 2 && node.inputs[1] != Graph::kNoValue) {
    const TensorValue* t = graph.FindConstant(node.inputs[1]);
    if (t == nullptr || t->dtype != DataType::kInt64 || t->bytes.size() != 8) {
      return MeanAxis::kNone;
    }
    axes.resize(1);
    std::memcpy(axes.data(), t->bytes.data(), 8);
  } else {
    auto attr = node.attributes.GetInts("axes", {});
    if (!attr.ok()) return MeanAxis::kNone;
    axes = *attr;
  }
  if (axes.size() != 1) return MeanAxis::kNone;
  const int rank = RankOf(graph, node.inputs[0]);
  if (axes[0] == -1 || (rank > 0 && axes[0] == rank - 1)) return MeanAxis::kLast;
  if (rank >= 3 && (axes[0] == 1 || axes[0] == 1 - rank)) return MeanAxis::kChannels;
  return rank < 0 && axes[0] == 1 ? MeanAxis::kAxisOne : MeanAxis::kNone;
}

// gamma or beta of a normalisation of x over `axis`: a float32 constant of rank at most x's
// whose dims are all 1 but the one (right-aligned to x's dims) at that axis, which is x's there
// where known: the last dim (kLast), or the dim at x's axis 1 (kChannels). Where x's rank is
// unknown, a channel parameter is one of rank 3 or more whose one dim other than 1 is its first
// or second (LayerNorm2d's [1, C, 1, 1]); the kernel checks that it lies at X's axis 1.
bool IsNormParameter(const Graph& graph, int value, int x, MeanAxis axis) {
  const TensorValue* t = value == Graph::kNoValue ? nullptr : graph.FindConstant(value);
  if (t == nullptr || t->dtype != DataType::kFloat32 || t->shape.empty()) return false;
  const int rank = RankOf(graph, x);
  const int size = static_cast<int>(t->shape.size());
  if (axis == MeanAxis::kChannels && rank < 0) {
    if (size < 3) return false;
    for (int i = 2; i < size; ++i) {
      if (t->shape[i] != 1) return false;
    }
    return t->shape[0] == 1 || t->shape[1] == 1;
  }
  if (size > (rank < 0 ? 1 : rank)) return false;
  // The parameter's dim that lies at the normalised axis.
  const int at = axis == MeanAxis::kLast ? size - 1 : 1 - (rank - size);
  if (at < 0) return false;
  for (int i = 0; i < size; ++i) {
    if (i != at && t->shape[i] != 1) return false;
  }
  const Value& xv = graph.values[x];
  const int x_at = axis == MeanAxis::kLast ? rank - 1 : 1;
  if (xv.has_shape && x_at >= 0 && x_at < rank && xv.dims[x_at].known()) {
    return xv.dims[x_at].value == t->shape[at];
  }
  return axis == MeanAxis::kLast;  // a channel parameter needs x's channels
}

// Matches the decomposed normalisation whose first ReduceMean is node `r`: over the last axis
// (a LayerNormalization) where `last_axis` is true, over the channels (kFusedChannelNormOp)
// where `channels` is.
bool MatchLayerNorm(Matcher& m, int r, bool last_axis, bool channels) {
  const Graph& g = m.graph();
  MeanAxis axis = MeanAxisOf(g, m.node(r));
  if (axis == MeanAxis::kAxisOne) axis = MeanAxis::kChannels;  // the parameters' ranks tell
  if ((axis != MeanAxis::kLast || !last_axis) && (axis != MeanAxis::kChannels || !channels)) {
    return false;
  }
  const int x = m.node(r).inputs[0];
  const int mean = m.node(r).outputs[0];
  std::vector<int> taken = {r};
  // One or two Sub(x, mean); their outputs go to exactly a square and a normalising division.
  const std::vector<int>& subs = m.Consumers(mean);
  if (subs.empty() || subs.size() > 2 || m.Uses(mean) != static_cast<int>(subs.size())) {
    return false;
  }
  std::vector<int> devs;
  for (int s : subs) {
    const Node& sub = m.node(s);
    if (m.dropped(s) || sub.op != "Sub" || !IsDefaultDomain(sub) || sub.inputs.size() != 2 ||
        sub.inputs[0] != x || sub.inputs[1] != mean || sub.outputs.size() != 1) {
      return false;
    }
    taken.push_back(s);
    devs.push_back(sub.outputs[0]);
  }
  int square = -1, divide = -1, dev_total_uses = 0;
  for (int d : devs) {
    dev_total_uses += m.Uses(d);
    for (int c : m.Consumers(d)) {
      const Node& n = m.node(c);
      if (m.dropped(c) || !IsDefaultDomain(n) || n.outputs.size() != 1) return false;
      const bool is_square =
          (n.op == "Pow" && n.inputs.size() == 2 && n.inputs[0] == d &&
           m.ScalarNear(n.inputs[1], 2.0f, 0.0f)) ||
          (n.op == "Mul" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d);
      if (is_square && square < 0) {
        square = c;
      } else if ((n.op == "Div" || n.op == "Mul") && n.inputs.size() == 2 && n.inputs[0] == d &&
                 n.inputs[1] != d && divide < 0) {
        divide = c;
      } else {
        return false;
      }
    }
  }
  // Each deviation is read by exactly the square and the division (Mul(d, d) reads twice).
  const int square_reads = m.node(square < 0 ? r : square).op == "Mul" ? 2 : 1;
  if (square < 0 || divide < 0 || dev_total_uses != square_reads + 1) return false;
  if (devs.size() == 2 && (m.node(square).inputs[0] == m.node(divide).inputs[0])) return false;
  taken.push_back(square);
  const int var = m.Sole(m.node(square).outputs[0], "ReduceMean");
  const MeanAxis var_axis = var < 0 ? MeanAxis::kNone : MeanAxisOf(g, m.node(var));
  if (var < 0 ||
      (var_axis != axis && !(axis == MeanAxis::kChannels && var_axis == MeanAxis::kAxisOne)) ||
      m.node(var).inputs[0] != m.node(square).outputs[0]) {
    return false;
  }
  taken.push_back(var);
  const int add = m.Sole(m.node(var).outputs[0], "Add");
  float eps;
  if (add < 0 || !m.Scalar(Matcher::Other(m.node(add), m.node(var).outputs[0]), &eps) ||
      !(eps >= 0.0f)) {
    return false;
  }
  taken.push_back(add);
  const int sqrt = m.Sole(m.node(add).outputs[0], "Sqrt");
  if (sqrt < 0) return false;
  taken.push_back(sqrt);
  int denominator = m.node(sqrt).outputs[0];
  const Node& div = m.node(divide);
  if (div.op == "Mul") {
    const int rec = m.Sole(denominator, "Reciprocal");
    if (rec < 0) return false;
    taken.push_back(rec);
    denominator = m.node(rec).outputs[0];
  }
  if (div.inputs[1] != denominator || m.Uses(denominator) != 1 || IsGraphOutput(g, denominator)) {
    return false;
  }
  taken.push_back(divide);
  const int normalized = div.outputs[0];
  const int mul = m.Sole(normalized, "Mul");
  if (mul < 0) return false;
  const int gamma = Matcher::Other(m.node(mul), normalized);
  if (!IsNormParameter(g, gamma, x, axis)) return false;
  taken.push_back(mul);
  int last = mul;
  int beta = Graph::kNoValue;
  const int bias = m.Sole(m.node(mul).outputs[0], "Add");
  if (bias >= 0) {
    const int other = Matcher::Other(m.node(bias), m.node(mul).outputs[0]);
    if (IsNormParameter(g, other, x, axis) &&
        NumElements(g.FindConstant(other)->shape) == NumElements(g.FindConstant(gamma)->shape)) {
      beta = other;
      taken.push_back(bias);
      last = bias;
    }
  }
  Node fused;
  fused.op = "LayerNormalization";
  if (axis == MeanAxis::kChannels) {
    fused.op = kernels::cpu::kFusedChannelNormOp;
    fused.domain = kernels::cpu::kFusedDomain;
  }
  fused.name = m.node(r).name;
  fused.inputs = {x, gamma};
  if (beta != Graph::kNoValue) fused.inputs.push_back(beta);
  fused.outputs = {m.node(last).outputs[0]};
  if (axis == MeanAxis::kLast) fused.attributes.Set("axis", int64_t{-1});
  fused.attributes.Set("epsilon", eps);
  m.Replace(taken, last, std::move(fused));
  return true;
}

// For the Erf form: u = x / sqrt(2) or x * (1 / sqrt(2)). Sets x; appends the node to `taken`.
bool MatchErfArgument(const Matcher& m, int u, int* x, std::vector<int>* taken) {
  constexpr float kTolerance = 1e-4f;
  if (m.Uses(u) != 1 || IsGraphOutput(m.graph(), u)) return false;
  if (const int div = m.Producer(u, "Div"); div >= 0) {
    const Node& n = m.node(div);
    if (n.inputs.size() != 2 || !m.ScalarNear(n.inputs[1], std::sqrt(2.0f), kTolerance)) {
      return false;
    }
    *x = n.inputs[0];
    taken->push_back(div);
    return true;
  }
  const int mul = m.Producer(u, "Mul");
  if (mul < 0 || m.node(mul).inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    if (m.ScalarNear(m.node(mul).inputs[1 - k], std::sqrt(0.5f), kTolerance)) {
      *x = m.node(mul).inputs[k];
      taken->push_back(mul);
      return true;
    }
  }
  return false;
}

// For the tanh form: u = sqrt(2/pi) * (x + 0.044715 * x^3), the cube as Pow(x, 3) or
// x * (x * x) in either order. Sets x; appends the nodes to `taken`.
bool MatchTanhArgument(const Matcher& m, int u, int* x, std::vector<int>* taken) {
  const Graph& g = m.graph();
  auto sole_use = [&](int value) { return m.Uses(value) == 1 && !IsGraphOutput(g, value); };
  // The operand of `node` (a binary node) other than a scalar constant near `want`.
  auto scaled = [&](int node, float want, float tolerance) {
    const Node& n = m.node(node);
    if (n.inputs.size() != 2) return static_cast<int>(Graph::kNoValue);
    for (int k = 0; k < 2; ++k) {
      if (m.ScalarNear(n.inputs[1 - k], want, tolerance)) return n.inputs[k];
    }
    return static_cast<int>(Graph::kNoValue);
  };
  const int outer = m.Producer(u, "Mul");
  if (outer < 0 || !sole_use(u)) return false;
  const int inner = scaled(outer, 0.7978845608f, 1e-4f);
  const int add = m.Producer(inner, "Add");
  if (inner == Graph::kNoValue || add < 0 || !sole_use(inner) || m.node(add).inputs.size() != 2) {
    return false;
  }
  for (int k = 0; k < 2; ++k) {
    const int cand = m.node(add).inputs[k];
    const int term = m.node(add).inputs[1 - k];
    const int coef = m.Producer(term, "Mul");
    if (coef < 0 || !sole_use(term)) continue;
    const int cube = scaled(coef, 0.044715f, 1e-6f);
    if (cube == Graph::kNoValue || !sole_use(cube)) continue;
    std::vector<int> nodes = {outer, add, coef};
    if (const int pow = m.Producer(cube, "Pow"); pow >= 0) {
      if (m.node(pow).inputs.size() != 2 || m.node(pow).inputs[0] != cand ||
          !m.ScalarNear(m.node(pow).inputs[1], 3.0f, 0.0f)) {
        continue;
      }
      nodes.push_back(pow);
    } else if (const int mul = m.Producer(cube, "Mul"); mul >= 0) {
      const int sq = Matcher::Other(m.node(mul), cand);
      const int sq_node = m.Producer(sq, "Mul");
      if (sq == Graph::kNoValue || sq_node < 0 || !sole_use(sq) ||
          m.node(sq_node).inputs.size() != 2 || m.node(sq_node).inputs[0] != cand ||
          m.node(sq_node).inputs[1] != cand) {
        continue;
      }
      nodes.push_back(mul);
      nodes.push_back(sq_node);
    } else {
      continue;
    }
    *x = cand;
    taken->insert(taken->end(), nodes.begin(), nodes.end());
    return true;
  }
  return false;
}

// Matches x * 0.5 * (1 + Erf(x / sqrt(2))) around the Erf node `e`, or the tanh form
// x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 x^3))) around the Tanh node `e`.
bool MatchGelu(Matcher& m, int e) {
  const Node& erf = m.node(e);
  if ((erf.op != "Erf" && erf.op != "Tanh") || !IsDefaultDomain(erf) || erf.inputs.size() != 1 ||
      erf.outputs.size() != 1) {
    return false;
  }
  const bool tanh_form = erf.op == "Tanh";
  int x = Graph::kNoValue;
  std::vector<int> taken = {e};
  if (!(tanh_form ? MatchTanhArgument(m, erf.inputs[0], &x, &taken)
                  : MatchErfArgument(m, erf.inputs[0], &x, &taken))) {
    return false;
  }
  const int add = m.Sole(erf.outputs[0], "Add");
  if (add < 0 || !m.ScalarNear(Matcher::Other(m.node(add), erf.outputs[0]), 1.0f, 1e-6f)) {
    return false;
  }
  taken.push_back(add);
  const int a = m.node(add).outputs[0];
  const int m1 = m.Sole(a, "Mul");
  if (m1 < 0) return false;
  taken.push_back(m1);
  const int k = Matcher::Other(m.node(m1), a);
  const int m1_out = m.node(m1).outputs[0];
  int last = -1;
  if (k == x) {  // (x * (1 + e)) * 0.5
    const int m2 = m.Sole(m1_out, "Mul");
    if (m2 >= 0 && m.ScalarNear(Matcher::Other(m.node(m2), m1_out), 0.5f, 1e-6f)) last = m2;
  } else if (m.ScalarNear(k, 0.5f, 1e-6f)) {  // x * ((1 + e) * 0.5)
    const int m2 = m.Sole(m1_out, "Mul");
    if (m2 >= 0 && Matcher::Other(m.node(m2), m1_out) == x) last = m2;
  } else {  // (x * 0.5) * (1 + e)
    const int half = m.Producer(k, "Mul");
    if (half >= 0 && m.Uses(k) == 1 && !IsGraphOutput(m.graph(), k) &&
        m.ScalarNear(Matcher::Other(m.node(half), x), 0.5f, 1e-6f)) {
      taken.push_back(half);
      last = m1;
    }
  }
  if (last < 0) return false;
  taken.push_back(last);
  Node fused;
  fused.op = "Gelu";
  fused.name = erf.name;
  fused.inputs = {x};
  if (tanh_form) fused.attributes.Set("approximate", std::string("tanh"));
  fused.outputs = {m.node(last).outputs[0]};
  m.Replace(taken, last, std::move(fused));
  return true;
}

// A Transpose whose result the MatMul can read in place: a permutation (given explicitly)
// that keeps the stored last axis among the last two.
bool FoldableTranspose(const Node& t, std::vector<int64_t>* perm) {
  if (t.inputs.size() != 1 || t.outputs.size() != 1 || !t.attributes.Has("perm")) return false;
  auto p = t.attributes.GetInts("perm", {});
  if (!p.ok() || p->size() < 2) return false;
  const int64_t last = static_cast<int64_t>(p->size()) - 1;
  if ((*p)[last] != last && (*p)[last - 1] != last) return false;
  *perm = *p;
  return true;
}

// Rank of a MatMul operand, through a folded Transpose; -1 when unknown.
int OperandRank(const Graph& graph, int value, const std::vector<int64_t>& perm) {
  return perm.empty() ? RankOf(graph, value) : static_cast<int>(perm.size());
}

// MatMul [← Transpose] [→ Mul/Div(scalar)] [→ Add(constant bias)] [→ activation]
// [→ Add(residual)] around the MatMul node `i`.
bool MatchMatMul(Matcher& m, int i) {
  const Graph& g = m.graph();
  const Node& mm = m.node(i);
  if (mm.op != "MatMul" || !IsDefaultDomain(mm) || mm.inputs.size() != 2 ||
      mm.outputs.size() != 1 || mm.inputs[0] == mm.inputs[1]) {
    return false;
  }
  std::vector<int> taken = {i};
  int operands[2] = {mm.inputs[0], mm.inputs[1]};
  std::vector<int64_t> perms[2];
  float alpha = 1.0f, v;
  auto sole_use = [&](int value) { return m.Uses(value) == 1 && !IsGraphOutput(g, value); };
  for (int o = 0; o < 2; ++o) {
    // A scale of the operand (Mul or Div by a scalar constant) moves into alpha.
    if (const int mul = m.Producer(operands[o], "Mul");
        mul >= 0 && sole_use(operands[o]) && m.node(mul).inputs.size() == 2) {
      for (int k = 0; k < 2; ++k) {
        if (m.Scalar(m.node(mul).inputs[1 - k], &v) && !g.IsConstant(m.node(mul).inputs[k])) {
          alpha *= v;
          taken.push_back(mul);
          operands[o] = m.node(mul).inputs[k];
          break;
        }
      }
    } else if (const int div = m.Producer(operands[o], "Div");
               div >= 0 && sole_use(operands[o]) && m.node(div).inputs.size() == 2 &&
               m.Scalar(m.node(div).inputs[1], &v) && v != 0.0f &&
               !g.IsConstant(m.node(div).inputs[0])) {
      alpha /= v;
      taken.push_back(div);
      operands[o] = m.node(div).inputs[0];
    }
    const int t = m.Producer(operands[o], "Transpose");
    if (t < 0 || !sole_use(operands[o]) || !FoldableTranspose(m.node(t), &perms[o])) {
      perms[o].clear();
      continue;
    }
    taken.push_back(t);
    operands[o] = m.node(t).inputs[0];
  }
  int out = mm.outputs[0];
  int last = i;
  auto absorb = [&](int node) {
    taken.push_back(node);
    last = node;
    out = m.node(node).outputs[0];
  };
  if (const int mul = m.Sole(out, "Mul");
      mul >= 0 && m.Scalar(Matcher::Other(m.node(mul), out), &v)) {
    alpha *= v;
    absorb(mul);
  } else if (const int div = m.Sole(out, "Div"); div >= 0 && m.node(div).inputs[0] == out &&
                                                 m.Scalar(m.node(div).inputs[1], &v) && v != 0.0f) {
    alpha /= v;
    absorb(div);
  }
  // A constant bias must not widen the product's shape: its dims before the last are 1, and
  // it has no more axes than the product (known from the operands' ranks).
  int bias = Graph::kNoValue;
  if (const int add = m.Sole(out, "Add"); add >= 0) {
    const int other = Matcher::Other(m.node(add), out);
    const TensorValue* c = other == Graph::kNoValue ? nullptr : g.FindConstant(other);
    const int rank =
        std::max(OperandRank(g, operands[0], perms[0]), OperandRank(g, operands[1], perms[1]));
    bool fits = c != nullptr && c->dtype == DataType::kFloat32 &&
                (c->shape.size() <= 1 || (OperandRank(g, operands[0], perms[0]) >= 0 &&
                                          OperandRank(g, operands[1], perms[1]) >= 0 &&
                                          static_cast<int>(c->shape.size()) <= rank));
    for (size_t d = 0; fits && d + 2 < c->shape.size(); ++d) fits = c->shape[d] == 1;
    if (fits) {
      bias = other;
      absorb(add);
    }
  }
  std::string activation, approximate;
  float lo = -INFINITY, hi = INFINITY;
  if (const int act = fusion::SoleConsumer(g, m.UsesVector(), out);
      act >= 0 && !m.dropped(act) && IsDefaultDomain(m.node(act)) &&
      m.node(act).outputs.size() == 1 && m.node(act).inputs[0] == out) {
    const Node& a = m.node(act);
    if (a.op == "Relu" || a.op == "Tanh" || a.op == "Sigmoid") {
      activation = a.op;
    } else if (a.op == "Clip" && fusion::ClipBounds(g, a, &lo, &hi)) {
      activation = "Clip";
    } else if (a.op == "Gelu") {
      auto form = a.attributes.GetString("approximate", "none");
      if (form.ok() && (*form == "none" || *form == "tanh")) {
        activation = "Gelu";
        approximate = *form;
      }
    }
    if (!activation.empty()) absorb(act);
  }
  int residual = Graph::kNoValue;
  if (const int add = m.Sole(out, "Add"); add >= 0) {
    const int other = Matcher::Other(m.node(add), out);
    if (other != Graph::kNoValue && !g.IsConstant(other)) {
      residual = other;
      absorb(add);
    }
  }
  if (taken.size() == 1) return false;
  Node fused;
  fused.op = kernels::cpu::kFusedMatMulOp;
  fused.domain = kernels::cpu::kFusedDomain;
  fused.name = mm.name;
  fused.inputs = {operands[0], operands[1], bias};
  if (residual != Graph::kNoValue) fused.inputs.push_back(residual);
  if (!perms[0].empty()) fused.attributes.Set("perm_a", perms[0]);
  if (!perms[1].empty()) fused.attributes.Set("perm_b", perms[1]);
  if (alpha != 1.0f) fused.attributes.Set("alpha", alpha);
  if (!activation.empty()) fused.attributes.Set("activation", activation);
  if (activation == "Clip") {
    fused.attributes.Set("clip_min", lo);
    fused.attributes.Set("clip_max", hi);
  }
  if (activation == "Gelu") fused.attributes.Set("approximate", approximate);
  fused.outputs = {out};
  m.Replace(taken, last, std::move(fused));
  return true;
}

template <typename Match>
int RunPass(Graph* graph, Match match) {
  Matcher m(graph);
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!m.dropped(static_cast<int>(i))) match(m, static_cast<int>(i));
  }
  return m.Finish();
}

}  // namespace

int FuseLayerNorm(Graph* graph, const KernelRegistry& registry) {
  const bool last_axis = registry.Has("LayerNormalization");
  const bool channels = registry.Has(kernels::cpu::kFusedChannelNormOp);
  if (!last_axis && !channels) return 0;
  return RunPass(graph,
                 [&](Matcher& m, int r) { return MatchLayerNorm(m, r, last_axis, channels); });
}

int FuseGelu(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has("Gelu")) return 0;
  return RunPass(graph, MatchGelu);
}

int FuseMatMulEpilogues(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kernels::cpu::kFusedMatMulOp)) return 0;
  return RunPass(graph, MatchMatMul);
}

int FuseTransformerPatterns(Graph* graph, const KernelRegistry& registry) {
  const int norms = FuseLayerNorm(graph, registry);
  const int gelus = FuseGelu(graph, registry);
  return norms + gelus + FuseMatMulEpilogues(graph, registry);
}

}  // namespace reprise::runtime::engine
