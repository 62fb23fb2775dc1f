// Signal processing of opset 17: DFT (forward and inverse, one-sided, with dft_length), STFT
// (frames of a real or complex signal, an optional window) and MelWeightMatrix. Transforms run
// in double with a table of twiddle factors: a radix-2 FFT for power-of-two lengths, the direct
// sum otherwise (bounded in cost); lengths read from inputs (dft_length, frame_step,
// frame_length) must be known at plan time.
#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <numbers>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

// Transform lengths: a direct transform costs length^2 per vector.
constexpr int64_t kMaxLength = int64_t{1} << 16;

// An integer read from input `index` at plan time, in [lo, hi].
absl::StatusOr<int64_t> ReadLength(const PrepareContext& context, size_t index,
                                   absl::string_view what, int64_t lo, int64_t hi = kMaxLength) {
  ASSIGN_OR_RETURN(double value, ReadScalar(context, index, what));
  if (!(value >= static_cast<double>(lo) && value <= static_cast<double>(hi))) {
    return InvalidArgument(context, what, " ", value, " is outside [", lo, ", ", hi, "]");
  }
  return static_cast<int64_t>(value);
}

// e^(sign * 2 pi i k / n) for k in [0, n).
std::vector<std::complex<double>> Twiddles(int64_t n, double sign) {
  std::vector<std::complex<double>> t(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const double angle =
        sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
    t[static_cast<size_t>(k)] = {std::cos(angle), std::sin(angle)};
  }
  return t;
}

// Bin k of the n-point transform of `in` (w: the twiddles), scaled, written as (real, imaginary)
// floats at out + k * stride * 2, for k < bins. A power-of-two length runs an iterative radix-2
// FFT (O(n log n), in `work`); any other length the direct sum (O(n * bins), bounded at Prepare
// by DirectTransformFits).
void Transform(const std::vector<std::complex<double>>& in,
               const std::vector<std::complex<double>>& w, int64_t bins, double scale, float* out,
               int64_t stride, std::vector<std::complex<double>>* work) {
  const int64_t n = static_cast<int64_t>(w.size());
  auto write = [&](int64_t k, std::complex<double> v) {
    out[k * stride * 2] = static_cast<float>(v.real() * scale);
    out[k * stride * 2 + 1] = static_cast<float>(v.imag() * scale);
  };
  if ((n & (n - 1)) == 0) {
    std::vector<std::complex<double>>& a = *work;
    a.assign(in.begin(), in.begin() + n);
    // Bit-reversed order, then butterflies of growing length.
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t step = n / len;
      for (int64_t i = 0; i < n; i += len) {
        for (int64_t j = 0; j < len / 2; ++j) {
          const std::complex<double> t = w[j * step] * a[i + j + len / 2];
          const std::complex<double> u = a[i + j];
          a[i + j] = u + t;
          a[i + j + len / 2] = u - t;
        }
      }
    }
    for (int64_t k = 0; k < bins; ++k) write(k, a[k]);
    return;
  }
  for (int64_t k = 0; k < bins; ++k) {
    std::complex<double> sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      sum += in[static_cast<size_t>(j)] * w[static_cast<size_t>((j * k) % n)];
    }
    write(k, sum);
  }
}

