#include "runtime/engine/onnx_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>  // NOLINT: see docs/development.md (TSan)
#include <optional>
#include <set>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/onnx_wire.h"
#include "runtime/engine/tensor_proto.h"

namespace reprise::runtime::engine {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// Parses `parsed`: the model's bytes, or their stripped copy when payloads were lifted out of
// them. Messages name `size`, the size of the model the caller gave.
absl::StatusOr<onnx::ModelProto> Parse(absl::string_view parsed, uint64_t size) {
  onnx::ModelProto model;
  if (size == 0) return absl::InvalidArgumentError("onnx model: the file is empty");
  if (size > static_cast<uint64_t>(INT32_MAX) ||
      !model.ParseFromArray(parsed.data(), static_cast<int>(parsed.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "onnx model: ", size, " bytes are not a valid ModelProto (not ONNX, or truncated)"));
  }
  if (!model.has_graph()) {
    return absl::InvalidArgumentError("onnx model: the file holds no graph (not ONNX?)");
  }
  return model;
}

// Opset of the default domain; error when absent or outside [kMinOpset, kMaxOpset].
absl::StatusOr<int> DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& entry : model.opset_import()) {
    if (!IsDefaultDomain(entry.domain())) continue;
    const int64_t version = entry.version();
    if (version < kMinOpset || version > kMaxOpset) {
      return absl::UnimplementedError(absl::StrCat("onnx model: opset ", version,
                                                   " of the default domain is not supported "
                                                   "(supported: ",
                                                   kMinOpset, " to ", kMaxOpset, ")"));
    }
    return static_cast<int>(version);
  }
  return absl::UnimplementedError("onnx model: no opset of the default domain is imported");
}

// Ops whose form in opsets 1 to 6 is the one the kernels implement (same inputs, attributes and
// semantics; attributes that only legacy runtimes read, such as consumed_inputs, ignored). In a
// model of opset 1 to 6 any other op is refused: their legacy forms differ (the `broadcast` /
// `axis` broadcasting of the arithmetic and comparison ops, Reshape's and Pad's attributes,
// Concat's default axis, Cast's string `to`, ...) and are not adapted.
bool HasLegacyForm(absl::string_view op) {
  static const absl::flat_hash_set<absl::string_view>* const kOps =
      new absl::flat_hash_set<absl::string_view>{"Abs",
                                                 "ArgMax",
                                                 "ArgMin",
                                                 "AveragePool",
                                                 "Ceil",
                                                 "Clip",
                                                 "Constant",
                                                 "Conv",
                                                 "ConvTranspose",
                                                 "DepthToSpace",
                                                 "Dropout",
                                                 "Elu",
                                                 "Exp",
                                                 "Flatten",
                                                 "Floor",
                                                 "Gather",
                                                 "GlobalAveragePool",
                                                 "GlobalMaxPool",
                                                 "Hardmax",
                                                 "HardSigmoid",
                                                 "Identity",
                                                 "InstanceNormalization",
                                                 "LeakyRelu",
                                                 "Log",
                                                 "LogSoftmax",
                                                 "LpNormalization",
                                                 "LRN",
                                                 "MatMul",
                                                 "MaxPool",
                                                 "Neg",
                                                 "Not",
                                                 "Reciprocal",
                                                 "ReduceL1",
                                                 "ReduceL2",
                                                 "ReduceLogSum",
                                                 "ReduceLogSumExp",
                                                 "ReduceMax",
                                                 "ReduceMean",
                                                 "ReduceMin",
                                                 "ReduceProd",
                                                 "ReduceSum",
                                                 "ReduceSumSquare",
                                                 "Relu",
                                                 "Selu",
                                                 "Shape",
                                                 "Sigmoid",
                                                 "Size",
                                                 "Slice",
                                                 "Softmax",
                                                 "Softplus",
                                                 "Softsign",
                                                 "SpaceToDepth",
                                                 "Sqrt",
                                                 "Squeeze",
                                                 "Tanh",
                                                 "TopK",
                                                 "Transpose",
                                                 "Unsqueeze"};
  return kOps->contains(op);
}

