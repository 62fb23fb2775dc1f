// The two-phase kernel interface: Prepare (may be slow) then Run (cheap, on a stream's worker).
// The core knows kernels only through this interface and the registry; it knows no op by name.
#ifndef REPRISE_RUNTIME_CORE_KERNEL_H_
#define REPRISE_RUNTIME_CORE_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <variant>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/data_type.h"

namespace reprise::runtime {

/// std::allocator whose default construction leaves a trivial element as it is: `resize(n)` and
/// `vector(n)` of ValueBytes do not write zeros. A value computed at plan time is sized, then
/// written whole by its kernel (as the arena's buffers are at every run); zeroing it first wrote
/// each byte twice, on one thread (a detector's per-image tail made about 0.9 GB of such values,
/// 141 ms of zeroing). Size-only construction is for bytes written whole next; `assign(n, 0)`
/// and `vector(n, 0)` still fill.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
};
using ValueBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

/// A small host-side tensor value (attributes such as ConstantOfShape's `value`).
struct TensorValue {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  ValueBytes bytes;  // row-major, NumElements(shape) * DataTypeSize(dtype)
  /// kString only: the bytes that the StringElement views in `bytes` point into. Shared and
  /// never changed once the value is made, so that a copy of the value stays valid. Build string
  /// values with runtime/core/string_tensor.h, which keeps the two consistent.
  std::shared_ptr<const std::string> string_bytes = nullptr;
};

/// One argument of a kernel as known at Prepare time.
struct TensorDesc {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  /// The tensor's value when it is known at plan time (an initializer, a constant or a
  /// computed shape), else nullptr. Borrowed: valid at least as long as the prepared kernel,
  /// so a kernel may keep it (e.g. to pre-pack weights).
  const void* data = nullptr;
  /// False for an optional input the node leaves out (its pointer at Run is nullptr).
  bool present = true;
};

using AttributeValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                                    std::vector<float>, std::vector<std::string>, TensorValue>;

/// A node's attributes by name. Getters return `fallback` when the attribute is absent and an
/// error when it is present with another type.
class Attributes {
 public:
  void Set(std::string name, AttributeValue value) { values_[std::move(name)] = std::move(value); }
  bool Has(absl::string_view name) const { return values_.contains(name); }
  const AttributeValue* Find(absl::string_view name) const;

  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback) const;
  absl::StatusOr<float> GetFloat(absl::string_view name, float fallback) const;
  absl::StatusOr<std::string> GetString(absl::string_view name, std::string fallback) const;
  absl::StatusOr<std::vector<int64_t>> GetInts(absl::string_view name,
                                               std::vector<int64_t> fallback) const;
  absl::StatusOr<std::vector<float>> GetFloats(absl::string_view name,
                                               std::vector<float> fallback) const;
  /// Error when absent.
  absl::StatusOr<const TensorValue*> GetTensor(absl::string_view name) const;

 private:
  absl::flat_hash_map<std::string, AttributeValue> values_;
};

/// What a backend's kernel library keeps per registry, hence per device: the options it was
/// registered with, its caches (packed weights) and library handles (cuBLAS). Made by the
/// library's Register function (e.g. kernels::cpu::RegisterCpuKernels) and installed in the
/// registry, which hands it to every kernel it prepares (PrepareContext::kernel_state). No kernel
/// state is process-wide: two devices never share one (a copy of a registry shares its state),
/// and it is freed with the last registry holding it
/// (a prepared kernel that needs it at Run keeps a reference).
///
/// Thread-safety: implementations are thread-safe (the plans of several streams prepare at once).
class KernelState {
 public:
  virtual ~KernelState() = default;
};

/// Everything a kernel may look at while preparing.
struct PrepareContext {
  absl::string_view op;    // e.g. "Conv"
  absl::string_view name;  // the node's name, for messages (may be empty)
  int opset = 17;          // opset version of the op's domain
  std::span<const TensorDesc> inputs;
  int num_outputs = 1;                     // how many outputs the node declares
  const Attributes* attributes = nullptr;  // never null when passed by the engine
  int intra_op_threads = 1;
  /// Set where the kernel runs once, on inputs all known when planning or loading (a value
  /// computed then): it may skip set-up that pays only over many runs (Winograd's weight
  /// transform for a small output, racing two ways by timed runs).
  bool run_once = false;
  /// The preparing registry's state (set by KernelRegistry::Prepare; null when it has none or
  /// when a factory is called directly). A kernel keeps it only if it needs it at Run.
  std::shared_ptr<KernelState> kernel_state;
};

