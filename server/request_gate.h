// Admission of requests: a bound on requests in flight, and closing for shutdown.
#ifndef REPRISE_SERVER_REQUEST_GATE_H_
#define REPRISE_SERVER_REQUEST_GATE_H_

#include <condition_variable>
#include <mutex>
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace reprise::server {

/// Counts requests in flight. Thread-safe.
class RequestGate {
 public:
  /// At most `max_in_flight` (>= 1) requests at once.
  explicit RequestGate(int max_in_flight) : max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight) {}

  /// Admits one request (then call Exit once): UNAVAILABLE once closed, RESOURCE_EXHAUSTED
  /// when full.
  absl::Status Enter();
  void Exit();
  /// From now on Enter fails with UNAVAILABLE; requests already admitted continue.
  void Close();
  bool closed() const;
  /// Waits until no request is in flight or `deadline` passes; true if none is.
  bool WaitIdle(absl::Time deadline);
  int in_flight() const;

 private:
  const int max_in_flight_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_REQUEST_GATE_H_
