// reprise-run: loads an ONNX model into the engine, runs it on given or generated inputs,
// writes the outputs as .npy and prints timings (in the spirit of trtexec).
//
//   reprise-run --model M.onnx [--input NAME=FILE.npy | NAME=random | NAME=zeros | FILE.npy]...
//               [--shape NAME=1x3x224x224]... [--output-dir DIR] [--mode eager|replay]
//               [--iterations N] [--warmup N] [--threads N] [--branch-streams N]
//               [--choose-threads on|off] [--dump-ri FILE.json] [--json] [--profile FILE.json]
//               [--profile-top N]
//               [--conv-winograd on|off] [--conv-taps on|off] [--conv-tap-regions on|off]
//               [--conv-depthwise on|off] [--conv-chain-layout auto|nhwc]
//               [--clear-outputs auto|on|off]
//   reprise-run --list-ops
//
// --list-ops prints every op a backend has a kernel for (docs/operators.md adds the conformance
// results). Inputs not given are random. A generated input takes its shape from --shape, else from
// the model's declaration (which must then be fully known). --threads is the kernels' intra-op
// thread count; --branch-streams caps the streams a replay forks independent branches onto
// (ModelOptions::max_branch_streams: 1, the default, never forks; 0 as many as --threads; the
// "streams" of the output says how many the plan uses). --choose-threads off keeps the plan on
// --threads; on (the default) the session times a small model's plan against plans of fewer
// threads and keeps the fastest (StreamSessionOptions::choose_threads; "plan_threads" and
// "threads_choice" of the output say what it chose and why). Runs go through a StreamSession on
// the CPU device of the runtime core:
// --mode replay (the default) captures the first run into a model runtime instance and replays
// it; --mode eager launches every step on the stream. Timings cover one run each after the
// first (which plans and captures, then replays until the kernels' timed choices are made; its
// plan, capture and settling times are reported, StreamSessionOptions::settle_budget_ns): staging
// the inputs, executing, waiting for the stream, copying the outputs out. --dump-ri writes the
// instance's verbose JSON dump. --profile then profiles as many runs (runtime/engine/profiler.h:
// the instance's replay timed task by task, or the eager step loop with --mode eager), writes a
// Chrome-trace JSON (Perfetto, chrome://tracing) and prints a table of the --profile-top steps
// (default 15), the time per op type and the share outside kernels (to stderr with --json).
// --conv-winograd, --conv-taps, --conv-tap-regions, --conv-depthwise and --conv-chain-layout are
// the CPU device's kernel options (the daemon's `kernels:` config section): off keeps
// convolutions off oneDNN's Winograd algorithm, off the 1x1 convolution over the input gathered
// per tap, off the per-tap products over the taps' regions, or depthwise ones on oneDNN's kernel
// instead of ours; nhwc keeps conv chains channels-last (the layout of a
// CPU without AVX2), for comparisons. --clear-outputs (also a kernel option) says whether a plan
// of two or more threads clears its steps' large outputs and workspaces with non-temporal stores
// first (kernels/cpu/output_clearing.h): auto (the default) each step where its own timed runs
// say that is faster.
// Exit status: 0 on success, 1 on a run-time error, 2 on a usage
// error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_kernels.h"
#if REPRISE_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif
#include "runtime/base/heap_policy.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/device.h"
#include "runtime/engine/model.h"
#include "runtime/engine/npy.h"
#include "runtime/engine/onnx_import.h"
#include "runtime/engine/profile_report.h"
#include "runtime/engine/profiler.h"
#include "runtime/engine/stream_session.h"

namespace reprise::tools {
namespace {

using runtime::DataType;
using runtime::Shape;
using runtime::TensorValue;
using runtime::engine::ExecutionPlan;
using runtime::engine::Model;
using runtime::engine::NamedTensor;
using runtime::engine::StreamInstanceInfo;
using runtime::engine::StreamRunInfo;
using runtime::engine::StreamSession;
using runtime::engine::Value;

struct Options {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;  // name (may be empty) → source
  absl::flat_hash_map<std::string, Shape> shapes;
  std::string output_dir;
  std::string mode = "replay";
  int iterations = 10;
  int warmup = 1;
  int threads = 1;
  int branch_streams = 1;
  bool choose_threads = true;
  std::string dump_ri;
  std::string profile;
  int profile_top = 15;
  bool json = false;
  bool list_ops = false;
  kernels::cpu::CpuKernelOptions kernel_options;
};

constexpr char kUsage[] =
    "usage: reprise-run --model M.onnx [--input NAME=FILE.npy|NAME=random|NAME=zeros|FILE.npy]\n"
    "                   [--shape NAME=1x3x224x224] [--output-dir DIR] [--mode eager|replay]\n"
    "                   [--iterations N] [--warmup N] [--threads N] [--branch-streams N]\n"
    "                   [--choose-threads on|off] [--dump-ri FILE.json] [--json]\n"
    "                   [--profile FILE.json] [--profile-top N] [--conv-winograd on|off]\n"
    "                   [--conv-taps on|off] [--conv-tap-regions on|off]\n"
    "                   [--conv-depthwise on|off] [--conv-chain-layout auto|nhwc]\n"
    "                   [--clear-outputs auto|on|off]\n"
    "       reprise-run --list-ops   (the ops each backend has a kernel for)\n";

absl::StatusOr<Shape> ParseShape(absl::string_view text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad shape \"", text, "\" (want e.g. 1x3x224x224)"));
    }
    shape.push_back(d);
  }
  return shape;
}

absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options options;
  auto int_flag = [](absl::string_view name, absl::string_view value, int min,
                     int* out) -> absl::Status {
    if (!absl::SimpleAtoi(value, out) || *out < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " wants an integer >= ", min, ", got \"", value, "\""));
    }
    return absl::OkStatus();
  };
  auto on_off_flag = [](absl::string_view name, absl::string_view value,
                        bool* out) -> absl::Status {
    if (value != "on" && value != "off") {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is on or off, got \"", value, "\""));
    }
    *out = value == "on";
    return absl::OkStatus();
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg == "--json") {
      options.json = true;
      continue;
    } else if (arg == "--list-ops") {
      options.list_ops = true;
      continue;
    } else if (arg == "--help" || arg == "-h") {
      return absl::CancelledError("help");
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value"));
    }
    if (arg == "--model") {
      options.model = value;
    } else if (arg == "--input") {
      // NAME=SOURCE, or a bare FILE.npy for a single-input model.
      const size_t at = value.find('=');
      if (at == std::string::npos) {
        options.inputs.emplace_back("", value);
      } else {
        options.inputs.emplace_back(value.substr(0, at), value.substr(at + 1));
      }
    } else if (arg == "--shape") {
      const size_t at = value.rfind('=');
      if (at == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--shape wants NAME=DIMS, got \"", value, "\""));
      }
      ASSIGN_OR_RETURN(Shape shape, ParseShape(value.substr(at + 1)));
      options.shapes[value.substr(0, at)] = shape;
    } else if (arg == "--output-dir") {
      options.output_dir = value;
    } else if (arg == "--mode") {
      if (value != "eager" && value != "replay") {
        return absl::InvalidArgumentError(
            absl::StrCat("--mode is eager or replay, got \"", value, "\""));
      }
      options.mode = value;
    } else if (arg == "--iterations") {
      RETURN_IF_ERROR(int_flag("iterations", value, 1, &options.iterations));
    } else if (arg == "--warmup") {
      RETURN_IF_ERROR(int_flag("warmup", value, 0, &options.warmup));
    } else if (arg == "--threads") {
      RETURN_IF_ERROR(int_flag("threads", value, 1, &options.threads));
    } else if (arg == "--branch-streams") {
      RETURN_IF_ERROR(int_flag("branch-streams", value, 0, &options.branch_streams));
    } else if (arg == "--dump-ri") {
      options.dump_ri = value;
    } else if (arg == "--profile") {
      options.profile = value;
    } else if (arg == "--profile-top") {
      RETURN_IF_ERROR(int_flag("profile-top", value, 0, &options.profile_top));
    } else if (arg == "--choose-threads") {
      RETURN_IF_ERROR(on_off_flag("choose-threads", value, &options.choose_threads));
    } else if (arg == "--conv-winograd") {
      RETURN_IF_ERROR(on_off_flag("conv-winograd", value, &options.kernel_options.conv_winograd));
    } else if (arg == "--conv-taps") {
      RETURN_IF_ERROR(
          on_off_flag("conv-taps", value, &options.kernel_options.conv_taps_as_channels));
    } else if (arg == "--conv-tap-regions") {
      RETURN_IF_ERROR(
          on_off_flag("conv-tap-regions", value, &options.kernel_options.conv_tap_regions));
    } else if (arg == "--conv-depthwise") {
      RETURN_IF_ERROR(
          on_off_flag("conv-depthwise", value, &options.kernel_options.conv_own_depthwise));
    } else if (arg == "--conv-chain-layout") {
      absl::StatusOr<kernels::cpu::ConvChainLayout> layout =
          kernels::cpu::ParseConvChainLayout(value);
      if (!layout.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--conv-chain-layout is auto or nhwc, got \"", value, "\""));
      }
      options.kernel_options.conv_chain_layout = *layout;
    } else if (arg == "--clear-outputs") {
      absl::StatusOr<kernels::cpu::OutputClearing> mode = kernels::cpu::ParseOutputClearing(value);
      if (!mode.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--clear-outputs is auto, on or off, got \"", value, "\""));
      }
      options.kernel_options.clear_outputs = *mode;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
  }
  if (options.model.empty() && !options.list_ops) {
    return absl::InvalidArgumentError("--model is required");
  }
  return options;
}

