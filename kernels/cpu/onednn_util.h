// What the oneDNN-backed CPU kernels share: the engine, plain descriptors, and the blocked
// layout that values between convolutions (and the pooling inside such chains) are stored in.
#ifndef REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_
#define REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dnnl.hpp"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// The process-wide CPU engine (created on first use; oneDNN engines are thread-safe).
const dnnl::engine& CpuEngine();

/// `source` (stored as `plain`) in the layout `packed`: borrowed when the two are the same, else
/// reordered once into memory the result owns, or found in a process-wide cache shared by the
/// kernels of every plan of a model (keyed by `source`'s address and `packed`; entries live as
/// long as a kernel holds the result). `source` must outlive the result (a plan-time constant).
std::shared_ptr<const dnnl::memory> PackWeights(const void* source, const dnnl::memory::desc& plain,
                                                const dnnl::memory::desc& packed);

/// Row-major descriptor of `dims` (rank 1 to 6), float32 unless `type` says otherwise.
dnnl::memory::desc PlainDesc(const runtime::Shape& dims,
                             dnnl::memory::data_type type = dnnl::memory::data_type::f32);

/// How a 4-D value passed between layout-aware kernels is stored: plain NCHW, channels-last
/// (NHWC bytes, NCHW shape), or blocked (ChainTag). Named by the node attributes "x_layout",
/// "y_layout", "r_layout": "nchw" (or absent), "nhwc", "blocked".
enum class Storage { kPlain, kNhwc, kBlocked };

/// The blocked layout: channel blocks of the vector width oneDNN's fastest convolutions use
/// here (nChw16c with AVX-512, nChw8c with AVX2), channels-last without either.
/// REPRISE_CONV_CHAIN_LAYOUT=nhwc forces channels-last (for comparisons). Read once.
dnnl::memory::format_tag ChainTag();

/// The storage named by the layout attribute `name` of the node being prepared.
absl::StatusOr<Storage> LayoutAttr(const runtime::PrepareContext& context, absl::string_view name);

/// `dims` stored as `how` (plain for anything but 4-D).
dnnl::memory::desc StoredDesc(const runtime::Shape& dims, Storage how);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_
