// Runs ONNX's node test data (libonnx-testdata) through the CPU kernels directly: every
// single-node test whose op has a CPU kernel is prepared with all input values known at plan
// time, run, and compared with the expected outputs (float: |got-want| <= 1e-4 + 1e-3*|want|;
// other types exactly). A case the kernel declines with UNIMPLEMENTED (e.g. float16, training
// mode, opset-18 attributes) is listed as skipped; a wrong value or any other error fails.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "onnx/onnx_pb.h"
#include "runtime/engine/optimizer.h"

namespace reprise::kernels::cpu {
namespace {

namespace fs = std::filesystem;
using runtime::DataType;
using runtime::TensorDesc;

constexpr char kNodeDataDir[] = "/usr/share/libonnx-testdata/data/node";

struct HostTensor {
  DataType dtype = DataType::kUndefined;
  runtime::Shape shape;
  std::vector<uint8_t> bytes;
};

template <typename Proto>
bool ParseFile(const fs::path& path, Proto* proto) {
  std::ifstream in(path, std::ios::binary);
  return in && proto->ParseFromIstream(&in);
}

// Converts a TensorProto into host bytes; false for types the test does not handle.
bool ToHost(const onnx::TensorProto& t, HostTensor* out) {
  auto dtype = runtime::DataTypeFromCode(t.data_type());
  if (!dtype.ok() || *dtype == DataType::kString) return false;
  out->dtype = *dtype;
  out->shape.assign(t.dims().begin(), t.dims().end());
  const size_t n = static_cast<size_t>(runtime::NumElements(out->shape));
  const size_t size = runtime::DataTypeSize(*dtype);
  out->bytes.assign(n * size, 0);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * size) return false;
    if (n > 0) std::memcpy(out->bytes.data(), t.raw_data().data(), n * size);
    return true;
  }
  for (size_t i = 0; i < n; ++i) {
    uint8_t* dst = out->bytes.data() + i * size;
    switch (*dtype) {
      case DataType::kFloat32: {
        float v = t.float_data(static_cast<int>(i));
        std::memcpy(dst, &v, size);
        break;
      }
      case DataType::kFloat64: {
        double v = t.double_data(static_cast<int>(i));
        std::memcpy(dst, &v, size);
        break;
      }
      case DataType::kInt64: {
        int64_t v = t.int64_data(static_cast<int>(i));
        std::memcpy(dst, &v, size);
        break;
      }
      case DataType::kUInt32:
      case DataType::kUInt64: {
        uint64_t v = t.uint64_data(static_cast<int>(i));
        std::memcpy(dst, &v, size);  // little-endian: the low bytes
        break;
      }
      default: {  // int32 and the narrower types live in int32_data
        int32_t v = t.int32_data(static_cast<int>(i));
        std::memcpy(dst, &v, size);
      }
    }
  }
  return true;
}

bool ToAttribute(const onnx::AttributeProto& a, runtime::AttributeValue* out) {
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      *out = static_cast<int64_t>(a.i());
      return true;
    case onnx::AttributeProto::FLOAT:
      *out = a.f();
      return true;
    case onnx::AttributeProto::STRING:
      *out = a.s();
      return true;
    case onnx::AttributeProto::INTS:
      *out = std::vector<int64_t>(a.ints().begin(), a.ints().end());
      return true;
    case onnx::AttributeProto::FLOATS:
      *out = std::vector<float>(a.floats().begin(), a.floats().end());
      return true;
    case onnx::AttributeProto::STRINGS:
      *out = std::vector<std::string>(a.strings().begin(), a.strings().end());
      return true;
    case onnx::AttributeProto::TENSOR: {
      HostTensor t;
      if (!ToHost(a.t(), &t)) return false;
      *out = runtime::TensorValue{t.dtype, t.shape,
                                  runtime::ValueBytes(t.bytes.begin(), t.bytes.end())};
      return true;
    }
    default:
      return false;
  }
}

std::string Compare(const HostTensor& want, const TensorDesc& desc, const HostTensor& got) {
  if (desc.dtype != want.dtype || desc.shape != want.shape) {
    return absl::StrCat("got ", runtime::DataTypeName(desc.dtype),
                        runtime::ShapeToString(desc.shape), ", want ",
                        runtime::DataTypeName(want.dtype), runtime::ShapeToString(want.shape));
  }
  const int64_t n = runtime::NumElements(want.shape);
  if (want.dtype == DataType::kFloat32 || want.dtype == DataType::kFloat64) {
    for (int64_t i = 0; i < n; ++i) {
      double w, g;
      if (want.dtype == DataType::kFloat32) {
        w = reinterpret_cast<const float*>(want.bytes.data())[i];
        g = reinterpret_cast<const float*>(got.bytes.data())[i];
      } else {
        w = reinterpret_cast<const double*>(want.bytes.data())[i];
        g = reinterpret_cast<const double*>(got.bytes.data())[i];
      }
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && w == g) continue;
      if (!(std::fabs(g - w) <= 1e-4 + 1e-3 * std::fabs(w))) {
        return absl::StrCat("element ", i, ": got ", g, ", want ", w);
      }
    }
    return "";
  }
  if (want.bytes != got.bytes) return "values differ";
  return "";
}

