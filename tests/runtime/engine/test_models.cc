#include "tests/runtime/engine/test_models.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine::testing {

ModelBuilder::ModelBuilder(int opset) {
  model_.set_ir_version(8);
  auto* entry = model_.add_opset_import();
  entry->set_domain("");
  entry->set_version(opset);
  model_.mutable_graph()->set_name("test");
}

ModelBuilder& ModelBuilder::Input(const std::string& name, int elem_type,
                                  const std::vector<int64_t>& dims, const std::string& symbol) {
  auto* input = model_.mutable_graph()->add_input();
  input->set_name(name);
  auto* type = input->mutable_type()->mutable_tensor_type();
  type->set_elem_type(elem_type);
  auto* shape = type->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) {
      dim->set_dim_value(d);
    } else if (!symbol.empty()) {
      dim->set_dim_param(symbol);
    }
  }
  return *this;
}

ModelBuilder& ModelBuilder::Output(const std::string& name, const std::vector<int64_t>& dims,
                                   int elem_type) {
  auto* output = model_.mutable_graph()->add_output();
  output->set_name(name);
  auto* type = output->mutable_type()->mutable_tensor_type();
  type->set_elem_type(elem_type);
  auto* shape = type->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
  return *this;
}

ModelBuilder& ModelBuilder::FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<float>& values) {
  auto* init = model_.mutable_graph()->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) init->add_dims(d);
  for (float v : values) init->add_float_data(v);
  return *this;
}

ModelBuilder& ModelBuilder::Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<int64_t>& values) {
  auto* init = model_.mutable_graph()->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) init->add_dims(d);
  for (int64_t v : values) init->add_int64_data(v);
  return *this;
}

onnx::NodeProto& ModelBuilder::Node(const std::string& op, const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs,
                                    const std::string& name) {
  auto* node = model_.mutable_graph()->add_node();
  node->set_op_type(op);
  node->set_name(name.empty() ? absl::StrCat(op, "_", model_.graph().node_size()) : name);
  for (const auto& in : inputs) node->add_input(in);
  for (const auto& out : outputs) node->add_output(out);
  return *node;
}

std::string ModelBuilder::Bytes() const { return model_.SerializeAsString(); }

void SetIntAttr(onnx::NodeProto* node, const std::string& name, int64_t value) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}

void SetIntsAttr(onnx::NodeProto* node, const std::string& name,
                 const std::vector<int64_t>& values) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) attr->add_ints(v);
}

void AddSameConv(ModelBuilder& b, const std::string& name, const std::string& in,
                 const std::string& out, int64_t c_in, int64_t c_out, int64_t k, uint32_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(c_in * k * k));
  b.FloatInit(name + "_w", {c_out, c_in, k, k},
              RandomFloats(static_cast<size_t>(c_out * c_in * k * k), seed, -bound, bound));
  b.FloatInit(name + "_b", {c_out}, RandomFloats(static_cast<size_t>(c_out), seed + 1));
  auto& node = b.Node("Conv", {in, name + "_w", name + "_b"}, {out}, name);
  const int64_t p = k / 2;
  SetIntsAttr(&node, "pads", {p, p, p, p});
}

TensorValue FloatTensor(const Shape& shape, const std::vector<float>& values) {
  TensorValue t{DataType::kFloat32, shape, {}};
  t.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> Floats(const TensorValue& tensor) {
  std::vector<float> v(tensor.bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), tensor.bytes.data(), tensor.bytes.size());
  return v;
}

absl::StatusOr<std::vector<NamedTensor>> RunPlan(const Model& model,
                                                 const std::vector<NamedTensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, model.MatchInputs(inputs));
  bool value_keyed = false;
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model.PlanForInputs(ordered, &value_keyed));
  return plan->Run(ordered);
}

std::vector<int64_t> Int64s(const TensorValue& tensor) {
  std::vector<int64_t> v(tensor.bytes.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), tensor.bytes.data(), tensor.bytes.size());
  return v;
}

namespace {

// A fake kernel whose outputs are described at Prepare and computed by a function.
class FakeKernel final : public PreparedKernel {
 public:
  using Fn = absl::Status (*)(const FakeKernel&, const KernelArgs&);
  FakeKernel(std::string op, std::vector<TensorDesc> outputs, Fn fn)
      : op_(std::move(op)), outputs_(std::move(outputs)), fn_(fn) {}
  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs& args) const override { return fn_(*this, args); }
  void set_outputs(std::vector<TensorDesc> outputs) { outputs_ = std::move(outputs); }

  std::vector<int64_t> ints;  // kernel-specific parameters
  std::vector<int64_t> storage;
  int64_t count = 0;

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  Fn fn_;
};

absl::Status CopyRun(const FakeKernel& k, const KernelArgs& args) {
  std::memcpy(args.outputs[0], args.inputs[0], static_cast<size_t>(k.count));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareShape(const PrepareContext& c) {
  const Shape& in = c.inputs[0].shape;
  TensorDesc out{DataType::kInt64, {static_cast<int64_t>(in.size())}};
  auto kernel = std::make_unique<FakeKernel>(
      "Shape", std::vector<TensorDesc>{}, [](const FakeKernel& k, const KernelArgs& args) {
        std::memcpy(args.outputs[0], k.storage.data(), k.storage.size() * sizeof(int64_t));
        return absl::OkStatus();
      });
  kernel->storage = in;
  out.data = kernel->storage.data();
  kernel->set_outputs({out});
  return kernel;
}

// Gather of int64 data along axis 0 with int64 indices.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGather(const PrepareContext& c) {
  if (c.inputs[0].dtype != DataType::kInt64 || c.inputs[0].shape.size() != 1) {
    return absl::UnimplementedError("fake Gather: 1-D int64 data only");
  }
  TensorDesc out{DataType::kInt64, c.inputs[1].shape};
  auto kernel = std::make_unique<FakeKernel>(
      "Gather", std::vector<TensorDesc>{out}, [](const FakeKernel& k, const KernelArgs& args) {
        const auto* data = static_cast<const int64_t*>(args.inputs[0]);
        const auto* idx = static_cast<const int64_t*>(args.inputs[1]);
        auto* o = static_cast<int64_t*>(args.outputs[0]);
        for (int64_t i = 0; i < k.count; ++i) {
          int64_t j = idx[i] < 0 ? idx[i] + k.ints[0] : idx[i];
          if (j < 0 || j >= k.ints[0]) return absl::OutOfRangeError("fake Gather: index");
          o[i] = data[j];
        }
        return absl::OkStatus();
      });
  kernel->count = NumElements(c.inputs[1].shape);
  kernel->ints = {c.inputs[0].shape[0]};
  return kernel;
}

