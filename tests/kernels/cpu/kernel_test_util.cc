#include "tests/kernels/cpu/kernel_test_util.h"

#include <utility>

namespace reprise::kernels::cpu::testing {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

KernelHarness::KernelHarness() {
  absl::Status status = RegisterCpuKernels(&own_);
  if (!status.ok()) std::abort();  // a test-setup bug, not input
}

KernelHarness::KernelHarness(const runtime::KernelRegistry* registry) : registry_(registry) {}

const void* KernelHarness::KeptCopy(const Tensor& t) const {
  std::lock_guard<std::mutex> lock(kept_mu_);
  for (const Kept& k : kept_) {
    if (k.source == t.bytes.data() && k.bytes == t.bytes) return k.bytes.data();
  }
  kept_.push_back(Kept{t.bytes.data(), t.bytes});
  return kept_.back().bytes.data();
}

std::vector<runtime::TensorDesc> KernelHarness::Descs(const std::vector<Tensor>& inputs) const {
  std::vector<runtime::TensorDesc> descs;
  for (const Tensor& t : inputs) {
    runtime::TensorDesc d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    d.present = t.present;
    if (t.known) d.data = KeptCopy(t);
    descs.push_back(d);
  }
  return descs;
}

absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> KernelHarness::Prepare(
    const std::string& op, const std::vector<Tensor>& inputs, const runtime::Attributes& attrs,
    int opset, int num_outputs, int threads, bool run_once) const {
  std::vector<runtime::TensorDesc> descs = Descs(inputs);
  runtime::PrepareContext context;
  context.op = op;
  context.name = "node";
  context.opset = opset;
  context.inputs = descs;
  context.num_outputs = num_outputs;
  context.attributes = &attrs;
  context.intra_op_threads = threads;
  context.run_once = run_once;
  return registry_->Prepare(context);
}

absl::StatusOr<std::vector<Tensor>> KernelHarness::RunPrepared(
    const runtime::PreparedKernel& kernel, const std::vector<Tensor>& inputs) const {
  std::vector<const void*> in_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(t.present ? t.bytes.data() : nullptr);
  std::vector<Tensor> outputs;
  for (const runtime::TensorDesc& d : kernel.outputs()) {
    Tensor t;
    t.dtype = d.dtype;
    t.shape = d.shape;
    // A padded layout, or a string output with its strings' storage, may take more.
    t.bytes.resize(std::max(runtime::NumElements(d.shape) * runtime::DataTypeSize(d.dtype),
                            kernel.output_storage_bytes(outputs.size())));
    outputs.push_back(std::move(t));
  }
  // Separate heap blocks of exactly the right size, so that overruns are caught by ASan. They
  // start as NaNs (bytes 0xFF), as the arena and a value computed at plan time hold whatever was
  // there before: a kernel must write every byte of its outputs.
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<void*> out_ptrs;
  for (const Tensor& t : outputs) {
    blocks.push_back(std::make_unique<uint8_t[]>(t.bytes.size()));
    if (!t.bytes.empty()) std::memset(blocks.back().get(), 0xFF, t.bytes.size());
    out_ptrs.push_back(blocks.back().get());
  }
  // The workspace starts as NaNs (bytes 0xFF), as a plan's shared arena holds other steps'
  // values: a kernel must write what it reads there.
  std::unique_ptr<uint8_t[]> workspace;
  if (kernel.workspace_bytes() > 0) {
    workspace = std::make_unique<uint8_t[]>(kernel.workspace_bytes());
    std::memset(workspace.get(), 0xFF, kernel.workspace_bytes());
  }
  runtime::KernelArgs args{in_ptrs.data(), out_ptrs.data(), workspace.get()};
  absl::Status status = kernel.Run(args);
  if (!status.ok()) return status;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].bytes.empty()) {
      std::memcpy(outputs[i].bytes.data(), blocks[i].get(), outputs[i].bytes.size());
    }
  }
  return outputs;
}

absl::StatusOr<std::vector<Tensor>> KernelHarness::Run(const std::string& op,
                                                       const std::vector<Tensor>& inputs,
                                                       const runtime::Attributes& attrs, int opset,
                                                       int num_outputs) const {
  auto kernel = Prepare(op, inputs, attrs, opset, num_outputs);
  if (!kernel.ok()) return kernel.status();
  return RunPrepared(**kernel, inputs);
}

absl::Status RunOnBuffers(const runtime::PreparedKernel& kernel,
                          const std::vector<const void*>& inputs, void* output) {
  std::vector<uint8_t> workspace(kernel.workspace_bytes() + 64);
  void* outputs[] = {output};
  runtime::KernelArgs args;
  args.inputs = inputs.data();
  args.outputs = outputs;
  args.workspace = workspace.data();
  return kernel.Run(args);
}

runtime::Attributes Attrs(
    std::initializer_list<std::pair<std::string, runtime::AttributeValue>> values) {
  runtime::Attributes attrs;
  for (const auto& [name, value] : values) attrs.Set(name, value);
  return attrs;
}

std::vector<float> StoreInLanes(const std::vector<float>& v, int64_t images, int64_t channels,
                                int64_t pixels, int64_t lanes) {
  if (lanes == 0) return v;
  const int64_t groups = (channels + lanes - 1) / lanes;
  std::vector<float> out(images * groups * lanes * pixels, 0.0f);
  for (int64_t i = 0; i < images; ++i)
    for (int64_t k = 0; k < channels; ++k)
      for (int64_t q = 0; q < pixels; ++q)
        out[((i * groups + k / lanes) * pixels + q) * lanes + k % lanes] =
            v[(i * channels + k) * pixels + q];
  return out;
}

int64_t OutSize(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe) {
  return (in + pb + pe - ((k - 1) * dil + 1)) / stride + 1;
}

std::vector<float> ReferenceConv(const ConvCase& p, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>& b) {
  const int64_t oh = OutSize(p.h, p.kh, p.stride_h, p.dil_h, p.pad_t, p.pad_b);
  const int64_t ow = OutSize(p.w, p.kw, p.stride_w, p.dil_w, p.pad_l, p.pad_r);
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  std::vector<float> y(p.n * p.m * oh * ow);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0.0 : b[m];
          const int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ki = 0; ki < p.kh; ++ki)
              for (int64_t kj = 0; kj < p.kw; ++kj) {
                const int64_t hi = i * p.stride_h - p.pad_t + ki * p.dil_h;
                const int64_t wj = j * p.stride_w - p.pad_l + kj * p.dil_w;
                if (hi < 0 || hi >= p.h || wj < 0 || wj >= p.w) continue;
                acc += x[((n * p.c + g * cg + c) * p.h + hi) * p.w + wj] *
                       w[((m * cg + c) * p.kh + ki) * p.kw + kj];
              }
          y[((n * p.m + m) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

}  // namespace reprise::kernels::cpu::testing
