// Random ops: RandomUniform, RandomNormal (shape from the attribute), RandomUniformLike,
// RandomNormalLike (shape of the input) and Bernoulli. Each draw is a counter-based hash of the
// seed and a per-kernel counter (SplitMix64's finaliser), so that concurrent runs of one
// prepared kernel need no lock and never repeat a number; a given `seed` makes a kernel's
// sequence of runs reproducible. The engine never folds these ops at plan time.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numbers>
#include <random>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The stream of uniform doubles in [0, 1) of one prepared kernel.
class UniformSource {
 public:
  explicit UniformSource(uint64_t seed) : seed_(Mix(seed)) {}
  /// Reserves `n` draws; Draw(first + i) gives them.
  uint64_t Reserve(int64_t n) { return counter_.fetch_add(static_cast<uint64_t>(n)); }
  double Draw(uint64_t index) const {
    const uint64_t bits = Mix(seed_ + (index + 1) * 0x9e3779b97f4a7c15ULL);
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
  }

 private:
  const uint64_t seed_;
  std::atomic<uint64_t> counter_{0};
};

// The `seed` attribute (a float) as bits, or a fresh seed from the system when absent.
absl::StatusOr<std::shared_ptr<UniformSource>> MakeSource(const PrepareContext& context) {
  uint64_t seed;
  if (AttrsOf(context).Has("seed")) {
    ASSIGN_OR_RETURN(float value, AttrsOf(context).GetFloat("seed", 0.0f));
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    seed = bits;
  } else {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  return std::make_shared<UniformSource>(seed);
}

absl::StatusOr<DataType> OutputType(const PrepareContext& context, DataType fallback) {
  if (!AttrsOf(context).Has("dtype")) return fallback;
  ASSIGN_OR_RETURN(int64_t code, AttrsOf(context).GetInt("dtype", 0));
  absl::StatusOr<DataType> dtype = runtime::DataTypeFromCode(static_cast<int32_t>(code));
  if (!dtype.ok()) return InvalidArgument(context, "dtype: ", dtype.status().message());
  return *dtype;
}

enum class Dist { kUniform, kNormal };

// RandomUniform / RandomNormal (kLike false: shape attribute, float32 by default) and their
// *Like forms (the input's shape and, by default, type).
template <Dist kDist, bool kLike>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareRandom(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, kLike ? 1 : 0, kLike ? 1 : 0));
  Shape shape;
  DataType fallback = DataType::kFloat32;
  if constexpr (kLike) {
    shape = context.inputs[0].shape;
    fallback = context.inputs[0].dtype;
  } else {
    ASSIGN_OR_RETURN(shape, AttrsOf(context).GetInts("shape", {}));
    if (!runtime::CheckedElementCount(shape, int64_t{1} << 40).has_value()) {
      return InvalidArgument(context, "shape ", runtime::ShapeToString(shape),
                             " is negative or too large");
    }
  }
  ASSIGN_OR_RETURN(DataType dtype, OutputType(context, fallback));
  const bool uniform = kDist == Dist::kUniform;
  ASSIGN_OR_RETURN(float a, AttrsOf(context).GetFloat(uniform ? "low" : "mean", 0.0f));
  ASSIGN_OR_RETURN(float b, AttrsOf(context).GetFloat(uniform ? "high" : "scale", 1.0f));
  ASSIGN_OR_RETURN(std::shared_ptr<UniformSource> source, MakeSource(context));
  const int64_t n = runtime::NumElements(shape);
  FunctionKernel::RunFn run;
  bool ok = false;
  if (dtype == DataType::kFloat32 || dtype == DataType::kFloat64) {
    ok = DispatchNumeric(dtype, [&]<typename T>() {
      run = [source, n, a, b](const KernelArgs& args) {
        T* y = static_cast<T*>(args.outputs[0]);
        const uint64_t first = source->Reserve(uniform ? n : 2 * n);
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (kDist == Dist::kUniform) {
            // Rounding to T can reach `high` (from within half a unit of it): the draws stay in
            // [low, high), as the op promises.
            const T v = static_cast<T>(a + (b - a) * source->Draw(first + i));
            y[i] = a < b && v >= static_cast<T>(b)
                       ? std::nextafter(static_cast<T>(b), static_cast<T>(a))
                       : v;
          } else {                                                // Box-Muller on two draws
            const double u1 = 1.0 - source->Draw(first + 2 * i);  // in (0, 1]
            const double u2 = source->Draw(first + 2 * i + 1);
            const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
            y[i] = static_cast<T>(a + b * z);
          }
        }
        return absl::OkStatus();
      };
    });
  }
  if (!ok) {
    return Unimplemented(context, "output type ", runtime::DataTypeName(dtype),
                         " is not supported (float32, float64)");
  }
  return MakeKernel(context, {Desc(dtype, shape)}, std::move(run));
}

// Bernoulli: 1 with the input's probability, else 0, in `dtype` (default the input's type).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBernoulli(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32, DataType::kFloat64}));
  const TensorDesc& in = context.inputs[0];
  ASSIGN_OR_RETURN(DataType dtype, OutputType(context, in.dtype));
  ASSIGN_OR_RETURN(std::shared_ptr<UniformSource> source, MakeSource(context));
  const int64_t n = runtime::NumElements(in.shape);
  const DataType in_type = in.dtype;
  FunctionKernel::RunFn run;
  const bool ok = DispatchAnyType(dtype, [&]<typename T>() {
    run = [source, n, in_type](const KernelArgs& args) {
      T* y = static_cast<T*>(args.outputs[0]);
      const uint64_t first = source->Reserve(n);
      for (int64_t i = 0; i < n; ++i) {
        const double p = ElementAsDouble(in_type, args.inputs[0], i);
        y[i] = static_cast<T>(source->Draw(first + i) < p ? 1 : 0);
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return Unimplemented(context, "output type ", runtime::DataTypeName(dtype),
                         " is not supported");
  }
  return MakeKernel(context, {Desc(dtype, in.shape)}, std::move(run));
}

}  // namespace

absl::Status RegisterRandomKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("RandomUniform", &PrepareRandom<Dist::kUniform, false>));
  RETURN_IF_ERROR(registry->Register("RandomNormal", &PrepareRandom<Dist::kNormal, false>));
  RETURN_IF_ERROR(registry->Register("RandomUniformLike", &PrepareRandom<Dist::kUniform, true>));
  RETURN_IF_ERROR(registry->Register("RandomNormalLike", &PrepareRandom<Dist::kNormal, true>));
  RETURN_IF_ERROR(registry->Register("Bernoulli", &PrepareBernoulli));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