// Calls `fn(node)` for every node of `graph` and of its subgraphs (graph attributes), nested
// at most `max_depth` deep (deeper ones are not visited; the conversion refuses them).
template <typename GraphProto, typename Fn>
void ForEachNode(GraphProto* graph, Fn&& fn, int max_depth = 16) {
  if (max_depth < 0) return;
  for (int i = 0; i < graph->node_size(); ++i) {
    auto* node = [&]() {
      if constexpr (std::is_const_v<GraphProto>) {
        return &graph->node(i);
      } else {
        return graph->mutable_node(i);
      }
    }();
    fn(*node);
    for (int a = 0; a < node->attribute_size(); ++a) {
      if constexpr (std::is_const_v<GraphProto>) {
        const auto& attr = node->attribute(a);
        if (attr.has_g()) ForEachNode(&attr.g(), fn, max_depth - 1);
        for (const auto& g : attr.graphs()) ForEachNode(&g, fn, max_depth - 1);
      } else {
        auto* attr = node->mutable_attribute(a);
        if (attr->has_g()) ForEachNode(attr->mutable_g(), fn, max_depth - 1);
        for (auto& g : *attr->mutable_graphs()) ForEachNode(&g, fn, max_depth - 1);
      }
    }
  }
}

std::vector<std::string> FindUnsupported(const onnx::GraphProto& graph, int opset,
                                         const KernelRegistry& registry) {
  std::set<std::string> missing;
  ForEachNode(&graph, [&](const onnx::NodeProto& node) {
    if (!IsDefaultDomain(node.domain())) {
      missing.insert(absl::StrCat(node.domain(), ":", node.op_type()));
    } else if (!IsEngineOp(node.op_type()) && !registry.Has(node.op_type())) {
      missing.insert(node.op_type());
    } else if (opset < kLegacyOpset && !HasLegacyForm(node.op_type())) {
      missing.insert(absl::StrCat(node.op_type(), " (its opset ", opset, " form)"));
    }
  });
  return {missing.begin(), missing.end()};
}

// Attributes that crash libonnx's shape inference itself (it divides by a product that
// overflows to 0, a SIGFPE no catch can stop) are refused before it runs.
// Convolution and pooling windows: libonnx's convPoolShapeInference divides by the strides,
// multiplies the dilations with the kernel and indexes every window attribute by the spatial
// axis without checking its length, so each value must be in range ([1, 2^31) for strides,
// dilations and kernel_shape, [0, 2^31) for pads) and every length must match the spatial rank
// (known from the input's or the weight's rank, where the graph declares it) before it runs.
bool IsWindowOp(const std::string& op) {
  static const absl::flat_hash_set<std::string>* const kWindowOps =
      new absl::flat_hash_set<std::string>{"Conv",    "ConvTranspose", "ConvInteger", "QLinearConv",
                                           "MaxPool", "AveragePool",   "LpPool",      "MaxUnpool"};
  return kWindowOps->contains(op);
}

absl::Status CheckWindowAttributes(const onnx::NodeProto& node,
                                   const absl::flat_hash_map<std::string, int>& ranks) {
  if (!IsWindowOp(node.op_type())) return absl::OkStatus();
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("node \"", node.name(), "\" (", node.op_type(), "): ", what));
  };
  // The spatial rank every window attribute must have, where something tells it.
  std::vector<int> spatial;
  const int weight = node.op_type() == "QLinearConv" ? 3 : 1;
  for (int i : {0, weight}) {
    if (i >= node.input_size() || (i == weight && !absl::StrContains(node.op_type(), "Conv"))) {
      continue;
    }
    if (auto it = ranks.find(node.input(i)); it != ranks.end()) {
      if (it->second < 2)
        return error(
            absl::StrCat("input \"", node.input(i), "\" has rank ", it->second, ", below 2"));
      spatial.push_back(it->second - 2);
    }
  }
  constexpr int64_t kMax = int64_t{1} << 31;
  for (const auto& attr : node.attribute()) {
    const bool positive =
        attr.name() == "strides" || attr.name() == "dilations" || attr.name() == "kernel_shape";
    const bool pads = attr.name() == "pads";
    if (!positive && !pads && attr.name() != "output_padding") continue;
    for (int64_t v : attr.ints()) {
      if (v < (positive ? 1 : 0) || v >= kMax) {
        return error(absl::StrCat(attr.name(), " ", v, " is out of range [", positive ? 1 : 0, ", ",
                                  kMax, ")"));
      }
    }
    const int n = pads ? attr.ints_size() / 2 : attr.ints_size();
    if (pads && attr.ints_size() % 2 != 0) return error("pads has an odd length");
    spatial.push_back(n);
  }
  for (int n : spatial) {
    if (n != spatial.front()) {
      return error("the window attributes and the inputs disagree on the spatial rank");
    }
  }
  return absl::OkStatus();
}

