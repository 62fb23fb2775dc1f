#include "server/dynamic_batcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/steady_clock.h"

namespace reprise::server {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (b > 0 && a > kNever - b) return kNever;
  return a + b;
}

}  // namespace

int64_t BucketFor(const std::vector<int64_t>& buckets, int64_t rows) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), rows);
  return it == buckets.end() ? 0 : *it;
}

DynamicBatcher::DynamicBatcher(BatcherOptions options) : options_(std::move(options)) {
  std::lock_guard<std::mutex> lock(mu_);
  levels_.resize(static_cast<size_t>(std::max(options_.priority_levels, 1)));
}

DynamicBatcher::~DynamicBatcher() { Stop(); }

int64_t DynamicBatcher::Now() const { return options_.now_ns ? options_.now_ns() : SteadyNowNs(); }

absl::Status DynamicBatcher::Enqueue(BatchItemPtr& item) {
  return Submit(item, /*run_here=*/false);
}

absl::Status DynamicBatcher::EnqueueAndRun(BatchItemPtr& item) {
  return Submit(item, /*run_here=*/true);
}

void DynamicBatcher::RejectAll(std::vector<BatchItemPtr>& items, const absl::Status& status) {
  for (BatchItemPtr& item : items) {
    absl::AnyInvocable<void()&&> answer = item->Reject(status);
    item.reset();
    if (answer) std::move(answer)();
  }
  items.clear();
}

absl::Status DynamicBatcher::Submit(BatchItemPtr& item, bool run_here) {
  const int levels = std::max(options_.priority_levels, 1);
  if (item->priority > static_cast<uint64_t>(levels)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.label, ": priority ", item->priority, " is out of range (", levels,
                     " priority level", levels == 1 ? "" : "s",
                     "; 1 is the highest, 0 the default ", options_.default_priority, ")"));
  }
  const uint64_t priority =
      item->priority == 0 ? static_cast<uint64_t>(options_.default_priority) : item->priority;
  item->level = static_cast<int>(std::clamp<uint64_t>(priority, 1, levels)) - 1;
  const int64_t timeout = item->timeout_ns > 0 ? item->timeout_ns : options_.default_timeout_ns;
  std::vector<BatchItemPtr> batch;
  std::vector<BatchItemPtr> expired;
  int worker = -1;
  bool left = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError(absl::StrCat(options_.label, " is being unloaded"));
    }
    if (options_.max_queue_size > 0 && queued_ >= options_.max_queue_size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          options_.label, ": the queue is full (", queued_,
          " requests wait; the model's queue limit is ", options_.max_queue_size, ")"));
    }
    const int64_t now = Now();
    item->enqueue_ns = now;
    item->expires_ns = timeout > 0 ? SaturatingAdd(item->enqueue_ns, timeout) : kNever;
    item->expires_ns = std::min(item->expires_ns, item->deadline_ns);
    levels_[static_cast<size_t>(item->level)].push_back(std::move(item));
    ++queued_;
    if (run_here && run_) {
      // The lowest free stream, if a batch is ready now: run it on this thread (no hand-off).
      for (size_t w = 0; w < busy_.size(); ++w) {
        if (!busy_[w]) {
          worker = static_cast<int>(w);
          break;
        }
      }
      if (worker >= 0) {
        int64_t wake = kNever;
        batch = TakeBatchLocked(now, /*flush=*/false, &wake, &expired);
        if (!batch.empty()) busy_[static_cast<size_t>(worker)] = true;
      }
    }
    left = queued_ > 0;
  }
  // What is left (timers, other batches) is the workers'; a request that runs here wakes none
  // of them (a wake-up is a futex call here and a context switch there).
  if (left) changed_.notify_all();
  if (!expired.empty()) {
    RejectAll(expired, absl::DeadlineExceededError(
                           absl::StrCat(options_.label, ": the request timed out in the queue")));
  }
  if (!batch.empty()) run_(worker, batch);  // calls WorkerDone(worker)
  return absl::OkStatus();
}

std::vector<BatchItemPtr> DynamicBatcher::TakeBatch(int64_t* wake_ns) {
  std::vector<BatchItemPtr> expired;
  std::vector<BatchItemPtr> batch;
  int64_t wake = kNever;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch = TakeBatchLocked(Now(), /*flush=*/false, &wake, &expired);
  }
  if (!expired.empty()) {
    RejectAll(expired, absl::DeadlineExceededError(
                           absl::StrCat(options_.label, ": the request timed out in the queue")));
  }
  if (wake_ns != nullptr) *wake_ns = wake;
  return batch;
}

