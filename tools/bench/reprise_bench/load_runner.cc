#include "tools/bench/reprise_bench/load_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace reprise::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

struct LoadRunner::Call {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  Clock::time_point start;
  double send_us = 0;
};

LoadRunner::LoadRunner(std::shared_ptr<grpc::Channel> channel, inference::ModelInferRequest request,
                       int expected_outputs, std::chrono::milliseconds request_timeout)
    : channel_(std::move(channel)),
      stub_(channel_),
      request_(std::move(request)),
      expected_outputs_(expected_outputs),
      request_timeout_(request_timeout) {}

LoadRunner::~LoadRunner() {
  bool drained = false;
  Stop(&drained);
}

void LoadRunner::StartConcurrency(int concurrency) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts_ = LoadCounts();
    samples_.clear();
  }
  rate_mode_.store(false);
  sending_.store(true);
  for (int i = 0; i < concurrency; ++i) Issue(/*reserved=*/false);
}

void LoadRunner::StartRate(double rate, int max_outstanding) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts_ = LoadCounts();
    samples_.clear();
  }
  rate_mode_.store(true);
  sending_.store(true);
  pacer_ = std::thread([this, rate, max_outstanding] { RatePacer(rate, max_outstanding); });
}

void LoadRunner::RatePacer(double rate, int max_outstanding) {
  const auto start = Clock::now();
  const auto period = std::chrono::duration<double>(1.0 / rate);
  for (int64_t i = 0; sending_.load(); ++i) {
    const auto when = start + std::chrono::duration_cast<Clock::duration>(period * i);
    // Sleeps in short steps so that Stop() is seen within 50 ms whatever the rate.
    while (sending_.load() && Clock::now() < when) {
      std::this_thread::sleep_until(std::min(when, Clock::now() + std::chrono::milliseconds(50)));
    }
    if (!sending_.load()) break;
    bool send = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (in_flight_ < max_outstanding) {
        send = true;
      } else {
        ++counts_.skipped;
      }
    }
    if (send) Issue(/*reserved=*/false);
  }
}

void LoadRunner::Issue(bool reserved) {
  auto* call = new Call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reserved) ++in_flight_;
    ++counts_.sent;
  }
  call->context.set_deadline(std::chrono::system_clock::now() + request_timeout_);
  call->start = Clock::now();
  bool own = false;
  grpc::Status serialized = grpc::SerializationTraits<inference::ModelInferRequest>::Serialize(
      request_, &call->request, &own);
  call->send_us = Micros(Clock::now() - call->start);
  if (!serialized.ok()) {
    OnDone(call, serialized);
    return;
  }
  stub_.UnaryCall(&call->context, kModelInfer, grpc::StubOptions(), &call->request, &call->response,
                  [this, call](grpc::Status status) { OnDone(call, status); });
}

void LoadRunner::OnDone(Call* call, const grpc::Status& status) {
  RequestSample sample;
  sample.send_us = call->send_us;
  grpc::Status result = status;
  if (result.ok()) {
    const auto recv_start = Clock::now();
    inference::ModelInferResponse response;
    result = grpc::SerializationTraits<inference::ModelInferResponse>::Deserialize(&call->response,
                                                                                   &response);
    sample.recv_us = Micros(Clock::now() - recv_start);
    const bool outputs_ok = expected_outputs_ < 0 ? response.outputs_size() > 0
                                                  : response.outputs_size() == expected_outputs_;
    if (result.ok() && !outputs_ok) {
      result = grpc::Status(grpc::StatusCode::INTERNAL,
                            absl::StrCat("response has ", response.outputs_size(),
                                         " outputs, expected ", expected_outputs_));
    }
  }
  sample.latency_us = Micros(Clock::now() - call->start);
  sample.ok = result.ok();
  delete call;
  bool next = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Concurrency mode: the completed request's slot sends the next one. The slot is kept
    // (in_flight_ unchanged) so that Stop() cannot see zero in flight before it is sent.
    next = sending_.load() && !rate_mode_.load();
    if (!next) --in_flight_;
    if (sample.ok) {
      ++counts_.ok;
    } else {
      ++counts_.failed;
      if (counts_.first_error.empty()) {
        counts_.first_error = absl::StrCat("code ", static_cast<int>(result.error_code()), ": ",
                                           result.error_message());
      }
    }
    samples_.push_back(sample);
  }
  cv_.notify_all();
  if (next) Issue(/*reserved=*/true);
}

std::vector<RequestSample> Runner::TakeSamples() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RequestSample> out;
  out.swap(samples_);
  return out;
}

void Runner::WaitForSamples(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return samples_.size() >= count; });
}

LoadCounts LoadRunner::Stop(bool* drained) {
  {
    std::lock_guard<std::mutex> lock(mu_);  // ordered with OnDone's decision to send again
    sending_.store(false);
  }
  if (pacer_.joinable()) pacer_.join();
  std::unique_lock<std::mutex> lock(mu_);
  *drained = cv_.wait_for(lock, request_timeout_ + std::chrono::seconds(5),
                          [&] { return in_flight_ == 0; });
  return counts_;
}

}  // namespace reprise::tools::bench
