// Differential test: every CUDA op against the CPU reference kernel over a sweep of shapes,
// run eagerly on a CUDA stream and (for each case) once more replayed from a captured graph.
#include <cmath>
#include <random>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/cuda/cuda_test_util.h"

namespace reprise::runtime::cuda_testing {
namespace {

struct Input {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  std::vector<int64_t> ints;  // int64 values (indices, slice parameters)
  bool constant = false;      // known at plan time (TensorDesc::data set)
};

struct Case {
  std::string op;
  std::vector<Input> inputs;
  Attributes attributes;
  float tolerance = 1e-4f;
  std::string label;
};

Input F(Shape shape) { return Input{DataType::kFloat32, std::move(shape), {}, false}; }
Input FConst(Shape shape) { return Input{DataType::kFloat32, std::move(shape), {}, true}; }
Input I64(Shape shape, std::vector<int64_t> values, bool constant) {
  return Input{DataType::kInt64, std::move(shape), std::move(values), constant};
}

Case Make(std::string op, std::vector<Input> inputs, std::string label) {
  Case c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.label = std::move(label);
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const std::vector<std::pair<Shape, Shape>> binary_shapes = {{{1}, {7}},
                                                              {{4, 2}, {4, 2}},
                                                              {{3, 1, 5}, {4, 5}},
                                                              {{2, 3, 4, 5}, {5}},
                                                              {{257, 129}, {1, 129}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (const auto& [a, b] : binary_shapes) {
      cases.push_back(Make(op, {F(a), F(b)}, ShapeToString(a) + "x" + ShapeToString(b)));
    }
  }
  Case add_alpha = Make("Add", {F({4, 2}), F({4, 2})}, "alpha");
  add_alpha.attributes.Set("alpha", 1.1f);
  cases.push_back(add_alpha);
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf"}) {
    for (const Shape& s : std::vector<Shape>{{1}, {1000}, {3, 7, 11}}) {
      cases.push_back(Make(op, {F(s)}, ShapeToString(s)));
    }
  }
  for (int64_t axis : {-1, 1}) {
    for (const Shape& s : std::vector<Shape>{{1, 10}, {4, 16, 64}, {2, 1000}}) {
      for (const char* op : {"Softmax", "LogSoftmax"}) {
        Case c = Make(op, {F(s)}, ShapeToString(s));
        c.attributes.Set("axis", axis);
        cases.push_back(c);
      }
    }
  }
  for (const Shape& s : std::vector<Shape>{{3, 5}, {2, 16, 64}, {1, 768}}) {
    Case c = Make("LayerNormalization", {F(s), F({s.back()}), F({s.back()})}, ShapeToString(s));
    cases.push_back(c);
  }
  {
    Case t = Make("Transpose", {F({2, 3, 4})}, "perm201");
    t.attributes.Set("perm", std::vector<int64_t>{2, 0, 1});
    cases.push_back(t);
    Case t2 = Make("Transpose", {F({16, 4, 16})}, "perm102");
    t2.attributes.Set("perm", std::vector<int64_t>{1, 0, 2});
    cases.push_back(t2);
    cases.push_back(Make("Transpose", {F({33, 65})}, "default"));
  }
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
    Case r = Make(op, {F({4, 8, 16})}, "axis2");
    r.attributes.Set("axes", std::vector<int64_t>{2});
    if (std::string(op) == "ReduceSum") {
      r.inputs.push_back(I64({1}, {2}, true));
    }
    cases.push_back(r);
    Case r2 = Make(op, {F({4, 8, 16})}, "axes01");
    r2.attributes.Set("axes", std::vector<int64_t>{0, 1});
    r2.attributes.Set("keepdims", int64_t{0});
    if (std::string(op) == "ReduceSum") r2.inputs.push_back(I64({2}, {0, 1}, true));
    cases.push_back(r2);
  }
  {
    cases.push_back(Make("Gather", {F({10, 4}), I64({3}, {0, 9, -1}, false)}, "axis0"));
    Case g = Make("Gather", {F({4, 10}), I64({2, 2}, {1, 3, 5, 7}, false)}, "axis1");
    g.attributes.Set("axis", int64_t{1});
    cases.push_back(g);
    Case c = Make("Concat", {F({2, 3}), F({2, 5}), F({2, 1})}, "axis1");
    c.attributes.Set("axis", int64_t{1});
    cases.push_back(c);
    Case c0 = Make("Concat", {F({1, 4, 4}), F({3, 4, 4})}, "axis0");
    c0.attributes.Set("axis", int64_t{0});
    cases.push_back(c0);
    cases.push_back(Make("Slice",
                         {F({8, 10}), I64({2}, {1, -8}, true), I64({2}, {7, 100}, true),
                          I64({2}, {0, 1}, true), I64({2}, {2, 3}, true)},
                         "steps"));
    cases.push_back(Make("Slice",
                         {F({6, 5}), I64({1}, {-1}, true), I64({1}, {-100}, true),
                          I64({1}, {1}, true), I64({1}, {-1}, true)},
                         "reverse"));
    cases.push_back(Make("Expand", {F({3, 1}), I64({3}, {2, 3, 4}, true)}, "to234"));
    cases.push_back(Make("Reshape", {F({4, 6}), I64({2}, {6, -1}, true)}, "6x4"));
  }
  {
    Case g = Make("Gemm", {F({1, 64}), F({128, 64}), F({128})}, "transB_bias");
    g.attributes.Set("transB", int64_t{1});
    cases.push_back(g);
    Case g2 = Make("Gemm", {F({5, 7}), F({5, 3})}, "transA");
    g2.attributes.Set("transA", int64_t{1});
    g2.attributes.Set("alpha", 0.5f);
    cases.push_back(g2);
    Case g3 = Make("Gemm", {F({7, 5}), F({5, 3}), F({7, 3})}, "beta");
    g3.attributes.Set("beta", 2.0f);
    cases.push_back(g3);
    cases.push_back(Make("MatMul", {F({2, 4, 16, 16}), F({2, 4, 16, 16})}, "batched"));
    cases.push_back(Make("MatMul", {F({16, 64}), F({64, 128})}, "2d"));
    cases.push_back(Make("MatMul", {F({4, 16, 64}), F({64, 64})}, "folded"));
    cases.push_back(Make("MatMul", {F({16, 64}), F({3, 64, 8})}, "broadcastA"));
    cases.push_back(Make("MatMul", {F({64}), F({64, 3})}, "vector"));
    for (Case& c : cases) {
      if (c.op == "Gemm" || c.op == "MatMul") c.tolerance = 1e-3f;
    }
  }
  {
    Case conv = Make("Conv", {F({1, 3, 16, 16}), F({8, 3, 3, 3}), F({8})}, "pad1_stride2");
    conv.attributes.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
    conv.attributes.Set("strides", std::vector<int64_t>{2, 2});
    conv.tolerance = 1e-3f;
    cases.push_back(conv);
    Case grouped = Make("Conv", {F({2, 4, 9, 9}), F({4, 1, 3, 3})}, "depthwise");
    grouped.attributes.Set("group", int64_t{4});
    grouped.tolerance = 1e-3f;
    cases.push_back(grouped);
    Case max = Make("MaxPool", {F({1, 4, 17, 17})}, "3x3s2p1");
    max.attributes.Set("kernel_shape", std::vector<int64_t>{3, 3});
    max.attributes.Set("strides", std::vector<int64_t>{2, 2});
    max.attributes.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
    cases.push_back(max);
    Case avg = Make("AveragePool", {F({2, 3, 8, 8})}, "2x2");
    avg.attributes.Set("kernel_shape", std::vector<int64_t>{2, 2});
    avg.attributes.Set("strides", std::vector<int64_t>{2, 2});
    cases.push_back(avg);
    cases.push_back(Make("GlobalAveragePool", {F({2, 5, 7, 7})}, "global"));
    cases.push_back(Make("BatchNormalization",
                         {F({2, 3, 4, 4}), FConst({3}), FConst({3}), FConst({3}), FConst({3})},
                         "inference"));
  }
  cases.push_back(Make("Clip", {F({3, 50}), FConst({}), FConst({})}, "min_max"));
  cases.push_back(Make("Clip", {F({7})}, "unbounded"));
  cases.push_back(Make("Cast", {I64({4}, {1, -2, 3, 70000}, false)}, "i64_to_f32"));
  cases.back().attributes.Set("to", int64_t{1});
  return cases;
}

class CudaKernelsDiffTest : public CudaTest {};

TEST_F(CudaKernelsDiffTest, EveryCaseMatchesTheCpuReference) {
  KernelRegistry cpu_registry;
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&cpu_registry).ok());
  auto stream = NewStream();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::uniform_real_distribution<float> positive(0.5f, 2.0f);
  int compared = 0;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.op + " " + c.label);
    // One case per lambda call: an ASSERT ends that case only, the sweep goes on.
    [&] {
      // Host values of every input.
      std::vector<std::vector<uint8_t>> host(c.inputs.size());
      std::vector<TensorDesc> descs;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const Input& in = c.inputs[i];
        const int64_t n = NumElements(in.shape);
        host[i].resize(n * DataTypeSize(in.dtype));
        if (in.dtype == DataType::kInt64) {
          std::memcpy(host[i].data(), in.ints.data(), host[i].size());
        } else {
          auto* f = reinterpret_cast<float*>(host[i].data());
          const bool var = c.op == "BatchNormalization" && i == 4;
          for (int64_t k = 0; k < n; ++k) f[k] = var ? positive(rng) : uniform(rng);
          if (c.op == "Clip" && i > 0) f[0] = i == 1 ? -0.5f : 0.7f;  // min < max
        }
        TensorDesc desc{in.dtype, in.shape};
        if (in.constant) desc.data = host[i].data();
        descs.push_back(desc);
      }
      PrepareContext context;
      context.op = c.op;
      context.inputs = descs;
      context.attributes = &c.attributes;
      auto cpu = cpu_registry.Prepare(context);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      auto gpu = device_->kernels()->Prepare(context);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      const TensorDesc& out_desc = (*cpu)->outputs()[0];
      const size_t out_bytes = NumElements(out_desc.shape) * DataTypeSize(out_desc.dtype);
      // CPU reference.
      std::vector<const void*> cpu_in;
      for (auto& h : host) cpu_in.push_back(h.data());
      std::vector<uint8_t> expected(out_bytes);
      std::vector<uint8_t> cpu_workspace((*cpu)->workspace_bytes());
      void* cpu_out[] = {expected.data()};
      KernelArgs args;
      args.inputs = cpu_in.data();
      args.outputs = cpu_out;
      args.workspace = cpu_workspace.empty() ? nullptr : cpu_workspace.data();
      ASSERT_TRUE((*cpu)->Run(args).ok());
      // GPU, eager then replayed.
      std::vector<const void*> gpu_in;
      for (auto& h : host) {
        void* d = DeviceBytes(std::max<size_t>(h.size(), 1));
        ASSERT_TRUE(device_->Memcpy(d, h.data(), h.size(), CopyKind::kHostToDevice).ok());
        gpu_in.push_back(d);
      }
      void* gpu_out[] = {DeviceBytes(std::max<size_t>(out_bytes, 1))};
      void* workspace =
          (*gpu)->workspace_bytes() > 0 ? DeviceBytes((*gpu)->workspace_bytes()) : nullptr;
      for (int pass = 0; pass < 2; ++pass) {
        ASSERT_TRUE(device_->Memset(gpu_out[0], 0xff, std::max<size_t>(out_bytes, 1)).ok());
        std::unique_ptr<ModelRI> ri;
        if (pass == 1) {
          ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
        }
        ASSERT_TRUE(stream->LaunchKernel(**gpu, gpu_in, gpu_out, workspace).ok());
        if (pass == 1) {
          auto captured = EndCapture(stream.get());
          ASSERT_TRUE(captured.ok()) << captured.status();
          ri = std::move(captured).value();
          ASSERT_TRUE(ExecuteAsync(*ri, stream.get()).ok());
        }
        ASSERT_TRUE(stream->Synchronize().ok());
        std::vector<uint8_t> actual(out_bytes);
        ASSERT_TRUE(
            device_->Memcpy(actual.data(), gpu_out[0], out_bytes, CopyKind::kDeviceToHost).ok());
        if (out_desc.dtype == DataType::kFloat32) {
          const auto* e = reinterpret_cast<const float*>(expected.data());
          const auto* a = reinterpret_cast<const float*>(actual.data());
          for (size_t k = 0; k < out_bytes / sizeof(float); ++k) {
            ASSERT_NEAR(a[k], e[k], c.tolerance * (1.0f + std::fabs(e[k])))
                << "element " << k << (pass ? " (replay)" : " (eager)");
          }
        } else {
          EXPECT_EQ(actual, expected) << (pass ? "replay" : "eager");
        }
      }
      ++compared;
    }();
    // A case that failed while capturing leaves the capture open: end it for the next case.
    if (GetCaptureInfo(stream.get()).status != CaptureStatus::kNone) {
      (void)EndCapture(stream.get());
    }
  }
  EXPECT_EQ(compared, static_cast<int>(Cases().size()));
}

}  // namespace
}  // namespace reprise::runtime::cuda_testing