// The same spatial-rank agreement, checked inside libonnx's inference where the ranks of values
// computed in the graph are known (a Conv whose weights have fewer spatial axes than the input
// it is given made convPoolShapeInference read past the kernel shape: found by
// fuzz_onnx_model). Window ops' schemas are served as copies whose inference function checks
// first, then runs the original; every other schema is libonnx's own.
// libonnx records a node's inference error and goes on, so the check also leaves its first
// complaint here, for CheckAndInfer to return.
thread_local std::string window_rank_error;

class GuardedSchemas final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(key, max_version, domain);
    if (schema == nullptr || !IsDefaultDomain(domain) || !IsWindowOp(key)) return schema;
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<onnx::OpSchema>& guarded = guarded_[schema];
    if (guarded == nullptr) {
      guarded = std::make_unique<onnx::OpSchema>(*schema);
      guarded->TypeAndShapeInferenceFunction([original = schema->GetTypeAndShapeInferenceFunction(),
                                              key](onnx::InferenceContext& ctx) {
        CheckSpatialRanks(ctx, key);
        if (original) original(ctx);
      });
    }
    return guarded.get();
  }

 private:
  static void CheckSpatialRanks(onnx::InferenceContext& ctx, const std::string& op) {
    auto rank = [&ctx](size_t i) {
      if (i >= ctx.getNumInputs()) return -1;
      const onnx::TypeProto* type = ctx.getInputType(i);
      if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
        return -1;
      }
      return type->tensor_type().shape().dim_size();
    };
    std::vector<int> spatial;
    const size_t weight = op == "QLinearConv" ? 3 : 1;
    for (size_t i : {size_t{0}, weight}) {
      if (i == weight && !absl::StrContains(op, "Conv")) continue;
      const int r = rank(i);
      if (r < 0) continue;
      if (r < 2) fail_shape_inference(op, ": input ", i, " has rank ", r, ", below 2");
      spatial.push_back(r - 2);
    }
    for (const char* name : {"kernel_shape", "strides", "dilations", "pads", "output_padding"}) {
      const onnx::AttributeProto* attr = ctx.getAttribute(name);
      if (attr == nullptr) continue;
      const bool pads = std::string(name) == "pads";
      if (pads && attr->ints_size() % 2 != 0) fail_shape_inference(op, ": pads has an odd length");
      spatial.push_back(pads ? attr->ints_size() / 2 : attr->ints_size());
    }
    for (int n : spatial) {
      if (n != spatial.front()) {
        if (window_rank_error.empty()) {
          window_rank_error = absl::StrCat(
              op, ": the window attributes and the inputs disagree on the spatial rank (",
              absl::StrJoin(spatial, " vs "), ")");
        }
        fail_shape_inference(op, ": the window attributes and the inputs disagree on the ",
                             "spatial rank");
      }
    }
  }

  mutable std::mutex mu_;
  mutable absl::flat_hash_map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> guarded_
      ABSL_GUARDED_BY(mu_);
};

