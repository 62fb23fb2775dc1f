// Helpers for engine tests: build small ONNX models in C++, and fake kernels for ops that the
// CPU kernel library does not have yet (Shape, Gather, Concat, Reshape on int64 / float).
#ifndef REPRISE_TESTS_RUNTIME_ENGINE_TEST_MODELS_H_
#define REPRISE_TESTS_RUNTIME_ENGINE_TEST_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/graph.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine::testing {

/// Builds a ModelProto graph by hand.
class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17);
  /// Adds a graph input; a dim < 0 becomes the symbolic dim `symbol` (or unnamed when empty).
  ModelBuilder& Input(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                      const std::string& symbol = "N");
  /// Adds a graph output (the checker requires a shape; a dim < 0 is left unknown).
  ModelBuilder& Output(const std::string& name, const std::vector<int64_t>& dims,
                       int elem_type = onnx::TensorProto::FLOAT);
  ModelBuilder& FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<float>& values);
  ModelBuilder& Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& values);
  onnx::NodeProto& Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "");
  onnx::ModelProto& proto() { return model_; }
  std::string Bytes() const;

 private:
  onnx::ModelProto model_;
};

void SetIntAttr(onnx::NodeProto* node, const std::string& name, int64_t value);
void SetIntsAttr(onnx::NodeProto* node, const std::string& name,
                 const std::vector<int64_t>& values);

/// A Conv node `name` from `in` to `out`: `c_in` -> `c_out` channels, a k x k kernel padded to
/// keep the size, weights uniform in +-1/sqrt(c_in * k * k) and a bias (initializers NAME_w and
/// NAME_b, from `seed` and seed + 1).
void AddSameConv(ModelBuilder& b, const std::string& name, const std::string& in,
                 const std::string& out, int64_t c_in, int64_t c_out, int64_t k, uint32_t seed);

/// A registry with the real CPU kernels plus fakes for Shape, Gather, Concat and Reshape.
void RegisterFakeShapeKernels(KernelRegistry* registry);

TensorValue FloatTensor(const Shape& shape, const std::vector<float>& values);
std::vector<float> Floats(const TensorValue& tensor);
std::vector<int64_t> Int64s(const TensorValue& tensor);

/// `n` floats uniform in [lo, hi), the same for the same `seed`.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

/// One run of `model` without a stream: matches `inputs` to the graph inputs
/// (Model::MatchInputs, which checks them), plans for them (Model::PlanForInputs) and runs the
/// plan on the calling thread (ExecutionPlan::Run). The outputs in graph order.
absl::StatusOr<std::vector<NamedTensor>> RunPlan(const Model& model,
                                                 const std::vector<NamedTensor>& inputs);

/// How many nodes of `graph` run `op`.
int CountOps(const Graph& graph, absl::string_view op);

/// Steps on different lanes of a parallel region of `plan` that share memory: one line per
/// ordered pair where the first writes (outputs, workspace) bytes that the second reads or
/// writes (a read's size is that of the latest write to its address, since buffers are
/// reused). Empty when the lanes keep apart.
std::vector<std::string> LaneClashes(const ExecutionPlan& plan);

}  // namespace reprise::runtime::engine::testing

#endif  // REPRISE_TESTS_RUNTIME_ENGINE_TEST_MODELS_H_
