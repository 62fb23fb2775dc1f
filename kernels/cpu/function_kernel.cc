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
    : op_(op), bytes_(std::move(bytes)) {
  TensorDesc desc;
  desc.dtype = dtype;
  desc.shape = std::move(shape);
  desc.data = bytes_.data();
  outputs_.push_back(std::move(desc));
}

absl::Status ConstantKernel::Run(const KernelArgs& args) const {
  if (!bytes_.empty()) std::memcpy(args.outputs[0], bytes_.data(), bytes_.size());
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
