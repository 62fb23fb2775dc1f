#include "runtime/engine/fusion_conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/fusion_activation.h"
#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine {
namespace {

using fusion::Activation;
using fusion::DropNodes;
using fusion::IsGraphOutput;
using fusion::MatchActivation;
using fusion::SetActivationAttributes;
using fusion::SoleConsumer;
using kernels::cpu::kFusedAddOp;
using kernels::cpu::kFusedAveragePoolOp;
using kernels::cpu::kFusedChannelScaleOp;
using kernels::cpu::kFusedConcatOp;
using kernels::cpu::kFusedConvDwOp;
using kernels::cpu::kFusedConvOp;
using kernels::cpu::kFusedConvTransposeOp;
using kernels::cpu::kFusedDomain;
using kernels::cpu::kFusedGlobalAveragePoolOp;
using kernels::cpu::kFusedGlobalMaxPoolOp;
using kernels::cpu::kFusedMaxPoolOp;
using kernels::cpu::kFusedResizeOp;

const TensorValue* FloatConstant(const Graph& graph, int value) {
  if (value == Graph::kNoValue) return nullptr;
  const TensorValue* t = graph.FindConstant(value);
  if (t == nullptr || t->dtype != DataType::kFloat32) return nullptr;
  if (t->bytes.size() != static_cast<size_t>(NumElements(t->shape)) * sizeof(float)) {
    return nullptr;
  }
  return t;
}

std::vector<float> ToFloats(const TensorValue& t) {
  std::vector<float> out(t.bytes.size() / sizeof(float));
  // (No copy of nothing: memcpy's pointers must not be null, and an empty vector's may be.)
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(float));
  return out;
}

// The rank of a node's constant weights (input 1), or 0 when they are not a constant.
size_t ConstantWeightRank(const Graph& graph, const Node& node) {
  const TensorValue* w = node.inputs.size() < 2 ? nullptr : graph.FindConstant(node.inputs[1]);
  return w == nullptr ? 0 : w->shape.size();
}

// A 2-D convolution: constant 4-D weights.
bool IsConv2d(const Graph& graph, const Node& node) {
  return (node.op == kFusedConvOp || node.op == kFusedConvDwOp) &&
         ConstantWeightRank(graph, node) == 4;
}

// A 1-D convolution: constant 3-D weights. Its value stays channels-last between 1-D
// convolutions (and nothing else reads that layout).
bool IsConv1d(const Graph& graph, const Node& node) {
  return node.op == kFusedConvOp && ConstantWeightRank(graph, node) == 3;
}

// A 1-D convolution's kernel width (its constant weights' last dimension).
int64_t Conv1dWidth(const Graph& graph, const Node& node) {
  return graph.FindConstant(node.inputs[1])->shape[2];
}

// A node that writes a 4-D float32 value in any of the layouts: a 2-D fused conv, a fused
// pooling, concatenation, channel scale, Resize or sum.
bool WritesAnyLayout(const Graph& graph, const Node& node) {
  return IsConv2d(graph, node) || node.op == kFusedMaxPoolOp || node.op == kFusedAveragePoolOp ||
         node.op == kFusedConcatOp || node.op == kFusedChannelScaleOp ||
         node.op == kFusedResizeOp || node.op == kFusedAddOp;
}

bool IsFusedGlobalPool(const Node& node) {
  return node.op == kFusedGlobalAveragePoolOp || node.op == kFusedGlobalMaxPoolOp;
}

// A node that reads a 4-D value in any of the layouts as its input `input`: input 0 (and 3, the
// residual) of a conv, every input of a fused concatenation or sum, input 0 of the others.
bool IsLayoutAware(const Graph& graph, const Node& node, size_t input) {
  if (node.op == kFusedConcatOp || node.op == kFusedAddOp) return true;
  if (node.op == kFusedMaxPoolOp || node.op == kFusedAveragePoolOp || node.op == kFusedConvDwOp ||
      IsFusedGlobalPool(node) || node.op == kFusedChannelScaleOp || node.op == kFusedResizeOp) {
    return input == 0;
  }
  return IsConv2d(graph, node) && (input == 0 || input == 3);
}

// Two dims that are the same at run time: equal known sizes, or the same symbol.
bool SameDim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

// `scale` is one value per channel of the 4-D float32 `x` under Mul's broadcasting (rank 4 at
// most, 1 across H and W, 1 or x's size across C and N), from the values' inferred shapes.
bool IsChannelScaleOf(const Graph& graph, int scale, int x) {
  if (scale == Graph::kNoValue || x == Graph::kNoValue) return false;
  const Value& s = graph.values[scale];
  const Value& v = graph.values[x];
  if (!s.has_shape || !v.has_shape || v.dims.size() != 4 || s.dims.size() > 4 ||
      s.dtype != DataType::kFloat32 || v.dtype != DataType::kFloat32) {
    return false;
  }
  const size_t rank = s.dims.size();
  for (size_t k = 0; k < rank; ++k) {  // k-th axis from the right
    const Dim& d = s.dims[rank - 1 - k];
    const bool one = d.known() && d.value == 1;
    if (k < 2 ? !one : !one && !SameDim(d, v.dims[3 - k])) return false;
  }
  return true;
}

// Two 4-D float32 values whose shapes are the same at run time.
bool SameFloat4dShape(const Graph& graph, int a, int b) {
  const Value& u = graph.values[a];
  const Value& v = graph.values[b];
  if (!u.has_shape || !v.has_shape || u.dims.size() != 4 || v.dims.size() != 4 ||
      u.dtype != DataType::kFloat32 || v.dtype != DataType::kFloat32) {
    return false;
  }
  for (size_t k = 0; k < 4; ++k) {
    if (!SameDim(u.dims[k], v.dims[k])) return false;
  }
  return true;
}

