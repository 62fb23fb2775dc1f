// A per-step profiler: runs a model's plan for one set of inputs several times and times every
// step, on the captured instance's replay (through the core's task observer) or on the eager step
// loop. profile_report.h turns the result into a Chrome-trace JSON and a text table.
#ifndef REPRISE_RUNTIME_ENGINE_PROFILER_H_
#define REPRISE_RUNTIME_ENGINE_PROFILER_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine {

/// How ProfileModel runs.
struct ProfileOptions {
  int iterations = 10;  // runs recorded
  int warmup = 1;       // runs before them, not recorded (besides the first, which captures)
  /// True: capture the plan into an instance and time its replay, task by task. False, or when
  /// the capture or the task timing is refused: time the eager step loop on the calling thread.
  bool replay = true;
  /// The profiled plan's intra-op threads; 0: the model's (ModelOptions::intra_op_threads). A
  /// caller whose session chose fewer (StreamInstanceInfo::intra_op_threads) passes them here.
  int intra_op_threads = 0;
};

/// A plan step as the profile names it.
struct ProfileStep {
  std::string name;  // the node's name; "<op>#<index>" for an unnamed node
  std::string op;    // the node's op (the internal name of a fused op, e.g. com.reprise.FusedConv)
  std::string kernel;  // the op of the kernel that ran (PreparedKernel::op)
  // How the kernel runs where it has several ways (PreparedKernel::implementation: oneDNN's
  // primitive, e.g. "jit:avx512_core", or ours, e.g. "reprise_dw:avx512"); empty otherwise.
  std::string implementation;
};

/// What a span covers.
enum class SpanKind {
  kRun,     // one whole run: staging the inputs, executing, waiting, reading the outputs
  kStep,    // one plan step's kernel
  kKernel,  // a kernel task of no top-level step (inside an If / Loop body)
  kTask,    // another task of the instance (a copy, an event, a host function, a conditional)
};

/// One timed interval. Times are nanoseconds since the first recorded run began.
struct ProfileSpan {
  SpanKind kind = SpanKind::kStep;
  int run = 0;       // which recorded run (0-based)
  int row = 0;       // index into Profile::rows
  int step = -1;     // kStep: index into Profile::steps; else -1
  std::string name;  // kKernel: the kernel's op; kTask: the task kind; kRun: "run <n>"
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
};

/// The result of ProfileModel. Row 0 is the calling thread (the runs); each further row is one
/// thread that ran tasks, that is one stream of the instance ("stream 0", ...), or the eager
/// step loop.
struct Profile {
  std::string label;  // what was profiled, e.g. the model's path
  std::string mode;   // "replay" or "eager"
  std::string note;   // why the eager loop ran when replay was asked; else empty
  int runs = 0;
  std::vector<ProfileStep> steps;  // the plan's steps, in order
  std::vector<std::string> rows;
  std::vector<ProfileSpan> spans;  // in the order recorded
};

/// Plans `model` for `inputs` (matched as StreamSession::Run does) on a stream of its own on
/// `device`, then runs it options.warmup + 1 + options.iterations times and records the last
/// options.iterations. Uses no session and no serving stream, so nothing else pays for it.
/// `device` and `model` are borrowed for the call. Errors name the input or the failing node.
absl::StatusOr<Profile> ProfileModel(const Model& model, Device* device,
                                     const std::vector<NamedTensor>& inputs,
                                     const ProfileOptions& options, std::string label);

/// Fills `t` (bytes already sized) with uniform values suited to its type: floats in [-1, 1),
/// integers in [0, 9], bools; strings stay empty.
void FillRandom(TensorValue* t, std::mt19937* rng);

/// Inputs for a profile: each graph input of its declared shape, unknown dims taken as 1,
/// filled by FillRandom from a fixed seed. Error naming the input when its size overflows.
absl::StatusOr<std::vector<NamedTensor>> MakeProfileInputs(const Model& model);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_PROFILER_H_