// `outer_ranks`: what the enclosing graphs declare (a subgraph reads their values too).
absl::Status CheckBeforeInference(const onnx::GraphProto& graph,
                                  const absl::flat_hash_map<std::string, int>& outer_ranks = {},
                                  int depth = 0) {
  if (depth > 16) {
    return absl::InvalidArgumentError("subgraphs nest more than 16 deep");
  }
  absl::flat_hash_map<std::string, int> ranks = outer_ranks;  // what the graph declares
  for (const auto& init : graph.initializer()) {
    ranks[init.name()] = init.dims_size();
    // libonnx's shape inference reads raw_data (e.g. a Reshape's shape) into a vector of
    // whole elements and copies the whole length: a length that is not whole elements writes
    // past that vector. (The exact size is checked when the tensor is converted; lifted
    // payloads stand here as 16-byte placeholders, onnx_wire.cc.)
    absl::StatusOr<DataType> dtype = DataTypeFromCode(init.data_type());
    if (init.raw_data().empty() || !dtype.ok()) continue;
    if (*dtype == DataType::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer \"", init.name(),
                       "\" is a string tensor with raw_data; strings go in "
                       "string_data"));
    }
    if (init.raw_data().size() % DataTypeSize(*dtype) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initializer \"", init.name(), "\" has ", init.raw_data().size(),
          " bytes of raw_data, not a whole number of ", DataTypeSize(*dtype), "-byte elements"));
    }
  }
  for (const auto& list : {graph.input(), graph.value_info()}) {
    for (const auto& v : list) {
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
        ranks.emplace(v.name(), v.type().tensor_type().shape().dim_size());
      }
    }
  }
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) RETURN_IF_ERROR(CheckBeforeInference(attr.g(), ranks, depth + 1));
      for (const auto& g : attr.graphs()) {
        RETURN_IF_ERROR(CheckBeforeInference(g, ranks, depth + 1));
      }
    }
    if (!IsDefaultDomain(node.domain())) continue;
    RETURN_IF_ERROR(CheckWindowAttributes(node, ranks));
    if (node.op_type() != "DepthToSpace" && node.op_type() != "SpaceToDepth") continue;
    for (const auto& attr : node.attribute()) {
      int64_t square = 0;
      if (attr.name() == "blocksize" && !CheckedMul(attr.i(), attr.i(), &square)) {
        return absl::InvalidArgumentError(absl::StrCat("node \"", node.name(), "\" (",
                                                       node.op_type(), "): blocksize ", attr.i(),
                                                       " is negative or too large"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAndInfer(onnx::ModelProto* model) {
  RETURN_IF_ERROR(CheckBeforeInference(model->graph()));
  // libonnx reports problems by throwing; nothing may escape this boundary.
  try {
    onnx::checker::check_model(*model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("onnx model fails the checker: ", e.what()));
  }
  // libonnx 1.12's shape inference of STFT dereferences a null pointer when the signal's rank
  // is 0 or 1 (a SIGSEGV no catch can stop, found by fuzz_onnx_model), and the rank of a value
  // computed in the graph is only known during inference. Such nodes go into a domain of our own
  // for the inference, which libonnx then skips; the kernel checks the signal itself.
  constexpr absl::string_view kNoInference = "reprise.no_shape_inference";
  std::vector<onnx::NodeProto*> hidden;
  ForEachNode(model->mutable_graph(), [&](onnx::NodeProto& node) {
    if (IsDefaultDomain(node.domain()) && node.op_type() == "STFT") hidden.push_back(&node);
  });
  for (onnx::NodeProto* node : hidden) node->set_domain(std::string(kNoInference));
  if (!hidden.empty()) {
    auto* opset = model->add_opset_import();
    opset->set_domain(std::string(kNoInference));
    opset->set_version(1);
  }
  absl::Status inferred = absl::OkStatus();
  try {
    static const GuardedSchemas* const kSchemas = new GuardedSchemas();
    window_rank_error.clear();
    onnx::shape_inference::InferShapes(*model, kSchemas);
    if (!window_rank_error.empty()) {
      inferred = absl::InvalidArgumentError(window_rank_error);
      window_rank_error.clear();
    }
  } catch (const std::exception& e) {
    inferred = absl::InvalidArgumentError(absl::StrCat("onnx shape inference failed: ", e.what()));
  }
  for (onnx::NodeProto* node : hidden) node->set_domain("");
  if (!hidden.empty()) model->mutable_opset_import()->RemoveLast();
  return inferred;
}

void FillValueInfo(const onnx::ValueInfoProto& info, Value* value) {
  if (!info.has_type() || !info.type().has_tensor_type()) return;
  const auto& tensor_type = info.type().tensor_type();
  auto dtype = DataTypeFromCode(tensor_type.elem_type());
  if (dtype.ok()) value->dtype = *dtype;
  if (!tensor_type.has_shape()) return;
  value->has_shape = true;
  value->dims.clear();
  for (const auto& d : tensor_type.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) {
      dim.value = d.dim_value();
    } else if (d.has_dim_param()) {
      dim.symbol = d.dim_param();
    }
    value->dims.push_back(std::move(dim));
  }
}

absl::StatusOr<AttributeValue> ConvertAttribute(const onnx::NodeProto& node,
                                                const onnx::AttributeProto& attr,
                                                const std::string& base_dir) {
  using A = onnx::AttributeProto;
  switch (attr.type()) {
    case A::FLOAT:
      return AttributeValue(attr.f());
    case A::INT:
      return AttributeValue(static_cast<int64_t>(attr.i()));
    case A::STRING:
      return AttributeValue(attr.s());
    case A::FLOATS:
      return AttributeValue(std::vector<float>(attr.floats().begin(), attr.floats().end()));
    case A::INTS:
      return AttributeValue(std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
    case A::STRINGS:
      return AttributeValue(std::vector<std::string>(attr.strings().begin(), attr.strings().end()));
    case A::TENSOR: {
      ASSIGN_OR_RETURN(TensorValue tensor, TensorFromProto(attr.t(), base_dir));
      return AttributeValue(std::move(tensor));
    }
    default:
      return absl::UnimplementedError(absl::StrCat(
          "node \"", node.name(), "\" (", node.op_type(), "): attribute \"", attr.name(),
          "\" of type ", A::AttributeType_Name(attr.type()), " is not supported"));
  }
}

// The value of a Constant node, from whichever attribute it uses.
absl::StatusOr<TensorValue> ConstantValue(const onnx::NodeProto& node,
                                          const std::string& base_dir) {
  for (const auto& attr : node.attribute()) {
    TensorValue t;
    if (attr.name() == "value") return TensorFromProto(attr.t(), base_dir);
    if (attr.name() == "value_float") {
      t.dtype = DataType::kFloat32;
      const float v = attr.f();
      t.bytes.resize(sizeof v);
      std::memcpy(t.bytes.data(), &v, sizeof v);
      return t;
    }
    if (attr.name() == "value_int") {
      t.dtype = DataType::kInt64;
      const int64_t v = attr.i();
      t.bytes.resize(sizeof v);
      std::memcpy(t.bytes.data(), &v, sizeof v);
      return t;
    }
    if (attr.name() == "value_floats") {
      t.dtype = DataType::kFloat32;
      t.shape = {attr.floats_size()};
      t.bytes.resize(sizeof(float) * attr.floats_size());
      if (!t.bytes.empty()) std::memcpy(t.bytes.data(), attr.floats().data(), t.bytes.size());
      return t;
    }
    if (attr.name() == "value_ints") {
      t.dtype = DataType::kInt64;
      t.shape = {attr.ints_size()};
      t.bytes.resize(sizeof(int64_t) * attr.ints_size());
      if (!t.bytes.empty()) std::memcpy(t.bytes.data(), attr.ints().data(), t.bytes.size());
      return t;
    }
    if (attr.name() == "value_string") {
      const absl::string_view one[] = {attr.s()};
      return MakeStringTensor({}, one);
    }
    if (attr.name() == "value_strings") {
      std::vector<absl::string_view> elements(attr.strings().begin(), attr.strings().end());
      return MakeStringTensor({attr.strings_size()}, elements);
    }
  }
  return absl::UnimplementedError(
      absl::StrCat("node \"", node.name(),
                   "\" (Constant): only tensor, float(s), int(s) and string(s) values are "
                   "supported (sparse constants are not)"));
}

// Gives the bytes of a lifted raw_data payload.
using PayloadFn = std::function<LiftedRawData(const LiftedRange&)>;

// The graphs enclosing a subgraph being converted, innermost first: a subgraph may read any
// value of them by name.
struct Scope {
  const Graph* graph = nullptr;
  const Scope* outer = nullptr;
  // The value named `name` in this graph or an enclosing one, or nullptr.
  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->outer) {
      const int id = s->graph->FindValue(name);
      if (id != Graph::kNoValue) return &s->graph->values[id];
    }
    return nullptr;
  }
};

// Limits on what a model file can nest (each level is a recursion and a plan of its own).
constexpr int kMaxSubgraphDepth = 8;

// The formal inputs of a node's graph attribute: Loop's body takes the iteration number, the
// condition and the loop-carried values; If's branches take none.
absl::StatusOr<size_t> FormalInputs(const onnx::NodeProto& node, const onnx::AttributeProto& attr) {
  const bool known =
      (node.op_type() == "If" && (attr.name() == "then_branch" || attr.name() == "else_branch")) ||
      (node.op_type() == "Loop" && attr.name() == "body");
  if (!known || !IsDefaultDomain(node.domain())) {
    return absl::UnimplementedError(absl::StrCat("node \"", node.name(), "\" (", node.op_type(),
                                                 "): graph attribute \"", attr.name(),
                                                 "\" is not supported"));
  }
  if (node.op_type() == "If") return 0;
  return static_cast<size_t>(attr.g().input_size());
}

// `lifted`, when not null, holds the payloads of initializers whose raw_data the parse skipped;
// `payload` gives their bytes. `outer` is null for the model's graph; for a subgraph it lists
// the enclosing graphs, and each outer value the subgraph reads becomes one more input of it
// (after its own), named in `*free_values` in that order.
absl::StatusOr<Graph> ConvertGraph(const onnx::GraphProto& g, int opset,
                                   const std::string& base_dir, const LiftedModel* lifted,
                                   const PayloadFn& payload, const Scope* outer, int depth,
                                   std::vector<std::string>* free_values) {
  if (depth > kMaxSubgraphDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("subgraphs nest more than ", kMaxSubgraphDepth, " deep"));
  }
  Graph graph;
  graph.opset = opset;
  absl::flat_hash_map<std::string, const onnx::ValueInfoProto*> infos;
  for (const auto& vi : g.value_info()) infos[vi.name()] = &vi;
  for (const auto& vi : g.output()) infos[vi.name()] = &vi;
  for (const auto& vi : g.input()) infos[vi.name()] = &vi;

  auto get_or_add = [&](const std::string& name) {
    int id = graph.FindValue(name);
    if (id != Graph::kNoValue) return id;
    Value value;
    value.name = name;
    auto it = infos.find(name);
    if (it != infos.end()) FillValueInfo(*it->second, &value);
    return graph.AddValue(std::move(value));
  };
  // The value `name` read by a node or an output: one of this graph's, or an outer value that
  // becomes an input of this subgraph; kNoValue when neither.
  auto resolve = [&](const std::string& name) {
    int id = graph.FindValue(name);
    if (id != Graph::kNoValue || outer == nullptr) return id;
    const Value* value = outer->Find(name);
    if (value == nullptr) return Graph::kNoValue;
    id = graph.AddValue(*value);
    graph.inputs.push_back(id);
    free_values->push_back(name);
    return id;
  };

  if (lifted != nullptr && lifted->raw_data.size() != static_cast<size_t>(g.initializer_size())) {
    return absl::InternalError(absl::StrCat("onnx model: ", lifted->raw_data.size(),
                                            " lifted initializers, the graph has ",
                                            g.initializer_size()));
  }
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto& init = g.initializer(i);
    std::optional<LiftedRawData> raw;
    if (lifted != nullptr && lifted->raw_data[i].has_value()) raw = payload(*lifted->raw_data[i]);
    ASSIGN_OR_RETURN(TensorValue tensor, TensorFromProto(init, base_dir, raw ? &*raw : nullptr));
    const int id = get_or_add(init.name());
    Value& value = graph.values[id];
    value.dtype = tensor.dtype;
    value.has_shape = true;
    value.dims.clear();
    for (int64_t d : tensor.shape) value.dims.push_back(Dim{d, ""});
    graph.constants[id] = std::make_unique<TensorValue>(std::move(tensor));
  }
  for (const auto& input : g.input()) {
    const int id = get_or_add(input.name());
    // An input that also has an initializer is a constant here (its default is used).
    if (graph.IsConstant(id)) continue;
    // A subgraph's input may leave its type to the node that runs it (the planner takes it
    // from there).
    if (graph.values[id].dtype == DataType::kUndefined && outer == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("graph input \"", input.name(), "\" is not a tensor of a supported type"));
    }
    graph.inputs.push_back(id);
  }
  for (const auto& node : g.node()) {
    if (node.op_type() == "Constant" && IsDefaultDomain(node.domain())) {
      ASSIGN_OR_RETURN(TensorValue tensor, ConstantValue(node, base_dir));
      const int id = get_or_add(node.output(0));
      graph.values[id].dtype = tensor.dtype;
      graph.constants[id] = std::make_unique<TensorValue>(std::move(tensor));
      continue;
    }
    Node n;
    n.op = node.op_type();
    // Unnamed nodes are named after their first output, for messages.
    n.name = !node.name().empty()     ? node.name()
             : node.output_size() > 0 ? absl::StrCat("<", node.output(0), ">")
                                      : absl::StrCat("<#", g.node_size(), ">");
    n.domain = node.domain();
    for (const auto& in : node.input()) {
      if (in.empty()) {
        n.inputs.push_back(Graph::kNoValue);
        continue;
      }
      const int id = resolve(in);
      if (id == Graph::kNoValue) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node \"", node.name(), "\" (", node.op_type(), ") reads unknown value \"", in, "\""));
      }
      n.inputs.push_back(id);
    }
    for (const auto& attr : node.attribute()) {
      if (attr.type() == onnx::AttributeProto::GRAPH) {
        ASSIGN_OR_RETURN(size_t formal, FormalInputs(node, attr));
        Scope scope{&graph, outer};
        std::vector<std::string> reads;
        auto converted =
            ConvertGraph(attr.g(), opset, base_dir, nullptr, payload, &scope, depth + 1, &reads);
        if (!converted.ok()) {
          return absl::Status(converted.status().code(),
                              absl::StrCat("node \"", n.name, "\" (", n.op, "), ", attr.name(),
                                           ": ", converted.status().message()));
        }
        Subgraph subgraph{attr.name(), std::make_shared<Graph>(*std::move(converted)), formal, {}};
        if (subgraph.graph->inputs.size() != formal + reads.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("node \"", n.name, "\" (", n.op, "), ", attr.name(), ": ",
                           subgraph.graph->inputs.size() - reads.size(), " inputs, expected ",
                           formal, " (an input with an initializer cannot be a loop input)"));
        }
        for (const std::string& name : reads) {
          const int id = resolve(name);  // found: the subgraph found it in scope
          auto at = std::find(n.inputs.begin() + node.input_size(), n.inputs.end(), id);
          if (at == n.inputs.end()) {
            n.inputs.push_back(id);
            at = n.inputs.end() - 1;
          }
          subgraph.outer_inputs.push_back(static_cast<size_t>(at - n.inputs.begin()));
        }
        n.subgraphs.push_back(std::move(subgraph));
        continue;
      }
      ASSIGN_OR_RETURN(AttributeValue value, ConvertAttribute(node, attr, base_dir));
      n.attributes.Set(attr.name(), std::move(value));
    }
    for (const auto& out : node.output()) {
      n.outputs.push_back(out.empty() ? Graph::kNoValue : get_or_add(out));
    }
    graph.nodes.push_back(std::move(n));
  }
  for (const auto& out : g.output()) {
    const int id = resolve(out.name());
    if (id == Graph::kNoValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output \"", out.name(), "\" is never computed"));
    }
    graph.outputs.push_back(GraphOutput{out.name(), id});
  }
  RETURN_IF_ERROR(graph.Validate());
  return graph;
}

