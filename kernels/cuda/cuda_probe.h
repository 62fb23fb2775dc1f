// A trivial CUDA entry point that proves the CUDA toolchain builds and links.
#ifndef REPRISE_KERNELS_CUDA_CUDA_PROBE_H_
#define REPRISE_KERNELS_CUDA_CUDA_PROBE_H_

#include <cstddef>
#include <string>

namespace reprise::kernels::cuda {

/// Number of visible CUDA devices; 0 when there is none or the driver is missing, in which case
/// `why` (if not null) receives the driver's message.
int DeviceCount(std::string* why);

/// Adds `value` to each of the `n` floats of the host array `data` on device 0, returning the
/// CUDA error string ("" on success).
std::string AddOnDevice(float* data, size_t n, float value);

}  // namespace reprise::kernels::cuda

#endif  // REPRISE_KERNELS_CUDA_CUDA_PROBE_H_
