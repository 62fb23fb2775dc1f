// The replay loop: a switch over the POD task kind, every pointer pre-bound.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/steady_clock.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/task.h"

namespace reprise::runtime::cpu {

/// Which streams of a built instance have started in one launch, and how many still run.
struct BuiltLaunch {
  const RunEnv* root = nullptr;  // the launch's environment (outlives every stream's run)
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint8_t> started ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu) = 0;
};

namespace {

// Runs stream `stream` of `ri` to its end, or until a stream switch jumps away.
void RunStream(RiData& ri, int stream, RunEnv& env) {
  void* const* ptrs = ri.ptrs.data();
  for (const Task& task : ri.streams[stream]) {
    if (!ExecuteTask(task, ptrs, env, stream)) return;
  }
}

void FinishBuiltStream(BuiltLaunch& launch) {
  std::lock_guard<std::mutex> lock(launch.mu);
  --launch.running;
  // Notified under the lock: the launch (on the waiter's stack) ends once it sees 0.
  launch.cv.notify_all();
}

}  // namespace

/// Runs one extra stream of an instance for each launch of it (every stream of a built one). Holds
/// no reference to the instance (the instance owns the worker and joins it when destroyed).
class AuxWorker {
 public:
  AuxWorker(RiData* ri, int stream) : ri_(ri), stream_(stream), thread_([this] { Loop(); }) {}

  ~AuxWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void Start(const RunEnv* env) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      env_ = env;
      done_ = false;
    }
    cv_.notify_all();
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }

 private:
  void Loop() {
    while (true) {
      const RunEnv* env = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || env_ != nullptr; });
        if (env_ == nullptr) return;  // stopping
        env = env_;
      }
      RunEnv local = *env;
      RunStream(*ri_, stream_, local);
      if (local.launch != nullptr) FinishBuiltStream(*local.launch);
      {
        std::lock_guard<std::mutex> lock(mu_);
        env_ = nullptr;
        done_ = true;
      }
      cv_.notify_all();
    }
  }

  RiData* const ri_;
  const int stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  const RunEnv* env_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = true;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

RiData::RiData(uint64_t id_in, Device* device_in, bool child_in)
    : id(id_in), device(device_in), child(child_in) {
  streams.emplace_back();
}

RiData::~RiData() { workers.clear(); }

namespace {

bool IsSlotEvent(const Task& task, TaskKind kind) {
  return task.kind == kind && task.sub == kSlotEvent;
}

// Work that neither waits nor signals: a lane segment's body.
bool IsPlainWork(const Task& task) {
  return task.kind == TaskKind::kCopy || task.kind == TaskKind::kMemset ||
         task.kind == TaskKind::kKernel || task.kind == TaskKind::kHostFunc;
}

// The team forks of a captured instance, or none when some helper stream does anything but run
// lane segments forked and joined by stream 0 (then every helper runs on a worker of its own).
std::vector<TeamFork> FindTeamForks(const RiData& ri) {
#if defined(__SANITIZE_THREAD__)
  // libgomp's hand-offs are invisible to ThreadSanitizer: keep the workers (std::thread).
  return {};
#endif
  if (ri.built || ri.streams.size() < 2) return {};
  constexpr uint32_t kNone = UINT32_MAX;
  // Where stream 0 records each slot, and where it first waits on it.
  std::vector<uint32_t> recorded_at(ri.num_slots, kNone);
  std::vector<uint32_t> awaited_at(ri.num_slots, kNone);
  const std::vector<Task>& origin = ri.streams[0];
  for (uint32_t i = 0; i < origin.size(); ++i) {
    const Task& task = origin[i];
    if (task.sub != kSlotEvent || task.aux >= ri.num_slots) continue;
    if (task.kind == TaskKind::kEventRecord) recorded_at[task.aux] = i;
    if (task.kind == TaskKind::kEventWait && awaited_at[task.aux] == kNone) {
      awaited_at[task.aux] = i;
    }
  }
  std::vector<TeamFork> forks;
  auto fork_at = [&forks](uint32_t fork_task) -> TeamFork& {
    for (TeamFork& fork : forks) {
      if (fork.fork_task == fork_task) return fork;
    }
    forks.emplace_back();
    forks.back().fork_task = fork_task;
    forks.back().first_join = UINT32_MAX;
    return forks.back();
  };
  for (size_t s = 1; s < ri.streams.size(); ++s) {
    const std::vector<Task>& tasks = ri.streams[s];
    uint32_t i = 0;
    uint32_t previous_join = 0;
    while (i < tasks.size()) {
      const uint32_t first = i;
      if (!IsSlotEvent(tasks[i], TaskKind::kEventWait) || tasks[i].aux >= ri.num_slots) return {};
      const uint32_t fork_task = recorded_at[tasks[i].aux];
      if (fork_task == kNone || fork_task < previous_join) return {};
      ++i;
      while (i < tasks.size() && IsPlainWork(tasks[i])) ++i;
      if (i == tasks.size() || !IsSlotEvent(tasks[i], TaskKind::kEventRecord) ||
          tasks[i].aux >= ri.num_slots) {
        return {};
      }
      const uint32_t join = awaited_at[tasks[i].aux];
      if (join == kNone || join < fork_task) return {};
      ++i;
      TeamFork& fork = fork_at(fork_task);
      fork.segments.push_back(LaneSegment{static_cast<int>(s), first, i});
      fork.first_join = std::min(fork.first_join, join);
      fork.last_join = std::max(fork.last_join, join);
      previous_join = join;
    }
  }
  std::sort(forks.begin(), forks.end(),
            [](const TeamFork& a, const TeamFork& b) { return a.fork_task < b.fork_task; });
  // A fork must close before the next one opens (stream 0 leaves one team before the next).
  for (size_t k = 1; k < forks.size(); ++k) {
    if (forks[k].fork_task <= forks[k - 1].last_join) return {};
  }
  return forks;
}

}  // namespace

