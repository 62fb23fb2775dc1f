#include "kernels/cpu/output_clearing.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernel_state.h"
#include "kernels/cpu/faster_way.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/steady_clock.h"

namespace reprise::kernels::cpu {
namespace {

constexpr size_t kLine = 64;

// Zeros [p, p + bytes) on the calling thread: non-temporal 16-byte stores over the aligned
// middle, plain ones at the ends.
void StreamZerosHere(char* p, size_t bytes) {
#if defined(__SSE2__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16);
  std::memset(p, 0, head);
  const __m128i zero = _mm_setzero_si128();
  size_t i = head;
  for (; i + 16 <= bytes; i += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p + i), zero);
  std::memset(p + i, 0, bytes - i);
  _mm_sfence();
#else
  std::memset(p, 0, bytes);
#endif
}

// Runs before the kernel: always (kOn), or where the runs timed each way say it is faster (kAuto).
class ClearingKernel final : public runtime::PreparedKernel {
 public:
  ClearingKernel(const runtime::PreparedKernel& kernel, std::vector<size_t> output_bytes,
                 size_t workspace_bytes, int threads, OutputClearing mode, uint64_t trial_phase)
      : kernel_(kernel),
        output_bytes_(std::move(output_bytes)),
        workspace_bytes_(workspace_bytes),
        threads_(threads),
        mode_(mode),
        alternatives_(FasterOfWays(kernel)),
        alternative_workspace_bytes_{WorkspaceToClear(alternatives_[0], workspace_bytes_),
                                     WorkspaceToClear(alternatives_[1], workspace_bytes_)},
        chooser_(alternatives_[0] != nullptr
                     ? FasterWay(/*ways=*/4, /*untimed_runs=*/2, /*seed_runs=*/1, trial_phase)
                     : FasterWay(/*ways=*/2, /*untimed_runs=*/1, /*seed_runs=*/2, trial_phase)) {}

  absl::string_view op() const override { return kernel_.op(); }
  const std::vector<runtime::TensorDesc>& outputs() const override { return kernel_.outputs(); }
  size_t workspace_bytes() const override { return kernel_.workspace_bytes(); }
  size_t output_storage_bytes(size_t i) const override { return kernel_.output_storage_bytes(i); }
  int in_place_input() const override { return kernel_.in_place_input(); }
  std::vector<size_t> input_offsets_in_output() const override {
    return kernel_.input_offsets_in_output();
  }
  std::string implementation() const override {
    return absl::StrCat(kernel_.implementation(), mode_ == OutputClearing::kOn
                                                      ? " (buffers cleared first)"
                                                      : " (buffers cleared first where faster)");
  }

  // With alternatives, this kernel chooses among them itself; else `kernel` may choose too.
  uint64_t settling_runs() const override {
    if (mode_ == OutputClearing::kOn) return kernel_.settling_runs();
    const uint64_t own = chooser_.settling_runs();
    return alternatives_[0] != nullptr ? own : std::max(own, kernel_.settling_runs());
  }

  absl::Status Run(const runtime::KernelArgs& args) const override {
    if (mode_ == OutputClearing::kOn) {
      Clear(args, workspace_bytes_);
      return kernel_.Run(args);
    }
    const FasterWay::Turn turn = chooser_.Next();
    const int64_t start = SteadyNowNs();
    absl::Status status;
    if (alternatives_[0] == nullptr) {
      if (turn.way == 1) Clear(args, workspace_bytes_);
      status = kernel_.Run(args);
    } else {
      if (turn.way >= 2) Clear(args, alternative_workspace_bytes_[turn.way % 2]);
      status = alternatives_[turn.way % 2]->Run(args);
    }
    chooser_.Record(turn, SteadyNowNs() - start);
    return status;
  }

 private:
  // The part of the workspace that `kernel` (one of a FasterOf kernel's two) uses, where that is
  // large enough to clear: clearing the other kernel's larger workspace too costs later steps
  // their cached data.
  static size_t WorkspaceToClear(const runtime::PreparedKernel* kernel, size_t workspace_bytes) {
    if (kernel == nullptr) return 0;
    const size_t bytes = std::min(workspace_bytes, kernel->workspace_bytes());
    return bytes >= kClearOutputMinBytes ? bytes : 0;
  }

  void Clear(const runtime::KernelArgs& args, size_t workspace_bytes) const {
    for (size_t i = 0; i < output_bytes_.size(); ++i) {
      if (output_bytes_[i] > 0) StreamZeros(args.outputs[i], output_bytes_[i], threads_);
    }
    if (workspace_bytes > 0) StreamZeros(args.workspace, workspace_bytes, threads_);
  }

  const runtime::PreparedKernel& kernel_;
  const std::vector<size_t> output_bytes_;
  const size_t workspace_bytes_;
  const int threads_;
  const OutputClearing mode_;
  // The two kernels of a FasterOf kernel (faster_way.h), else nulls. Whether clearing pays
  // and which of the two is faster depend on each other (a two-stage kernel's intermediate sits
  // in the cleared workspace), so the four ways are chosen together.
  const std::array<const runtime::PreparedKernel*, 2> alternatives_;
  const std::array<size_t, 2> alternative_workspace_bytes_;  // each one's to clear
  // Without alternatives: way 0 runs the kernel as it is, way 1 clears first, after one untimed
  // run (first touch, oneDNN's lazy set-up). With them: way w runs alternative w % 2, cleared
  // first from 2 on, after an untimed run of each alternative.
  const FasterWay chooser_;
};

}  // namespace

void StreamZeros(void* data, size_t bytes, int threads) {
  char* p = static_cast<char*>(data);
  const int64_t lines = static_cast<int64_t>((bytes + kLine - 1) / kLine);
  // About 3 ns a line at memory speed; ranges of whole 4 KiB pages.
  ParallelFor(
      lines, threads, 3.0,
      [&](int64_t begin, int64_t end) {
        const size_t from = static_cast<size_t>(begin) * kLine;
        const size_t to = std::min(bytes, static_cast<size_t>(end) * kLine);
        StreamZerosHere(p + from, to - from);
      },
      4096 / kLine);
}

OutputClearing OutputClearingFor(const runtime::KernelRegistry& registry, int threads) {
  const CpuKernelState* state = CpuKernelStateOf(registry);
  if (threads < 2 || state == nullptr) return OutputClearing::kOff;
  return state->options().clear_outputs;
}

std::unique_ptr<runtime::PreparedKernel> ClearingOutputsFirst(const runtime::PreparedKernel& kernel,
                                                              std::vector<size_t> output_bytes,
                                                              size_t workspace_bytes, int threads,
                                                              OutputClearing mode,
                                                              uint64_t trial_phase) {
  return std::make_unique<ClearingKernel>(kernel, std::move(output_bytes), workspace_bytes, threads,
                                          mode, trial_phase);
}

}  // namespace reprise::kernels::cpu
