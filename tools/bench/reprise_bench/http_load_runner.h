// reprise-bench's load over HTTP/REST (-i http): `concurrency` client threads, each with its
// own keep-alive connection, send the request back to back (perf_analyzer's HTTP mode). The
// request is encoded anew for each send (JSON or binary tensors), which is the client send
// time; decoding the answer is the receive time.
#ifndef REPRISE_TOOLS_BENCH_REPRISE_BENCH_HTTP_LOAD_RUNNER_H_
#define REPRISE_TOOLS_BENCH_REPRISE_BENCH_HTTP_LOAD_RUNNER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "grpc_service.pb.h"
#include "tools/bench/reprise_bench/load_runner.h"

namespace reprise::tools::bench {

class HttpLoadRunner final : public Runner {
 public:
  HttpLoadRunner(std::string addr, std::vector<std::pair<std::string, std::string>> headers,
                 inference::ModelInferRequest request, bool binary_inputs, bool binary_outputs,
                 int expected_outputs);
  ~HttpLoadRunner() override;

  void StartConcurrency(int concurrency) override;
  /// Not supported over HTTP (the options refuse it): records one failure.
  void StartRate(double rate, int max_outstanding) override;
  LoadCounts Stop(bool* drained) override;

 private:
  void Client();
  void Record(const RequestSample& sample, const std::string& error);

  const std::string addr_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  const inference::ModelInferRequest request_;
  const bool binary_inputs_;
  const bool binary_outputs_;
  const int expected_outputs_;
  std::atomic<bool> sending_{false};
  std::vector<std::thread> clients_;
};

}  // namespace reprise::tools::bench

#endif  // REPRISE_TOOLS_BENCH_REPRISE_BENCH_HTTP_LOAD_RUNNER_H_
