#include "server/engine_model.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/steady_clock.h"
#include "runtime/core/checked_size.h"
#include "server/batch_assembly.h"
#include "server/bytes_tensor.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace {

using runtime::engine::NamedTensor;
using runtime::engine::StreamRunInfo;
using runtime::engine::StreamSession;

// Warm-up inputs are zeros of the model's own shapes at each bucket; larger ones are not made.
constexpr int64_t kMaxWarmupElements = int64_t{1} << 28;

absl::StatusOr<NamedTensor> ToNamedTensor(const InputTensor& in) {
  NamedTensor t;
  t.name = in.name;
  if (in.dtype == runtime::DataType::kString) {
    ASSIGN_OR_RETURN(t.value, StringTensorFromSerialized(in.shape, in.data));
    return t;
  }
  t.value.dtype = in.dtype;
  t.value.shape = in.shape;
  t.value.bytes.assign(in.data.begin(), in.data.end());
  return t;
}

}  // namespace

// One request on its way through the batcher, which owns it until it hands it to RunBatch (or
// rejects it). Answered exactly once: by Answer, by Reject's answer, or by InferAsync when the
// batcher refuses it.
class EngineModel::Pending final : public BatchItem {
 public:
  explicit Pending(InferDone done) : done_(std::move(done)) {}
  absl::AnyInvocable<void() &&> Reject(absl::Status status) override {
    return [done = std::move(done_), timings = timings_, status = std::move(status)]() mutable {
      std::move(done)(std::move(status), timings);
    };
  }
  /// Destroys `p`, then answers its client: the answer may release the last hold on the model.
  static void Answer(std::unique_ptr<Pending> p, absl::StatusOr<std::vector<OutputTensor>> result) {
    InferDone done = std::move(p->done_);
    const InferTimings timings = p->timings_;
    p.reset();
    std::move(done)(std::move(result), timings);
  }
  /// Back from the batcher, which holds only Pendings of this model.
  static std::unique_ptr<Pending> From(BatchItemPtr item) {
    return std::unique_ptr<Pending>(static_cast<Pending*>(item.release()));
  }

  std::span<const InputTensor> inputs;
  std::span<const std::string> outputs;
  InferTimings timings_;

 private:
  InferDone done_;
};

absl::StatusOr<std::unique_ptr<EngineModel>> EngineModel::Create(EngineModelParams params) {
  std::vector<std::unique_ptr<StreamSession>> sessions;
  for (int i = 0; i < std::max(params.streams, 1); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<StreamSession> session,
                     StreamSession::Create(params.model, params.device,
                                           runtime::engine::ExecMode::kReplay, params.session));
    sessions.push_back(std::move(session));
  }
  std::unique_ptr<EngineModel> model(new EngineModel(std::move(params), std::move(sessions)));
  if (model->params_.warmup) model->WarmUp();
  model->batcher_.Start(static_cast<int>(model->sessions_.size()),
                        [m = model.get()](int stream, std::vector<BatchItemPtr>& batch) {
                          m->RunBatch(stream, batch);
                        });
  return model;
}

EngineModel::EngineModel(EngineModelParams params,
                         std::vector<std::unique_ptr<StreamSession>> sessions)
    : params_(std::move(params)), sessions_(std::move(sessions)), batcher_(params_.batcher) {}

EngineModel::~EngineModel() { batcher_.Stop(); }

