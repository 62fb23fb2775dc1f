// Real architectures (tools/models/export_zoo.py) through the engine, compared with PyTorch's
// outputs. Each model is looked up in the directories of $REPRISE_ZOO_DIRS (colon-separated):
// the small ones ship in tools/models/zoo, the large ones are exported into the build tree.
// A model whose ops are not all registered yet, or that was not exported (no PyTorch), skips
// with a message. Each model runs through a StreamSession in eager and in replay mode at batch
// 1 and 4 (replay: captured at the first run of a batch size, replayed at the second).
//
// Tolerance: max |engine - torch| <= 1e-4 * max |torch| over each output (float32 through
// different summation orders; stated per model below when it needs more).
//
// gated_branch (an If on the sign of the input's sum; batch 1 takes one branch, batch 4 the
// other) and greedy_decoder (a Loop whose condition comes from the tokens; exact tokens) also
// check that their replayed instances hold the IF / WHILE conditional task.
//
// qdq_cnn is the QDQ (QuantizeLinear / DequantizeLinear) form of a small float CNN
// (tools/models/quantize_qdq.py) compared with the float model's PyTorch outputs: the difference
// is the quantization error. Measured with the engine: 0.0085 and 0.0088 relative on the stored
// batches 1 and 4, at most 0.029 on 40 rows of other random inputs (docs/quantization.md); the
// tolerance is 3e-2. It must also differ by more than 1e-3 relative: a QDQ model that matched
// its float original to float32 rounding would mean the quantization was skipped.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/device.h"
#include "runtime/engine/model.h"
#include "runtime/engine/npy.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

namespace fs = std::filesystem;

struct ZooCase {
  const char* name;
  double tolerance;
  double min_relative = 0.0;  // the least max |engine - torch| / max |torch| (quantized models)
  /// Models with control flow: the conditional task ("if", "while") the replayed instance must
  /// hold (If and Loop stay in the instance instead of falling back to eager).
  const char* conditional = nullptr;
  /// Intra-op threads; with 2, a model with independent branches replays them forked onto two
  /// streams (ModelOptions::max_branch_streams), which the instance must show.
  int threads = 1;
  /// The CPU device's kernel options, and the suffix naming a case that changes them.
  kernels::cpu::CpuKernelOptions options = {};
  const char* variant = nullptr;
};

// `model` again with other kernel options: "nhwc" (channels-last conv chains, the layout of a
// CPU without AVX2) or "direct" (no Winograd, as without AVX-512).
ZooCase Variant(const char* model, const char* variant) {
  ZooCase c{model, 1e-4};
  c.variant = variant;
  if (std::string(variant) == "nhwc")
    c.options.conv_chain_layout = kernels::cpu::ConvChainLayout::kNhwc;
  if (std::string(variant) == "direct") c.options.conv_winograd = false;
  return c;
}

// The elements of a float or integer tensor as doubles.
std::vector<double> Values(const TensorValue& tensor) {
  std::vector<double> out;
  if (tensor.dtype == DataType::kInt64) {
    for (int64_t v : testing::Int64s(tensor)) out.push_back(static_cast<double>(v));
  } else {
    for (float v : testing::Floats(tensor)) out.push_back(v);
  }
  return out;
}

std::string FindModelDir(const std::string& name) {
  const char* dirs = std::getenv("REPRISE_ZOO_DIRS");
  if (dirs == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    const fs::path path = fs::path(std::string(dir)) / name;
    if (fs::exists(path / "model.onnx")) return path.string();
  }
  return "";
}

class ZooTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooTest, MatchesPyTorch) {
  const ZooCase& c = GetParam();
  const std::string dir = FindModelDir(c.name);
  if (dir.empty()) {
    GTEST_SKIP() << c.name << ": not found in $REPRISE_ZOO_DIRS (export it with "
                 << "tools/models/export_zoo.py; needs python3-torch)";
  }
  auto backend = CreateBackend("cpu");
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto device = (*backend)->device(0);
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels((*device)->kernels(), c.options).ok());
  ModelOptions options;
  options.intra_op_threads = c.threads;
  options.max_branch_streams = c.threads;  // branches fork only when asked
  auto model = Model::LoadFile(dir + "/model.onnx", *(*device)->kernels(), options);
  if (model.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << c.name << ": " << model.status().message();
  }
  ASSERT_TRUE(model.ok()) << model.status();
  // A zoo model planned per input (detection_head: NonMaxSuppression after a convolution
  // backbone) is cut there, so its runs below go through the prefix's replay and the tail.
  if ((*model)->keyed_by_all_values()) {
    EXPECT_NE((*model)->value_split(), nullptr) << c.name;
  }
  for (ExecMode mode : {ExecMode::kEager, ExecMode::kReplay}) {
    const char* mode_name = mode == ExecMode::kEager ? "eager" : "replay";
    // The plans keep c.threads (whose forks are checked below), whatever a timing would choose
    // (StreamSessionOptions::choose_threads).
    StreamSessionOptions session_options;
    session_options.choose_threads = false;
    auto session = StreamSession::Create(*model, *device, mode, session_options);
    ASSERT_TRUE(session.ok()) << session.status();
    for (int batch : {1, 4}) {
      auto input = ReadNpyFile(dir + "/input_b" + std::to_string(batch) + ".npy");
      auto expected = ReadNpyFile(dir + "/output_b" + std::to_string(batch) + ".npy");
      ASSERT_TRUE(input.ok()) << input.status();
      ASSERT_TRUE(expected.ok()) << expected.status();
      // Replay: the first run captures (and replays), the second only replays.
      for (int run = 0; run < 2; ++run) {
        SCOPED_TRACE(::testing::Message()
                     << c.name << " " << mode_name << " batch " << batch << " run " << run);
        StreamRunInfo info;
        auto out = (*session)->Run({{(*model)->inputs()[0].name, *input}}, &info);
        if (out.status().code() == absl::StatusCode::kUnimplemented) {
          GTEST_SKIP() << c.name << ": " << out.status().message();
        }
        ASSERT_TRUE(out.ok()) << out.status();
        if (mode == ExecMode::kReplay) {
          EXPECT_TRUE(info.replayed)
              << "capture failed: " << (*session)->ListInstances().front().reason;
          EXPECT_EQ(info.captured, run == 0);
          if (c.conditional != nullptr && run == 1) {
            bool found = false;
            for (const StreamInstanceInfo& instance : (*session)->ListInstances()) {
              auto dump = (*session)->DumpInstance(instance.shape_signature, false);
              ASSERT_TRUE(dump.ok()) << dump.status();
              found |= dump->find(std::string("\"type\": \"") + c.conditional + "\"") !=
                       std::string::npos;
            }
            EXPECT_TRUE(found) << c.name << ": no " << c.conditional << " task in the instances";
          }
          if (c.threads > 1 && run == 1) {
            const auto instances = (*session)->ListInstances();
            ASSERT_FALSE(instances.empty());
            auto dump = (*session)->DumpInstance(instances.front().shape_signature, false);
            ASSERT_TRUE(dump.ok()) << dump.status();
            EXPECT_NE(dump->find("\"num_streams\": 2"), std::string::npos)
                << c.name << ": the branches were not forked";
          }
        } else {
          EXPECT_TRUE(info.eager);
        }
        ASSERT_EQ(out->size(), 1u);
        const TensorValue& got = (*out)[0].value;
        ASSERT_EQ(got.shape, expected->shape);
        ASSERT_EQ(got.dtype, expected->dtype);
        std::vector<double> g = Values(got), w = Values(*expected);
        double max_abs = 0.0, max_diff = 0.0;
        for (size_t i = 0; i < w.size(); ++i) {
          max_abs = std::max(max_abs, std::fabs(static_cast<double>(w[i])));
          max_diff = std::max(max_diff, std::fabs(g[i] - w[i]));
        }
        // A vanishing reference would make any engine output look right.
        ASSERT_GT(max_abs, 1e-3) << c.name << ": the reference output is too small to compare";
        EXPECT_LE(max_diff, c.tolerance * max_abs);
        EXPECT_GE(max_diff, c.min_relative * max_abs) << c.name << ": no quantization error";
        if (run == 1) {
          std::cout << c.name << " " << mode_name << " batch " << batch << ": max abs diff "
                    << max_diff << ", relative " << max_diff / max_abs << "\n";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooTest,
    ::testing::Values(ZooCase{"mlp", 1e-4}, ZooCase{"resnet18", 1e-4},
                      ZooCase{"mobilenet_v2", 1e-4}, ZooCase{"transformer", 1e-4},
                      ZooCase{"lstm_tagger", 1e-4}, ZooCase{"gru_classifier", 1e-4},
                      ZooCase{"swin_small_input", 1e-4}, ZooCase{"detection_head", 1e-4},
                      ZooCase{"qdq_cnn", 3e-2, 1e-3}, ZooCase{"gated_branch", 1e-4, 0.0, "if"},
                      ZooCase{"greedy_decoder", 0.0, 0.0, "while"},
                      ZooCase{"googlenet", 1e-4, 0.0, nullptr, 2}, Variant("resnet18", "nhwc"),
                      Variant("mobilenet_v2", "nhwc"), Variant("resnet18", "direct"),
                      Variant("mobilenet_v2", "direct")),
    [](const auto& p) {
      std::string name = p.param.name;
      if (p.param.variant != nullptr) name += std::string("_") + p.param.variant;
      return name;
    });

}  // namespace
}  // namespace reprise::runtime::engine
