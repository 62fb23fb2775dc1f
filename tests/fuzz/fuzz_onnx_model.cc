// Fuzz target: bytes -> the wire scanner (onnx_wire.h, with a small lifting threshold so that
// fuzz-sized models have payloads to lift) -> Model::LoadBytes (the importer, the initializer
// decoder and the load-time optimiser with constant folding on the real CPU kernels). Folding
// is bounded to 16 MiB per node so that no input can legitimately allocate gigabytes.
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "kernels/cpu/cpu_kernels.h"
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
  auto model = runtime::engine::Model::LoadBytes(bytes, Registry(), options);
  if (model.ok()) {
    (void)(*model)->inputs();
    (void)(*model)->outputs();
  }
  return 0;
}

}  // namespace reprise::fuzz
