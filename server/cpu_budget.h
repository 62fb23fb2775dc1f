// The CPUs this process may use: its affinity mask (sched_getaffinity), cut by the cgroup v2
// CPU quota (cpu.max) of its cgroup and every parent. A pod limited to 2 CPUs on a 64-core
// node gets 2, not 64. The defaults of the thread counts come from here.
#ifndef REPRISE_SERVER_CPU_BUDGET_H_
#define REPRISE_SERVER_CPU_BUDGET_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reprise::server {

/// Where the CPU count came from.
struct CpuBudget {
  int cpus = 1;                 // what thread defaults use: at least 1
  int affinity_cpus = 0;        // CPUs in the affinity mask (0: unknown)
  std::optional<double> quota;  // cgroup v2 cpu.max quota / period, when limited
  std::string quota_file;       // the cpu.max that set `quota`
  /// e.g. "2 CPUs (affinity mask 64 CPUs, cgroup cpu.max 2.00 CPUs in /sys/fs/cgroup/cpu.max)".
  std::string Describe() const;
};

/// Parses a cgroup v2 cpu.max ("QUOTA PERIOD" or "max PERIOD", one line). nullopt for "max"
/// (no limit); the quota in CPUs otherwise. INVALID_ARGUMENT naming the text when malformed.
absl::StatusOr<std::optional<double>> ParseCpuMax(absl::string_view text);

/// The CPUs for a given affinity count and quota: min(affinity, ceil(quota)), at least 1.
int CpusFor(int affinity_cpus, std::optional<double> quota);

/// Reads this process's affinity mask and the cpu.max files from `cgroup_root` (normally
/// /sys/fs/cgroup) along the cgroup path of `proc_self_cgroup` (normally /proc/self/cgroup),
/// taking the smallest quota. Files that are missing or malformed are skipped (cgroup v1,
/// no cpu controller); never fails.
CpuBudget DetectCpuBudget(const std::string& cgroup_root = "/sys/fs/cgroup",
                          const std::string& proc_self_cgroup = "/proc/self/cgroup");

}  // namespace reprise::server

#endif  // REPRISE_SERVER_CPU_BUDGET_H_
