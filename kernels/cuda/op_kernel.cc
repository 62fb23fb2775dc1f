#include "kernels/cuda/op_kernel.h"

#include <algorithm>
#include <utility>

#include "kernels/cuda/cuda_kernel_state.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<PreparedKernel>> (*)(const PrepareContext&);

// Every factory goes through this: a node whose inputs are all known at plan time (a shape
// computation, often on int64) is computed by the engine on the host through Run (the CPU
// reference) and never launched, so it needs no CUDA support for its types.
template <Factory kFactory>
absl::StatusOr<std::unique_ptr<PreparedKernel>> Prepare(const PrepareContext& context) {
  bool all_known = !context.inputs.empty();
  for (const TensorDesc& input : context.inputs) {
    if (input.present && input.data == nullptr) all_known = false;
  }
  if (!all_known) return kFactory(context);
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  const std::string op(context.op);
  kernel->set_launch([op](const KernelArgs&, cudaStream_t) {
    return absl::FailedPreconditionError(absl::StrCat(
        op, ": every input was known at plan time; the value is computed on the host (Run)"));
  });
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

struct Entry {
  const char* op;
  Factory factory;
};

constexpr Entry kEntries[] = {
    {"Add", &Prepare<&PrepareBinary>},
    {"Sub", &Prepare<&PrepareBinary>},
    {"Mul", &Prepare<&PrepareBinary>},
    {"Div", &Prepare<&PrepareBinary>},
    {"Max", &Prepare<&PrepareBinary>},
    {"Min", &Prepare<&PrepareBinary>},
    {"Pow", &Prepare<&PrepareBinary>},
    {"Relu", &Prepare<&PrepareUnary>},
    {"Sigmoid", &Prepare<&PrepareUnary>},
    {"Tanh", &Prepare<&PrepareUnary>},
    {"Exp", &Prepare<&PrepareUnary>},
    {"Log", &Prepare<&PrepareUnary>},
    {"Sqrt", &Prepare<&PrepareUnary>},
    {"Neg", &Prepare<&PrepareUnary>},
    {"Abs", &Prepare<&PrepareUnary>},
    {"Erf", &Prepare<&PrepareUnary>},
    {"Reciprocal", &Prepare<&PrepareUnary>},
    {"Identity", &Prepare<&PrepareCopy>},
    {"Dropout", &Prepare<&PrepareCopy>},
    {"Reshape", &Prepare<&PrepareCopy>},
    {"Flatten", &Prepare<&PrepareCopy>},
    {"Squeeze", &Prepare<&PrepareCopy>},
    {"Unsqueeze", &Prepare<&PrepareCopy>},
    {"Cast", &Prepare<&PrepareCast>},
    {"Clip", &Prepare<&PrepareClip>},
    {"Transpose", &Prepare<&PrepareTranspose>},
    {"Slice", &Prepare<&PrepareSlice>},
    {"Expand", &Prepare<&PrepareExpand>},
    {"Concat", &Prepare<&PrepareConcat>},
    {"Gather", &Prepare<&PrepareGather>},
    {"Shape", &Prepare<&PrepareConstant>},
    {"Size", &Prepare<&PrepareConstant>},
    {"ConstantOfShape", &Prepare<&PrepareConstant>},
    {"Range", &Prepare<&PrepareConstant>},
    {"Softmax", &Prepare<&PrepareSoftmax>},
    {"LogSoftmax", &Prepare<&PrepareSoftmax>},
    {"LayerNormalization", &Prepare<&PrepareLayerNorm>},
    {"ReduceSum", &Prepare<&PrepareReduce>},
    {"ReduceMean", &Prepare<&PrepareReduce>},
    {"ReduceMax", &Prepare<&PrepareReduce>},
    {"ReduceMin", &Prepare<&PrepareReduce>},
    {"BatchNormalization", &Prepare<&PrepareBatchNorm>},
    {"MaxPool", &Prepare<&PreparePool>},
    {"AveragePool", &Prepare<&PreparePool>},
    {"GlobalMaxPool", &Prepare<&PreparePool>},
    {"GlobalAveragePool", &Prepare<&PreparePool>},
    {"Conv", &Prepare<&PrepareConv>},
    {"Gemm", &Prepare<&PrepareGemm>},
    {"MatMul", &Prepare<&PrepareMatMul>},
};

}  // namespace

OpKernel::OpKernel(std::string op, std::unique_ptr<PreparedKernel> reference, LaunchFn launch,
                   size_t workspace_bytes)
    : op_(std::move(op)),
      reference_(std::move(reference)),
      launch_(std::move(launch)),
      workspace_bytes_(workspace_bytes) {}

OpKernel::~OpKernel() {
  for (void* ptr : constants_) (void)cudaFree(ptr);
}

