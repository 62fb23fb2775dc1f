// DumpJson for the CPU backend's instances (capture_semantics.md §5).
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/cpu/cpu_model_ri.h"
#include "runtime/core/data_type.h"
#include "runtime/core/json_text.h"

namespace reprise::runtime::cpu {
namespace {

void AppendInstance(const RiData& data, bool verbose, int indent, std::string* out);

void AppendTask(const RiData& data, const Task& task, bool verbose, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  absl::StrAppend(out, pad, "{\"seq\": ", task.seq,
                  ", \"kind\": ", JsonQuote(TaskKindName(task.kind)));
  if (task.group >= 0) absl::StrAppend(out, ", \"group\": ", task.group);
  switch (task.kind) {
    case TaskKind::kKernel: {
      absl::StrAppend(out, ", \"op\": ", JsonQuote(task.target.kernel->op()));
      if (!verbose) break;
      const void* const* args = data.ptrs.data() + task.args;
      absl::StrAppend(out, ", \"inputs\": [");
      for (uint32_t i = 0; i < task.num_inputs; ++i) {
        absl::StrAppend(out, i ? ", " : "", JsonPointer(args[i]));
      }
      absl::StrAppend(out, "], \"outputs\": [");
      const auto& descs = task.target.kernel->outputs();
      for (uint32_t i = 0; i < task.num_outputs; ++i) {
        absl::StrAppend(out, i ? ", " : "",
                        "{\"address\": ", JsonPointer(args[task.num_inputs + i]));
        if (i < descs.size()) {
          absl::StrAppend(out, ", \"dtype\": ", JsonQuote(DataTypeName(descs[i].dtype)),
                          ", \"shape\": ", JsonQuote(ShapeToString(descs[i].shape)));
        }
        absl::StrAppend(out, "}");
      }
      absl::StrAppend(out,
                      "], \"workspace\": ", JsonPointer(args[task.num_inputs + task.num_outputs]),
                      ", \"workspace_bytes\": ", task.target.kernel->workspace_bytes());
      break;
    }
    case TaskKind::kCopy:
      if (verbose) {
        absl::StrAppend(
            out, ", \"direction\": ", JsonQuote(CopyKindName(static_cast<CopyKind>(task.sub))),
            ", \"dst\": ", JsonPointer(task.dst), ", \"src\": ", JsonPointer(task.src),
            ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kMemset:
      if (verbose) {
        absl::StrAppend(out, ", \"dst\": ", JsonPointer(task.dst), ", \"value\": ", task.aux,
                        ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kEventRecord:
    case TaskKind::kEventWait:
    case TaskKind::kEventReset:
      if (task.kind != TaskKind::kEventReset) {
        absl::StrAppend(out, ", \"external\": ", task.sub == kExternalEvent ? "true" : "false");
      }
      if (verbose) {
        if (task.sub == kSlotEvent && task.kind != TaskKind::kEventReset) {
          absl::StrAppend(out, ", \"slot\": ", task.aux);
        } else {
          absl::StrAppend(out, ", \"event\": ", JsonPointer(task.target.event));
        }
      }
      break;
    case TaskKind::kHostFunc:
      if (verbose) {
        absl::StrAppend(out, ", \"user_data\": ", JsonPointer(task.dst));
      }
      break;
    case TaskKind::kConditional: {
      const Conditional& cond = data.conditionals[task.aux];
      absl::StrAppend(out, ", \"type\": ", JsonQuote(ConditionalKindName(cond.kind)));
      if (verbose) absl::StrAppend(out, ", \"condition\": ", JsonPointer(cond.value));
      absl::StrAppend(out, ", \"bodies\": [\n");
      for (size_t b = 0; b < cond.bodies.size(); ++b) {
        AppendInstance(*cond.bodies[b], verbose, indent + 2, out);
        absl::StrAppend(out, b + 1 < cond.bodies.size() ? ",\n" : "\n");
      }
      absl::StrAppend(out, pad, "]");
      break;
    }
  }
  absl::StrAppend(out, "}");
}

void AppendInstance(const RiData& data, bool verbose, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  size_t total = 0;
  for (const auto& tasks : data.streams) total += tasks.size();
  absl::StrAppend(out, pad, "{\"instance\": ", data.id,
                  ", \"child\": ", data.child ? "true" : "false",
                  ", \"num_streams\": ", data.streams.size(), ", \"num_tasks\": ", total, ",\n");
  absl::StrAppend(out, pad, " \"conditions\": [");
  for (size_t c = 0; c < data.conditions.size(); ++c) {
    const ConditionSlot& slot = *data.conditions[c];
    absl::StrAppend(out, c ? ", " : "", "{\"index\": ", c, ", \"default\": ", slot.default_value,
                    ", \"assign_default\": ", slot.assign_default ? "true" : "false", "}");
  }
  absl::StrAppend(out, "],\n", pad, " \"groups\": [");
  for (size_t g = 0; g < data.groups.size(); ++g) {
    const GroupRange& range = data.groups[g];
    absl::StrAppend(out, g ? ", " : "", "{\"index\": ", g, ", \"stream\": ", range.stream,
                    ", \"first\": ", range.first, ", \"count\": ", range.count, "}");
  }
  absl::StrAppend(out, "],\n", pad, " \"streams\": [\n");
  for (size_t s = 0; s < data.streams.size(); ++s) {
    absl::StrAppend(out, pad, "  {\"index\": ", s, ", \"tasks\": [\n");
    const auto& tasks = data.streams[s];
    for (size_t i = 0; i < tasks.size(); ++i) {
      AppendTask(data, tasks[i], verbose, indent + 4, out);
      absl::StrAppend(out, i + 1 < tasks.size() ? ",\n" : "\n");
    }
    absl::StrAppend(out, pad, "  ]}", s + 1 < data.streams.size() ? ",\n" : "\n");
  }
  absl::StrAppend(out, pad, " ]}");
}

}  // namespace

std::string DumpRiJson(const RiData& data, bool verbose) {
  std::string out;
  AppendInstance(data, verbose, 0, &out);
  out += "\n";
  return out;
}

}  // namespace reprise::runtime::cpu
