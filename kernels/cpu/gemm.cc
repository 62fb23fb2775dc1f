// Gemm and MatMul (float32) on oneDNN's row-major sgemm, and their fused forms; Det. MatMul
// broadcasts batch dims and accepts 1-D operands; when B has no batch, all of A's batch is one
// GEMM.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.h"
#include "kernels/cpu/gemm.h"

#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/small_gemm.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// A Gemm node's operands and attributes, checked: Y[m,n] = alpha * op(A) op(B) + beta * C.
struct GemmSpec {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  int64_t m = 0, n = 0, k = 0;
  bool has_c = false;    // C present and beta not 0
  BroadcastPlan c_plan;  // C over Y, when has_c
  Shape out;
};

absl::StatusOr<GemmSpec> ParseGemm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  RETURN_IF_ERROR(ExpectRank(context, 0, 2));
  RETURN_IF_ERROR(ExpectRank(context, 1, 2));
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(int64_t trans_a, attrs.GetInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, attrs.GetInt("transB", 0));
  GemmSpec g;
  g.trans_a = trans_a != 0;
  g.trans_b = trans_b != 0;
  ASSIGN_OR_RETURN(g.alpha, attrs.GetFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(g.beta, attrs.GetFloat("beta", 1.0f));
  const Shape& a = context.inputs[0].shape;
  const Shape& b = context.inputs[1].shape;
  g.m = g.trans_a ? a[1] : a[0];
  g.k = g.trans_a ? a[0] : a[1];
  const int64_t kb = g.trans_b ? b[1] : b[0];
  g.n = g.trans_b ? b[0] : b[1];
  if (g.k != kb) {
    return InvalidArgument(context, "A ", runtime::ShapeToString(a), " (transA=", trans_a,
                           ") and B ", runtime::ShapeToString(b), " (transB=", trans_b,
                           ") do not multiply");
  }
  g.out = {g.m, g.n};
  g.has_c = HasInput(context, 2) && g.beta != 0.0f;
  if (g.has_c) {
    auto shape = BroadcastShapes(context.inputs[2].shape, g.out);
    if (!shape.ok() || *shape != g.out) {
      return InvalidArgument(context, "C ", runtime::ShapeToString(context.inputs[2].shape),
                             " does not broadcast to ", runtime::ShapeToString(g.out));
    }
    g.c_plan = MakeBroadcastPlan(g.out, {context.inputs[2].shape});
  }
  return g;
}

// How a tensor of `shape` lies over Y (`out`, rows of n = out.back() values) for the small
// kernel's stores: 0 when it is one row of n values repeated over Y's rows, n when it has Y's
// shape, -1 otherwise (leading 1s aside).
int64_t RowStrideOver(const Shape& shape, const Shape& out) {
  const int64_t n = out.empty() ? 1 : out.back();
  if (shape.empty() || shape.back() != n) return -1;
  if (runtime::NumElements(shape) == n) return 0;
  auto skip_ones = [](const Shape& s) {
    return std::find_if(s.begin(), s.end(), [](int64_t d) { return d != 1; });
  };
  return std::equal(skip_ones(shape), shape.end(), skip_ones(out), out.end()) ? n : -1;
}

