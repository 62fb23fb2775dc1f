// Shared pieces of the CUDA kernels: a PreparedKernel over a launch function, the CPU reference
// Prepare that gives output descriptors, and view / constant helpers.
#ifndef REPRISE_KERNELS_CUDA_OP_KERNEL_H_
#define REPRISE_KERNELS_CUDA_OP_KERNEL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/launch.h"
#include "runtime/core/cuda/cuda_kernel.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cuda {

using runtime::Attributes;
using runtime::DataType;
using runtime::KernelArgs;
using runtime::PrepareContext;
using runtime::PreparedKernel;
using runtime::Shape;
using runtime::TensorDesc;

using LaunchFn = std::function<absl::Status(const KernelArgs& args, cudaStream_t stream)>;

/// A prepared CUDA kernel: the op, its outputs (from the CPU reference) and a launch function.
/// Owns device constants uploaded at Prepare, and the CPU reference kernel (whose plan-time
/// output values it may point at).
class OpKernel final : public runtime::cuda::CudaKernel {
 public:
  OpKernel(std::string op, std::unique_ptr<PreparedKernel> reference, LaunchFn launch,
           size_t workspace_bytes = 0);
  ~OpKernel() override;

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return reference_->outputs(); }
  /// The larger of the CUDA launch's and the CPU reference's workspace (Run uses the latter).
  size_t workspace_bytes() const override {
    return std::max(workspace_bytes_, reference_->workspace_bytes());
  }
  absl::Status Launch(const KernelArgs& args, cudaStream_t stream) const override {
    return launch_(args, stream);
  }
  /// Host evaluation on host pointers, through the CPU reference (plan-time folding).
  absl::Status Run(const KernelArgs& args) const override { return reference_->Run(args); }

  void set_launch(LaunchFn launch) { launch_ = std::move(launch); }
  void set_workspace_bytes(size_t bytes) { workspace_bytes_ = bytes; }
  /// Copies `bytes` of host data to new device memory owned by the kernel (at Prepare).
  absl::StatusOr<void*> Upload(const void* data, size_t bytes);

 private:
  std::string op_;
  std::unique_ptr<PreparedKernel> reference_;
  LaunchFn launch_;
  size_t workspace_bytes_ = 0;
  std::vector<void*> constants_;
};

/// Prepares the CPU kernel of the same op (validation and output descriptors).
absl::StatusOr<std::unique_ptr<OpKernel>> PrepareReference(const PrepareContext& context);

/// CUDA error → status naming the node.
absl::Status Check(cudaError_t error, const PrepareContext& context);
absl::Status CheckLaunch(cudaError_t error, absl::string_view op);

/// Contiguous (row-major) element strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);
/// Element strides of `input` broadcast to `out` (right-aligned; 0 on broadcast dims).
std::vector<int64_t> BroadcastStrides(const Shape& input, const Shape& out);
/// A view over `out` with operand strides; error when it has more than kMaxDims dims.
absl::StatusOr<StridedView> MakeView(const Shape& out, const std::vector<int64_t>& a_stride,
                                     const std::vector<int64_t>& b_stride);
/// Normalises a possibly negative axis against `rank`.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, size_t rank, const PrepareContext& context);
int64_t Product(const Shape& shape, size_t begin, size_t end);

/// When every output's value is known at plan time: a kernel that copies the uploaded values.
absl::StatusOr<bool> PrepareConstantOutputs(OpKernel* kernel);

/// Families (elementwise_ops.cc, nn_ops.cc, blas_ops.cc).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBinary(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareUnary(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareClip(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCast(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCopy(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTranspose(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSlice(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareExpand(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConcat(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGather(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConstant(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSoftmax(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLayerNorm(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReduce(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBatchNorm(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePool(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConv(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGemm(const PrepareContext& context);
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMatMul(const PrepareContext& context);

}  // namespace reprise::kernels::cuda

#endif  // REPRISE_KERNELS_CUDA_OP_KERNEL_H_
