// The ONNX node conformance driver: runs every node test case of the ONNX test data whose op
// types are all supported and compares the outputs with the stored ones.
//
//   onnx_conformance [--data DIR] [--known-failures FILE] [--filter SUBSTRING]
//                    [--markdown FILE] [--verbose]
//
// --markdown writes the operator coverage table (docs/operators.md) from the run.
//
// Every case runs through a StreamSession in eager mode and one in replay mode (captured at the
// first data set of a shape, replayed afterwards) on the runtime core's CPU device; a case
// passes when both modes match the stored outputs.
//
// Summary line: "onnx_conformance: N passed, N failed, N skipped". Exit status 1 when a case
// fails that known_failures.txt does not list. A listed case that passes is reported. Cases
// whose default-domain opset is outside the engine's range (7-17) are skipped.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#if REPRISE_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif
#include "onnx/onnx_pb.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/device.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/model.h"
#include "runtime/engine/onnx_import.h"
#include "runtime/engine/optimizer.h"
#include "runtime/engine/stream_session.h"
#include "runtime/engine/tensor_proto.h"

namespace reprise::runtime::engine {
namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Element `i` of `t` as a double (for the tolerance check).
double At(const TensorValue& t, size_t i) {
  const uint8_t* p = t.bytes.data();
  auto get = [&](auto type_tag) {
    decltype(type_tag) v;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    return static_cast<double>(v);
  };
  switch (t.dtype) {
    case DataType::kFloat32:
      return get(float{});
    case DataType::kFloat64:
      return get(double{});
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return HalfToFloat(h);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return 0;
  }
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

absl::Status Compare(const std::string& name, const TensorValue& got, const TensorValue& want) {
  if (got.dtype != want.dtype) {
    return absl::InternalError(absl::StrCat("output \"", name, "\": element type ",
                                            DataTypeName(got.dtype), ", expected ",
                                            DataTypeName(want.dtype)));
  }
  if (got.shape != want.shape) {
    return absl::InternalError(absl::StrCat("output \"", name, "\": shape ",
                                            ShapeToString(got.shape), ", expected ",
                                            ShapeToString(want.shape)));
  }
  if (got.bytes.size() != want.bytes.size()) {
    return absl::InternalError(absl::StrCat("output \"", name, "\": byte size differs"));
  }
  if (got.dtype == DataType::kString) {
    // The elements are views: compare the strings they point to.
    for (int64_t i = 0; i < NumElements(got.shape); ++i) {
      if (StringAt(got.bytes.data(), i) != StringAt(want.bytes.data(), i)) {
        return absl::InternalError(absl::StrCat("output \"", name, "\": element ", i, " is \"",
                                                StringAt(got.bytes.data(), i), "\", expected \"",
                                                StringAt(want.bytes.data(), i), "\""));
      }
    }
    return absl::OkStatus();
  }
  if (!IsFloat(got.dtype)) {
    if (got.bytes != want.bytes) {
      const size_t elem = DataTypeSize(got.dtype);
      for (size_t i = 0; i < got.bytes.size(); ++i) {
        if (got.bytes[i] != want.bytes[i]) {
          return absl::InternalError(
              absl::StrCat("output \"", name, "\": element ", i / elem, " differs"));
        }
      }
    }
    return absl::OkStatus();
  }
  const size_t n = static_cast<size_t>(NumElements(got.shape));
  for (size_t i = 0; i < n; ++i) {
    const double g = At(got, i);
    const double w = At(want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= kAtol + kRtol * std::fabs(w))) {
      return absl::InternalError(
          absl::StrCat("output \"", name, "\": element ", i, " is ", g, ", expected ", w));
    }
  }
  return absl::OkStatus();
}

// For a case with a random op the stored outputs are one draw: the outputs must have their type
// and shape, and lie where the stored ones lie (within [0, 1] when every stored value does, as
// for Bernoulli and the default RandomUniform*). Their distribution is checked by the kernel
// tests (tests/kernels/cpu/coverage_ops_test.cc).
absl::Status CompareRandom(const std::string& name, const TensorValue& got,
                           const TensorValue& want) {
  if (got.dtype != want.dtype || got.shape != want.shape) {
    return absl::InternalError(absl::StrCat(
        "output \"", name, "\": ", DataTypeName(got.dtype), " ", ShapeToString(got.shape),
        ", expected ", DataTypeName(want.dtype), " ", ShapeToString(want.shape)));
  }
  if (!IsFloat(got.dtype)) return absl::OkStatus();
  const size_t n = static_cast<size_t>(NumElements(got.shape));
  bool unit = true;
  for (size_t i = 0; i < n; ++i) unit = unit && At(want, i) >= 0 && At(want, i) <= 1;
  for (size_t i = 0; i < n; ++i) {
    const double g = At(got, i);
    if (!std::isfinite(g) || (unit && (g < 0 || g > 1))) {
      return absl::InternalError(absl::StrCat("output \"", name, "\": element ", i, " is ", g,
                                              unit ? ", outside [0, 1]" : ", not finite"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorValue>> ReadTensors(const fs::path& dir,
                                                     const std::string& prefix) {
  std::vector<TensorValue> tensors;
  for (int i = 0;; ++i) {
    const fs::path path = dir / absl::StrCat(prefix, "_", i, ".pb");
    if (!fs::exists(path)) break;
    ASSIGN_OR_RETURN(TensorValue t, ReadTensorProtoFile(path.string(), nullptr));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Runs every data set of the case through a StreamSession in eager mode and one in replay
// mode (first set of each shape captured, later ones replayed); both must match. Sets
// `*fell_back` when replay mode had to run a signature eagerly (capture failed).
absl::Status RunCase(const fs::path& dir, const std::string& bytes, Device* device, bool random,
                     bool* fell_back) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::LoadBytes(bytes, *device->kernels()));
  ASSIGN_OR_RETURN(std::unique_ptr<StreamSession> eager,
                   StreamSession::Create(model, device, ExecMode::kEager));
  ASSIGN_OR_RETURN(std::unique_ptr<StreamSession> replay,
                   StreamSession::Create(model, device, ExecMode::kReplay));
  const std::vector<Value> inputs = model->inputs();
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(entry.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return absl::NotFoundError("no test_data_set_* directory");
  for (const fs::path& set : sets) {
    ASSIGN_OR_RETURN(std::vector<TensorValue> in, ReadTensors(set, "input"));
    ASSIGN_OR_RETURN(std::vector<TensorValue> want, ReadTensors(set, "output"));
    if (in.size() != inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the case has ", in.size(), " inputs, the model ", inputs.size()));
    }
    std::vector<NamedTensor> named;
    for (size_t i = 0; i < in.size(); ++i) named.push_back({inputs[i].name, std::move(in[i])});
    for (StreamSession* session : {eager.get(), replay.get()}) {
      const char* mode = session == eager.get() ? "eager" : "replay";
      auto with_mode = [&](const absl::Status& status) {
        return absl::Status(status.code(), absl::StrCat(mode, " ", set.filename().string(), ": ",
                                                        status.message()));
      };
      StreamRunInfo info;
      absl::StatusOr<std::vector<NamedTensor>> got = session->Run(named, &info);
      if (!got.ok()) return with_mode(got.status());
      if (session == replay.get() && info.eager) *fell_back = true;
      if (got->size() != want.size()) {
        return with_mode(
            absl::InternalError(absl::StrCat(got->size(), " outputs, expected ", want.size())));
      }
      for (size_t i = 0; i < got->size(); ++i) {
        absl::Status status = random ? CompareRandom((*got)[i].name, (*got)[i].value, want[i])
                                     : Compare((*got)[i].name, (*got)[i].value, want[i]);
        if (!status.ok()) return with_mode(status);
      }
    }
  }
  return absl::OkStatus();
}

// True when the model has a node whose outputs are random draws.
bool HasRandomOp(const std::string& bytes) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return false;
  for (const auto& node : model.graph().node()) {
    if (IsNondeterministicOp(node.op_type())) return true;
  }
  return false;
}

// The op types of a model's nodes (domain-qualified outside the default domain).
std::set<std::string> OpTypes(const std::string& bytes) {
  std::set<std::string> ops;
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return ops;
  for (const auto& node : model.graph().node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    ops.insert(default_domain ? node.op_type() : absl::StrCat(node.domain(), ":", node.op_type()));
  }
  return ops;
}

// Per op type: the cases that use it, by outcome.
struct OpCounts {
  int passed = 0, failed = 0, skipped = 0;
};

// The operator coverage table (docs/operators.md): every op type of the suite or of a kernel
// registry, its backends and the outcome of the cases that use it.
void WriteMarkdown(const std::string& path, const std::map<std::string, OpCounts>& counts,
                   const std::vector<std::string>& cpu_ops,
                   const std::vector<std::string>& cuda_ops, int passed, int failed, int skipped,
                   int skipped_opset) {
  std::map<std::string, OpCounts> rows = counts;
  for (const std::string& op : cpu_ops) rows.try_emplace(op);
  for (const std::string& op : cuda_ops) rows.try_emplace(op);
  const std::set<std::string> cpu(cpu_ops.begin(), cpu_ops.end());
  const std::set<std::string> cuda(cuda_ops.begin(), cuda_ops.end());
  std::ofstream out(path);
  out << "# Operator coverage\n\n"
      << "Generated by `onnx_conformance --markdown docs/operators.md` (see "
         "docs/development.md) from the kernel registries and a run of the ONNX node test cases "
         "of Debian's libonnx-testdata. Do not edit by hand.\n\n"
      << "Opsets of the default domain: " << kMinOpset << " to " << kMaxOpset << "; below "
      << kLegacyOpset
      << " only the ops whose form has not changed since opset 1 (the others are refused by "
         "name at load). Kernels adapt where an op's form changed between opsets (e.g. "
         "attributes that became inputs). Constant, Identity and Dropout (inference) are handled "
         "by the engine itself, and so are If and Loop on the CPU (their subgraphs are planned "
         "and captured as conditional tasks; docs/development.md, \"Control flow\"). "
         "`reprise-run --list-ops` prints the CPU and CUDA columns.\n\n"
      << "Node cases: " << passed << " passed, " << failed << " failed (each listed with its "
      << "reason in tests/conformance/known_failures.txt), " << skipped << " skipped ("
      << skipped - skipped_opset << " with an op no backend has, " << skipped_opset
      << " with an opset outside " << kMinOpset << "-" << kMaxOpset << ").\n\n"
      << "A case counts for every op type its graph uses; \"cases\" is passed / failed / "
         "skipped.\n\n"
      << "| op | CPU | CUDA | cases |\n| --- | :-: | :-: | --- |\n";
  for (const auto& [op, c] : rows) {
    const bool engine = IsEngineOp(op);
    out << "| " << op << " | " << (cpu.contains(op) || engine ? "yes" : "-") << " | "
        << (cuda.contains(op) ? "yes" : "-") << " | ";
    if (c.passed + c.failed + c.skipped == 0) {
      out << "no case";
    } else {
      out << c.passed << " / " << c.failed << " / " << c.skipped;
    }
    out << " |\n";
  }
}

// The default domain's opset of a serialised model, or -1.
int DefaultOpset(const std::string& bytes) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return -1;
  for (const auto& entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") {
      return static_cast<int>(entry.version());
    }
  }
  return -1;
}

// "name reason..." per line; '#' starts a comment.
std::map<std::string, std::string> ReadKnownFailures(const std::string& path) {
  std::map<std::string, std::string> known;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string name;
    if (!(in >> name)) continue;
    std::string reason;
    std::getline(in, reason);
    known[name] = reason;
  }
  return known;
}

int Main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string known_path;
  std::string filter;
  std::string markdown;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--data" && i + 1 < argc) {
      data = argv[++i];
    } else if (arg == "--known-failures" && i + 1 < argc) {
      known_path = argv[++i];
    } else if (arg == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (arg == "--markdown" && i + 1 < argc) {
      markdown = argv[++i];
    } else if (arg == "--verbose") {
      verbose = true;
    } else {
      std::cerr << "usage: onnx_conformance [--data DIR] [--known-failures FILE] "
                   "[--filter SUBSTRING] [--markdown FILE] [--verbose]\n";
      return 2;
    }
  }
  if (!fs::is_directory(data)) {
    std::cerr << "onnx_conformance: test data directory " << data << " not found\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend("cpu");
  if (!backend.ok()) {
    std::cerr << "onnx_conformance: " << backend.status() << "\n";
    return 2;
  }
  absl::StatusOr<Device*> device = (*backend)->device(0);
  if (!device.ok()) {
    std::cerr << "onnx_conformance: " << device.status() << "\n";
    return 2;
  }
  const KernelRegistry& registry = *(*device)->kernels();
  absl::Status registered = kernels::cpu::RegisterCpuKernels((*device)->kernels());
  if (!registered.ok()) {
    std::cerr << "onnx_conformance: " << registered << "\n";
    return 2;
  }
  const std::map<std::string, std::string> known =
      known_path.empty() ? std::map<std::string, std::string>{} : ReadKnownFailures(known_path);

  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(data)) {
    if (entry.is_directory() &&
        entry.path().filename().string().find(filter) != std::string::npos) {
      cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  int passed = 0, failed = 0, skipped = 0, skipped_opset = 0, unexpected = 0;
  std::map<std::string, OpCounts> op_counts;
  std::vector<std::string> fixed;
  std::vector<std::string> fell_back_cases;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    std::ifstream file(dir / "model.onnx", std::ios::binary);
    std::stringstream buffer;
    buffer << file.rdbuf();
    const std::string bytes = buffer.str();
    const int opset = DefaultOpset(bytes);
    const std::set<std::string> ops = OpTypes(bytes);
    auto count = [&](int OpCounts::*field) {
      for (const std::string& op : ops) ++(op_counts[op].*field);
    };
    if (opset < kMinOpset || opset > kMaxOpset) {
      count(&OpCounts::skipped);
      ++skipped;
      ++skipped_opset;
      if (verbose) std::cout << "SKIP " << name << ": opset " << opset << "\n";
      continue;
    }
    auto unsupported = UnsupportedOps(bytes, registry);
    if (!unsupported.ok() || !unsupported->empty()) {
      count(&OpCounts::skipped);
      ++skipped;
      if (verbose) {
        std::cout << "SKIP " << name << ": "
                  << (unsupported.ok() ? absl::StrJoin(*unsupported, ", ")
                                       : std::string(unsupported.status().message()))
                  << "\n";
      }
      continue;
    }
    bool fell_back = false;
    absl::Status status = RunCase(dir, bytes, *device, HasRandomOp(bytes), &fell_back);
    if (fell_back) fell_back_cases.push_back(name);
    auto it = known.find(name);
    if (status.ok()) {
      count(&OpCounts::passed);
      ++passed;
      if (it != known.end()) fixed.push_back(name);
      if (verbose) std::cout << "PASS " << name << "\n";
      continue;
    }
    count(&OpCounts::failed);
    ++failed;
    if (it == known.end()) {
      ++unexpected;
      std::cout << "FAIL " << name << ": " << status.message() << "\n";
    } else if (verbose) {
      std::cout << "XFAIL " << name << " (" << it->second << "): " << status.message() << "\n";
    }
  }
  for (const std::string& name : fixed) {
    std::cout << "known failure now passes (remove it from known_failures.txt): " << name << "\n";
  }
  if (!fell_back_cases.empty()) {
    std::cout << "replay ran eagerly (capture failed) in " << fell_back_cases.size()
              << " case(s): " << absl::StrJoin(fell_back_cases, ", ") << "\n";
  }
  std::cout << "skipped: " << skipped - skipped_opset << " with unsupported ops, " << skipped_opset
            << " with an opset outside " << kMinOpset << "-" << kMaxOpset << "\n";
  std::cout << "onnx_conformance: " << passed << " passed, " << failed << " failed, " << skipped
            << " skipped\n";
  if (!markdown.empty()) {
    std::vector<std::string> cuda_ops;
#if REPRISE_WITH_CUDA
    cuda_ops = kernels::cuda::CudaKernelOps();
#endif
    WriteMarkdown(markdown, op_counts, registry.Ops(), cuda_ops, passed, failed, skipped,
                  skipped_opset);
  }
  if (unexpected > 0) {
    std::cout << unexpected << " unlisted failure(s)\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace reprise::runtime::engine

int main(int argc, char** argv) { return reprise::runtime::engine::Main(argc, argv); }
