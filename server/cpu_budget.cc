#include "server/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reprise::server {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The cgroup v2 path of this process ("0::/a/b" -> "/a/b"); empty when there is none.
std::string CgroupV2Path(const std::string& proc_self_cgroup) {
  std::string text;
  if (!ReadFile(proc_self_cgroup, &text)) return "";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "0::")) return std::string(line);
  }
  return "";
}

}  // namespace

absl::StatusOr<std::optional<double>> ParseCpuMax(absl::string_view text) {
  const absl::string_view line = absl::StripAsciiWhitespace(text);
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  int64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &period) || period <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.max \"", line, "\" is not \"QUOTA PERIOD\" or \"max PERIOD\""));
  }
  if (fields[0] == "max") return std::optional<double>();
  int64_t quota = 0;
  if (!absl::SimpleAtoi(fields[0], &quota) || quota <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.max \"", line, "\": quota \"", fields[0], "\" is not a positive number"));
  }
  return std::optional<double>(static_cast<double>(quota) / static_cast<double>(period));
}

int CpusFor(int affinity_cpus, std::optional<double> quota) {
  int cpus = std::max(affinity_cpus, 1);
  if (quota.has_value()) cpus = std::min(cpus, static_cast<int>(std::ceil(*quota - 1e-9)));
  return std::max(cpus, 1);
}

CpuBudget DetectCpuBudget(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  CpuBudget b;
  b.affinity_cpus = AffinityCpus();
  // The quota of the process's cgroup and of every parent up to the root: the smallest binds.
  std::string path = CgroupV2Path(proc_self_cgroup);
  if (!path.empty()) {
    while (true) {
      const std::string file = absl::StrCat(cgroup_root, path == "/" ? "" : path, "/cpu.max");
      std::string text;
      if (ReadFile(file, &text)) {
        absl::StatusOr<std::optional<double>> quota = ParseCpuMax(text);
        if (quota.ok() && quota->has_value() && (!b.quota || **quota < *b.quota)) {
          b.quota = **quota;
          b.quota_file = file;
        }
      }
      if (path == "/" || path.empty()) break;
      const size_t slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  b.cpus = CpusFor(b.affinity_cpus, b.quota);
  return b;
}

std::string CpuBudget::Describe() const {
  std::string out = absl::StrCat(cpus, cpus == 1 ? " CPU" : " CPUs", " (affinity mask ",
                                 affinity_cpus, ", cgroup cpu.max ");
  if (quota.has_value()) {
    absl::StrAppend(&out, absl::StrFormat("%.2f", *quota), " in ", quota_file, ")");
  } else {
    absl::StrAppend(&out, "no limit)");
  }
  return out;
}

}  // namespace reprise::server
