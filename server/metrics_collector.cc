#include "server/metrics_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using LabelList = std::vector<ClientMetric::Label>;

MetricFamily NewFamily(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void AddValue(MetricFamily* f, LabelList labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

// Capture durations from 10 us to 10 s.
// A cumulative Prometheus histogram from the per-bucket counts of every capture so far.
void AddCaptureHistogram(MetricFamily* f, LabelList labels, const CaptureTimeHistogram& h) {
  ClientMetric m;
  m.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kCaptureTimeBounds.size(); ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, kCaptureTimeBounds[i]});
  }
  cumulative += h.counts.back();
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = h.sum_seconds;
  f->metric.push_back(std::move(m));
}

const char* const kStates[] = {"LOADING", "READY", "UNLOADING", "UNAVAILABLE"};

}  // namespace

ProcessStats ReadProcessStats() {
  ProcessStats out;
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
    // f[0] is field 3 (state), so field N of proc(5) is f[N - 3].
    if (f.size() > 21) {
      const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
      const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
      auto field = [&f](int n) {
        double v = 0;
        return absl::SimpleAtod(f[static_cast<size_t>(n - 3)], &v) ? v : 0.0;
      };
      out.cpu_seconds = (field(14) + field(15)) / ticks;  // utime, stime
      out.virtual_bytes = field(23);                      // vsize
      out.resident_bytes = field(24) * page;              // rss (pages)
      std::ifstream uptime_file("/proc/uptime");
      double uptime = 0;
      if (uptime_file >> uptime) {
        const double boot = static_cast<double>(time(nullptr)) - uptime;
        out.start_time_seconds = std::floor(boot + field(22) / ticks);  // starttime
      }
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int n = 0;
    while (dirent* e = readdir(dir)) n += e->d_name[0] == '.' ? 0 : 1;
    closedir(dir);
    out.open_fds = n - 1;  // the directory stream itself
  }
  return out;
}

MetricsCollector::MetricsCollector(const ModelRepository* repository, const ModelBackend* backend,
                                   const std::atomic<int64_t>* grpc_inflight,
                                   int64_t memory_budget_bytes)
    : repository_(repository),
      backend_(backend),
      grpc_inflight_(grpc_inflight),
      memory_budget_bytes_(memory_budget_bytes) {}