void EngineModel::WarmUp() {
  const std::string& label = params_.label;
  if (params_.buckets.empty()) {
    spdlog::info("{}: no warm-up: capture buckets need max_batch_size > 0", label);
    return;
  }
  for (const TensorInfo& in : params_.signature.inputs) {
    const bool fixed = std::all_of(in.shape.begin() + std::min<size_t>(1, in.shape.size()),
                                   in.shape.end(), [](int64_t d) { return d >= 0; });
    if (in.dtype == runtime::DataType::kString) {
      // Zeros are no strings, and the model may parse its strings (Cast to a number).
      spdlog::info("{}: no warm-up: input \"{}\" is a string tensor", label, in.name);
      return;
    }
    if (!fixed) {
      spdlog::warn("{}: no warm-up: input \"{}\" has a variable non-batch dimension", label,
                   in.name);
      return;
    }
  }
  const int64_t start = SteadyNowNs();
  for (size_t s = 0; s < sessions_.size(); ++s) {
    // Largest first: the arenas of the smaller buckets are then never the biggest made.
    for (auto b = params_.buckets.rbegin(); b != params_.buckets.rend(); ++b) {
      std::vector<NamedTensor> tensors;
      for (const TensorInfo& in : params_.signature.inputs) {
        NamedTensor t;
        t.name = in.name;
        t.value.dtype = in.dtype;
        t.value.shape = in.shape;
        if (!t.value.shape.empty()) t.value.shape[0] = *b;
        // The dims come from the model file: checked, and bounded like a request's.
        std::optional<int64_t> count =
            runtime::CheckedElementCount(t.value.shape, kMaxWarmupElements);
        if (!count.has_value()) {
          spdlog::warn("{}: no warm-up: input \"{}\" of shape {} is too large", label, in.name,
                       runtime::ShapeToString(t.value.shape));
          return;
        }
        t.value.bytes.assign(static_cast<size_t>(*count) * runtime::DataTypeSize(in.dtype), 0);
        tensors.push_back(std::move(t));
      }
      StreamRunInfo info;
      absl::StatusOr<std::vector<NamedTensor>> out = sessions_[s]->Run(tensors, &info);
      if (!out.ok()) {
        spdlog::warn("{}: warm-up of batch size {} on stream {} failed: {}", label, *b, s,
                     std::string(out.status().message()));
      } else if (info.captured) {
        ++warmup_instances_;
        ObserveCapture(info.capture_ns);
      } else if (info.capture_failed) {
        spdlog::warn(
            "{}: warm-up: capture of batch size {} on stream {} failed, it runs "
            "eagerly: {}",
            label, *b, s, info.capture_error);
      }
    }
  }
  warmup_ns_ = SteadyNowNs() - start;
  spdlog::info("{}: warm-up captured {} instances ({} buckets x {} streams) in {:.1f} ms", label,
               warmup_instances_, params_.buckets.size(), sessions_.size(), warmup_ns_ / 1e6);
}

void EngineModel::InferAsync(std::span<const InputTensor> inputs,
                             std::span<const std::string> outputs, const InferOptions& options,
                             InferDone done) {
  auto p = std::make_unique<Pending>(std::move(done));
  p->inputs = inputs;
  p->outputs = outputs;
  if (params_.max_batch_size > 0 && !inputs.empty() && !inputs[0].shape.empty()) {
    p->rows = inputs[0].shape[0];
    p->batch_key = BatchKey(inputs);
  }
  p->priority = options.priority;
  constexpr int64_t kMaxUs = std::numeric_limits<int64_t>::max() / 1000;
  p->timeout_ns = std::min(options.timeout_us, kMaxUs) * 1000;
  if (options.deadline != absl::InfiniteFuture()) {
    // Saturating: a deadline centuries away must not wrap into the past.
    const int64_t left =
        std::max<int64_t>(absl::ToInt64Nanoseconds(options.deadline - absl::Now()), 0);
    const int64_t now = SteadyNowNs();
    p->deadline_ns = left > std::numeric_limits<int64_t>::max() - now
                         ? std::numeric_limits<int64_t>::max()
                         : now + left;
  }
  // Without batching a ready request runs on this thread when a stream is free and the
  // model's recent runs were short (no hand-off; the caller may be a gRPC callback thread, which
  // must not be held long). With batching it always goes to the workers: this thread must stay
  // free to queue more requests, or batches could never form.
  const int64_t recent = recent_run_ns_.load(std::memory_order_relaxed);
  const bool here = !params_.batcher.batching && recent > 0 && recent <= kMaxInlineRunNs;
  BatchItemPtr item = std::move(p);
  absl::Status queued = here ? batcher_.EnqueueAndRun(item) : batcher_.Enqueue(item);
  if (!queued.ok()) {
    // Refused: the item is still ours.
    Pending::Answer(Pending::From(std::move(item)), std::move(queued));
  }
}

