#include "runtime/engine/onnx_import.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "runtime/core/status_macros.h"
#include "runtime/engine/tensor_proto.h"

namespace reprise::runtime::engine {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

absl::StatusOr<onnx::ModelProto> Parse(absl::string_view bytes) {
  onnx::ModelProto model;
  if (bytes.empty()) return absl::InvalidArgumentError("onnx model: the file is empty");
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx model: ", bytes.size(),
                     " bytes are not a valid ModelProto (not ONNX, or truncated)"));
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

std::vector<std::string> FindUnsupported(const onnx::GraphProto& graph,
                                         const KernelRegistry& registry) {
  std::set<std::string> missing;
  for (const auto& node : graph.node()) {
    if (!IsDefaultDomain(node.domain())) {
      missing.insert(absl::StrCat(node.domain(), ":", node.op_type()));
    } else if (!IsEngineOp(node.op_type()) && !registry.Has(node.op_type())) {
      missing.insert(node.op_type());
    }
  }
  return {missing.begin(), missing.end()};
}

absl::Status CheckAndInfer(onnx::ModelProto* model) {
  // libonnx reports problems by throwing; nothing may escape this boundary.
  try {
    onnx::checker::check_model(*model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("onnx model fails the checker: ", e.what()));
  }
  try {
    onnx::shape_inference::InferShapes(*model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("onnx shape inference failed: ", e.what()));
  }
  return absl::OkStatus();
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
  }
  return absl::UnimplementedError(
      absl::StrCat("node \"", node.name(),
                   "\" (Constant): only tensor, float(s) and int(s) values are "
                   "supported (sparse and string constants are not)"));
}

absl::StatusOr<Graph> Convert(const onnx::ModelProto& model, int opset,
                              const std::string& base_dir) {
  const onnx::GraphProto& g = model.graph();
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

  for (const auto& init : g.initializer()) {
    ASSIGN_OR_RETURN(TensorValue tensor, TensorFromProto(init, base_dir));
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
    if (graph.values[id].dtype == DataType::kUndefined) {
      return absl::UnimplementedError(
          absl::StrCat("graph input \"", input.name(), "\" is not a tensor of a supported type"));
    }
    if (graph.values[id].dtype == DataType::kString) {
      return absl::UnimplementedError(
          absl::StrCat("graph input \"", input.name(), "\": string tensors are not supported"));
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
      const int id = graph.FindValue(in);
      if (id == Graph::kNoValue) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node \"", node.name(), "\" (", node.op_type(), ") reads unknown value \"", in, "\""));
      }
      n.inputs.push_back(id);
    }
    for (const auto& out : node.output()) {
      n.outputs.push_back(out.empty() ? Graph::kNoValue : get_or_add(out));
    }
    for (const auto& attr : node.attribute()) {
      ASSIGN_OR_RETURN(AttributeValue value, ConvertAttribute(node, attr, base_dir));
      n.attributes.Set(attr.name(), std::move(value));
    }
    graph.nodes.push_back(std::move(n));
  }
  for (const auto& out : g.output()) {
    const int id = graph.FindValue(out.name());
    if (id == Graph::kNoValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output \"", out.name(), "\" is never computed"));
    }
    graph.outputs.push_back(GraphOutput{out.name(), id});
  }
  RETURN_IF_ERROR(graph.Validate());
  return graph;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open model file \"", path, "\""));
  std::stringstream buffer;
  buffer << file.rdbuf();
  if (!file.good() && !file.eof()) {
    return absl::DataLossError(absl::StrCat("cannot read model file \"", path, "\""));
  }
  return buffer.str();
}

}  // namespace

bool IsEngineOp(absl::string_view op) {
  return op == "Constant" || op == "Identity" || op == "Dropout";
}

absl::StatusOr<std::vector<std::string>> UnsupportedOps(absl::string_view bytes,
                                                        const KernelRegistry& registry) {
  ASSIGN_OR_RETURN(onnx::ModelProto model, Parse(bytes));
  return FindUnsupported(model.graph(), registry);
}

absl::StatusOr<Graph> ImportOnnxBytes(absl::string_view bytes, const KernelRegistry& registry,
                                      const std::string& base_dir) {
  ASSIGN_OR_RETURN(onnx::ModelProto model, Parse(bytes));
  // Support first (the clearest message; the checker would refuse unknown ops too).
  ASSIGN_OR_RETURN(int opset, DefaultOpset(model));
  std::vector<std::string> missing = FindUnsupported(model.graph(), registry);
  if (!missing.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "onnx model uses ", missing.size(), " unsupported op(s): ", absl::StrJoin(missing, ", ")));
  }
  RETURN_IF_ERROR(InlineExternalData(&model, base_dir));
  RETURN_IF_ERROR(CheckAndInfer(&model));
  return Convert(model, opset, base_dir);
}

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const KernelRegistry& registry) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto graph = ImportOnnxBytes(bytes, registry, dir.empty() ? "/" : dir);
  if (!graph.ok()) {
    return absl::Status(graph.status().code(),
                        absl::StrCat("\"", path, "\": ", graph.status().message()));
  }
  return graph;
}

}  // namespace reprise::runtime::engine
