// The model repository and the lifecycle of its models: scan <repo>/<model>/<version>/model.onnx,
// read each model's config.pbtxt / config.yaml (config/model_config.h), choose versions by
// policy, load asynchronously, unload without dropping a request, and in poll mode apply the
// repository's changes.
#ifndef REPRISE_SERVER_MODEL_REPOSITORY_H_
#define REPRISE_SERVER_MODEL_REPOSITORY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <condition_variable>
#include <mutex>
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/model_config.h"
#include "config/model_settings.h"
#include "config/server_config.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "server/model_backend.h"
#include "server/model_upload.h"
#include "server/served_version.h"

namespace reprise::server {

/// States as RepositoryIndex reports them.
enum class VersionState { kLoading, kReady, kUnloading, kUnavailable };
/// "LOADING", "READY", "UNLOADING", "UNAVAILABLE".
absl::string_view VersionStateName(VersionState state);

/// The versions of `available` (ascending) that `policy` selects, ascending. Errors name
/// `model` and the missing versions.
absl::StatusOr<std::vector<int64_t>> SelectVersions(absl::string_view model,
                                                    const config::VersionPolicy& policy,
                                                    const std::vector<int64_t>& available);

/// A model's validated settings and the versions its policy chooses (ascending).
struct ResolvedModel {
  config::ModelSettings settings;
  std::vector<int64_t> versions;
};

/// One model as it is served: its settings and its ready versions (ascending).
struct ServedModel {
  std::shared_ptr<const config::ModelSettings> settings;
  std::map<int64_t, std::shared_ptr<ServedVersion>> versions;
};
/// What requests read: immutable once published, replaced as a whole.
using ServingMap = absl::flat_hash_map<std::string, ServedModel>;

/// What a RepositoryModelLoad with parameters replaces, for that load only (a later load
/// without them reads the repository again).
struct LoadOverride {
  /// Replaces the model's config.pbtxt / config.yaml (the `config` parameter); validated and
  /// auto-completed like a config file (ModelRepository::ResolveModel).
  std::optional<config::ParsedModelConfig> config;
  /// Replace the model's directory: written into the UploadArea, which serves as the model's
  /// directory until it is unloaded or loaded again. Needs `config`. Borrowed until the load's
  /// callback runs.
  std::vector<UploadedFile> files;
};

/// One row of RepositoryIndex.
struct IndexEntry {
  std::string name;
  std::string version;  // empty for a model-level entry
  std::string state;    // empty for a model that was never loaded
  std::string reason;
};

/// Owns the lifecycle of every model. Loads and unloads run on the executor, one operation
/// per model at a time (later ones wait their turn); different models load in parallel. The
/// read path (Acquire, Snapshot) takes no lock of the manager: it copies the pointer to an
/// immutable map that is replaced as a whole. Thread-safe.
///
/// Lifetime: `backend` and `executor` are borrowed and must outlive the repository; destroy the
/// repository only after every callback it was given has run (e.g. after UnloadAll's).
class ModelRepository {
 public:
  struct Options {
    std::vector<std::string> paths;
    config::ControlMode control_mode = config::ControlMode::kNone;
    int default_streams = 1;      // streams of a model with no instance_group
    int max_queue_length = 1024;  // per model, unless its max_queue_size says (LoadSpec)
    Metrics* metrics = nullptr;   // borrowed, outlives the repository; null: none recorded
    /// Load / unload operations queued or running at once (all models); one more is refused
    /// with RESOURCE_EXHAUSTED. Shutdown's UnloadAll is never refused.
    int max_pending_operations = 64;
    /// Triton's auto-complete of configs from the model file (needs the backend's
    /// ReadGraphTensors; without it configs are used as written).
    config::AutoComplete auto_complete;
    // Called on an executor thread after every load (startup or RPC) finished, whatever its
    // outcome; may call StartupFailures. Null: none.
    std::function<void()> on_load_finished;
    /// Where uploaded model files go (LoadOverride::files); borrowed, outlives the repository.
    /// Null: uploads are refused.
    UploadArea* uploads = nullptr;
  };
  /// Called once with the outcome, on an executor thread (or the caller's for early errors).
  using Callback = absl::AnyInvocable<void(absl::Status) &&>;

  static absl::StatusOr<std::unique_ptr<ModelRepository>> Create(Options options,
                                                                 ModelBackend* backend,
                                                                 Executor* executor);
  ModelRepository(const ModelRepository&) = delete;
  ModelRepository& operator=(const ModelRepository&) = delete;

  /// Loads what the control mode loads at start: every model (none), or `load_models`
  /// ("*" = every model; explicit). `done` gets OK or the first failure once all finished.
  /// A model that fails here is a startup failure until a later load of it succeeds.
  void LoadAtStartup(const std::vector<std::string>& load_models, Callback done);
  /// The models asked for at startup whose load failed and that no later load fixed, sorted.
  std::vector<std::string> StartupFailures() const;
  /// RepositoryModelLoad: (re)loads `name`. A failed load leaves the versions already serving
  /// in place. FAILED_PRECONDITION in control mode none.
  void LoadModel(const std::string& name, Callback done) { LoadModel(name, {}, std::move(done)); }
  /// LoadModel with `override` (RepositoryModelLoad's `config` and `file:` parameters). With
  /// files, `name` need not be a model of the repository.
  void LoadModel(const std::string& name, LoadOverride override, Callback done);
  /// RepositoryModelUnload: stops new requests to `name` at once; `done` runs once every
  /// in-flight request finished. FAILED_PRECONDITION in control mode none.
  void UnloadModel(const std::string& name, Callback done);
  /// Unloads every model (shutdown), whatever the control mode.
  void UnloadAll(Callback done);

