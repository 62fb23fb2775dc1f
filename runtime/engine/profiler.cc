#include "runtime/engine/profiler.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/steady_clock.h"
#include "runtime/core/capture.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/task_observer.h"
#include "runtime/engine/control_flow.h"

namespace reprise::runtime::engine {
namespace {

// Collects the timings of the recorded runs and the thread (row) each task ran on.
class Recorder final : public TaskObserver {
 public:
  struct Record {
    TaskTiming timing;
    int run = 0;
    int thread = 0;  // index into threads_
  };

  // `run` is written by the launching thread between launches (no launch pending).
  void set_run(int run) { run_ = run; }

  void OnTask(const TaskTiming& timing) override {
    const std::thread::id self = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(mu_);
    int thread = 0;
    while (thread < static_cast<int>(threads_.size()) && threads_[thread] != self) ++thread;
    if (thread == static_cast<int>(threads_.size())) threads_.push_back(self);
    records_.push_back(Record{timing, run_, thread});
  }

  // Called once no launch is pending.
  std::vector<Record> TakeRecords() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(records_);
  }

 private:
  std::mutex mu_;
  int run_ = 0;
  std::vector<std::thread::id> threads_;
  std::vector<Record> records_;
};

std::vector<ProfileStep> NameSteps(const ExecutionPlan& plan) {
  std::vector<ProfileStep> steps;
  steps.reserve(plan.steps().size());
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const PlanStep& step = plan.steps()[i];
    ProfileStep out;
    out.name = step.node_name.empty() ? absl::StrCat(step.op, "#", i) : step.node_name;
    out.op = step.op;
    out.kernel = std::string(step.kernel->op());
    out.implementation = step.kernel->implementation();
    steps.push_back(std::move(out));
  }
  return steps;
}

// Stages the inputs, runs `execute`, reads the outputs: one run, as StreamSession::Run does.
template <typename Execute>
absl::Status OneRun(ExecutionPlan& plan, const std::vector<const TensorValue*>& ordered,
                    Execute&& execute) {
  for (size_t i = 0; i < ordered.size(); ++i) RETURN_IF_ERROR(plan.StageInput(i, *ordered[i]));
  RETURN_IF_ERROR(execute());
  for (size_t i = 0; i < plan.outputs().size(); ++i) (void)plan.ReadOutput(i);
  return absl::OkStatus();
}

// Captures `plan` on `stream` as StreamSession does (THREAD_LOCAL; If / Loop as conditional
// tasks, their bodies on streams of their own).
absl::StatusOr<std::unique_ptr<ModelRI>> CapturePlan(const ExecutionPlan& plan, Device* device,
                                                     Stream* stream) {
  RETURN_IF_ERROR(BeginCapture(stream, CaptureMode::kThreadLocal));
  BodyStreams bodies(device);
  BranchStreams branches(device);
  CaptureScope scope;
  scope.branches = &branches;
  scope.root = GetCaptureInfo(stream).instance;
  scope.bodies = &bodies;
  scope.mode = CaptureMode::kThreadLocal;
  absl::Status recorded = EnqueuePlan(plan, stream, &scope);
  absl::StatusOr<std::unique_ptr<ModelRI>> ri = EndCapture(stream);  // in every case
  RETURN_IF_ERROR(recorded);
  return ri;
}