// `name` absent, or equal to `want` (ints attribute).
bool IntsAre(const Node& node, const char* name, const std::vector<int64_t>& want) {
  if (!node.attributes.Has(name)) return true;
  auto got = node.attributes.GetInts(name, {});
  return got.ok() && *got == want;
}

// A fused conv with constant weights [C_out, C_in / group, kh, kw] of the given kernel and
// group, no residual, explicit pads (or none), dilations 1.
bool IsPlainConv(const Graph& graph, const Node& node, int64_t kernel, bool depthwise) {
  if (node.op != kFusedConvOp || node.inputs.size() < 2 || node.inputs.size() > 3) return false;
  const TensorValue* w = graph.FindConstant(node.inputs[1]);
  if (w == nullptr || w->dtype != DataType::kFloat32 || w->shape.size() != 4 ||
      w->shape[2] != kernel || w->shape[3] != kernel) {
    return false;
  }
  if (node.inputs.size() == 3 && node.inputs[2] != Graph::kNoValue &&
      graph.FindConstant(node.inputs[2]) == nullptr) {
    return false;
  }
  auto group = node.attributes.GetInt("group", 1);
  auto auto_pad = node.attributes.GetString("auto_pad", "NOTSET");
  if (!group.ok() || !auto_pad.ok() || *auto_pad != "NOTSET") return false;
  if (depthwise ? (w->shape[1] != 1 || *group != w->shape[0]) : *group != 1) return false;
  return IntsAre(node, "dilations", {1, 1}) && IntsAre(node, "kernel_shape", {kernel, kernel}) &&
         IntsAre(node, "pads",
                 depthwise ? std::vector<int64_t>{1, 1, 1, 1} : std::vector<int64_t>{0, 0, 0, 0}) &&
         (!depthwise || node.attributes.Has("pads"));
}

// A Pad in constant mode with constant pads (int64, two per axis) and a constant value of 0
// (absent, or every byte zero), no axes input: its pads in `*pads`. Opsets before 11 carry the
// pads and the value as attributes.
bool ZeroConstantPads(const Graph& graph, const Node& pad, std::vector<int64_t>* pads) {
  auto mode = pad.attributes.GetString("mode", "constant");
  if (!mode.ok() || *mode != "constant") return false;
  if (graph.opset < 11) {
    auto value = pad.attributes.GetFloat("value", 0.0f);
    auto attr = pad.attributes.GetInts(graph.opset < 2 ? "paddings" : "pads", {});
    if (!value.ok() || *value != 0.0f || !attr.ok()) return false;
    *pads = *attr;
    return true;
  }
  if (pad.inputs.size() < 2 || (pad.inputs.size() > 3 && pad.inputs[3] != Graph::kNoValue)) {
    return false;
  }
  const TensorValue* p = graph.FindConstant(pad.inputs[1]);
  if (p == nullptr || p->dtype != DataType::kInt64 || p->bytes.size() % sizeof(int64_t) != 0) {
    return false;
  }
  if (pad.inputs.size() > 2 && pad.inputs[2] != Graph::kNoValue) {
    const TensorValue* v = graph.FindConstant(pad.inputs[2]);
    if (v == nullptr || v->bytes.empty() ||
        std::any_of(v->bytes.begin(), v->bytes.end(), [](auto b) { return b != 0; })) {
      return false;
    }
  }
  pads->resize(p->bytes.size() / sizeof(int64_t));
  if (!pads->empty()) std::memcpy(pads->data(), p->bytes.data(), p->bytes.size());
  return true;
}

// Adds `spatial` (begins, then ends, one per spatial axis) to the pads of a Conv, or of an
// AveragePool that then counts the padding (ceil_mode 0, dilations 1; one whose own padding is
// not counted must have none, and every pad must stay narrower than the window). False, with
// `node` unchanged, for any other node.
bool AbsorbPads(Node* node, const std::vector<int64_t>& spatial) {
  const bool conv = node->op == "Conv";
  if ((!conv && node->op != "AveragePool") || !fusion::IsDefaultDomain(*node)) return false;
  auto auto_pad = node->attributes.GetString("auto_pad", "NOTSET");
  auto own = node->attributes.GetInts("pads", {});
  if (!auto_pad.ok() || *auto_pad != "NOTSET" || !own.ok()) return false;
  std::vector<int64_t> pads = own->empty() ? std::vector<int64_t>(spatial.size(), 0) : *own;
  if (pads.size() != spatial.size()) return false;
  const bool own_padding = std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v != 0; });
  for (size_t i = 0; i < pads.size(); ++i) pads[i] += spatial[i];
  if (!conv) {
    auto ceil_mode = node->attributes.GetInt("ceil_mode", 0);
    auto counted = node->attributes.GetInt("count_include_pad", 0);
    auto kernel = node->attributes.GetInts("kernel_shape", {});
    if (!ceil_mode.ok() || *ceil_mode != 0 || !counted.ok() || (own_padding && *counted == 0) ||
        !kernel.ok() || kernel->size() * 2 != pads.size() ||
        !IntsAre(*node, "dilations", std::vector<int64_t>(kernel->size(), 1))) {
      return false;
    }
    for (size_t i = 0; i < pads.size(); ++i) {
      if (pads[i] >= (*kernel)[i % kernel->size()]) return false;
    }
    node->attributes.Set("count_include_pad", int64_t{1});
  }
  node->attributes.Set("pads", std::move(pads));
  return true;
}

