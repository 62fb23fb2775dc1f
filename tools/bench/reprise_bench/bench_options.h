// reprise-bench's command line: load modes, measurement windows, input data, outputs.
#ifndef REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_OPTIONS_H_
#define REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/common/client_channel.h"

namespace reprise::tools::bench {

/// How load is applied at one level: a fixed number of requests in flight, or a fixed rate.
enum class LoadMode { kConcurrency, kRequestRate };

/// How a measurement window ends: after a time, or after a number of completed requests.
enum class WindowMode { kTime, kCount };

/// Everything reprise-bench was asked to do. Plain values; copyable.
struct BenchOptions {
  std::string model;
  std::string version;                  // empty: the server's choice
  std::string addr = "127.0.0.1:8001";  // any gRPC target (HOST:PORT, unix:PATH, dns:///...)
  bool http = false;                    // -i http: KServe v2 REST (default address :8000)
  bool binary_inputs = true;            // HTTP: --input-tensor-format binary|json
  bool binary_outputs = true;           // HTTP: --output-tensor-format binary|json
  ClientConnectionOptions connection;   // --ssl, certificates, -H
  /// --input NAME=FILE.npy | NAME=random | NAME=zeros; inputs not named use `input_data`.
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string input_data = "random";  // random | zeros, for inputs without --input
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;  // --shape NAME=1x64
  int batch_size = 1;
  LoadMode load_mode = LoadMode::kConcurrency;
  std::vector<double> levels = {1};  // concurrencies or request rates, in sweep order
  WindowMode window_mode = WindowMode::kTime;
  int window_ms = 1000;           // kTime
  int window_requests = 100;      // kCount
  int window_timeout_ms = 30000;  // a kCount window gives up after this long
  double stability = 0.10;        // three windows agree within this fraction of their mean
  int max_windows = 10;           // per level; at least 3
  int warmup_ms = 1000;           // per level, unmeasured
  int request_timeout_ms = 30000;
  int max_outstanding = 256;  // request-rate mode: cap on requests in flight
  uint64_t seed = 1;
  std::string csv_path;
  std::string json_path;
  bool progress = true;
  bool server_stats = true;  // ModelStatistics deltas (skipped when the server has none)
  bool help = false;
};

/// Parses a sweep "A", "A:B" or "A:B:STEP" (inclusive, STEP > 0, default 1), or a list
/// "A,B,C", into its values; at most 1000 of them. `what` names the flag in errors.
absl::StatusOr<std::vector<double>> ParseSweep(absl::string_view text, absl::string_view what);

/// Parses "1x3x224x224" (or commas) into dimensions, each >= 0.
absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text);

/// Parses argv[1..]. `--flag value` and `--flag=value` both work. INVALID_ARGUMENT names the
/// flag and the value on any error; `help` is set (and nothing checked) for --help.
absl::StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args);

/// The usage text.
std::string BenchUsage();

}  // namespace reprise::tools::bench

#endif  // REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_OPTIONS_H_