// The replay profile: every task of the recorded runs, rows by thread. Leaves `profile` alone
// and returns an error when the capture or the timing is refused.
absl::Status ProfileReplay(ExecutionPlan& plan, const std::vector<const TensorValue*>& ordered,
                           Device* device, const ProfileOptions& options, Profile* profile) {
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->CreateStream());
  Recorder recorder;  // outlives the instance that reports to it
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRI> ri, CapturePlan(plan, device, stream.get()));
  // Execute, as a stream session replays: an idle stream runs the instance on the calling
  // thread, so the profiled runs use the same OpenMP team as the timed ones. Replays handed to
  // the stream's worker ran on a second team, and at two threads on two cores every small step
  // took longer than in the timed runs: GoogLeNet profiled 11.0 ms per run against 8.7 ms
  // timed, the same 11.0 ms as timed runs with OMP_WAIT_POLICY=passive (threads that sleep
  // between parallel regions instead of spinning).
  auto replay = [&]() -> absl::Status { return ri->Execute(stream.get()); };
  for (int i = 0; i < 1 + options.warmup; ++i) RETURN_IF_ERROR(OneRun(plan, ordered, replay));
  RETURN_IF_ERROR(ri->SetTaskObserver(&recorder));
  std::vector<ProfileSpan> runs;
  const int64_t origin = SteadyNowNs();
  for (int r = 0; r < options.iterations; ++r) {
    recorder.set_run(r);
    const int64_t start = SteadyNowNs();
    absl::Status status = OneRun(plan, ordered, replay);
    const int64_t end = SteadyNowNs();
    if (!status.ok()) {
      ri->SetTaskObserver(nullptr).IgnoreError();
      return status;
    }
    runs.push_back(ProfileSpan{SpanKind::kRun, r, 0, -1, absl::StrCat("run ", r), start - origin,
                               end - start});
  }
  RETURN_IF_ERROR(ri->SetTaskObserver(nullptr));

  absl::flat_hash_map<const PreparedKernel*, int> step_of;
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    step_of.emplace(plan.steps()[i].kernel, static_cast<int>(i));
  }
  // Rows: 0 is the calling thread; thread t becomes row t + 1, named by the stream of the
  // first top-level task it ran.
  std::vector<std::string> rows = {"host: runs"};
  std::vector<ProfileSpan> spans = std::move(runs);
  for (const Recorder::Record& record : recorder.TakeRecords()) {
    const TaskTiming& t = record.timing;
    const int row = record.thread + 1;
    while (static_cast<int>(rows.size()) <= row) rows.emplace_back();
    if (rows[row].empty() && t.instance == ri->id()) rows[row] = absl::StrCat("stream ", t.stream);
    ProfileSpan span;
    span.run = record.run;
    span.row = row;
    span.start_ns = t.start_ns - origin;
    span.dur_ns = t.end_ns - t.start_ns;
    auto it =
        t.kernel != nullptr && t.instance == ri->id() ? step_of.find(t.kernel) : step_of.end();
    if (it != step_of.end()) {
      span.kind = SpanKind::kStep;
      span.step = it->second;
      span.name = profile->steps[it->second].name;
    } else if (t.kernel != nullptr) {
      span.kind = SpanKind::kKernel;
      span.name = std::string(t.kernel->op());
    } else {
      span.kind = SpanKind::kTask;
      span.name = std::string(TaskKindName(t.kind));
    }
    spans.push_back(std::move(span));
  }
  for (size_t row = 1; row < rows.size(); ++row) {
    if (rows[row].empty()) rows[row] = absl::StrCat("thread ", row);
  }
  profile->mode = "replay";
  profile->rows = std::move(rows);
  profile->spans = std::move(spans);
  return absl::OkStatus();
}

