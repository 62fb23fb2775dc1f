// Shared set-up of the CUDA backend's tests: the "cuda" backend with the CUDA kernels, skipping
// with the driver's message when no GPU can be used (the tests are labelled `gpu`).
#ifndef REPRISE_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define REPRISE_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime::cuda_testing {

inline constexpr int kCount = 8;  // shape 4x2
inline constexpr size_t kBytes = kCount * sizeof(float);

/// The first CUDA device with the CUDA kernels registered; skips when there is none.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend("cuda");
    if (!backend.ok()) GTEST_SKIP() << "no CUDA device: " << backend.status().message();
    backend_ = std::move(backend).value();
    auto device = backend_->device(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device.value();
    ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(device_->kernels()).ok());
  }

  void TearDown() override {
    if (device_ == nullptr) return;
    for (void* ptr : allocations_) EXPECT_TRUE(device_->Free(ptr).ok());
  }

  std::unique_ptr<Stream> NewStream() {
    auto stream = device_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? std::move(stream).value() : nullptr;
  }

  std::unique_ptr<Event> NewEvent(EventFlags flags = EventFlags::kNone) {
    auto event = device_->CreateEvent(flags);
    EXPECT_TRUE(event.ok()) << event.status();
    return event.ok() ? std::move(event).value() : nullptr;
  }

  void* DeviceBytes(size_t bytes) {
    auto ptr = device_->Malloc(bytes);
    EXPECT_TRUE(ptr.ok()) << ptr.status();
    if (!ptr.ok()) return nullptr;
    allocations_.push_back(ptr.value());
    return ptr.value();
  }

  /// Device memory holding `values` (written synchronously, outside any capture).
  float* DeviceFloats(const std::vector<float>& values) {
    auto* ptr = static_cast<float*>(DeviceBytes(values.size() * sizeof(float)));
    EXPECT_TRUE(
        device_->Memcpy(ptr, values.data(), values.size() * sizeof(float), CopyKind::kHostToDevice)
            .ok());
    return ptr;
  }
  float* DeviceFloats(float fill, int count = kCount) {
    return DeviceFloats(std::vector<float>(count, fill));
  }

  std::vector<float> Read(const float* ptr, int count = kCount) {
    std::vector<float> out(count);
    EXPECT_TRUE(
        device_->Memcpy(out.data(), ptr, count * sizeof(float), CopyKind::kDeviceToHost).ok());
    return out;
  }

  void Write(float* ptr, const std::vector<float>& values) {
    EXPECT_TRUE(
        device_->Memcpy(ptr, values.data(), values.size() * sizeof(float), CopyKind::kHostToDevice)
            .ok());
  }

  /// Prepares `op` on two [4,2] float32 inputs, with `alpha` when it is not 1.
  std::unique_ptr<PreparedKernel> PrepareBinary(absl::string_view op, float alpha = 1.0f) {
    std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kFloat32, {4, 2}});
    Attributes attributes;
    if (alpha != 1.0f) attributes.Set("alpha", alpha);
    PrepareContext context;
    context.op = op;
    context.inputs = inputs;
    context.attributes = &attributes;
    auto kernel = device_->kernels()->Prepare(context);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? std::move(kernel).value() : nullptr;
  }

  std::unique_ptr<Backend> backend_;
  Device* device_ = nullptr;
  std::vector<void*> allocations_;
};

inline std::vector<float> SelfValues() { return {1, 2, 3, 4, 5, 6, 7, 8}; }

inline std::vector<float> Plus(const std::vector<float>& a, float value) {
  std::vector<float> out;
  for (float v : a) out.push_back(v + value);
  return out;
}

inline void ExpectFloats(const std::vector<float>& actual, const std::vector<float>& expected,
                         float tolerance = 1e-4f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

/// Parses `json` with /usr/bin/python3 (bound to `d`) and runs `assertions` on it.
inline void CheckJsonWithPython(const std::string& json, const std::string& assertions) {
  static std::atomic<int> counter{0};
  const std::string path = absl::StrCat(::testing::TempDir(), "/cuda_ri_dump_", getpid(), "_",
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

}  // namespace reprise::runtime::cuda_testing

#endif  // REPRISE_TESTS_CUDA_CUDA_TEST_UTIL_H_
