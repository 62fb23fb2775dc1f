// What the oneDNN-backed CPU kernels share: the engine, plain descriptors, and the blocked
// layout that values between convolutions (and the pooling inside such chains) are stored in.
#ifndef REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_
#define REPRISE_KERNELS_CPU_ONEDNN_UTIL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dnnl.hpp"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// The process-wide CPU engine (created on first use; oneDNN engines are thread-safe).
const dnnl::engine& CpuEngine();

/// Row-major float32 descriptor of `dims` (rank 1 to 6).
dnnl::memory::desc PlainDesc(const runtime::Shape& dims);

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
