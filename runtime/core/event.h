// Event: ordering between streams and completion signals to the host.
#ifndef REPRISE_RUNTIME_CORE_EVENT_H_
#define REPRISE_RUNTIME_CORE_EVENT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

/// An event made by Device::CreateEvent; owned by the caller, and it must outlive every task
/// that records, waits on or resets it (eager tasks and recorded instances alike).
///
/// Semantics (CANN's, where CANN and CUDA differ): an event is *recorded* once a record task
/// has run and until a reset task runs. A wait task binds, when it is issued, to the latest
/// record issued before it in host order, and blocks until that record has run and the event
/// is in the recorded state; a wait issued before any record blocks until one runs (CUDA would
/// not wait). Stream::RecordEvent / WaitEvent / ResetEvent issue those tasks; an instance
/// launch issues the external records and waits it holds at ExecuteAsync time.
///
/// Inside a capture, recording an event that is not kExternal makes it an internal fork/join
/// event of the instance; waiting on it from another stream pulls that stream into the capture.
///
/// Thread-safety: all methods may be called from any thread.
class Event {
 public:
  virtual ~Event() = default;

  /// True when created with EventFlags::kExternal.
  virtual bool external() const = 0;

  /// Blocks the host until the latest record issued before this call has run; OK at once when
  /// no record was ever issued. A potentially unsafe call (capture.h); illegal in every mode
  /// for an event recorded inside an active capture.
  virtual absl::Status Synchronize() = 0;

  /// True when every record issued so far has run. Unsafe like Synchronize.
  virtual absl::StatusOr<bool> Query() = 0;
};

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_EVENT_H_
