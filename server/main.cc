// reprise-server: the daemon's entry point.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/base/heap_policy.h"
#include "server/command_line.h"
#include "server/cpu_budget.h"
#include "server/engine_backend.h"
#include "server/logging.h"
#include "server/server.h"
#include "server/tls_credentials.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Block the shutdown signals in every thread; this one waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<reprise::server::CommandLine> command_line =
      reprise::server::ParseCommandLine(args);
  if (!command_line.ok()) {
    std::fprintf(stderr, "reprise-server: %s\n%s",
                 std::string(command_line.status().message()).c_str(),
                 reprise::server::Usage().c_str());
    return 2;
  }
  if (command_line->help) {
    std::fputs(reprise::server::Usage().c_str(), stdout);
    return 0;
  }
  if (absl::Status logging = reprise::server::ConfigureLogging(command_line->config.log_level,
                                                               command_line->config.log_format,
                                                               command_line->config.log_file);
      !logging.ok()) {
    std::fprintf(stderr, "reprise-server: %s\n", std::string(logging.message()).c_str());
    return 2;
  }
  spdlog::info("{}", reprise::server::DescribeConfig(command_line->config));
  // Tensors of tens of MiB reuse heap pages request after request instead of being mapped and
  // faulted in afresh each time (heap_policy.h); the resident size stays at its high-water mark.
  if (!reprise::runtime::KeepLargeBlocksInHeap()) {
    spdlog::info("heap: large blocks keep the C library's defaults (not glibc's malloc)");
  }

  // The graph engine on the CPU device, made once for the process.
  const reprise::config::ServerConfig& config = command_line->config;
  // Thread defaults follow the CPUs this process may use (affinity, then the cgroup quota).
  const reprise::server::CpuBudget cpus = reprise::server::DetectCpuBudget();
  spdlog::info("cpus: {}; inference threads {}{}", cpus.Describe(),
               config.cpu_threads > 0 ? config.cpu_threads : cpus.cpus,
               config.cpu_threads > 0 ? " (runtime.cpu_threads)" : " (the CPUs)");
  reprise::server::EngineBackendOptions engine_options;
  engine_options.cores = cpus.cpus;
  engine_options.intra_op_threads = config.intra_op_threads;
  engine_options.choose_threads = config.choose_threads;
  engine_options.max_queue_delay_us = config.batching_max_queue_delay_us;
  engine_options.default_timeout_us = config.batching_default_timeout_us;
  engine_options.max_instances_per_stream = config.capture_max_instances_per_stream;
  engine_options.warmup = config.capture_warmup;
  engine_options.memory_budget_bytes = config.capture_memory_budget_bytes;
  engine_options.max_plan_bytes = config.max_plan_bytes;
  engine_options.cpu_kernels.conv_winograd = config.kernels_conv_winograd;
  engine_options.cpu_kernels.conv_taps_as_channels = config.kernels_conv_taps_as_channels;
  engine_options.cpu_kernels.conv_tap_regions = config.kernels_conv_tap_regions;
  engine_options.cpu_kernels.conv_own_depthwise = config.kernels_conv_own_depthwise;
  // Checked by the config parser (auto or nhwc).
  engine_options.cpu_kernels.conv_chain_layout =
      reprise::kernels::cpu::ParseConvChainLayout(config.kernels_conv_chain_layout)
          .value_or(reprise::kernels::cpu::ConvChainLayout::kAuto);
  // Checked by the config parser (auto, on or off).
  engine_options.cpu_kernels.clear_outputs =
      reprise::kernels::cpu::ParseOutputClearing(config.kernels_clear_outputs)
          .value_or(reprise::kernels::cpu::OutputClearing::kAuto);
  absl::StatusOr<std::unique_ptr<reprise::server::EngineBackend>> backend =
      reprise::server::EngineBackend::Create(engine_options);
  if (!backend.ok()) {
    spdlog::error("cannot start the engine: {}", backend.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<reprise::server::Server>> server =
      reprise::server::Server::Start(command_line->config, backend->get());
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }

  if (config.exit_on_error) {
    // Triton's --exit-on-error: a model asked for at startup that fails to load ends the process.
    if (absl::Status startup = (*server)->WaitForStartupLoads(); !startup.ok()) {
      spdlog::error("exiting (--exit-on-error): {}", startup.ToString());
      (*server)->Shutdown();
      server->reset();
      return 1;
    }
  }

  int signal = 0;
  sigwait(&signals, &signal);
  while (signal == SIGHUP) {
    // gRPC's certificate provider re-reads the files by itself (grpc.cert_refresh_seconds);
    // SIGHUP checks the files now, so that the operator learns at once whether they are good.
    const reprise::config::GrpcConfig& grpc = config.grpc;
    if (!grpc.use_ssl && !grpc.use_ssl_mutual) {
      spdlog::info("SIGHUP: TLS is off, nothing to reload");
    } else if (absl::Status files = reprise::server::CheckTlsFiles(grpc); files.ok()) {
      spdlog::info("SIGHUP: the certificate files are valid; new connections use them within {} s",
                   grpc.cert_refresh_seconds);
    } else {
      spdlog::error(
          "SIGHUP: {}; gRPC re-reads the files every {} s and new handshakes may fail until "
          "they are fixed (open connections stay)",
          files.ToString(), grpc.cert_refresh_seconds);
    }
    sigwait(&signals, &signal);
  }
  spdlog::info("received signal {}", signal);
  if (!(*server)->Shutdown()) {
    // Requests outlived the shutdown timeout and may be stuck in the backend: do not wait.
    spdlog::warn("exiting with requests still running");
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    std::_Exit(0);
  }
  server->reset();
  return 0;
}