absl::StatusOr<Graph> Convert(const onnx::ModelProto& model, int opset, const std::string& base_dir,
                              const LiftedModel* lifted, const PayloadFn& payload) {
  return ConvertGraph(model.graph(), opset, base_dir, lifted, payload, nullptr, 0, nullptr);
}

// A model file, open for reading; closed on destruction.
class ModelFile {
 public:
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;
  ~ModelFile() { ::close(fd_); }

  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open model file \"", path, "\""));
    struct stat info = {};
    const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
    return std::unique_ptr<ModelFile>(
        new ModelFile(fd, path, regular ? static_cast<uint64_t>(info.st_size) : 0, regular));
  }

  int fd() const { return fd_; }
  /// The size when opened; 0 unless a regular file.
  uint64_t size() const { return size_; }
  bool regular() const { return regular_; }

  /// The whole file (to its end, whatever its size now) in one buffer: one read for a regular
  /// file, no stream buffers, no zero-filling.
  struct Bytes {
    std::unique_ptr<char[]> data;
    size_t size = 0;
    absl::string_view view() const { return absl::string_view(data.get(), size); }
  };
  absl::StatusOr<Bytes> ReadAll() const {
    size_t capacity = size_ > 0 ? static_cast<size_t>(size_) + 1 : size_t{1} << 16;  // + 1: EOF
    auto buffer = std::make_unique_for_overwrite<char[]>(capacity);
    size_t size = 0;
    while (true) {
      if (size == capacity) {  // the file grew, or its size was unknown
        if (capacity > static_cast<size_t>(INT32_MAX)) {
          // Parse refuses more than protobuf's 2 GiB anyway; a device could be read forever.
          return absl::InvalidArgumentError(
              absl::StrCat("model file \"", path_, "\" is larger than ", INT32_MAX,
                           " bytes (protobuf's limit) and was not scanned for large initializers"));
        }
        auto bigger = std::make_unique_for_overwrite<char[]>(capacity * 2);
        std::memcpy(bigger.get(), buffer.get(), size);
        buffer = std::move(bigger);
        capacity *= 2;
      }
      // read, not pread: pipes cannot seek (the scan used pread, so the offset is still 0).
      const ssize_t n = ::read(fd_, buffer.get() + size, capacity - size);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        return absl::DataLossError(
            absl::StrCat("cannot read model file \"", path_, "\": ", std::strerror(errno)));
      }
      size += static_cast<size_t>(n);
    }
    return Bytes{std::move(buffer), size};
  }

  /// Reads bytes [offset, offset + size) into `out`; an error when the file no longer has them.
  absl::Status ReadAt(uint64_t offset, uint64_t size, uint8_t* out) const {
    uint64_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_, out + done, static_cast<size_t>(size - done),
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::DataLossError(absl::StrCat("model file \"", path_,
                                                "\" changed while loading (", size,
                                                " bytes at offset ", offset, " cannot be read)"));
      }
      done += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

 private:
  ModelFile(int fd, std::string path, uint64_t size, bool regular)
      : fd_(fd), path_(std::move(path)), size_(size), regular_(regular) {}

  int fd_;
  std::string path_;
  uint64_t size_;
  bool regular_;
};

