// The replay loop: a switch over the POD task kind, every pointer pre-bound.
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/task.h"

namespace reprise::runtime::cpu {

/// Runs one extra stream of an instance for each launch of it. Holds no reference to the
/// instance (the instance owns the worker and joins it when destroyed).
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
      const std::vector<Task>& tasks = ri_->streams[stream_];
      void* const* ptrs = ri_->ptrs.data();
      for (const Task& task : tasks) ExecuteTask(task, ptrs, local, stream_);
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

void RiData::Seal() {
  {
    std::lock_guard<std::mutex> lock(slot_mu);
    slot_epochs.assign(num_slots, 0);
  }
  for (size_t s = 1; s < streams.size(); ++s) {
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

// ExecuteTask without the observer.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void RunTask(const Task& task, void* const* ptrs, RunEnv& env,
                                                 int stream) {
  const bool skip = env.sink.failed->load(std::memory_order_relaxed);
  switch (task.kind) {
    case TaskKind::kCopy:
      if (!skip) std::memcpy(task.dst, task.src, task.bytes);
      return;
    case TaskKind::kMemset:
      if (!skip) std::memset(task.dst, static_cast<int>(task.aux), task.bytes);
      return;
    case TaskKind::kKernel: {
      if (skip) return;
      void* const* args = ptrs + task.args;
      KernelArgs kernel_args;
      kernel_args.inputs = reinterpret_cast<const void* const*>(args);
      kernel_args.outputs = args + task.num_inputs;
      kernel_args.workspace = args[task.num_inputs + task.num_outputs];
      absl::Status status = task.target.kernel->Run(kernel_args);
      if (!status.ok()) ReportTaskFailure(env, task, stream, status);
      return;
    }
    case TaskKind::kHostFunc: {
      if (skip) return;
      absl::Status status = task.target.fn(task.dst);
      if (!status.ok()) ReportTaskFailure(env, task, stream, status);
      return;
    }
    case TaskKind::kEventRecord:
      if (task.sub == kSlotEvent) {
        std::lock_guard<std::mutex> lock(env.ri->slot_mu);
        env.ri->slot_epochs[task.aux] = env.epoch;
        env.ri->slot_cv.notify_all();
      } else {
        task.target.event->Complete(task.sub == kEagerEvent ? task.aux : env.tickets[task.aux]);
      }
      return;
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
      return;
    case TaskKind::kEventReset:
      task.target.event->Reset();
      return;
    case TaskKind::kConditional:
      if (!skip) RunConditional(env.ri->conditionals[task.aux], env);
      return;
  }
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void ExecuteTask(const Task& task, void* const* ptrs, RunEnv& env, int stream) {
  if (env.observer == nullptr) [[likely]] {
    RunTask(task, ptrs, env, stream);
    return;
  }
  TaskTiming timing;
  timing.instance = env.ri != nullptr ? env.ri->id : 0;
  timing.stream = stream;
  timing.seq = task.seq;
  timing.kind = task.kind;
  timing.kernel = task.kind == TaskKind::kKernel ? task.target.kernel : nullptr;
  timing.start_ns = SteadyNs();
  RunTask(task, ptrs, env, stream);
  timing.end_ns = SteadyNs();
  env.observer->OnTask(timing);
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
  env.epoch = ri.launches.fetch_add(1, std::memory_order_relaxed) + 1;
  for (const auto& cond : ri.conditions) {
    if (cond->assign_default) cond->value = cond->default_value;
  }
  for (auto& worker : ri.workers) worker->Start(&env);
  const std::vector<Task>& tasks = ri.streams[0];
  void* const* ptrs = ri.ptrs.data();
  for (const Task& task : tasks) ExecuteTask(task, ptrs, env, 0);
  for (auto& worker : ri.workers) worker->Wait();
}

}  // namespace reprise::runtime::cpu
