#include "server/model_repository.h"

#include "server/notification.h"

#include <optional>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fake_backend.h"
#include "tests/server/temp_repo.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;
using testing::FakeBackend;
using ::testing::HasSubstr;
using testing::ManualExecutor;
using testing::Outcome;
using testing::TempRepo;

std::string StateOf(const ModelRepository& repo, const std::string& model,
                    const std::string& version) {
  for (const IndexEntry& e : repo.Index(false)) {
    if (e.name == model && e.version == version) return e.state;
  }
  return "<absent>";
}

std::string ReasonOf(const ModelRepository& repo, const std::string& model,
                     const std::string& version) {
  for (const IndexEntry& e : repo.Index(false)) {
    if (e.name == model && e.version == version) return e.reason;
  }
  return "<absent>";
}

class ModelRepositoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelRepository> Make(config::ControlMode mode) {
    ModelRepository::Options options;
    options.paths = {repo_.path()};
    options.control_mode = mode;
    absl::StatusOr<std::unique_ptr<ModelRepository>> r =
        ModelRepository::Create(options, &backend_, &executor_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }

  TempRepo repo_;
  FakeBackend backend_;
  ManualExecutor executor_;
};

TEST(SelectVersionsTest, Policies) {
  config::VersionPolicy latest;
  latest.num_versions = 2;
  EXPECT_THAT(*SelectVersions("m", latest, {1, 3, 7}), ElementsAre(3, 7));
  latest.num_versions = 5;
  EXPECT_THAT(*SelectVersions("m", latest, {1, 3}), ElementsAre(1, 3));
  config::VersionPolicy all;
  all.kind = config::VersionPolicy::Kind::kAll;
  EXPECT_THAT(*SelectVersions("m", all, {2, 4}), ElementsAre(2, 4));
  config::VersionPolicy specific;
  specific.kind = config::VersionPolicy::Kind::kSpecific;
  specific.versions = {4, 2};
  EXPECT_THAT(*SelectVersions("m", specific, {1, 2, 4}), ElementsAre(2, 4));
  specific.versions = {9};
  absl::StatusOr<std::vector<int64_t>> missing = SelectVersions("m", specific, {1, 2});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("[9]"));
  EXPECT_THAT(missing.status().message(), HasSubstr("found [1,2]"));
  EXPECT_EQ(SelectVersions("m", latest, {}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, CreateRejectsMissingDirectory) {
  ModelRepository::Options options;
  options.paths = {repo_.path() + "/nope"};
  absl::StatusOr<std::unique_ptr<ModelRepository>> r =
      ModelRepository::Create(options, &backend_, &executor_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/nope"));
}

TEST_F(ModelRepositoryTest, ModeNoneLoadsEverythingAsynchronously) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("add", 2);
  repo_.AddVersion("echo", 1);
  auto repo = Make(config::ControlMode::kNone);
  Outcome started;
  repo->LoadAtStartup({}, started.Callback());
  EXPECT_FALSE(started.status.has_value());  // nothing ran yet
  EXPECT_EQ(repo->Acquire("add", "").status().code(), absl::StatusCode::kNotFound);
  executor_.RunAll();
  ASSERT_TRUE(started.status.has_value());
  EXPECT_TRUE(started.status->ok()) << *started.status;
  // Default policy: latest 1.
  EXPECT_EQ(StateOf(*repo, "add", "2"), "READY");
  EXPECT_EQ(StateOf(*repo, "add", "1"), "<absent>");
  EXPECT_EQ(StateOf(*repo, "echo", "1"), "READY");
  absl::StatusOr<VersionLease> lease = repo->Acquire("add", "");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)->version(), 2);
  EXPECT_EQ(backend_.live(), 2);
}

TEST_F(ModelRepositoryTest, StatesGoThroughLoading) {
  repo_.AddVersion("add", 1);
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome loaded;
  repo->LoadModel("add", loaded.Callback());
  EXPECT_EQ(StateOf(*repo, "add", ""), "");  // known in the repository, never loaded
  ASSERT_EQ(executor_.pending(), 1u);
  executor_.RunAll();
  ASSERT_TRUE(loaded.status.has_value());
  EXPECT_TRUE(loaded.status->ok());
  EXPECT_EQ(StateOf(*repo, "add", "1"), "READY");
}

TEST_F(ModelRepositoryTest, ExplicitModeLoadsOnlyListedModels) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("echo", 1);
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome started;
  repo->LoadAtStartup({"echo"}, started.Callback());
  executor_.RunAll();
  ASSERT_TRUE(started.status.has_value() && started.status->ok());
  EXPECT_TRUE(repo->Acquire("echo", "1").ok());
  EXPECT_EQ(repo->Acquire("add", "").status().code(), absl::StatusCode::kNotFound);
  std::vector<IndexEntry> ready = repo->Index(true);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].name, "echo");
}