// A BatchNormalization in inference form (training_mode 0, only Y used) whose scale, B, mean and
// var are float constants of `channels` values: its per-channel factor and shift in `*factor`,
// `*shift` (Y = X * factor + shift).
bool InferenceBatchNorm(const Graph& graph, const std::vector<int>& uses, const Node& bn,
                        std::vector<float>* factor, std::vector<float>* shift) {
  if (bn.op != "BatchNormalization" || bn.inputs.size() != 5) return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) {
    if (bn.outputs[k] != Graph::kNoValue && uses[bn.outputs[k]] > 0) return false;
  }
  auto training = bn.attributes.GetInt("training_mode", 0);
  auto epsilon = bn.attributes.GetFloat("epsilon", 1e-5f);
  if (!training.ok() || *training != 0 || !epsilon.ok()) return false;
  const TensorValue* params[4];
  for (size_t k = 0; k < 4; ++k) {
    params[k] = FloatConstant(graph, bn.inputs[k + 1]);
    if (params[k] == nullptr || params[k]->shape.size() != 1 ||
        params[k]->shape[0] != params[0]->shape[0]) {
      return false;
    }
  }
  const std::vector<float> scale = ToFloats(*params[0]), b = ToFloats(*params[1]),
                           mean = ToFloats(*params[2]), var = ToFloats(*params[3]);
  factor->resize(scale.size());
  shift->resize(scale.size());
  for (size_t c = 0; c < scale.size(); ++c) {
    (*factor)[c] = scale[c] / std::sqrt(var[c] + *epsilon);
    (*shift)[c] = b[c] - mean[c] * (*factor)[c];
  }
  return true;
}

// A new float constant of `shape` holding `data`, named `name`; its value id.
int AddFloatConstant(Graph* graph, const std::string& name, Shape shape,
                     const std::vector<float>& data) {
  Value value;
  value.name = name;
  value.dtype = DataType::kFloat32;
  value.has_shape = true;
  for (int64_t d : shape) value.dims.push_back(Dim{d, ""});
  const int id = graph->AddValue(std::move(value));
  auto tensor = std::make_unique<TensorValue>();
  tensor->dtype = DataType::kFloat32;
  tensor->shape = std::move(shape);
  tensor->bytes.resize(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(tensor->bytes.data(), data.data(), tensor->bytes.size());
  graph->constants[id] = std::move(tensor);
  return id;
}

}  // namespace

int FoldPadIntoConvAndPool(Graph* graph) {
  const std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const Node& pad = graph->nodes[i];
    std::vector<int64_t> pads;
    if (pad.op != "Pad" || !fusion::IsDefaultDomain(pad) || pad.inputs.empty() ||
        pad.inputs[0] == Graph::kNoValue || pad.outputs.size() != 1 ||
        pad.outputs[0] == Graph::kNoValue || !ZeroConstantPads(*graph, pad, &pads)) {
      continue;
    }
    // Batch and channel axes unpadded, every pad >= 0 (a negative one crops).
    const size_t rank = pads.size() / 2;
    if (pads.size() % 2 != 0 || rank < 3 || pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 ||
        pads[rank + 1] != 0 ||
        std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; })) {
      continue;
    }
    const int at = SoleConsumer(*graph, uses, pad.outputs[0]);
    if (at < 0) continue;
    Node& reader = graph->nodes[at];
    if (reader.inputs.empty() || reader.inputs[0] != pad.outputs[0] ||
        std::count(reader.inputs.begin(), reader.inputs.end(), pad.outputs[0]) != 1) {
      continue;
    }
    std::vector<int64_t> spatial;
    for (size_t end : {size_t{0}, rank}) {
      for (size_t d = 2; d < rank; ++d) spatial.push_back(pads[end + d]);
    }
    if (!AbsorbPads(&reader, spatial)) continue;
    reader.inputs[0] = pad.inputs[0];
    drop[i] = true;
    ++folded;
  }
  DropNodes(graph, drop);
  return folded;
}

// A Mul of value `x` (input `k` of `mul`) by a float constant of one value, or one value per
// channel of `x` taken as [N, m, ...] of rank `rank` (a shape right-aligned to it: 1 everywhere
// but m or 1 at the channels): the factor per channel, m of them.
bool ConstantChannelFactor(const Graph& graph, const Node& mul, size_t k, int64_t m, size_t rank,
                           std::vector<float>* factor) {
  if (mul.op != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1) return false;
  const TensorValue* c = FloatConstant(graph, mul.inputs[1 - k]);
  if (c == nullptr || c->shape.size() > rank) return false;
  const size_t lead = rank - c->shape.size();  // axes of x before the constant's first
  for (size_t a = 0; a < c->shape.size(); ++a) {
    const int64_t d = c->shape[a];
    if (d != 1 && !(lead + a == 1 && d == m)) return false;
  }
  const std::vector<float> values = ToFloats(*c);
  if (values.size() == 1) {
    factor->assign(static_cast<size_t>(m), values[0]);
  } else {
    *factor = values;
  }
  return static_cast<int64_t>(factor->size()) == m;
}

