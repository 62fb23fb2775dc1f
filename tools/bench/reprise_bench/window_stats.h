// Measurement windows of reprise-bench: per-request samples, latency percentiles, and the
// stability rule (three consecutive windows agree).
#ifndef REPRISE_TOOLS_BENCH_REPRISE_BENCH_WINDOW_STATS_H_
#define REPRISE_TOOLS_BENCH_REPRISE_BENCH_WINDOW_STATS_H_

#include <cstdint>
#include <vector>

namespace reprise::tools::bench {

/// One completed request, seen by the client.
struct RequestSample {
  double latency_us = 0;  // from before serialising the request to after parsing the response
  double send_us = 0;     // serialising the request
  double recv_us = 0;     // parsing the response
  bool ok = false;        // OK status and the expected outputs
};

/// Server-side totals of one model version (ModelStatistics), cumulative.
struct ServerCounters {
  bool valid = false;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t success_count = 0, success_ns = 0;
  uint64_t queue_count = 0, queue_ns = 0;
  uint64_t input_count = 0, input_ns = 0;
  uint64_t infer_count = 0, infer_ns = 0;
  uint64_t output_count = 0, output_ns = 0;
};

/// The requests that completed during one window and how long it lasted.
struct Window {
  std::vector<RequestSample> samples;
  double seconds = 0;
  ServerCounters server_before, server_after;
};

/// What one load level measured, over the windows it kept (the last three).
struct LevelSummary {
  double level = 0;  // concurrency or request rate
  int windows = 0;   // windows run (measured) at this level
  bool stable = false;
  std::vector<int64_t> window_counts;  // completed requests of every window run, in order
  int64_t measured_requests = 0;       // completed requests of the kept windows
  int64_t measured_ok = 0;
  double seconds = 0;           // length of the kept windows
  double requests_per_s = 0;    // OK requests
  double inferences_per_s = 0;  // OK requests x batch
  double p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
  double send_us = 0, recv_us = 0;  // means
  bool server_valid = false;
  double server_queue_us = 0, server_input_us = 0, server_infer_us = 0, server_output_us = 0;
  double server_success_us = 0;  // mean server time of a successful request
  uint64_t server_inferences = 0, server_executions = 0;  // deltas over the kept windows
  // Whole level, warm-up and drain included: sent == ok + failed once drained.
  int64_t sent = 0, ok = 0, failed = 0, skipped = 0;
};

/// The p-th percentile (0..1) of sorted values by the nearest-rank rule; 0 when empty.
double Percentile(const std::vector<double>& sorted, double p);

/// True when each of the last three windows' throughput and mean latency lies within
/// `threshold` (a fraction) of the three windows' mean. False with fewer than three windows
/// or a window without completed requests.
bool LastThreeStable(const std::vector<Window>& windows, double threshold);

/// Summarises the last min(3, n) windows at `level` (client side, and the server split from
/// the counters' deltas when both ends are valid). `batch` scales inferences.
LevelSummary Summarize(double level, const std::vector<Window>& windows, int batch);

}  // namespace reprise::tools::bench

#endif  // REPRISE_TOOLS_BENCH_REPRISE_BENCH_WINDOW_STATS_H_
