#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

absl::string_view TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kCopy:
      return "copy";
    case TaskKind::kMemset:
      return "memset";
    case TaskKind::kKernel:
      return "kernel";
    case TaskKind::kEventRecord:
      return "event_record";
    case TaskKind::kEventWait:
      return "event_wait";
    case TaskKind::kEventReset:
      return "event_reset";
    case TaskKind::kHostFunc:
      return "host_function";
    case TaskKind::kConditional:
      return "conditional";
  }
  return "unknown";
}

absl::string_view CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "h2d";
    case CopyKind::kDeviceToHost:
      return "d2h";
    case CopyKind::kDeviceToDevice:
      return "d2d";
    case CopyKind::kHostToHost:
      return "h2h";
  }
  return "unknown";
}

absl::string_view CaptureModeName(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kGlobal:
      return "global";
    case CaptureMode::kThreadLocal:
      return "thread_local";
    case CaptureMode::kRelaxed:
      return "relaxed";
  }
  return "unknown";
}

absl::string_view CaptureStatusName(CaptureStatus status) {
  switch (status) {
    case CaptureStatus::kNone:
      return "none";
    case CaptureStatus::kActive:
      return "active";
    case CaptureStatus::kInvalidated:
      return "invalidated";
  }
  return "unknown";
}

absl::string_view ConditionalKindName(ConditionalKind kind) {
  switch (kind) {
    case ConditionalKind::kIf:
      return "if";
    case ConditionalKind::kWhile:
      return "while";
    case ConditionalKind::kSwitch:
      return "switch";
  }
  return "unknown";
}

}  // namespace reprise::runtime