absl::StatusOr<int> FoldBatchNormIntoConv(Graph* graph) {
  std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& bn = graph->nodes[i];
    std::vector<float> factor, shift;
    const bool batch_norm = fusion::IsDefaultDomain(bn) && bn.op == "BatchNormalization";
    const bool mul = fusion::IsDefaultDomain(bn) && bn.op == "Mul" && bn.inputs.size() == 2;
    if (!batch_norm && !mul) continue;
    if (batch_norm && !InferenceBatchNorm(*graph, uses, bn, &factor, &shift)) continue;
    // The producing Conv (of the Mul's input 0 or 1).
    int conv_index = -1;
    size_t x_input = 0;
    for (size_t j = 0; j < i; ++j) {
      const Node& n = graph->nodes[j];
      if (n.outputs.empty()) continue;
      for (size_t k = 0; k < (mul ? 2 : 1); ++k) {
        if (n.outputs[0] == bn.inputs[k]) {
          conv_index = static_cast<int>(j);
          x_input = k;
        }
      }
    }
    if (conv_index < 0) continue;
    Node& conv = graph->nodes[conv_index];
    const bool transposed = conv.op == "ConvTranspose";
    if ((conv.op != "Conv" && !transposed) || !fusion::IsDefaultDomain(conv) ||
        conv.inputs.size() < 2 ||
        SoleConsumer(*graph, uses, conv.outputs[0]) != static_cast<int>(i)) {
      continue;
    }
    const TensorValue* w = FloatConstant(*graph, conv.inputs[1]);
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != Graph::kNoValue;
    const TensorValue* b = has_bias ? FloatConstant(*graph, conv.inputs[2]) : nullptr;
    if (w == nullptr || w->shape.size() < 3 || (has_bias && b == nullptr)) continue;
    // The output channels: a Conv's weights are [M, C / group, k...], a ConvTranspose's
    // [C, M / group, k...] (output channel g * M / group + j is column j of group g's rows).
    // Weights of no elements fold nothing (and may declare any other dim: the channel count
    // below would be unbounded, a factor of that many values a crash). Otherwise every dim is at
    // least 1, and a group that divides the rows keeps M = columns x group within the elements.
    auto group = conv.attributes.GetInt("group", 1);
    if (NumElements(w->shape) <= 0 || !group.ok() || *group <= 0 || w->shape[0] % *group != 0) {
      continue;
    }
    const int64_t m = transposed ? w->shape[1] * *group : w->shape[0];
    if (mul) {
      // Y = X * S, S constant per channel: the weights and the bias scaled, no shift.
      if (!ConstantChannelFactor(*graph, bn, x_input, m, w->shape.size(), &factor)) continue;
      shift.assign(static_cast<size_t>(m), 0.0f);
    }
    if (static_cast<int64_t>(factor.size()) != m || (b != nullptr && NumElements(b->shape) != m)) {
      continue;
    }
    std::vector<float> weights = ToFloats(*w);
    std::vector<float> bias = b != nullptr ? ToFloats(*b) : std::vector<float>(m, 0.0f);
    if (transposed) {
      const int64_t rows = w->shape[0], rows_per_group = rows / *group, columns = w->shape[1];
      const int64_t taps = NumElements(w->shape) / (rows * columns);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < columns; ++j) {
          const float f = factor[r / rows_per_group * columns + j];
          float* tap = weights.data() + (r * columns + j) * taps;
          for (int64_t k = 0; k < taps; ++k) tap[k] *= f;
        }
      }
    } else {
      const int64_t per_channel = NumElements(w->shape) / m;
      for (int64_t c = 0; c < m; ++c) {
        for (int64_t k = 0; k < per_channel; ++k) weights[c * per_channel + k] *= factor[c];
      }
    }
    for (int64_t c = 0; c < m; ++c) bias[c] = bias[c] * factor[c] + shift[c];
    // New constants (the old ones may be shared with other nodes).
    const Shape w_shape = w->shape;
    const std::string w_name = graph->values[conv.inputs[1]].name;
    const std::string suffix = absl::StrCat("_bn_folded_", folded);
    const int new_w = AddFloatConstant(graph, w_name + suffix, w_shape, weights);
    const int new_b = AddFloatConstant(graph, w_name + "_bias" + suffix, {m}, bias);
    Node& conv_node = graph->nodes[conv_index];  // AddValue leaves nodes alone
    conv_node.inputs[1] = new_w;
    if (conv_node.inputs.size() < 3) conv_node.inputs.resize(3, Graph::kNoValue);
    conv_node.inputs[2] = new_b;
    conv_node.outputs[0] = graph->nodes[i].outputs[0];
    drop[i] = true;
    ++folded;
    uses = graph->UseCounts();
  }
  DropNodes(graph, drop);
  return folded;
}

// The product of a Conv's strides (1 without the attribute; 0 when it cannot be read).
int64_t StrideProduct(const Node& conv) {
  auto strides = conv.attributes.GetInts("strides", {});
  if (!strides.ok()) return 0;
  int64_t product = 1;
  for (int64_t s : *strides) product *= s;
  return product;
}

