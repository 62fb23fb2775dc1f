// What a Profile (profiler.h) is shown as: a Chrome-trace JSON for Perfetto / chrome://tracing,
// and a text table of where the time went.
#ifndef REPRISE_RUNTIME_ENGINE_PROFILE_REPORT_H_
#define REPRISE_RUNTIME_ENGINE_PROFILE_REPORT_H_

#include <string>

#include "runtime/engine/profiler.h"

namespace reprise::runtime::engine {

/// The profile in the Chrome trace event format ({"traceEvents": [...]}): one process, a
/// thread_name metadata event per row (row 0 "host: runs", then one per stream), a complete
/// event ("ph": "X", ts and dur in microseconds) per run on row 0 and per task on its stream's
/// row. A plan step's event is named "<node> (<kernel>)" with args step, node, op, kernel, run,
/// and implementation where the kernel names one (ProfileStep::implementation).
std::string ProfileTraceJson(const Profile& profile);

/// A text table: the `top` steps by total time, the time per kernel op (fused ops by their own
/// names) and the share of the runs' wall time during which no kernel ran on any stream.
std::string ProfileTable(const Profile& profile, int top = 15);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_PROFILE_REPORT_H_
