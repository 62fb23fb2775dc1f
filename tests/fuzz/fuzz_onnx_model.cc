// Fuzz target: bytes -> the wire scanner (onnx_wire.h, with a small lifting threshold so that
// fuzz-sized models have payloads to lift) -> Model::LoadBytes (the importer, the initializer
// decoder and the load-time optimiser with constant folding on the real CPU kernels) -> a plan
// for small inputs of the declared shapes (Model::PlanForInputs: the kernels' Prepare, and for a
// value-keyed model everything computed at plan time; for a model cut at its value-dependent
// nodes, its prefix's plan as well). Folding is bounded to 16 MiB per node and
// a plan to 64 MiB, so that no input can legitimately allocate gigabytes.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/model.h"
#include "runtime/engine/onnx_wire.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {
namespace {

const runtime::KernelRegistry& Registry() {
  static const runtime::KernelRegistry* registry = [] {
    auto* r = new runtime::KernelRegistry;
    (void)kernels::cpu::RegisterCpuKernels(r);
    return r;
  }();
  return *registry;
}

// Inputs of the model's declared shapes (unknown dims 1), every element 1 (numeric types;
// others zero bytes), at most kMaxInputBytes in all; empty when there are none or a string
// input (whose bytes are views).
constexpr int64_t kMaxInputBytes = 1 << 20;

std::vector<runtime::TensorValue> SmallInputs(const runtime::engine::Model& model) {
  std::vector<runtime::TensorValue> values;
  int64_t total = 0;
  for (const runtime::engine::Value& input : model.inputs()) {
    if (input.dtype == runtime::DataType::kString || !input.has_shape) return {};
    runtime::TensorValue v;
    v.dtype = input.dtype;
    for (const runtime::engine::Dim& d : input.dims) v.shape.push_back(d.known() ? d.value : 1);
    const std::optional<int64_t> count = runtime::CheckedElementCount(v.shape, kMaxInputBytes);
    const int64_t size = static_cast<int64_t>(runtime::DataTypeSize(v.dtype));
    if (!count.has_value() || size == 0 || *count * size > kMaxInputBytes - total) return {};
    total += *count * size;
    v.bytes.assign(static_cast<size_t>(*count * size), 0);
    for (int64_t i = 0; i < *count; ++i) {
      uint8_t* at = v.bytes.data() + i * size;
      if (v.dtype == runtime::DataType::kFloat32) {
        const float one = 1.0f;
        std::memcpy(at, &one, sizeof one);
      } else if (v.dtype == runtime::DataType::kInt64 || v.dtype == runtime::DataType::kInt32 ||
                 v.dtype == runtime::DataType::kBool || v.dtype == runtime::DataType::kUInt8 ||
                 v.dtype == runtime::DataType::kInt8) {
        at[0] = 1;  // little-endian
      }
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace

int FuzzOnnxModel(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The scanner's promise: every lifted range lies inside the bytes it was given.
  auto lifted = runtime::engine::LiftInitializerData(bytes, /*min_bytes=*/16);
  if (lifted.has_value()) {
    for (const auto& range : lifted->raw_data) {
      if (range.has_value() && (range->offset > size || range->size > size - range->offset)) {
        __builtin_trap();
      }
    }
  }
  runtime::engine::ModelOptions options;
  options.max_folded_bytes = 16 << 20;
  options.max_plan_bytes = 64 << 20;
  auto model = runtime::engine::Model::LoadBytes(bytes, Registry(), options);
  if (!model.ok()) return 0;
  (void)(*model)->outputs();
  const std::vector<runtime::TensorValue> values = SmallInputs(**model);
  if (values.empty()) return 0;
  std::vector<const runtime::TensorValue*> ordered;
  for (const runtime::TensorValue& v : values) ordered.push_back(&v);
  bool value_keyed = false;
  (void)(*model)->PlanForInputs(ordered, &value_keyed, 1);
  // A model cut at its value-dependent nodes: its prefix, which takes the same inputs, is
  // planned from them too (a session replays it).
  if (const runtime::engine::Model::SplitModels* split = (*model)->value_split()) {
    bool prefix_keyed = false;
    (void)split->prefix->PlanForInputs(ordered, &prefix_keyed, 1);
  }
  return 0;
}

}  // namespace reprise::fuzz
