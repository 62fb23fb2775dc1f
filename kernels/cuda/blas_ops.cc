// cuBLAS-backed ops: Gemm, MatMul (batched) and Conv (im2col + GEMM per image and group).
#include <cublas_v2.h>

#include <memory>
#include <mutex>  // NOLINT: see docs/development.md (TSan)
#include <utility>

#include "kernels/cuda/cuda_kernel_state.h"
#include "kernels/cuda/op_kernel.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

// The device's handle (in the registry's CudaKernelState, which the reference keeps alive), or
// (when none can be made: no device) the error, reported by Launch. Prepare thus works without a
// GPU (plans can be checked on a build machine).
struct BlasRef {
  std::shared_ptr<runtime::KernelState> owner;
  Blas* blas = nullptr;
  absl::Status error;
};

absl::StatusOr<BlasRef> BlasFor(const PrepareContext& context) {
  ASSIGN_OR_RETURN(CudaKernelState * state, CudaKernelStateOf(context));
  absl::StatusOr<Blas*> blas = state->BlasForCurrentDevice();
  if (!blas.ok()) return BlasRef{nullptr, nullptr, blas.status()};
  return BlasRef{context.kernel_state, *blas, absl::OkStatus()};
}

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, batched with element strides.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;
};

absl::Status RunGemm(const BlasRef& ref, const GemmShape& g, const float* a, const float* b,
                     float* c, cudaStream_t stream) {
  if (ref.blas == nullptr) return ref.error;
  Blas* blas = ref.blas;
  const int lda = static_cast<int>(g.trans_a ? g.m : g.k);
  const int ldb = static_cast<int>(g.trans_b ? g.k : g.n);
  std::lock_guard<std::mutex> lock(blas->mu);
  RETURN_IF_ERROR(BlasStatus(cublasSetStream(blas->handle, stream), "cublasSetStream"));
  // Column-major: C^T[N,M] = op(B)^T op(A)^T.
  return BlasStatus(
      cublasSgemmStridedBatched(blas->handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.n),
                                static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, b, ldb,
                                g.stride_b, a, lda, g.stride_a, &g.beta, c, static_cast<int>(g.n),
                                g.stride_c, static_cast<int>(g.batch)),
      "cublasSgemmStridedBatched");
}

