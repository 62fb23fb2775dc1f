// A one-shot event on std::mutex / std::condition_variable. Debian's Abseil is built without
// ThreadSanitizer annotations, so absl::Mutex and absl::Notification hand-offs look like races
// under the tsan preset; the server uses the standard primitives (see docs/development.md).
#ifndef REPRISE_SERVER_NOTIFICATION_H_
#define REPRISE_SERVER_NOTIFICATION_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace reprise::server {

/// Notify once; any number of threads wait. Thread-safe.
class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();  // under the lock: a waiter may destroy this as soon as it wakes
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  /// True if notified before `deadline`.
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    std::unique_lock<std::mutex> lock(mu_);
    if (deadline == absl::InfiniteFuture()) {
      cv_.wait(lock, [this] { return notified_; });
      return true;
    }
    if (deadline <= absl::Now()) return notified_;
    return cv_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_NOTIFICATION_H_
