// Gemm and MatMul (float32) on oneDNN's row-major sgemm. MatMul broadcasts batch dims and
// accepts 1-D operands; when B has no batch, all of A's batch is one GEMM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "dnnl.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// Products of at most kSmallGemmRows rows and kSmallGemmMacs multiply-adds skip oneDNN's sgemm,
// whose fixed cost per call (about a microsecond) exceeds the arithmetic.
constexpr int64_t kSmallGemmMacs = 64 * 64 * 64;
constexpr int64_t kSmallGemmRows = 4;

// y[m,n] += a[m,k] * b[k,n], all row-major with leading dimensions lda, ldb, ldy; the inner
// loop runs along y's and b's rows. Inlined into one copy per instruction set below.
__attribute__((always_inline)) inline void SmallGemmBody(int64_t m, int64_t n, int64_t k,
                                                         const float* __restrict a, int64_t lda,
                                                         const float* __restrict b, int64_t ldb,
                                                         float* __restrict y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    float* __restrict row = y + i * ldy;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a[i * lda + kk];
      const float* __restrict brow = b + kk * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}

#define REPRISE_SMALL_GEMM_ARGS                                                              \
  int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, \
      float *y, int64_t ldy
__attribute__((target("avx512f"))) void SmallGemmAvx512(REPRISE_SMALL_GEMM_ARGS) {
  SmallGemmBody(m, n, k, a, lda, b, ldb, y, ldy);
}
__attribute__((target("avx2,fma"))) void SmallGemmAvx2(REPRISE_SMALL_GEMM_ARGS) {
  SmallGemmBody(m, n, k, a, lda, b, ldb, y, ldy);
}
void SmallGemmBaseline(REPRISE_SMALL_GEMM_ARGS) { SmallGemmBody(m, n, k, a, lda, b, ldb, y, ldy); }

// Picks the copy for this CPU on first use (not an ifunc: those resolve before the sanitizer
// runtimes start, and crash under TSan).
void SmallGemmAccumulate(REPRISE_SMALL_GEMM_ARGS) {
  using Fn = void (*)(REPRISE_SMALL_GEMM_ARGS);
  static const Fn fn = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return static_cast<Fn>(&SmallGemmAvx512);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      return static_cast<Fn>(&SmallGemmAvx2);
    }
    return static_cast<Fn>(&SmallGemmBaseline);
  }();
  fn(m, n, k, a, lda, b, ldb, y, ldy);
}
#undef REPRISE_SMALL_GEMM_ARGS

// True when the small kernel beats sgemm: a few rows (measured on the bench machine at one
// thread, 32x32 weights: 1 row 0.9 us against sgemm's 1.5 us; 8 rows even; 128 rows 4x slower).
bool UseSmallGemm(int64_t m, int64_t n, int64_t k) {
  return m > 0 && m <= kSmallGemmRows && n * k > 0 && m * n * k <= kSmallGemmMacs;
}

// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C. A zero-sized product is handled here
// (sgemm rejects it).
absl::Status Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    }
    return absl::OkStatus();
  }
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    return absl::InternalError(absl::StrCat("dnnl_sgemm failed (status ", static_cast<int>(status),
                                            ") for m=", m, " n=", n, " k=", k));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGemm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  RETURN_IF_ERROR(ExpectRank(context, 0, 2));
  RETURN_IF_ERROR(ExpectRank(context, 1, 2));
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(int64_t trans_a, attrs.GetInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, attrs.GetInt("transB", 0));
  ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(float beta, attrs.GetFloat("beta", 1.0f));
  const Shape& a = context.inputs[0].shape;
  const Shape& b = context.inputs[1].shape;
  const int64_t m = trans_a ? a[1] : a[0];
  const int64_t k = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  const int64_t n = trans_b ? b[0] : b[1];
  if (k != kb) {
    return InvalidArgument(context, "A ", runtime::ShapeToString(a), " (transA=", trans_a,
                           ") and B ", runtime::ShapeToString(b), " (transB=", trans_b,
                           ") do not multiply");
  }
  const Shape out = {m, n};
  const bool has_c = HasInput(context, 2) && beta != 0.0f;
  BroadcastPlan c_plan;
  if (has_c) {
    auto shape = BroadcastShapes(context.inputs[2].shape, out);
    if (!shape.ok() || *shape != out) {
      return InvalidArgument(context, "C ", runtime::ShapeToString(context.inputs[2].shape),
                             " does not broadcast to ", runtime::ShapeToString(out));
    }
    c_plan = MakeBroadcastPlan(out, {context.inputs[2].shape});
  }
  // Small products with constant B: B packed once as alpha * op(B) [K,N] for the small kernel.
  std::shared_ptr<std::vector<float>> packed;
  const float* b_data = static_cast<const float*>(context.inputs[1].data);
  if (b_data != nullptr && !trans_a && UseSmallGemm(m, n, k)) {
    packed = std::make_shared<std::vector<float>>(static_cast<size_t>(k * n));
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < n; ++j) {
        (*packed)[kk * n + j] = alpha * (trans_b ? b_data[j * b[1] + kk] : b_data[kk * b[1] + j]);
      }
    }
  }
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    UseIntraOpThreads(threads);
    float* y = static_cast<float*>(args.outputs[0]);
    if (has_c) {
      const float* c = static_cast<const float*>(args.inputs[2]);
      const int64_t s = c_plan.strides[0].back();
      ForEachRow(c_plan, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] = c[offs[0] + i * s];
      });
    }
    if (packed != nullptr) {
      if (!has_c) {
        std::fill(y, y + m * n, 0.0f);
      } else if (beta != 1.0f) {
        for (int64_t i = 0; i < m * n; ++i) y[i] *= beta;
      }
      SmallGemmAccumulate(m, n, k, static_cast<const float*>(args.inputs[0]), a[1], packed->data(),
                          n, y, n);
      return absl::OkStatus();
    }
    return Sgemm(trans_a != 0, trans_b != 0, m, n, k, alpha,
                 static_cast<const float*>(args.inputs[0]), a[1],
                 static_cast<const float*>(args.inputs[1]), b[1], has_c ? beta : 0.0f, y, n);
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMatMul(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kFloat32}));
  Shape a = context.inputs[0].shape;
  Shape b = context.inputs[1].shape;
  if (a.empty() || b.empty()) {
    return InvalidArgument(context, "operands ", runtime::ShapeToString(a), " and ",
                           runtime::ShapeToString(b), " must have rank >= 1");
  }
  const bool a_vector = a.size() == 1;
  const bool b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  const int64_t m = a[a.size() - 2];
  const int64_t k = a.back();
  const int64_t n = b.back();
  if (b[b.size() - 2] != k) {
    return InvalidArgument(context, "operands ", runtime::ShapeToString(context.inputs[0].shape),
                           " and ", runtime::ShapeToString(context.inputs[1].shape),
                           " do not multiply");
  }
  const Shape a_batch(a.begin(), a.end() - 2);
  const Shape b_batch(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return InvalidArgument(context, "batch dims of ",
                           runtime::ShapeToString(context.inputs[0].shape), " and ",
                           runtime::ShapeToString(context.inputs[1].shape), " do not broadcast");
  }
  const int threads = context.intra_op_threads;
  Shape out = *batch;
  if (!a_vector) out.push_back(m);
  if (!b_vector) out.push_back(n);
  const bool b_single = runtime::NumElements(b_batch) == 1;
  const bool a_full = a_batch.size() == batch->size() && a_batch == *batch;
  if (b_single && a_full) {
    // One GEMM: A's batch folds into its rows.
    const int64_t rows = runtime::NumElements(*batch) * m;
    const bool small = UseSmallGemm(rows, n, k);
    return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
      UseIntraOpThreads(threads);
      if (small) {
        float* y = static_cast<float*>(args.outputs[0]);
        std::fill(y, y + rows * n, 0.0f);
        SmallGemmAccumulate(rows, n, k, static_cast<const float*>(args.inputs[0]), k,
                            static_cast<const float*>(args.inputs[1]), n, y, n);
        return absl::OkStatus();
      }
      return Sgemm(false, false, rows, n, k, 1.0f, static_cast<const float*>(args.inputs[0]), k,
                   static_cast<const float*>(args.inputs[1]), n, 0.0f,
                   static_cast<float*>(args.outputs[0]), n);
    });
  }
  const BroadcastPlan plan = MakeBroadcastPlan(*batch, {a_batch, b_batch});
  const bool small = UseSmallGemm(m, n, k);
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    UseIntraOpThreads(threads);
    const float* pa = static_cast<const float*>(args.inputs[0]);
    const float* pb = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t sa = plan.strides[0].back();
    const int64_t sb = plan.strides[1].back();
    absl::Status status;
    ForEachRow(plan, [&](int64_t at, const int64_t* offs, int64_t len) {
      for (int64_t i = 0; i < len && status.ok(); ++i) {
        if (small) {
          float* yi = y + (at + i) * m * n;
          std::fill(yi, yi + m * n, 0.0f);
          SmallGemmAccumulate(m, n, k, pa + (offs[0] + i * sa) * m * k, k,
                              pb + (offs[1] + i * sb) * k * n, n, yi, n);
          continue;
        }
        status = Sgemm(false, false, m, n, k, 1.0f, pa + (offs[0] + i * sa) * m * k, k,
                       pb + (offs[1] + i * sb) * k * n, n, 0.0f, y + (at + i) * m * n, n);
      }
    });
    return status;
  });
}

