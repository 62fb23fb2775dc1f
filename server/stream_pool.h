// The scheduler's first form: a model version's pool of streams, handed out one request at a
// time through RAII leases, with a bounded FIFO of requests waiting for a free one.
#ifndef REPRISE_SERVER_STREAM_POOL_H_
#define REPRISE_SERVER_STREAM_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

namespace reprise::server {

class StreamPool;

/// A request's hold on one stream of a StreamPool: the stream is its alone until the lease is
/// destroyed (or Reset), which hands it to the oldest waiter. Move-only. Must not outlive the
/// pool.
class StreamLease {
 public:
  StreamLease() = default;
  StreamLease(StreamLease&& other) noexcept;
  StreamLease& operator=(StreamLease&& other) noexcept;
  StreamLease(const StreamLease&) = delete;
  StreamLease& operator=(const StreamLease&) = delete;
  ~StreamLease() { Reset(); }

  /// The stream's index in the pool, 0 ... size() - 1.
  int stream() const { return stream_; }
  /// How long the request waited for the stream.
  int64_t queue_ns() const { return queue_ns_; }
  explicit operator bool() const { return pool_ != nullptr; }
  /// Returns the stream now.
  void Reset();

 private:
  friend class StreamPool;
  StreamLease(StreamPool* pool, int stream, int64_t queue_ns)
      : pool_(pool), stream_(stream), queue_ns_(queue_ns) {}

  StreamPool* pool_ = nullptr;
  int stream_ = -1;
  int64_t queue_ns_ = 0;
};

/// Hands out the streams 0 ... `streams` - 1 of one model version. A request takes a free
/// stream at once when there is one and nobody waits; otherwise it joins a FIFO queue of at
/// most `max_queue` waiters (one more is refused with RESOURCE_EXHAUSTED naming the model and
/// the limit). Streams go to waiters in arrival order.
///
/// The pool knows only stream indices: the caller keeps one StreamSession (or any per-stream
/// state) per index. The engine backend now schedules with DynamicBatcher (batches, priorities,
/// timeouts, one worker per stream) instead; this pool remains for backends that only need
/// stream leases.
///
/// Thread-safety: every method may be called from any thread. Lifetime: leases must be
/// destroyed before the pool.
class StreamPool {
 public:
  /// `label` names the model in messages (e.g. `model "mlp" version 1`). `streams` >= 1,
  /// `max_queue` >= 0.
  StreamPool(std::string label, int streams, int max_queue);
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;
  ~StreamPool();

  /// A free stream, waiting in line for one if needed; RESOURCE_EXHAUSTED when `max_queue`
  /// requests already wait.
  absl::StatusOr<StreamLease> Acquire();

  int size() const { return static_cast<int>(in_use_.size()); }
  /// Requests waiting now and streams leased now (for tests and statistics).
  int waiting() const;
  int leased() const;

 private:
  friend class StreamLease;
  void Release(int stream);

  const std::string label_;
  const int max_queue_;
  // std::mutex, as everywhere in server/ (docs/development.md: Debian's absl::Mutex is not
  // TSan-annotated).
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);     // stack of free stream indices
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // given to each waiter on arrival
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;      // the oldest waiter's ticket
  int leased_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_STREAM_POOL_H_
