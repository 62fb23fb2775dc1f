// Poll mode (Triton's --model-control-mode poll), stepped by hand: each Poll is one scan, and the
// loads and unloads it starts run only when the test runs the executor.
#include <filesystem>
#include <fstream>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_repository.h"
#include "tests/server/fake_backend.h"
#include "tests/server/temp_repo.h"

namespace reprise::server {
namespace {

using testing::FakeBackend;
using ::testing::HasSubstr;
using testing::ManualExecutor;
using testing::Outcome;
using testing::TempRepo;

class PollTest : public ::testing::Test {
 protected:
  void Start(config::ControlMode mode = config::ControlMode::kPoll) {
    ModelRepository::Options options;
    options.paths = {repo_.path()};
    options.control_mode = mode;
    absl::StatusOr<std::unique_ptr<ModelRepository>> r =
        ModelRepository::Create(options, &backend_, &executor_);
    ASSERT_TRUE(r.ok()) << r.status();
    repository_ = *std::move(r);
    Outcome started;
    repository_->LoadAtStartup({}, started.Callback());
    executor_.RunAll();
    ASSERT_TRUE(started.status.has_value());
  }
  // One poll, then every operation it started; the poll's outcome.
  absl::Status PollAndRun() {
    Outcome polled;
    repository_->Poll(polled.Callback());
    executor_.RunAll();
    EXPECT_TRUE(polled.status.has_value());
    return polled.status.value_or(absl::InternalError("poll did not finish"));
  }
  std::string State(const std::string& model, const std::string& version) const {
    for (const IndexEntry& e : repository_->Index(false)) {
      if (e.name == model && e.version == version) return e.state;
    }
    return "<absent>";
  }
  int64_t Serving(const std::string& model) const {
    absl::StatusOr<VersionLease> lease = repository_->Acquire(model, "");
    return lease.ok() ? (*lease)->version() : -1;
  }
  void Remove(const std::string& relative) {
    std::filesystem::remove_all(std::filesystem::path(repo_.path()) / relative);
  }

  TempRepo repo_;
  FakeBackend backend_;
  ManualExecutor executor_;
  std::unique_ptr<ModelRepository> repository_;
};

TEST_F(PollTest, NothingChangedStartsNothing) {
  repo_.AddVersion("add", 1);
  Start();
  EXPECT_EQ(Serving("add"), 1);
  const int loads = backend_.loads();
  Outcome polled;
  repository_->Poll(polled.Callback());
  ASSERT_TRUE(polled.status.has_value());  // answered at once: nothing to do
  EXPECT_TRUE(polled.status->ok());
  EXPECT_EQ(executor_.pending(), 0u);
  EXPECT_EQ(backend_.loads(), loads);
}

TEST_F(PollTest, NewVersionIsLoadedAndTheOldOneRetired) {
  repo_.AddVersion("add", 1);
  Start();
  repo_.AddVersion("add", 2);
  EXPECT_EQ(Serving("add"), 1);  // nothing happens between polls
  ASSERT_TRUE(PollAndRun().ok());
  EXPECT_EQ(Serving("add"), 2);
  EXPECT_EQ(State("add", "2"), "READY");
  EXPECT_EQ(State("add", "1"), "UNAVAILABLE");  // latest 1: version 1 retired
  EXPECT_EQ(backend_.live(), 1);
}

TEST_F(PollTest, RemovedVersionDrainsBeforeItGoes) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("add", 2);
  repo_.WriteConfig("add", "version_policy: {all: {}}\n");
  Start();
  EXPECT_EQ(State("add", "1"), "READY");
  EXPECT_EQ(State("add", "2"), "READY");
  // A request holds version 2 while its directory is removed.
  absl::StatusOr<VersionLease> held = repository_->Acquire("add", "2");
  ASSERT_TRUE(held.ok()) << held.status();
  Remove("add/2");
  ASSERT_TRUE(PollAndRun().ok());
  EXPECT_EQ(Serving("add"), 1);
  EXPECT_EQ(State("add", "2"), "UNLOADING");  // still draining: the request keeps its model
  EXPECT_EQ((*held)->version(), 2);
  EXPECT_EQ(repository_->Acquire("add", "2").status().code(), absl::StatusCode::kUnavailable);
  held = absl::CancelledError("released");  // the request finishes
  executor_.RunAll();
  EXPECT_EQ(State("add", "2"), "UNAVAILABLE");
  EXPECT_EQ(backend_.use_after_destroy(), 0);
}

TEST_F(PollTest, NewModelLoadsAndRemovedModelUnloads) {
  repo_.AddVersion("add", 1);
  Start();
  repo_.AddVersion("echo", 1);
  ASSERT_TRUE(PollAndRun().ok());
  EXPECT_EQ(Serving("echo"), 1);
  Remove("echo");
  ASSERT_TRUE(PollAndRun().ok());
  EXPECT_EQ(repository_->Acquire("echo", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Serving("add"), 1);  // untouched
}

TEST_F(PollTest, ChangedConfigReloadsAndABadOneKeepsServing) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("add", 2);
  Start();
  EXPECT_EQ(Serving("add"), 2);
  {
    std::ofstream(std::filesystem::path(repo_.path()) / "add" / "config.pbtxt")
        << "version_policy { specific { versions: [1] } }\n";
  }
  ASSERT_TRUE(PollAndRun().ok());
  EXPECT_EQ(Serving("add"), 1);
  {
    std::ofstream(std::filesystem::path(repo_.path()) / "add" / "config.pbtxt")
        << "version_policy { specific { versions: [1] } }\nsequence_batching { }\n";
  }
  absl::Status bad = PollAndRun();
  EXPECT_THAT(bad.message(), HasSubstr("config.pbtxt line 2: field \"sequence_batching\""));
  EXPECT_EQ(Serving("add"), 1);  // the failed reload left version 1 serving
}

TEST_F(PollTest, ExplicitLoadsAreRefusedAndPollNeedsPollMode) {
  repo_.AddVersion("add", 1);
  Start();
  Outcome load;
  repository_->LoadModel("add", load.Callback());
  ASSERT_TRUE(load.status.has_value());
  EXPECT_EQ(load.status->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(load.status->message(), HasSubstr("not allowed if polling is enabled"));

  TempRepo other;
  other.AddVersion("add", 1);
  ModelRepository::Options options;
  options.paths = {other.path()};
  options.control_mode = config::ControlMode::kExplicit;
  auto explicit_repo = ModelRepository::Create(options, &backend_, &executor_);
  ASSERT_TRUE(explicit_repo.ok());
  Outcome poll;
  (*explicit_repo)->Poll(poll.Callback());
  ASSERT_TRUE(poll.status.has_value());
  EXPECT_EQ(poll.status->code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace reprise::server
