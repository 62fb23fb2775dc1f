// Softmax, LogSoftmax and Hardmax (opset < 13: the input coerced to 2-D at `axis`; 13+: one
// axis), LayerNormalization (opset 17, with the optional Mean and InvStdDev outputs),
// BatchNormalization (inference), InstanceNormalization, LRN and MeanVarianceNormalization.
// float32 only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// Softmax (kLog: LogSoftmax) of `rows` contiguous rows of `dim` values each; a vector of V (the
// copy's register width, I its int counterpart) at a time, in three passes over the row (in
// L1): the maximum, e^(x - max) summed (and stored, for Softmax), then the scale by 1 / sum
// (LogSoftmax: x - max - ln(sum)). Lanes hold partial maxima and sums (the sums added into a
// double every 1024 values, so that long rows such as a language model's vocabulary keep
// float's accuracy); NaN is skipped by the maximum as by the scalar comparison, then
// propagates through e^x.
// The largest lane of v, or (kSum) the float sum of its lanes, by halving the lanes in turn (a
// tree of log2(lanes) steps rather than a chain of one step per lane).
template <typename V, bool kSum>
__attribute__((always_inline)) inline float ReduceLanes(const V& v) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  float a[kLanes];
  std::memcpy(a, &v, sizeof(v));
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) {
      a[i] = kSum ? a[i] + a[i + width] : (a[i + width] > a[i] ? a[i + width] : a[i]);
    }
  }
  return a[0];
}

template <typename V, typename I, bool kLog>
__attribute__((always_inline)) inline void SoftmaxRowsBody(const float* x, float* y, int64_t rows,
                                                           int64_t dim) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  const int64_t body = dim / kLanes * kLanes;
  // A row of at least one vector with a partial vector at its end ends with one whole vector
  // read at dim - kLanes: its lanes before `body` are the body's (kept out of the sum, written
  // again with the same values, not scaled twice). One comparison per select: two joined by `&`
  // are compiled lane by lane (vector_math.h). With scalar tails and one-lane-at-a-time
  // reductions, rows of 28 floats took 100 ns each (Softmax over [8, 32, 28, 28]: 720 us).
  const bool overlap = body < dim && dim >= kLanes;
  const int64_t last_at = dim - kLanes;
  I fresh{};  // lanes of the last vector past `body` (-1), the others 0
  for (int64_t j = 0; j < kLanes; ++j) fresh[j] = last_at + j >= body ? -1 : 0;
  for (int64_t o = 0; o < rows; ++o) {
    const float* __restrict p = x + o * dim;
    float* __restrict q = y + o * dim;
    V vmax = V{} - INFINITY;
    for (int64_t k = 0; k < body; k += kLanes) {
      V v;
      std::memcpy(&v, p + k, sizeof(v));
      vmax = v > vmax ? v : vmax;
    }
    V last{};
    if (overlap) {
      std::memcpy(&last, p + last_at, sizeof(last));
      vmax = last > vmax ? last : vmax;  // its lanes before `body` are the row's values too
    }
    float max = ReduceLanes<V, false>(vmax);
    if (!overlap) {
      for (int64_t k = body; k < dim; ++k) max = p[k] > max ? p[k] : max;
    }
    double sum = 0;  // the lanes' float sums added here every kSumBlock values
    if (std::isinf(max)) {
      // All -inf (or +inf present): the plain formula, NaN where it is NaN.
      for (int64_t k = 0; k < dim; ++k) {
        const float e = std::exp(p[k] - max);
        if (!kLog) q[k] = e;
        sum += e;
      }
    } else {
      constexpr int64_t kSumBlock = 1024;
      for (int64_t block = 0; block < body; block += kSumBlock) {
        V vsum{};
        for (int64_t k = block; k < std::min(body, block + kSumBlock); k += kLanes) {
          V v;
          std::memcpy(&v, p + k, sizeof(v));
          const V shifted = v - max;
          ExpNonPositive<V, I>(shifted, &v);
          vsum += v;
          if (!kLog) std::memcpy(q + k, &v, sizeof(v));
        }
        sum += ReduceLanes<V, true>(vsum);
      }
      if (overlap) {
        V e;
        const V shifted = last - max;
        ExpNonPositive<V, I>(shifted, &e);
        if (!kLog) std::memcpy(q + last_at, &e, sizeof(e));
        const V zero{};
        sum += ReduceLanes<V, true>(fresh != 0 ? e : zero);
      } else {
        for (int64_t k = body; k < dim; ++k) {
          float e;
          ExpNonPositive<float, int32_t>(p[k] - max, &e);
          if (!kLog) q[k] = e;
          sum += e;
        }
      }
    }
    if (kLog) {
      const float log_sum = static_cast<float>(std::log(sum));
      for (int64_t k = 0; k < body; k += kLanes) {
        V v;
        std::memcpy(&v, p + k, sizeof(v));
        v = (v - max) - log_sum;
        std::memcpy(q + k, &v, sizeof(v));
      }
      if (overlap) {
        const V v = (last - max) - log_sum;
        std::memcpy(q + last_at, &v, sizeof(v));
      } else {
        for (int64_t k = body; k < dim; ++k) q[k] = (p[k] - max) - log_sum;
      }
      continue;
    }
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t k = 0; k < body; k += kLanes) {
      V v;
      std::memcpy(&v, q + k, sizeof(v));
      v *= scale;
      std::memcpy(q + k, &v, sizeof(v));
    }
    if (overlap) {
      // Only the lanes past `body`: the others hold the body's scaled values already.
      V v;
      std::memcpy(&v, q + last_at, sizeof(v));
      v = fresh != 0 ? v * scale : v;
      std::memcpy(q + last_at, &v, sizeof(v));
    } else {
      for (int64_t k = body; k < dim; ++k) q[k] *= scale;
    }
  }
}

