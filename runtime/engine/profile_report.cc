#include "runtime/engine/profile_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/json_text.h"

namespace reprise::runtime::engine {
namespace {

// Microseconds with nanosecond precision, as the trace format wants them.
std::string Micros(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }

std::string Category(SpanKind kind) {
  switch (kind) {
    case SpanKind::kRun:
      return "run";
    case SpanKind::kStep:
      return "step";
    case SpanKind::kKernel:
      return "kernel";
    case SpanKind::kTask:
      return "task";
  }
  return "task";
}

// The kernel op a span's time counts for in the table ("" when it ran no kernel).
std::string KernelOf(const Profile& profile, const ProfileSpan& span) {
  if (span.kind == SpanKind::kStep) return profile.steps[span.step].kernel;
  if (span.kind == SpanKind::kKernel) return span.name;
  return "";
}

// `text` cut to `width` characters, keeping its end (node names differ at the end).
std::string Tail(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return absl::StrCat("...", text.substr(text.size() - (width - 3)));
}

// Nanoseconds covered by the union of the kernels' spans (streams overlap).
int64_t KernelUnionNs(const Profile& profile) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const ProfileSpan& span : profile.spans) {
    if (!KernelOf(profile, span).empty())
      spans.emplace_back(span.start_ns, span.start_ns + span.dur_ns);
  }
  std::sort(spans.begin(), spans.end());
  int64_t total = 0;
  int64_t begin = 0, end = 0;
  bool open = false;
  for (const auto& [b, e] : spans) {
    if (open && b <= end) {
      end = std::max(end, e);
      continue;
    }
    if (open) total += end - begin;
    begin = b;
    end = e;
    open = true;
  }
  if (open) total += end - begin;
  return total;
}

}  // namespace

std::string ProfileTraceJson(const Profile& profile) {
  std::string out = "{\"traceEvents\": [\n";
  absl::StrAppend(&out, "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, ",
                  "\"args\": {\"name\": ",
                  JsonQuote(absl::StrCat("reprise: ", profile.label, " (", profile.mode, ")")),
                  "}}");
  for (size_t row = 0; row < profile.rows.size(); ++row) {
    absl::StrAppend(&out,
                    ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": ", row,
                    ", \"args\": {\"name\": ", JsonQuote(profile.rows[row]), "}}");
    absl::StrAppend(
        &out, ",\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": ", row,
        ", \"args\": {\"sort_index\": ", row, "}}");
  }
  for (const ProfileSpan& span : profile.spans) {
    std::string name = span.name;
    std::string args = absl::StrCat("\"run\": ", span.run);
    if (span.kind == SpanKind::kStep) {
      const ProfileStep& step = profile.steps[span.step];
      name = absl::StrCat(step.name, " (", step.kernel, ")");
      absl::StrAppend(&args, ", \"step\": ", span.step, ", \"node\": ", JsonQuote(step.name),
                      ", \"op\": ", JsonQuote(step.op), ", \"kernel\": ", JsonQuote(step.kernel));
      if (!step.implementation.empty()) {
        absl::StrAppend(&args, ", \"implementation\": ", JsonQuote(step.implementation));
      }
    }
    absl::StrAppend(&out, ",\n  {\"name\": ", JsonQuote(name), ", \"cat\": \"", Category(span.kind),
                    "\", \"ph\": \"X\", \"pid\": 1, \"tid\": ", span.row,
                    ", \"ts\": ", Micros(span.start_ns), ", \"dur\": ", Micros(span.dur_ns),
                    ", \"args\": {", args, "}}");
  }
  absl::StrAppend(&out, "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"model\": ",
                  JsonQuote(profile.label), ", \"mode\": ", JsonQuote(profile.mode),
                  ", \"runs\": ", profile.runs, ", \"steps\": ", profile.steps.size(),
                  ", \"note\": ", JsonQuote(profile.note), "}}\n");
  return out;
}

std::string ProfileTable(const Profile& profile, int top) {
  const double runs = std::max(profile.runs, 1);
  int64_t wall = 0;
  for (const ProfileSpan& span : profile.spans) {
    if (span.kind == SpanKind::kRun) wall += span.dur_ns;
  }
  const double wall_per_run = static_cast<double>(wall) / runs / 1e3;
  auto share = [wall](int64_t ns) {
    return wall > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(wall) : 0.0;
  };
  std::vector<int64_t> step_ns(profile.steps.size(), 0);
  // kernel op -> (steps, ns); std::map for a stable order among equal times.
  std::map<std::string, std::pair<int, int64_t>> op_ns;
  int64_t other_ns = 0;
  for (const ProfileSpan& span : profile.spans) {
    if (span.kind == SpanKind::kStep) step_ns[span.step] += span.dur_ns;
    if (span.kind == SpanKind::kTask) other_ns += span.dur_ns;
    const std::string kernel = KernelOf(profile, span);
    if (!kernel.empty()) op_ns[kernel].second += span.dur_ns;
  }
  for (const ProfileStep& step : profile.steps) op_ns[step.kernel].first += 1;
  const int64_t kernels = KernelUnionNs(profile);

  std::string out = absl::StrFormat("profile of %s: %s, %d runs, %zu steps, %zu stream row(s)\n",
                                    profile.label, profile.mode, profile.runs, profile.steps.size(),
                                    profile.rows.size() > 0 ? profile.rows.size() - 1 : 0);
  if (!profile.note.empty()) absl::StrAppend(&out, "note: ", profile.note, "\n");
  absl::StrAppendFormat(&out,
                        "wall %.1f us per run; kernels running %.1f us per run; outside kernels "
                        "%.1f%% of wall time (staging, dispatch, waits, other tasks %.1f us per "
                        "run)\n",
                        wall_per_run, static_cast<double>(kernels) / runs / 1e3,
                        100.0 - share(kernels), static_cast<double>(other_ns) / runs / 1e3);

  std::vector<size_t> order(profile.steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return step_ns[a] > step_ns[b]; });
  const size_t shown = std::min(order.size(), static_cast<size_t>(std::max(top, 0)));
  absl::StrAppendFormat(&out, "\ntop %zu steps by total time\n", shown);
  absl::StrAppendFormat(&out, "%4s  %-48s %-28s %10s %7s\n", "#", "step (node)", "kernel", "us/run",
                        "share");
  for (size_t k = 0; k < shown; ++k) {
    const ProfileStep& step = profile.steps[order[k]];
    absl::StrAppendFormat(&out, "%4d  %-48s %-28s %10.1f %6.1f%%\n", order[k], Tail(step.name, 48),
                          Tail(step.kernel, 28),
                          static_cast<double>(step_ns[order[k]]) / runs / 1e3,
                          share(step_ns[order[k]]));
  }

  std::vector<std::pair<std::string, std::pair<int, int64_t>>> ops(op_ns.begin(), op_ns.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  absl::StrAppend(&out, "\ntime per op type (kernel)\n");
  absl::StrAppendFormat(&out, "%-34s %6s %10s %7s\n", "kernel", "steps", "us/run", "share");
  for (const auto& [op, counts] : ops) {
    absl::StrAppendFormat(&out, "%-34s %6d %10.1f %6.1f%%\n", Tail(op, 34), counts.first,
                          static_cast<double>(counts.second) / runs / 1e3, share(counts.second));
  }
  absl::StrAppendFormat(&out, "%-34s %6s %10.1f %6.1f%%\n", "(outside kernels)", "",
                        static_cast<double>(wall - kernels) / runs / 1e3, share(wall - kernels));
  return out;
}

}  // namespace reprise::runtime::engine
