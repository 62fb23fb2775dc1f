#include "server/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/server_config.h"
#include "runtime/base/status_macros.h"
#include "server/classification.h"
#include "server/client_text.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace fs = std::filesystem;

namespace {

constexpr absl::string_view kModelFile = "model.onnx";
// The reason of a version unloaded on request (not a failure).
constexpr absl::string_view kUnloadedReason = "unloaded";

// A valid version directory name: a positive decimal integer.
bool ParseVersionDir(const std::string& name, int64_t* version) {
  if (name.empty() || name.size() > 18) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, version) && *version > 0;
}

std::vector<int64_t> ListVersions(const std::string& model_dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir, ec)) {
    int64_t v = 0;
    if (!e.is_directory(ec) || !ParseVersionDir(e.path().filename().string(), &v)) continue;
    if (fs::is_regular_file(e.path() / std::string(kModelFile), ec)) versions.push_back(v);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

// Joins several asynchronous outcomes: `done` gets the first error (or OK) after `count` calls.
class Join {
 public:
  Join(int count, ModelRepository::Callback done) : left_(count), done_(std::move(done)) {}
  void Add(absl::Status status) {
    ModelRepository::Callback done;
    absl::Status result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_.ok() && !status.ok()) first_ = std::move(status);
      if (--left_ > 0) return;
      done = std::move(done_);
      result = first_;
    }
    std::move(done)(std::move(result));
  }

 private:
  std::mutex mu_;
  int left_ ABSL_GUARDED_BY(mu_);
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  ModelRepository::Callback done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading:
      return "LOADING";
    case VersionState::kReady:
      return "READY";
    case VersionState::kUnloading:
      return "UNLOADING";
    case VersionState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

namespace {

// One log line per state change of a version (version 0: the model itself).
// A failure logs a warning, anything else (unloads included) an info line.
void LogState(absl::string_view model, int64_t version, VersionState state,
              absl::string_view reason = "", bool failure = false) {
  const std::string what = version == 0
                               ? absl::StrCat("model ", QuotedName(model))
                               : absl::StrCat("model ", QuotedName(model), " version ", version);
  // fmt cannot format Debian's absl::string_view: std::string it is.
  const std::string name(VersionStateName(state));
  if (failure) {
    spdlog::warn("{}: {} ({})", what, name, std::string(reason));
  } else {
    spdlog::info("{}: {}{}{}", what, name, reason.empty() ? "" : " ", std::string(reason));
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SelectVersions(absl::string_view model,
                                                    const config::VersionPolicy& policy,
                                                    const std::vector<int64_t>& available) {
  if (available.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model \"", model, "\": no version directory with ", kModelFile, " found"));
  }
  switch (policy.kind) {
    case config::VersionPolicy::Kind::kAll:
      return available;
    case config::VersionPolicy::Kind::kLatest: {
      const size_t n = std::min<size_t>(available.size(), std::max(policy.num_versions, 1));
      return std::vector<int64_t>(available.end() - n, available.end());
    }
    case config::VersionPolicy::Kind::kSpecific: {
      std::vector<int64_t> missing;
      for (int64_t v : policy.versions) {
        if (!std::binary_search(available.begin(), available.end(), v)) missing.push_back(v);
      }
      if (!missing.empty()) {
        return absl::NotFoundError(absl::StrCat(
            "model \"", model, "\": version_policy names version(s) [", absl::StrJoin(missing, ","),
            "] that do not exist (found [", absl::StrJoin(available, ","), "])"));
      }
      std::set<int64_t> chosen(policy.versions.begin(), policy.versions.end());
      return std::vector<int64_t>(chosen.begin(), chosen.end());
    }
  }
  return absl::InternalError("unknown version policy");
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Create(Options options,
                                                                         ModelBackend* backend,
                                                                         Executor* executor) {
  if (backend == nullptr || executor == nullptr) {
    return absl::InvalidArgumentError("model repository needs a backend and an executor");
  }
  if (options.paths.empty()) {
    return absl::InvalidArgumentError("model repository: no repository path given");
  }
  for (const std::string& path : options.paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      return absl::NotFoundError(
          absl::StrCat("model repository \"", path, "\" is not a readable directory"));
    }
  }
  return std::unique_ptr<ModelRepository>(
      new ModelRepository(std::move(options), backend, executor));
}

ModelRepository::ModelRepository(Options options, ModelBackend* backend, Executor* executor)
    : options_(std::move(options)),
      backend_(backend),
      executor_(executor),
      serving_(std::make_shared<const ServingMap>()) {}

std::vector<std::string> ModelRepository::ScanModelNames() const {
  std::set<std::string> names;
  for (const std::string& path : options_.paths) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_directory(ec) && !name.empty() && name[0] != '.') names.insert(name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::string> ModelRepository::FindModelDir(const std::string& name) const {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid model name ", QuotedName(name)));
  }
  std::vector<std::string> found;
  for (const std::string& path : options_.paths) {
    std::error_code ec;
    const fs::path dir = fs::path(path) / name;
    if (fs::is_directory(dir, ec)) found.push_back(dir.string());
  }
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("model ", QuotedName(name),
                                            " is not in the repository (",
                                            absl::StrJoin(options_.paths, ", "), ")"));
  }
  if (found.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model \"", name, "\" is in more than one repository: ", absl::StrJoin(found, ", ")));
  }
  return found[0];
}

