// The real ModelBackend: models run on the graph engine (runtime/engine) over the runtime
// core's CPU device, or a CUDA device for a KIND_GPU instance group, each version with a pool
// of streams whose StreamSessions capture the first run of a shape and replay it afterwards.
#ifndef REPRISE_SERVER_ENGINE_BACKEND_H_
#define REPRISE_SERVER_ENGINE_BACKEND_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_settings.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/device.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "server/dynamic_batcher.h"
#include "server/model_backend.h"

namespace reprise::server {

/// Options of the engine backend.
struct EngineBackendOptions {
  // Threads of one kernel on a stream (each stream runs one batch at a time); 0 = `cores`
  // divided by the model's streams. See IntraOpThreadsFor.
  int intra_op_threads = 0;
  bool choose_threads = true;  // StreamSessionOptions::choose_threads (runtime.choose_threads)
  int cores = 0;  // cores the streams share; 0 = DetectCpuBudget() (affinity, cgroup cpu.max)
  // Server-wide defaults (config/README.md, `batching` and `capture`), for the keys a model's
  // config.yaml leaves out.
  int64_t max_queue_delay_us = 0;
  int64_t default_timeout_us = 0;  // 0: none
  int max_instances_per_stream = 16;
  bool warmup = false;
  int64_t memory_budget_bytes = 0;  // plans and instances of every model (a cap); 0: no limit
  int64_t max_plan_bytes = int64_t{2} << 30;   // one plan's buffers (limits.max_plan_bytes)
  kernels::cpu::CpuKernelOptions cpu_kernels;  // the CPU device's kernels (config `kernels:`)
};

/// Where a model runs: the CPU ("cpu", device 0) or a CUDA device ("cuda", N: `cuda:N`).
struct DevicePlacement {
  std::string backend = "cpu";
  int index = 0;
};

/// The device of `settings`' instance groups: the CPU, unless the groups are KIND_GPU (then
/// their GPU, GPU 0 when they name none). INVALID_ARGUMENT when KIND_GPU groups are mixed with
/// other kinds, UNIMPLEMENTED when they name more than one GPU (a model runs on one device).
/// `label` prefixes messages.
absl::StatusOr<DevicePlacement> PlacementFor(const config::ModelSettings& settings,
                                             absl::string_view label);

/// Loads ONNX model versions on the CPU device, or on a CUDA device when the model's config
/// says KIND_GPU (PlacementFor). Create makes the CPU device and registers the CPU kernels
/// once; in a build with the CUDA backend it is made, and its kernels
/// registered, by the first GPU model's load (a load that finds no usable GPU, or a build
/// without it, fails with FAILED_PRECONDITION naming the model and the device). Every loaded model
/// keeps its device alive (shared ownership), so models may outlive the backend object. Load is
/// thread-safe; the loaded models are too (LoadedModel). All models share one instance memory
/// budget (`memory_budget_bytes`); each keeps it alive.
class EngineBackend final : public ModelBackend {
 public:
  static absl::StatusOr<std::unique_ptr<EngineBackend>> Create(EngineBackendOptions options = {});

  /// Reads `spec.model_path`, checks `spec.settings` against the graph and makes an
  /// EngineModel of `spec.streams` streams (warming it up when the settings say so). Errors are the
  /// engine's (naming the file) or INVALID_ARGUMENT naming the tensor that the model config and the
  /// graph disagree on.
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const LoadSpec& spec) override;
  /// Imports the file (checker and shape inference, no optimisation) and reports its graph's
  /// inputs and outputs; symbolic dimensions are -1.
  absl::StatusOr<config::GraphTensors> ReadGraphTensors(
      const std::string& model_path) const override;
  /// The memory counters of the CPU device and of every CUDA device in use.
  std::vector<DeviceMemoryInfo> MemoryUsage() const override;

 private:
  EngineBackend(std::shared_ptr<runtime::Backend> backend, runtime::Device* device,
                EngineBackendOptions options);
  // The device of `placement` and the backend that owns it; the CUDA backend is made (and a
  // CUDA device's kernels registered) on first use. FAILED_PRECONDITION, naming the model and
  // the device, where it cannot be used. `label` names the model.
  absl::StatusOr<std::pair<std::shared_ptr<runtime::Backend>, runtime::Device*>> DeviceFor(
      const DevicePlacement& placement, absl::string_view label);

  std::shared_ptr<runtime::Backend> backend_;
  runtime::Device* device_;  // owned by backend_
  // std::mutex rather than absl::Mutex (TSan, docs/development.md).
  mutable std::mutex cuda_mu_;
  std::shared_ptr<runtime::Backend> cuda_;  // guarded by cuda_mu_; null until a GPU model loads
  std::vector<int> cuda_ready_;             // guarded by cuda_mu_: devices with their kernels
  EngineBackendOptions options_;
  std::shared_ptr<runtime::engine::InstanceBudget> budget_;
};

/// The intra-op threads of each of a model's `streams`: `configured`, or cores / streams when 0;
/// never more than cores / streams (at least 1), so that the streams' kernels do not
/// oversubscribe the cores. Sets `*clamped` when a configured value was cut.
int IntraOpThreadsFor(int configured, int streams, int cores, bool* clamped);

/// The batcher settings of a model: its dynamic_batching block with the server's defaults;
/// without the block (or with max_batch_size 0) every request runs alone. `max_queue_length`
/// is the model's queue limit unless default_queue_policy.max_queue_size sets one.
BatcherOptions BatcherOptionsFor(const config::ModelSettings& settings,
                                 const EngineBackendOptions& defaults, absl::string_view label,
                                 int max_queue_length);

/// The signature the server validates requests against: the graph's tensors, -1 for symbolic
/// dimensions and for the batch dimension when `settings.max_batch_size` > 0, checked against
/// the inputs and outputs `settings` lists (when it lists any). INVALID_ARGUMENT names the
/// tensor on a mismatch (missing, unknown, element type, rank, a fixed dimension, a fixed
/// batch dimension). `label` prefixes messages.
absl::StatusOr<ModelSignature> SignatureFromGraph(const runtime::engine::Model& model,
                                                  const config::ModelSettings& settings,
                                                  absl::string_view label);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_ENGINE_BACKEND_H_
