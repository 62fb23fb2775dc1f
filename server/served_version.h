// One loaded model version as the server serves it, and the lease a request holds on it.
#ifndef REPRISE_SERVER_SERVED_VERSION_H_
#define REPRISE_SERVER_SERVED_VERSION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <condition_variable>
#include <mutex>
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "config/model_settings.h"
#include "server/model_backend.h"

namespace reprise::server {

/// One batch size's executions (ModelStatistics.batch_stats).
struct BatchSizeStats {
  uint64_t count = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

/// Counters behind the ModelStatistics RPC (and the metrics). The counters are lock-free; the
/// per-batch-size table takes a lock. Any thread.
struct VersionStats {
  std::atomic<uint64_t> success_count{0};
  std::atomic<uint64_t> success_ns{0};
  std::atomic<uint64_t> fail_count{0};
  std::atomic<uint64_t> fail_ns{0};
  std::atomic<uint64_t> queue_count{0};
  std::atomic<uint64_t> queue_ns{0};
  std::atomic<uint64_t> compute_count{0};  // compute_infer
  std::atomic<uint64_t> compute_ns{0};
  std::atomic<uint64_t> compute_input_count{0};
  std::atomic<uint64_t> compute_input_ns{0};
  std::atomic<uint64_t> compute_output_count{0};
  std::atomic<uint64_t> compute_output_ns{0};
  std::atomic<uint64_t> inference_count{0};
  std::atomic<uint64_t> execution_count{0};
  std::atomic<uint64_t> last_inference_ms{0};

  /// Counts one execution of `batch_size` rows (requests' rows, padding not included).
  void AddBatch(uint64_t batch_size, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
    std::lock_guard<std::mutex> lock(batch_mu);
    BatchSizeStats& b = batch_stats[batch_size];
    b.count += 1;
    b.compute_input_ns += input_ns;
    b.compute_infer_ns += infer_ns;
    b.compute_output_ns += output_ns;
  }
  /// A copy of the table, by batch size.
  std::map<uint64_t, BatchSizeStats> BatchStats() const {
    std::lock_guard<std::mutex> lock(batch_mu);
    return batch_stats;
  }

  mutable std::mutex batch_mu;
  std::map<uint64_t, BatchSizeStats> batch_stats ABSL_GUARDED_BY(batch_mu);
};

/// A loaded version plus its in-flight accounting. Shared (std::shared_ptr) by the serving
/// snapshot and by requests. Requests use the model only between a successful TryAcquire and
/// the matching Release (see VersionLease). Thread-safe.
class ServedVersion {
 public:
  ServedVersion(std::string model_name, int64_t version,
                std::shared_ptr<const config::ModelSettings> settings,
                std::unique_ptr<LoadedModel> model);
  ServedVersion(const ServedVersion&) = delete;
  ServedVersion& operator=(const ServedVersion&) = delete;

  const std::string& model_name() const { return model_name_; }
  int64_t version() const { return version_; }
  const config::ModelSettings& settings() const { return *settings_; }
  /// Only while a lease is held (or before the version is published).
  LoadedModel& model() const { return *model_; }
  VersionStats& stats() { return stats_; }

  /// Takes a lease; false once Drain was called (the version is going away).
  bool TryAcquire();
  /// Returns a lease; the last one after Drain runs the drain callback (on this thread).
  void Release();
  /// Refuses new leases and calls `on_drained` once no lease is held: at once (on this thread)
  /// when none is. Call at most once.
  void Drain(absl::AnyInvocable<void() &&> on_drained);
  /// Destroys the loaded model. Only after the drain callback ran.
  void DestroyModel() { model_.reset(); }

  /// Leases held now (for tests and statistics).
  int leases() const;

 private:
  const std::string model_name_;
  const int64_t version_;
  const std::shared_ptr<const config::ModelSettings> settings_;
  std::unique_ptr<LoadedModel> model_;
  VersionStats stats_;

  mutable std::mutex mu_;
  int leases_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::AnyInvocable<void() &&> on_drained_ ABSL_GUARDED_BY(mu_);
};

/// A request's hold on a ServedVersion: while it lives the version is not unloaded.
/// Move-only; releases in the destructor.
class VersionLease {
 public:
  VersionLease() = default;
  /// Adopts a lease already taken with TryAcquire.
  explicit VersionLease(std::shared_ptr<ServedVersion> version) : version_(std::move(version)) {}
  VersionLease(VersionLease&& other) noexcept = default;
  VersionLease& operator=(VersionLease&& other) noexcept {
    if (this != &other) {
      Reset();
      version_ = std::move(other.version_);
    }
    return *this;
  }
  ~VersionLease() { Reset(); }

  ServedVersion* operator->() const { return version_.get(); }
  ServedVersion& operator*() const { return *version_; }
  explicit operator bool() const { return version_ != nullptr; }
  void Reset() {
    if (version_) version_->Release();
    version_.reset();
  }

 private:
  std::shared_ptr<ServedVersion> version_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_SERVED_VERSION_H_
