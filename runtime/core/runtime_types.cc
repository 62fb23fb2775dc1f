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
    case TaskKind::kStreamSwitch:
      return "stream_switch";
    case TaskKind::kStreamActivate:
      return "stream_activate";
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

absl::string_view CompareOpName(CompareOp op) {
  switch (op) {
    case CompareOp::kEqual:
      return "equal";
    case CompareOp::kNotEqual:
      return "not_equal";
    case CompareOp::kGreater:
      return "greater";
    case CompareOp::kGreaterOrEqual:
      return "greater_or_equal";
    case CompareOp::kLess:
      return "less";
    case CompareOp::kLessOrEqual:
      return "less_or_equal";
  }
  return "unknown";
}

absl::string_view SwitchDataTypeName(SwitchDataType type) {
  switch (type) {
    case SwitchDataType::kInt32:
      return "int32";
    case SwitchDataType::kUint32:
      return "uint32";
    case SwitchDataType::kInt64:
      return "int64";
  }
  return "unknown";
}

}  // namespace reprise::runtime