/// Pointers bound for one Run. Borrowed for the duration of Run.
struct KernelArgs {
  const void* const* inputs = nullptr;  // one per input (nullptr for an absent optional input)
  void* const* outputs = nullptr;       // one per output
  void* workspace = nullptr;            // workspace_bytes() bytes, or nullptr when 0
};

/// A kernel prepared for fixed input shapes and attributes.
///
/// Thread-safety: Run may be called from several threads at once with different arguments;
/// implementations keep per-call state on the stack or in the workspace.
class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
  /// The op name (e.g. "Add"), used in dumps and error messages.
  virtual absl::string_view op() const = 0;
  /// Output descriptors inferred at Prepare (shape and type; `data` set when the output's value
  /// is known at plan time, e.g. the output of Shape).
  virtual const std::vector<TensorDesc>& outputs() const = 0;
  virtual size_t workspace_bytes() const { return 0; }
  /// Bytes output `i` occupies when the kernel stores it in a padded layout (e.g. channel
  /// blocks rounded up), or 0 for the dense size of its shape. Only an output whose every
  /// consumer was told the same layout (by node attributes) may be stored so. A string output
  /// may also ask for more: its views first, then the bytes they point to (e.g. Cast to string);
  /// the engine keeps such a buffer until the end of the run. Whoever runs a kernel allocates
  /// max(dense size, this).
  virtual size_t output_storage_bytes(size_t /*i*/) const { return 0; }
  /// An input that output 0 may be written over, or -1: the kernel reads that input only as
  /// output 0's starting value (e.g. a residual that a sum post-op adds to), of output 0's
  /// storage size. Whoever runs the kernel may give the two the same buffer (where that input
  /// is read by nothing later), saving the copy; Run must be right either way.
  virtual int in_place_input() const { return -1; }
  /// For a kernel whose output 0 is its inputs' bytes laid one after another (a concatenation
  /// whose pieces are contiguous runs): per input, the byte offset in output 0 where that
  /// input's bytes go, or kNotInOutput for an input copied otherwise (reordered, or absent);
  /// empty for any other kernel. Whoever runs the kernel may give such an input a buffer at
  /// that offset inside output 0's (its producer then writes it in place); Run copies only the
  /// inputs found elsewhere, so it is right either way.
  static constexpr size_t kNotInOutput = static_cast<size_t>(-1);
  virtual std::vector<size_t> input_offsets_in_output() const { return {}; }
  /// The implementation chosen at Prepare where a kernel has several (e.g. the oneDNN
  /// implementation of a convolution, "jit_wino_4x3:avx512_core"), for dumps and tests; empty
  /// when there is nothing to tell.
  virtual std::string implementation() const { return {}; }
  /// Runs still to come before the kernel has made the choices it makes by timing its runs
  /// (which of two ways is faster): 0 for a kernel that times nothing, or once it has chosen.
  /// Whoever captures an instance may replay it that many times more before its requests, so
  /// that they meet the chosen ways.
  virtual uint64_t settling_runs() const { return 0; }
  /// Computes the outputs. Errors are values; nothing here may throw.
  virtual absl::Status Run(const KernelArgs& args) const = 0;
};

using KernelFactory =
    absl::StatusOr<std::unique_ptr<PreparedKernel>> (*)(const PrepareContext& context);

/// Op name → factory, filled explicitly by the kernel library of a backend (no static
/// initialisers), with that library's KernelState. Not thread-safe while being filled;
/// read-only afterwards.
class KernelRegistry {
 public:
  /// Error if `op` is already registered.
  absl::Status Register(std::string op, KernelFactory factory);
  /// Installs the kernel library's state, shared with every kernel prepared here. ALREADY_EXISTS
  /// when the registry has one (a registry holds one library's kernels).
  absl::Status SetState(std::shared_ptr<KernelState> state);
  /// The installed state; null when none.
  const std::shared_ptr<KernelState>& state() const { return state_; }
  /// nullptr when no kernel is registered for `op`.
  KernelFactory Find(absl::string_view op) const;
  bool Has(absl::string_view op) const { return Find(op) != nullptr; }
  /// Sorted list of registered op names.
  std::vector<std::string> Ops() const;
  /// Finds the factory and prepares with this registry's state as `context.kernel_state`
  /// (whatever the caller set); NOT_FOUND names the op when none is registered.
  absl::StatusOr<std::unique_ptr<PreparedKernel>> Prepare(const PrepareContext& context) const;

 private:
  absl::flat_hash_map<std::string, KernelFactory> factories_;
  std::shared_ptr<KernelState> state_;
};

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_KERNEL_H_
