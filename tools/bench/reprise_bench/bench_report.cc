#include "tools/bench/reprise_bench/bench_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace reprise::tools::bench {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char* LevelName(const BenchOptions& o) {
  return o.load_mode == LoadMode::kConcurrency ? "concurrency" : "request_rate";
}

}  // namespace

std::string FormatTable(const BenchOptions& o, const BenchResult& r) {
  std::string out = absl::StrFormat("%-12s %10s %9s %9s %9s %9s %9s %7s %7s %9s %9s %6s\n",
                                    LevelName(o), "infer/s", "p50_us", "p90_us", "p95_us", "p99_us",
                                    "max_us", "send", "recv", "srv_queue", "srv_infer", "stable");
  for (const LevelSummary& s : r.levels) {
    absl::StrAppendFormat(&out, "%-12g %10.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.1f %7.1f", s.level,
                          s.inferences_per_s, s.p50_us, s.p90_us, s.p95_us, s.p99_us, s.max_us,
                          s.send_us, s.recv_us);
    if (s.server_valid) {
      absl::StrAppendFormat(&out, " %9.1f %9.1f", s.server_queue_us, s.server_infer_us);
    } else {
      absl::StrAppendFormat(&out, " %9s %9s", "-", "-");
    }
    absl::StrAppendFormat(&out, " %6s\n", s.stable ? "yes" : "no");
    if (s.failed > 0 || s.skipped > 0) {
      absl::StrAppendFormat(&out, "  (%d failed, %d skipped of %d sent)\n", s.failed, s.skipped,
                            s.sent);
    }
  }
  return out;
}

std::string FormatCsv(const BenchOptions& o, const BenchResult& r) {
  std::string out = absl::StrCat(
      LevelName(o),
      ",inferences_per_s,requests_per_s,p50_us,p90_us,p95_us,p99_us,max_us,mean_us,send_us,"
      "recv_us,server_queue_us,server_compute_input_us,server_compute_infer_us,"
      "server_compute_output_us,server_success_us,stable,windows,measured_requests,sent,ok,"
      "failed,skipped\n");
  for (const LevelSummary& s : r.levels) {
    absl::StrAppendFormat(&out, "%g,%.3f,%.3f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,", s.level,
                          s.inferences_per_s, s.requests_per_s, s.p50_us, s.p90_us, s.p95_us,
                          s.p99_us, s.max_us, s.mean_us, s.send_us, s.recv_us);
    if (s.server_valid) {
      absl::StrAppendFormat(&out, "%.2f,%.2f,%.2f,%.2f,%.2f,", s.server_queue_us, s.server_input_us,
                            s.server_infer_us, s.server_output_us, s.server_success_us);
    } else {
      out += ",,,,,";
    }
    absl::StrAppendFormat(&out, "%d,%d,%d,%d,%d,%d,%d\n", s.stable ? 1 : 0, s.windows,
                          s.measured_requests, s.sent, s.ok, s.failed, s.skipped);
  }
  return out;
}

std::string FormatJson(const BenchOptions& o, const BenchResult& r) {
  std::vector<std::string> levels;
  for (const LevelSummary& s : r.levels) {
    std::string l = absl::StrFormat(
        "{\"level\":%g,\"stable\":%s,\"windows\":%d,\"window_counts\":[%s],"
        "\"measured_requests\":%d,\"measured_ok\":%d,\"seconds\":%.6f,"
        "\"inferences_per_s\":%.3f,\"requests_per_s\":%.3f,\"p50_us\":%.2f,\"p90_us\":%.2f,"
        "\"p95_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,\"mean_us\":%.2f,\"send_us\":%.3f,"
        "\"recv_us\":%.3f,\"sent\":%d,\"ok\":%d,\"failed\":%d,\"skipped\":%d",
        s.level, s.stable ? "true" : "false", s.windows, absl::StrJoin(s.window_counts, ","),
        s.measured_requests, s.measured_ok, s.seconds, s.inferences_per_s, s.requests_per_s,
        s.p50_us, s.p90_us, s.p95_us, s.p99_us, s.max_us, s.mean_us, s.send_us, s.recv_us, s.sent,
        s.ok, s.failed, s.skipped);
    if (s.server_valid) {
      absl::StrAppendFormat(
          &l,
          ",\"server\":{\"queue_us\":%.2f,\"compute_input_us\":%.2f,\"compute_infer_us\":%.2f,"
          "\"compute_output_us\":%.2f,\"success_us\":%.2f,\"inferences\":%d,"
          "\"executions\":%d}",
          s.server_queue_us, s.server_input_us, s.server_infer_us, s.server_output_us,
          s.server_success_us, s.server_inferences, s.server_executions);
    } else {
      l += ",\"server\":null";
    }
    levels.push_back(l + "}");
  }
  return absl::StrFormat(
      "{\"model\":%s,\"addr\":%s,\"batch_size\":%d,\"mode\":\"%s\",\"window\":{\"mode\":\"%s\","
      "\"ms\":%d,\"requests\":%d},\"stability\":%.4f,\"max_windows\":%d,\"warmup_ms\":%d,"
      "\"server_stats\":%s,\"server_inference_count_delta\":%d,\"client_inferences_ok\":%d,"
      "\"levels\":[%s]}\n",
      JsonString(o.model), JsonString(o.addr), o.batch_size, LevelName(o),
      o.window_mode == WindowMode::kTime ? "time" : "count", o.window_ms, o.window_requests,
      o.stability, o.max_windows, o.warmup_ms, r.server_stats ? "true" : "false",
      r.server_inference_count_delta, r.client_inferences_ok, absl::StrJoin(levels, ","));
}

}  // namespace reprise::tools::bench
