#include "runtime/engine/fusion_qdq.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quantize_util.h"
#include "runtime/core/checked_size.h"
#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine {
namespace {

using fusion::IsDefaultDomain;

bool IsEightBit(DataType type) { return type == DataType::kInt8 || type == DataType::kUInt8; }

// The constant `value` when its bytes match its shape and type (a model file may say anything),
// else null.
const TensorValue* ConstantOf(const Graph& graph, int value) {
  if (value == Graph::kNoValue) return nullptr;
  const TensorValue* t = graph.FindConstant(value);
  if (t == nullptr || t->dtype == DataType::kString) return nullptr;
  const std::optional<int64_t> count = CheckedElementCount(t->shape);
  if (!count.has_value()) return nullptr;
  const std::optional<int64_t> bytes =
      CheckedByteSize(*count, static_cast<int64_t>(DataTypeSize(t->dtype)));
  if (!bytes.has_value() || static_cast<uint64_t>(*bytes) != t->bytes.size()) return nullptr;
  return t;
}

// The scales held by the float32 constant `value` when there are some and all are finite and
// positive (else empty).
std::vector<float> ScalesOf(const Graph& graph, int value) {
  const TensorValue* t = ConstantOf(graph, value);
  if (t == nullptr || t->dtype != DataType::kFloat32 || t->bytes.empty()) return {};
  std::vector<float> scales(t->bytes.size() / sizeof(float));
  std::memcpy(scales.data(), t->bytes.data(), t->bytes.size());
  for (float s : scales) {
    if (!std::isfinite(s) || s <= 0.0f) return {};
  }
  return scales;
}

int32_t EightBitAt(const TensorValue& t, size_t i) {
  return t.dtype == DataType::kInt8 ? static_cast<int32_t>(static_cast<int8_t>(t.bytes[i]))
                                    : static_cast<int32_t>(t.bytes[i]);
}

// A QuantizeLinear or DequantizeLinear of the forms the QLinear ops take: default domain, no
// attributes of later opsets that change the types or the blocking.
bool IsPlainQdq(const Node& node, absl::string_view op) {
  return node.op == op && IsDefaultDomain(node) && node.inputs.size() >= 2 &&
         node.inputs.size() <= 3 && node.outputs.size() == 1 && node.inputs[0] != Graph::kNoValue &&
         !node.attributes.Has("block_size") && !node.attributes.Has("output_dtype");
}

// One scale and zero point for a whole tensor. `zero` is kNoValue when a zero of `type` (uint8,
// QuantizeLinear's default) must be made.
struct PerTensor {
  int scale = Graph::kNoValue;
  int zero = Graph::kNoValue;
  DataType type = DataType::kUInt8;
  int32_t zero_value = 0;
  float scale_value = 0.0f;
};

// Inputs 1 and 2 of a QuantizeLinear / DequantizeLinear when they are one constant float scale
// and one constant 8-bit zero point (which QuantizeLinear may lack).
std::optional<PerTensor> ReadPerTensor(const Graph& graph, const Node& node, bool zero_optional) {
  PerTensor p;
  p.scale = node.inputs[1];
  const std::vector<float> scales = ScalesOf(graph, p.scale);
  if (scales.size() != 1) return std::nullopt;
  p.scale_value = scales[0];
  if (node.inputs.size() < 3 || node.inputs[2] == Graph::kNoValue) {
    if (!zero_optional) return std::nullopt;
    return p;
  }
  p.zero = node.inputs[2];
  const TensorValue* zero = ConstantOf(graph, p.zero);
  if (zero == nullptr || !IsEightBit(zero->dtype) || zero->bytes.size() != 1) return std::nullopt;
  p.type = zero->dtype;
  p.zero_value = EightBitAt(*zero, 0);
  return p;
}

// The constant weights of a DequantizeLinear: 8-bit data, scales and zero points one for the
// tensor or one per index of axis `channel_axis` (which the node's `axis` must name).
struct Weights {
  const TensorValue* data = nullptr;
  int data_id = Graph::kNoValue;
  int scale = Graph::kNoValue;
  std::vector<float> scales;
  int zero = Graph::kNoValue;  // kNoValue: absent, zeros of data's type must be made
};

std::optional<Weights> ReadWeights(const Graph& graph, const Node& node, int64_t channel_axis) {
  Weights w;
  w.data_id = node.inputs[0];
  w.data = ConstantOf(graph, w.data_id);
  if (w.data == nullptr || !IsEightBit(w.data->dtype)) return std::nullopt;
  const auto rank = static_cast<int64_t>(w.data->shape.size());
  if (channel_axis < 0 || channel_axis >= rank) return std::nullopt;
  w.scale = node.inputs[1];
  w.scales = ScalesOf(graph, w.scale);
  if (w.scales.empty()) return std::nullopt;
  const TensorValue* scale = graph.FindConstant(w.scale);
  if (w.scales.size() != 1) {
    auto axis = node.attributes.GetInt("axis", 1);
    if (!axis.ok()) return std::nullopt;
    const int64_t normalized = *axis < 0 ? *axis + rank : *axis;
    if (normalized != channel_axis || scale->shape != Shape{w.data->shape[channel_axis]}) {
      return std::nullopt;
    }
  }
  if (node.inputs.size() > 2 && node.inputs[2] != Graph::kNoValue) {
    w.zero = node.inputs[2];
    const TensorValue* zero = ConstantOf(graph, w.zero);
    if (zero == nullptr || zero->dtype != w.data->dtype || zero->shape != scale->shape) {
      return std::nullopt;
    }
  }
  return w;
}

// A new constant value named after `base` (made unique).
int AddConstant(Graph* graph, const std::string& base, DataType dtype, Shape shape,
                std::vector<uint8_t> bytes) {
  std::string name = base;
  for (int k = 1; graph->FindValue(name) != Graph::kNoValue; ++k) name = absl::StrCat(base, "_", k);
  Value value;
  value.name = std::move(name);
  value.dtype = dtype;
  value.has_shape = true;
  for (int64_t d : shape) value.dims.push_back(Dim{d, ""});
  const int id = graph->AddValue(std::move(value));
  auto tensor = std::make_unique<TensorValue>();
  tensor->dtype = dtype;
  tensor->shape = std::move(shape);
  tensor->bytes.assign(bytes.begin(), bytes.end());
  graph->constants[id] = std::move(tensor);
  return id;
}

// QuantizeLinear's value for the real `t` (float32 arithmetic, as its kernel).
int32_t QuantizeAt(float t, const PerTensor& y) {
  const float scaled = t / y.scale_value;
  return y.type == DataType::kInt8 ? kernels::cpu::Saturate<int8_t>(scaled, y.zero_value)
                                   : kernels::cpu::Saturate<uint8_t>(scaled, y.zero_value);
}

// The bounds of a Relu (0, +inf) or of a Clip with constant ones; false for another node.
bool ActivationBounds(const Graph& graph, const Node& node, float* lo, float* hi) {
  if (!IsDefaultDomain(node) || node.inputs.empty() || node.outputs.size() != 1) return false;
  if (node.op == "Relu" && node.inputs.size() == 1) {
    *lo = 0.0f;
    *hi = INFINITY;
    return true;
  }
  return node.op == "Clip" && fusion::ClipBounds(graph, node, lo, hi) && !std::isnan(*lo) &&
         !std::isnan(*hi) && *lo <= *hi;
}

// The end of a pattern: the op's output read only by an optional Relu or Clip, whose output
// (or the op's) is read only by a QuantizeLinear with constant per-tensor parameters.
struct Tail {
  std::vector<int> taken;  // node indices after the op: [Relu | Clip,] QuantizeLinear
  PerTensor y;
  int output = Graph::kNoValue;
};

std::optional<Tail> MatchTail(const Graph& graph, const std::vector<int>& uses,
                              const std::vector<bool>& drop, int out) {
  auto consumer = [&](int value) {
    const int at = fusion::SoleConsumer(graph, uses, value);
    return at >= 0 && !drop[at] ? at : -1;
  };
  Tail tail;
  int next = consumer(out);
  if (next < 0) return std::nullopt;
  std::optional<std::pair<float, float>> bounds;
  const Node* node = &graph.nodes[next];
  float lo, hi;
  if (node->inputs[0] == out && ActivationBounds(graph, *node, &lo, &hi)) {
    bounds = std::make_pair(lo, hi);
    tail.taken.push_back(next);
    next = consumer(node->outputs[0]);
    if (next < 0) return std::nullopt;
    node = &graph.nodes[next];
  }
  if (!IsPlainQdq(*node, "QuantizeLinear")) return std::nullopt;
  std::optional<PerTensor> y = ReadPerTensor(graph, *node, /*zero_optional=*/true);
  if (!y.has_value()) return std::nullopt;
  // Q is monotonic, so Q(clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)): the same as Q(v) when
  // Q(lo) and Q(hi) are the ends of the type (Relu: y's zero point is the lowest value).
  const int32_t lowest = y->type == DataType::kInt8 ? -128 : 0;
  const int32_t highest = y->type == DataType::kInt8 ? 127 : 255;
  if (bounds.has_value() &&
      (QuantizeAt(bounds->first, *y) != lowest || QuantizeAt(bounds->second, *y) != highest)) {
    return std::nullopt;
  }
  tail.taken.push_back(next);
  tail.y = *y;
  tail.output = node->outputs[0];
  return tail;
}

// The DequantizeLinear producing `value` (not dropped), or null.
const Node* DequantizeOf(const Graph& graph, const std::vector<int>& producer,
                         const std::vector<bool>& drop, int value) {
  if (value == Graph::kNoValue || producer[value] < 0 || drop[producer[value]]) return nullptr;
  const Node& node = graph.nodes[producer[value]];
  return IsPlainQdq(node, "DequantizeLinear") ? &node : nullptr;
}

// Zeros of `type` shaped like the scale `scale`.
int ZerosLike(Graph* graph, const std::string& base, DataType type, int scale) {
  const Shape shape = graph->FindConstant(scale)->shape;
  const size_t count = graph->FindConstant(scale)->bytes.size() / sizeof(float);
  return AddConstant(graph, base, type, shape, std::vector<uint8_t>(count, 0));
}

// The int32 bias B / (xs * ws[c]), rounded half to even; nullopt when B is not a float32
// constant of `channels` elements or a value does not fit int32.
std::optional<std::vector<uint8_t>> QuantizeBias(const Graph& graph, int bias, float x_scale,
                                                 const std::vector<float>& w_scales,
                                                 int64_t channels) {
  const TensorValue* b = ConstantOf(graph, bias);
  if (b == nullptr || b->dtype != DataType::kFloat32 || b->shape != Shape{channels}) {
    return std::nullopt;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(channels) * sizeof(int32_t));
  for (int64_t c = 0; c < channels; ++c) {
    float v;
    std::memcpy(&v, b->bytes.data() + c * sizeof(float), sizeof(float));
    const double s =
        static_cast<double>(x_scale) * static_cast<double>(w_scales[w_scales.size() == 1 ? 0 : c]);
    const double q = std::nearbyint(static_cast<double>(v) / s);
    if (!std::isfinite(q) || std::fabs(q) > static_cast<double>(INT32_MAX)) return std::nullopt;
    const auto i = static_cast<int32_t>(q);
    std::memcpy(bytes.data() + c * sizeof(int32_t), &i, sizeof(int32_t));
  }
  return bytes;
}

// Wq [N, K] as [K, N] (Gemm's transB).
std::vector<uint8_t> Transpose2d(const TensorValue& t) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  std::vector<uint8_t> out(t.bytes.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = t.bytes[r * cols + c];
  }
  return out;
}