// The small kernel's Gemm when B is known at Prepare and the product is small (B packed once
// as alpha * op(B) [K,N] in the kernel's panels); its stores take `act` (with lo, hi) and, with
// `residual` (input 3's shape), add the residual. Null where it does not apply: A transposed, B not
// known, a product past the small kernel, or a residual neither Y's shape nor one row.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSmallGemm(const PrepareContext& context,
                                                                 const GemmSpec& g,
                                                                 SmallTail::Act act, float lo,
                                                                 float hi, const Shape* residual) {
  const float* b_data = static_cast<const float*>(context.inputs[1].data);
  if (b_data == nullptr || g.trans_a || !UseSmallGemm(g.m, g.n, g.k)) return nullptr;
  const int64_t ldr = residual != nullptr ? RowStrideOver(*residual, g.out) : 0;
  if (ldr < 0) return nullptr;
  const int64_t m = g.m, n = g.n, k = g.k;
  const int64_t ldb = context.inputs[1].shape[1];
  auto packed = std::make_shared<std::vector<float>>(
      PackSmallGemmPanels(k, n, g.trans_b, b_data, ldb, g.alpha));
  // C as the sums' start: one row (scaled by beta at Prepare when known, read in place when
  // beta is 1), or else Y filled with beta * C before the product adds to it.
  const bool c_row = g.has_c && RowStrideOver(context.inputs[2].shape, g.out) == 0;
  const float* c_known = g.has_c ? static_cast<const float*>(context.inputs[2].data) : nullptr;
  std::shared_ptr<std::vector<float>> bias;
  if (c_row && c_known != nullptr) {
    bias = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) (*bias)[j] = g.beta * c_known[j];
  }
  const bool c_in_place = c_row && bias == nullptr && g.beta == 1.0f;
  const bool c_fill = g.has_c && bias == nullptr && !c_in_place;
  const int64_t lda = context.inputs[0].shape[1];
  const GemmSpec spec = g;
  const bool has_residual = residual != nullptr;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, g.out)}, [=](const KernelArgs& args) {
    UseIntraOpThreads(threads);
    float* y = static_cast<float*>(args.outputs[0]);
    SmallTail t;
    t.act = act;
    t.lo = lo;
    t.hi = hi;
    if (bias != nullptr) t.bias = bias->data();
    if (c_in_place) t.bias = static_cast<const float*>(args.inputs[2]);
    if (c_fill) {
      const float* c = static_cast<const float*>(args.inputs[2]);
      const int64_t s = spec.c_plan.strides[0].back();
      const float beta = spec.beta;
      ForEachRowIn(spec.c_plan, 0, m * n, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] = beta * c[offs[0] + i * s];
      });
      t.accumulate = true;
    }
    if (has_residual) {
      t.residual = static_cast<const float*>(args.inputs[3]);
      t.ldr = ldr;
    }
    SmallGemmOnPanels(m, n, k, static_cast<const float*>(args.inputs[0]), lda, packed->data(), y, n,
                      t);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGemm(const PrepareContext& context) {
  ASSIGN_OR_RETURN(const GemmSpec g, ParseGemm(context));
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> small,
                   PrepareSmallGemm(context, g, SmallTail::Act::kNone, -INFINITY, INFINITY,
                                    /*residual=*/nullptr));
  if (small != nullptr) return small;
  const Shape& a = context.inputs[0].shape;
  const Shape& b = context.inputs[1].shape;
  const float* b_data = static_cast<const float*>(context.inputs[1].data);
  const int64_t m = g.m, n = g.n, k = g.k;
  const bool has_c = g.has_c;
  const float beta = g.beta;
  const BroadcastPlan c_plan = g.c_plan;
  const int threads = context.intra_op_threads;
  // A constant B (a layer's weights) read packed.
  std::shared_ptr<const PackedProduct> packed_b;
  if (!g.trans_a && g.alpha == 1.0f) {
    packed_b = PackedProduct::Make(context, m, n, k, a[1], g.trans_b, b_data, b[1]);
  }
  if (packed_b != nullptr) {
    const size_t scratch = packed_b->scratch_bytes();
    return MakeKernel(
        context, {Desc(DataType::kFloat32, g.out)},
        [=](const KernelArgs& args) {
          UseIntraOpThreads(threads);
          float* y = static_cast<float*>(args.outputs[0]);
          RETURN_IF_ERROR(
              packed_b->Run(static_cast<const float*>(args.inputs[0]), y, args.workspace));
          if (has_c) {
            const float* c = static_cast<const float*>(args.inputs[2]);
            const int64_t s = c_plan.strides[0].back();
            ForEachRowParallel(c_plan, threads, 1.0,
                               [&](int64_t at, const int64_t* offs, int64_t len) {
                                 for (int64_t i = 0; i < len; ++i) {
                                   y[at + i] += beta * c[offs[0] + i * s];
                                 }
                               });
          }
          return absl::OkStatus();
        },
        scratch);
  }
  const bool trans_a = g.trans_a, trans_b = g.trans_b;
  const float alpha = g.alpha;
  return MakeKernel(context, {Desc(DataType::kFloat32, g.out)}, [=](const KernelArgs& args) {
    UseIntraOpThreads(threads);
    float* y = static_cast<float*>(args.outputs[0]);
    if (has_c) {
      const float* c = static_cast<const float*>(args.inputs[2]);
      const int64_t s = c_plan.strides[0].back();
      ForEachRowParallel(c_plan, threads, 1.0, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] = c[offs[0] + i * s];
      });
    }
    return Sgemm(trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(args.inputs[0]), a[1],
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
    // A constant B (the weights of a linear layer without bias, which no fusion takes) read
    // packed, as Gemm and FusedMatMul read theirs: sgemm packed it again on every call (one
    // thread, 197 x 768 by 768 x 768: 1.43-1.48 ms, ORT 1.28).
    const float* b_data = static_cast<const float*>(context.inputs[1].data);
    std::shared_ptr<const PackedProduct> packed;
    if (!small && !b_vector && b_data != nullptr) {
      packed = PackedProduct::Make(context, rows, n, k, k, false, b_data, n);
    }
    if (packed != nullptr) {
      return MakeKernel(
          context, {Desc(DataType::kFloat32, out)},
          [=](const KernelArgs& args) {
            UseIntraOpThreads(threads);
            return packed->Run(static_cast<const float*>(args.inputs[0]),
                               static_cast<float*>(args.outputs[0]), args.workspace);
          },
          packed->scratch_bytes());
    }
    return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
      UseIntraOpThreads(threads);
      if (small) {
        SmallGemm(rows, n, k, static_cast<const float*>(args.inputs[0]), k,
                  static_cast<const float*>(args.inputs[1]), n,
                  static_cast<float*>(args.outputs[0]), n, SmallTail{});
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
    return ForEachProductRange(plan.count, m * n * k, threads, [&](int64_t first, int64_t end) {
      absl::Status status;
      ForEachRowIn(plan, first, end, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len && status.ok(); ++i) {
          if (small) {
            SmallGemm(m, n, k, pa + (offs[0] + i * sa) * m * k, k, pb + (offs[1] + i * sb) * k * n,
                      n, y + (at + i) * m * n, n, SmallTail{});
            continue;
          }
          status = Sgemm(false, false, m, n, k, 1.0f, pa + (offs[0] + i * sa) * m * k, k,
                         pb + (offs[1] + i * sb) * k * n, n, 0.0f, y + (at + i) * m * n, n);
        }
      });
      return status;
    });
  });
}