int ModelRepository::StreamsFor(const config::ModelSettings& settings) const {
  if (settings.instance_groups.empty()) return std::max(options_.default_streams, 1);
  int streams = 0;
  for (const config::InstanceGroup& g : settings.instance_groups) streams += g.count;
  return std::max(streams, 1);
}

void ModelRepository::Publish(std::shared_ptr<const ServingMap> map) {
  {
    std::lock_guard<std::mutex> lock(serving_mu_);
    serving_.swap(map);
  }
  // `map` now holds the previous map; it is freed here, outside the lock.
}

absl::Status ModelRepository::Enqueue(const std::string& model, absl::AnyInvocable<void() &&> op,
                                      bool bounded) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bounded && pending_ops_ >= options_.max_pending_operations) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model ", QuotedName(model), ": ", pending_ops_,
          " load / unload operations are pending, the most the server queues; try again later"));
    }
    ++pending_ops_;
    OpQueue& q = ops_[model];
    if (q.busy) {
      q.waiting.push_back(std::move(op));
      return absl::OkStatus();
    }
    q.busy = true;
  }
  executor_->Schedule(std::move(op));
  return absl::OkStatus();
}

void ModelRepository::OpFinished(const std::string& model) {
  absl::AnyInvocable<void() &&> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_ops_;
    auto it = ops_.find(model);
    if (it == ops_.end()) return;
    OpQueue& q = it->second;
    if (q.waiting.empty()) {
      ops_.erase(it);  // idle models keep no queue: the map holds only models being worked on
      return;
    }
    next = std::move(q.waiting.front());
    q.waiting.pop_front();
  }
  executor_->Schedule(std::move(next));
}

void ModelRepository::LoadAtStartup(const std::vector<std::string>& load_models, Callback done) {
  std::vector<std::string> names;
  if (options_.control_mode == config::ControlMode::kPoll) {
    std::lock_guard<std::mutex> lock(mu_);
    polled_ = Fingerprints();
  }
  const bool all = options_.control_mode != config::ControlMode::kExplicit ||
                   std::find(load_models.begin(), load_models.end(), "*") != load_models.end();
  if (all) {
    names = ScanModelNames();
  } else {
    std::set<std::string> unique(load_models.begin(), load_models.end());
    names.assign(unique.begin(), unique.end());
  }
  if (names.empty()) {
    std::move(done)(absl::OkStatus());
    return;
  }
  auto join = std::make_shared<Join>(static_cast<int>(names.size()), std::move(done));
  for (const std::string& name : names) {
    StartLoad(
        name, {}, [join](absl::Status s) { join->Add(std::move(s)); }, LoadOrigin::kStartup);
  }
}

