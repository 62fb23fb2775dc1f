#include "kernels/cpu/onednn_util.h"

#include <cstdlib>
#include <string>

#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

using dnnl::memory;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

memory::desc PlainDesc(const runtime::Shape& dims) {
  static constexpr memory::format_tag kTags[] = {
      memory::format_tag::a,    memory::format_tag::ab,    memory::format_tag::abc,
      memory::format_tag::abcd, memory::format_tag::abcde, memory::format_tag::abcdef};
  const size_t rank = dims.empty() ? 1 : std::min<size_t>(dims.size(), 6);
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      kTags[rank - 1]);
}

memory::format_tag ChainTag() {
  static const memory::format_tag tag = [] {
    const char* forced = std::getenv("REPRISE_CONV_CHAIN_LAYOUT");
    if (forced != nullptr && std::string(forced) == "nhwc") return memory::format_tag::nhwc;
    const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
    const int avx512 = static_cast<int>(dnnl::cpu_isa::avx512_core);
    const int avx2 = static_cast<int>(dnnl::cpu_isa::avx2);
    if ((isa & avx512) == avx512) return memory::format_tag::nChw16c;
    if ((isa & avx2) == avx2) return memory::format_tag::nChw8c;
    return memory::format_tag::nhwc;
  }();
  return tag;
}

absl::StatusOr<Storage> LayoutAttr(const runtime::PrepareContext& context, absl::string_view name) {
  auto layout = AttrsOf(context).GetString(name, "nchw");
  if (!layout.ok()) return layout.status();
  if (*layout == "nchw") return Storage::kPlain;
  if (*layout == "nhwc") return Storage::kNhwc;
  if (*layout == "blocked") return Storage::kBlocked;
  return InvalidArgument(context, name, " \"", *layout, "\" is none of nchw, nhwc, blocked");
}

memory::desc StoredDesc(const runtime::Shape& dims, Storage how) {
  if (dims.size() != 4 || how == Storage::kPlain) return PlainDesc(dims);
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      how == Storage::kNhwc ? memory::format_tag::nhwc : ChainTag());
}

}  // namespace reprise::kernels::cpu