enum class Activation { kNone, kRelu, kTanh, kSigmoid, kClip, kGelu, kGeluTanh };

// Applies `act` in place to y[0, n).
void Activate(Activation act, float lo, float hi, float* y, int64_t n) {
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      break;
    case Activation::kTanh:
      TanhArray(y, y, n);
      break;
    case Activation::kSigmoid:
      SigmoidArray(y, y, n);
      break;
    case Activation::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], lo), hi);
      break;
    case Activation::kGelu:
    case Activation::kGeluTanh:
      Gelu(y, y, n, act == Activation::kGeluTanh);
      break;
  }
}

// Y[begin, end) = act(Y + C) + R, a cache-sized chunk at a time; C and R (null when absent) are
// read through their broadcast plans over Y.
void EpilogueRange(float* y, int64_t begin, int64_t end, const BroadcastPlan* bias, const float* c,
                   Activation act, float lo, float hi, const BroadcastPlan* residual,
                   const float* r) {
  if (bias == nullptr && act == Activation::kNone && residual == nullptr) return;
  constexpr int64_t kChunk = 8192;
  for (int64_t first = begin; first < end; first += kChunk) {
    const int64_t last = std::min(end, first + kChunk);
    if (bias != nullptr) {
      const int64_t s = bias->strides[0].back();
      ForEachRowIn(*bias, first, last, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] += c[offs[0] + i * s];
      });
    }
    Activate(act, lo, hi, y + first, last - first);
    if (residual != nullptr) {
      const int64_t s = residual->strides[0].back();
      ForEachRowIn(*residual, first, last, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len; ++i) y[at + i] += r[offs[0] + i * s];
      });
    }
  }
}

// The small kernel's form of `act`: none for the activations its stores do not take.
std::optional<SmallTail::Act> SmallTailAct(Activation act) {
  switch (act) {
    case Activation::kNone:
      return SmallTail::Act::kNone;
    case Activation::kRelu:
      return SmallTail::Act::kRelu;
    case Activation::kClip:
      return SmallTail::Act::kClip;
    default:
      return std::nullopt;
  }
}

// EpilogueRange's cost per element for ParallelFor: an add or two, more with a transcendental.
double EpilogueCost(Activation act) {
  return act == Activation::kNone || act == Activation::kRelu || act == Activation::kClip ? 1.0
                                                                                          : 8.0;
}