int FuseConvPostOps(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kFusedConvOp)) return 0;
  std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  std::vector<int> producer(graph->values.size(), -1);
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    for (int out : graph->nodes[i].outputs) {
      if (out != Graph::kNoValue && out >= 0 && static_cast<size_t>(out) < producer.size()) {
        producer[out] = static_cast<int>(i);
      }
    }
  }
  // Where both operands of a residual Add come from Convs, the Add goes into the one of unit
  // strides, later in the node order: the strided one (a projection shortcut) then runs at its
  // own place, while the block's input is fresh, instead of at the Add's, after the main branch.
  // RegNetX-400MF at batch 1, two threads, per-step medians: its first block's 1x1 stride-2
  // projection took 83 us with the sum, 46 us alone and early, and the main branch's last conv
  // 36 us alone, 52 us with the sum. (ONNX Runtime places the sum the same way.)
  auto leaves_add_to_later_conv = [&](size_t i, const Node& conv, int add, int other) {
    if (other < 0 || static_cast<size_t>(other) >= producer.size()) return false;
    const int j = producer[other];
    if (j <= static_cast<int>(i) || drop[j]) return false;
    const Node& peer = graph->nodes[j];
    if (peer.op != "Conv" || !fusion::IsDefaultDomain(peer) || peer.outputs.size() != 1 ||
        peer.inputs.size() < 2 || SoleConsumer(*graph, uses, other) != add) {
      return false;
    }
    const int64_t mine = StrideProduct(conv), theirs = StrideProduct(peer);
    return mine > 1 && theirs == 1;
  };
  int absorbed = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& conv = graph->nodes[i];
    if (drop[i] || conv.op != "Conv" || !fusion::IsDefaultDomain(conv) ||
        conv.outputs.size() != 1 || conv.inputs.size() < 2) {
      continue;
    }
    const int y = conv.outputs[0];
    int last = static_cast<int>(i);  // the node whose position and output the fused node takes
    int out = y;
    int residual = Graph::kNoValue;
    Activation activation;
    // A node already absorbed into another fused conv is not looked at again.
    auto consumer = [&](int value) {
      const int at = SoleConsumer(*graph, uses, value);
      return at >= 0 && !drop[at] ? at : -1;
    };
    // An Add of `out` and another value (the residual) that can be absorbed: its node, or -1.
    auto residual_add = [&](int value, int* other) {
      const int next = consumer(value);
      if (next < 0) return -1;
      const Node& add = graph->nodes[next];
      *other =
          add.inputs.size() == 2 ? add.inputs[add.inputs[0] == value ? 1 : 0] : Graph::kNoValue;
      // A constant operand is usually a broadcast bias, not a residual of Y's shape.
      const bool ok = add.op == "Add" && fusion::IsDefaultDomain(add) && add.inputs.size() == 2 &&
                      add.outputs.size() == 1 && add.inputs[0] != add.inputs[1] &&
                      *other != Graph::kNoValue && !graph->IsConstant(*other) &&
                      !leaves_add_to_later_conv(i, conv, next, *other);
      return ok ? next : -1;
    };
    auto absorb_add = [&](int add, int other) {
      residual = other;
      drop[add] = true;
      last = std::max(last, add);
      out = graph->nodes[add].outputs[0];
      ++absorbed;
    };
    int other = Graph::kNoValue;
    if (const int add = residual_add(out, &other); add >= 0) absorb_add(add, other);
    if (MatchActivation(*graph, uses, out, drop, &activation)) {
      for (int n : activation.nodes) {
        drop[n] = true;
        last = std::max(last, n);
        ++absorbed;
      }
      out = activation.out;
    }
    // The residual added after the activation (YOLO's and CSP blocks' x + SiLU(conv(...))).
    bool sum_after_activation = false;
    if (residual == Graph::kNoValue && !activation.name.empty()) {
      if (const int add = residual_add(out, &other); add >= 0) {
        absorb_add(add, other);
        sum_after_activation = true;
      }
    }
    Node fused;
    fused.op = kFusedConvOp;
    fused.domain = kFusedDomain;
    fused.name = conv.name;
    fused.attributes = conv.attributes;
    fused.inputs = conv.inputs;
    fused.inputs.resize(3, Graph::kNoValue);
    if (residual != Graph::kNoValue) fused.inputs.push_back(residual);
    fused.outputs = {out};
    SetActivationAttributes(activation, &fused);
    if (sum_after_activation) fused.attributes.Set("sum_after_activation", int64_t{1});
    if (last == static_cast<int>(i)) {
      conv = std::move(fused);
    } else {
      // The fused node runs where the last absorbed node ran: the residual exists by then.
      drop[i] = true;
      drop[last] = false;
      graph->nodes[last] = std::move(fused);
    }
  }
  DropNodes(graph, drop);
  return absorbed;
}

int FuseConvTransposeActivations(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kFusedConvTransposeOp)) return 0;
  const std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& node = graph->nodes[i];
    Activation act;
    if (drop[i] || node.op != "ConvTranspose" || !fusion::IsDefaultDomain(node) ||
        node.outputs.size() != 1 || node.inputs.size() < 2 ||
        !MatchActivation(*graph, uses, node.outputs[0], drop, &act)) {
      continue;
    }
    // The fused node stays where the ConvTranspose was: the activation reads nothing else.
    for (int n : act.nodes) drop[n] = true;
    node.op = kFusedConvTransposeOp;
    node.domain = kFusedDomain;
    node.outputs[0] = act.out;
    SetActivationAttributes(act, &node);
    ++fused;
  }
  DropNodes(graph, drop);
  return fused;
}

int FuseDepthwiseIntoPointwise(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kFusedConvDwOp)) return 0;
  const std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  std::vector<int> consumer(graph->values.size(), -1);
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    for (int in : graph->nodes[i].inputs) {
      if (in != Graph::kNoValue) consumer[in] = static_cast<int>(i);
    }
  }
  int fused = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& pw = graph->nodes[i];
    if (drop[i] || !IsPlainConv(*graph, pw, 1, false) || !IntsAre(pw, "strides", {1, 1})) continue;
    const int mid = pw.outputs[0];
    const int at = SoleConsumer(*graph, uses, mid);
    if (at < 0 || consumer[mid] != at || drop[at]) continue;
    const Node& dw = graph->nodes[at];
    if (!IsPlainConv(*graph, dw, 3, true) || dw.inputs[0] != mid) continue;
    const TensorValue* w = graph->FindConstant(pw.inputs[1]);
    if (graph->FindConstant(dw.inputs[1])->shape[0] != w->shape[0]) continue;
    int64_t stride = 0;
    if (IntsAre(dw, "strides", {1, 1})) stride = 1;
    if (dw.attributes.Has("strides") && IntsAre(dw, "strides", {2, 2})) stride = 2;
    if (stride == 0) continue;
    auto activation = dw.attributes.GetString("activation", "");
    auto lo = dw.attributes.GetFloat("clip_min", 0.0f);
    auto hi = dw.attributes.GetFloat("clip_max", 0.0f);
    auto alpha = dw.attributes.GetFloat("activation_alpha", 0.0f);
    auto beta = dw.attributes.GetFloat("activation_beta", 0.0f);
    if (!activation.ok() || !lo.ok() || !hi.ok() || !alpha.ok() || !beta.ok()) continue;
    pw.op = kFusedConvDwOp;
    pw.inputs.resize(3, Graph::kNoValue);
    pw.inputs.push_back(dw.inputs[1]);
    pw.inputs.push_back(dw.inputs.size() > 2 ? dw.inputs[2] : Graph::kNoValue);
    pw.attributes.Set("dw_stride", stride);
    pw.attributes.Set("dw_activation", *activation);
    pw.attributes.Set("dw_clip_min", *lo);
    pw.attributes.Set("dw_clip_max", *hi);
    pw.attributes.Set("dw_activation_alpha", *alpha);
    pw.attributes.Set("dw_activation_beta", *beta);
    pw.outputs = dw.outputs;
    drop[at] = true;
    ++fused;
  }
  DropNodes(graph, drop);
  return fused;
}

