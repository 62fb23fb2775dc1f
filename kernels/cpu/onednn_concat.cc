// kFusedConcatOp: Concat along the channels of 4-D float32 values inside a chain of
// convolutions. Each input and the output may be stored in the convolutions' blocked layout
// ("x<k>_layout", "y_layout"), so that the chain is not reordered to the plain layout and back
// around a concatenation (fire modules, Inception blocks, dense blocks).
// In the plain layout, and in the blocked one when every input has whole channel blocks, an
// image of the output is its inputs' images one after another: the kernel copies those runs.
// An input stored otherwise is first reordered (oneDNN) into that layout in the workspace; an
// output stored otherwise is assembled there and reordered. (oneDNN's own concatenation was
// measured 20-30x slower than the copies on these shapes.)
#include <algorithm>
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

class ConcatKernel final : public PreparedKernel {
 public:
  // One input with elements: its channels, and the reorder into the assembly layout (or none).
  struct Piece {
    size_t input = 0;
    int64_t channels = 0;
    memory::desc stored, assembled;
    std::optional<dnnl::reorder> reorder;
    size_t at = 0;  // the reordered copy's workspace offset
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
  };

  explicit ConcatKernel(Parts parts) : p_(std::move(parts)) {}

  absl::string_view op() const override { return kFusedConcatOp; }
  const std::vector<TensorDesc>& outputs() const override { return p_.outputs; }
  size_t workspace_bytes() const override { return p_.total; }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? p_.y_stored.get_size() : 0;
  }

  absl::Status Run(const KernelArgs& args) const override {
    UseIntraOpThreads(p_.threads);
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream stream(engine);
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
      // Output image n is the inputs' images n in turn: float f of the whole output is float
      // f % image of image f / image, which lies in the input whose channels cover it.
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
  // Assemble in the blocked layout when the output is stored so and every input has whole
  // channel blocks (an image is then its inputs' images in turn, as in the plain layout).
  const int64_t block = ChannelBlock(chain);
  bool whole_blocks = block > 0;
  for (const runtime::TensorDesc& in : context.inputs) {
    if (block > 0 && in.shape[1] % block != 0) whole_blocks = false;
  }
  const Storage assembly =
      y_storage == Storage::kBlocked && whole_blocks ? Storage::kBlocked : Storage::kPlain;
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
      parts.pieces.push_back(std::move(piece));
    }
    parts.y_stored = StoredDesc(y, y_storage, chain);
    parts.y_assembled = StoredDesc(y, assembly, chain);
    reorder(parts.y_assembled, parts.y_stored, parts.y_assembled.get_size(), &parts.y_reorder,
            &parts.y_at);
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
