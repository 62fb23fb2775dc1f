// reprise-echo: the transport floor. A KServe v2 gRPC server whose ModelInfer answers at once
// with the request's tensors as outputs (same names, shapes and bytes): a bare unary round
// trip with the same payload, on the same gRPC callback API as reprise-server, so that
// reprise-bench against it measures what gRPC itself costs on this machine.
//
//   reprise-echo [--address 127.0.0.1] [--port 0] [--max-seconds 3600]
//
// Prints "Started echo server at ADDRESS:PORT" once listening (port 0 picks a free one), and
// runs until SIGINT/SIGTERM or --max-seconds. Loopback addresses only.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

class EchoService final : public inference::GRPCInferenceService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(true);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    response->set_model_name(request->model_name());
    response->set_model_version(request->model_version());
    response->set_id(request->id());
    for (const auto& in : request->inputs()) {
      auto* out = response->add_outputs();
      out->set_name(in.name());
      out->set_datatype(in.datatype());
      *out->mutable_shape() = in.shape();
    }
    *response->mutable_raw_output_contents() = request->raw_input_contents();
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1";
  int port = 0, max_seconds = 3600;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "reprise-echo: flag %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--address") {
      address = value;
    } else if (flag == "--port") {
      if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
        std::fprintf(stderr, "reprise-echo: --port wants 0..65535, got \"%s\"\n", value.c_str());
        return 2;
      }
    } else if (flag == "--max-seconds") {
      if (!absl::SimpleAtoi(value, &max_seconds) || max_seconds < 1) {
        std::fprintf(stderr, "reprise-echo: --max-seconds wants >= 1, got \"%s\"\n", value.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "reprise-echo: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (address != "localhost" && !absl::StartsWith(address, "127.") && address != "[::1]") {
    std::fprintf(stderr, "reprise-echo: --address \"%s\" is not a loopback address\n",
                 address.c_str());
    return 2;
  }
  // Blocked before any thread starts, so that sigtimedwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  EchoService service;
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  int bound = 0;
  builder.AddListeningPort(address + ":" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr, "reprise-echo: cannot listen on %s:%d\n", address.c_str(), port);
    return 1;
  }
  std::printf("Started echo server at %s:%d\n", address.c_str(), bound);
  std::fflush(stdout);
  timespec timeout{max_seconds, 0};
  const int signal = sigtimedwait(&signals, nullptr, &timeout);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::printf("reprise-echo: %s\n", signal > 0 ? "stopped by signal" : "--max-seconds reached");
  return 0;
}
