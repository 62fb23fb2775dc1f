// ModelInfer latency over gRPC at concurrency 1: a timing loop, not a test.
//
//   infer_latency [--addr 127.0.0.1:8001] [--model mlp] [--input NAME=FILE.npy]
//                 [-n 2000] [--warmup 200]
//
// Sends the same request n times after `warmup` unmeasured ones, one at a time on one channel,
// and prints min / p50 / p90 / p99 / max / mean in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/engine/npy.h"
#include "server/infer_codec.h"

int main(int argc, char** argv) {
  std::string addr = "127.0.0.1:8001", model = "mlp",
              input = "input=tools/models/zoo/mlp/input_b1.npy";
  int n = 2000, warmup = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
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
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const size_t eq = input.find('=');
  if (eq == std::string::npos || n <= 0) {
    std::fprintf(stderr, "--input NAME=FILE.npy and -n > 0\n");
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

  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < warmup + n; ++i) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = stub->ModelInfer(&ctx, request, &response);
    const auto end = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "ModelInfer: %d %s\n", static_cast<int>(s.error_code()),
                   s.error_message().c_str());
      return 1;
    }
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  };
  double sum = 0;
  for (double v : us) sum += v;
  std::printf(
      "model %s, %d requests after %d warm-up, concurrency 1 (us): min %.1f p50 %.1f "
      "p90 %.1f p99 %.1f max %.1f mean %.1f\n",
      model.c_str(), n, warmup, us.front(), pct(0.50), pct(0.90), pct(0.99), us.back(),
      sum / static_cast<double>(us.size()));
  return 0;
}
