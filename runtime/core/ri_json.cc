// The instance JSON writer. Layout (every backend):
//   {"instance": ID, "backend": "cpu", "child": false, ["built": true,] "num_streams": N,
//    "num_tasks": T, "conditions": [...], "groups": [...],
//    "streams": [{"index": 0, ["head": true,] "tasks": [{"seq": 0, "kind": "copy", ...}]}]
//    [, backend extras]}
#include "runtime/core/ri_json.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/data_type.h"
#include "runtime/core/json_text.h"

namespace reprise::runtime {
namespace {

const char* Bool(bool value) { return value ? "true" : "false"; }

void AppendInstance(const RiEnumeration& ri, bool verbose, int indent, std::string* out);

void AppendKernelArguments(const RiTaskView& task, std::string* out) {
  absl::StrAppend(out, ", \"inputs\": [");
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    absl::StrAppend(out, i ? ", " : "", JsonPointer(task.inputs[i]));
  }
  absl::StrAppend(out, "], \"outputs\": [");
  for (size_t i = 0; i < task.outputs.size(); ++i) {
    absl::StrAppend(out, i ? ", " : "", "{\"address\": ", JsonPointer(task.outputs[i]));
    if (task.kernel != nullptr && i < task.kernel->outputs().size()) {
      const TensorDesc& desc = task.kernel->outputs()[i];
      absl::StrAppend(out, ", \"dtype\": ", JsonQuote(DataTypeName(desc.dtype)),
                      ", \"shape\": ", JsonQuote(ShapeToString(desc.shape)));
    }
    absl::StrAppend(out, "}");
  }
  absl::StrAppend(out, "], \"workspace\": ", JsonPointer(task.workspace));
  if (task.kernel != nullptr) {
    absl::StrAppend(out, ", \"workspace_bytes\": ", task.kernel->workspace_bytes());
  }
}

void AppendTask(const RiEnumeration& ri, int stream, size_t index, bool verbose, int indent,
                std::string* out) {
  const RiTaskView task = ri.Task(stream, index);
  const std::string pad(indent, ' ');
  absl::StrAppend(out, pad, "{\"seq\": ", task.seq,
                  ", \"kind\": ", JsonQuote(TaskKindName(task.kind)));
  if (task.group >= 0) absl::StrAppend(out, ", \"group\": ", task.group);
  switch (task.kind) {
    case TaskKind::kKernel:
      absl::StrAppend(out, ", \"op\": ", JsonQuote(task.op));
      if (verbose) AppendKernelArguments(task, out);
      break;
    case TaskKind::kCopy:
      if (verbose) {
        absl::StrAppend(out, ", \"direction\": ", JsonQuote(CopyKindName(task.copy_kind)),
                        ", \"dst\": ", JsonPointer(task.dst), ", \"src\": ", JsonPointer(task.src),
                        ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kMemset:
      if (verbose) {
        absl::StrAppend(out, ", \"dst\": ", JsonPointer(task.dst), ", \"value\": ", task.value,
                        ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kEventRecord:
    case TaskKind::kEventWait:
    case TaskKind::kEventReset:
      if (task.kind != TaskKind::kEventReset) {
        absl::StrAppend(out, ", \"external\": ", Bool(task.external));
      }
      if (verbose) {
        if (task.slot >= 0 && task.kind != TaskKind::kEventReset) {
          absl::StrAppend(out, ", \"slot\": ", task.slot);
        } else {
          absl::StrAppend(out, ", \"event\": ", JsonPointer(task.event));
        }
      }
      break;
    case TaskKind::kHostFunc:
      if (verbose) absl::StrAppend(out, ", \"user_data\": ", JsonPointer(task.user_data));
      break;
    case TaskKind::kConditional: {
      absl::StrAppend(out, ", \"type\": ", JsonQuote(ConditionalKindName(task.conditional)));
      if (verbose) absl::StrAppend(out, ", \"condition\": ", JsonPointer(task.condition));
      absl::StrAppend(out, ", \"bodies\": [\n");
      for (size_t b = 0; b < task.bodies.size(); ++b) {
        AppendInstance(*task.bodies[b], verbose, indent + 2, out);
        absl::StrAppend(out, b + 1 < task.bodies.size() ? ",\n" : "\n");
      }
      absl::StrAppend(out, pad, "]");
      break;
    }
    case TaskKind::kStreamSwitch:
      absl::StrAppend(out, ", \"target\": ", task.target_stream,
                      ", \"compare\": ", JsonQuote(CompareOpName(task.compare)),
                      ", \"dtype\": ", JsonQuote(SwitchDataTypeName(task.dtype)));
      if (verbose) {
        absl::StrAppend(out, ", \"value\": ", JsonPointer(task.src),
                        ", \"rhs\": ", JsonPointer(task.rhs));
      }
      break;
    case TaskKind::kStreamActivate:
      absl::StrAppend(out, ", \"target\": ", task.target_stream);
      break;
  }
  ri.AppendTaskExtras(stream, index, out);
  absl::StrAppend(out, "}");
}

void AppendInstance(const RiEnumeration& ri, bool verbose, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  const size_t num_streams = ri.NumStreams();
  size_t total = 0;
  for (size_t s = 0; s < num_streams; ++s) total += ri.NumTasks(static_cast<int>(s));
  absl::StrAppend(out, pad, "{\"instance\": ", ri.id(), ", \"backend\": ", JsonQuote(ri.backend()),
                  ", \"child\": ", Bool(ri.child()));
  if (ri.built()) absl::StrAppend(out, ", \"built\": true");
  absl::StrAppend(out, ", \"num_streams\": ", num_streams, ", \"num_tasks\": ", total, ",\n");
  absl::StrAppend(out, pad, " \"conditions\": [");
  for (size_t c = 0; c < ri.NumConditions(); ++c) {
    const RiConditionView condition = ri.Condition(c);
    absl::StrAppend(out, c ? ", " : "", "{\"index\": ", c,
                    ", \"default\": ", condition.default_value,
                    ", \"assign_default\": ", Bool(condition.assign_default), "}");
  }
  absl::StrAppend(out, "],\n", pad, " \"groups\": [");
  for (size_t g = 0; g < ri.NumGroups(); ++g) {
    const RiGroupView group = ri.Group(g);
    absl::StrAppend(out, g ? ", " : "", "{\"index\": ", g, ", \"stream\": ", group.stream,
                    ", \"first\": ", group.first, ", \"count\": ", group.count, "}");
  }
  absl::StrAppend(out, "],\n", pad, " \"streams\": [\n");
  for (size_t s = 0; s < num_streams; ++s) {
    const int stream = static_cast<int>(s);
    absl::StrAppend(out, pad, "  {\"index\": ", s);
    if (ri.HeadStream(stream)) absl::StrAppend(out, ", \"head\": true");
    absl::StrAppend(out, ", \"tasks\": [\n");
    const size_t num_tasks = ri.NumTasks(stream);
    for (size_t i = 0; i < num_tasks; ++i) {
      AppendTask(ri, stream, i, verbose, indent + 4, out);
      absl::StrAppend(out, i + 1 < num_tasks ? ",\n" : "\n");
    }
    absl::StrAppend(out, pad, "  ]}", s + 1 < num_streams ? ",\n" : "\n");
  }
  absl::StrAppend(out, pad, " ]");
  ri.AppendInstanceExtras(out);
  absl::StrAppend(out, "}");
}

}  // namespace

std::string WriteRiJson(const RiEnumeration& instance, DumpFlags flags) {
  std::string out;
  AppendInstance(instance, flags == DumpFlags::kVerbose, 0, &out);
  out += "\n";
  return out;
}

}  // namespace reprise::runtime
