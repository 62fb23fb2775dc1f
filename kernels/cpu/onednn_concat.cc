// kFusedConcatOp: Concat along the channels of 4-D float32 values inside a chain of
// convolutions. Each input and the output may be stored in the convolutions' blocked layout
// ("x<k>_layout", "y_layout"), so that the chain is not reordered to the plain layout and back
// around a concatenation (fire modules, Inception blocks, dense blocks).
// In the plain layout, and in the blocked one when every input has whole channel blocks, an
// image of the output is its inputs' images one after another: the kernel copies those runs.
// An output stored blocked whose inputs do not all have whole blocks (GhostNet's 36 + 36
// channels) is gathered block by block: each output vector of 16 (8) lanes takes its lanes from
// at most two blocks of each input it overlaps, one permutation of a block's lanes each.
// An input stored otherwise is first reordered (oneDNN) into the assembly layout in the
// workspace; an output stored otherwise is assembled there and reordered. (oneDNN's own
// concatenation was measured 20-30x slower than the copies on these shapes.)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/fused_ops.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using dnnl::memory;

// Output lanes of one channel block taken from one block of one input: lane l (a bit of `mask`)
// is lane `lane[l]` of block `block` of input piece `piece`.
struct Take {
  size_t piece = 0;
  int64_t block = 0;
  uint32_t mask = 0;
  std::array<int32_t, 16> lane{};
};

// What GatherBlocks reads: output block b of an image is takes[first[b] .. first[b + 1]), at
// most `lanes` of them (each gives at least one lane); lanes no take gives are padding (zeros).
struct Gather {
  const float* const* sources;  // each piece's image 0, stored blocked
  const int64_t* source_image;  // floats per image of each piece
  float* y;
  int64_t y_image, plane, y_blocks;
  const Take* takes;
  const size_t* first;
};

// Items [begin, end) of images x y_blocks x plane pixels: one output vector each. ForEachRun
// calls run(out, takes, from, count, p0, p1) for the pixels [p0, p1) of one output block: its
// `count` takes read from[t] + p * lanes.
#define REPRISE_GATHER_ARGS const Gather &g, int64_t begin, int64_t end
template <typename Run>
__attribute__((always_inline)) inline void ForEachRun(REPRISE_GATHER_ARGS, int64_t lanes,
                                                      Run&& run) {
  for (int64_t item = begin; item < end;) {
    const int64_t nb = item / g.plane, p0 = item % g.plane;
    const int64_t p1 = std::min(g.plane, p0 + (end - item));
    const int64_t n = nb / g.y_blocks, b = nb % g.y_blocks;
    const Take* takes = g.takes + g.first[b];
    const int count = static_cast<int>(g.first[b + 1] - g.first[b]);
    const float* from[16];
    for (int t = 0; t < count; ++t) {
      from[t] = g.sources[takes[t].piece] + n * g.source_image[takes[t].piece] +
                takes[t].block * g.plane * lanes;
    }
    run(g.y + n * g.y_image + b * g.plane * lanes, takes, from, count, p0, p1);
    item += p1 - p0;
  }
}

__attribute__((target("avx512f"))) void GatherBlocksAvx512(REPRISE_GATHER_ARGS) {
  ForEachRun(
      g, begin, end, 16,
      [](float* out, const Take* takes, const float* const* from, int count, int64_t p0, int64_t p1)
          __attribute__((target("avx512f"))) {
            __m512i index[16];
            for (int t = 0; t < count; ++t) index[t] = _mm512_loadu_si512(takes[t].lane.data());
            for (int64_t p = p0; p < p1; ++p) {
              __m512 v = _mm512_setzero_ps();
              for (int t = 0; t < count; ++t) {
                v = _mm512_mask_permutexvar_ps(v, static_cast<__mmask16>(takes[t].mask), index[t],
                                               _mm512_loadu_ps(from[t] + p * 16));
              }
              _mm512_storeu_ps(out + p * 16, v);
            }
          });
}
__attribute__((target("avx2"))) void GatherBlocksAvx2(REPRISE_GATHER_ARGS) {
  ForEachRun(
      g, begin, end, 8,
      [](float* out, const Take* takes, const float* const* from, int count, int64_t p0,
         int64_t p1) __attribute__((target("avx2"))) {
        __m256i index[8];
        __m256 mask[8];
        const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        for (int t = 0; t < count; ++t) {
          index[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(takes[t].lane.data()));
          const __m256i set =
              _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(takes[t].mask)), bits);
          mask[t] = _mm256_castsi256_ps(_mm256_cmpeq_epi32(set, bits));
        }
        for (int64_t p = p0; p < p1; ++p) {
          __m256 v = _mm256_setzero_ps();
          for (int t = 0; t < count; ++t) {
            v = _mm256_blendv_ps(
                v, _mm256_permutevar8x32_ps(_mm256_loadu_ps(from[t] + p * 8), index[t]), mask[t]);
          }
          _mm256_storeu_ps(out + p * 8, v);
        }
      });
}
#undef REPRISE_GATHER_ARGS

