// Clearing a step's outputs with non-temporal stores before its kernel runs, for the CPUs where
// a core's stores to lines another core has read are slow.
//
// A stream's threads hand tensors to each other through the arena: a kernel's output often lands
// in bytes that the stream's other thread read a few steps before (as an earlier tensor). Where
// the two cores do not share their caches (this project's two-core AMD EPYC VM, most of the
// time), a store to such a line waits for the other core: BM_RewriteAcrossCores rewrote 12 MiB
// that the other thread had read in 2.55 ms, against 0.12 ms for lines the writing thread itself
// had read, and 0.39 ms when the lines were first zeroed with non-temporal stores (which take no
// ownership of the old line). Where no other core holds the lines, the same clearing only adds
// memory traffic (0.32 against 0.12 ms above; DenseNet-121 at batch 1 ran 34 % slower with it
// on every run, in a stretch where this VM showed no such cost). So each step measures both ways
// as it runs and keeps the faster (ClearingOutputsFirst).
#ifndef REPRISE_KERNELS_CPU_OUTPUT_CLEARING_H_
#define REPRISE_KERNELS_CPU_OUTPUT_CLEARING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Outputs and workspaces from this size on are cleared. Smaller ones gained nothing measurable
/// (MobileNetV3-S, ShuffleNetV2, RegNetX at batch 1 on two threads: 64 KiB against 128 KiB).
inline constexpr size_t kClearOutputMinBytes = size_t{128} << 10;

/// Writes zeros over [data, data + bytes) with non-temporal stores where the CPU has them (plain
/// ones at an unaligned head and tail, or throughout elsewhere), split over up to `threads`
/// threads by ParallelFor.
void StreamZeros(void* data, size_t bytes, int threads);

/// How the steps of a plan of `threads` intra-op threads prepared on `registry` clear their
/// outputs: kOff for one thread or a registry without the CPU kernels' state, else the
/// registry's CpuKernelOptions::clear_outputs.
OutputClearing OutputClearingFor(const runtime::KernelRegistry& registry, int threads);

/// `kernel` (borrowed: it must outlive the result) behind a kernel that StreamZeros output i
/// over output_bytes[i] bytes (0: not that output) and its workspace over `workspace_bytes`
/// (0: not), on `threads` threads, before running it: on every run with OutputClearing::kOn;
/// with kAuto on the runs where that has been the faster way, as FasterWay times the runs
/// (faster_way.h; a plan gives each step its own phase). Where `kernel` is a FasterOf kernel,
/// kAuto chooses among its two kernels, each cleared first or not, at once (four ways): which of
/// them is faster depends on the clearing; a cleared way zeros only the workspace its kernel
/// uses (at most `workspace_bytes`, if kClearOutputMinBytes or more). Everything else is
/// `kernel`'s; its implementation() gains " (buffers cleared first)" or " (buffers cleared first
/// where faster)". Thread-safe like `kernel`: concurrent runs share the times.
std::unique_ptr<runtime::PreparedKernel> ClearingOutputsFirst(const runtime::PreparedKernel& kernel,
                                                              std::vector<size_t> output_bytes,
                                                              size_t workspace_bytes, int threads,
                                                              OutputClearing mode,
                                                              uint64_t trial_phase = 0);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_OUTPUT_CLEARING_H_
