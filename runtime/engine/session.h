// Runs a model, caching one execution plan per input-shape signature.
#ifndef REPRISE_RUNTIME_ENGINE_SESSION_H_
#define REPRISE_RUNTIME_ENGINE_SESSION_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine {

/// Eager runner over a Model with a plan cache keyed by the input shapes.
///
/// Value-keyed plans: when a model cannot be planned from shapes alone because a small integer
/// input decides shapes (see Model::PlanForInputs), the session switches for good to keys that
/// also hold those inputs' values, one plan per distinct value.
///
/// Thread-safety: Run may be called from several threads. Runs of different shapes proceed in
/// parallel; runs of the same shape share one plan and take turns (a plan's buffers serve one
/// run at a time). Plans are never evicted while the session lives.
class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {}

  /// Validates `inputs` (see Model::MatchInputs), finds or makes the plan for their shapes,
  /// runs it and returns the outputs in graph order.
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs);

  /// The cached plan for these shapes (one per graph input), made on first use. The pointer
  /// stays valid while the session lives; running it directly is the caller's to serialise.
  absl::StatusOr<ExecutionPlan*> GetPlan(const std::vector<Shape>& input_shapes);

  size_t cached_plans() const;
  /// Whether plans are keyed by the values of small integer inputs as well as by shapes.
  bool value_keyed() const { return value_keyed_.load(); }
  const Model& model() const { return *model_; }

 private:
  // std::mutex rather than absl::Mutex: Debian's Abseil has no ThreadSanitizer annotations,
  // so absl::Mutex hand-offs look like races under the tsan preset (docs/development.md).
  struct Entry {
    std::unique_ptr<ExecutionPlan> plan;
    std::mutex run_mu;
  };
  absl::StatusOr<Entry*> GetEntry(const std::vector<Shape>& input_shapes);
  absl::StatusOr<Entry*> GetEntryForInputs(const std::vector<const TensorValue*>& inputs);

  std::shared_ptr<const Model> model_;
  std::atomic<bool> value_keyed_{false};
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> plans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_SESSION_H_