// The eager profile: each step's kernel run on the calling thread (ExecutionPlan::RunSteps,
// timed), one row.
absl::Status ProfileEager(ExecutionPlan& plan, const std::vector<const TensorValue*>& ordered,
                          const ProfileOptions& options, Profile* profile) {
  auto eager = [&plan]() { return plan.RunSteps(); };
  for (int i = 0; i < 1 + options.warmup; ++i) RETURN_IF_ERROR(OneRun(plan, ordered, eager));
  std::vector<ProfileSpan> spans;
  const int64_t origin = SteadyNowNs();
  for (int r = 0; r < options.iterations; ++r) {
    auto timed = [&]() -> absl::Status {
      for (size_t i = 0; i < plan.steps().size(); ++i) {
        const PlanStep& step = plan.steps()[i];
        KernelArgs args;
        args.inputs = step.inputs.data();
        args.outputs = step.outputs.data();
        args.workspace = step.workspace;
        const int64_t start = SteadyNowNs();
        absl::Status status = step.kernel->Run(args);
        const int64_t end = SteadyNowNs();
        if (!status.ok()) {
          return absl::Status(status.code(), absl::StrCat("node \"", step.node_name, "\" (",
                                                          step.op, "): ", status.message()));
        }
        spans.push_back(ProfileSpan{SpanKind::kStep, r, 1, static_cast<int>(i),
                                    profile->steps[i].name, start - origin, end - start});
      }
      return absl::OkStatus();
    };
    const int64_t start = SteadyNowNs();
    RETURN_IF_ERROR(OneRun(plan, ordered, timed));
    spans.push_back(ProfileSpan{SpanKind::kRun, r, 0, -1, absl::StrCat("run ", r), start - origin,
                                SteadyNowNs() - start});
  }
  profile->mode = "eager";
  profile->rows = {"host: runs", "eager steps (calling thread)"};
  profile->spans = std::move(spans);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Profile> ProfileModel(const Model& model, Device* device,
                                     const std::vector<NamedTensor>& inputs,
                                     const ProfileOptions& options, std::string label) {
  if (device == nullptr) return absl::InvalidArgumentError("profile: no device");
  if (options.iterations < 1 || options.warmup < 0) {
    return absl::InvalidArgumentError(absl::StrCat("profile: iterations ", options.iterations,
                                                   " and warmup ", options.warmup,
                                                   " (want iterations >= 1, warmup >= 0)"));
  }
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, model.MatchInputs(inputs));
  bool value_keyed = false;
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                   model.PlanForInputs(ordered, &value_keyed, options.intra_op_threads));
  Profile profile;
  profile.label = std::move(label);
  profile.runs = options.iterations;
  profile.steps = NameSteps(*plan);
  if (options.replay) {
    absl::Status replayed = ProfileReplay(*plan, ordered, device, options, &profile);
    if (replayed.ok()) return profile;
    profile.note =
        absl::StrCat("replay not profiled, ran the eager step loop: ", replayed.message());
  }
  RETURN_IF_ERROR(ProfileEager(*plan, ordered, options, &profile));
  return profile;
}

void FillRandom(TensorValue* t, std::mt19937* rng) {
  const size_t n = static_cast<size_t>(NumElements(t->shape));
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  uint8_t* p = t->bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (t->dtype) {
      case DataType::kFloat32: {
        const float v = real(*rng);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case DataType::kFloat64: {
        const double v = real(*rng);
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      case DataType::kInt64: {
        const int64_t v = small(*rng);
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      case DataType::kInt32: {
        const int32_t v = small(*rng);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case DataType::kBool:
        p[i] = static_cast<uint8_t>(small(*rng) & 1);
        break;
      case DataType::kString:  // empty strings (zero views)
        break;
      default: {  // other types: random small bytes
        const size_t elem = DataTypeSize(t->dtype);
        for (size_t b = 0; b < elem; ++b) p[elem * i + b] = b == 0 ? small(*rng) : 0;
      }
    }
  }
}

absl::StatusOr<std::vector<NamedTensor>> MakeProfileInputs(const Model& model) {
  const std::vector<Value> declared = model.inputs();
  std::mt19937 rng(42);
  std::vector<NamedTensor> inputs;
  for (const Value& value : declared) {
    Shape shape;
    for (const Dim& dim : value.dims) shape.push_back(dim.known() ? dim.value : 1);
    ASSIGN_OR_RETURN(const int64_t bytes,
                     DenseByteSize(shape, static_cast<int64_t>(DataTypeSize(value.dtype)),
                                   absl::StrCat("input \"", value.name, "\"")));
    TensorValue t{value.dtype, shape, {}, nullptr};
    t.bytes.assign(static_cast<size_t>(bytes), 0);
    FillRandom(&t, &rng);
    inputs.push_back({value.name, std::move(t)});
  }
  return inputs;
}

}  // namespace reprise::runtime::engine