// The "activation" attribute of a fused node ("Gelu" only where `allow_gelu`, with its
// "approximate" attribute).
absl::StatusOr<Activation> ParseActivation(const PrepareContext& context, bool allow_gelu) {
  const Attributes& attrs = AttrsOf(context);
  const absl::StatusOr<std::string> name = attrs.GetString("activation", "");
  if (!name.ok()) return name.status();
  const absl::string_view n = *name;
  if (n.empty()) return Activation::kNone;
  if (n == "Relu") return Activation::kRelu;
  if (n == "Tanh") return Activation::kTanh;
  if (n == "Sigmoid") return Activation::kSigmoid;
  if (n == "Clip") return Activation::kClip;
  if (n == "Gelu" && allow_gelu) {
    const absl::StatusOr<std::string> form = attrs.GetString("approximate", "none");
    if (!form.ok()) return form.status();
    if (*form == "none") return Activation::kGelu;
    if (*form == "tanh") return Activation::kGeluTanh;
    return InvalidArgument(context, "Gelu approximate \"", *form, "\" is not supported");
  }
  return InvalidArgument(context, "activation \"", n, "\" is not supported");
}

// Gemm, then the activation, then the residual add, in one step.
class FusedGemmKernel final : public PreparedKernel {
 public:
  // `residual`: R's broadcast over Y, or nullopt without R.
  FusedGemmKernel(std::unique_ptr<PreparedKernel> gemm, Activation act, float lo, float hi,
                  std::optional<BroadcastPlan> residual, int threads)
      : gemm_(std::move(gemm)),
        act_(act),
        lo_(lo),
        hi_(hi),
        residual_(std::move(residual)),
        count_(runtime::NumElements(gemm_->outputs()[0].shape)),
        threads_(threads) {}

  absl::string_view op() const override { return kFusedGemmOp; }
  const std::vector<TensorDesc>& outputs() const override { return gemm_->outputs(); }
  size_t workspace_bytes() const override { return gemm_->workspace_bytes(); }

  uint64_t settling_runs() const override { return gemm_->settling_runs(); }

  absl::Status Run(const KernelArgs& args) const override {
    RETURN_IF_ERROR(gemm_->Run(args));
    float* y = static_cast<float*>(args.outputs[0]);
    const BroadcastPlan* residual = residual_.has_value() ? &*residual_ : nullptr;
    const float* r = residual != nullptr ? static_cast<const float*>(args.inputs[3]) : nullptr;
    ParallelFor(count_, threads_, EpilogueCost(act_), [&](int64_t begin, int64_t end) {
      EpilogueRange(y, begin, end, nullptr, nullptr, act_, lo_, hi_, residual, r);
    });
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PreparedKernel> gemm_;
  Activation act_;
  float lo_, hi_;
  std::optional<BroadcastPlan> residual_;
  int64_t count_;
  int threads_;
};

// kFusedGemmOp: inputs A, B, C (optional), R (optional); Y = act(Gemm(A, B, C)) + R.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedGemm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(float lo, attrs.GetFloat("clip_min", -INFINITY));
  ASSIGN_OR_RETURN(float hi, attrs.GetFloat("clip_max", INFINITY));
  ASSIGN_OR_RETURN(Activation act, ParseActivation(context, /*allow_gelu=*/false));
  const bool residual = context.inputs.size() == 4;
  PrepareContext gemm = context;
  gemm.inputs = context.inputs.subspan(0, std::min<size_t>(context.inputs.size(), 3));
  ASSIGN_OR_RETURN(const GemmSpec g, ParseGemm(gemm));
  std::optional<BroadcastPlan> plan;
  if (residual) {
    if (!HasInput(context, 3)) return InvalidArgument(context, "the residual input is absent");
    RETURN_IF_ERROR(ExpectType(context, 3, {DataType::kFloat32}));
    auto shape = BroadcastShapes(context.inputs[3].shape, g.out);
    if (!shape.ok() || *shape != g.out) {
      return InvalidArgument(context, "residual ", runtime::ShapeToString(context.inputs[3].shape),
                             " does not broadcast to the output's shape ",
                             runtime::ShapeToString(g.out));
    }
    plan = MakeBroadcastPlan(g.out, {context.inputs[3].shape});
  }
  // A small product with a Relu or Clip (or none) does the whole step in its stores.
  if (const std::optional<SmallTail::Act> tail = SmallTailAct(act)) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<PreparedKernel> small,
        PrepareSmallGemm(gemm, g, *tail, lo, hi, residual ? &context.inputs[3].shape : nullptr));
    if (small != nullptr) return small;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> kernel, PrepareGemm(gemm));
  return std::make_unique<FusedGemmKernel>(std::move(kernel), act, lo, hi, std::move(plan),
                                           context.intra_op_threads);
}

// One operand of kFusedMatMulOp as the product sees it: the logical shape (after the folded
// Transpose) and each logical axis's element stride in the stored tensor.
struct MatOperand {
  Shape shape;
  std::vector<int64_t> strides;
};