class ConcatKernel final : public PreparedKernel {
 public:
  // One input with elements: its channels, and the reorder into the assembly layout (or none).
  struct Piece {
    size_t input = 0;
    int64_t channels = 0;
    memory::desc stored, assembled;
    std::optional<dnnl::reorder> reorder;
    size_t at = 0;      // the reordered copy's workspace offset
    int64_t image = 0;  // floats per image as assembled
  };
  struct Parts {
    std::string label;
    std::vector<TensorDesc> outputs;
    std::vector<Piece> pieces;
    int64_t images = 0, plane = 0;  // N, and H * W
    int64_t channels = 0;           // the output's C
    memory::desc y_stored, y_assembled;
    std::optional<dnnl::reorder> y_reorder;
    size_t y_at = 0, total = 0;
    int threads = 1;
    // The gather (an output in channel blocks of `lanes` whose inputs are not all whole blocks;
    // none when `first` is empty): output block b is takes[first[b] .. first[b + 1]).
    int64_t lanes = 0;
    std::vector<Take> takes;
    std::vector<size_t> first;
    std::vector<int64_t> piece_floats;  // each piece's floats per image (Piece::image), in order
    // With one image assembled by runs into the output: each input's byte offset there, or
    // kNotInOutput (reordered first, or empty); else empty (input_offsets_in_output).
    std::vector<size_t> offsets;
  };

  explicit ConcatKernel(Parts parts) : p_(std::move(parts)) {}

  absl::string_view op() const override { return kFusedConcatOp; }
  const std::vector<TensorDesc>& outputs() const override { return p_.outputs; }
  size_t workspace_bytes() const override { return p_.total; }
  std::string implementation() const override {
    return p_.first.empty() ? "own copies of runs" : "own gather of channel blocks";
  }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? p_.y_stored.get_size() : 0;
  }
  std::vector<size_t> input_offsets_in_output() const override { return p_.offsets; }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream& stream = ThreadStream();
      float* y = p_.y_reorder.has_value() ? reinterpret_cast<float*>(ws + p_.y_at)
                                          : static_cast<float*>(args.outputs[0]);
      // Each input (reordered first when stored otherwise) is, per image, a run of
      // channels * H * W floats at its channel offset in the output's image: the runs of all
      // inputs copied as one range of floats split over the threads.
      absl::InlinedVector<const float*, 8> sources;
      for (const Piece& piece : p_.pieces) {
        const void* x = args.inputs[piece.input];
        if (piece.reorder.has_value()) {
          memory from(piece.stored, engine, const_cast<void*>(x));
          memory to(piece.assembled, engine, ws + piece.at);
          piece.reorder->execute(stream, from, to);
          stream.wait();
          x = ws + piece.at;
        }
        sources.push_back(static_cast<const float*>(x));
      }
      if (!p_.first.empty()) {
        GatherInto(sources.data(), y);
      } else if (!p_.offsets.empty()) {
        // One image: each piece one run, copied unless its producer wrote it in place.
        int64_t at = 0;
        for (size_t k = 0; k < p_.pieces.size(); ++k) {
          if (sources[k] != y + at) {
            ParallelCopy(y + at, sources[k],
                         static_cast<size_t>(p_.pieces[k].image) * sizeof(float), p_.threads);
          }
          at += p_.pieces[k].image;
        }
      } else {
        CopyRunsInto(sources.data(), y);
      }
      if (p_.y_reorder.has_value()) {
        memory from(p_.y_assembled, engine, y);
        memory to(p_.y_stored, engine, args.outputs[0]);
        p_.y_reorder->execute(stream, from, to);
        stream.wait();
      }
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(p_.label, ": onednn execution failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  // Output image n is the inputs' images n in turn: float f of the whole output is float
  // f % image of image f / image, which lies in the input whose channels cover it.
  void CopyRunsInto(const float* const* sources, float* y) const {
    const int64_t image = p_.channels * p_.plane;
    ParallelFor(p_.images * image, p_.threads, 1.0, [&](int64_t begin, int64_t end) {
      int64_t f = begin;
      while (f < end) {
        const int64_t n = f / image;
        int64_t within = f % image, offset = 0;
        size_t k = 0;
        while (within >= offset + p_.pieces[k].channels * p_.plane) {
          offset += p_.pieces[k].channels * p_.plane;
          ++k;
        }
        const int64_t run = p_.pieces[k].channels * p_.plane;
        const int64_t count = std::min(end - f, offset + run - within);
        std::memcpy(y + f, sources[k] + n * run + (within - offset),
                    static_cast<size_t>(count) * sizeof(float));
        f += count;
      }
    });
  }

  // One output vector per (image, output block, pixel), split over the threads.
  void GatherInto(const float* const* sources, float* y) const {
    const int64_t y_blocks = static_cast<int64_t>(p_.first.size()) - 1;
    const Gather g{sources,
                   p_.piece_floats.data(),
                   y,
                   y_blocks * p_.plane * p_.lanes,
                   p_.plane,
                   y_blocks,
                   p_.takes.data(),
                   p_.first.data()};
    const auto fn = p_.lanes == 16 ? &GatherBlocksAvx512 : &GatherBlocksAvx2;
    ParallelFor(p_.images * y_blocks * p_.plane, p_.threads, 2.0 * static_cast<double>(p_.lanes),
                [&](int64_t begin, int64_t end) { fn(g, begin, end); });
  }

  Parts p_;
};

