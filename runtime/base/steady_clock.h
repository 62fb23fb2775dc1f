// The monotonic clock every timing in the project reads.
#ifndef REPRISE_RUNTIME_BASE_STEADY_CLOCK_H_
#define REPRISE_RUNTIME_BASE_STEADY_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace reprise {

/// Nanoseconds on std::chrono::steady_clock (comparable only with each other).
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace reprise

#endif  // REPRISE_RUNTIME_BASE_STEADY_CLOCK_H_