int FusePoolsIntoConvChains(Graph* graph, const KernelRegistry& registry) {
  const std::vector<int> uses = graph->UseCounts();
  const std::vector<int> producer = fusion::Producers(*graph);
  int fused = 0;
  for (Node& pool : graph->nodes) {
    const bool average = pool.op == "AveragePool";
    const char* fused_op = average ? kFusedAveragePoolOp : kFusedMaxPoolOp;
    if ((pool.op != "MaxPool" && !average) || !registry.Has(fused_op) ||
        !fusion::IsDefaultDomain(pool) || pool.inputs.size() != 1 || pool.outputs.empty() ||
        pool.outputs[0] == Graph::kNoValue) {
      continue;
    }
    if (average) {
      // ceil_mode's extra windows divide differently (see the kernel); a pad as wide as the
      // window could make a window of padding only, whose average ONNX and oneDNN differ on.
      auto ceil_mode = pool.attributes.GetInt("ceil_mode", 0);
      auto kernel = pool.attributes.GetInts("kernel_shape", {});
      auto pads = pool.attributes.GetInts("pads", {});
      if (!ceil_mode.ok() || *ceil_mode != 0 || !kernel.ok() || kernel->size() != 2 || !pads.ok() ||
          (!pads->empty() && pads->size() != 4)) {
        continue;
      }
      bool narrow = true;
      for (size_t i = 0; i < pads->size(); ++i) {
        if ((*pads)[i] < 0 || (*pads)[i] >= (*kernel)[i % 2]) narrow = false;
      }
      if (!narrow) continue;
    }
    // Indices used, dilations, or a producer that cannot write the blocked layout: left alone.
    if (pool.outputs.size() > 1 && pool.outputs[1] != Graph::kNoValue &&
        (uses[pool.outputs[1]] > 0 || IsGraphOutput(*graph, pool.outputs[1]))) {
      continue;
    }
    auto dilations = pool.attributes.GetInts("dilations", {});
    if (!dilations.ok() ||
        std::any_of(dilations->begin(), dilations->end(), [](int64_t d) { return d != 1; })) {
      continue;
    }
    const int from = producer[pool.inputs[0]];
    if (from < 0 || !WritesAnyLayout(*graph, graph->nodes[from])) continue;
    pool.op = fused_op;
    pool.domain = kFusedDomain;
    pool.outputs.resize(1);
    ++fused;
  }
  return fused;
}

// A Resize (opset 11 or later: X, roi, scales[, sizes]) of a 4-D float32 value in H and W only,
// nearest or linear, without tf_crop_and_resize, tf_half_pixel_for_nn or opset 18's
// attributes: four scales known at plan time and 1 on N and C, or sizes known and equal to X's
// known N and C.
bool ResizesImagesOnly(const Graph& graph, const Node& node) {
  if (node.inputs.size() < 3 || node.inputs.size() > 4 || node.outputs.size() != 1 ||
      node.attributes.Has("antialias") || node.attributes.Has("axes") ||
      node.attributes.Has("keep_aspect_ratio_policy")) {
    return false;
  }
  // Every other coordinate mode maps an axis of scale 1 onto itself (tf_half_pixel_for_nn
  // rounds i + 0.5, up with nearest_mode ceil).
  const auto mode = node.attributes.GetString("mode", "nearest");
  const auto coords = node.attributes.GetString("coordinate_transformation_mode", "half_pixel");
  if (!mode.ok() || (*mode != "nearest" && *mode != "linear") || !coords.ok() ||
      *coords == "tf_crop_and_resize" || *coords == "tf_half_pixel_for_nn") {
    return false;
  }
  const Value& x = graph.values[node.inputs[0]];
  if (x.dtype != DataType::kFloat32) return false;
  // Four scales: X is 4-D (its inferred shape may be gone after fusion).
  const TensorValue* scales = FloatConstant(graph, node.inputs[2]);
  if (scales != nullptr && NumElements(scales->shape) == 4) {
    const std::vector<float> s = ToFloats(*scales);
    return s[0] == 1.0f && s[1] == 1.0f &&
           (node.inputs.size() == 3 || node.inputs[3] == Graph::kNoValue);
  }
  if (node.inputs.size() != 4 || node.inputs[3] == Graph::kNoValue) return false;
  const TensorValue* sizes = graph.FindConstant(node.inputs[3]);
  if (sizes == nullptr || sizes->dtype != DataType::kInt64 || NumElements(sizes->shape) != 4 ||
      sizes->bytes.size() != 4 * sizeof(int64_t)) {
    return false;
  }
  int64_t n_c[2];
  std::memcpy(n_c, sizes->bytes.data(), sizeof(n_c));
  return x.has_shape && x.dims.size() == 4 && x.dims[0].known() && x.dims[1].known() &&
         n_c[0] == x.dims[0].value && n_c[1] == x.dims[1].value;
}

