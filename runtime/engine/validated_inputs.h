// The inputs of one run, borrowed and already checked against the model: what the request path
// hands to StreamSession::Run after validating a request once, at its boundary.
#ifndef REPRISE_RUNTIME_ENGINE_VALIDATED_INPUTS_H_
#define REPRISE_RUNTIME_ENGINE_VALIDATED_INPUTS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "runtime/core/data_type.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime::engine {

/// One input of a run. Its bytes are the concatenation of `pieces` (e.g. the rows of the
/// requests of a batch, in order), then zeros up to the tensor's size (a batch's padding rows):
/// staging copies each piece once, straight into the plan's input buffer. A string tensor is
/// one piece, its StringElement array, whose views must stay valid until the run's outputs have
/// been read. Borrowed: the pieces must outlive the run.
struct InputView {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  absl::InlinedVector<std::span<const uint8_t>, 1> pieces;
  /// The whole tensor as a value, when the caller has one (its bytes are then the one piece);
  /// null otherwise. Lets the engine key and plan on it without gathering (string tensors,
  /// whose views need their string bytes, always have one). Borrowed like the pieces.
  const TensorValue* value = nullptr;

  /// The bytes the pieces hold (at most the tensor's size, once validated).
  size_t piece_bytes() const {
    size_t n = 0;
    for (const auto& piece : pieces) n += piece.size();
    return n;
  }

  /// Copies the pieces to `out`, one after the other, with `copy` (memcpy's arguments), and
  /// zeros the rest of its `bytes` (a batch's padding rows). The caller has checked that
  /// piece_bytes() <= `bytes`.
  void CopyTo(uint8_t* out, size_t bytes,
              absl::FunctionRef<void(void*, const void*, size_t)> copy) const {
    size_t at = 0;
    for (const auto& piece : pieces) {
      if (!piece.empty()) copy(out + at, piece.data(), piece.size());
      at += piece.size();
    }
    if (at < bytes) std::memset(out + at, 0, bytes - at);
  }
};

class Model;

/// A run's inputs in the model's graph-input order, checked against the model: element types,
/// ranks and fixed dimensions, and the byte sizes of the pieces (never more than the shape
/// holds). Only a Model makes one (Model::Validate checks; Model::AssumeValidated is for a
/// caller that checked against Model::inputs() itself), so a function that takes it need not
/// check again.
class ValidatedInputs {
 public:
  ValidatedInputs() = default;
  size_t size() const { return inputs_.size(); }
  const InputView& operator[](size_t i) const { return inputs_[i]; }
  std::span<const InputView> views() const { return inputs_; }

 private:
  friend class Model;
  explicit ValidatedInputs(std::vector<InputView> inputs) : inputs_(std::move(inputs)) {}
  std::vector<InputView> inputs_;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_VALIDATED_INPUTS_H_