absl::Status RequireFloat(const PrepareContext& context) {
  for (const TensorDesc& input : context.inputs) {
    if (input.present && input.dtype != DataType::kFloat32) {
      return absl::UnimplementedError(
          absl::StrCat(context.op, " \"", context.name, "\": the cuda kernel supports float32"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGemm(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloat(context));
  ASSIGN_OR_RETURN(const BlasRef blas, BlasFor(context));
  const Attributes& attrs = *context.attributes;
  GemmShape g;
  ASSIGN_OR_RETURN(int64_t trans_a, attrs.GetInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, attrs.GetInt("transB", 0));
  ASSIGN_OR_RETURN(g.alpha, attrs.GetFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(float beta, attrs.GetFloat("beta", 1.0f));
  g.trans_a = trans_a != 0;
  g.trans_b = trans_b != 0;
  const Shape& a = context.inputs[0].shape;
  const Shape& out = kernel->outputs()[0].shape;
  g.m = out[0];
  g.n = out[1];
  g.k = g.trans_a ? a[0] : a[1];
  const bool has_c = context.inputs.size() > 2 && context.inputs[2].present && beta != 0.0f;
  g.beta = has_c ? beta : 0.0f;
  StridedView bias_view;
  if (has_c) {
    ASSIGN_OR_RETURN(bias_view, MakeView(out, BroadcastStrides(context.inputs[2].shape, out), {}));
  }
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) -> absl::Status {
    if (g.m * g.n == 0) return absl::OkStatus();
    auto* y = static_cast<float*>(args.outputs[0]);
    if (has_c) {
      // Y = C (broadcast), then Y = alpha * A B + beta * Y.
      RETURN_IF_ERROR(CheckLaunch(
          LaunchStridedCopy(bias_view, g.m * g.n, sizeof(float), args.inputs[2], y, stream), name));
    }
    return RunGemm(blas, g, static_cast<const float*>(args.inputs[0]),
                   static_cast<const float*>(args.inputs[1]), y, stream);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMatMul(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloat(context));
  ASSIGN_OR_RETURN(const BlasRef blas, BlasFor(context));
  Shape a = context.inputs[0].shape;
  Shape b = context.inputs[1].shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  GemmShape g;
  g.m = a[a.size() - 2];
  g.k = a[a.size() - 1];
  g.n = b[b.size() - 1];
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const int64_t batch_a = runtime::NumElements(a_batch), batch_b = runtime::NumElements(b_batch);
  if (batch_b == 1) {
    // B shared: fold A's batch into M (A is contiguous).
    g.m *= batch_a;
  } else if (batch_a == 1) {
    g.batch = batch_b;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else if (a_batch == b_batch) {
    g.batch = batch_a;
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "MatMul \"", context.name, "\": cuda supports equal or absent batch dims, got ",
        runtime::ShapeToString(a), " x ", runtime::ShapeToString(b)));
  }
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) -> absl::Status {
    if (g.m * g.n * g.batch == 0) return absl::OkStatus();
    if (g.k == 0) {
      return CheckLaunch(
          cudaMemsetAsync(args.outputs[0], 0, g.m * g.n * g.batch * sizeof(float), stream), name);
    }
    return RunGemm(blas, g, static_cast<const float*>(args.inputs[0]),
                   static_cast<const float*>(args.inputs[1]), static_cast<float*>(args.outputs[0]),
                   stream);
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConv(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  RETURN_IF_ERROR(RequireFloat(context));
  const Shape& x = context.inputs[0].shape;
  const Shape& w = context.inputs[1].shape;
  const Shape& out = kernel->outputs()[0].shape;
  if (x.size() != 4) return absl::UnimplementedError("Conv: the cuda kernel is 2-D (NCHW) only");
  ASSIGN_OR_RETURN(const BlasRef blas, BlasFor(context));
  const Attributes& attrs = *context.attributes;
  ASSIGN_OR_RETURN(std::string auto_pad, attrs.GetString("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return absl::UnimplementedError(absl::StrCat("Conv: cuda auto_pad ", auto_pad));
  }
  ASSIGN_OR_RETURN(int64_t group, attrs.GetInt("group", 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.GetInts("strides", {1, 1}));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.GetInts("pads", {0, 0, 0, 0}));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.GetInts("dilations", {1, 1}));
  Conv2d p;
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.out_h = out[2];
  p.out_w = out[3];
  p.kernel_h = w[2];
  p.kernel_w = w[3];
  p.stride_h = strides[0];
  p.stride_w = strides[1];
  p.pad_top = pads[0];
  p.pad_left = pads[1];
  p.dilation_h = dilations[0];
  p.dilation_w = dilations[1];
  const int64_t batch = x[0];
  const int64_t cg = p.c / group;
  const int64_t mg = out[1] / group;
  const int64_t spatial = p.out_h * p.out_w;
  GemmShape g;
  g.m = mg;
  g.k = cg * p.kernel_h * p.kernel_w;
  g.n = spatial;
  kernel->set_workspace_bytes(static_cast<size_t>(g.k * g.n) * sizeof(float));
  const bool has_bias = context.inputs.size() > 2 && context.inputs[2].present;
  const int64_t channels_out = out[1];
  const std::string name(context.op);
  kernel->set_launch([=](const KernelArgs& args, cudaStream_t stream) -> absl::Status {
    const auto* input = static_cast<const float*>(args.inputs[0]);
    const auto* weights = static_cast<const float*>(args.inputs[1]);
    auto* y = static_cast<float*>(args.outputs[0]);
    auto* columns = static_cast<float*>(args.workspace);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t gi = 0; gi < group; ++gi) {
        const float* image = input + (n * p.c + gi * cg) * p.h * p.w;
        RETURN_IF_ERROR(CheckLaunch(LaunchIm2ColF32(p, cg, image, columns, stream), name));
        RETURN_IF_ERROR(RunGemm(blas, g, weights + gi * mg * g.k, columns,
                                y + (n * channels_out + gi * mg) * spatial, stream));
      }
    }
    if (has_bias) {
      RETURN_IF_ERROR(
          CheckLaunch(LaunchAddChannelBiasF32(batch, channels_out, spatial,
                                              static_cast<const float*>(args.inputs[2]), y, stream),
                      name));
    }
    return absl::OkStatus();
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

}  // namespace reprise::kernels::cuda
