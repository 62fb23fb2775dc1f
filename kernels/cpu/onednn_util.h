// What the oneDNN-backed CPU kernels share: the engine, plain descriptors, the device's packed
// weights, and the blocked layout that values between convolutions (and the pooling inside such
// chains) are stored in.
#ifndef REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_
#define REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_

#include <array>
#include <memory>
#include <mutex>  // NOLINT: see docs/development.md (TSan)
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dnnl.hpp"
#include "kernels/cpu/cpu_kernel_state.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// The CPU engine (created on first use). Process-wide but not state: a oneDNN CPU engine is an
/// immutable, thread-safe handle that owns no memory of ours.
const dnnl::engine& CpuEngine();

/// Weights packed into a primitive's layout, shared by the kernels of every plan of a device (a
/// model has one plan per input shape, per stream), keyed by the plan-time weights' address, the
/// layout they are read in (one constant may be read as a matrix and as its transpose) and the
/// packed layout. One per CpuKernelState. Entries are weak: packed weights live as long as a
/// kernel uses them, and a kernel keeps the source weights alive (TensorDesc::data), so a live
/// entry's address cannot have been reused by other weights. Thread-safe.
class PackedWeightCache {
 public:
  /// The live packed weights of `source`, read as `plain`, in `packed`, or null (counted as a
  /// hit when found).
  std::shared_ptr<const dnnl::memory> Find(const void* source, const dnnl::memory::desc& plain,
                                           const dnnl::memory::desc& packed);
  /// Remembers `weights` (counted as a pack); drops the expired entries first.
  void Add(const void* source, const dnnl::memory::desc& plain, const dnnl::memory::desc& packed,
           const std::shared_ptr<const dnnl::memory>& weights);
  PackedWeightStats stats() const;

 private:
  struct Entry {
    dnnl::memory::desc plain;
    dnnl::memory::desc packed_desc;
    std::weak_ptr<const dnnl::memory> packed;
  };
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::vector<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t packed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
};

/// `source` (stored as `plain`) in the layout `packed`: borrowed when the two are the same, else
/// found in the packed-weight cache of the device preparing `context`, or reordered once into
/// memory the result owns (and cached there; not cached outside a registry with a
/// CpuKernelState). `source` must outlive the result (a plan-time constant).
std::shared_ptr<const dnnl::memory> PackWeights(const runtime::PrepareContext& context,
                                                const void* source, const dnnl::memory::desc& plain,
                                                const dnnl::memory::desc& packed);

/// Weights of `source` packed by `pack` (which fills the memory of layout `packed`), or found in
/// the device's packed-weight cache under (`source`, `read`, `packed`). `read` describes how the
/// packed weights read `source` (dimensions and strides over its bytes): for weights that no
/// reorder of `source` gives (a permutation of their dimensions that `packed`'s dimensions do not
/// show), the key that tells them apart from other readings of the same bytes.
std::shared_ptr<const dnnl::memory> PackWeightsVia(const runtime::PrepareContext& context,
                                                   const void* source,
                                                   const dnnl::memory::desc& read,
                                                   const dnnl::memory::desc& packed,
                                                   absl::FunctionRef<void(dnnl::memory&)> pack);

/// The calling thread's stream on the CPU engine (made on its first use): oneDNN's CPU streams
/// keep no state between executions that a kernel relies on, and one per thread is never shared.
dnnl::stream& ThreadStream();

/// Executes `primitive` on ThreadStream() with the `count` arguments at `args` ({DNNL_ARG_*,
/// memory.get()} pairs) through oneDNN's C interface, which takes them as an array: the C++
/// execute() builds an argument map first. Throws dnnl::error like the C++ interface. Does not
/// wait.
void Execute(const dnnl::primitive& primitive, const dnnl_exec_arg_t* args, int count);

/// Executes `reorder` from `from` into `to` (Execute with DNNL_ARG_FROM and DNNL_ARG_TO).
void ExecuteReorder(const dnnl::primitive& reorder, const dnnl::memory& from,
                    const dnnl::memory& to);