// `shape` viewed through `perm` (empty: none). Error unless perm is a permutation of the axes.
absl::StatusOr<MatOperand> ViewOperand(const PrepareContext& context, const Shape& shape,
                                       const std::vector<int64_t>& perm, const char* which) {
  MatOperand op;
  const std::vector<int64_t> strides = ContiguousStrides(shape);
  if (perm.empty()) return MatOperand{shape, strides};
  std::vector<bool> seen(shape.size(), false);
  if (perm.size() != shape.size()) {
    return InvalidArgument(context, which, " perm has ", perm.size(), " axes, the operand ",
                           runtime::ShapeToString(shape));
  }
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(shape.size()) || seen[p]) {
      return InvalidArgument(context, which, " perm is not a permutation of ", shape.size(),
                             " axes");
    }
    seen[p] = true;
    op.shape.push_back(shape[p]);
    op.strides.push_back(strides[p]);
  }
  return op;
}

// Y = act(alpha * op(A) op(B) + C) + R over MatMul's batch broadcasting; each product is one
// sgemm with A and B read in place through their strides (a folded Transpose costs nothing).
class FusedMatMulKernel final : public PreparedKernel {
 public:
  struct Params {
    int64_t m = 0, n = 0, k = 0;
    bool trans_a = false, trans_b = false;
    int64_t lda = 0, ldb = 0;
    int64_t batch = 1;         // products
    BroadcastPlan batch_plan;  // over the batch dims: A's and B's element offsets
    bool fold_rows = false;    // one product of batch * m rows (B has no batch)
    float alpha = 1.0f;
    std::optional<BroadcastPlan> bias, residual;
    Activation act = Activation::kNone;
    float lo = -INFINITY, hi = INFINITY;
    int threads = 1;
    std::shared_ptr<const PackedProduct> packed;  // the folded product with a constant B
    // The folded small product's constant B in the small kernel's panels (PackSmallGemmPanels).
    std::shared_ptr<const std::vector<float>> small_panels;
    // The folded product on the small kernel with the epilogue in its stores: the bias one row,
    // the activation Relu, Clip or none, the residual Y's shape or one row (rows residual_ld
    // apart).
    bool small_fused = false;
    SmallTail::Act small_act = SmallTail::Act::kNone;
    int64_t residual_ld = 0;
    // Products of a batch whose B is read transposed with its rows a multiple of
    // kAliasingRows floats apart: each B is first copied to rows of k floats in the running
    // thread's part of the workspace (GatheredProduct).
    bool gather_b = false;
  };

  FusedMatMulKernel(Params p, Shape out) : p_(std::move(p)) {
    outputs_.push_back(Desc(DataType::kFloat32, std::move(out)));
  }

