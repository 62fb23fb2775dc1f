#include "kernels/cpu/function_kernel.h"

#include <cstring>

namespace reprise::kernels::cpu {

FunctionKernel::RunFn CopyInputToOutput(size_t bytes) {
  return [bytes](const KernelArgs& args) {
    if (bytes > 0 && args.outputs[0] != args.inputs[0]) {
      std::memmove(args.outputs[0], args.inputs[0], bytes);
    }
    return absl::OkStatus();
  };
}

ConstantKernel::ConstantKernel(absl::string_view op, DataType dtype, Shape shape,
                               std::vector<uint8_t> bytes)
    : ConstantKernel(op, {ConstantOutput{dtype, std::move(shape), std::move(bytes)}}) {}

ConstantKernel::ConstantKernel(absl::string_view op, std::vector<ConstantOutput> outputs)
    : op_(op) {
  for (ConstantOutput& out : outputs) {
    TensorDesc desc;
    desc.dtype = out.dtype;
    desc.shape = std::move(out.shape);
    bytes_.push_back(std::move(out.bytes));
    bytes_.back().reserve(1);  // an empty output is known too: its data pointer is not null
    outputs_.push_back(std::move(desc));
  }
  // The buffers no longer move once every output is in.
  for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i].data = bytes_[i].data();
}

absl::Status ConstantKernel::Run(const KernelArgs& args) const {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!bytes_[i].empty() && args.outputs[i] != nullptr) {
      std::memcpy(args.outputs[i], bytes_[i].data(), bytes_[i].size());
    }
  }
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
