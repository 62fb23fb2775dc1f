// Test harness for the CPU kernels: host tensors, Prepare + Run through the registry with
// exactly sized buffers (so AddressSanitizer sees any overrun), and small helpers.
#ifndef REPRISE_TESTS_KERNELS_CPU_KERNEL_TEST_UTIL_H_
#define REPRISE_TESTS_KERNELS_CPU_KERNEL_TEST_UTIL_H_

#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu::testing {

using runtime::DataType;
using runtime::Shape;

template <typename T>
constexpr DataType TypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  if constexpr (std::is_same_v<T, int32_t>) return DataType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DataType::kInt64;
  if constexpr (std::is_same_v<T, uint8_t>) return DataType::kUInt8;
  if constexpr (std::is_same_v<T, bool>) return DataType::kBool;
  return DataType::kUndefined;
}

/// A host tensor; `known` makes its value visible at Prepare (TensorDesc::data).
struct Tensor {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  std::vector<uint8_t> bytes;
  bool known = false;
  bool present = true;

  template <typename T>
  static Tensor Of(Shape shape, const std::vector<T>& values, bool known = false) {
    Tensor t;
    t.dtype = TypeOf<T>();
    t.shape = std::move(shape);
    t.bytes.resize(values.size() * sizeof(T));
    for (size_t i = 0; i < values.size(); ++i) {
      T v = values[i];
      std::memcpy(t.bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
    t.known = known;
    return t;
  }
  /// An absent optional input.
  static Tensor Absent() {
    Tensor t;
    t.present = false;
    return t;
  }

  template <typename T>
  std::vector<T> Values() const {
    std::vector<T> out;
    for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
      T v;
      std::memcpy(&v, bytes.data() + i, sizeof(T));
      out.push_back(v);
    }
    return out;
  }
};

/// `n` floats uniform in [lo, hi), reproducible per seed.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

/// A 2-D convolution's geometry: N x C x H x W in, M out, KH x KW window, groups, strides,
/// dilations, pads (top, left, bottom, right).
struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, group;
  int64_t stride_h, stride_w, dil_h, dil_w;
  int64_t pad_t, pad_l, pad_b, pad_r;
};

/// The output size along one axis.
int64_t OutSize(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe);

/// Reference 2-D convolution, NCHW, weights [M, C/group, KH, KW], bias [M] or empty.
std::vector<float> ReferenceConv(const ConvCase& p, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>& b);

/// Owns a registry with every CPU kernel (default options), or borrows one (a device's, which
/// must outlive the harness).
///
/// A kernel may keep pointers to the values known at Prepare (a plan keeps its constants alive
/// for its kernels), so Prepare hands the kernel the harness's own copies of them, which live
/// as long as the harness: a test may pass temporaries. The same bytes at the same address
/// share one copy, so the device's packed-weight cache sees one constant, as in a plan.
class KernelHarness {
 public:
  KernelHarness();
  explicit KernelHarness(const runtime::KernelRegistry* registry);
  KernelHarness(const KernelHarness&) = delete;
  KernelHarness& operator=(const KernelHarness&) = delete;

  /// Prepares `op` for `inputs` with `threads` intra-op threads (`run_once`: PrepareContext's).
  absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> Prepare(
      const std::string& op, const std::vector<Tensor>& inputs,
      const runtime::Attributes& attrs = {}, int opset = 17, int num_outputs = 1, int threads = 1,
      bool run_once = false) const;

  /// Runs a prepared kernel on `inputs` into freshly allocated outputs.
  absl::StatusOr<std::vector<Tensor>> RunPrepared(const runtime::PreparedKernel& kernel,
                                                  const std::vector<Tensor>& inputs) const;

  /// Prepare, then Run.
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& op, const std::vector<Tensor>& inputs,
                                          const runtime::Attributes& attrs = {}, int opset = 17,
                                          int num_outputs = 1) const;

 private:
  std::vector<runtime::TensorDesc> Descs(const std::vector<Tensor>& inputs) const;
  const void* KeptCopy(const Tensor& t) const;

  struct Kept {
    const void* source;
    std::vector<uint8_t> bytes;
  };
  mutable std::mutex kept_mu_;
  mutable std::deque<Kept> kept_;  // a deque: its elements never move
  runtime::KernelRegistry own_;
  const runtime::KernelRegistry* registry_ = &own_;
};

/// NCHW floats of `images` x `channels` x `pixels` stored as [N][groups][pixels][lanes], the
/// padding lanes zero (lanes 0: NCHW as it is; lanes == channels: channels-last).
std::vector<float> StoreInLanes(const std::vector<float>& v, int64_t images, int64_t channels,
                                int64_t pixels, int64_t lanes);

/// Runs a prepared kernel of one output on raw buffers: inputs and the output stored in a
/// layout that a Tensor cannot show (channel blocks, channels-last), with a fresh workspace.
absl::Status RunOnBuffers(const runtime::PreparedKernel& kernel,
                          const std::vector<const void*>& inputs, void* output);

runtime::Attributes Attrs(
    std::initializer_list<std::pair<std::string, runtime::AttributeValue>> values);

}  // namespace reprise::kernels::cpu::testing

#endif  // REPRISE_TESTS_KERNELS_CPU_KERNEL_TEST_UTIL_H_