#define REPRISE_SOFTMAX_ARGS const float *x, float *y, int64_t rows, int64_t dim
template <bool kLog>
__attribute__((target("avx512f"))) void SoftmaxRowsAvx512(REPRISE_SOFTMAX_ARGS) {
  SoftmaxRowsBody<Floats16, Ints16, kLog>(x, y, rows, dim);
}
template <bool kLog>
__attribute__((target("avx2,fma"))) void SoftmaxRowsAvx2(REPRISE_SOFTMAX_ARGS) {
  SoftmaxRowsBody<Floats8, Ints8, kLog>(x, y, rows, dim);
}
template <bool kLog>
void SoftmaxRowsBaseline(REPRISE_SOFTMAX_ARGS) {
  SoftmaxRowsBody<Floats4, Ints4, kLog>(x, y, rows, dim);
}

// The copy for this CPU, picked on first use.
template <bool kLog>
void SoftmaxRows(REPRISE_SOFTMAX_ARGS) {
  static const auto fn =
      PickForThisCpu(&SoftmaxRowsAvx512<kLog>, &SoftmaxRowsAvx2<kLog>, &SoftmaxRowsBaseline<kLog>);
  fn(x, y, rows, dim);
}
#undef REPRISE_SOFTMAX_ARGS

// The [outer, dim, inner] view of Softmax, LogSoftmax and Hardmax: before opset 13 the input
// is coerced to 2-D at `axis` (default 1), since then `axis` (default -1) is the one axis.
struct AxisGeometry {
  int64_t outer = 1, dim = 1, inner = 1;
};

absl::StatusOr<AxisGeometry> SoftmaxGeometry(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& shape = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerce = context.opset < 13;
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", coerce ? 1 : -1));
  int64_t axis;
  if (rank == 0) {
    if (axis_attr != 0 && axis_attr != -1) {
      return InvalidArgument(context, "axis ", axis_attr, " is out of range for a scalar");
    }
    axis = 0;
  } else {
    ASSIGN_OR_RETURN(axis, NormalizeAxis(context, axis_attr, rank));
  }
  AxisGeometry g;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) {
      g.outer *= shape[i];
    } else if (i == axis || coerce) {
      g.dim *= shape[i];
    } else {
      g.inner *= shape[i];
    }
  }
  return g;
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareHardmax(const PrepareContext& context) {
  ASSIGN_OR_RETURN(AxisGeometry g, SoftmaxGeometry(context));
  return MakeKernel(context, {Desc(DataType::kFloat32, context.inputs[0].shape)},
                    [g](const KernelArgs& args) {
                      const float* x = static_cast<const float*>(args.inputs[0]);
                      float* y = static_cast<float*>(args.outputs[0]);
                      for (int64_t o = 0; o < g.outer; ++o) {
                        for (int64_t i = 0; i < g.inner; ++i) {
                          const float* p = x + o * g.dim * g.inner + i;
                          float* q = y + o * g.dim * g.inner + i;
                          int64_t best = 0;
                          for (int64_t k = 0; k < g.dim; ++k) {
                            q[k * g.inner] = 0.0f;
                            if (p[k * g.inner] > p[best * g.inner]) best = k;
                          }
                          if (g.dim > 0) q[best * g.inner] = 1.0f;
                        }
                      }
                      return absl::OkStatus();
                    });
}