TEST_F(ModelRepositoryTest, ModeNoneRefusesLoadAndUnload) {
  repo_.AddVersion("add", 1);
  auto repo = Make(config::ControlMode::kNone);
  Outcome load, unload;
  repo->LoadModel("add", load.Callback());
  repo->UnloadModel("add", unload.Callback());
  ASSERT_TRUE(load.status.has_value() && unload.status.has_value());
  EXPECT_EQ(load.status->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(unload.status->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(load.status->message(), HasSubstr("\"add\""));
}

TEST_F(ModelRepositoryTest, VersionPolicyFromConfigYaml) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("add", 2);
  repo_.AddVersion("add", 3);
  repo_.WriteConfig("add", "version_policy: {specific: {versions: [1, 3]}}\n");
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome loaded;
  repo->LoadModel("add", loaded.Callback());
  executor_.RunAll();
  ASSERT_TRUE(loaded.status->ok()) << *loaded.status;
  EXPECT_TRUE(repo->Acquire("add", "1").ok());
  EXPECT_TRUE(repo->Acquire("add", "3").ok());
  EXPECT_EQ(repo->Acquire("add", "2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo->Acquire("add", "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryTest, BadConfigFailsWithLineAndReason) {
  repo_.AddVersion("add", 1);
  repo_.WriteConfig("add", "max_batch_size: 4\nbogus: 1\n");
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome loaded;
  repo->LoadModel("add", loaded.Callback());
  executor_.RunAll();
  ASSERT_FALSE(loaded.status->ok());
  EXPECT_THAT(loaded.status->message(), HasSubstr("line 2"));
  EXPECT_EQ(StateOf(*repo, "add", ""), "UNAVAILABLE");
  EXPECT_THAT(ReasonOf(*repo, "add", ""), HasSubstr("bogus"));
}

TEST_F(ModelRepositoryTest, UnknownModelIsNotFound) {
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome loaded, unloaded;
  repo->LoadModel("ghost", loaded.Callback());
  executor_.RunAll();
  EXPECT_EQ(loaded.status->code(), absl::StatusCode::kNotFound);
  repo->UnloadModel("nobody", unloaded.Callback());
  executor_.RunAll();
  EXPECT_EQ(unloaded.status->code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, FailedReloadKeepsServingPreviousVersion) {
  repo_.AddVersion("add", 1);
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome first;
  repo->LoadModel("add", first.Callback());
  executor_.RunAll();
  ASSERT_TRUE(first.status->ok());

  repo_.AddVersion("add", 2);
  backend_.FailVersion("add", 2);
  Outcome second;
  repo->LoadModel("add", second.Callback());
  executor_.RunAll();
  ASSERT_FALSE(second.status->ok());
  EXPECT_THAT(second.status->message(), HasSubstr("model \"add\" version 2"));
  EXPECT_THAT(second.status->message(), HasSubstr("broken model file"));
  absl::StatusOr<VersionLease> lease = repo->Acquire("add", "");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)->version(), 1);
  EXPECT_EQ(StateOf(*repo, "add", "1"), "READY");
  EXPECT_EQ(StateOf(*repo, "add", "2"), "UNAVAILABLE");
  EXPECT_THAT(ReasonOf(*repo, "add", "2"), HasSubstr("broken model file"));

  // Fixed: the reload swaps to version 2 and retires version 1 once its lease is gone.
  backend_.ClearFailures();
  Outcome third;
  repo->LoadModel("add", third.Callback());
  executor_.RunAll();
  ASSERT_TRUE(third.status->ok());
  EXPECT_EQ((*repo->Acquire("add", ""))->version(), 2);
  EXPECT_EQ(StateOf(*repo, "add", "1"), "UNLOADING");
  EXPECT_EQ(backend_.live(), 2);
  lease->Reset();
  executor_.RunAll();
  EXPECT_EQ(StateOf(*repo, "add", "1"), "UNAVAILABLE");
  EXPECT_EQ(backend_.live(), 1);
}

TEST_F(ModelRepositoryTest, UnloadWaitsForInFlightRequests) {
  repo_.AddVersion("add", 1);
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome loaded;
  repo->LoadModel("add", loaded.Callback());
  executor_.RunAll();
  absl::StatusOr<VersionLease> in_flight = repo->Acquire("add", "1");
  ASSERT_TRUE(in_flight.ok());

  Outcome unloaded;
  repo->UnloadModel("add", unloaded.Callback());
  executor_.RunAll();
  EXPECT_FALSE(unloaded.status.has_value());  // still waiting for the request
  EXPECT_EQ(StateOf(*repo, "add", "1"), "UNLOADING");
  EXPECT_EQ(repo->Acquire("add", "1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_.live(), 1);
  // The request in flight still works on its version.
  EXPECT_EQ((*in_flight)->model().signature().inputs.size(), 2u);

  in_flight->Reset();
  executor_.RunAll();
  ASSERT_TRUE(unloaded.status.has_value());
  EXPECT_TRUE(unloaded.status->ok());
  EXPECT_EQ(StateOf(*repo, "add", "1"), "UNAVAILABLE");
  EXPECT_EQ(ReasonOf(*repo, "add", "1"), "unloaded");
  EXPECT_EQ(backend_.live(), 0);
}

TEST_F(ModelRepositoryTest, OperationsOnOneModelRunInOrder) {
  repo_.AddVersion("add", 1);
  auto repo = Make(config::ControlMode::kExplicit);
  Outcome load, unload, reload;
  repo->LoadModel("add", load.Callback());
  repo->UnloadModel("add", unload.Callback());
  repo->LoadModel("add", reload.Callback());
  EXPECT_EQ(executor_.pending(), 1u);  // the others wait their turn
  executor_.RunAll();
  ASSERT_TRUE(load.status->ok());
  ASSERT_TRUE(unload.status->ok());
  ASSERT_TRUE(reload.status->ok());
  EXPECT_EQ(StateOf(*repo, "add", "1"), "READY");
  EXPECT_EQ(backend_.loads(), 2);
  EXPECT_EQ(backend_.live(), 1);
}

TEST_F(ModelRepositoryTest, UnloadAllDrainsEverything) {
  repo_.AddVersion("add", 1);
  repo_.AddVersion("echo", 1);
  auto repo = Make(config::ControlMode::kNone);
  Outcome started, stopped;
  repo->LoadAtStartup({}, started.Callback());
  executor_.RunAll();
  repo->UnloadAll(stopped.Callback());
  executor_.RunAll();
  ASSERT_TRUE(stopped.status.has_value() && stopped.status->ok());
  EXPECT_EQ(backend_.live(), 0);
  EXPECT_TRUE(repo->Snapshot()->empty());
}

// Requests race loads and unloads on real threads (run under ThreadSanitizer too): every
// request either gets a live version or a clean error, and no version is destroyed in use.
TEST(ModelRepositoryConcurrencyTest, RequestsRaceLoadAndUnload) {
  TempRepo disk;
  disk.AddVersion("add", 1);
  FakeBackend backend;
  ThreadPool pool(2, "load");
  ModelRepository::Options options;
  options.paths = {disk.path()};
  options.control_mode = config::ControlMode::kExplicit;
  auto repo = *ModelRepository::Create(options, &backend, &pool);

  auto run = [&](auto op) {
    Notification done;
    op([&done](absl::Status) { done.Notify(); });
    done.WaitForNotification();
  };
  run([&](auto cb) { repo->LoadModel("add", std::move(cb)); });

  constexpr int kCycles = 40;
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&] {
      std::vector<float> zeros(4, 0.0f);
      const absl::string_view bytes(reinterpret_cast<const char*>(zeros.data()), 16);
      const std::vector<InputTensor> inputs = {{"a", runtime::DataType::kFloat32, {1, 4}, bytes},
                                               {"b", runtime::DataType::kFloat32, {1, 4}, bytes}};
      const std::vector<std::string> outputs = {"sum"};
      while (!stop.load()) {
        absl::StatusOr<VersionLease> lease = repo->Acquire("add", "");
        if (!lease.ok()) {
          const auto code = lease.status().code();
          ASSERT_TRUE(code == absl::StatusCode::kNotFound || code == absl::StatusCode::kUnavailable)
              << lease.status();
          continue;
        }
        ASSERT_TRUE((*lease)->model().Infer(inputs, outputs, nullptr).ok());
        served.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < kCycles; ++i) {
    run([&](auto cb) { repo->UnloadModel("add", std::move(cb)); });
    run([&](auto cb) { repo->LoadModel("add", std::move(cb)); });
  }
  stop.store(true);
  for (std::thread& t : clients) t.join();
  run([&](auto cb) { repo->UnloadAll(std::move(cb)); });
  pool.Stop();
  EXPECT_EQ(backend.use_after_destroy(), 0);
  EXPECT_EQ(backend.live(), 0);
  EXPECT_EQ(backend.loads(), kCycles + 1);
  EXPECT_EQ(StateOf(*repo, "add", "1"), "UNAVAILABLE");
}

}  // namespace
}  // namespace reprise::server
