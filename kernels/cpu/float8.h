// Float8: eight floats in one vector, for our own per-instruction-set loops (pool.cc,
// conv_tap_regions.cc).
#ifndef REPRISE_KERNELS_CPU_FLOAT8_H_
#define REPRISE_KERNELS_CPU_FLOAT8_H_

namespace reprise::kernels::cpu {

/// Eight floats in one vector (GCC's vector extension: one AVX register, two SSE ones), for the
/// per-instruction-set copies of loops that GCC leaves scalar otherwise. Moved from and to memory
/// of any alignment with __builtin_memcpy; never a function's argument or result (that would
/// change the baseline copy's ABI).
typedef float Float8 __attribute__((vector_size(32)));

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FLOAT8_H_