void RiData::Seal() {
  {
    std::lock_guard<std::mutex> lock(slot_mu);
    slot_epochs.assign(num_slots, 0);
  }
  team_forks = FindTeamForks(*this);
  if (!team_forks.empty()) return;
  // A built instance runs every stream on a worker; a captured one runs stream 0 on the
  // launching stream's thread.
  for (size_t s = built ? 0 : 1; s < streams.size(); ++s) {
    workers.push_back(std::make_unique<AuxWorker>(this, static_cast<int>(s)));
  }
}

void ReportTaskFailure(const RunEnv& env, const Task& task, int stream,
                       const absl::Status& status) {
  std::string what(TaskKindName(task.kind));
  if (task.kind == TaskKind::kKernel) absl::StrAppend(&what, " \"", task.target.kernel->op(), "\"");
  std::string where = env.ri == nullptr
                          ? absl::StrCat("stream ", env.stream_id, " task #", task.seq)
                          : absl::StrCat("instance ", env.ri->id, " (on stream ", env.stream_id,
                                         ") stream ", stream, " task #", task.seq);
  std::lock_guard<std::mutex> lock(*env.sink.mu);
  if (env.sink.error->ok()) {
    *env.sink.error = absl::Status(status.code(),
                                   absl::StrCat(where, " (", what, ") failed: ", status.message()));
  }
  env.sink.failed->store(true, std::memory_order_release);
}

