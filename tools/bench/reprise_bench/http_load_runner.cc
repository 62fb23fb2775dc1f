#include "tools/bench/reprise_bench/http_load_runner.h"

#include "absl/strings/str_cat.h"
#include "server/http_codec.h"
#include "tools/common/http_client.h"

namespace reprise::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

HttpLoadRunner::HttpLoadRunner(std::string addr,
                               std::vector<std::pair<std::string, std::string>> headers,
                               inference::ModelInferRequest request, bool binary_inputs,
                               bool binary_outputs, int expected_outputs)
    : addr_(std::move(addr)),
      headers_(std::move(headers)),
      request_(std::move(request)),
      binary_inputs_(binary_inputs),
      binary_outputs_(binary_outputs),
      expected_outputs_(expected_outputs) {}

HttpLoadRunner::~HttpLoadRunner() {
  bool drained = false;
  Stop(&drained);
}

void HttpLoadRunner::Record(const RequestSample& sample, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.sent;
    if (sample.ok) {
      ++counts_.ok;
    } else {
      ++counts_.failed;
      if (counts_.first_error.empty()) counts_.first_error = error;
    }
    samples_.push_back(sample);
  }
  cv_.notify_all();
}

void HttpLoadRunner::Client() {
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Connect(addr_, headers_);
  if (!client.ok()) {
    Record(RequestSample(), std::string(client.status().message()));
    return;
  }
  const std::string path = HttpClient::InferPath(request_);
  while (sending_.load()) {
    RequestSample sample;
    const auto start = Clock::now();
    absl::StatusOr<server::HttpBody> body =
        server::WriteHttpInferRequest(request_, binary_inputs_, binary_outputs_);
    if (!body.ok()) {
      Record(sample, std::string(body.status().message()));
      return;
    }
    std::vector<std::pair<std::string, std::string>> extra;
    if (body->header_length) {
      extra.emplace_back("Inference-Header-Content-Length", std::to_string(*body->header_length));
    }
    sample.send_us = Micros(Clock::now() - start);
    absl::StatusOr<HttpResult> result = (*client)->Request("POST", path, body->body, extra);
    std::string error;
    if (result.ok()) {
      const auto recv_start = Clock::now();
      absl::StatusOr<inference::ModelInferResponse> response = HttpClient::InferResponse(*result);
      sample.recv_us = Micros(Clock::now() - recv_start);
      if (!response.ok()) {
        error = std::string(response.status().message());
      } else if (expected_outputs_ < 0 ? response->outputs_size() == 0
                                       : response->outputs_size() != expected_outputs_) {
        error = absl::StrCat("response has ", response->outputs_size(), " outputs");
      } else {
        sample.ok = true;
      }
    } else {
      error = std::string(result.status().message());
    }
    sample.latency_us = Micros(Clock::now() - start);
    Record(sample, error);
    if (!result.ok()) return;  // the connection is gone
  }
}

void HttpLoadRunner::StartConcurrency(int concurrency) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts_ = LoadCounts();
    samples_.clear();
  }
  sending_.store(true);
  for (int i = 0; i < concurrency; ++i) clients_.emplace_back([this] { Client(); });
}

void HttpLoadRunner::StartRate(double, int) {
  Record(RequestSample(), "request-rate mode is not supported over HTTP");
}

LoadCounts HttpLoadRunner::Stop(bool* drained) {
  sending_.store(false);
  for (std::thread& t : clients_) t.join();
  clients_.clear();
  *drained = true;
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace reprise::tools::bench
