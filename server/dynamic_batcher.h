// The scheduler of one model version: a priority queue of requests that worker threads (one
// per stream) take in batches, Triton's dynamic batcher in miniature.
#ifndef REPRISE_SERVER_DYNAMIC_BATCHER_H_
#define REPRISE_SERVER_DYNAMIC_BATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace reprise::server {

/// How a DynamicBatcher forms batches. Times are nanoseconds on the batcher's clock.
struct BatcherOptions {
  std::string label;  // names the model in messages, e.g. `model "mlp" version 1`
  /// false: every request is a batch of its own (no dynamic_batching, or max_batch_size 0).
  bool batching = false;
  int64_t max_batch_size = 1;                  // rows of one batch (batching only)
  std::vector<int64_t> preferred_batch_sizes;  // rows; dispatch at once on reaching the largest
  int64_t max_queue_delay_ns = 0;              // how long the oldest request may wait for more
  int max_queue_size = 0;                      // queued requests; 0 = no limit
  int priority_levels = 1;                     // levels 1 (highest) ... priority_levels
  int default_priority = 1;                    // the level of a request that names none
  int64_t default_timeout_ns = 0;              // 0: none
  /// The clock; null: std::chrono::steady_clock. Tests inject a fake one.
  std::function<int64_t()> now_ns;
};

/// One request waiting in the batcher. The batcher owns it from a successful Enqueue until it
/// hands it to the run function (which then owns it and must answer it) or rejects it.
class BatchItem {
 public:
  virtual ~BatchItem() = default;
  /// Called once, from any thread, when the item leaves the queue without running (its
  /// timeout passed, or the batcher stopped without workers). Returns what answers the client:
  /// the batcher destroys the item first and then calls it, so that the answer may release the
  /// last hold on whatever owns the batcher's caller. Neither may call back into the batcher.
  virtual absl::AnyInvocable<void() &&> Reject(absl::Status status) = 0;

  // Set by the caller before Enqueue.
  int64_t rows = 1;        // batch rows of the request (1 without a batch dimension)
  std::string batch_key;   // only items with equal keys share a batch
  uint64_t priority = 0;   // 0: the default level
  int64_t timeout_ns = 0;  // 0: the default timeout
  int64_t deadline_ns = std::numeric_limits<int64_t>::max();  // e.g. the client's deadline

  // Set by the batcher.
  int64_t enqueue_ns = 0;
  int64_t expires_ns = std::numeric_limits<int64_t>::max();
  int level = 0;  // 0-based priority level
};

using BatchItemPtr = std::unique_ptr<BatchItem>;

/// Queues requests per priority level (FIFO inside a level) and forms batches:
///  - the batch starts with the oldest request of the highest non-empty level and takes the
///    compatible requests (equal batch_key) that fit in max_batch_size rows, by level then age;
///  - it goes at once when it has max_batch_size rows or reaches the largest preferred size
///    (cut at the largest preferred size a prefix of it reaches); otherwise once its oldest
///    request waited max_queue_delay_ns: then it is cut at the largest preferred size a prefix
///    reaches, or goes whole;
///  - a request whose timeout (or deadline) passes while queued is rejected with
///    DEADLINE_EXCEEDED and never runs; Enqueue refuses one more than max_queue_size requests
///    with RESOURCE_EXHAUSTED.
///
/// Two ways to drive it: tests call TakeBatch with an injected clock (deterministic, no
/// threads); the server calls Start, and `workers` threads each take a batch when one is ready
/// and pass it to the run function. The lowest-numbered free worker takes the next batch (a
/// lone client always runs on worker 0). Stop (and the destructor) answer every queued request
/// (remaining batches run without waiting for the delay) before joining the threads.
///
/// Thread-safety: every method may be called from any thread.
class DynamicBatcher {
 public:
  /// Runs one batch on stream `worker` (0 ... workers - 1), calls WorkerDone(worker) exactly
  /// once when it no longer needs the stream, and answers every item of the batch (it owns
  /// them).
  using RunFn = std::function<void(int worker, std::vector<BatchItemPtr>& batch)>;

  explicit DynamicBatcher(BatcherOptions options);
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;
  ~DynamicBatcher();

  /// Queues `item`, taking it (`item` is null afterwards). INVALID_ARGUMENT for a priority
  /// above priority_levels, RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE once
  /// stopping: the item is not queued then and stays with the caller.
  absl::Status Enqueue(BatchItemPtr& item);
  /// Enqueue, and when a stream is free and a batch is ready at once (e.g. no batching, or a
  /// zero delay), run that batch on the calling thread rather than hand it to a worker thread.
  /// The item may be answered before this returns. Only after Start.
  absl::Status EnqueueAndRun(BatchItemPtr& item);

  /// One scheduling step at the clock's now: rejects expired requests, then returns the batch
  /// that is ready (empty if none). `*wake_ns`, when not null, receives when a step may next
  /// have something to do (max int64 when nothing is queued).
  std::vector<BatchItemPtr> TakeBatch(int64_t* wake_ns = nullptr);

  /// Starts `workers` threads that run batches with `run`. Call at most once.
  void Start(int workers, RunFn run);
  /// Called by the run function once it no longer needs stream `worker`, before it answers the
  /// requests: the stream is free again, so that the next request of a client it answers goes
  /// to it rather than to a higher one.
  void WorkerDone(int worker);
  /// Answers everything queued, then joins the workers. Enqueue fails afterwards.
  void Stop();

  /// Requests queued now.
  int queued() const;
  const BatcherOptions& options() const { return options_; }

 private:
  int64_t Now() const;
  absl::Status Submit(BatchItemPtr& item, bool run_here);
  std::vector<BatchItemPtr> TakeBatchLocked(int64_t now, bool flush, int64_t* wake_ns,
                                            std::vector<BatchItemPtr>* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Rejects each of `items` (outside the lock) with `status`.
  static void RejectAll(std::vector<BatchItemPtr>& items, const absl::Status& status);
  void WorkerLoop(int worker);

  const BatcherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::deque<BatchItemPtr>> levels_ ABSL_GUARDED_BY(mu_);
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> busy_ ABSL_GUARDED_BY(mu_);  // per stream: a batch runs on it
  RunFn run_;
  std::vector<std::thread> workers_;
};

/// The smallest of `buckets` (sorted ascending) that holds `rows`; 0 when `rows` is above the
/// largest (or there is none).
int64_t BucketFor(const std::vector<int64_t>& buckets, int64_t rows);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_DYNAMIC_BATCHER_H_