enum class Outcome { kPass, kSkip, kFail };

// Which input values the kernel sees at Prepare (TensorDesc::data).
enum class Known { kNone, kAllButFirst, kAll };

Outcome RunCase(const runtime::KernelRegistry& registry, const fs::path& dir, Known known,
                std::string* detail) {
  onnx::ModelProto model;
  if (!ParseFile(dir / "model.onnx", &model)) {
    *detail = "cannot parse model.onnx";
    return Outcome::kSkip;
  }
  const onnx::GraphProto& graph = model.graph();
  const onnx::NodeProto& node = graph.node(0);
  if (runtime::engine::IsNondeterministicOp(node.op_type())) {
    // The stored outputs are one draw; the distributions are checked by coverage_ops_test and
    // the shapes and ranges by onnx_conformance.
    *detail = "random op: the stored outputs are one draw";
    return Outcome::kSkip;
  }
  int opset = 0;
  for (const auto& import : model.opset_import()) {
    if (import.domain().empty() || import.domain() == "ai.onnx") opset = import.version();
  }
  std::map<std::string, HostTensor> values;
  for (const auto& init : graph.initializer()) {
    HostTensor t;
    if (ToHost(init, &t)) values[init.name()] = std::move(t);
  }
  const fs::path data_dir = dir / "test_data_set_0";
  for (int i = 0; i < graph.input_size(); ++i) {
    if (!graph.input(i).type().has_tensor_type()) {
      *detail = absl::StrCat("input ", i, " is not a tensor");
      return Outcome::kSkip;
    }
    onnx::TensorProto proto;
    HostTensor t;
    if (!ParseFile(data_dir / absl::StrCat("input_", i, ".pb"), &proto) || !ToHost(proto, &t)) {
      *detail = absl::StrCat("input ", i, " is not a plain tensor");
      return Outcome::kSkip;
    }
    // The data files store bfloat16 as uint16: the graph's declared type is the truth.
    auto declared = runtime::DataTypeFromCode(graph.input(i).type().tensor_type().elem_type());
    if (declared.ok() && runtime::DataTypeSize(*declared) == runtime::DataTypeSize(t.dtype)) {
      t.dtype = *declared;
    }
    values[graph.input(i).name()] = std::move(t);
  }
  runtime::Attributes attrs;
  for (const auto& a : node.attribute()) {
    runtime::AttributeValue v;
    if (!ToAttribute(a, &v)) {
      *detail = absl::StrCat("attribute ", a.name(), " has an unsupported type");
      return Outcome::kSkip;
    }
    attrs.Set(a.name(), std::move(v));
  }
  std::vector<TensorDesc> inputs;
  std::vector<const void*> in_ptrs;
  for (const std::string& name : node.input()) {
    TensorDesc d;
    if (name.empty()) {
      d.present = false;
      in_ptrs.push_back(nullptr);
    } else {
      auto it = values.find(name);
      if (it == values.end()) {
        *detail = absl::StrCat("input ", name, " has no value");
        return Outcome::kSkip;
      }
      d.dtype = it->second.dtype;
      d.shape = it->second.shape;
      const bool is_first = inputs.empty();
      if (known == Known::kAll || (known == Known::kAllButFirst && !is_first)) {
        d.data = it->second.bytes.data();
      }
      in_ptrs.push_back(it->second.bytes.data());
    }
    inputs.push_back(d);
  }
  runtime::PrepareContext context;
  context.op = node.op_type();
  context.name = node.name();
  context.opset = opset;
  context.inputs = inputs;
  context.num_outputs = node.output_size();
  context.attributes = &attrs;
  auto kernel = registry.Prepare(context);
  if (!kernel.ok()) {
    *detail = std::string(kernel.status().ToString());
    return kernel.status().code() == absl::StatusCode::kUnimplemented ? Outcome::kSkip
                                                                      : Outcome::kFail;
  }
  const auto& descs = (*kernel)->outputs();
  if (static_cast<int>(descs.size()) < node.output_size()) {
    *detail = absl::StrCat("kernel has ", descs.size(), " outputs, node ", node.output_size());
    return Outcome::kFail;
  }
  std::vector<HostTensor> outs(descs.size());
  std::vector<void*> out_ptrs;
  for (size_t i = 0; i < descs.size(); ++i) {
    // A padded layout, or a string output with its strings' storage, may take more.
    outs[i].bytes.assign(
        std::max(runtime::NumElements(descs[i].shape) * runtime::DataTypeSize(descs[i].dtype),
                 (*kernel)->output_storage_bytes(i)),
        0);
    out_ptrs.push_back(outs[i].bytes.data());
  }
  std::vector<uint8_t> workspace((*kernel)->workspace_bytes());
  runtime::KernelArgs args{in_ptrs.data(), out_ptrs.data(),
                           workspace.empty() ? nullptr : workspace.data()};
  absl::Status status = (*kernel)->Run(args);
  if (!status.ok()) {
    *detail = std::string(status.ToString());
    return Outcome::kFail;
  }
  for (int i = 0; i < graph.output_size(); ++i) {
    if (!graph.output(i).type().has_tensor_type()) {
      *detail = absl::StrCat("output ", i, " is not a tensor");
      return Outcome::kSkip;
    }
    int index = -1;
    for (int k = 0; k < node.output_size(); ++k) {
      if (node.output(k) == graph.output(i).name()) index = k;
    }
    onnx::TensorProto proto;
    HostTensor want;
    if (index < 0 || !ParseFile(data_dir / absl::StrCat("output_", i, ".pb"), &proto) ||
        !ToHost(proto, &want)) {
      *detail = absl::StrCat("output ", i, " cannot be read");
      return Outcome::kSkip;
    }
    auto declared = runtime::DataTypeFromCode(graph.output(i).type().tensor_type().elem_type());
    if (declared.ok() && runtime::DataTypeSize(*declared) == runtime::DataTypeSize(want.dtype)) {
      want.dtype = *declared;
    }
    std::string diff = Compare(want, descs[index], outs[index]);
    if (!diff.empty()) {
      *detail = absl::StrCat("output ", i, ": ", diff);
      return Outcome::kFail;
    }
  }
  return Outcome::kPass;
}

