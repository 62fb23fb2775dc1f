// What /metrics reads at scrape time rather than on the request path: per-version gauges and
// the engine's per-instance counters, model states, device memory, gRPC calls in flight and the
// process's CPU and memory.
#ifndef REPRISE_SERVER_METRICS_COLLECTOR_H_
#define REPRISE_SERVER_METRICS_COLLECTOR_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/model_backend.h"
#include "server/model_repository.h"

namespace reprise::server {

/// The process's own numbers, from /proc/self (zeros where it cannot be read).
struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // since the epoch
  double open_fds = 0;
};
ProcessStats ReadProcessStats();

/// A prometheus::Collectable that builds, at each scrape:
/// - per served version (read under a lease, skipped while the version is going away):
///   reprise_pending_requests, reprise_runtime_instances{state}, the instances' captures,
///   replays, capture failures (instances whose capture failed and that run eagerly), capture
///   duration histogram and arena bytes, from LoadedModel::ListRuntimeInstances();
/// - reprise_model_state{state} (1 for the current state of each version, 0 for the others)
///   from ModelRepository::Index;
/// - reprise_device_memory_{used,peak}_bytes{device,pool} from ModelBackend::MemoryUsage;
/// - reprise_grpc_server_inflight_calls from `grpc_inflight` (may be null);
/// - reprise_capture_memory_budget_bytes, `memory_budget_bytes` (0: no budget);
/// - process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
///   process_start_time_seconds, process_open_fds.
/// It also logs one warning per runtime instance whose capture failed, the first time a scrape
/// sees it. `repository`, `backend` and `grpc_inflight` are borrowed and must outlive it (the
/// endpoint that serves it stops first). Thread-safe.
class MetricsCollector final : public prometheus::Collectable {
 public:
  MetricsCollector(const ModelRepository* repository, const ModelBackend* backend,
                   const std::atomic<int64_t>* grpc_inflight, int64_t memory_budget_bytes = 0);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void CollectVersions(std::vector<prometheus::MetricFamily>* out) const;

  const ModelRepository* const repository_;
  const ModelBackend* const backend_;
  const std::atomic<int64_t>* const grpc_inflight_;
  const int64_t memory_budget_bytes_;
  mutable std::mutex mu_;
  // Instances whose failed capture was logged: "model/version/stream/shape".
  mutable absl::flat_hash_set<std::string> logged_failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_METRICS_COLLECTOR_H_