template <bool kLog>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareSoftmax(const PrepareContext& context) {
  ASSIGN_OR_RETURN(AxisGeometry g, SoftmaxGeometry(context));
  const Shape& shape = context.inputs[0].shape;
  const int64_t outer = g.outer, dim = g.dim, inner = g.inner;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    // Rows split over the intra-op threads; each row is computed as serially.
    const double row_cost = 4.0 * static_cast<double>(dim * inner);
    if (inner == 1) {
      // The usual case: rows are contiguous.
      ParallelFor(
          outer, threads, row_cost,
          [&](int64_t first, int64_t end) {
            SoftmaxRows<kLog>(x + first * dim, y + first * dim, end - first, dim);
          },
          1);
      return absl::OkStatus();
    }
    ParallelFor(
        outer, threads, row_cost,
        [&](int64_t first, int64_t end) {
          for (int64_t o = first; o < end; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              const float* p = x + o * dim * inner + i;
              float* q = y + o * dim * inner + i;
              float max = -INFINITY;
              for (int64_t k = 0; k < dim; ++k) max = std::max(max, p[k * inner]);
              double sum = 0;
              for (int64_t k = 0; k < dim; ++k) {
                const float e = std::exp(p[k * inner] - max);
                if (!kLog) q[k * inner] = e;
                sum += e;
              }
              if (kLog) {
                const float log_sum = static_cast<float>(std::log(sum));
                for (int64_t k = 0; k < dim; ++k) q[k * inner] = p[k * inner] - max - log_sum;
              } else {
                const float scale = static_cast<float>(1.0 / sum);
                for (int64_t k = 0; k < dim; ++k) q[k * inner] *= scale;
              }
            }
          }
        },
        1);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLayerNorm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (HasInput(context, i)) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  const Shape& shape = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", -1));
  ASSIGN_OR_RETURN(float epsilon, AttrsOf(context).GetFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  int64_t outer = 1, norm = 1;
  Shape stat_shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) {
      outer *= shape[i];
      stat_shape.push_back(shape[i]);
    } else {
      norm *= shape[i];
      stat_shape.push_back(1);
    }
  }
  const bool has_bias = HasInput(context, 2);
  for (size_t i = 1; i < (has_bias ? 3u : 2u); ++i) {
    const int64_t n = runtime::NumElements(context.inputs[i].shape);
    if (n != norm && n != 1) {
      return InvalidArgument(
          context, "input ", i, " shape ", runtime::ShapeToString(context.inputs[i].shape),
          " does not match the normalized part of ", runtime::ShapeToString(shape));
    }
  }
  const bool scale_scalar = runtime::NumElements(context.inputs[1].shape) == 1;
  const bool bias_scalar = has_bias && runtime::NumElements(context.inputs[2].shape) == 1;
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, shape)};
  for (int i = 1; i < context.num_outputs && i < 3; ++i) {
    outputs.push_back(Desc(DataType::kFloat32, stat_shape));
  }
  const int num_outputs = context.num_outputs;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, std::move(outputs), [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(args.inputs[2]) : nullptr;
    float* y = static_cast<float*>(args.outputs[0]);
    float* mean_out = num_outputs > 1 ? static_cast<float*>(args.outputs[1]) : nullptr;
    float* inv_out = num_outputs > 2 ? static_cast<float*>(args.outputs[2]) : nullptr;
    // Rows split over the intra-op threads; each row is computed as serially.
    ParallelFor(
        outer, threads, 3.0 * static_cast<double>(norm),
        [&](int64_t first, int64_t end) {
          for (int64_t o = first; o < end; ++o) {
            const float* p = x + o * norm;
            float* q = y + o * norm;
            const float mean =
                norm > 0 ? RowSum(p, norm, 0.0f, false) / static_cast<float>(norm) : 0;
            const float var = norm > 0 ? RowSum(p, norm, mean, true) / static_cast<float>(norm) : 0;
            const float inv = 1.0f / std::sqrt(var + epsilon);
            const float m = mean;
            if (!scale_scalar && bias != nullptr && !bias_scalar) {
              for (int64_t k = 0; k < norm; ++k) q[k] = (p[k] - m) * inv * scale[k] + bias[k];
            } else {
              for (int64_t k = 0; k < norm; ++k) {
                const float s = scale[scale_scalar ? 0 : k];
                const float b = bias == nullptr ? 0.0f : bias[bias_scalar ? 0 : k];
                q[k] = (p[k] - m) * inv * s + b;
              }
            }
            if (mean_out != nullptr) mean_out[o] = m;
            if (inv_out != nullptr) inv_out[o] = inv;
          }
        },
        1);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBatchNorm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 5, 5));
  for (size_t i = 0; i < 5; ++i) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  ASSIGN_OR_RETURN(int64_t training, AttrsOf(context).GetInt("training_mode", 0));
  if (training != 0 || context.num_outputs > 1) {
    return Unimplemented(context, "training mode (training_mode=1 or ", context.num_outputs,
                         " outputs) is not supported");
  }
  // Opsets 7 and 8: spatial=0 normalises each element separately (per-element statistics).
  ASSIGN_OR_RETURN(int64_t spatial_attr, AttrsOf(context).GetInt("spatial", 1));
  if (context.opset < 9 && spatial_attr == 0) {
    return Unimplemented(context, "spatial=0 (per-element statistics) is not supported");
  }
  ASSIGN_OR_RETURN(float epsilon, AttrsOf(context).GetFloat("epsilon", 1e-5f));
  const Shape& shape = context.inputs[0].shape;
  if (shape.size() < 2) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(shape),
                           " has no channel axis");
  }
  const int64_t channels = shape[1];
  for (size_t i = 1; i < 5; ++i) {
    if (runtime::NumElements(context.inputs[i].shape) != channels) {
      return InvalidArgument(context, "input ", i, " shape ",
                             runtime::ShapeToString(context.inputs[i].shape), " does not match ",
                             channels, " channels");
    }
  }
  const int64_t batch = shape[0];
  const int64_t spatial =
      batch * channels == 0 ? 0 : runtime::NumElements(shape) / batch / channels;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const float* bias = static_cast<const float*>(args.inputs[2]);
    const float* mean = static_cast<const float*>(args.inputs[3]);
    const float* var = static_cast<const float*>(args.inputs[4]);
    float* y = static_cast<float*>(args.outputs[0]);
    // (n, c) planes split over the intra-op threads.
    ParallelFor(
        batch * channels, threads, static_cast<double>(spatial),
        [&](int64_t first, int64_t end) {
          for (int64_t plane = first; plane < end; ++plane) {
            const int64_t c = plane % channels;
            const float a = scale[c] / std::sqrt(var[c] + epsilon);
            const float b = bias[c] - mean[c] * a;
            const int64_t at = plane * spatial;
            for (int64_t i = 0; i < spatial; ++i) y[at + i] = x[at + i] * a + b;
          }
        },
        1);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareInstanceNorm(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 3, 3));
  for (size_t i = 0; i < 3; ++i) RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  ASSIGN_OR_RETURN(float epsilon, AttrsOf(context).GetFloat("epsilon", 1e-5f));
  const Shape& shape = context.inputs[0].shape;
  if (shape.size() < 3) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(shape),
                           " has rank below 3");
  }
  const int64_t channels = shape[1];
  for (size_t i = 1; i < 3; ++i) {
    if (runtime::NumElements(context.inputs[i].shape) != channels) {
      return InvalidArgument(context, "input ", i, " shape ",
                             runtime::ShapeToString(context.inputs[i].shape), " does not match ",
                             channels, " channels");
    }
  }
  const int64_t planes = shape[0] * channels;
  const int64_t spatial = planes == 0 ? 0 : runtime::NumElements(shape) / planes;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    const float* scale = static_cast<const float*>(args.inputs[1]);
    const float* bias = static_cast<const float*>(args.inputs[2]);
    float* y = static_cast<float*>(args.outputs[0]);
    // Planes split over the intra-op threads; each is computed as serially.
    ParallelFor(
        planes, threads, 3.0 * static_cast<double>(spatial),
        [&](int64_t first, int64_t end) {
          for (int64_t plane = first; plane < end; ++plane) {
            const int64_t c = plane % channels;
            const float* p = x + plane * spatial;
            const double mean = LongRowSum(p, spatial, 0.0f, false) / spatial;
            // Centred on the mean as a float: the squares' sum stays exact to float rounding.
            const double var = LongRowSum(p, spatial, static_cast<float>(mean), true) /
                               static_cast<double>(spatial);
            const float a = static_cast<float>(scale[c] / std::sqrt(var + epsilon));
            const float b = static_cast<float>(bias[c] - mean * a);
            for (int64_t i = 0; i < spatial; ++i) y[plane * spatial + i] = p[i] * a + b;
          }
        },
        1);
    return absl::OkStatus();
  });
}

