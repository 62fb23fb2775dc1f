// com.reprise.FusedChannelNorm (fused_ops.h): a layer normalisation over the channels of each
// position of [N, C, ...], which image-restoration and segmentation networks (NAFNet's
// LayerNorm2d among them) write out as ReduceMean over axis 1, Sub, Pow, ReduceMean, Add,
// Sqrt, Div, Mul and Add: nine passes over the tensor. Here each block of up to kColumns
// positions of one image is read three times while it is in the cache (the mean over C, the
// mean of the squared deviations from it, as the graph computes them, then Y) and written once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// Positions per block: C rows of 256 floats (1 KiB each) stay in L1 / L2 across the passes.
constexpr int64_t kColumns = 256;

struct ChannelNormShape {
  int64_t channels = 0;
  int64_t positions = 0;  // per image: the product of the dims after C
  float epsilon = 0.0f;
};

#define REPRISE_CHANNEL_NORM_ARGS                                                             \
  const ChannelNormShape &s, const float *x, const float *scale, const float *bias, float *y, \
      int64_t begin, int64_t end

// Blocks [begin, end) (image n's block b is n * blocks + b).
template <typename V>
__attribute__((always_inline)) inline void ChannelNormBlocks(REPRISE_CHANNEL_NORM_ARGS) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  alignas(64) float mean[kColumns];
  alignas(64) float rstd[kColumns];
  const int64_t blocks = (s.positions + kColumns - 1) / kColumns;
  const float inv_c = 1.0f / static_cast<float>(s.channels);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t n = item / blocks, p0 = item % blocks * kColumns;
    const int64_t len = std::min(kColumns, s.positions - p0);
    const int64_t body = len / kLanes * kLanes;
    const int64_t image = n * s.channels * s.positions + p0;
    const float* xi = x + image;
    float* yi = y + image;
    std::fill(mean, mean + len, 0.0f);
    std::fill(rstd, rstd + len, 0.0f);
    for (int64_t c = 0; c < s.channels; ++c) {
      const float* row = xi + c * s.positions;
      for (int64_t i = 0; i < body; i += kLanes) {
        V a, m;
        LoadFloats(row + i, &a);
        LoadFloats(mean + i, &m);
        StoreFloats(mean + i, m + a);
      }
      for (int64_t i = body; i < len; ++i) mean[i] += row[i];
    }
    for (int64_t i = 0; i < len; ++i) mean[i] *= inv_c;
    for (int64_t c = 0; c < s.channels; ++c) {
      const float* row = xi + c * s.positions;
      for (int64_t i = 0; i < body; i += kLanes) {
        V a, m, v;
        LoadFloats(row + i, &a);
        LoadFloats(mean + i, &m);
        LoadFloats(rstd + i, &v);
        const V d = a - m;
        StoreFloats(rstd + i, v + d * d);
      }
      for (int64_t i = body; i < len; ++i) {
        const float d = row[i] - mean[i];
        rstd[i] += d * d;
      }
    }
    for (int64_t i = 0; i < len; ++i) rstd[i] = 1.0f / std::sqrt(rstd[i] * inv_c + s.epsilon);
    for (int64_t c = 0; c < s.channels; ++c) {
      const float* row = xi + c * s.positions;
      float* out = yi + c * s.positions;
      const float g = scale[c], b = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t i = 0; i < body; i += kLanes) {
        V a, m, r;
        LoadFloats(row + i, &a);
        LoadFloats(mean + i, &m);
        LoadFloats(rstd + i, &r);
        StoreFloats(out + i, (a - m) * r * g + b);
      }
      for (int64_t i = body; i < len; ++i) out[i] = (row[i] - mean[i]) * rstd[i] * g + b;
    }
  }
}

__attribute__((target("avx512f"))) void ChannelNormAvx512(REPRISE_CHANNEL_NORM_ARGS) {
  ChannelNormBlocks<Floats16>(s, x, scale, bias, y, begin, end);
}
__attribute__((target("avx2,fma"))) void ChannelNormAvx2(REPRISE_CHANNEL_NORM_ARGS) {
  ChannelNormBlocks<Floats8>(s, x, scale, bias, y, begin, end);
}
void ChannelNormBaseline(REPRISE_CHANNEL_NORM_ARGS) {
  ChannelNormBlocks<Floats4>(s, x, scale, bias, y, begin, end);
}
#undef REPRISE_CHANNEL_NORM_ARGS

// Inputs X [N, C, ...] (rank 3 or more), scale and (optional) bias of C values each, in any
// shape; attribute "epsilon".
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareChannelNorm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  const Shape& shape = context.inputs[0].shape;
  if (shape.size() < 3) {
    return InvalidArgument(context, "X must have rank 3 or more, not ",
                           runtime::ShapeToString(shape));
  }
  ChannelNormShape s;
  ASSIGN_OR_RETURN(s.epsilon, AttrsOf(context).GetFloat("epsilon", 1e-5f));
  if (!(s.epsilon >= 0.0f)) return InvalidArgument(context, "epsilon must be >= 0");
  s.channels = shape[1];
  s.positions = 1;
  for (size_t i = 2; i < shape.size(); ++i) s.positions *= shape[i];
  const bool has_bias = HasInput(context, 2);
  // Scale and bias hold one value per channel and, right-aligned to X's dims as a Mul or Add
  // broadcasts them, vary along axis 1 only ([C], [1, C, 1, 1], [C, 1, 1] for rank 4).
  for (size_t i = 1; i < (has_bias ? 3u : 2u); ++i) {
    const Shape& p = context.inputs[i].shape;
    bool aligned = p.size() <= shape.size();
    for (size_t k = 0; aligned && k < p.size(); ++k) {
      aligned = p[k] == 1 || shape.size() - p.size() + k == 1;
    }
    if (runtime::NumElements(p) != s.channels || (p.size() > 1 && !aligned)) {
      return InvalidArgument(context, "input ", i, " shape ", runtime::ShapeToString(p),
                             " does not hold one value per channel along axis 1 of ",
                             runtime::ShapeToString(shape));
    }
  }
  const int64_t images = shape[0];
  const int64_t blocks = (s.positions + kColumns - 1) / kColumns;
  const int threads = context.intra_op_threads;
  // Three reads and a write of a block, about a nanosecond per value.
  const double block_cost =
      static_cast<double>(s.channels) * static_cast<double>(std::min(kColumns, s.positions)) * 1.0;
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    static const auto fn =
        PickForThisCpu(&ChannelNormAvx512, &ChannelNormAvx2, &ChannelNormBaseline);
    if (s.channels == 0 || s.positions == 0) return absl::OkStatus();
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    ParallelFor(
        images * blocks, threads, block_cost,
        [&](int64_t begin, int64_t end) { fn(s, x, scale, bias, y, begin, end); }, 1);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterChannelNormKernels(runtime::KernelRegistry* registry) {
  return registry->Register(kFusedChannelNormOp, &PrepareChannelNorm);
}

}  // namespace reprise::kernels::cpu