std::vector<std::string> ModelRepository::StartupFailures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {startup_failures_.begin(), startup_failures_.end()};
}

void ModelRepository::LoadModel(const std::string& name, LoadOverride override, Callback done) {
  if (options_.control_mode == config::ControlMode::kPoll) {
    std::move(done)(absl::FailedPreconditionError(
        absl::StrCat("cannot load model ", QuotedName(name),
                     ": explicit model load / unload is not allowed if polling is enabled")));
    return;
  }
  if (options_.control_mode == config::ControlMode::kNone) {
    std::move(done)(absl::FailedPreconditionError(absl::StrCat(
        "cannot load model ", QuotedName(name),
        ": explicit load / unload needs model control mode \"explicit\" (it is \"none\")")));
    return;
  }
  StartLoad(name, std::move(override), std::move(done));
}

void ModelRepository::UnloadModel(const std::string& name, Callback done) {
  if (options_.control_mode == config::ControlMode::kPoll) {
    std::move(done)(absl::FailedPreconditionError(
        absl::StrCat("cannot unload model ", QuotedName(name),
                     ": explicit model load / unload is not allowed if polling is enabled")));
    return;
  }
  if (options_.control_mode == config::ControlMode::kNone) {
    std::move(done)(absl::FailedPreconditionError(absl::StrCat(
        "cannot unload model ", QuotedName(name),
        ": explicit load / unload needs model control mode \"explicit\" (it is \"none\")")));
    return;
  }
  StartUnload(name, std::move(done));
}

void ModelRepository::UnloadAll(Callback done) {
  std::shared_ptr<const ServingMap> map = Snapshot();
  if (map->empty()) {
    std::move(done)(absl::OkStatus());
    return;
  }
  auto join = std::make_shared<Join>(static_cast<int>(map->size()), std::move(done));
  for (const auto& [name, model] : *map) {
    StartUnload(
        name, [join](absl::Status s) { join->Add(std::move(s)); }, /*bounded=*/false);
  }
}

void ModelRepository::StartLoad(const std::string& name, LoadOverride override, Callback done,
                                LoadOrigin origin) {
  const bool at_startup = origin == LoadOrigin::kStartup;
  // Records the outcome for strict readiness, then answers.
  auto finish = [this, name, at_startup](Callback callback, absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status.ok()) {
        startup_failures_.erase(name);
      } else if (at_startup) {
        startup_failures_.insert(name);
      }
    }
    if (options_.on_load_finished) options_.on_load_finished();
    std::move(callback)(std::move(status));
  };
  // A name that is not a model of the repository is answered at once and remembered nowhere
  // (no record, no queue, no metric label), so that clients cannot grow the server's state
  // with made-up names. A model known before (e.g. since removed from disk) goes through. A
  // startup load of such a name is a startup failure (the operator asked for it). An upload
  // brings its own directory; the names of models that exist only as uploads are bounded over
  // the server's life (their metric series stay).
  if (absl::StatusOr<std::string> dir = FindModelDir(name); !dir.ok()) {
    const bool upload =
        !override.files.empty() && dir.status().code() == absl::StatusCode::kNotFound;
    absl::Status refused = dir.status();
    bool known;
    {
      std::lock_guard<std::mutex> lock(mu_);
      known = records_.contains(name);
      if (upload && options_.uploads == nullptr) {
        refused = absl::FailedPreconditionError("model upload is turned off");
      } else if (upload) {
        const size_t cap = 4 * static_cast<size_t>(options_.uploads->max_uploads());
        if (upload_names_.contains(name) || upload_names_.size() < cap) {
          upload_names_.insert(name);
          refused = absl::OkStatus();
        } else {
          refused = absl::ResourceExhaustedError(absl::StrCat(
              "model ", QuotedName(name), " is not in the repository, and ", cap,
              " other names were uploaded already (4 x limits.max_uploaded_models); upload "
              "under one of those names"));
        }
      }
    }
    if (!known && !refused.ok()) {
      finish(std::move(done), std::move(refused));
      return;
    }
  }
  auto shared_done = std::make_shared<Callback>(std::move(done));
  auto shared_override = std::make_shared<LoadOverride>(std::move(override));
  absl::Status queued = Enqueue(
      name,
      [this, name, shared_done, shared_override, finish]() mutable {
        absl::Status status = LoadNow(name, *shared_override);
        finish(std::move(*shared_done), std::move(status));
        OpFinished(name);
      },
      /*bounded=*/origin == LoadOrigin::kClient);
  if (!queued.ok()) finish(std::move(*shared_done), std::move(queued));
}