absl::StatusOr<void*> OpKernel::Upload(const void* data, size_t bytes) {
  void* ptr = nullptr;
  RETURN_IF_ERROR(CheckLaunch(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)), op_));
  constants_.push_back(ptr);
  RETURN_IF_ERROR(CheckLaunch(cudaMemcpy(ptr, data, bytes, cudaMemcpyHostToDevice), op_));
  return ptr;
}

absl::StatusOr<std::unique_ptr<OpKernel>> PrepareReference(const PrepareContext& context) {
  ASSIGN_OR_RETURN(CudaKernelState * state, CudaKernelStateOf(context));
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> reference,
                   state->cpu_reference().Prepare(context));
  return std::make_unique<OpKernel>(std::string(context.op), std::move(reference), nullptr);
}

absl::Status CheckLaunch(cudaError_t error, absl::string_view op) {
  if (error == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  return absl::InternalError(
      absl::StrCat(op, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

absl::Status Check(cudaError_t error, const PrepareContext& context) {
  return CheckLaunch(error, context.name.empty() ? context.op : context.name);
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

std::vector<int64_t> BroadcastStrides(const Shape& input, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> own = Strides(input);
  const size_t shift = out.size() - input.size();
  for (size_t d = 0; d < input.size(); ++d) {
    strides[shift + d] = input[d] == 1 && out[shift + d] != 1 ? 0 : own[d];
  }
  return strides;
}

absl::StatusOr<StridedView> MakeView(const Shape& out, const std::vector<int64_t>& a_stride,
                                     const std::vector<int64_t>& b_stride) {
  if (out.size() > static_cast<size_t>(kMaxDims)) {
    return absl::UnimplementedError(
        absl::StrCat("cuda kernels support up to ", kMaxDims, " dims, got ", out.size()));
  }
  StridedView view;
  view.ndim = static_cast<int>(out.size());
  const std::vector<int64_t> out_stride = Strides(out);
  for (size_t d = 0; d < out.size(); ++d) {
    view.shape[d] = out[d];
    view.out_stride[d] = out_stride[d];
    view.a_stride[d] = d < a_stride.size() ? a_stride[d] : 0;
    view.b_stride[d] = d < b_stride.size() ? b_stride[d] : 0;
  }
  return view;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, size_t rank, const PrepareContext& context) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return absl::InvalidArgumentError(
        absl::StrCat(context.op, ": axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + r : axis;
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d) product *= shape[d];
  return product;
}

absl::StatusOr<bool> PrepareConstantOutputs(OpKernel* kernel) {
  const auto& outputs = kernel->outputs();
  for (const TensorDesc& out : outputs) {
    if (out.data == nullptr) return false;
  }
  std::vector<std::pair<void*, size_t>> values;
  const std::string op(kernel->op());
  for (const TensorDesc& out : outputs) {
    const size_t bytes = runtime::NumElements(out.shape) * runtime::DataTypeSize(out.dtype);
    absl::StatusOr<void*> device = kernel->Upload(out.data, bytes);
    if (!device.ok()) {
      // No device (a planning-only machine): the engine folds such outputs at plan time and
      // never launches the kernel; a launch reports why it cannot run.
      kernel->set_launch(
          [error = device.status()](const KernelArgs&, cudaStream_t) { return error; });
      return true;
    }
    values.emplace_back(*device, bytes);
  }
  kernel->set_launch([values, op](const KernelArgs& args, cudaStream_t stream) {
    for (size_t i = 0; i < values.size(); ++i) {
      RETURN_IF_ERROR(
          CheckLaunch(cudaMemcpyAsync(args.outputs[i], values[i].first, values[i].second,
                                      cudaMemcpyDeviceToDevice, stream),
                      op));
    }
    return absl::OkStatus();
  });
  return true;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConstant(const PrepareContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, PrepareReference(context));
  ASSIGN_OR_RETURN(bool constant, PrepareConstantOutputs(kernel.get()));
  if (!constant) {
    return absl::UnimplementedError(absl::StrCat(
        context.op, " \"", context.name, "\": on cuda only when its value is known at plan time"));
  }
  return std::unique_ptr<PreparedKernel>(std::move(kernel));
}

absl::Status RegisterCudaKernels(runtime::KernelRegistry* registry) {
  for (const Entry& entry : kEntries) {
    RETURN_IF_ERROR(registry->Register(entry.op, entry.factory));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<CudaKernelState> state, CudaKernelState::Create());
  return registry->SetState(std::move(state));
}

std::vector<std::string> CudaKernelOps() {
  std::vector<std::string> ops;
  for (const Entry& entry : kEntries) ops.emplace_back(entry.op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace reprise::kernels::cuda
