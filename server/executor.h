// Where background work (model loads, inference) runs. Tests use a manual executor that runs
// queued work only when told, so lifecycle tests step it by hand.
#ifndef REPRISE_SERVER_EXECUTOR_H_
#define REPRISE_SERVER_EXECUTOR_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <condition_variable>
#include <mutex>
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"

namespace reprise::server {

/// Runs tasks some time later. Thread-safe.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Schedule(absl::AnyInvocable<void() &&> task) = 0;
};

/// A fixed pool of threads over one FIFO queue. The destructor (or Stop) runs every task
/// already queued, then joins. Scheduling after Stop runs the task on the caller's thread.
class ThreadPool final : public Executor {
 public:
  /// `threads` >= 1. `name` is for diagnostics only.
  ThreadPool(int threads, std::string name);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(absl::AnyInvocable<void() &&> task) override;
  /// Drains the queue and joins the threads. Idempotent; must not be called from a pool thread.
  void Stop();

 private:
  void Work();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_EXECUTOR_H_