void ModelRepository::StartUnload(const std::string& name, Callback done, bool bounded) {
  auto shared_done = std::make_shared<Callback>(std::move(done));
  absl::Status queued = Enqueue(
      name,
      [this, name, shared_done]() mutable {
        UnloadNow(name, [this, name, shared_done](absl::Status status) {
          std::move (*shared_done)(std::move(status));
          OpFinished(name);
        });
      },
      bounded);
  if (!queued.ok()) std::move (*shared_done)(std::move(queued));
}

absl::Status ModelRepository::LoadNow(const std::string& name, const LoadOverride& override) {
  // An upload that does not end up serving is removed again.
  std::string upload_dir;
  absl::Cleanup remove_upload = [&] {
    if (!upload_dir.empty()) options_.uploads->Remove(upload_dir);
  };
  // Model-level failures (not found, bad config.yaml, no version) are recorded as version 0;
  // not for a failed upload of a name the server does not know (clients choose those names).
  auto fail_model = [&](absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (override.files.empty() || records_.contains(name)) {
      records_[name][0] = Record{VersionState::kUnavailable, std::string(status.message())};
    }
    LogState(name, 0, VersionState::kUnavailable, status.message(), /*failure=*/true);
    return status;
  };
  // A failed upload of a name that is neither in the repository nor known leaves no record.
  bool forget_on_failure = false;
  absl::StatusOr<std::string> dir;
  if (!override.files.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      forget_on_failure = !records_.contains(name);
    }
    forget_on_failure = forget_on_failure && !FindModelDir(name).ok();
    if (options_.uploads == nullptr) {
      return fail_model(absl::FailedPreconditionError("model upload is turned off"));
    }
    if (!override.config.has_value()) {
      return fail_model(absl::InvalidArgumentError("uploaded files need a config override"));
    }
    dir = options_.uploads->Write(override.files);
    if (!dir.ok()) return fail_model(dir.status());
    upload_dir = *dir;
  } else {
    dir = FindModelDir(name);
    if (!dir.ok()) return fail_model(dir.status());
  }

  absl::StatusOr<config::ParsedModelConfig> parsed =
      override.config.has_value() ? absl::StatusOr<config::ParsedModelConfig>(*override.config)
                                  : config::ReadModelConfigDir(*dir);
  if (!parsed.ok()) return fail_model(parsed.status());
  absl::StatusOr<ResolvedModel> resolved = ResolveModel(name, *dir, *parsed);
  if (!resolved.ok()) return fail_model(resolved.status());
  auto settings = std::make_shared<config::ModelSettings>(std::move(resolved->settings));
  if (absl::Status labels = ReadLabelFiles(*dir, settings.get()); !labels.ok()) {
    return fail_model(labels);
  }
  const std::vector<int64_t>* chosen = &resolved->versions;

  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& versions = records_[name];
    for (int64_t v : *chosen) {
      Record& r = versions[v];
      if (r.state != VersionState::kReady) {
        r = Record{VersionState::kLoading, ""};
        LogState(name, v, VersionState::kLoading);
      }
    }
  }

  // Load every chosen version; the model changes only if all of them load.
  std::map<int64_t, std::shared_ptr<ServedVersion>> loaded;
  absl::Status failure;
  int64_t failed_version = 0;
  for (int64_t v : *chosen) {
    LoadSpec spec;
    spec.model_name = name;
    spec.version = v;
    spec.version_dir = (fs::path(*dir) / std::to_string(v)).string();
    spec.model_path = (fs::path(spec.version_dir) / std::string(kModelFile)).string();
    spec.settings = settings.get();
    spec.streams = StreamsFor(*settings);
    spec.max_queue_length =
        settings->max_queue_size > 0 ? settings->max_queue_size : options_.max_queue_length;
    const absl::Time load_start = absl::Now();
    absl::StatusOr<std::unique_ptr<LoadedModel>> model = backend_->Load(spec);
    const absl::Duration load_time = absl::Now() - load_start;
    if (options_.metrics != nullptr) {
      options_.metrics->RecordLoad(name, std::to_string(v), load_time,
                                   model.ok() && *model != nullptr);
    }
    if (model.ok() && *model != nullptr) {
      spdlog::info("model \"{}\" version {}: loaded in {}", name, v,
                   absl::FormatDuration(load_time));
    }
    if (!model.ok()) {
      failure = absl::Status(model.status().code(),
                             absl::StrCat("model \"", name, "\" version ", v,
                                          ": load failed: ", model.status().message()));
      failed_version = v;
      break;
    }
    if (*model == nullptr) {
      failure = absl::InternalError(
          absl::StrCat("model \"", name, "\" version ", v, ": backend returned no model"));
      failed_version = v;
      break;
    }
    loaded[v] = std::make_shared<ServedVersion>(name, v, settings, *std::move(model));
  }

  std::vector<std::shared_ptr<ServedVersion>> retired;
  std::string old_upload;  // replaced by this load: removed once its versions are gone
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& versions = records_[name];
    std::shared_ptr<const ServingMap> current = Snapshot();
    auto serving = current->find(name);
    auto is_serving = [&](int64_t v) {
      return serving != current->end() && serving->second.versions.contains(v);
    };
    if (!failure.ok() && forget_on_failure) {
      records_.erase(name);
      LogState(name, failed_version, VersionState::kUnavailable, failure.message(),
               /*failure=*/true);
    } else if (!failure.ok()) {
      for (int64_t v : *chosen) {
        if (is_serving(v)) continue;  // the old instance keeps serving, still READY
        versions[v] =
            Record{VersionState::kUnavailable,
                   v == failed_version ? std::string(failure.message())
                                       : absl::StrCat("not loaded: version ", failed_version,
                                                      " of the same model failed to load")};
        LogState(name, v, VersionState::kUnavailable, versions[v].reason, /*failure=*/true);
      }
    } else {
      auto next = std::make_shared<ServingMap>(*current);
      if (serving != current->end()) {
        for (const auto& [v, old] : serving->second.versions) {
          retired.push_back(old);
          if (!loaded.contains(v)) {
            versions[v] = Record{VersionState::kUnloading, ""};
            LogState(name, v, VersionState::kUnloading);
          }
        }
      }
      (*next)[name] = ServedModel{settings, loaded};
      for (const auto& [v, unused] : loaded) {
        versions[v] = Record{VersionState::kReady, ""};
        LogState(name, v, VersionState::kReady);
      }
      versions.erase(0);
      Publish(std::move(next));
      if (auto it = upload_dirs_.find(name); it != upload_dirs_.end()) {
        old_upload = it->second;
        upload_dirs_.erase(it);
      }
      if (!upload_dir.empty()) upload_dirs_[name] = std::exchange(upload_dir, "");
    }
  }
  // The backend read the old files when it loaded them (LoadSpec): they can go now.
  if (!old_upload.empty()) options_.uploads->Remove(old_upload);
  if (!retired.empty()) {
    Retire(std::move(retired), "unloaded: not selected by the version policy any more", [] {});
  }
  return failure;
}