void MetricsCollector::CollectVersions(std::vector<MetricFamily>* out) const {
  MetricFamily pending =
      NewFamily("reprise_pending_requests",
                "Requests holding the version now: waiting for a stream or batch, or running",
                MetricType::Gauge);
  MetricFamily instances =
      NewFamily("reprise_runtime_instances",
                "Runtime instances resident, by state (CAPTURED: replayed; EAGER: capture "
                "failed, runs step by step)",
                MetricType::Gauge);
  MetricFamily captures =
      NewFamily("reprise_runtime_instance_captures_total",
                "Stream captures that made a runtime instance", MetricType::Counter);
  MetricFamily replays =
      NewFamily("reprise_runtime_instance_replays_total",
                "Runs that replayed a captured runtime instance", MetricType::Counter);
  MetricFamily evictions =
      NewFamily("reprise_runtime_instance_evictions_total",
                "Runtime instances evicted from the instance cache (LRU bound or memory budget)",
                MetricType::Counter);
  MetricFamily failures = NewFamily(
      "reprise_capture_failures_total",
      "Input shapes whose capture failed (they run eagerly from then on)", MetricType::Counter);
  MetricFamily capture_time = NewFamily(
      "reprise_capture_duration_seconds",
      "Time to capture a runtime instance, every capture since the load", MetricType::Histogram);
  MetricFamily arena =
      NewFamily("reprise_runtime_instance_arena_bytes",
                "Arena memory of the resident runtime instances", MetricType::Gauge);

  std::vector<std::string> failed_now;
  std::shared_ptr<const ServingMap> map = repository_->Snapshot();
  for (const auto& [name, model] : *map) {
    for (const auto& [number, version] : model.versions) {
      if (!version->TryAcquire()) continue;  // going away: its series disappear
      VersionLease lease(version);
      const std::string v = std::to_string(number);
      const LabelList labels = {{"model", name}, {"version", v}};
      // This scrape's own lease is not a request.
      AddValue(&pending, labels, static_cast<double>(version->leases() - 1));
      uint64_t n_captured = 0, n_eager = 0;
      for (const RuntimeInstanceInfo& ri : lease->model().ListRuntimeInstances()) {
        if (ri.state == "EVICTED") continue;  // listed for the record, not resident
        if (ri.state == "EAGER") {
          ++n_eager;
          failed_now.push_back(absl::StrCat("model \"", name, "\" version ", v, " stream ",
                                            ri.stream, " shape ", ri.shape_signature));
        } else {
          ++n_captured;
        }
      }
      // Totals over the version's life (evicted instances included).
      const CaptureStats totals = lease->model().capture_stats();
      LabelList with_state = labels;
      with_state.push_back({"state", "CAPTURED"});
      AddValue(&instances, with_state, static_cast<double>(n_captured));
      with_state.back().value = "EAGER";
      AddValue(&instances, with_state, static_cast<double>(n_eager));
      AddValue(&captures, labels, static_cast<double>(totals.captures));
      AddValue(&replays, labels, static_cast<double>(totals.replays));
      AddValue(&evictions, labels, static_cast<double>(totals.evictions));
      AddValue(&failures, labels, static_cast<double>(totals.capture_failures));
      AddValue(&arena, labels, static_cast<double>(totals.live_bytes));
      AddCaptureHistogram(&capture_time, labels, totals.capture_time);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& key : failed_now) {
      if (logged_failures_.insert(key).second) {
        spdlog::warn(
            "{}: capture failed, the shape runs eagerly (reprise instances / dump show "
            "the reason)",
            key);
      }
    }
  }
  for (MetricFamily* f :
       {&pending, &instances, &captures, &replays, &evictions, &failures, &capture_time, &arena}) {
    out->push_back(std::move(*f));
  }
}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> out;
  CollectVersions(&out);

  MetricFamily state = NewFamily(
      "reprise_model_state",
      "1 for the state a model version is in (LOADING, READY, UNLOADING, UNAVAILABLE), 0 for "
      "the others; version \"\" is the model itself when it failed before any version",
      MetricType::Gauge);
  for (const IndexEntry& e : repository_->Index(/*ready_only=*/false)) {
    if (e.state.empty()) continue;  // found in the repository, never loaded
    for (const char* s : kStates) {
      AddValue(&state, {{"model", e.name}, {"version", e.version}, {"state", s}},
               e.state == s ? 1.0 : 0.0);
    }
  }
  out.push_back(std::move(state));

  MetricFamily used = NewFamily("reprise_device_memory_used_bytes",
                                "Memory allocated now per device: pool \"device\" (arenas, "
                                "weights) and \"pinned_host\" (staging)",
                                MetricType::Gauge);
  MetricFamily peak =
      NewFamily("reprise_device_memory_peak_bytes",
                "Highest reprise_device_memory_used_bytes since start", MetricType::Gauge);
  for (const DeviceMemoryInfo& d : backend_->MemoryUsage()) {
    AddValue(&used, {{"device", d.device}, {"pool", "device"}}, static_cast<double>(d.in_use));
    AddValue(&used, {{"device", d.device}, {"pool", "pinned_host"}},
             static_cast<double>(d.pinned_in_use));
    AddValue(&peak, {{"device", d.device}, {"pool", "device"}}, static_cast<double>(d.peak));
    AddValue(&peak, {{"device", d.device}, {"pool", "pinned_host"}},
             static_cast<double>(d.pinned_peak));
  }
  out.push_back(std::move(used));
  out.push_back(std::move(peak));
  MetricFamily budget =
      NewFamily("reprise_capture_memory_budget_bytes",
                "capture.memory_budget_bytes: arena bytes all instances may hold; 0 = no limit",
                MetricType::Gauge);
  AddValue(&budget, {}, static_cast<double>(memory_budget_bytes_));
  out.push_back(std::move(budget));

  if (grpc_inflight_ != nullptr) {
    MetricFamily calls = NewFamily("reprise_grpc_server_inflight_calls",
                                   "gRPC calls started and not finished (every service, "
                                   "streams included)",
                                   MetricType::Gauge);
    AddValue(&calls, {}, static_cast<double>(grpc_inflight_->load()));
    out.push_back(std::move(calls));
  }

  const ProcessStats p = ReadProcessStats();
  const std::pair<MetricFamily, double> process[] = {
      {NewFamily("process_cpu_seconds_total", "User and system CPU time of the process",
                 MetricType::Counter),
       p.cpu_seconds},
      {NewFamily("process_resident_memory_bytes", "Resident memory of the process",
                 MetricType::Gauge),
       p.resident_bytes},
      {NewFamily("process_virtual_memory_bytes", "Virtual memory of the process",
                 MetricType::Gauge),
       p.virtual_bytes},
      {NewFamily("process_start_time_seconds", "Start time of the process, since the epoch",
                 MetricType::Gauge),
       p.start_time_seconds},
      {NewFamily("process_open_fds", "Open file descriptors of the process", MetricType::Gauge),
       p.open_fds},
  };
  for (const auto& [family, value] : process) {
    MetricFamily f = family;
    AddValue(&f, {}, value);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace reprise::server