absl::StatusOr<std::vector<NamedTensor>> MakeInputs(const Model& model, const Options& options) {
  const std::vector<Value> declared = model.inputs();
  absl::flat_hash_map<std::string, std::string> sources;
  for (const auto& [name, source] : options.inputs) {
    if (name.empty()) {
      if (declared.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--input ", source, " without NAME= needs a single-input model; this one has ",
            declared.size()));
      }
      sources[declared[0].name] = source;
    } else {
      sources[name] = source;
    }
  }
  for (const auto& entry : sources) {
    const std::string& name = entry.first;  // a plain reference: clang 14 cannot capture bindings
    if (std::none_of(declared.begin(), declared.end(),
                     [&](const Value& v) { return v.name == name; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input names \"", name, "\", which is not an input of the model"));
    }
  }
  std::mt19937 rng(42);
  std::vector<NamedTensor> inputs;
  for (const Value& value : declared) {
    auto it = sources.find(value.name);
    const std::string source = it == sources.end() ? "random" : it->second;
    auto shape_it = options.shapes.find(value.name);
    if (source != "random" && source != "zeros") {
      ASSIGN_OR_RETURN(TensorValue t, runtime::engine::ReadNpyFile(source));
      if (shape_it != options.shapes.end() && shape_it->second != t.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input \"", value.name, "\": --shape ", runtime::ShapeToString(shape_it->second),
            " but ", source, " has shape ", runtime::ShapeToString(t.shape)));
      }
      inputs.push_back({value.name, std::move(t)});
      continue;
    }
    Shape shape;
    if (shape_it != options.shapes.end()) {
      shape = shape_it->second;
    } else {
      for (const auto& dim : value.dims) {
        if (!dim.known()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "input \"", value.name, "\" has shape ", runtime::engine::DimsToString(value.dims),
              ": give --shape ", value.name, "=... or an .npy file"));
        }
        shape.push_back(dim.value);
      }
    }
    TensorValue t{value.dtype, shape, {}};
    t.bytes.assign(
        static_cast<size_t>(runtime::NumElements(shape)) * runtime::DataTypeSize(value.dtype), 0);
    if (source == "random") runtime::engine::FillRandom(&t, &rng);
    inputs.push_back({value.name, std::move(t)});
  }
  return inputs;
}

double Percentile(const std::vector<double>& sorted, double p) {
  const size_t index = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// --profile: profiles as many runs as were timed, writes the trace and prints the table.
absl::Status WriteProfile(const Model& model, runtime::Device* device,
                          const std::vector<NamedTensor>& inputs, const Options& options,
                          int plan_threads) {
  runtime::engine::ProfileOptions profile_options;
  profile_options.intra_op_threads = plan_threads;
  profile_options.iterations = options.iterations;
  profile_options.warmup = options.warmup;
  profile_options.replay = options.mode == "replay";
  ASSIGN_OR_RETURN(
      runtime::engine::Profile profile,
      runtime::engine::ProfileModel(model, device, inputs, profile_options, options.model));
  std::ofstream file(options.profile);
  file << runtime::engine::ProfileTraceJson(profile);
  file.close();
  if (!file) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write --profile \"", options.profile, "\""));
  }
  (options.json ? std::cerr : std::cout)
      << runtime::engine::ProfileTable(profile, options.profile_top) << "trace written to "
      << options.profile << "\n";
  return absl::OkStatus();
}

