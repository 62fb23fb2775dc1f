#include "tools/bench/reprise_bench/window_stats.h"

#include <algorithm>
#include <cmath>

namespace reprise::tools::bench {
namespace {

double Throughput(const Window& w) {
  int64_t ok = 0;
  for (const RequestSample& s : w.samples) ok += s.ok ? 1 : 0;
  return w.seconds > 0 ? static_cast<double>(ok) / w.seconds : 0;
}

double MeanLatency(const Window& w) {
  double sum = 0;
  int64_t n = 0;
  for (const RequestSample& s : w.samples) {
    if (!s.ok) continue;
    sum += s.latency_us;
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0;
}

bool WithinOfMean(const double v[3], double threshold) {
  const double mean = (v[0] + v[1] + v[2]) / 3;
  if (!(mean > 0)) return false;
  for (int i = 0; i < 3; ++i) {
    if (std::fabs(v[i] - mean) > threshold * mean) return false;
  }
  return true;
}

double MeanNs(uint64_t ns_after, uint64_t ns_before, uint64_t count_after, uint64_t count_before) {
  if (count_after <= count_before || ns_after < ns_before) return 0;
  return static_cast<double>(ns_after - ns_before) / 1e3 /
         static_cast<double>(count_after - count_before);
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  // Nearest rank: the smallest value with at least p of the values at or below it.
  const double rank = std::ceil(p * static_cast<double>(sorted.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

bool LastThreeStable(const std::vector<Window>& windows, double threshold) {
  if (windows.size() < 3) return false;
  double tput[3], lat[3];
  for (int i = 0; i < 3; ++i) {
    const Window& w = windows[windows.size() - 3 + static_cast<size_t>(i)];
    tput[i] = Throughput(w);
    lat[i] = MeanLatency(w);
  }
  return WithinOfMean(tput, threshold) && WithinOfMean(lat, threshold);
}

LevelSummary Summarize(double level, const std::vector<Window>& windows, int batch) {
  LevelSummary s;
  s.level = level;
  s.windows = static_cast<int>(windows.size());
  for (const Window& w : windows) s.window_counts.push_back(static_cast<int64_t>(w.samples.size()));
  const size_t first = windows.size() > 3 ? windows.size() - 3 : 0;
  std::vector<double> latencies;
  double send = 0, recv = 0;
  for (size_t i = first; i < windows.size(); ++i) {
    const Window& w = windows[i];
    s.seconds += w.seconds;
    s.measured_requests += static_cast<int64_t>(w.samples.size());
    for (const RequestSample& r : w.samples) {
      if (!r.ok) continue;
      ++s.measured_ok;
      latencies.push_back(r.latency_us);
      send += r.send_us;
      recv += r.recv_us;
    }
  }
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    const double n = static_cast<double>(latencies.size());
    double sum = 0;
    for (double v : latencies) sum += v;
    s.mean_us = sum / n;
    s.send_us = send / n;
    s.recv_us = recv / n;
    s.p50_us = Percentile(latencies, 0.50);
    s.p90_us = Percentile(latencies, 0.90);
    s.p95_us = Percentile(latencies, 0.95);
    s.p99_us = Percentile(latencies, 0.99);
    s.max_us = latencies.back();
  }
  if (s.seconds > 0) {
    s.requests_per_s = static_cast<double>(s.measured_ok) / s.seconds;
    s.inferences_per_s = s.requests_per_s * batch;
  }
  if (!windows.empty()) {
    const ServerCounters& a = windows[first].server_before;
    const ServerCounters& b = windows.back().server_after;
    if (a.valid && b.valid) {
      s.server_valid = true;
      s.server_queue_us = MeanNs(b.queue_ns, a.queue_ns, b.queue_count, a.queue_count);
      s.server_input_us = MeanNs(b.input_ns, a.input_ns, b.input_count, a.input_count);
      s.server_infer_us = MeanNs(b.infer_ns, a.infer_ns, b.infer_count, a.infer_count);
      s.server_output_us = MeanNs(b.output_ns, a.output_ns, b.output_count, a.output_count);
      s.server_success_us = MeanNs(b.success_ns, a.success_ns, b.success_count, a.success_count);
      s.server_inferences =
          b.inference_count >= a.inference_count ? b.inference_count - a.inference_count : 0;
      s.server_executions =
          b.execution_count >= a.execution_count ? b.execution_count - a.execution_count : 0;
    }
  }
  return s;
}

}  // namespace reprise::tools::bench