// Models smaller than this are parsed whole: lifting their few large payloads (if any) saves
// less than the scan costs.
constexpr uint64_t kMinLiftingModelBytes = 1 << 20;

// The import after the parse. `lifted`, when not null, lists the initializer payloads that the
// parse skipped and `payload` gives their bytes.
absl::StatusOr<Graph> ImportParsed(onnx::ModelProto model, const KernelRegistry& registry,
                                   const std::string& base_dir, const LiftedModel* lifted,
                                   const PayloadFn& payload) {
  // Support first (the clearest message; the checker would refuse unknown ops too).
  ASSIGN_OR_RETURN(int opset, DefaultOpset(model));
  std::vector<std::string> missing = FindUnsupported(model.graph(), opset, registry);
  if (!missing.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "onnx model uses ", missing.size(), " unsupported op(s): ", absl::StrJoin(missing, ", ")));
  }
  RETURN_IF_ERROR(InlineExternalData(&model, base_dir));
  RETURN_IF_ERROR(CheckAndInfer(&model));
  return Convert(model, opset, base_dir, lifted, payload);
}

// Lifts the large payloads of `bytes` (when the model is large enough to gain from it).
std::optional<LiftedModel> LiftBytes(absl::string_view bytes) {
  if (bytes.size() < kMinLiftingModelBytes) return std::nullopt;
  return LiftInitializerData(bytes);
}