// LRN across channels (axis 1): y = x / (bias + alpha / size * sum of x^2 over the window of
// `size` channels around c) ^ beta.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareLrn(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& shape = context.inputs[0].shape;
  if (shape.size() < 2) {
    return InvalidArgument(context, "input must have rank >= 2, got ",
                           runtime::ShapeToString(shape));
  }
  ASSIGN_OR_RETURN(float alpha, AttrsOf(context).GetFloat("alpha", 1e-4f));
  ASSIGN_OR_RETURN(float beta, AttrsOf(context).GetFloat("beta", 0.75f));
  ASSIGN_OR_RETURN(float bias, AttrsOf(context).GetFloat("bias", 1.0f));
  ASSIGN_OR_RETURN(int64_t size, AttrsOf(context).GetInt("size", 0));
  if (size < 1) return InvalidArgument(context, "size must be at least 1, got ", size);
  const int64_t channels = shape[1];
  int64_t inner = 1;
  for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
  const int64_t batch = shape[0];
  const int64_t before = (size - 1) / 2;
  const int64_t after = size - 1 - before;
  const int threads = context.intra_op_threads;
  // Planes (image, channel) over the threads; a pow in double per element, about 20 ns.
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    ParallelFor(
        batch * channels, threads, 20.0 * static_cast<double>(inner),
        [&](int64_t begin, int64_t end) {
          for (int64_t plane = begin; plane < end; ++plane) {
            const int64_t n = plane / channels, c = plane % channels;
            const float* xb = x + n * channels * inner;
            float* yb = y + n * channels * inner;
            const int64_t lo = std::max<int64_t>(0, c - before);
            const int64_t hi = std::min<int64_t>(channels - 1, c + after);
            for (int64_t i = 0; i < inner; ++i) {
              double sum = 0;
              for (int64_t k = lo; k <= hi; ++k) {
                const double v = xb[k * inner + i];
                sum += v * v;
              }
              const double scale = std::pow(bias + alpha / static_cast<double>(size) * sum, beta);
              yb[c * inner + i] = static_cast<float>(xb[c * inner + i] / scale);
            }
          }
        },
        1);
    return absl::OkStatus();
  });
}