// Concat of 1-D int64 tensors.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConcat(const PrepareContext& c) {
  auto kernel = std::make_unique<FakeKernel>(
      "Concat", std::vector<TensorDesc>{}, [](const FakeKernel& k, const KernelArgs& args) {
        auto* o = static_cast<int64_t*>(args.outputs[0]);
        for (size_t i = 0; i < k.ints.size(); ++i) {
          std::memcpy(o, args.inputs[i], static_cast<size_t>(k.ints[i]) * sizeof(int64_t));
          o += k.ints[i];
        }
        return absl::OkStatus();
      });
  int64_t total = 0;
  for (const TensorDesc& in : c.inputs) {
    if (in.dtype != DataType::kInt64 || in.shape.size() != 1) {
      return absl::UnimplementedError("fake Concat: 1-D int64 only");
    }
    kernel->ints.push_back(in.shape[0]);
    total += in.shape[0];
  }
  kernel->set_outputs({TensorDesc{DataType::kInt64, {total}}});
  return kernel;
}

// Reshape whose shape input must be known at Prepare (0 copies, -1 infers).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReshape(const PrepareContext& c) {
  if (c.inputs[1].data == nullptr) {
    return absl::FailedPreconditionError("fake Reshape: the shape must be known at plan time");
  }
  const auto* spec = static_cast<const int64_t*>(c.inputs[1].data);
  const Shape& in = c.inputs[0].shape;
  Shape out(static_cast<size_t>(c.inputs[1].shape[0]));
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = spec[i] == 0 ? in[i] : spec[i];
    if (out[i] == -1) {
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) out[infer] = NumElements(in) / known;
  if (NumElements(out) != NumElements(in)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake Reshape: ", ShapeToString(in), " to ", ShapeToString(out)));
  }
  auto kernel = std::make_unique<FakeKernel>(
      "Reshape", std::vector<TensorDesc>{TensorDesc{c.inputs[0].dtype, out}}, &CopyRun);
  kernel->count = NumElements(in) * static_cast<int64_t>(DataTypeSize(c.inputs[0].dtype));
  return kernel;
}

}  // namespace

void RegisterFakeShapeKernels(KernelRegistry* registry) {
  (void)registry->Register("Shape", &PrepareShape);
  (void)registry->Register("Gather", &PrepareGather);
  (void)registry->Register("Concat", &PrepareConcat);
  (void)registry->Register("Reshape", &PrepareReshape);
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(gen);
  return out;
}

int CountOps(const Graph& graph, absl::string_view op) {
  int n = 0;
  for (const Node& node : graph.nodes) n += node.op == op ? 1 : 0;
  return n;
}

std::vector<std::string> LaneClashes(const ExecutionPlan& plan) {
  const std::vector<PlanStep>& steps = plan.steps();
  using Range = std::pair<uintptr_t, uintptr_t>;
  std::vector<std::vector<Range>> writes(steps.size()), touches(steps.size());
  std::map<const void*, size_t> sizes;
  auto range = [](const void* p, size_t bytes) {
    return Range{reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes};
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    for (const void* p : step.inputs) {
      auto size = sizes.find(p);
      if (size != sizes.end()) touches[s].push_back(range(p, size->second));
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const TensorDesc& out = step.kernel->outputs()[i];
      const size_t bytes = std::max(static_cast<size_t>(NumElements(out.shape)) * 4,
                                    step.kernel->output_storage_bytes(i));
      sizes[step.outputs[i]] = bytes;
      writes[s].push_back(range(step.outputs[i], bytes));
    }
    if (step.workspace != nullptr && step.kernel->workspace_bytes() > 0) {
      writes[s].push_back(range(step.workspace, step.kernel->workspace_bytes()));
    }
    touches[s].insert(touches[s].end(), writes[s].begin(), writes[s].end());
  }
  auto overlap = [](const std::vector<Range>& a, const std::vector<Range>& b) {
    for (const Range& x : a) {
      for (const Range& y : b) {
        if (x.first < y.second && y.first < x.second) return true;
      }
    }
    return false;
  };
  std::vector<std::string> clashes;
  for (const ParallelRegion& region : plan.parallel_regions()) {
    for (size_t la = 0; la < region.lanes.size(); ++la) {
      for (size_t lb = 0; lb < region.lanes.size(); ++lb) {
        if (la == lb) continue;
        for (int a : region.lanes[la]) {
          for (int b : region.lanes[lb]) {
            if (overlap(writes[a], touches[b])) {
              clashes.push_back(absl::StrCat(steps[a].node_name, " writes what ",
                                             steps[b].node_name, " touches"));
            }
          }
        }
      }
    }
  }
  return clashes;
}

}  // namespace reprise::runtime::engine::testing