// A global pooling over every axis after C of a value of rank `rank` (3 or 4):
// GlobalAveragePool or GlobalMaxPool, or a ReduceMean or ReduceMax whose axes attribute names
// exactly those axes (up to opset 17, where the axes are no input). Sets *max and the output's
// *keepdims.
bool IsGlobalPooling(const Node& node, size_t rank, bool* max, int64_t* keepdims) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return false;
  *keepdims = 1;
  if (node.op == "GlobalAveragePool" || node.op == "GlobalMaxPool") {
    *max = node.op == "GlobalMaxPool";
    return true;
  }
  if (node.op != "ReduceMean" && node.op != "ReduceMax") return false;
  *max = node.op == "ReduceMax";
  auto keep = node.attributes.GetInt("keepdims", 1);
  auto axes = node.attributes.GetInts("axes", {});
  if (!keep.ok() || !axes.ok()) return false;
  *keepdims = *keep != 0 ? 1 : 0;
  // Each axis after C once, negative ones counted from the end (no axes at all reduces N and C
  // too, or nothing).
  std::vector<bool> seen(rank, false);
  const int64_t r = static_cast<int64_t>(rank);
  for (int64_t axis : *axes) {
    const int64_t a = axis < 0 ? axis + r : axis;
    if (a < 2 || a >= r || seen[a]) return false;
    seen[a] = true;
  }
  return axes->size() == rank - 2;
}

int FuseChannelOpsIntoConvChains(Graph* graph, const KernelRegistry& registry) {
  const std::vector<int> producer = fusion::Producers(*graph);
  const std::vector<int> uses = graph->UseCounts();
  auto from_chain = [&](int value) {
    return value != Graph::kNoValue && producer[value] >= 0 &&
           WritesAnyLayout(*graph, graph->nodes[producer[value]]);
  };
  int fused = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& node = graph->nodes[i];
    if (!fusion::IsDefaultDomain(node) || node.outputs.empty() ||
        node.outputs[0] == Graph::kNoValue) {
      continue;
    }
    std::vector<float> factor, shift;
    // A global pooling reads a 4-D chain's value, or a 1-D convolution's (PointNet's maximum
    // over its points, a 1-D network's mean over time).
    const bool from_conv1d = !node.inputs.empty() && node.inputs[0] != Graph::kNoValue &&
                             producer[node.inputs[0]] >= 0 &&
                             IsConv1d(*graph, graph->nodes[producer[node.inputs[0]]]);
    bool max = false;
    int64_t keepdims = 1;
    if ((from_conv1d || (!node.inputs.empty() && from_chain(node.inputs[0]))) &&
        IsGlobalPooling(node, from_conv1d ? 3 : 4, &max, &keepdims) &&
        registry.Has(max ? kFusedGlobalMaxPoolOp : kFusedGlobalAveragePoolOp)) {
      node.op = max ? kFusedGlobalMaxPoolOp : kFusedGlobalAveragePoolOp;
      node.attributes = Attributes();
      node.attributes.Set("keepdims", keepdims);
    } else if (node.op == "Resize" && registry.Has(kFusedResizeOp) && from_chain(node.inputs[0]) &&
               ResizesImagesOnly(*graph, node)) {
      node.op = kFusedResizeOp;
    } else if (node.op == "Mul" && registry.Has(kFusedChannelScaleOp) && node.inputs.size() == 2 &&
               node.outputs.size() == 1) {
      // Either operand may be the chain's value; it becomes input 0.
      size_t k = 0;
      while (k < 2 && !(from_chain(node.inputs[k]) &&
                        IsChannelScaleOf(*graph, node.inputs[1 - k], node.inputs[k]))) {
        ++k;
      }
      if (k == 2) continue;
      if (k == 1) std::swap(node.inputs[0], node.inputs[1]);
      node.op = kFusedChannelScaleOp;
    } else if ((node.op == "Add" || node.op == "Sub") && registry.Has(kFusedAddOp) &&
               node.inputs.size() == 2 && node.outputs.size() == 1 && from_chain(node.inputs[0]) &&
               from_chain(node.inputs[1]) &&
               SameFloat4dShape(*graph, node.inputs[0], node.inputs[1])) {
      // A sum of two of the chain's values of one shape (no broadcasting).
      node.attributes = Attributes();
      if (node.op == "Sub") node.attributes.Set("subtract", int64_t{1});
      node.op = kFusedAddOp;
    } else if (node.op == "BatchNormalization" && registry.Has(kFusedChannelScaleOp) &&
               !node.inputs.empty() && from_chain(node.inputs[0]) &&
               InferenceBatchNorm(*graph, uses, node, &factor, &shift)) {
      const std::string base = graph->values[node.outputs[0]].name;
      const int64_t channels = static_cast<int64_t>(factor.size());
      node.inputs = {node.inputs[0],
                     AddFloatConstant(graph, base + "_bn_factor", {channels, 1, 1}, factor),
                     AddFloatConstant(graph, base + "_bn_shift", {channels, 1, 1}, shift)};
      node.outputs.resize(1);
      node.attributes = Attributes();
      node.op = kFusedChannelScaleOp;
    } else {
      continue;
    }
    node.domain = kFusedDomain;
    ++fused;
  }
  // A Relu that is the only reader of a channel scale's output becomes its activation; any
  // convolution activation after a sum becomes the sum's.
  const std::vector<int> reads = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  for (Node& node : graph->nodes) {
    if ((node.op != kFusedChannelScaleOp && node.op != kFusedAddOp) ||
        node.attributes.Has("activation")) {
      continue;
    }
    Activation act;
    if (node.op == kFusedAddOp) {
      if (!MatchActivation(*graph, reads, node.outputs[0], drop, &act)) continue;
      SetActivationAttributes(act, &node);
      node.outputs[0] = act.out;
      for (int taken : act.nodes) drop[taken] = true;
      ++fused;
      continue;
    }
    const int at = SoleConsumer(*graph, reads, node.outputs[0]);
    if (at < 0 || graph->nodes[at].op != "Relu" || !fusion::IsDefaultDomain(graph->nodes[at]) ||
        graph->nodes[at].outputs.size() != 1) {
      continue;
    }
    node.attributes.Set("activation", std::string("Relu"));
    node.outputs[0] = graph->nodes[at].outputs[0];
    drop[at] = true;
    ++fused;
  }
  DropNodes(graph, drop);
  return fused;
}