void ModelRepository::UnloadNow(const std::string& name, Callback done) {
  std::vector<std::shared_ptr<ServedVersion>> retired;
  bool loaded = true;
  bool known = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<const ServingMap> current = Snapshot();
    auto it = current->find(name);
    if (it == current->end()) {
      loaded = false;
      known = records_.contains(name) || FindModelDir(name).ok();
    } else {
      auto next = std::make_shared<ServingMap>(*current);
      next->erase(name);
      for (const auto& [v, version] : it->second.versions) {
        retired.push_back(version);
        records_[name][v] = Record{VersionState::kUnloading, ""};
        LogState(name, v, VersionState::kUnloading);
      }
      Publish(std::move(next));
    }
  }
  if (!loaded) {
    // Unloading a model that is not loaded succeeds, as in Triton; an unknown name does not.
    std::move(done)(known ? absl::OkStatus()
                          : absl::NotFoundError(absl::StrCat("cannot unload model ",
                                                             QuotedName(name), ": no such model")));
    return;
  }
  auto shared_done = std::make_shared<Callback>(std::move(done));
  Retire(std::move(retired), kUnloadedReason, [this, name, shared_done] {
    ForgetUpload(name);
    std::move (*shared_done)(absl::OkStatus());
  });
}

void ModelRepository::ForgetUpload(const std::string& name) {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = upload_dirs_.find(name);
    if (it == upload_dirs_.end()) return;
    if (Snapshot()->contains(name)) return;  // loaded again since: its new files serve
    dir = it->second;
    upload_dirs_.erase(it);
    // A model that exists only as an upload leaves no record behind (bounded state).
    if (!FindModelDir(name).ok()) records_.erase(name);
  }
  options_.uploads->Remove(dir);
}

