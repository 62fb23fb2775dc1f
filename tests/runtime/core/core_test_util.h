// Shared set-up for the runtime core's tests: the CPU device with the CPU kernels registered,
// and helpers that prepare Add / Mul for the 4x2 float32 shapes of capture_semantics.md.
#ifndef REPRISE_TESTS_RUNTIME_CORE_CORE_TEST_UTIL_H_
#define REPRISE_TESTS_RUNTIME_CORE_CORE_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime::testing {

inline constexpr int kCount = 8;  // shape 4x2
inline constexpr size_t kBytes = kCount * sizeof(float);

/// Prepares `op` on two [4,2] float32 inputs, with `alpha` when it is not 1.
inline std::unique_ptr<PreparedKernel> PrepareBinary(Device* device, absl::string_view op,
                                                     float alpha = 1.0f) {
  std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kFloat32, {4, 2}});
  Attributes attributes;
  if (alpha != 1.0f) attributes.Set("alpha", alpha);
  PrepareContext context;
  context.op = op;
  context.inputs = inputs;
  context.attributes = &attributes;
  auto kernel = device->kernels()->Prepare(context);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? std::move(kernel).value() : nullptr;
}

/// The CPU backend with its kernels; streams made from `device`.
class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend("cpu");
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
    auto device = backend_->device(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device.value();
    if (!device_->kernels()->Has("Add")) {
      ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(device_->kernels()).ok());
    }
  }

  std::unique_ptr<Stream> NewStream() {
    auto stream = device_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    return std::move(stream).value();
  }

  std::unique_ptr<Event> NewEvent(EventFlags flags = EventFlags::kNone) {
    auto event = device_->CreateEvent(flags);
    EXPECT_TRUE(event.ok()) << event.status();
    return std::move(event).value();
  }

  /// Device memory holding `values` (written synchronously, outside any capture).
  float* DeviceFloats(const std::vector<float>& values) {
    auto ptr = device_->Malloc(values.size() * sizeof(float));
    EXPECT_TRUE(ptr.ok()) << ptr.status();
    auto* floats = static_cast<float*>(ptr.value());
    std::memcpy(floats, values.data(), values.size() * sizeof(float));
    allocations_.push_back(floats);
    return floats;
  }

  float* DeviceFloats(float fill) { return DeviceFloats(std::vector<float>(kCount, fill)); }

  std::vector<float> Read(const float* ptr) { return std::vector<float>(ptr, ptr + kCount); }

  void TearDown() override {
    for (void* ptr : allocations_) EXPECT_TRUE(device_->Free(ptr).ok());
  }

  std::unique_ptr<Backend> backend_;
  Device* device_ = nullptr;
  std::vector<void*> allocations_;
};

/// self = 1..8
inline std::vector<float> SelfValues() { return {1, 2, 3, 4, 5, 6, 7, 8}; }

inline void ExpectFloats(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-4) << "element " << i;
  }
}

/// a + 2 * alpha for a = 1..8
inline std::vector<float> AddOther(const std::vector<float>& a, float alpha) {
  std::vector<float> out;
  for (float v : a) out.push_back(v + 2.0f * alpha);
  return out;
}

/// Parses `json` with /usr/bin/python3 or $REPRISE_PYTHON (bound to `d`) and runs `assertions` on
/// it.
inline void CheckJsonWithPython(const std::string& json, const std::string& assertions) {
  // Unique per process and call: ctest runs test cases of this binary in parallel.
  static std::atomic<int> counter{0};
  const std::string path = absl::StrCat(::testing::TempDir(), "/ri_dump_test_", getpid(), "_",
                                        counter.fetch_add(1), ".json");
  {
    std::ofstream file(path);
    file << json;
  }
  // REPRISE_PYTHON: another interpreter where /usr/bin/python3 is missing (tools/gpu-check.sh).
  const char* python = std::getenv("REPRISE_PYTHON");
  const std::string command = absl::StrCat(python != nullptr ? python : "/usr/bin/python3",
                                           " -c 'import json,sys; d=json.load(open(sys.argv[1])); ",
                                           assertions, "' ", path);
  EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << json;
  std::remove(path.c_str());
}

}  // namespace reprise::runtime::testing

#endif  // REPRISE_TESTS_RUNTIME_CORE_CORE_TEST_UTIL_H_