absl::Status EngineModel::RunOnStream(int stream, const std::vector<Pending*>& items,
                                      int64_t padded, bool capture, StreamRunInfo* info,
                                      Phases* phases,
                                      std::vector<std::vector<OutputTensor>>* outputs) {
  // A last resort: limits are checked before allocation (codec, planner, budget), but a
  // failed allocation on this thread must become the batch's error, never an abort.
  const int64_t start = SteadyNowNs();
  try {
    const std::span<const InputTensor> first = items[0]->inputs;
    const bool batch_dim = params_.max_batch_size > 0;
    const bool strings = std::any_of(first.begin(), first.end(), [](const InputTensor& in) {
      return in.dtype == runtime::DataType::kString;
    });
    std::vector<runtime::engine::InputView> views(first.size());
    // String inputs are converted from the wire form (and a batch's padding rows are copies of
    // its first row, which a model that parses its strings accepts): assembled into tensors.
    std::vector<NamedTensor> assembled;
    if (strings) {
      if (!batch_dim || (items.size() == 1 && padded == items[0]->rows)) {
        for (const InputTensor& in : first) {
          ASSIGN_OR_RETURN(NamedTensor t, ToNamedTensor(in));
          assembled.push_back(std::move(t));
        }
      } else {
        std::vector<RequestInputs> requests;
        for (const Pending* p : items) requests.push_back(p->inputs);
        ASSIGN_OR_RETURN(assembled, AssembleBatch(requests, padded));
      }
      for (size_t k = 0; k < assembled.size(); ++k) {
        views[k].dtype = assembled[k].value.dtype;
        views[k].shape = assembled[k].value.shape;
        views[k].pieces.emplace_back(assembled[k].value.bytes.data(),
                                     assembled[k].value.bytes.size());
        views[k].value = &assembled[k].value;
      }
    } else {
      // Each request's bytes are staged straight into the plan (one copy); padding rows are
      // zeros written there.
      for (size_t k = 0; k < first.size(); ++k) {
        views[k].dtype = first[k].dtype;
        views[k].shape = first[k].shape;
        if (batch_dim && !views[k].shape.empty()) views[k].shape[0] = padded;
        for (const Pending* p : items) {
          const absl::string_view data = p->inputs[k].data;
          views[k].pieces.emplace_back(reinterpret_cast<const uint8_t*>(data.data()), data.size());
        }
      }
    }
    // The codec checked every request against the signature, which EngineBackend made from
    // the model's own inputs; a batch differs from its requests only in the first dimension.
    const runtime::engine::ValidatedInputs inputs =
        runtime::engine::Model::AssumeValidated(std::move(views));
    const int64_t staged = SteadyNowNs();
    phases->input_ns += staged - start;
    int64_t copy_out_ns = 0;
    uint64_t copied_out = 0;
    absl::Status run = sessions_[static_cast<size_t>(stream)]->Run(
        inputs,
        [&](size_t, const runtime::engine::PlanTensor& out) -> absl::Status {
          const int64_t t0 = SteadyNowNs();
          int64_t offset = 0;
          for (size_t r = 0; r < items.size(); ++r) {
            const Pending* p = items[r];
            for (size_t w = 0; w < p->outputs.size(); ++w) {
              if (p->outputs[w] != out.name) continue;
              ASSIGN_OR_RETURN((*outputs)[r][w],
                               CopyOutputRows(out, batch_dim ? padded : -1, offset, p->rows));
              copied_out += (*outputs)[r][w].data.size();
            }
            offset += p->rows;
          }
          copy_out_ns += SteadyNowNs() - t0;
          return absl::OkStatus();
        },
        info, capture);
    phases->infer_ns += SteadyNowNs() - staged - copy_out_ns;
    phases->output_ns += copy_out_ns;
    output_bytes_copied_.fetch_add(copied_out, std::memory_order_relaxed);
    return run;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory running the batch");
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError("out of memory running the batch");
  }
}