absl::Status Run(const Options& options) {
  if (!options.dump_ri.empty() && options.mode != "replay") {
    return absl::InvalidArgumentError("--dump-ri needs --mode replay (eager runs capture nothing)");
  }
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  // The CPU device of the runtime core; the model is loaded with the device's kernel registry.
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend, runtime::CreateBackend("cpu"));
  ASSIGN_OR_RETURN(runtime::Device * device, backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(device->kernels(), options.kernel_options));
  runtime::engine::ModelOptions model_options;
  model_options.intra_op_threads = options.threads;
  model_options.max_branch_streams = options.branch_streams;
  const auto load_start = Clock::now();
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                   Model::LoadFile(options.model, *device->kernels(), model_options));
  const double load_us = micros(Clock::now() - load_start);

  ASSIGN_OR_RETURN(std::vector<NamedTensor> inputs, MakeInputs(*model, options));
  runtime::engine::StreamSessionOptions session_options;
  session_options.choose_threads = options.choose_threads;
  ASSIGN_OR_RETURN(
      std::unique_ptr<StreamSession> session,
      StreamSession::Create(model, device,
                            options.mode == "replay" ? runtime::engine::ExecMode::kReplay
                                                     : runtime::engine::ExecMode::kEager,
                            session_options));

  // The first run plans (and in replay mode captures); it is not counted as a warm-up.
  StreamRunInfo first;
  ASSIGN_OR_RETURN(std::vector<NamedTensor> outputs, session->Run(inputs, &first));
  const double plan_us = static_cast<double>(first.plan_ns) / 1e3;
  const double capture_us = static_cast<double>(first.capture_ns) / 1e3;
  for (int i = 0; i < options.warmup; ++i) {
    ASSIGN_OR_RETURN(outputs, session->Run(inputs));
  }
  std::vector<double> times;
  bool all_replayed = true;
  for (int i = 0; i < options.iterations; ++i) {
    StreamRunInfo info;
    const auto start = Clock::now();
    ASSIGN_OR_RETURN(outputs, session->Run(inputs, &info));
    times.push_back(micros(Clock::now() - start));
    all_replayed &= info.replayed;
  }
  std::sort(times.begin(), times.end());

  // A model cut at its value-dependent nodes: the prefix's instance (the tail is planned per
  // input), and the statistics of the prefix's plan.
  std::vector<StreamInstanceInfo> instances = session->ListInstances();
  const bool ran_split =
      std::any_of(instances.begin(), instances.end(),
                  [](const StreamInstanceInfo& i) { return i.part == "prefix"; });
  if (ran_split) {
    std::erase_if(instances, [](const StreamInstanceInfo& i) { return i.part != "prefix"; });
  }
  if (instances.size() != 1) {
    return absl::InternalError(
        absl::StrCat("expected one signature after the runs, found ", instances.size()));
  }
  const StreamInstanceInfo& instance = instances.front();
  if (options.mode == "replay" && instance.state != "captured") {
    std::cerr << "reprise-run: capture failed, ran eagerly: " << instance.reason << "\n";
  }
  if (!options.dump_ri.empty()) {
    ASSIGN_OR_RETURN(std::string json, session->DumpInstance(instance.shape_signature, true));
    std::ofstream file(options.dump_ri);
    file << json << "\n";
    file.close();
    if (!file) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write --dump-ri \"", options.dump_ri, "\""));
    }
  }
  // Plan statistics from a plan made for the same inputs and threads (the session keeps its own
  // private).
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, model->MatchInputs(inputs));
  bool value_keyed = false;
  const runtime::engine::Model& planned = ran_split ? *model->value_split()->prefix : *model;
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                   planned.PlanForInputs(ordered, &value_keyed, instance.intra_op_threads));

  if (!options.output_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.output_dir, error);
    if (error) {
      return absl::PermissionDeniedError(absl::StrCat("cannot create --output-dir \"",
                                                      options.output_dir, "\": ", error.message()));
    }
    for (const NamedTensor& out : outputs) {
      std::string file = out.name;
      std::replace(file.begin(), file.end(), '/', '_');
      RETURN_IF_ERROR(runtime::engine::WriteNpyFile(
          absl::StrCat(options.output_dir, "/", file, ".npy"), out.value));
    }
  }

  const double min = times.front(), median = Percentile(times, 0.5), p90 = Percentile(times, 0.9),
               max = times.back();
  if (options.json) {
    std::vector<std::string> outs;
    for (const NamedTensor& out : outputs) {
      outs.push_back(absl::StrCat("{\"name\":", JsonString(out.name), ",\"dtype\":\"",
                                  runtime::DataTypeName(out.value.dtype), "\",\"shape\":[",
                                  absl::StrJoin(out.value.shape, ","), "]}"));
    }
    std::cout << "{\"model\":" << JsonString(options.model) << ",\"mode\":\"" << options.mode
              << "\",\"iterations\":" << options.iterations << ",\"warmup\":" << options.warmup
              << ",\"threads\":" << options.threads
              << ",\"plan_threads\":" << instance.intra_op_threads
              << ",\"threads_choice\":" << JsonString(instance.threads_choice)
              << ",\"choose_us\":" << static_cast<double>(first.choose_ns) / 1e3
              << ",\"min_us\":" << min << ",\"median_us\":" << median << ",\"p90_us\":" << p90
              << ",\"max_us\":" << max << ",\"plan_us\":" << plan_us
              << ",\"capture_us\":" << capture_us << ",\"settle_runs\":" << first.settle_runs
              << ",\"settle_us\":" << static_cast<double>(first.settle_ns) / 1e3
              << ",\"load_us\":" << load_us << ",\"state\":" << JsonString(instance.state)
              << ",\"replayed\":" << (all_replayed ? "true" : "false")
              << ",\"value_keyed\":" << (value_keyed ? "true" : "false")
              << ",\"steps\":" << plan->steps().size() << ",\"streams\":" << plan->num_streams()
              << ",\"plan_time_nodes\":" << plan->folded_nodes()
              << ",\"arena_bytes\":" << plan->arena_bytes()
              << ",\"intermediate_bytes\":" << plan->intermediate_bytes()
              << ",\"in_place_steps\":" << plan->in_place_steps()
              << ",\"placed_inputs\":" << plan->placed_inputs() << ",\"outputs\":["
              << absl::StrJoin(outs, ",") << "]}\n";
  } else {
    std::printf(
        "reprise-run: %s mode=%s runs=%d min=%.1f us median=%.1f us p90=%.1f us max=%.1f us "
        "plan=%.1f us capture=%.1f us settle=%d runs %.1f us load=%.1f us state=%s steps=%zu "
        "streams=%d threads=%d arena=%zu bytes (intermediates %zu bytes) in-place=%d placed=%d\n",
        options.model.c_str(), options.mode.c_str(), options.iterations, min, median, p90, max,
        plan_us, capture_us, first.settle_runs, static_cast<double>(first.settle_ns) / 1e3, load_us,
        instance.state.c_str(), plan->steps().size(), plan->num_streams(),
        instance.intra_op_threads, plan->arena_bytes(), plan->intermediate_bytes(),
        plan->in_place_steps(), plan->placed_inputs());
    if (!instance.threads_choice.empty()) {
      std::printf("threads chosen: %s\n", instance.threads_choice.c_str());
    }
  }
  if (!options.profile.empty()) {
    RETURN_IF_ERROR(WriteProfile(*model, device, inputs, options, instance.intra_op_threads));
  }
  return absl::OkStatus();
}

