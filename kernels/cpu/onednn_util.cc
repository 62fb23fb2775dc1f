#include "kernels/cpu/onednn_util.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/kernel_util.h"

namespace reprise::kernels::cpu {

using dnnl::memory;

std::shared_ptr<const memory> PackedWeightCache::Find(const void* source, const memory::desc& plain,
                                                      const memory::desc& packed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(source);
  if (it == entries_.end()) return nullptr;
  for (const Entry& entry : it->second) {
    if (entry.plain != plain || entry.packed_desc != packed) continue;
    if (auto hit = entry.packed.lock()) {
      ++reused_;
      return hit;
    }
  }
  return nullptr;
}

void PackedWeightCache::Add(const void* source, const memory::desc& plain,
                            const memory::desc& packed,
                            const std::shared_ptr<const memory>& weights) {
  std::lock_guard<std::mutex> lock(mu_);
  // Expired entries go first: the table stays as large as the live kernels need.
  for (auto it = entries_.begin(); it != entries_.end();) {
    std::erase_if(it->second, [](const Entry& e) { return e.packed.expired(); });
    it = it->second.empty() ? entries_.erase(it) : std::next(it);
  }
  entries_[source].push_back(Entry{plain, packed, weights});
  ++packed_;
}

PackedWeightStats PackedWeightCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PackedWeightStats stats;
  for (const auto& [source, entries] : entries_) {
    stats.live += static_cast<size_t>(std::count_if(
        entries.begin(), entries.end(), [](const Entry& e) { return !e.packed.expired(); }));
  }
  stats.packed = packed_;
  stats.reused = reused_;
  return stats;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

void Execute(const dnnl::primitive& primitive, const dnnl_exec_arg_t* args, int count) {
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(primitive.get(), ThreadStream().get(), count, args),
      "could not execute a primitive");
}

void ExecuteReorder(const dnnl::primitive& reorder, const memory& from, const memory& to) {
  const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  Execute(reorder, args, 2);
}

ReusedMemories::Run::Run(const ReusedMemories& owner) : lock_(owner.mu_, std::try_to_lock) {
  // Held by this run, or by a concurrent one: then this run's objects are its own.
  memories_ = lock_.owns_lock() ? &owner.memories_ : &own_;
}

const memory& ReusedMemories::Run::Bind(int slot, const memory::desc& md, const void* data) {
  memory& m = (*memories_)[static_cast<size_t>(slot)];
  void* handle = const_cast<void*>(data);
  if (!m) {
    m = memory(md, CpuEngine(), handle);
  } else if (m.get_data_handle() != handle) {
    m.set_data_handle(handle);
  }
  return m;
}

// `source` (plain, `plain`) in the layout `packed`: borrowed when they are the same, else
// found in the device's cache or reordered once (Winograd's weight transform is slow: ~45 ms for
// 512x512x3x3).
std::shared_ptr<const memory> PackWeights(const runtime::PrepareContext& context,
                                          const void* source, const memory::desc& plain,
                                          const memory::desc& packed) {
  // Borrowed: the plan keeps the source alive.
  if (packed == plain) {
    return std::make_shared<const memory>(plain, CpuEngine(), const_cast<void*>(source));
  }
  return PackWeightsVia(context, source, plain, packed, [&](memory& to) {
    memory from(plain, CpuEngine(), const_cast<void*>(source));
    dnnl::stream stream(CpuEngine());
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
  });
}

std::shared_ptr<const memory> PackWeightsVia(const runtime::PrepareContext& context,
                                             const void* source, const memory::desc& read,
                                             const memory::desc& packed,
                                             absl::FunctionRef<void(memory&)> pack) {
  const CpuKernelState* state = CpuKernelStateOf(context);
  PackedWeightCache* cache = state != nullptr ? &state->weight_cache() : nullptr;
  if (cache != nullptr) {
    if (auto hit = cache->Find(source, read, packed)) return hit;
  }
  auto to = std::make_shared<memory>(packed, CpuEngine());
  pack(*to);
  std::shared_ptr<const memory> result = std::move(to);
  if (cache != nullptr) cache->Add(source, read, packed, result);
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

memory::format_tag ChainTag(const runtime::PrepareContext& context) {
  if (CpuOptionsOf(context).conv_chain_layout == ConvChainLayout::kNhwc) {
    return memory::format_tag::nhwc;
  }
  const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const int avx512 = static_cast<int>(dnnl::cpu_isa::avx512_core);
  const int avx2 = static_cast<int>(dnnl::cpu_isa::avx2);
  if ((isa & avx512) == avx512) return memory::format_tag::nChw16c;
  if ((isa & avx2) == avx2) return memory::format_tag::nChw8c;
  return memory::format_tag::nhwc;
}

absl::StatusOr<Storage> LayoutAttr(const runtime::PrepareContext& context, absl::string_view name) {
  auto layout = AttrsOf(context).GetString(name, "nchw");
  if (!layout.ok()) return layout.status();
  if (*layout == "nchw") return Storage::kPlain;
  if (*layout == "nhwc") return Storage::kNhwc;
  if (*layout == "blocked") return Storage::kBlocked;
  return InvalidArgument(context, name, " \"", *layout, "\" is none of nchw, nhwc, blocked");
}

memory::desc StoredDesc(const runtime::Shape& dims, Storage how, memory::format_tag chain) {
  if (dims.size() == 3 && how != Storage::kPlain) {
    // A 1-D convolution's value: channels-last (nwc), or blocked as the chain's channel blocks
    // over its one spatial axis (nCw16c, nCw8c; channels-last where the chain has none).
    const memory::format_tag tag = how == Storage::kNhwc ? memory::format_tag::nwc
                                   : chain == memory::format_tag::nChw16c
                                       ? memory::format_tag::nCw16c
                                   : chain == memory::format_tag::nChw8c ? memory::format_tag::nCw8c
                                                                         : memory::format_tag::nwc;
    return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32, tag);
  }
  if (dims.size() != 4 || how == Storage::kPlain) return PlainDesc(dims);
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      how == Storage::kNhwc ? memory::format_tag::nhwc : chain);
}

absl::StatusOr<Placement> PlacementOf(const runtime::PrepareContext& context,
                                      const runtime::Shape& dims, Storage how) {
  const memory::desc desc = StoredDesc(dims, how, ChainTag(context));
  const dnnl_memory_desc_t& md = desc.data;
  const auto& blocking = md.format_desc.blocking;
  if ((md.ndims != 4 && md.ndims != 3) || md.format_kind != dnnl_blocked ||
      blocking.inner_nblks > 1 || (blocking.inner_nblks == 1 && blocking.inner_idxs[0] != 1)) {
    return Unimplemented(context, "the stored layout of ", runtime::ShapeToString(dims),
                         " is not plain, channels-last or channel blocks");
  }
  Placement p;
  p.block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
  p.n_stride = blocking.strides[0];
  p.c_stride = blocking.strides[1];
  if (md.ndims == 3) {
    // [N, C, W] as [N, C, 1, W]: its one row spans W steps of W's stride.
    p.w_stride = blocking.strides[2];
    p.h_stride = md.dims[2] * p.w_stride;
    return p;
  }
  p.h_stride = blocking.strides[2];
  p.w_stride = blocking.strides[3];
  return p;
}

}  // namespace reprise::kernels::cpu