// ImportOnnxBytes; `lift` false skips the scan for large payloads (known to find none).
absl::StatusOr<Graph> ImportBytes(absl::string_view bytes, const KernelRegistry& registry,
                                  const std::string& base_dir, bool lift) {
  // Large initializer payloads skip the proto: copied once, from `bytes` into the graph.
  const std::optional<LiftedModel> lifted = lift ? LiftBytes(bytes) : std::nullopt;
  ASSIGN_OR_RETURN(onnx::ModelProto model,
                   Parse(lifted ? absl::string_view(lifted->stripped) : bytes, bytes.size()));
  auto payload = [bytes](const LiftedRange& range) {
    return LiftedRawData{range.size, bytes.data() + range.offset, {}};
  };
  return ImportParsed(std::move(model), registry, base_dir, lifted ? &*lifted : nullptr, payload);
}

}  // namespace

bool IsEngineOp(absl::string_view op) {
  return op == "Constant" || op == "Identity" || op == "Dropout" || IsControlFlowOp(op);
}

absl::StatusOr<std::vector<std::string>> UnsupportedOps(absl::string_view bytes,
                                                        const KernelRegistry& registry) {
  const std::optional<LiftedModel> lifted = LiftBytes(bytes);
  ASSIGN_OR_RETURN(onnx::ModelProto model,
                   Parse(lifted ? absl::string_view(lifted->stripped) : bytes, bytes.size()));
  absl::StatusOr<int> opset = DefaultOpset(model);
  return FindUnsupported(model.graph(), opset.ok() ? *opset : kMaxOpset, registry);
}