// Everything one rewrite needs, checked, before the graph changes.
struct Match {
  PerTensor x;
  int x_data = Graph::kNoValue;
  Weights w;
  Tail tail;
  std::optional<std::vector<uint8_t>> bias;  // QLinearConv's int32 B
  bool transpose_w = false;                  // Gemm with transB = 1
};

std::optional<Match> MatchOp(const Graph& graph, const std::vector<int>& uses,
                             const std::vector<int>& producer, const std::vector<bool>& drop,
                             const Node& op) {
  const bool conv = op.op == "Conv";
  const bool gemm = op.op == "Gemm";
  const Node* dx = DequantizeOf(graph, producer, drop, op.inputs[0]);
  const Node* dw = DequantizeOf(graph, producer, drop, op.inputs[1]);
  if (dx == nullptr || dw == nullptr) return std::nullopt;
  Match m;
  std::optional<PerTensor> x = ReadPerTensor(graph, *dx, /*zero_optional=*/false);
  if (!x.has_value()) return std::nullopt;
  m.x = *x;
  m.x_data = dx->inputs[0];
  const DataType x_type = graph.values[m.x_data].dtype;
  if (x_type != DataType::kUndefined && x_type != m.x.type) return std::nullopt;
  const TensorValue* wq = ConstantOf(graph, dw->inputs[0]);
  if (wq == nullptr) return std::nullopt;
  const auto rank = static_cast<int64_t>(wq->shape.size());
  int64_t channel_axis = 0;
  if (conv) {
    if (rank < 3 || rank > 5) return std::nullopt;
  } else if (gemm) {
    auto alpha = op.attributes.GetFloat("alpha", 1.0f);
    auto trans_a = op.attributes.GetInt("transA", 0);
    auto trans_b = op.attributes.GetInt("transB", 0);
    if (!alpha.ok() || *alpha != 1.0f || !trans_a.ok() || *trans_a != 0 || !trans_b.ok() ||
        rank != 2 || (op.inputs.size() > 2 && op.inputs[2] != Graph::kNoValue)) {
      return std::nullopt;
    }
    const Value& a = graph.values[op.inputs[0]];
    if (a.has_shape && a.dims.size() != 2) return std::nullopt;
    m.transpose_w = *trans_b != 0;
    channel_axis = m.transpose_w ? 0 : 1;
  } else {
    if (rank < 2) return std::nullopt;
    channel_axis = rank - 1;
  }
  std::optional<Weights> w = ReadWeights(graph, *dw, channel_axis);
  if (!w.has_value()) return std::nullopt;
  m.w = std::move(*w);
  if (conv && op.inputs.size() > 2 && op.inputs[2] != Graph::kNoValue) {
    m.bias = QuantizeBias(graph, op.inputs[2], m.x.scale_value, m.w.scales, wq->shape[0]);
    if (!m.bias.has_value()) return std::nullopt;
  }
  std::optional<Tail> tail = MatchTail(graph, uses, drop, op.outputs[0]);
  if (!tail.has_value()) return std::nullopt;
  m.tail = std::move(*tail);
  return m;
}

}  // namespace