std::vector<absl::StatusOr<std::vector<OutputTensor>>> EngineModel::RunItems(
    int stream, const std::vector<Pending*>& items, bool isolate_failure, Phases* phases) {
  int64_t rows = 0;
  for (const Pending* p : items) rows += p->rows;
  const bool batch_dim = params_.max_batch_size > 0;
  int64_t padded = rows;
  bool capture = true;
  if (batch_dim && !params_.buckets.empty()) {
    const int64_t bucket = BucketFor(params_.buckets, rows);
    if (bucket == 0) {
      capture = false;  // above the largest bucket: eager
    } else {
      padded = bucket;
    }
  }
  StreamRunInfo info;
  std::vector<std::vector<OutputTensor>> outputs(items.size());
  for (size_t r = 0; r < items.size(); ++r) outputs[r].resize(items[r]->outputs.size());
  absl::Status status = RunOnStream(stream, items, padded, capture, &info, phases, &outputs);
  if (info.captured) ObserveCapture(info.capture_ns);
  if (info.capture_failed) {
    // Once per shape and stream: the shape runs eagerly from now on.
    spdlog::warn("{}: capture on stream {} failed, the shape runs eagerly from now on: {}",
                 params_.label, stream, info.capture_error);
  }
  if (status.ok() && (info.replayed || info.eager)) {
    // What the next request's run will likely cost (InferAsync runs short ones in place).
    const int64_t ns = info.run_ns;
    const int64_t old = recent_run_ns_.load(std::memory_order_relaxed);
    recent_run_ns_.store(old == 0 ? ns : (3 * old + ns) / 4, std::memory_order_relaxed);
  }
  std::vector<absl::StatusOr<std::vector<OutputTensor>>> answers;
  answers.reserve(items.size());
  if (!status.ok() && isolate_failure && items.size() > 1) {
    // One request may have failed the whole batch (e.g. a value that only the kernel can
    // refuse): run each alone once, so that it gets its own error and its neighbours their
    // results, and no client sees another's error text.
    spdlog::warn("{}: a batch of {} requests failed on stream {}; running them one by one: {}",
                 params_.label, items.size(), stream, std::string(status.message()));
    for (Pending* p : items) {
      std::vector<absl::StatusOr<std::vector<OutputTensor>>> alone =
          RunItems(stream, {p}, false, phases);
      answers.push_back(std::move(alone[0]));
    }
    return answers;
  }
  for (size_t r = 0; r < items.size(); ++r) {
    if (status.ok()) {
      for (size_t w = 0; w < outputs[r].size(); ++w) {
        if (outputs[r][w].name.empty()) {
          status = absl::InternalError(
              absl::StrCat("the engine returned no output \"", items[r]->outputs[w], "\""));
        }
      }
    }
    if (!status.ok()) {
      answers.push_back(absl::Status(
          status.code(), absl::StrCat(params_.label, ": inference failed: ", status.message())));
    } else {
      answers.push_back(std::move(outputs[r]));
    }
  }
  return answers;
}

