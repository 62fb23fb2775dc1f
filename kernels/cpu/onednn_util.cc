#include "kernels/cpu/onednn_util.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

using dnnl::memory;

namespace {

// Weights packed into a primitive's layout, shared by the kernels of every plan of a model (a
// model has one plan per input shape, per stream): keyed by the plan-time weights' address and
// the packed layout. Entries are weak: packed weights live as long as a kernel uses them, and a
// kernel keeps the source weights alive (TensorDesc::data), so a live entry's address cannot
// have been reused by other weights.
class PackedWeightCache {
 public:
  std::shared_ptr<const memory> Find(const void* source, const memory::desc& packed) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(source);
    if (it == entries_.end()) return nullptr;
    for (const Entry& entry : it->second) {
      if (entry.desc != packed) continue;
      if (auto hit = entry.packed.lock()) return hit;
    }
    return nullptr;
  }

  void Add(const void* source, const memory::desc& packed,
           const std::shared_ptr<const memory>& weights) {
    std::lock_guard<std::mutex> lock(mu_);
    // Expired entries go first: the table stays as large as the live kernels need.
    for (auto it = entries_.begin(); it != entries_.end();) {
      std::erase_if(it->second, [](const Entry& e) { return e.packed.expired(); });
      it = it->second.empty() ? entries_.erase(it) : std::next(it);
    }
    entries_[source].push_back(Entry{packed, weights});
  }

 private:
  struct Entry {
    memory::desc desc;
    std::weak_ptr<const memory> packed;
  };
  std::mutex mu_;
  std::unordered_map<const void*, std::vector<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

PackedWeightCache& WeightCache() {
  static PackedWeightCache* const cache = new PackedWeightCache();
  return *cache;
}

}  // namespace

// `source` (plain, `plain`) in the layout `packed`: borrowed when they are the same, else
// reordered once (Winograd's weight transform is slow: ~45 ms for 512x512x3x3) or found in the
// cache.
std::shared_ptr<const memory> PackWeights(const void* source, const memory::desc& plain,
                                          const memory::desc& packed) {
  const dnnl::engine& engine = CpuEngine();
  memory from(plain, engine, const_cast<void*>(source));
  // Borrowed: the plan keeps the source alive.
  if (packed == plain) return std::make_shared<const memory>(from);
  if (auto hit = WeightCache().Find(source, packed)) return hit;
  auto to = std::make_shared<memory>(packed, engine);
  dnnl::stream stream(engine);
  dnnl::reorder(from, *to).execute(stream, from, *to);
  stream.wait();
  std::shared_ptr<const memory> result = std::move(to);
  WeightCache().Add(source, packed, result);
  return result;
}

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

memory::desc PlainDesc(const runtime::Shape& dims, memory::data_type type) {
  static constexpr memory::format_tag kTags[] = {
      memory::format_tag::a,    memory::format_tag::ab,    memory::format_tag::abc,
      memory::format_tag::abcd, memory::format_tag::abcde, memory::format_tag::abcdef};
  const size_t rank = dims.empty() ? 1 : std::min<size_t>(dims.size(), 6);
  return memory::desc(memory::dims(dims.begin(), dims.end()), type, kTags[rank - 1]);
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