int FuseConcatIntoConvChains(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kFusedConcatOp)) return 0;
  const std::vector<int> producer = fusion::Producers(*graph);
  int fused = 0;
  for (Node& concat : graph->nodes) {
    if (concat.op != "Concat" || !fusion::IsDefaultDomain(concat) || concat.inputs.empty() ||
        concat.outputs.size() != 1 || concat.outputs[0] == Graph::kNoValue) {
      continue;
    }
    auto axis = concat.attributes.GetInt("axis", 0);
    if (!axis.ok() || (*axis != 1 && *axis != -3)) continue;
    // Every input a 4-D float32 value from a node, at least one from a node that can write the
    // blocked layout. The others (a ConvTranspose's or an upsampling's output) stay plain and
    // the kernel reorders them, so that the chain's values around the concatenation need not
    // go plain and back (U-Net's skip connections). A graph input keeps the Concat as it is.
    // An input of unknown shape or type is taken as the chain's: a Concat's inputs have one
    // rank and one type (ONNX shape inference loses shapes behind a Slice whose bounds are
    // computed from a Shape, as in YOLO's split blocks), and the kernel checks them when it is
    // prepared.
    bool any_chain = false;
    const bool all_4d = std::all_of(concat.inputs.begin(), concat.inputs.end(), [&](int in) {
      const int from = in == Graph::kNoValue ? -1 : producer[in];
      if (from < 0) return false;
      if (WritesAnyLayout(*graph, graph->nodes[from])) {
        any_chain = true;
        return true;
      }
      const Value& v = graph->values[in];
      return (!v.has_shape || v.dims.size() == 4) &&
             (v.dtype == DataType::kFloat32 || v.dtype == DataType::kUndefined);
    });
    if (!all_4d || !any_chain) continue;
    concat.op = kFusedConcatOp;
    concat.domain = kFusedDomain;
    ++fused;
  }
  return fused;
}

std::string InputLayoutAttribute(const Node& node, size_t k) {
  if (node.op == kFusedConcatOp || node.op == kFusedAddOp) return absl::StrCat("x", k, "_layout");
  if (k == 0) return "x_layout";
  return k == 3 ? "r_layout" : "";
}

int KeepBlockedLayoutBetweenConvs(Graph* graph) {
  // Whether each node's output stays blocked, decided from the last node back: a fused
  // concatenation counts as a blocked reader only when its own output stays blocked (one whose
  // output goes plain would reorder every blocked input, where each producer reordered once).
  const size_t count = graph->nodes.size();
  const std::vector<int> producer = fusion::Producers(*graph);
  std::vector<bool> keep(count, false);
  std::vector<bool> any_use(count, false);
  std::vector<bool> all_aware(count, true);
  // A 1-D convolution's value stays channels-last where a convolution wider than 1 writes or
  // reads it (oneDNN's channels-last kernels beat its blocked ones there), blocked between
  // pointwise ones (whose blocked kernels keep up, and whose chain ends then reorder without a
  // transpose: PointNet's 8x1024x1024 output 3.1 against 18.3 ms).
  std::vector<bool> wide(count, false);
  for (size_t i = count; i-- > 0;) {
    const Node& node = graph->nodes[i];
    // Every use of this node's output comes later, so it is decided here.
    keep[i] = (WritesAnyLayout(*graph, node) || IsConv1d(*graph, node)) && any_use[i] &&
              all_aware[i] && !IsGraphOutput(*graph, node.outputs[0]);
    // (A fused sum likewise: with its output plain, it reads its inputs plain.)
    const bool passes_on = (node.op != kFusedConcatOp && node.op != kFusedAddOp) || keep[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      if (in == Graph::kNoValue || producer[in] < 0) continue;
      const size_t from = static_cast<size_t>(producer[in]);
      any_use[from] = true;
      const bool aware = IsConv1d(*graph, graph->nodes[from])
                             ? (IsConv1d(*graph, node) && (k == 0 || k == 3)) ||
                                   (IsFusedGlobalPool(node) && k == 0)
                             : IsLayoutAware(*graph, node, k);
      if (!passes_on || !aware) all_aware[from] = false;
      if (IsConv1d(*graph, node) && (k == 0 || k == 3) && Conv1dWidth(*graph, node) > 1) {
        wide[from] = true;
      }
    }
    if (IsConv1d(*graph, node) && Conv1dWidth(*graph, node) > 1) wide[i] = true;
  }
  auto layout_of = [&](size_t from) {
    return std::string(IsConv1d(*graph, graph->nodes[from]) && wide[from] ? "nhwc" : "blocked");
  };
  // Each kept value's producer writes it blocked, and each of its readers reads it so.
  for (Node& node : graph->nodes) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      if (in == Graph::kNoValue || producer[in] < 0 || !keep[producer[in]]) continue;
      const std::string name = InputLayoutAttribute(node, k);
      if (!name.empty()) node.attributes.Set(name, layout_of(producer[in]));
    }
  }
  int kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!keep[i]) continue;
    graph->nodes[i].attributes.Set("y_layout", layout_of(i));
    ++kept;
  }
  return kept;
}

}  // namespace reprise::runtime::engine
