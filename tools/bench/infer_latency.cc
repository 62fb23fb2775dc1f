// ModelInfer latency and throughput over gRPC: a timing loop, not a test.
//
//   infer_latency [--addr 127.0.0.1:8001] [--model mlp] [--input NAME=FILE.npy]
//                 [-n 2000] [--warmup 200] [-c 1] [--ssl] [--root-certificates FILE]
//                 [--private-key FILE --certificate-chain FILE] [-H NAME=VALUE]
//
// `-c` clients (threads, each with its own channel) each send the same request n times after
// `warmup` unmeasured ones, one at a time, and the tool prints min / p50 / p90 / p99 / max /
// mean in microseconds over all of them and the throughput (requests per second over the
// measured part: from the first measured send to the last answer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/engine/npy.h"
#include "server/kserve_types.h"
#include "tools/common/client_channel.h"

int main(int argc, char** argv) {
  std::string addr = "127.0.0.1:8001", model = "mlp",
              input = "input=tools/models/zoo/mlp/input_b1.npy";
  int n = 2000, warmup = 200, clients = 1;
  reprise::tools::ClientConnectionOptions connection;  // --ssl, certificates, -H
  const std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    absl::StatusOr<bool> connection_flag =
        reprise::tools::ParseConnectionFlag(args, &i, &connection);
    if (!connection_flag.ok()) {
      std::fprintf(stderr, "%s\n", std::string(connection_flag.status().message()).c_str());
      return 2;
    }
    if (*connection_flag) continue;
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "flag %s needs a value\n", args[i].c_str());
      return 2;
    }
    const std::string& flag = args[i];
    const std::string& value = args[++i];
    if (flag == "--addr")
      addr = value;
    else if (flag == "--model")
      model = value;
    else if (flag == "--input")
      input = value;
    else if (flag == "-n")
      n = std::atoi(value.c_str());
    else if (flag == "--warmup")
      warmup = std::atoi(value.c_str());
    else if (flag == "-c")
      clients = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const size_t eq = input.find('=');
  if (eq == std::string::npos || n <= 0 || clients <= 0) {
    std::fprintf(stderr, "--input NAME=FILE.npy, -n > 0 and -c > 0\n");
    return 2;
  }
  absl::StatusOr<reprise::runtime::TensorValue> tensor =
      reprise::runtime::engine::ReadNpyFile(input.substr(eq + 1));
  if (!tensor.ok()) {
    std::fprintf(stderr, "%s\n", tensor.status().ToString().c_str());
    return 1;
  }
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* in = request.add_inputs();
  in->set_name(input.substr(0, eq));
  in->set_datatype(std::string(reprise::server::KServeDatatypeName(tensor->dtype)));
  for (int64_t d : tensor->shape) in->add_shape(d);
  request.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(tensor->bytes.data()), tensor->bytes.size()));

  std::vector<double> us;
  us.reserve(static_cast<size_t>(n) * static_cast<size_t>(clients));
  std::mutex mu;
  bool failed = false;
  using Clock = std::chrono::steady_clock;
  Clock::time_point first_measured = Clock::time_point::max(), last_done{};
  auto client = [&](int index) {
    // Own channel per client: one HTTP/2 connection each, as separate clients would have.
    grpc::ChannelArguments channel_args;
    channel_args.SetInt("client_index", index);  // keeps gRPC from sharing one subchannel
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        reprise::tools::MakeClientChannel(addr, connection, channel_args);
    if (!channel.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      std::fprintf(stderr, "%s\n", channel.status().ToString().c_str());
      failed = true;
      return;
    }
    auto stub = inference::GRPCInferenceService::NewStub(*channel);
    std::vector<double> mine;
    mine.reserve(static_cast<size_t>(n));
    Clock::time_point my_first = Clock::time_point::max(), my_last{};
    for (int i = 0; i < warmup + n; ++i) {
      grpc::ClientContext ctx;
      inference::ModelInferResponse response;
      const auto start = Clock::now();
      grpc::Status s = stub->ModelInfer(&ctx, request, &response);
      const auto end = Clock::now();
      if (!s.ok()) {
        std::fprintf(stderr, "ModelInfer: %d %s\n", static_cast<int>(s.error_code()),
                     s.error_message().c_str());
        std::lock_guard<std::mutex> lock(mu);
        failed = true;
        return;
      }
      if (i >= warmup) {
        if (i == warmup) my_first = start;
        my_last = end;
        mine.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    us.insert(us.end(), mine.begin(), mine.end());
    first_measured = std::min(first_measured, my_first);
    last_done = std::max(last_done, my_last);
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) threads.emplace_back(client, c);
  for (std::thread& t : threads) t.join();
  if (failed || us.empty()) return 1;
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  };
  double sum = 0;
  for (double v : us) sum += v;
  const double seconds = std::chrono::duration<double>(last_done - first_measured).count();
  std::printf(
      "model %s, %d requests per client after %d warm-up, concurrency %d (us): min %.1f p50 %.1f "
      "p90 %.1f p99 %.1f max %.1f mean %.1f; throughput %.0f req/s\n",
      model.c_str(), n, warmup, clients, us.front(), pct(0.50), pct(0.90), pct(0.99), us.back(),
      sum / static_cast<double>(us.size()), static_cast<double>(us.size()) / seconds);
  return 0;
}
