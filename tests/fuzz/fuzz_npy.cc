// Fuzz target: bytes -> the .npy reader (runtime/engine/npy.h).
#include <string>

#include "absl/strings/string_view.h"
#include "runtime/engine/npy.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {

int FuzzNpy(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto tensor = runtime::engine::ParseNpy(bytes, "fuzz");
  if (tensor.ok()) {
    // A tensor that parsed must serialise again (the writer trusts what the reader built).
    auto again = runtime::engine::SerializeNpy(*tensor);
    (void)again;
  }
  return 0;
}

}  // namespace reprise::fuzz