void ModelRepository::Retire(std::vector<std::shared_ptr<ServedVersion>> retired,
                             absl::string_view reason, absl::AnyInvocable<void() &&> all_done) {
  struct Pending {
    std::mutex mu;
    size_t left ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void() &&> done;
  };
  auto pending = std::make_shared<Pending>();
  {
    std::lock_guard<std::mutex> lock(pending->mu);
    pending->left = retired.size();
  }
  pending->done = std::move(all_done);
  const std::string why(reason);
  for (std::shared_ptr<ServedVersion>& version : retired) {
    // The drain callback runs on the thread of the last request; finish on the executor.
    version->Drain([this, version, pending, why] {
      executor_->Schedule([this, version, pending, why] {
        version->DestroyModel();
        {
          std::lock_guard<std::mutex> lock(mu_);
          std::shared_ptr<const ServingMap> current = Snapshot();
          auto model = current->find(version->model_name());
          const bool serving_again =
              model != current->end() && model->second.versions.contains(version->version());
          // Only a record still unloading changes; one forgotten meanwhile (an unloaded upload,
          // ForgetUpload) is not made again, or the name would read as failed, not unknown.
          Record* r = nullptr;
          if (auto m = records_.find(version->model_name()); m != records_.end()) {
            if (auto v = m->second.find(version->version()); v != m->second.end()) r = &v->second;
          }
          if (!serving_again && r != nullptr && r->state == VersionState::kUnloading) {
            *r = Record{VersionState::kUnavailable, why};
            LogState(version->model_name(), version->version(), VersionState::kUnavailable, why);
          }
        }
        bool last = false;
        {
          std::lock_guard<std::mutex> lock(pending->mu);
          last = --pending->left == 0;
        }
        if (last) std::move(pending->done)();
      });
    });
  }
}

