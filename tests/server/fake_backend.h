// Test doubles for the server: a fake backend with scripted models and a manual executor.
#ifndef REPRISE_TESTS_SERVER_FAKE_BACKEND_H_
#define REPRISE_TESTS_SERVER_FAKE_BACKEND_H_

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <condition_variable>
#include <mutex>
#include "absl/strings/str_cat.h"
#include "server/executor.h"
#include "server/model_backend.h"

namespace reprise::server::testing {

/// Runs scheduled tasks only when the test says so (RunAll), on the test's thread.
class ManualExecutor final : public Executor {
 public:
  void Schedule(absl::AnyInvocable<void() &&> task) override {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  /// Runs tasks (including ones they schedule) until none is left; returns how many ran.
  int RunAll() {
    int ran = 0;
    while (true) {
      absl::AnyInvocable<void() &&> task;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (tasks_.empty()) return ran;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      std::move(task)();
      ++ran;
    }
  }
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.size();
  }

 private:
  std::mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
};

/// Collects the status a repository callback (ModelRepository::Callback) is called with.
struct Outcome {
  std::optional<absl::Status> status;
  absl::AnyInvocable<void(absl::Status) &&> Callback() {
    return [this](absl::Status s) { status = std::move(s); };
  }
};

/// Holds inferences until released; lets a test wait (without sleeping) until N are inside.
class InferBlocker {
 public:
  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return released_; });
  }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this, n] { return entered_ >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

/// Models:
///  - "add" (max_batch_size 8 in its config): inputs a, b FP32 [-1,4]; outputs sum = a+b,
///    diff = a-b.
///  - "echo": input text BYTES [-1]; output text_out BYTES = text; flag BOOL [-1] -> flag_out.
///  - "blocking": like "add", but each inference waits on blocker() first.
/// Loads of (model, version) put in fail_ fail. Live instances are counted.
class FakeBackend final : public ModelBackend {
 public:
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const LoadSpec& spec) override;

  void FailVersion(const std::string& model, int64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_.insert({model, version});
  }
  void ClearFailures() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_.clear();
  }
  int live() const { return live_.load(); }
  int loads() const { return loads_.load(); }
  /// Inferences that ran on an instance after it was destroyed (must stay 0).
  int use_after_destroy() const { return use_after_destroy_.load(); }
  InferBlocker& blocker() { return blocker_; }

  // Used by the fake models.
  std::atomic<int> live_{0};
  std::atomic<int> loads_{0};
  std::atomic<int> use_after_destroy_{0};

 private:
  std::mutex mu_;
  std::set<std::pair<std::string, int64_t>> fail_ ABSL_GUARDED_BY(mu_);
  InferBlocker blocker_;
};

namespace internal {

using runtime::DataType;

class FakeModel final : public LoadedModel {
 public:
  FakeModel(FakeBackend* backend, std::string kind, int64_t version)
      : backend_(backend), kind_(std::move(kind)), version_(version) {
    backend_->live_.fetch_add(1);
    if (kind_ == "echo") {
      signature_.inputs = {{"text", DataType::kString, {-1}}, {"flag", DataType::kBool, {-1}}};
      signature_.outputs = {{"text_out", DataType::kString, {-1}},
                            {"flag_out", DataType::kBool, {-1}}};
    } else {
      signature_.inputs = {{"a", DataType::kFloat32, {-1, 4}}, {"b", DataType::kFloat32, {-1, 4}}};
      signature_.outputs = {{"sum", DataType::kFloat32, {-1, 4}},
                            {"diff", DataType::kFloat32, {-1, 4}}};
    }
  }
  ~FakeModel() override {
    alive_.store(false);
    backend_->live_.fetch_sub(1);
  }

  const ModelSignature& signature() const override { return signature_; }

  // Runs on the calling thread (a "blocking" model holds it until the blocker opens).
  void InferAsync(std::span<const InputTensor> inputs, std::span<const std::string> outputs,
                  const InferOptions& options, InferDone done) override {
    (void)options;  // the fake has no queue: nothing to schedule
    std::move(done)(Compute(inputs, outputs), InferTimings{});  // zero timings are valid
  }

 private:
  absl::StatusOr<std::vector<OutputTensor>> Compute(std::span<const InputTensor> inputs,
                                                    std::span<const std::string> outputs) {
    if (!alive_.load()) backend_->use_after_destroy_.fetch_add(1);
    if (kind_ == "blocking") backend_->blocker().Enter();
    std::vector<OutputTensor> out;
    for (const std::string& name : outputs) {
      OutputTensor t;
      t.name = name;
      if (kind_ == "echo") {
        const InputTensor& in = name == "text_out" ? inputs[0] : inputs[1];
        t.dtype = in.dtype;
        t.shape = in.shape;
        t.data = std::string(in.data);
      } else {
        const InputTensor& a = inputs[0];
        const InputTensor& b = inputs[1];
        const size_t n = a.data.size() / sizeof(float);
        std::vector<float> r(n);
        for (size_t i = 0; i < n; ++i) {
          float x = 0, y = 0;
          std::memcpy(&x, a.data.data() + i * 4, 4);
          std::memcpy(&y, b.data.data() + i * 4, 4);
          r[i] = name == "sum" ? x + y : x - y;
        }
        t.dtype = DataType::kFloat32;
        t.shape = a.shape;
        t.data.assign(reinterpret_cast<const char*>(r.data()), n * sizeof(float));
      }
      out.push_back(std::move(t));
    }
    return out;
  }

 public:
  std::vector<RuntimeInstanceInfo> ListRuntimeInstances() const override {
    RuntimeInstanceInfo ri;
    ri.stream = 0;
    ri.shape_signature = "a:[1,4];b:[1,4]";
    ri.bucket = 1;
    ri.state = "CAPTURED";
    ri.captures = 1;
    ri.replays = static_cast<uint64_t>(version_);
    return {ri};
  }

  absl::StatusOr<std::string> DumpRuntimeInstance(int stream, absl::string_view shape_signature,
                                                  bool verbose) const override {
    if (stream != 0 || shape_signature != "a:[1,4];b:[1,4]") {
      return LoadedModel::DumpRuntimeInstance(stream, shape_signature, verbose);
    }
    return absl::StrCat("{\"stream\":0,\"verbose\":", verbose ? "true" : "false", "}");
  }

 private:
  FakeBackend* const backend_;
  const std::string kind_;
  const int64_t version_;
  ModelSignature signature_;
  std::atomic<bool> alive_{true};
};

}  // namespace internal

inline absl::StatusOr<std::unique_ptr<LoadedModel>> FakeBackend::Load(const LoadSpec& spec) {
  loads_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_.contains({spec.model_name, spec.version})) {
      return absl::InvalidArgumentError(absl::StrCat("fake: broken model file ", spec.model_path));
    }
  }
  const std::string kind = spec.model_name.starts_with("echo")       ? "echo"
                           : spec.model_name.starts_with("blocking") ? "blocking"
                                                                     : "add";
  return std::make_unique<internal::FakeModel>(this, kind, spec.version);
}

}  // namespace reprise::server::testing

#endif  // REPRISE_TESTS_SERVER_FAKE_BACKEND_H_
