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
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::cuda_testing {

// The CPU tests' helpers that do not depend on the backend.
using testing::CheckJsonWithPython;
using testing::kBytes;
using testing::kCount;
using testing::SelfValues;

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
    return testing::PrepareBinary(device_, op, alpha);
  }

  std::unique_ptr<Backend> backend_;
  Device* device_ = nullptr;
  std::vector<void*> allocations_;
};

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

}  // namespace reprise::runtime::cuda_testing

#endif  // REPRISE_TESTS_CUDA_CUDA_TEST_UTIL_H_