// The direct sum of a length that is not a power of two costs vectors * n * bins products;
// past 2^27 (about a second) the node is refused rather than left to run for minutes.
absl::Status DirectTransformFits(const PrepareContext& context, int64_t vectors, int64_t n,
                                 int64_t bins) {
  if ((n & (n - 1)) == 0) return absl::OkStatus();
  constexpr double kMaxProducts = double(int64_t{1} << 27);
  if (static_cast<double>(vectors) * static_cast<double>(n) * static_cast<double>(bins) >
      kMaxProducts) {
    return InvalidArgument(context, vectors, " transforms of length ", n,
                           " (not a power of two) are too costly for the direct transform");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareDft(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank < 2 || (x.back() != 1 && x.back() != 2)) {
    return InvalidArgument(context, "input must be [..., 1] (real) or [..., 2] (complex), got ",
                           runtime::ShapeToString(x));
  }
  ASSIGN_OR_RETURN(int64_t axis_attr, AttrsOf(context).GetInt("axis", 1));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  if (axis == rank - 1) return InvalidArgument(context, "axis must not be the last (complex) axis");
  ASSIGN_OR_RETURN(int64_t inverse, AttrsOf(context).GetInt("inverse", 0));
  ASSIGN_OR_RETURN(int64_t onesided, AttrsOf(context).GetInt("onesided", 0));
  int64_t n = x[axis];
  if (HasInput(context, 1)) {
    ASSIGN_OR_RETURN(n, ReadLength(context, 1, "dft_length", 1));
  }
  if (n < 1 || n > kMaxLength)
    return InvalidArgument(context, "the transform length ", n, " is out of range");
  const int64_t bins = onesided != 0 ? n / 2 + 1 : n;
  Shape out = x;
  out[axis] = bins;
  out.back() = 2;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x[i];
  for (int64_t i = axis + 1; i < rank - 1; ++i) inner *= x[i];
  RETURN_IF_ERROR(DirectTransformFits(context, outer * inner, n, bins));
  const int64_t in_len = x[axis];
  const int64_t comps = x.back();
  auto w =
      std::make_shared<const std::vector<std::complex<double>>>(Twiddles(n, inverse != 0 ? 1 : -1));
  const double scale = inverse != 0 ? 1.0 / static_cast<double>(n) : 1.0;
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    const float* in = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    std::vector<std::complex<double>> signal(static_cast<size_t>(n)), work;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          if (j >= in_len) {
            signal[static_cast<size_t>(j)] = 0;
            continue;
          }
          const float* p = in + ((o * in_len + j) * inner + i) * comps;
          signal[static_cast<size_t>(j)] = {p[0], comps == 2 ? p[1] : 0.0f};
        }
        Transform(signal, *w, bins, scale, y + (o * bins * inner + i) * 2, inner, &work);
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareStft(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 4));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2)) {
    return InvalidArgument(context, "signal must be [batch, length, 1 or 2], got ",
                           runtime::ShapeToString(x));
  }
  ASSIGN_OR_RETURN(int64_t step, ReadLength(context, 1, "frame_step", 1));
  const bool has_window = HasInput(context, 2);
  int64_t frame = 0;
  if (has_window) {
    RETURN_IF_ERROR(ExpectType(context, 2, {DataType::kFloat32}));
    RETURN_IF_ERROR(ExpectRank(context, 2, 1));
    frame = context.inputs[2].shape[0];
  }
  if (HasInput(context, 3)) {
    ASSIGN_OR_RETURN(int64_t length, ReadLength(context, 3, "frame_length", 1));
    if (has_window && length != frame) {
      return InvalidArgument(context, "frame_length ", length, " differs from the window's ",
                             frame);
    }
    frame = length;
  }
  if (frame < 1 || frame > x[1] || frame > kMaxLength) {
    return InvalidArgument(context, "the frame length ", frame, " must be in [1, ", x[1], "]");
  }
  ASSIGN_OR_RETURN(int64_t onesided, AttrsOf(context).GetInt("onesided", 1));
  const int64_t bins = onesided != 0 ? frame / 2 + 1 : frame;
  const int64_t frames = (x[1] - frame) / step + 1;
  RETURN_IF_ERROR(DirectTransformFits(context, x[0] * frames, frame, bins));
  const int64_t batch = x[0], length = x[1], comps = x[2];
  auto w = std::make_shared<const std::vector<std::complex<double>>>(Twiddles(frame, -1));
  return MakeKernel(
      context, {Desc(DataType::kFloat32, {batch, frames, bins, 2})}, [=](const KernelArgs& args) {
        const float* in = static_cast<const float*>(args.inputs[0]);
        const float* window = has_window ? static_cast<const float*>(args.inputs[2]) : nullptr;
        float* y = static_cast<float*>(args.outputs[0]);
        std::vector<std::complex<double>> signal(static_cast<size_t>(frame)), work;
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t f = 0; f < frames; ++f) {
            for (int64_t j = 0; j < frame; ++j) {
              const float* p = in + (b * length + f * step + j) * comps;
              const double weight = window != nullptr ? window[j] : 1.0;
              signal[static_cast<size_t>(j)] = {p[0] * weight, comps == 2 ? p[1] * weight : 0.0};
            }
            Transform(signal, *w, bins, 1.0, y + (b * frames + f) * bins * 2, 1, &work);
          }
        }
        return absl::OkStatus();
      });
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters spaced evenly on the
// mel scale (mel = 2595 log10(1 + hz / 700)) between the two edges, as the op's definition
// computes them (filter edges rounded down to spectrogram bins).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMelWeightMatrix(
    const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 5, 5));
  constexpr int64_t kMaxMatrix = int64_t{1} << 24;
  ASSIGN_OR_RETURN(int64_t mel_bins, ReadLength(context, 0, "num_mel_bins", 1, kMaxMatrix));
  ASSIGN_OR_RETURN(int64_t dft_length, ReadLength(context, 1, "dft_length", 1, kMaxMatrix));
  ASSIGN_OR_RETURN(int64_t sample_rate, ReadLength(context, 2, "sample_rate", 1, int64_t{1} << 40));
  ASSIGN_OR_RETURN(double lower, ReadScalar(context, 3, "lower_edge_hertz"));
  ASSIGN_OR_RETURN(double upper, ReadScalar(context, 4, "upper_edge_hertz"));
  if (!(lower >= 0 && upper > lower && upper < 1e9)) {
    return InvalidArgument(context, "edges [", lower, ", ", upper, "] are not 0 <= lower < upper");
  }
  if (mel_bins * (dft_length / 2 + 1) > kMaxMatrix) {
    return InvalidArgument(context, "the matrix [", dft_length / 2 + 1, ", ", mel_bins,
                           "] is too large");
  }
  if (AttrsOf(context).Has("output_datatype")) {
    ASSIGN_OR_RETURN(int64_t code, AttrsOf(context).GetInt("output_datatype", 1));
    if (code != 1) return Unimplemented(context, "output_datatype ", code, " (float32 only)");
  }
  const int64_t spectrum_bins = dft_length / 2 + 1;
  const double low_mel = 2595 * std::log10(1 + lower / 700);
  const double high_mel = 2595 * std::log10(1 + upper / 700);
  const double mel_step = (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hz =
        700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
    edge[static_cast<size_t>(i)] =
        std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) *
                                                            hz / static_cast<double>(sample_rate))),
                            0, spectrum_bins - 1);
  }
  auto matrix =
      std::make_shared<std::vector<float>>(static_cast<size_t>(spectrum_bins * mel_bins), 0.0f);
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t lo = edge[i], center = edge[i + 1], hi = edge[i + 2];
    auto at = [&](int64_t j) -> float& { return (*matrix)[static_cast<size_t>(j * mel_bins + i)]; };
    if (center == lo) {
      at(center) = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        at(j) = static_cast<float>(j - lo) / static_cast<float>(center - lo);
    }
    for (int64_t j = center; j < hi; ++j)
      at(j) = static_cast<float>(hi - j) / static_cast<float>(hi - center);
  }
  return MakeKernel(context, {Desc(DataType::kFloat32, {spectrum_bins, mel_bins})},
                    [matrix](const KernelArgs& args) {
                      std::copy(matrix->begin(), matrix->end(),
                                static_cast<float*>(args.outputs[0]));
                      return absl::OkStatus();
                    });
}

}  // namespace

absl::Status RegisterSignalKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("DFT", &PrepareDft));
  RETURN_IF_ERROR(registry->Register("STFT", &PrepareStft));
  RETURN_IF_ERROR(registry->Register("MelWeightMatrix", &PrepareMelWeightMatrix));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