  /// Poll mode: one scan of the repositories. A model that appeared is loaded, one whose files
  /// changed (config, version directories, the files in them) is reloaded through the same
  /// path as RepositoryModelLoad (a failed reload leaves the serving versions in place;
  /// versions no longer on disk are retired after their in-flight requests), and one that
  /// disappeared (or has no version left) is unloaded as RepositoryModelUnload does. `done`
  /// gets OK or the first failure once every operation it started finished (at once when
  /// nothing changed). FAILED_PRECONDITION outside poll mode. The server's poller calls it
  /// every poll_seconds; tests call it by hand.
  void Poll(Callback done);

  /// `parsed` (a model's config.pbtxt / config.yaml, or a config from any other source)
  /// validated by config::ModelSettingsFromConfig, the versions of `model_dir` its policy
  /// chooses, and, with auto-complete on, the settings completed from the graph of the highest
  /// chosen version (read by the backend; a file it cannot read is not completed, and fails
  /// at load). Errors name the config's source, line and field.
  /// Thread-safe; may block (it reads the model file).
  absl::StatusOr<ResolvedModel> ResolveModel(const std::string& name, const std::string& model_dir,
                                             const config::ParsedModelConfig& parsed) const;

  /// A lease on the version of `model` named by `version` (empty: the highest ready one).
  /// NOT_FOUND: no such model is loaded, or it has no such version; UNAVAILABLE: the version
  /// is known but not ready (loading, failed, going away); INVALID_ARGUMENT: `version` is not a
  /// number. Lock-free when it succeeds (the error path reads the records under the lock).
  absl::StatusOr<VersionLease> Acquire(absl::string_view model, absl::string_view version) const;
  /// The serving map now: a shared_ptr copy under a mutex of its own (never held while loading
  /// or unloading).
  std::shared_ptr<const ServingMap> Snapshot() const {
    std::lock_guard<std::mutex> lock(serving_mu_);
    return serving_;
  }

  /// Every model found in the repositories, with the state of each version known.
  std::vector<IndexEntry> Index(bool ready_only) const;
  /// Model directory names found in the repositories, sorted.
  std::vector<std::string> ScanModelNames() const;

 private:
  struct Record {
    VersionState state = VersionState::kUnavailable;
    std::string reason;
  };
  struct OpQueue {
    bool busy = false;
    std::deque<absl::AnyInvocable<void() &&>> waiting;
  };

  ModelRepository(Options options, ModelBackend* backend, Executor* executor);

  // Runs `op` on the executor once no other operation of `model` runs; `op` must call
  // OpFinished(model) when it is done. RESOURCE_EXHAUSTED (and `op` dropped) when `bounded`
  // and max_pending_operations are pending.
  absl::Status Enqueue(const std::string& model, absl::AnyInvocable<void() &&> op,
                       bool bounded = true);
  void OpFinished(const std::string& model);
  // Who asked for a load: a client's load is bounded by max_pending_operations; a startup
  // load's failure is a startup failure (strict readiness); a poll's load is the server's own
  // and never refused for the bound (a refused one would not be retried until the files change
  // again).
  enum class LoadOrigin { kClient, kStartup, kPoll };
  void StartLoad(const std::string& name, LoadOverride override, Callback done,
                 LoadOrigin origin = LoadOrigin::kClient);
  void StartUnload(const std::string& name, Callback done, bool bounded = true);
  absl::Status LoadNow(const std::string& name, const LoadOverride& override);
  // Removes the uploaded files of `name` once it is unloaded, and forgets a model that exists
  // only as an upload.
  void ForgetUpload(const std::string& name);
  void UnloadNow(const std::string& name, Callback done);
  // Drains `retired` and destroys them; afterwards marks records still UNLOADING unavailable.
  void Retire(std::vector<std::shared_ptr<ServedVersion>> retired, absl::string_view reason,
              absl::AnyInvocable<void() &&> all_done);
  void Publish(std::shared_ptr<const ServingMap> map) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> FindModelDir(const std::string& name) const;
  // The error for `model` (version 0: any) when the serving map has no such version.
  absl::Status NotServing(absl::string_view model, int64_t version) const;
  int StreamsFor(const config::ModelSettings& settings) const;
  // What Poll compares: every model directory's config files and version files (names, sizes,
  // modification times), by model name.
  std::map<std::string, std::string> Fingerprints() const;

  const Options options_;
  ModelBackend* const backend_;
  Executor* const executor_;

  // Only the pointer copy / swap happens under serving_mu_. (libstdc++ 12's
  // std::atomic<std::shared_ptr> is invisible to ThreadSanitizer, so a plain mutex it is.)
  mutable std::mutex serving_mu_;
  std::shared_ptr<const ServingMap> serving_ ABSL_GUARDED_BY(serving_mu_);

  mutable std::mutex mu_;
  std::map<std::string, std::map<int64_t, Record>> records_ ABSL_GUARDED_BY(mu_);  // 0: model
  absl::flat_hash_map<std::string, OpQueue> ops_ ABSL_GUARDED_BY(mu_);  // busy models only
  int pending_ops_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> startup_failures_ ABSL_GUARDED_BY(mu_);
  // Poll mode: the fingerprint of each model as last seen (Fingerprints).
  std::map<std::string, std::string> polled_ ABSL_GUARDED_BY(mu_);
  // Models served from uploaded files: the upload directory (UploadArea) of each.
  std::map<std::string, std::string> upload_dirs_ ABSL_GUARDED_BY(mu_);
  // Names uploaded that are not models of the repository (bounded: 4 x max_uploads).
  std::set<std::string> upload_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_REPOSITORY_H_