absl::StatusOr<ResolvedModel> ModelRepository::ResolveModel(
    const std::string& name, const std::string& model_dir,
    const config::ParsedModelConfig& parsed) const {
  ResolvedModel out;
  ASSIGN_OR_RETURN(const config::VersionPolicy policy, config::VersionPolicyFromConfig(parsed));
  ASSIGN_OR_RETURN(out.versions, SelectVersions(name, policy, ListVersions(model_dir)));
  // The config is validated once, with the graph when there is something to complete (so that
  // checks that depend on a completed max_batch_size, e.g. capture.buckets, see it).
  const inference::ModelConfig& c = parsed.config;
  const bool complete = c.input_size() > 0 && c.output_size() > 0 &&
                        (c.max_batch_size() > 0 || parsed.locations.Has("max_batch_size"));
  absl::StatusOr<config::GraphTensors> graph = absl::NotFoundError("not read");
  if (options_.auto_complete.enabled && !complete) {
    const std::string model_path =
        (fs::path(model_dir) / std::to_string(out.versions.back()) / std::string(kModelFile))
            .string();
    // A file the backend cannot read fails its version's load next, with the backend's reason
    // recorded on that version; nothing to complete from until then.
    graph = backend_->ReadGraphTensors(model_path);
  }
  ASSIGN_OR_RETURN(out.settings,
                   config::ModelSettingsFromConfig(parsed, name, graph.ok() ? &*graph : nullptr,
                                                   options_.auto_complete));
  return out;
}

std::map<std::string, std::string> ModelRepository::Fingerprints() const {
  // Bounded: a repository with more entries than this in one directory is compared by the
  // first ones only.
  constexpr int kMaxEntries = 4096;
  auto describe = [](const fs::directory_entry& e) {
    std::error_code ec;
    const auto size = e.is_regular_file(ec) ? e.file_size(ec) : 0;
    const auto mtime = e.last_write_time(ec).time_since_epoch().count();
    return absl::StrCat(e.path().filename().string(), ":", size, ":", mtime, ";");
  };
  std::map<std::string, std::string> out;
  for (const std::string& name : ScanModelNames()) {
    absl::StatusOr<std::string> dir = FindModelDir(name);
    if (!dir.ok()) continue;
    std::vector<std::string> parts;
    std::error_code ec;
    int entries = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(*dir, ec)) {
      if (++entries > kMaxEntries) break;
      const std::string file = e.path().filename().string();
      int64_t version = 0;
      if (file == config::kModelConfigText || file == config::kModelConfigYaml) {
        parts.push_back(describe(e));
      } else if (e.is_directory(ec) && ParseVersionDir(file, &version) &&
                 fs::is_regular_file(e.path() / std::string(kModelFile), ec)) {
        std::string version_part = absl::StrCat("[", file, "]");
        int files = 0;
        for (const fs::directory_entry& f : fs::directory_iterator(e.path(), ec)) {
          if (++files > kMaxEntries) break;
          absl::StrAppend(&version_part, describe(f));
        }
        parts.push_back(std::move(version_part));
      }
    }
    std::sort(parts.begin(), parts.end());
    // A directory without a version is as good as gone: Poll unloads the model.
    const bool has_version =
        std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p[0] == '['; });
    if (has_version) out[name] = absl::StrJoin(parts, "");
  }
  return out;
}

void ModelRepository::Poll(Callback done) {
  if (options_.control_mode != config::ControlMode::kPoll) {
    std::move(done)(
        absl::FailedPreconditionError("repository poll needs model control mode \"poll\""));
    return;
  }
  const std::map<std::string, std::string> now = Fingerprints();
  std::vector<std::string> loads;
  std::vector<std::string> unloads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, print] : now) {
      auto it = polled_.find(name);
      if (it == polled_.end() || it->second != print) loads.push_back(name);
    }
    for (const auto& [name, print] : polled_) {
      if (!now.contains(name)) unloads.push_back(name);
    }
    polled_ = now;
  }
  if (loads.empty() && unloads.empty()) {
    std::move(done)(absl::OkStatus());
    return;
  }
  for (const std::string& name : loads) spdlog::info("poll: model \"{}\" is new or changed", name);
  for (const std::string& name : unloads) spdlog::info("poll: model \"{}\" is gone", name);
  auto join =
      std::make_shared<Join>(static_cast<int>(loads.size() + unloads.size()), std::move(done));
  for (const std::string& name : loads) {
    StartLoad(
        name, LoadOverride{}, [join](absl::Status status) { join->Add(std::move(status)); },
        LoadOrigin::kPoll);
  }
  for (const std::string& name : unloads) {
    StartUnload(
        name, [join](absl::Status status) { join->Add(std::move(status)); }, /*bounded=*/false);
  }
}

