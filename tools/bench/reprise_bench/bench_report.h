// reprise-bench's outputs: the terminal table, CSV and JSON.
#ifndef REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_REPORT_H_
#define REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "tools/bench/reprise_bench/bench_options.h"
#include "tools/bench/reprise_bench/window_stats.h"

namespace reprise::tools::bench {

/// What a whole run measured, for the writers.
struct BenchResult {
  std::vector<LevelSummary> levels;
  bool server_stats = false;  // ModelStatistics answered
  // Whole-run check: inferences the server counted (ModelStatistics delta from before the
  // first level to after the last, all drained) against OK requests x batch seen here.
  uint64_t server_inference_count_delta = 0;
  int64_t client_inferences_ok = 0;
};

/// A fixed-width table, one row per level.
std::string FormatTable(const BenchOptions& options, const BenchResult& result);
/// A header line and one line per level.
std::string FormatCsv(const BenchOptions& options, const BenchResult& result);
/// One JSON object: the options that matter, every level, the whole-run counts.
std::string FormatJson(const BenchOptions& options, const BenchResult& result);

}  // namespace reprise::tools::bench

#endif  // REPRISE_TOOLS_BENCH_REPRISE_BENCH_BENCH_REPORT_H_