// MeanVarianceNormalization over `axes` (default 0, 2, 3): (x - mean) / (sqrt(variance) + 1e-9),
// as the op's function body computes it.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMvn(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& shape = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axes_attr, AttrsOf(context).GetInts("axes", {0, 2, 3}));
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes_attr) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, a, rank));
    reduced[static_cast<size_t>(axis)] = true;
  }
  // Each element's group: its index with the reduced axes dropped.
  const int64_t count = runtime::NumElements(shape);
  std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
  int64_t groups = 1;
  for (int64_t i = rank; i-- > 0;) {
    if (reduced[static_cast<size_t>(i)]) continue;
    group_stride[static_cast<size_t>(i)] = groups;
    groups *= shape[static_cast<size_t>(i)];
  }
  const int64_t per_group = groups == 0 ? 0 : count / groups;
  auto group_of = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(count));
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t e = 0; e < count; ++e) {
    int64_t g = 0;
    for (size_t i = 0; i < index.size(); ++i) g += index[i] * group_stride[i];
    (*group_of)[static_cast<size_t>(e)] = g;
    for (size_t i = index.size(); i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return MakeKernel(context, {Desc(DataType::kFloat32, shape)}, [=](const KernelArgs& args) {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    std::vector<double> sum(static_cast<size_t>(groups), 0.0);
    std::vector<double> sum_sq(static_cast<size_t>(groups), 0.0);
    for (int64_t e = 0; e < count; ++e) {
      const double v = x[e];
      const size_t g = static_cast<size_t>((*group_of)[static_cast<size_t>(e)]);
      sum[g] += v;
      sum_sq[g] += v * v;
    }
    for (int64_t e = 0; e < count; ++e) {
      const size_t g = static_cast<size_t>((*group_of)[static_cast<size_t>(e)]);
      const double mean = sum[g] / static_cast<double>(per_group);
      const double variance = sum_sq[g] / static_cast<double>(per_group) - mean * mean;
      y[e] = static_cast<float>((x[e] - mean) / (std::sqrt(std::max(variance, 0.0)) + 1e-9));
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterNormalizationKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Softmax", &PrepareSoftmax<false>));
  RETURN_IF_ERROR(registry->Register("LogSoftmax", &PrepareSoftmax<true>));
  RETURN_IF_ERROR(registry->Register("Hardmax", &PrepareHardmax));
  RETURN_IF_ERROR(registry->Register("LRN", &PrepareLrn));
  RETURN_IF_ERROR(registry->Register("MeanVarianceNormalization", &PrepareMvn));
  RETURN_IF_ERROR(registry->Register("LayerNormalization", &PrepareLayerNorm));
  RETURN_IF_ERROR(registry->Register("BatchNormalization", &PrepareBatchNorm));
  RETURN_IF_ERROR(registry->Register("InstanceNormalization", &PrepareInstanceNorm));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