namespace {

void RunConditional(const Conditional& cond, const RunEnv& env) {
  switch (cond.kind) {
    case ConditionalKind::kIf: {
      if (*cond.value != 0) {
        RunInstance(*cond.bodies[0], env, nullptr);
      } else if (cond.bodies.size() > 1) {
        RunInstance(*cond.bodies[1], env, nullptr);
      }
      break;
    }
    case ConditionalKind::kWhile:
      while (*cond.value != 0 && !env.sink.failed->load(std::memory_order_relaxed)) {
        RunInstance(*cond.bodies[0], env, nullptr);
      }
      break;
    case ConditionalKind::kSwitch: {
      const uint32_t value = *cond.value;
      if (value < cond.bodies.size()) RunInstance(*cond.bodies[value], env, nullptr);
      break;
    }
  }
}

template <typename T>
bool Compare(CompareOp op, T lhs, T rhs) {
  switch (op) {
    case CompareOp::kEqual:
      return lhs == rhs;
    case CompareOp::kNotEqual:
      return lhs != rhs;
    case CompareOp::kGreater:
      return lhs > rhs;
    case CompareOp::kGreaterOrEqual:
      return lhs >= rhs;
    case CompareOp::kLess:
      return lhs < rhs;
    case CompareOp::kLessOrEqual:
      return lhs <= rhs;
  }
  return false;
}

template <typename T>
bool CompareAs(const Task& task) {
  T lhs;
  T rhs;
  std::memcpy(&lhs, task.src, sizeof(T));
  std::memcpy(&rhs, task.target.none, sizeof(T));
  return Compare(SwitchCompare(task), lhs, rhs);
}

bool SwitchHolds(const Task& task) {
  switch (SwitchType(task)) {
    case SwitchDataType::kInt32:
      return CompareAs<int32_t>(task);
    case SwitchDataType::kUint32:
      return CompareAs<uint32_t>(task);
    case SwitchDataType::kInt64:
      return CompareAs<int64_t>(task);
  }
  return false;
}

// Starts stream `target` of the built instance being launched, unless it already started in
// this launch (a stream runs at most once per launch).
void StartBuiltStream(const RunEnv& env, uint64_t target) {
  BuiltLaunch& launch = *env.launch;
  {
    std::lock_guard<std::mutex> lock(launch.mu);
    if (launch.started[target]) return;
    launch.started[target] = 1;
    ++launch.running;
  }
  env.ri->workers[target]->Start(launch.root);
}

// One launch of a built instance: the HEAD streams start, the others when a switch or activate
// task starts them; returns once every started stream has finished.
void RunBuiltInstance(RiData& ri, RunEnv& env) {
  BuiltLaunch launch;
  launch.root = &env;
  {
    std::lock_guard<std::mutex> lock(launch.mu);
    launch.started.assign(ri.streams.size(), 0);
  }
  env.launch = &launch;
  for (size_t s = 0; s < ri.streams.size(); ++s) {
    if (ri.head[s]) StartBuiltStream(env, s);
  }
  std::vector<uint8_t> started;
  {
    std::unique_lock<std::mutex> lock(launch.mu);
    launch.cv.wait(lock, [&launch] { return launch.running == 0; });
    started = launch.started;
  }
  for (size_t s = 0; s < started.size(); ++s) {
    if (started[s]) ri.workers[s]->Wait();
  }
}

// ExecuteTask without the observer; false after a stream switch that jumped.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool RunTask(const Task& task, void* const* ptrs, RunEnv& env,
                                                 int stream) {
  const bool skip = env.sink.failed->load(std::memory_order_relaxed);
  switch (task.kind) {
    case TaskKind::kCopy:
      if (!skip) std::memcpy(task.dst, task.src, task.bytes);
      return true;
    case TaskKind::kMemset:
      if (!skip) std::memset(task.dst, static_cast<int>(task.aux), task.bytes);
      return true;
    case TaskKind::kKernel: {
      if (skip) return true;
      void* const* args = ptrs + task.args;
      KernelArgs kernel_args;
      kernel_args.inputs = reinterpret_cast<const void* const*>(args);
      kernel_args.outputs = args + task.num_inputs;
      kernel_args.workspace = args[task.num_inputs + task.num_outputs];
      absl::Status status = task.target.kernel->Run(kernel_args);
      if (!status.ok()) ReportTaskFailure(env, task, stream, status);
      return true;
    }
    case TaskKind::kHostFunc: {
      if (skip) return true;
      absl::Status status = task.target.fn(task.dst);
      if (!status.ok()) ReportTaskFailure(env, task, stream, status);
      return true;
    }
    case TaskKind::kEventRecord:
      if (task.sub == kSlotEvent) {
        std::lock_guard<std::mutex> lock(env.ri->slot_mu);
        env.ri->slot_epochs[task.aux] = env.epoch;
        env.ri->slot_cv.notify_all();
      } else {
        task.target.event->Complete(task.sub == kEagerEvent ? task.aux : env.tickets[task.aux]);
      }
      return true;
    case TaskKind::kEventWait:
      if (task.sub == kSlotEvent) {
        RiData* ri = env.ri;
        const uint64_t epoch = env.epoch;
        const uint64_t slot = task.aux;
        std::unique_lock<std::mutex> lock(ri->slot_mu);
        ri->slot_cv.wait(lock, [ri, epoch, slot] { return ri->slot_epochs[slot] >= epoch; });
      } else {
        const uint64_t target = task.sub == kEagerEvent ? task.aux : env.tickets[task.aux];
        if (!task.target.event->WaitFor(target, env.sink.cancel)) {
          ReportTaskFailure(env, task, stream,
                            absl::CancelledError("the stream was destroyed while waiting"));
        }
      }
      return true;
    case TaskKind::kEventReset:
      task.target.event->Reset();
      return true;
    case TaskKind::kConditional:
      if (!skip) RunConditional(env.ri->conditionals[task.aux], env);
      return true;
    case TaskKind::kStreamSwitch:
      if (!SwitchHolds(task)) return true;
      StartBuiltStream(env, task.aux);
      return false;  // a jump: the rest of this stream does not run
    case TaskKind::kStreamActivate:
      StartBuiltStream(env, task.aux);
      return true;
  }
  return true;
}