  absl::string_view op() const override { return kFusedMatMulOp; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override {
    const size_t gathered =
        p_.gather_b ? static_cast<size_t>(std::max(p_.threads, 1) * p_.n * p_.k) * sizeof(float)
                    : 0;
    return std::max(p_.packed != nullptr ? p_.packed->scratch_bytes() : 0, gathered);
  }

  // Y[begin, end) = act(Y + C) + R.
  void Epilogue(const KernelArgs& args, int64_t begin, int64_t end) const {
    EpilogueRange(static_cast<float*>(args.outputs[0]), begin, end,
                  p_.bias.has_value() ? &*p_.bias : nullptr,
                  p_.bias.has_value() ? static_cast<const float*>(args.inputs[2]) : nullptr, p_.act,
                  p_.lo, p_.hi, p_.residual.has_value() ? &*p_.residual : nullptr,
                  p_.residual.has_value() ? static_cast<const float*>(args.inputs[3]) : nullptr);
  }

  // One product of `rows` rows into py (beta 0), B's rows (or, transposed, columns) ldb apart.
  absl::Status Product(int64_t rows, const float* pa, const float* pb, int64_t ldb,
                       float* py) const {
    if (!p_.trans_a && !p_.trans_b && p_.alpha == 1.0f && UseSmallGemm(rows, p_.n, p_.k)) {
      SmallGemm(rows, p_.n, p_.k, pa, p_.lda, pb, ldb, py, p_.n, SmallTail{});
      return absl::OkStatus();
    }
    return Sgemm(p_.trans_a, p_.trans_b, rows, p_.n, p_.k, p_.alpha, pa, p_.lda, pb, ldb, 0.0f, py,
                 p_.n);
  }

  // Product() of one product of the batch, with `gather_b` on B copied first to n rows of k
  // floats in this thread's n x k floats of the workspace.
  absl::Status GatheredProduct(void* workspace, const float* pa, const float* pb, float* py) const {
    const int slot = omp_get_thread_num();
    if (!p_.gather_b || workspace == nullptr || slot >= p_.threads) {
      return Product(p_.m, pa, pb, p_.ldb, py);
    }
    float* rows = static_cast<float*>(workspace) + slot * p_.n * p_.k;
    const size_t bytes = static_cast<size_t>(p_.k) * sizeof(float);
    for (int64_t j = 0; j < p_.n; ++j) std::memcpy(rows + j * p_.k, pb + j * p_.ldb, bytes);
    return Product(p_.m, pa, rows, p_.k, py);
  }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    const float* a = static_cast<const float*>(args.inputs[0]);
    const float* b = static_cast<const float*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    const int64_t mn = p_.m * p_.n;
    if (p_.small_fused) {
      SmallTail t;
      t.act = p_.small_act;
      t.lo = p_.lo;
      t.hi = p_.hi;
      if (p_.bias.has_value()) t.bias = static_cast<const float*>(args.inputs[2]);
      if (p_.residual.has_value()) {
        t.residual = static_cast<const float*>(args.inputs[3]);
        t.ldr = p_.residual_ld;
      }
      if (p_.small_panels != nullptr) {
        SmallGemmOnPanels(p_.batch * p_.m, p_.n, p_.k, a, p_.lda, p_.small_panels->data(), y, p_.n,
                          t);
      } else {
        SmallGemm(p_.batch * p_.m, p_.n, p_.k, a, p_.lda, b, p_.ldb, y, p_.n, t);
      }
      return absl::OkStatus();
    }
    if (p_.fold_rows) {
      if (p_.small_panels != nullptr) {
        SmallGemmOnPanels(p_.batch * p_.m, p_.n, p_.k, a, p_.lda, p_.small_panels->data(), y, p_.n,
                          SmallTail{});
      } else {
        RETURN_IF_ERROR(p_.packed != nullptr ? p_.packed->Run(a, y, args.workspace)
                                             : Product(p_.batch * p_.m, a, b, p_.ldb, y));
      }
      ParallelFor(p_.batch * mn, p_.threads, EpilogueCost(p_.act),
                  [&](int64_t begin, int64_t end) { Epilogue(args, begin, end); });
      return absl::OkStatus();
    }
    // Each product with its epilogue while its output is still in cache.
    const int64_t sa = p_.batch_plan.strides[0].back();
    const int64_t sb = p_.batch_plan.strides[1].back();
    return ForEachProductRange(p_.batch, mn * p_.k, p_.threads, [&](int64_t first, int64_t end) {
      absl::Status status;
      ForEachRowIn(p_.batch_plan, first, end, [&](int64_t at, const int64_t* offs, int64_t len) {
        for (int64_t i = 0; i < len && status.ok(); ++i) {
          const int64_t out = (at + i) * mn;
          status =
              GatheredProduct(args.workspace, a + offs[0] + i * sa, b + offs[1] + i * sb, y + out);
          if (status.ok()) Epilogue(args, out, out + mn);
        }
      });
      return status;
    });
  }

 private:
  Params p_;
  std::vector<TensorDesc> outputs_;
};

