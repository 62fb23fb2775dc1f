#include "runtime/engine/split_session.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/string_tensor.h"

namespace reprise::runtime::engine {

namespace {

// Adds `part`'s account of a run to `total`'s.
void AddRunInfo(const StreamRunInfo& part, StreamRunInfo* total) {
  total->planned |= part.planned;
  total->captured |= part.captured;
  total->replayed |= part.replayed;
  total->eager |= part.eager;
  total->capture_failed |= part.capture_failed;
  if (!part.capture_error.empty()) {
    total->capture_error = total->capture_error.empty()
                               ? part.capture_error
                               : absl::StrCat(total->capture_error, "; ", part.capture_error);
  }
  total->evictions += part.evictions;
  total->transient |= part.transient;
  total->plan_ns += part.plan_ns;
  total->choose_ns += part.choose_ns;
  total->capture_ns += part.capture_ns;
  total->run_ns += part.run_ns;
}

// Runs `session` on `inputs` and copies its outputs into `outputs`.
absl::Status RunInto(StreamSession& session, const ValidatedInputs& inputs, bool capture,
                     StreamRunInfo* info, std::vector<TensorValue>* outputs) {
  outputs->assign(session.model().graph().outputs.size(), TensorValue{});
  return session.Run(
      inputs,
      [outputs](size_t i, const PlanTensor& out) {
        (*outputs)[i] = CopyTensorValue(out.dtype, out.shape, out.data);
        return absl::OkStatus();
      },
      info, capture);
}

}  // namespace

void AddCounters(const StreamSessionCounters& part, StreamSessionCounters* total) {
  total->captures += part.captures;
  total->replays += part.replays;
  total->eager_runs += part.eager_runs;
  total->evictions += part.evictions;
  total->capture_failures += part.capture_failures;
  total->budget_refusals += part.budget_refusals;
  total->value_plans += part.value_plans;
  total->staged_bytes += part.staged_bytes;
  total->live_instances += part.live_instances;
  total->live_bytes += part.live_bytes;
  total->arena_bytes += part.arena_bytes;
}

absl::Status RunSplitModel(const Model& model, StreamSession& prefix, StreamSession& tail,
                           const ValidatedInputs& inputs, StreamSession::OutputVisitor visit,
                           StreamRunInfo* info, bool capture, bool* visited) {
  *visited = false;
  const Model::SplitModels& split = *model.value_split();
  StreamRunInfo total;
  StreamRunInfo part;
  std::vector<TensorValue> prefix_out;
  RETURN_IF_ERROR(RunInto(prefix, inputs, capture, &part, &prefix_out));
  AddRunInfo(part, &total);
  std::vector<InputView> views;
  for (size_t k = 0; k < split.frontier; ++k) {
    const TensorValue& value = prefix_out[k];
    InputView view;
    view.dtype = value.dtype;
    view.shape = value.shape;
    view.pieces.emplace_back(value.bytes.data(), value.bytes.size());
    view.value = &value;
    views.push_back(std::move(view));
  }
  for (size_t index : split.tail_graph_inputs) views.push_back(inputs[index]);
  std::vector<TensorValue> tail_out;
  part = StreamRunInfo{};
  RETURN_IF_ERROR(
      RunInto(tail, Model::AssumeValidated(std::move(views)), capture, &part, &tail_out));
  AddRunInfo(part, &total);
  const std::vector<GraphOutput>& names = model.graph().outputs;
  for (size_t i = 0; i < split.outputs.size(); ++i) {
    const ValueSplit::Source& from = split.outputs[i];
    TensorValue& value = from.tail ? tail_out[from.index] : prefix_out[from.index];
    PlanTensor out;
    out.name = names[i].name;
    out.dtype = value.dtype;
    out.shape = value.shape;
    out.bytes = value.bytes.size();
    out.data = value.bytes.data();
    *visited = true;
    RETURN_IF_ERROR(visit(i, out));
  }
  if (info != nullptr) *info = total;
  return absl::OkStatus();
}

}  // namespace reprise::runtime::engine
