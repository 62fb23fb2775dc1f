// The daemon's Prometheus metrics: what the request path records as it goes (counters and
// histograms), and the registry that /metrics (server/metrics_endpoint.h) serves together with
// the collectors that read the rest at scrape time (server/metrics_collector.h). Names:
// docs/metrics.md.
#ifndef REPRISE_SERVER_METRICS_H_
#define REPRISE_SERVER_METRICS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace reprise::server {

/// The `reason` label of a failed request: invalid_argument, not_found, unavailable,
/// resource_exhausted, deadline_exceeded, or internal for every other code. "" for OK.
absl::string_view FailureReason(absl::StatusCode code);

/// Where the time of one request's compute went (the `phase` label of
/// reprise_compute_duration_seconds).
struct ComputeTimes {
  absl::Duration input;   // decoding and checking the request's tensors
  absl::Duration infer;   // the backend running the model (queue excluded)
  absl::Duration output;  // encoding the response
};

/// The text exposition format (version 0.0.4) of what `collectables` collect now, in order.
std::string SerializeMetrics(
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables);

/// Every metric the daemon pushes, plus the collectables it pulls at scrape time. Record* are
/// cheap (a label lookup under the family's mutex and an atomic add), thread-safe and may be
/// called from any thread; `model` / `version` are the label values (empty when the request named
/// no known model, so that unknown names cannot grow the label set).
///
/// The batcher feeds its numbers through RecordExecution (one call per batch executed); the
/// numbers the engine keeps (captures, replays, evictions, capture failures, capture time,
/// resident instances) are read at scrape time by MetricsCollector.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// One finished inference request: counts reprise_requests_total by outcome and observes its
  /// whole duration (reprise_request_duration_seconds).
  void RecordRequest(absl::string_view model, absl::string_view version, absl::StatusCode code,
                     absl::Duration duration);
  /// Time a request waited for a stream (or a batch slot).
  void RecordQueue(absl::string_view model, absl::string_view version, absl::Duration wait);
  /// The compute phases of one request.
  void RecordCompute(absl::string_view model, absl::string_view version, const ComputeTimes& times);
  /// One execution of the model on `batch_size` inferences: reprise_executions_total += 1,
  /// reprise_inferences_total += batch_size, reprise_batch_size observes batch_size.
  void RecordExecution(absl::string_view model, absl::string_view version, int64_t batch_size);
  /// One version loaded (`ok`) or failed to load, after `duration`. A loaded version's series
  /// are created at zero here, so that rates and dashboards see them before the first request.
  void RecordLoad(absl::string_view model, absl::string_view version, absl::Duration duration,
                  bool ok);

  /// Adds a collectable that is read at every scrape (kept alive by this object).
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);
  /// The registry and the collectables, in the order the endpoint serves them.
  std::vector<std::shared_ptr<prometheus::Collectable>> Collectables() const;
  /// The text exposition format of everything (what GET /metrics answers).
  std::string Serialize() const;

 private:
  struct Families;
  struct Series;
  // The per-request series of a (model, version), made on first use.
  const Series& SeriesFor(absl::string_view model, absl::string_view version);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  std::mutex series_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Series>> series_ ABSL_GUARDED_BY(series_mu_);
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_METRICS_H_