// kFusedMatMulOp (fused_ops.h).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedMatMul(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(std::vector<int64_t> perm_a, attrs.GetInts("perm_a", {}));
  ASSIGN_OR_RETURN(std::vector<int64_t> perm_b, attrs.GetInts("perm_b", {}));
  FusedMatMulKernel::Params p;
  ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("alpha", 1.0f));
  ASSIGN_OR_RETURN(p.lo, attrs.GetFloat("clip_min", -INFINITY));
  ASSIGN_OR_RETURN(p.hi, attrs.GetFloat("clip_max", INFINITY));
  ASSIGN_OR_RETURN(p.act, ParseActivation(context, /*allow_gelu=*/true));
  p.threads = context.intra_op_threads;
  ASSIGN_OR_RETURN(MatOperand a, ViewOperand(context, context.inputs[0].shape, perm_a, "A"));
  ASSIGN_OR_RETURN(MatOperand b, ViewOperand(context, context.inputs[1].shape, perm_b, "B"));
  if (a.shape.empty() || b.shape.empty()) {
    return InvalidArgument(context, "operands must have rank >= 1");
  }
  const bool a_vector = a.shape.size() == 1;
  const bool b_vector = b.shape.size() == 1;
  if (a_vector) {
    a.shape.insert(a.shape.begin(), 1);
    a.strides.insert(a.strides.begin(), a.shape.back());
  }
  if (b_vector) {
    b.shape.push_back(1);
    b.strides.push_back(1);
  }
  const size_t ra = a.shape.size(), rb = b.shape.size();
  p.m = a.shape[ra - 2];
  p.k = a.shape[ra - 1];
  p.n = b.shape[rb - 1];
  if (b.shape[rb - 2] != p.k) {
    return InvalidArgument(context, "operands ", runtime::ShapeToString(a.shape), " and ",
                           runtime::ShapeToString(b.shape), " do not multiply");
  }
  // Row-major sgemm needs each matrix's last axis (or, transposed, its row axis) contiguous.
  auto layout = [&](const MatOperand& op, size_t r, int64_t cols, bool* trans,
                    int64_t* ld) -> absl::Status {
    if (op.strides[r - 1] == 1 || op.shape[r - 1] == 1) {
      *trans = false;
      *ld = std::max<int64_t>({op.strides[r - 2], cols, 1});
    } else if (op.strides[r - 2] == 1 || op.shape[r - 2] == 1) {
      *trans = true;
      *ld = std::max<int64_t>({op.strides[r - 1], op.shape[r - 2], 1});
    } else {
      return Unimplemented(context, "a transpose that moves the last axis out of the last two");
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(layout(a, ra, p.k, &p.trans_a, &p.lda));
  RETURN_IF_ERROR(layout(b, rb, p.n, &p.trans_b, &p.ldb));
  const Shape a_batch(a.shape.begin(), a.shape.end() - 2);
  const Shape b_batch(b.shape.begin(), b.shape.end() - 2);
  auto batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return InvalidArgument(context, "batch dims of ", runtime::ShapeToString(a.shape), " and ",
                           runtime::ShapeToString(b.shape), " do not broadcast");
  }
  p.batch = runtime::NumElements(*batch);
  Shape out = *batch;
  if (!a_vector) out.push_back(p.m);
  if (!b_vector) out.push_back(p.n);
  p.fold_rows =
      perm_a.empty() && !p.trans_a && runtime::NumElements(b_batch) == 1 && a_batch == *batch;
  const float* b_data = static_cast<const float*>(context.inputs[1].data);
  if (p.fold_rows && p.alpha == 1.0f && !UseSmallGemm(p.batch * p.m, p.n, p.k)) {
    p.packed =
        PackedProduct::Make(context, p.batch * p.m, p.n, p.k, p.lda, p.trans_b, b_data, p.ldb);
  }
  if (p.fold_rows && p.alpha == 1.0f && UseSmallGemm(p.batch * p.m, p.n, p.k) &&
      b_data != nullptr && !b_vector) {
    p.small_panels = std::make_shared<const std::vector<float>>(
        PackSmallGemmPanels(p.k, p.n, p.trans_b, b_data, p.ldb));
  }
  // Read transposed with its rows a multiple of 2 KiB apart (the heads of an attention's keys,
  // [seq, heads, dh] read as [dh, seq] per head), B's columns fall into one or two of the L1
  // cache's sets and sgemm's reads of them miss: 32 products of 64 x 32 by 32 x 64, one thread,
  // took 243-257 us with rows 4 or 8 KiB apart, 186 us at 2 KiB and 124-134 us at 0.5, 1 or
  // 4.06 KiB; copied to rows of 32 floats first, 126-133 us (all rows). A constant B read
  // row-major takes the same cure at Prepare (packed_product.cc, kAliasingStride).
  constexpr int64_t kAliasingRows = 512;
  p.gather_b = !p.fold_rows && p.trans_b && p.ldb % kAliasingRows == 0 && p.k % kAliasingRows != 0;
  if (!p.fold_rows) {
    // Per batch axis, each operand's element stride (0 where it broadcasts).
    Shape dims = *batch;
    std::vector<std::vector<int64_t>> strides(2);
    for (size_t i = 0; i < dims.size(); ++i) {
      const size_t from_end = dims.size() - i;
      for (int o = 0; o < 2; ++o) {
        const MatOperand& op = o == 0 ? a : b;
        const size_t rank = op.shape.size() - 2;
        const bool has = from_end <= rank && op.shape[rank - from_end] != 1;
        strides[o].push_back(has ? op.strides[rank - from_end] : 0);
      }
    }
    if (dims.empty()) {
      dims = {1};
      strides = {{0}, {0}};
    }
    p.batch_plan = MakeStridedPlan(dims, std::move(strides));
  }
  auto epilogue = [&](size_t index, const char* what) -> absl::StatusOr<BroadcastPlan> {
    auto shape = BroadcastShapes(context.inputs[index].shape, out);
    if (!shape.ok() || *shape != out) {
      return InvalidArgument(
          context, what, " ", runtime::ShapeToString(context.inputs[index].shape),
          " does not broadcast to the output's shape ", runtime::ShapeToString(out));
    }
    return MakeBroadcastPlan(out, {context.inputs[index].shape});
  };
  if (HasInput(context, 2)) {
    ASSIGN_OR_RETURN(p.bias, epilogue(2, "bias"));
  }
  if (HasInput(context, 3)) {
    ASSIGN_OR_RETURN(p.residual, epilogue(3, "residual"));
  }
  const int64_t residual_ld =
      HasInput(context, 3) ? RowStrideOver(context.inputs[3].shape, out) : 0;
  if (p.fold_rows && !a_vector && !b_vector && (!p.trans_b || p.small_panels != nullptr) &&
      p.alpha == 1.0f && UseSmallGemm(p.batch * p.m, p.n, p.k) && SmallTailAct(p.act).has_value() &&
      (!HasInput(context, 2) || RowStrideOver(context.inputs[2].shape, out) == 0) &&
      residual_ld >= 0) {
    p.small_fused = true;
    p.small_act = *SmallTailAct(p.act);
    p.residual_ld = residual_ld;
  }
  return std::make_unique<FusedMatMulKernel>(std::move(p), std::move(out));
}