/// The memory objects one oneDNN-backed kernel binds to the buffers of its runs, kept from one run
/// to the next: a replayed instance hands a step the same buffers on every run, so after its first
/// run none is made again. Making them (memory objects, a stream and the argument map of
/// execute()) cost a small convolution 1.56 us a run against 0.39 kept (BM_OneDnnRunBinding, one
/// thread), on the stream's thread while the other intra-op threads waited. A slot is bound with
/// the same descriptor on every run
/// (a kernel numbers its operands); a moved buffer is set as the object's new handle.
/// Thread-safe: a run that finds the objects held by a concurrent run of the same kernel binds
/// objects of its own.
class ReusedMemories {
 public:
  static constexpr int kMaxSlots = 12;

  /// One run's hold on the objects (or on objects of its own, when another run holds them).
  class Run {
   public:
    explicit Run(const ReusedMemories& owner);
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    /// Slot `slot`'s memory object (0 to kMaxSlots - 1): descriptor `md`, over `data`.
    const dnnl::memory& Bind(int slot, const dnnl::memory::desc& md, const void* data);

   private:
    std::unique_lock<std::mutex> lock_;
    std::array<dnnl::memory, kMaxSlots> own_;
    std::array<dnnl::memory, kMaxSlots>* memories_;
  };

 private:
  mutable std::mutex mu_;
  mutable std::array<dnnl::memory, kMaxSlots> memories_;  // used by the run holding mu_
};

/// Row-major descriptor of `dims` (rank 1 to 6), float32 unless `type` says otherwise.
dnnl::memory::desc PlainDesc(const runtime::Shape& dims,
                             dnnl::memory::data_type type = dnnl::memory::data_type::f32);

/// How a 4-D value passed between layout-aware kernels is stored: plain NCHW, channels-last
/// (NHWC bytes, NCHW shape), or blocked (ChainTag). Named by the node attributes "x_layout",
/// "y_layout", "r_layout": "nchw" (or absent), "nhwc", "blocked".
enum class Storage { kPlain, kNhwc, kBlocked };

/// The blocked layout on the device preparing `context` (CpuKernelOptions::conv_chain_layout):
/// channel blocks of the vector width oneDNN's fastest convolutions use here (nChw16c with
/// AVX-512, nChw8c with AVX2), channels-last without either or when the options say nhwc.
dnnl::memory::format_tag ChainTag(const runtime::PrepareContext& context);

/// The storage named by the layout attribute `name` of the node being prepared.
absl::StatusOr<Storage> LayoutAttr(const runtime::PrepareContext& context, absl::string_view name);

/// `dims` stored as `how` (plain for anything but 3-D and 4-D), `chain` being the blocked
/// layout (ChainTag) of 4-D values; a 3-D value (a 1-D convolution's) stored channels-last is
/// nwc, one stored blocked has the chain's channel blocks (nCw16c, nCw8c; nwc without them).
dnnl::memory::desc StoredDesc(const runtime::Shape& dims, Storage how,
                              dnnl::memory::format_tag chain);

/// Where element (n, c, h, w) of a 4-D value is stored, in floats:
/// n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block.
/// Plain: block 1, c_stride H * W. Channels-last: block 1, c_stride 1. Channel blocks (nChw16c,
/// nChw8c): block 16 or 8, c_stride H * W * block; the channels past C in the last block are
/// padding (written as zeros).
struct Placement {
  int64_t block = 1;
  int64_t n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;

  int64_t At(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block;
  }
  /// Consecutive channels lie next to each other: `lanes` of them from a multiple of `lanes`.
  bool ChannelsInner() const { return block > 1 || c_stride == 1; }
  bool operator==(const Placement& o) const {
    return block == o.block && n_stride == o.n_stride && c_stride == o.c_stride &&
           h_stride == o.h_stride && w_stride == o.w_stride;
  }
};

/// The placement of a 4-D float value stored as `how` (StoredDesc with the chain's layout of
/// the device preparing `context`), or of a 3-D one [N, C, W] as [N, C, 1, W]; UNIMPLEMENTED
/// for another kind of layout.
absl::StatusOr<Placement> PlacementOf(const runtime::PrepareContext& context,
                                      const runtime::Shape& dims, Storage how);

/// Channels handled together when they lie next to each other: a block, or all of them.
inline int64_t Lanes(const Placement& p, int64_t channels) {
  return p.block > 1 ? p.block : channels;
}

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_