absl::StatusOr<VersionLease> ModelRepository::Acquire(absl::string_view model,
                                                      absl::string_view version) const {
  int64_t wanted = 0;
  if (!version.empty() && (!absl::SimpleAtoi(version, &wanted) || wanted <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("model ", QuotedName(model), ": version ",
                                                   QuotedName(version),
                                                   " is not a positive integer"));
  }
  // Two tries: a version that started draining after we read the map may have a successor in
  // the map published since (a reload).
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::shared_ptr<const ServingMap> map = Snapshot();
    auto it = map->find(model);
    if (it == map->end() || it->second.versions.empty()) return NotServing(model, 0);
    const auto& versions = it->second.versions;
    auto v = wanted == 0 ? std::prev(versions.end()) : versions.find(wanted);
    if (v == versions.end()) return NotServing(model, wanted);
    if (v->second->TryAcquire()) return VersionLease(v->second);
  }
  return absl::UnavailableError(absl::StrCat(
      "model ", QuotedName(model), " version ",
      wanted == 0 ? std::string("(latest)") : std::to_string(wanted), " is being unloaded"));
}

absl::Status ModelRepository::NotServing(absl::string_view model, int64_t version) const {
  // The error path only: the records tell a known version that is loading, failed or going
  // away (UNAVAILABLE) from an unknown one or a model that was unloaded or never loaded
  // (NOT_FOUND).
  std::lock_guard<std::mutex> lock(mu_);
  auto m = records_.find(std::string(model));
  if (version != 0) {
    if (m != records_.end()) {
      if (auto r = m->second.find(version); r != m->second.end()) {
        return absl::UnavailableError(absl::StrCat(
            "model ", QuotedName(model), " version ", version, " is not ready (",
            VersionStateName(r->second.state),
            r->second.reason.empty() ? "" : absl::StrCat(": ", r->second.reason), ")"));
      }
    }
    return absl::NotFoundError(
        absl::StrCat("model ", QuotedName(model), " has no version ", version));
  }
  if (m != records_.end()) {
    for (const auto& [v, r] : m->second) {
      const bool failed =
          r.state == VersionState::kUnavailable && !absl::StartsWith(r.reason, kUnloadedReason);
      if (r.state == VersionState::kLoading || failed) {
        return absl::UnavailableError(absl::StrCat("model ", QuotedName(model), " is not ready (",
                                                   VersionStateName(r.state),
                                                   r.reason.empty() ? "" : ": ", r.reason, ")"));
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("model ", QuotedName(model), " is not loaded"));
}

std::vector<IndexEntry> ModelRepository::Index(bool ready_only) const {
  const std::vector<std::string> names = ScanModelNames();
  std::vector<IndexEntry> out;
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> all(names.begin(), names.end());
  for (const auto& [name, unused] : records_) all.insert(name);
  for (const std::string& name : all) {
    auto it = records_.find(name);
    if (it == records_.end() || it->second.empty()) {
      if (!ready_only) out.push_back(IndexEntry{name, "", "", ""});
      continue;
    }
    for (const auto& [v, record] : it->second) {
      if (ready_only && record.state != VersionState::kReady) continue;
      out.push_back(IndexEntry{name, v == 0 ? "" : std::to_string(v),
                               std::string(VersionStateName(record.state)), record.reason});
    }
  }
  return out;
}

}  // namespace reprise::server