// Det of the trailing [M, M] matrices (float32, float64) by LU factorisation with partial
// pivoting, in double.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDet(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32, DataType::kFloat64}));
  const Shape& shape = context.inputs[0].shape;
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2]) {
    return InvalidArgument(context, "input must be [..., M, M], got ",
                           runtime::ShapeToString(shape));
  }
  const int64_t m = shape.back();
  Shape out(shape.begin(), shape.end() - 2);
  const int64_t count = runtime::NumElements(out);
  const DataType dtype = context.inputs[0].dtype;
  FunctionKernel::RunFn run;
  DispatchNumeric(dtype, [&]<typename T>() {
    run = [m, count](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t b = 0; b < count; ++b) {
        for (int64_t i = 0; i < m * m; ++i) a[i] = static_cast<double>(x[b * m * m + i]);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; ++c) {
          int64_t pivot = c;
          for (int64_t r = c + 1; r < m; ++r) {
            if (std::fabs(a[r * m + c]) > std::fabs(a[pivot * m + c])) pivot = r;
          }
          if (a[pivot * m + c] == 0) {
            det = 0;
            break;
          }
          if (pivot != c) {
            for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[pivot * m + k]);
            det = -det;
          }
          det *= a[c * m + c];
          for (int64_t r = c + 1; r < m; ++r) {
            const double f = a[r * m + c] / a[c * m + c];
            for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
          }
        }
        y[b] = static_cast<T>(det);
      }
      return absl::OkStatus();
    };
  });
  return MakeKernel(context, {Desc(dtype, out)}, std::move(run));
}

}  // namespace

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

absl::Status ForEachProductRange(int64_t count, int64_t macs, int threads,
                                 absl::FunctionRef<absl::Status(int64_t, int64_t)> products) {
  // Below about a million multiply-adds a product gains little from a second sgemm thread.
  constexpr int64_t kSmallProductMacs = int64_t{1} << 20;
  const bool split =
      threads > 1 && (count >= 2 * threads || (count >= threads && macs < kSmallProductMacs));
  if (!split) return products(0, count);
  const absl::Status status = ParallelForStatus(
      count, threads, static_cast<double>(std::max<int64_t>(macs, 1)) / 8.0,
      [&](int64_t i0, int64_t i1) {
        UseIntraOpThreads(1);
        return products(i0, i1);
      },
      /*grain=*/1);
  UseIntraOpThreads(threads);
  return status;
}

absl::Status RegisterGemmKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Gemm", &PrepareGemm));
  RETURN_IF_ERROR(registry->Register("MatMul", &PrepareMatMul));
  RETURN_IF_ERROR(registry->Register(kFusedGemmOp, &PrepareFusedGemm));
  RETURN_IF_ERROR(registry->Register(kFusedMatMulOp, &PrepareFusedMatMul));
  RETURN_IF_ERROR(registry->Register("Det", &PrepareDet));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