// --list-ops: every op a backend has a kernel for, with the backends (the table of
// docs/operators.md without the conformance results).
absl::Status ListOps() {
  runtime::KernelRegistry cpu;
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(&cpu));
  std::vector<std::string> cuda_ops;
#if REPRISE_WITH_CUDA
  cuda_ops = kernels::cuda::CudaKernelOps();
#endif
  std::vector<std::string> ops = cpu.Ops();
  for (const char* op : {"Constant", "Identity", "Dropout", "If", "Loop"}) ops.push_back(op);
  ops.insert(ops.end(), cuda_ops.begin(), cuda_ops.end());
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  std::printf("opsets %d to %d (below %d only the ops whose form has not changed)\n",
              runtime::engine::kMinOpset, runtime::engine::kMaxOpset,
              runtime::engine::kLegacyOpset);
  std::printf("%-28s %-4s %s\n", "op", "cpu", "cuda");
  for (const std::string& op : ops) {
    const bool on_cpu = cpu.Has(op) || runtime::engine::IsEngineOp(op);
    const bool on_cuda = std::find(cuda_ops.begin(), cuda_ops.end(), op) != cuda_ops.end();
    std::printf("%-28s %-4s %s\n", op.c_str(), on_cpu ? "yes" : "-", on_cuda ? "yes" : "-");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace reprise::tools

int main(int argc, char** argv) {
  // As the daemon does: large tensors reuse heap pages run after run (heap_policy.h).
  reprise::runtime::KeepLargeBlocksInHeap();
  auto options = reprise::tools::ParseArgs(argc, argv);
  if (!options.ok()) {
    if (options.status().code() != absl::StatusCode::kCancelled) {
      std::cerr << "reprise-run: " << options.status().message() << "\n";
    }
    std::cerr << reprise::tools::kUsage;
    return 2;
  }
  absl::Status status =
      options->list_ops ? reprise::tools::ListOps() : reprise::tools::Run(*options);
  if (!status.ok()) {
    std::cerr << "reprise-run: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