enum class Activation { kNone, kRelu, kTanh, kSigmoid, kClip };

// Applies `act` in place to y[0, n).
void Activate(Activation act, float lo, float hi, float* y, int64_t n) {
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      break;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
      break;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const float x = y[i];
        if (x >= 0) {
          y[i] = 1.0f / (1.0f + std::exp(-x));
        } else {
          const float e = std::exp(x);
          y[i] = e / (1.0f + e);
        }
      }
      break;
    case Activation::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], lo), hi);
      break;
  }
}

// Gemm, then the activation, then the residual add, in one step.
class FusedGemmKernel final : public PreparedKernel {
 public:
  // `residual`: R's broadcast over Y, or nullopt without R.
  FusedGemmKernel(std::unique_ptr<PreparedKernel> gemm, Activation act, float lo, float hi,
                  std::optional<BroadcastPlan> residual)
      : gemm_(std::move(gemm)),
        act_(act),
        lo_(lo),
        hi_(hi),
        residual_(std::move(residual)),
        count_(runtime::NumElements(gemm_->outputs()[0].shape)) {}

  absl::string_view op() const override { return kFusedGemmOp; }
  const std::vector<TensorDesc>& outputs() const override { return gemm_->outputs(); }
  size_t workspace_bytes() const override { return gemm_->workspace_bytes(); }

  absl::Status Run(const KernelArgs& args) const override {
    RETURN_IF_ERROR(gemm_->Run(args));
    float* y = static_cast<float*>(args.outputs[0]);
    Activate(act_, lo_, hi_, y, count_);
    if (residual_.has_value()) {
      const float* r = static_cast<const float*>(args.inputs[3]);
      const int64_t s = residual_->strides[0].back();
      ForEachRow(*residual_, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] += r[offs[0] + i * s];
      });
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PreparedKernel> gemm_;
  Activation act_;
  float lo_, hi_;
  std::optional<BroadcastPlan> residual_;
  int64_t count_;
};

// kFusedGemmOp: inputs A, B, C (optional), R (optional); Y = act(Gemm(A, B, C)) + R.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedGemm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(std::string name, attrs.GetString("activation", ""));
  ASSIGN_OR_RETURN(float lo, attrs.GetFloat("clip_min", -INFINITY));
  ASSIGN_OR_RETURN(float hi, attrs.GetFloat("clip_max", INFINITY));
  Activation act;
  if (name.empty()) {
    act = Activation::kNone;
  } else if (name == "Relu") {
    act = Activation::kRelu;
  } else if (name == "Tanh") {
    act = Activation::kTanh;
  } else if (name == "Sigmoid") {
    act = Activation::kSigmoid;
  } else if (name == "Clip") {
    act = Activation::kClip;
  } else {
    return InvalidArgument(context, "activation \"", name, "\" is not supported");
  }
  const bool residual = context.inputs.size() == 4;
  PrepareContext gemm = context;
  gemm.inputs = context.inputs.subspan(0, std::min<size_t>(context.inputs.size(), 3));
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> kernel, PrepareGemm(gemm));
  std::optional<BroadcastPlan> plan;
  if (residual) {
    if (!HasInput(context, 3)) return InvalidArgument(context, "the residual input is absent");
    RETURN_IF_ERROR(ExpectType(context, 3, {DataType::kFloat32}));
    const Shape& y = kernel->outputs()[0].shape;
    auto shape = BroadcastShapes(context.inputs[3].shape, y);
    if (!shape.ok() || *shape != y) {
      return InvalidArgument(context, "residual ", runtime::ShapeToString(context.inputs[3].shape),
                             " does not broadcast to the output's shape ",
                             runtime::ShapeToString(y));
    }
    plan = MakeBroadcastPlan(y, {context.inputs[3].shape});
  }
  return std::make_unique<FusedGemmKernel>(std::move(kernel), act, lo, hi, std::move(plan));
}

}  // namespace

absl::Status RegisterGemmKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Gemm", &PrepareGemm));
  RETURN_IF_ERROR(registry->Register("MatMul", &PrepareMatMul));
  RETURN_IF_ERROR(registry->Register(kFusedGemmOp, &PrepareFusedGemm));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
