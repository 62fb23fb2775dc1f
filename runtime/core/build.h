// Built instances: a ModelRI made without capture, named like CANN's aclmdlRIBuild* calls.
//
//   BuildBegin(device)                      ─▶ an empty instance being built (owned by the caller)
//   BindStream(ri, stream, HEAD | DEFAULT)  ─▶ asynchronous work issued to `stream` is recorded
//                                              into stream k of `ri` (k = bind order), not run
//   SwitchStream(value, op, rhs, dtype, true_stream, stream)
//                                           ─▶ records a jump on `stream`: when *value <op> *rhs
//                                              (both read as `dtype` at run time) the rest of
//                                              `stream` does not run and `true_stream` starts
//   ActiveStream(target, stream)            ─▶ records on `stream`: start `target` in parallel
//   EndTask(ri, stream)                     ─▶ closes `stream`'s task list (required for every
//                                              bound stream before BuildEnd)
//   BuildEnd(ri)                            ─▶ checks and seals: ready to execute
//   UnbindStream(ri, stream)                ─▶ after BuildEnd: `stream` runs eagerly again
//
// Execution, enumeration and DumpJson are those of a captured instance (model_ri.h,
// capture.h). A launch starts every HEAD stream; a DEFAULT stream runs only when a switch or an
// activate task of the launch starts it. Each stream starts at most once per launch (a second
// switch or activate to a stream that already started does nothing); the launch is complete
// when every started stream has finished. Streams of a launch run in parallel, ordered only by
// switch / activate and by events recorded and waited on inside the instance (a wait on a
// record of a stream that does not start in that launch never returns).
//
// Errors (nothing changes): binding a stream that is capturing, bound elsewhere, a default
// stream or of another device; a switch / activate issued on a stream that is not bound to an
// instance being built, or whose target is not bound to the same instance; any task on a stream
// after its EndTask. BuildEnd fails (the build stays open, so it can be fixed) when no stream is
// bound, none is HEAD, a bound stream was not ended, a task group or conditional body is still
// open, a DEFAULT stream can never start (no HEAD stream reaches it through switch / activate
// tasks: e.g. a switch on such a path), or the streams form a cycle of switch / activate tasks
// (it could never end: loop with a WHILE conditional task instead). Unsafe calls are not
// refused while building: a build is not a capture.
//
// Backends: native on the CPU. The CUDA backend does not build instances yet
// (runtime/core/cuda/cuda_device.h says why): BuildBegin returns UNIMPLEMENTED there, as it
// does on any backend that does not override it.
//
// Thread-safety: as capture: calls may come from any thread; a stream's tasks keep the order of
// the thread that issues them. Lifetimes: as captured instances (model_ri.h); `value` and `rhs`
// of a switch are borrowed and must outlive the instance's last execution.
#ifndef REPRISE_RUNTIME_CORE_BUILD_H_
#define REPRISE_RUNTIME_CORE_BUILD_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/runtime_types.h"
#include "runtime/core/stream.h"

namespace reprise::runtime {

/// A new instance being built on `device`, owned by the caller (destroying it before BuildEnd
/// abandons the build and unbinds its streams).
inline absl::StatusOr<std::unique_ptr<ModelRI>> BuildBegin(Device* device) {
  return device->BuildBegin();
}

inline absl::Status BindStream(ModelRI& instance, Stream* stream, StreamBinding binding) {
  return instance.BindStream(stream, binding);
}

inline absl::Status SwitchStream(const void* value, CompareOp compare, const void* rhs,
                                 SwitchDataType dtype, Stream* true_stream, Stream* stream) {
  return stream->SwitchStream(value, compare, rhs, dtype, true_stream);
}

inline absl::Status ActiveStream(Stream* target, Stream* stream) {
  return stream->ActiveStream(target);
}

inline absl::Status EndTask(ModelRI& instance, Stream* stream) { return instance.EndTask(stream); }

inline absl::Status BuildEnd(ModelRI& instance) { return instance.BuildEnd(); }

inline absl::Status UnbindStream(ModelRI& instance, Stream* stream) {
  return instance.UnbindStream(stream);
}

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_BUILD_H_
