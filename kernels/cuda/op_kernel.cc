#include "kernels/cuda/op_kernel.h"

#include <algorithm>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

// The CPU kernels, as the reference for shapes and attribute checks. Filled once; read-only.
const runtime::KernelRegistry& CpuRegistry() {
  static const runtime::KernelRegistry* registry = [] {
    auto* r = new runtime::KernelRegistry();
    (void)cpu::RegisterCpuKernels(r);
    return r;
  }();
  return *registry;
}

using Factory = absl::StatusOr<std::unique_ptr<PreparedKernel>> (*)(const PrepareContext&);

struct Entry {
  const char* op;
  Factory factory;
};

constexpr Entry kEntries[] = {
    {"Add", &PrepareBinary},
    {"Sub", &PrepareBinary},
    {"Mul", &PrepareBinary},
    {"Div", &PrepareBinary},
    {"Max", &PrepareBinary},
    {"Min", &PrepareBinary},
    {"Pow", &PrepareBinary},
    {"Relu", &PrepareUnary},
    {"Sigmoid", &PrepareUnary},
    {"Tanh", &PrepareUnary},
    {"Exp", &PrepareUnary},
    {"Log", &PrepareUnary},
    {"Sqrt", &PrepareUnary},
    {"Neg", &PrepareUnary},
    {"Abs", &PrepareUnary},
    {"Erf", &PrepareUnary},
    {"Reciprocal", &PrepareUnary},
    {"Identity", &PrepareCopy},
    {"Dropout", &PrepareCopy},
    {"Reshape", &PrepareCopy},
    {"Flatten", &PrepareCopy},
    {"Squeeze", &PrepareCopy},
    {"Unsqueeze", &PrepareCopy},
    {"Cast", &PrepareCast},
    {"Transpose", &PrepareTranspose},
    {"Slice", &PrepareSlice},
    {"Expand", &PrepareExpand},
    {"Concat", &PrepareConcat},
    {"Gather", &PrepareGather},
    {"Shape", &PrepareConstant},
    {"Size", &PrepareConstant},
    {"ConstantOfShape", &PrepareConstant},
    {"Range", &PrepareConstant},
    {"Softmax", &PrepareSoftmax},
    {"LogSoftmax", &PrepareSoftmax},
    {"LayerNormalization", &PrepareLayerNorm},
    {"ReduceSum", &PrepareReduce},
    {"ReduceMean", &PrepareReduce},
    {"ReduceMax", &PrepareReduce},
    {"ReduceMin", &PrepareReduce},
    {"BatchNormalization", &PrepareBatchNorm},
    {"MaxPool", &PreparePool},
    {"AveragePool", &PreparePool},
    {"GlobalMaxPool", &PreparePool},
    {"GlobalAveragePool", &PreparePool},
    {"Conv", &PrepareConv},
    {"Gemm", &PrepareGemm},
    {"MatMul", &PrepareMatMul},
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
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> reference, CpuRegistry().Prepare(context));
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
  for (const TensorDesc& out : outputs) {
    const size_t bytes = runtime::NumElements(out.shape) * runtime::DataTypeSize(out.dtype);
    ASSIGN_OR_RETURN(void* device, kernel->Upload(out.data, bytes));
    values.emplace_back(device, bytes);
  }
  const std::string op(kernel->op());
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
  return absl::OkStatus();
}

std::vector<std::string> CudaKernelOps() {
  std::vector<std::string> ops;
  for (const Entry& entry : kEntries) ops.emplace_back(entry.op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace reprise::kernels::cuda