std::vector<BatchItemPtr> DynamicBatcher::TakeBatchLocked(int64_t now, bool flush, int64_t* wake_ns,
                                                          std::vector<BatchItemPtr>* expired) {
  *wake_ns = kNever;
  for (std::deque<BatchItemPtr>& level : levels_) {
    for (auto it = level.begin(); it != level.end();) {
      if ((*it)->expires_ns <= now) {
        expired->push_back(std::move(*it));
        it = level.erase(it);
        --queued_;
      } else {
        ++it;
      }
    }
  }
  const BatchItem* head = nullptr;
  for (const std::deque<BatchItemPtr>& level : levels_) {
    if (!level.empty()) {
      head = level.front().get();
      break;
    }
  }
  auto earliest_expiry = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int64_t t = kNever;
    for (const std::deque<BatchItemPtr>& level : levels_) {
      for (const BatchItemPtr& item : level) t = std::min(t, item->expires_ns);
    }
    return t;
  };
  if (head == nullptr) return {};

  // The candidates, borrowed from the queue until the cut below takes them.
  std::vector<const BatchItem*> chosen;
  int64_t rows = 0;
  if (!options_.batching) {
    chosen.push_back(head);
  } else {
    for (const std::deque<BatchItemPtr>& level : levels_) {
      for (const BatchItemPtr& item : level) {
        if (item->batch_key != head->batch_key) continue;
        if (rows + item->rows > options_.max_batch_size && !chosen.empty()) continue;
        chosen.push_back(item.get());
        rows += item->rows;
      }
    }
  }

  size_t take = 0;
  if (!options_.batching || rows >= options_.max_batch_size) {
    take = chosen.size();
  } else {
    const std::vector<int64_t>& preferred = options_.preferred_batch_sizes;
    const int64_t largest = preferred.empty() ? 0 : preferred.back();
    // The longest prefix whose rows are a preferred size, and the longest within `largest`.
    size_t preferred_prefix = 0;
    size_t within_largest = 0;
    int64_t sum = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
      sum += chosen[i]->rows;
      if (std::binary_search(preferred.begin(), preferred.end(), sum)) preferred_prefix = i + 1;
      if (sum <= largest) within_largest = i + 1;
    }
    if (largest > 0 && rows >= largest) {
      take = preferred_prefix > 0 ? preferred_prefix : std::max<size_t>(within_largest, 1);
    } else if (flush || now - head->enqueue_ns >= options_.max_queue_delay_ns) {
      take = preferred_prefix > 0 ? preferred_prefix : chosen.size();
    } else {
      *wake_ns = SaturatingAdd(head->enqueue_ns, options_.max_queue_delay_ns);
    }
  }
  chosen.resize(take);
  std::vector<BatchItemPtr> batch;
  if (!chosen.empty()) {
    // Moved out of the queue in the order chosen (by level, then age).
    absl::flat_hash_map<const BatchItem*, size_t> position;
    for (size_t i = 0; i < chosen.size(); ++i) position[chosen[i]] = i;
    batch.resize(chosen.size());
    for (std::deque<BatchItemPtr>& level : levels_) {
      std::erase_if(level, [&](BatchItemPtr& item) {
        auto it = position.find(item.get());
        if (it == position.end()) return false;
        batch[it->second] = std::move(item);
        return true;
      });
    }
    queued_ -= static_cast<int>(batch.size());
  }
  *wake_ns = std::min(*wake_ns, earliest_expiry());
  if (!batch.empty() && queued_ > 0) *wake_ns = now;  // there may be another batch already
  return batch;
}

void DynamicBatcher::Start(int workers, RunFn run) {
  run_ = std::move(run);
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_.assign(static_cast<size_t>(std::max(workers, 1)), false);
  }
  for (int i = 0; i < std::max(workers, 1); ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

void DynamicBatcher::WorkerLoop(int worker) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // The lowest free worker takes the work, so that a lone client always lands on stream 0
    // (whose instances are captured already); every change wakes all workers (notify_all).
    bool lower_idle = busy_[static_cast<size_t>(worker)];  // its stream is lent to a caller
    for (int i = 0; i < worker; ++i) lower_idle = lower_idle || !busy_[static_cast<size_t>(i)];
    int64_t wake = kNever;
    int64_t now = 0;
    if (!lower_idle) {
      std::vector<BatchItemPtr> expired;
      now = Now();
      std::vector<BatchItemPtr> batch = TakeBatchLocked(now, stopping_, &wake, &expired);
      if (!batch.empty() || !expired.empty()) {
        const bool more = queued_ > 0;
        busy_[static_cast<size_t>(worker)] = !batch.empty();
        lock.unlock();
        if (more) changed_.notify_all();  // another idle worker may take the next batch
        if (!expired.empty()) {
          RejectAll(expired, absl::DeadlineExceededError(absl::StrCat(
                                 options_.label, ": the request timed out in the queue")));
        }
        if (!batch.empty()) run_(worker, batch);  // calls WorkerDone(worker)
        lock.lock();
        continue;
      }
    }
    if (stopping_ && queued_ == 0) break;
    if (wake == kNever) {
      changed_.wait(lock);
    } else {
      changed_.wait_for(lock, std::chrono::nanoseconds(wake - now));
    }
  }
  // Leaving: a higher worker may have deferred to this one.
  busy_[static_cast<size_t>(worker)] = true;
  changed_.notify_all();
}

void DynamicBatcher::WorkerDone(int worker) {
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_[static_cast<size_t>(worker)] = false;
    queued = queued_ > 0 || stopping_;
  }
  // A worker may wait for this stream, or defer to it, only while requests are queued.
  if (queued) changed_.notify_all();
}

void DynamicBatcher::Stop() {
  std::vector<BatchItemPtr> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (workers_.empty()) {
      // Nobody runs batches (never started): answer what is queued rather than drop it.
      for (std::deque<BatchItemPtr>& level : levels_) {
        for (BatchItemPtr& item : level) orphans.push_back(std::move(item));
        level.clear();
      }
      queued_ = 0;
    }
  }
  if (!orphans.empty()) {
    RejectAll(orphans, absl::UnavailableError(absl::StrCat(options_.label, " is being unloaded")));
  }
  changed_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

int DynamicBatcher::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

}  // namespace reprise::server
