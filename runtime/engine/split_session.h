// How a StreamSession runs a model cut at its value-dependent nodes (Model::value_split): the
// sessions of its two parts in turn. Internal to stream_session.cc.
#ifndef REPRISE_RUNTIME_ENGINE_SPLIT_SESSION_H_
#define REPRISE_RUNTIME_ENGINE_SPLIT_SESSION_H_

#include "absl/status/status.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"

namespace reprise::runtime::engine {

/// Runs `model` (which has a value_split) for `inputs`: `prefix` (the prefix's session) on
/// them, then `tail` on the prefix's frontier outputs and the inputs the tail reads; hands each
/// of the model's outputs, copied out of the two, to `visit` in the model's order. `info` gets
/// both runs' accounts together (times added, flags of either). `*visited` tells whether `visit`
/// was called (then an error may be `visit`'s own, and the outputs are partly handed over).
absl::Status RunSplitModel(const Model& model, StreamSession& prefix, StreamSession& tail,
                           const ValidatedInputs& inputs, StreamSession::OutputVisitor visit,
                           StreamRunInfo* info, bool capture, bool* visited);

/// Adds `part`'s counters to `total`'s.
void AddCounters(const StreamSessionCounters& part, StreamSessionCounters* total);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_SPLIT_SESSION_H_