void EngineModel::RunBatch(int stream, std::vector<BatchItemPtr>& batch) {
  const int64_t t0 = SteadyNowNs();
  std::vector<Pending*> items;  // borrowed from `batch` until answered
  items.reserve(batch.size());
  int64_t rows = 0;
  for (const BatchItemPtr& b : batch) {
    items.push_back(static_cast<Pending*>(b.get()));
    rows += b->rows;
  }
  Phases phases;
  std::vector<absl::StatusOr<std::vector<OutputTensor>>> answers =
      RunItems(stream, items, /*isolate_failure=*/true, &phases);
  batcher_.WorkerDone(stream);  // the stream is free before the clients hear back
  // The batch's one execution is counted with the first request that succeeded (a failed one
  // counts none, and the failing request may come first).
  size_t counter = items.size();
  for (size_t i = 0; i < answers.size() && counter == items.size(); ++i) {
    if (answers[i].ok()) counter = i;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    InferTimings& t = items[i]->timings_;
    t.queue_ns = t0 - items[i]->enqueue_ns;
    t.compute_input_ns = phases.input_ns;
    t.compute_ns = phases.infer_ns;
    t.compute_output_ns = phases.output_ns;
    t.batch_size = rows;
    t.counts_execution = i == counter;
    Pending::Answer(Pending::From(std::move(batch[i])), std::move(answers[i]));
  }
}

std::vector<RuntimeInstanceInfo> EngineModel::ListRuntimeInstances() const {
  std::vector<RuntimeInstanceInfo> list;
  for (size_t s = 0; s < sessions_.size(); ++s) {
    for (const runtime::engine::StreamInstanceInfo& i : sessions_[s]->ListInstances()) {
      RuntimeInstanceInfo info;
      info.stream = static_cast<int>(s);
      info.shape_signature = i.shape_signature;
      if (std::binary_search(params_.buckets.begin(), params_.buckets.end(), i.batch_rows)) {
        info.bucket = i.batch_rows;
      }
      info.state = absl::AsciiStrToUpper(i.state);  // CAPTURED, EAGER, EVICTED
      info.captures = i.captures;
      info.replays = i.replays;
      info.capture_time_ns = static_cast<uint64_t>(i.capture_ns);
      info.arena_bytes = i.arena_bytes;
      info.intra_op_threads = i.intra_op_threads;
      info.threads_choice = i.threads_choice;
      info.part = absl::AsciiStrToUpper(i.part);
      info.last_used_ms = static_cast<uint64_t>(i.last_used_ms);
      list.push_back(std::move(info));
    }
  }
  return list;
}

absl::StatusOr<std::string> EngineModel::DumpRuntimeInstance(int stream,
                                                             absl::string_view shape_signature,
                                                             bool verbose) const {
  if (stream < 0 || static_cast<size_t>(stream) >= sessions_.size()) {
    return absl::NotFoundError(absl::StrCat("no stream ", stream, " (the model has ",
                                            sessions_.size(), " streams: 0 to ",
                                            sessions_.size() - 1, ")"));
  }
  return sessions_[static_cast<size_t>(stream)]->DumpInstance(shape_signature, verbose);
}

void EngineModel::ObserveCapture(int64_t ns) {
  std::lock_guard<std::mutex> lock(capture_time_mu_);
  capture_time_.Observe(static_cast<double>(ns) * 1e-9);
}

CaptureStats EngineModel::capture_stats() const {
  CaptureStats c;
  {
    std::lock_guard<std::mutex> lock(capture_time_mu_);
    c.capture_time = capture_time_;
  }
  for (const auto& session : sessions_) {
    const runtime::engine::StreamSessionCounters s = session->counters();
    c.captures += s.captures;
    c.replays += s.replays;
    c.eager_runs += s.eager_runs;
    c.evictions += s.evictions;
    c.capture_failures += s.capture_failures;
    c.budget_refusals += s.budget_refusals;
    c.value_plans += s.value_plans;
    c.input_bytes_copied += s.staged_bytes;
    c.live_instances += s.live_instances;
    c.live_bytes += s.live_bytes;
  }
  c.output_bytes_copied = output_bytes_copied_.load(std::memory_order_relaxed);
  c.warmup_instances = warmup_instances_;
  c.warmup_ns = warmup_ns_;
  c.load_ns = load_ns_;
  return c;
}

}  // namespace reprise::server