TEST(OnnxNodeDataTest, RegisteredOpsMatchTheReferenceOutputs) {
  if (!fs::exists(kNodeDataDir)) GTEST_SKIP() << kNodeDataDir << " is not installed";
  runtime::KernelRegistry registry;
  ASSERT_TRUE(RegisterCpuKernels(&registry).ok());
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(kNodeDataDir)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  int passed = 0;
  std::vector<std::string> skipped, failed;
  std::set<std::string> ops_passing;
  for (const fs::path& dir : dirs) {
    onnx::ModelProto model;
    if (!ParseFile(dir / "model.onnx", &model) || model.graph().node_size() != 1) continue;
    const onnx::NodeProto& node = model.graph().node(0);
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    if (!registry.Has(node.op_type())) continue;
    std::string detail;
    const std::string name = dir.filename().string();
    if (std::getenv("REPRISE_NODE_DATA_VERBOSE") != nullptr) std::cout << name << std::endl;
    // With every value known at Prepare; then with as few known as the kernel accepts (none,
    // else all but the first input), which takes the other code paths (e.g. Conv's unpacked
    // weights).
    Outcome outcome = RunCase(registry, dir, Known::kAll, &detail);
    if (outcome == Outcome::kPass) {
      std::string partial;
      Outcome less = RunCase(registry, dir, Known::kNone, &partial);
      if (less == Outcome::kSkip) less = RunCase(registry, dir, Known::kAllButFirst, &partial);
      if (less == Outcome::kFail) {
        outcome = less;
        detail = absl::StrCat("with fewer plan-time values: ", partial);
      }
    }
    switch (outcome) {
      case Outcome::kPass:
        ++passed;
        ops_passing.insert(node.op_type());
        break;
      case Outcome::kSkip:
        skipped.push_back(absl::StrCat(name, ": ", detail));
        break;
      case Outcome::kFail:
        failed.push_back(absl::StrCat(name, ": ", detail));
        break;
    }
  }
  std::cout << "onnx node data: " << passed << " passed, " << skipped.size() << " skipped, "
            << failed.size() << " failed\n";
  for (const auto& s : skipped) std::cout << "  skipped " << s << "\n";
  for (const auto& f : failed) std::cout << "  FAILED " << f << "\n";
  EXPECT_TRUE(failed.empty()) << absl::StrJoin(failed, "\n");
  // Every registered op that has node data passes at least one case.
  std::vector<std::string> never;
  for (const std::string& op : registry.Ops()) {
    if (!ops_passing.contains(op)) never.push_back(op);
  }
  std::cout << "registered ops without a passing node-data case: " << absl::StrJoin(never, ", ")
            << "\n";
  EXPECT_GT(passed, 0);
}

}  // namespace
}  // namespace reprise::kernels::cpu
