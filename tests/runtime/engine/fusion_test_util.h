// The fixture of the rewrite tests (fusion_*_test.cc): every CPU kernel, and the same kernels
// less the ops a rewrite produces (so the rewrite does not apply), to compare a rewritten
// graph's output with the plain graph's on the same input.
#ifndef REPRISE_TESTS_RUNTIME_ENGINE_FUSION_TEST_UTIL_H_
#define REPRISE_TESTS_RUNTIME_ENGINE_FUSION_TEST_UTIL_H_

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine::testing {

/// x [N,C,H,W] → 3x3 conv (pads 1) with bias; weights named `name`_w / `name`_b. `scaled`
/// weights lie in ±1/sqrt(fan-in), so that values keep their magnitude through deep chains (with
/// weights in ±1 they grow ~15x per layer and the last layer cancels most of it, which makes any
/// change of summation order look like an error).
inline void AddConv(ModelBuilder& b, const std::string& name, const std::string& in,
                    const std::string& out, int64_t c_in, int64_t c_out, uint32_t seed,
                    bool scaled = false) {
  const float bound = scaled ? 1.0f / std::sqrt(static_cast<float>(c_in * 9)) : 1.0f;
  b.FloatInit(name + "_w", {c_out, c_in, 3, 3},
              RandomFloats(c_out * c_in * 9, seed, -bound, bound));
  b.FloatInit(name + "_b", {c_out}, RandomFloats(c_out, seed + 1));
  auto& node = b.Node("Conv", {in, name + "_w", name + "_b"}, {out}, name);
  auto* pads = node.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
}

// x [N,C,L] → 1-D conv (kernel `k`, stride 2) with bias, weights in ±1/sqrt(fan-in).
inline void AddConv1d(ModelBuilder& b, const std::string& name, const std::string& in,
                      const std::string& out, int64_t c_in, int64_t c_out, int64_t k,
                      uint32_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(c_in * k));
  b.FloatInit(name + "_w", {c_out, c_in, k}, RandomFloats(c_out * c_in * k, seed, -bound, bound));
  b.FloatInit(name + "_b", {c_out}, RandomFloats(c_out, seed + 1));
  auto& node = b.Node("Conv", {in, name + "_w", name + "_b"}, {out}, name);
  auto* strides = node.add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->add_ints(2);
}

/// Every output of `got_model` on `inputs` as the same output of `want_model` (which may have
/// more): the same shape, and values within 1e-4 * (1 + |want|).
inline void ExpectSameOutputs(const Model& got_model, const Model& want_model,
                              const std::vector<NamedTensor>& inputs) {
  auto got = RunPlan(got_model, inputs);
  auto want = RunPlan(want_model, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_FALSE(got->empty());
  ASSERT_GE(want->size(), got->size());
  for (size_t k = 0; k < got->size(); ++k) {
    ASSERT_EQ((*got)[k].value.shape, (*want)[k].value.shape) << "output " << k;
    const std::vector<float> a = Floats((*got)[k].value), e = Floats((*want)[k].value);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], e[i], 1e-4f * (1.0f + std::fabs(e[i]))) << "output " << k << " at " << i;
    }
  }
}

class FusionTest : public ::testing::Test {
 protected:
  /// Fills registry_ with every CPU kernel and unfused_ with all of them but `fused_ops`.
  void RegisterAllBut(const std::set<std::string>& fused_ops) {
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok());
    for (const std::string& op : registry_.Ops()) {
      if (!fused_ops.contains(op)) {
        ASSERT_TRUE(unfused_.Register(op, registry_.Find(op)).ok());
      }
    }
  }

  /// The first output of `model` for the input "x" (empty, with a failure, on error).
  static std::vector<float> Run(const std::shared_ptr<const Model>& model, const TensorValue& x) {
    auto out = RunPlan(*model, {{"x", x}});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok() || out->empty()) return {};
    return Floats((*out)[0].value);
  }

  /// Loads `bytes` with both registries; the first outputs on `x` must agree within
  /// tolerance * (1 + |plain|). Returns the rewritten model (null on a load error) and, when
  /// asked, the plain one.
  std::shared_ptr<const Model> LoadBothWithin(const std::string& bytes, const TensorValue& x,
                                              float tolerance,
                                              std::shared_ptr<const Model>* unfused = nullptr) {
    std::vector<float> want, got;
    std::shared_ptr<const Model> fused = LoadBoth(bytes, x, &want, &got, unfused);
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], tolerance * (1.0f + std::fabs(want[i]))) << "at " << i;
    }
    return fused;
  }

  /// Loads `bytes` with both registries and runs both on `x`: the first outputs in `*want`
  /// (plain) and `*got` (rewritten), of the same non-zero size. Returns the rewritten model
  /// (null on a load error) and, when asked, the plain one.
  std::shared_ptr<const Model> LoadBoth(const std::string& bytes, const TensorValue& x,
                                        std::vector<float>* want, std::vector<float>* got,
                                        std::shared_ptr<const Model>* unfused = nullptr) {
    auto fused = Model::LoadBytes(bytes, registry_);
    auto plain = Model::LoadBytes(bytes, unfused_);
    EXPECT_TRUE(fused.ok()) << fused.status();
    EXPECT_TRUE(plain.ok()) << plain.status();
    if (!fused.ok() || !plain.ok()) return nullptr;
    *want = Run(*plain, x);
    *got = Run(*fused, x);
    EXPECT_FALSE(want->empty());
    EXPECT_EQ(got->size(), want->size());
    if (unfused != nullptr) *unfused = *plain;
    return *fused;
  }

  KernelRegistry registry_;
  KernelRegistry unfused_;
};

}  // namespace reprise::runtime::engine::testing

#endif  // REPRISE_TESTS_RUNTIME_ENGINE_FUSION_TEST_UTIL_H_