// Runs lane segment `k` of `fork`.
void RunSegment(const RiData& ri, const TeamFork& fork, size_t k, RunEnv& env) {
  const LaneSegment& segment = fork.segments[k];
  const std::vector<Task>& tasks = ri.streams[segment.stream];
  for (uint32_t i = segment.first; i < segment.end; ++i) {
    ExecuteTask(tasks[i], ri.ptrs.data(), env, segment.stream);
  }
}

// Stream 0 on the calling thread; at each fork, the lane segments on its OpenMP team (the
// threads its kernels' parallel loops use), so that a fork needs no thread beyond the stream's
// own: member m runs segments m - 1, m - 1 + (team - 1), ... A team of one (the launch is
// inside an active parallel region) runs them all on stream 0's thread before its first join
// wait: segments wait only on their fork, so no team size deadlocks.
void RunWithTeams(RiData& ri, RunEnv& env) {
  void* const* ptrs = ri.ptrs.data();
  const std::vector<Task>& origin = ri.streams[0];
  size_t next_fork = 0;
  for (uint32_t i = 0; i < origin.size(); ++i) {
    ExecuteTask(origin[i], ptrs, env, 0);
    if (next_fork == ri.team_forks.size() || ri.team_forks[next_fork].fork_task != i) continue;
    const TeamFork& fork = ri.team_forks[next_fork++];
    const size_t count = fork.segments.size();
    const int wanted = static_cast<int>(count) + 1;
#pragma omp parallel num_threads(wanted)
    {
      const size_t member = static_cast<size_t>(omp_get_thread_num());
      const size_t team = static_cast<size_t>(omp_get_num_threads());
      if (member == 0) {
        for (uint32_t j = i + 1; j <= fork.last_join; ++j) {
          if (team == 1 && j == fork.first_join) {
            for (size_t k = 0; k < count; ++k) RunSegment(ri, fork, k, env);
          }
          ExecuteTask(origin[j], ptrs, env, 0);
        }
      } else {
        RunEnv local = env;
        for (size_t k = member - 1; k < count; k += team - 1) RunSegment(ri, fork, k, local);
      }
    }
    i = fork.last_join;
  }
}

}  // namespace

bool ExecuteTask(const Task& task, void* const* ptrs, RunEnv& env, int stream) {
  if (env.observer == nullptr) [[likely]] {
    return RunTask(task, ptrs, env, stream);
  }
  TaskTiming timing;
  timing.instance = env.ri != nullptr ? env.ri->id : 0;
  timing.stream = stream;
  timing.seq = task.seq;
  timing.kind = task.kind;
  timing.kernel = task.kind == TaskKind::kKernel ? task.target.kernel : nullptr;
  timing.start_ns = SteadyNowNs();
  const bool go_on = RunTask(task, ptrs, env, stream);
  timing.end_ns = SteadyNowNs();
  env.observer->OnTask(timing);
  return go_on;
}

void RunInstance(RiData& ri, const RunEnv& outer, const uint64_t* tickets) {
  absl::InlinedVector<uint64_t, 4> bound;
  if (tickets == nullptr && !ri.externals.empty()) {
    // A conditional body binds its external events when it runs.
    for (const ExternalRef& ref : ri.externals) {
      const Task& task = ri.streams[ref.stream][ref.task];
      bound.push_back(task.kind == TaskKind::kEventRecord ? task.target.event->IssueRecord()
                                                          : task.target.event->IssuedCount());
    }
    tickets = bound.data();
  }
  RunEnv env = outer;
  env.ri = &ri;
  // A body keeps its parent's observer; a top-level launch reads its own once.
  if (env.observer == nullptr) env.observer = ri.observer.load(std::memory_order_acquire);
  env.tickets = tickets;
  env.launch = nullptr;
  env.epoch = ri.launches.fetch_add(1, std::memory_order_relaxed) + 1;
  for (const auto& cond : ri.conditions) {
    if (cond->assign_default) cond->value = cond->default_value;
  }
  if (ri.built) {
    RunBuiltInstance(ri, env);
    return;
  }
  if (!ri.team_forks.empty()) {
    RunWithTeams(ri, env);
    return;
  }
  for (auto& worker : ri.workers) worker->Start(&env);
  RunStream(ri, 0, env);
  for (auto& worker : ri.workers) worker->Wait();
}

}  // namespace reprise::runtime::cpu