absl::StatusOr<Graph> ImportOnnxBytes(absl::string_view bytes, const KernelRegistry& registry,
                                      const std::string& base_dir) {
  return ImportBytes(bytes, registry, base_dir, /*lift=*/true);
}

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const KernelRegistry& registry) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> file, ModelFile::Open(path));
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  // A large regular file is scanned without its large payloads, which are read later straight
  // into their tensors (one copy, no buffer of the whole file); anything else is read whole.
  std::optional<LiftedModel> lifted;
  const bool lift = file->regular() && file->size() >= kMinLiftingModelBytes;
  if (lift) lifted = LiftInitializerDataFromFile(file->fd(), file->size());
  absl::StatusOr<Graph> graph;
  if (lifted.has_value()) {
    const ModelFile& source = *file;
    auto payload = [&source](const LiftedRange& range) {
      return LiftedRawData{range.size, nullptr, [&source, range](uint8_t* out) {
                             return source.ReadAt(range.offset, range.size, out);
                           }};
    };
    auto model = Parse(lifted->stripped, file->size());
    graph = model.ok() ? ImportParsed(*std::move(model), registry, dir, &*lifted, payload)
                       : absl::StatusOr<Graph>(model.status());
  } else {
    ASSIGN_OR_RETURN(ModelFile::Bytes bytes, file->ReadAll());
    // A regular file was scanned already; a pipe or device was not.
    graph = ImportBytes(bytes.view(), registry, dir, /*lift=*/!lift);
  }
  if (!graph.ok()) {
    return absl::Status(graph.status().code(),
                        absl::StrCat("\"", path, "\": ", graph.status().message()));
  }
  return graph;
}

}  // namespace reprise::runtime::engine