int FuseQdqIntoQLinearOps(Graph* graph, const KernelRegistry& registry) {
  const bool has_conv = registry.Has("QLinearConv");
  const bool has_matmul = registry.Has("QLinearMatMul");
  if (!has_conv && !has_matmul) return 0;
  const std::vector<int> uses = graph->UseCounts();
  const std::vector<int> producer = fusion::Producers(*graph);
  std::vector<bool> drop(graph->nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const Node& op = graph->nodes[i];
    const bool conv = op.op == "Conv" && has_conv;
    const bool matmul = (op.op == "MatMul" || op.op == "Gemm") && has_matmul;
    if (drop[i] || (!conv && !matmul) || !IsDefaultDomain(op) || op.outputs.size() != 1 ||
        op.inputs.size() < 2) {
      continue;
    }
    std::optional<Match> m = MatchOp(*graph, uses, producer, drop, op);
    if (!m.has_value()) continue;
    const std::string base = graph->values[m->tail.output].name;
    Node q;
    q.op = conv ? "QLinearConv" : "QLinearMatMul";
    q.name = op.name;
    if (conv) q.attributes = op.attributes;
    int w_data = m->w.data_id;
    if (m->transpose_w) {
      const TensorValue& t = *m->w.data;
      w_data = AddConstant(graph, absl::StrCat(base, "_qdq_wt"), t.dtype,
                           Shape{t.shape[1], t.shape[0]}, Transpose2d(t));
    }
    const int w_zero =
        m->w.zero != Graph::kNoValue
            ? m->w.zero
            : ZerosLike(graph, absl::StrCat(base, "_qdq_wz"), m->w.data->dtype, m->w.scale);
    int y_zero = m->tail.y.zero;
    if (y_zero == Graph::kNoValue) {
      y_zero = AddConstant(graph, absl::StrCat(base, "_qdq_yz"), DataType::kUInt8, Shape{},
                           std::vector<uint8_t>(1, 0));
    }
    q.inputs = {m->x_data,  m->x.scale, m->x.zero,       w_data,
                m->w.scale, w_zero,     m->tail.y.scale, y_zero};
    if (m->bias.has_value()) {
      const Shape shape = {static_cast<int64_t>(m->bias->size() / sizeof(int32_t))};
      q.inputs.push_back(AddConstant(graph, absl::StrCat(base, "_qdq_bias"), DataType::kInt32,
                                     shape, std::move(*m->bias)));
    }
    q.outputs = {m->tail.output};
    // The fused node runs where the QuantizeLinear ran.
    drop[i] = true;
    for (int t : m->tail.taken) drop[t] = true;
    drop[m->tail.taken.back()] = false;
    graph->nodes[m->tail.taken.back()] = std::move(q);
    ++fused;
  }
  fusion::DropNodes(graph, drop);
  return fused;
}

}  // namespace reprise::runtime::engine
