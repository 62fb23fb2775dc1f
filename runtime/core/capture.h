// The capture API (capture_semantics.md): free functions over the Stream / ModelRI interfaces,
// named like CANN's aclmdlRICapture* calls.
//
// Modes and potentially unsafe calls (a synchronous copy or memset, a copy between pageable host
// memory and the device, a stream / event / device synchronise or query, an allocation or free):
//
//   capture mode   | refused while the capture is ACTIVE
//   GLOBAL         | an unsafe call from any thread whose own mode is not RELAXED
//   THREAD_LOCAL   | an unsafe call from the capturing thread, unless its own mode is RELAXED
//   RELAXED        | nothing
//
// A refused call returns FAILED_PRECONDITION naming the call and the capture, and the capture
// becomes INVALIDATED (EndCapture then fails). A permitted unsafe call runs at once and is not
// recorded. Synchronising or querying the capturing stream itself, or an event recorded inside
// the capture, is refused in every mode (and invalidates the capture).
//
// These rules hold across backends: they are kept once, by the capture registry
// (capture_registry.h), against the captures active on every backend's streams, so a GLOBAL
// capture on a CPU stream refuses an unsafe call made on a CUDA stream, and the other way round.
// Instances can also be built without capture (build.h).
#ifndef REPRISE_RUNTIME_CORE_CAPTURE_H_
#define REPRISE_RUNTIME_CORE_CAPTURE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/runtime_types.h"
#include "runtime/core/stream.h"

namespace reprise::runtime {

/// Starts recording the tasks put on `stream`. Error (nothing changes) when the stream is
/// already capturing or is its device's default stream.
inline absl::Status BeginCapture(Stream* stream, CaptureMode mode) {
  return stream->BeginCapture(mode);
}

/// Ends the capture and returns the instance (owned by the caller). Fails, with no instance,
/// when the stream is not capturing (nothing changes), when called from another thread than
/// BeginCapture's in GLOBAL / THREAD_LOCAL mode (the capture goes on), when the capture was
/// INVALIDATED or a forked stream has not rejoined (the stream goes back to NONE).
inline absl::StatusOr<std::unique_ptr<ModelRI>> EndCapture(Stream* stream) {
  return stream->EndCapture();
}

/// NONE / ACTIVE / INVALIDATED, and the instance being filled.
inline CaptureInfo GetCaptureInfo(Stream* stream) { return stream->GetCaptureInfo(); }

/// Sets the calling thread's mode to `*mode` and writes the previous one into `*mode`. A
/// thread's mode starts as GLOBAL; it applies to unsafe calls on every backend. Defined by the
/// capture registry (capture_registry.cc).
void ExchangeThreadCaptureMode(CaptureMode* mode);

/// The calling thread's current mode.
CaptureMode ThreadCaptureMode();

inline absl::Status ExecuteAsync(ModelRI& instance, Stream* stream) {
  return instance.ExecuteAsync(stream);
}

inline std::string DumpJson(const ModelRI& instance, DumpFlags flags) {
  return instance.DumpJson(flags);
}

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_CAPTURE_H_
