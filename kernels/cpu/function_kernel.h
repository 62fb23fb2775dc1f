// The prepared-kernel classes most CPU kernels use: FunctionKernel (Run is a function object
// built at Prepare) and ConstantKernel (the outputs are known at Prepare).
#ifndef REPRISE_KERNELS_CPU_FUNCTION_KERNEL_H_
#define REPRISE_KERNELS_CPU_FUNCTION_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

using runtime::DataType;
using runtime::KernelArgs;
using runtime::PrepareContext;
using runtime::PreparedKernel;
using runtime::Shape;
using runtime::TensorDesc;

/// A prepared kernel whose Run is a function object. The function must not mutate captured
/// state: Run is called concurrently.
class FunctionKernel final : public PreparedKernel {
 public:
  using RunFn = std::function<absl::Status(const KernelArgs&)>;
  FunctionKernel(absl::string_view op, std::vector<TensorDesc> outputs, RunFn run,
                 size_t workspace_bytes = 0)
      : op_(op),
        outputs_(std::move(outputs)),
        run_(std::move(run)),
        workspace_bytes_(workspace_bytes) {}

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return workspace_bytes_; }
  absl::Status Run(const KernelArgs& args) const override { return run_(args); }
  std::vector<size_t> input_offsets_in_output() const override { return input_offsets_; }
  /// See PreparedKernel::input_offsets_in_output; `run` must then copy only the inputs found
  /// elsewhere than at their offsets.
  void set_input_offsets_in_output(std::vector<size_t> offsets) {
    input_offsets_ = std::move(offsets);
  }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  RunFn run_;
  size_t workspace_bytes_;
  std::vector<size_t> input_offsets_;
};

/// Shorthand for a FunctionKernel named after the context's op.
inline absl::StatusOr<std::unique_ptr<PreparedKernel>> MakeKernel(const PrepareContext& context,
                                                                  std::vector<TensorDesc> outputs,
                                                                  FunctionKernel::RunFn run,
                                                                  size_t workspace_bytes = 0) {
  return std::make_unique<FunctionKernel>(context.op, std::move(outputs), std::move(run),
                                          workspace_bytes);
}

/// One output of a ConstantKernel: its type, shape and bytes.
struct ConstantOutput {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  std::vector<uint8_t> bytes;
};

/// A kernel whose outputs are known at Prepare (Shape, Size, and the ops whose output sizes
/// follow their input values, computed when those values are known): each output desc's `data`
/// points at bytes the kernel owns, and Run copies them out.
class ConstantKernel final : public PreparedKernel {
 public:
  ConstantKernel(absl::string_view op, DataType dtype, Shape shape, std::vector<uint8_t> bytes);
  ConstantKernel(absl::string_view op, std::vector<ConstantOutput> outputs);
  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs& args) const override;

 private:
  std::string op_;
  std::vector<std::vector<uint8_t>> bytes_;  // per output
  std::vector<TensorDesc> outputs_;
};

/// A Run function that copies `bytes` bytes from input 0 to output 0 (the reshaping ops).
FunctionKernel::RunFn CopyInputToOutput(size_t bytes);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FUNCTION_KERNEL_H_
