// One model version loaded on the graph engine: a StreamSession per stream, a DynamicBatcher
// whose workers (one per stream) run batches padded up to the capture buckets.
#ifndef REPRISE_SERVER_ENGINE_MODEL_H_
#define REPRISE_SERVER_ENGINE_MODEL_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "server/dynamic_batcher.h"
#include "server/model_backend.h"

namespace reprise::server {

/// What EngineModel::Create needs.
struct EngineModelParams {
  std::shared_ptr<runtime::Backend> backend;  // keeps the device alive
  runtime::Device* device = nullptr;          // owned by `backend`
  std::shared_ptr<const runtime::engine::Model> model;
  ModelSignature signature;
  std::string label;  // `model "m" version 1`
  int streams = 1;
  int max_batch_size = 0;
  /// Capture buckets (ascending). Empty: every shape is captured as it comes (max_batch_size 0
  /// models); otherwise a batch is padded up to the nearest and one above the largest runs
  /// eagerly.
  std::vector<int64_t> buckets;
  bool warmup = false;  // capture every bucket on every stream (largest first) in Create
  BatcherOptions batcher;
  /// The sessions' bounds; `session.budget`, when set, must be `budget` (kept alive here).
  runtime::engine::StreamSessionOptions session;
  std::shared_ptr<runtime::engine::InstanceBudget> budget;
};

/// The engine's LoadedModel. InferAsync validates nothing more (the codec did) and queues the
/// request in the batcher; `done` runs on the worker that ran its batch (Infer waits for it); a
/// worker assembles the batch (concatenated along the batch dimension, zero rows up to the bucket),
/// runs it on its stream's session and slices each request's rows back out, so padded rows and
/// other requests' rows never reach a response. Requests batch together only when their non-batch
/// dimensions are equal; models with max_batch_size 0 never batch (their outputs have no batch
/// dimension).
///
/// Destruction stops the batcher, which answers every queued request first. Thread-safe.
class EngineModel final : public LoadedModel {
 public:
  static absl::StatusOr<std::unique_ptr<EngineModel>> Create(EngineModelParams params);
  ~EngineModel() override;

  const ModelSignature& signature() const override { return params_.signature; }
  void InferAsync(std::span<const InputTensor> inputs, std::span<const std::string> outputs,
                  const InferOptions& options, InferDone done) override;
  /// Queues the request, or runs it in place when a stream is free, batching is off and the
  /// model's recent runs took at most kMaxInlineRunNs.
  bool InfersWithoutBlocking() const override { return true; }
  std::vector<RuntimeInstanceInfo> ListRuntimeInstances() const override;
  absl::StatusOr<std::string> DumpRuntimeInstance(int stream, absl::string_view shape_signature,
                                                  bool verbose) const override;
  CaptureStats capture_stats() const override;
  absl::StatusOr<ModelProfile> Profile(int iterations, int top, bool eager) const override;

  /// Sets the load time reported by capture_stats (the backend measures the whole load).
  void set_load_ns(int64_t ns) { load_ns_ = ns; }

 private:
  class Pending;
  EngineModel(EngineModelParams params,
              std::vector<std::unique_ptr<runtime::engine::StreamSession>> sessions);
  // Captures every bucket on every stream, largest first; failures are logged, not fatal.
  void WarmUp();
  // A worker's step: runs `batch` on stream `stream` and answers each request.
  void RunBatch(int stream, std::vector<BatchItemPtr>& batch);
  // Time spent assembling, running and slicing (InferTimings' compute phases).
  struct Phases {
    int64_t input_ns = 0;
    int64_t infer_ns = 0;
    int64_t output_ns = 0;
  };
  // Runs `items` as one batch (padded to its bucket) and returns each one's answer. When the
  // batch fails and `isolate_failure` is set, each request is run alone once instead.
  std::vector<absl::StatusOr<std::vector<OutputTensor>>> RunItems(
      int stream, const std::vector<Pending*>& items, bool isolate_failure, Phases* phases);
  // Runs `items` as one batch padded to `padded` rows on the stream's session: their inputs
  // staged straight into the plan (one copy; string inputs are assembled first), each
  // request's outputs copied once out of the plan into `outputs` (per item, in the order of
  // its wanted outputs). Allocation failures become RESOURCE_EXHAUSTED.
  absl::Status RunOnStream(int stream, const std::vector<Pending*>& items, int64_t padded,
                           bool capture, runtime::engine::StreamRunInfo* info, Phases* phases,
                           std::vector<std::vector<OutputTensor>>* outputs);

  const EngineModelParams params_;
  // Declared before the batcher: its workers use them until it stops (it is destroyed first).
  const std::vector<std::unique_ptr<runtime::engine::StreamSession>> sessions_;
  // Records a capture's time into capture_time_.
  void ObserveCapture(int64_t ns);

  mutable std::mutex capture_time_mu_;
  CaptureTimeHistogram capture_time_ ABSL_GUARDED_BY(capture_time_mu_);
  uint64_t warmup_instances_ = 0;
  int64_t warmup_ns_ = 0;
  int64_t load_ns_ = 0;
  // Runs of at most this long (recently) run on the calling thread when a stream is free.
  static constexpr int64_t kMaxInlineRunNs = 1'000'000;
  // A moving average of recent runs' time (0: none yet), for InferAsync's choice.
  std::atomic<int64_t> recent_run_ns_{0};
  std::atomic<uint64_t> output_bytes_copied_{0};
  DynamicBatcher batcher_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_ENGINE_MODEL_H_
