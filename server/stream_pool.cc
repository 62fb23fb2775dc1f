#include "server/stream_pool.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace reprise::server {

StreamLease::StreamLease(StreamLease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      stream_(std::exchange(other.stream_, -1)),
      queue_ns_(other.queue_ns_) {}

StreamLease& StreamLease::operator=(StreamLease&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::exchange(other.pool_, nullptr);
    stream_ = std::exchange(other.stream_, -1);
    queue_ns_ = other.queue_ns_;
  }
  return *this;
}

void StreamLease::Reset() {
  if (pool_ != nullptr) pool_->Release(stream_);
  pool_ = nullptr;
  stream_ = -1;
}

StreamPool::StreamPool(std::string label, int streams, int max_queue)
    : label_(std::move(label)), max_queue_(max_queue < 0 ? 0 : max_queue) {
  if (streams < 1) streams = 1;
  in_use_.assign(static_cast<size_t>(streams), false);
  // Stream 0 on top, so that a lone client always uses the same (already captured) stream.
  for (int i = streams - 1; i >= 0; --i) free_.push_back(i);
}

StreamPool::~StreamPool() = default;

absl::StatusOr<StreamLease> StreamPool::Acquire() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t waiters = next_ticket_ - serving_;
  if (free_.empty() || waiters > 0) {
    if (waiters >= static_cast<uint64_t>(max_queue_)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(label_, ": the queue is full (", waiters, " requests wait for ",
                       in_use_.size(), " streams; the model's queue limit is ", max_queue_, ")"));
    }
    // FIFO: each waiter takes a ticket and goes when it is the oldest and a stream is free.
    const uint64_t ticket = next_ticket_++;
    released_.wait(lock, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return serving_ == ticket && !free_.empty();
    });
    ++serving_;
  }
  const int stream = free_.back();
  free_.pop_back();
  // The next waiter may go too (several streams were freed before this one woke).
  if (!free_.empty() && next_ticket_ != serving_) released_.notify_all();
  in_use_[static_cast<size_t>(stream)] = true;
  ++leased_;
  const int64_t waited =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return StreamLease(this, stream, waited);
}

void StreamPool::Release(int stream) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_[static_cast<size_t>(stream)] = false;
    free_.push_back(stream);
    --leased_;
    wake = next_ticket_ != serving_;
  }
  if (wake) released_.notify_all();
}

int StreamPool::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(next_ticket_ - serving_);
}

int StreamPool::leased() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leased_;
}

}  // namespace reprise::server