// The channel block of `chain` (ChainTag): 16 or 8; 0 for channels-last.
int64_t ChannelBlock(memory::format_tag chain) {
  if (chain == memory::format_tag::nChw16c) return 16;
  if (chain == memory::format_tag::nChw8c) return 8;
  return 0;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConcat(const PrepareContext& context) {
  // oneDNN keeps the OpenMP thread count a primitive is created with: create it with the
  // stream's intra-op threads, not the preparing thread's count (the core count by default).
  UseIntraOpThreads(context.intra_op_threads);
  RETURN_IF_ERROR(ExpectInputCount(context, 1, std::numeric_limits<size_t>::max()));
  if (context.num_outputs != 1) {
    return InvalidArgument(context, "has ", context.num_outputs, " outputs, not 1");
  }
  ASSIGN_OR_RETURN(int64_t axis, AttrsOf(context).GetInt("axis", 1));
  if (axis != 1 && axis != -3) {
    return InvalidArgument(context, "axis ", axis, " is not the channels (1) of 4-D values");
  }
  const Shape& first = context.inputs[0].shape;
  if (first.size() != 4) {
    return InvalidArgument(context, "input 0 ", runtime::ShapeToString(first), " is not 4-D");
  }
  Shape y = first;
  y[1] = 0;
  for (size_t k = 0; k < context.inputs.size(); ++k) {
    RETURN_IF_ERROR(ExpectType(context, k, {DataType::kFloat32}));
    const Shape& x = context.inputs[k].shape;
    if (x.size() != 4 || x[0] != first[0] || x[2] != first[2] || x[3] != first[3]) {
      return InvalidArgument(context, "input ", k, " ", runtime::ShapeToString(x),
                             " does not match input 0 ", runtime::ShapeToString(first),
                             " outside the channels");
    }
    if (x[1] > std::numeric_limits<int64_t>::max() - y[1]) {
      return InvalidArgument(context, "the concatenated channels overflow");
    }
    y[1] += x[1];
  }
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y)};
  if (runtime::NumElements(y) == 0) {
    return MakeKernel(context, std::move(outputs),
                      [](const KernelArgs&) { return absl::OkStatus(); });
  }
  const memory::format_tag chain = ChainTag(context);
  ASSIGN_OR_RETURN(Storage y_storage, LayoutAttr(context, "y_layout"));
  // Assemble in the blocked layout when the output is stored so: by runs when every input has
  // whole channel blocks (an image is then its inputs' images in turn, as in the plain layout),
  // else by the gather where it runs (else in the plain layout).
  const int64_t block = ChannelBlock(chain);
  bool whole_blocks = block > 0;
  for (const runtime::TensorDesc& in : context.inputs) {
    if (block > 0 && in.shape[1] % block != 0) whole_blocks = false;
  }
  // The gather has copies for AVX-512F (blocks of 16) and AVX2 (of 8), the CPUs whose chains
  // have those blocks.
  const bool gather = (block == 16 && OwnCopyLevel() == 2) || (block == 8 && OwnCopyLevel() >= 1);
  const Storage assembly = y_storage == Storage::kBlocked && (whole_blocks || gather)
                               ? Storage::kBlocked
                               : Storage::kPlain;
  try {
    const dnnl::engine& engine = CpuEngine();
    ConcatKernel::Parts parts;
    parts.label = NodeLabel(context);
    parts.threads = context.intra_op_threads;
    parts.images = y[0];
    parts.plane = y[2] * y[3];
    parts.channels = y[1];
    // A reorder between two layouts when they differ, and the workspace for its result (the
    // assembly buffer of `result` bytes).
    size_t at = 0;
    auto reorder = [&](const memory::desc& from, const memory::desc& to, size_t result,
                       std::optional<dnnl::reorder>* r, size_t* where) {
      if (from == to) return;
      *r = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
      *where = at;
      at += (result + 63) / 64 * 64;
    };
    for (size_t k = 0; k < context.inputs.size(); ++k) {
      ASSIGN_OR_RETURN(Storage storage, LayoutAttr(context, absl::StrCat("x", k, "_layout")));
      const Shape& x = context.inputs[k].shape;
      if (runtime::NumElements(x) == 0) continue;
      ConcatKernel::Piece piece;
      piece.input = k;
      piece.channels = x[1];
      piece.stored = StoredDesc(x, storage, chain);
      piece.assembled = StoredDesc(x, assembly, chain);
      reorder(piece.stored, piece.assembled, piece.assembled.get_size(), &piece.reorder, &piece.at);
      piece.image = static_cast<int64_t>(piece.assembled.get_size() / sizeof(float)) / y[0];
      parts.pieces.push_back(std::move(piece));
    }
    if (assembly == Storage::kBlocked && !whole_blocks) {
      parts.lanes = block;
      parts.first.push_back(0);
      for (const ConcatKernel::Piece& piece : parts.pieces)
        parts.piece_floats.push_back(piece.image);
      // Output channel c of block c / block, lane c % block: channel c - offset of the piece
      // that covers it, in that piece's block (c - offset) / block.
      size_t k = 0;
      int64_t offset = 0;
      for (int64_t b = 0; b * block < y[1]; ++b) {
        for (int64_t l = 0; l < block && b * block + l < y[1]; ++l) {
          const int64_t c = b * block + l;
          while (c >= offset + parts.pieces[k].channels) offset += parts.pieces[k++].channels;
          const int64_t from = c - offset;
          const size_t begin = parts.first.back();
          if (parts.takes.size() == begin || parts.takes.back().piece != k ||
              parts.takes.back().block != from / block) {
            parts.takes.push_back(Take{k, from / block, 0, {}});
          }
          parts.takes.back().mask |= 1u << l;
          parts.takes.back().lane[static_cast<size_t>(l)] = static_cast<int32_t>(from % block);
        }
        parts.first.push_back(parts.takes.size());
      }
    }
    parts.y_stored = StoredDesc(y, y_storage, chain);
    parts.y_assembled = StoredDesc(y, assembly, chain);
    reorder(parts.y_assembled, parts.y_stored, parts.y_assembled.get_size(), &parts.y_reorder,
            &parts.y_at);
    if (parts.images == 1 && parts.first.empty() && !parts.y_reorder.has_value()) {
      parts.offsets.assign(context.inputs.size(), PreparedKernel::kNotInOutput);
      size_t offset = 0;
      for (const ConcatKernel::Piece& piece : parts.pieces) {
        if (!piece.reorder.has_value()) parts.offsets[piece.input] = offset;
        offset += static_cast<size_t>(piece.image) * sizeof(float);
      }
    }
    parts.total = at;
    parts.outputs = std::move(outputs);
    return std::make_unique<ConcatKernel>(std::move(parts));
  } catch (const dnnl::error& e) {
    return Unimplemented(context, "onednn rejected a reorder of the concatenation into ",
                         runtime::ShapeToString(y), ": ", e.what());
  }
}

}  // namespace

absl::Status RegisterOnednnConcatKernels(runtime::KernelRegistry* registry) {
  return registry->Register(kFusedConcatOp, &PrepareFusedConcat);
}

}  // namespace reprise::kernels::cpu
