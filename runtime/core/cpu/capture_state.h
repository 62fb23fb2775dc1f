// Book-keeping of the CPU backend's recordings: a capture (of a top-level instance or of a
// conditional body) or a build (build.h), the streams taking part, and their vector clocks. The
// capture rules themselves (modes, unsafe calls, invalidation) are the core's capture registry
// (runtime/core/capture_registry.h); CaptureMutex() there guards everything here.
#ifndef REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_
#define REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/core/capture_registry.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime::cpu {

class CpuModelRI;
class CpuStream;
struct RiData;

/// One stream taking part in a capture or bound to a build.
struct CaptureStreamState {
  CpuStream* stream = nullptr;
  // Vector clock: clock[t] = how many of stream t's tasks this stream's next task comes after.
  std::vector<uint32_t> clock;
  int open_group = -1;
  // Builds: the stream's task list was closed by EndTask.
  bool task_end = false;
};

/// One capture or build. Guarded by CaptureMutex(). A capture is registered with the capture
/// registry while it is active; a build is not (it refuses no call).
struct CaptureState : CaptureRecord {
  std::unique_ptr<CpuModelRI> owned_instance;  // top-level capture: handed out by EndCapture
  CpuModelRI* instance = nullptr;              // the instance being filled
  RiData* data = nullptr;
  std::vector<CaptureStreamState> streams;  // capture: [0] is the origin; build: bind order
};

/// Element-wise max of two vector clocks, into `into` (grown as needed).
inline void MergeClock(std::vector<uint32_t>* into, const std::vector<uint32_t>& from) {
  if (into->size() < from.size()) into->resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CAPTURE_STATE_H_
