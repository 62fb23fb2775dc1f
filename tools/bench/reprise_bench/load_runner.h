// reprise-bench's load generator: keeps a number of ModelInfer requests in flight (or sends
// them at a fixed rate) on the gRPC callback API, and hands out what completed, window by
// window.
#ifndef REPRISE_TOOLS_BENCH_REPRISE_BENCH_LOAD_RUNNER_H_
#define REPRISE_TOOLS_BENCH_REPRISE_BENCH_LOAD_RUNNER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "grpc_service.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "tools/bench/reprise_bench/window_stats.h"

namespace reprise::tools::bench {

/// Counts of one run (Start to Stop), warm-up and drain included.
struct LoadCounts {
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t skipped = 0;  // request-rate mode: slots not sent because max_outstanding was reached
  std::string first_error;
};

/// What drives one load level: the gRPC LoadRunner below or HttpLoadRunner
/// (http_load_runner.h). The methods are those of LoadRunner.
/// The completed samples and the counts are kept here, for both.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual void StartConcurrency(int concurrency) = 0;
  virtual void StartRate(double rate, int max_outstanding) = 0;
  /// The samples completed since the last call (or Start).
  std::vector<RequestSample> TakeSamples();
  /// Waits until at least `count` samples are pending or `timeout` passed.
  void WaitForSamples(size_t count, std::chrono::milliseconds timeout);
  virtual LoadCounts Stop(bool* drained) = 0;

 protected:
  std::mutex mu_;
  std::condition_variable cv_;  // notified when a sample is added
  std::vector<RequestSample> samples_ ABSL_GUARDED_BY(mu_);
  LoadCounts counts_ ABSL_GUARDED_BY(mu_);
};

/// Drives one load level at a time. Start() begins sending, TakeSamples() hands out what
/// completed since the last call, Stop() stops sending and waits (bounded) for the requests in
/// flight. Completions run on gRPC's threads; all methods are for one controlling thread.
/// The channel must outlive the runner.
class LoadRunner final : public Runner {
 public:
  /// `request` is sent as is (serialised anew for each request, which is the client send
  /// time); a response is OK when its status is and it has `expected_outputs` outputs (at
  /// least one when `expected_outputs` < 0: the server did not describe the model).
  LoadRunner(std::shared_ptr<grpc::Channel> channel, inference::ModelInferRequest request,
             int expected_outputs, std::chrono::milliseconds request_timeout);
  ~LoadRunner() override;
  LoadRunner(const LoadRunner&) = delete;
  LoadRunner& operator=(const LoadRunner&) = delete;

  /// Keeps `concurrency` requests in flight until Stop().
  void StartConcurrency(int concurrency) override;
  /// Sends `rate` requests per second (on a schedule, at most `max_outstanding` in flight).
  void StartRate(double rate, int max_outstanding) override;

  /// Stops sending and waits until nothing is in flight (at most the request timeout plus
  /// five seconds). Returns the counts of this run; false in `drained` if requests remained.
  LoadCounts Stop(bool* drained) override;

 private:
  struct Call;
  /// Sends one request; `reserved`: its in-flight slot is already counted.
  void Issue(bool reserved);
  void OnDone(Call* call, const grpc::Status& status);
  void RatePacer(double rate, int max_outstanding);

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  const inference::ModelInferRequest request_;
  const int expected_outputs_;
  const std::chrono::milliseconds request_timeout_;

  std::atomic<bool> sending_{false};
  std::atomic<bool> rate_mode_{false};
  std::thread pacer_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reprise::tools::bench

#endif  // REPRISE_TOOLS_BENCH_REPRISE_BENCH_LOAD_RUNNER_H_
