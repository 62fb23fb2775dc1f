#include "kernels/cpu/binary.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

using runtime::DataType;
using runtime::KernelArgs;
using runtime::PrepareContext;
using runtime::PreparedKernel;
using runtime::Shape;
using runtime::TensorDesc;

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

template <BinaryOp kOp>
inline float Apply(float a, float b, float alpha) {
  if constexpr (kOp == BinaryOp::kAdd) return a + b * alpha;
  if constexpr (kOp == BinaryOp::kSub) return a - b;
  if constexpr (kOp == BinaryOp::kMul) return a * b;
  if constexpr (kOp == BinaryOp::kDiv) return a / b;
}

// Strides of `shape` laid into the output's rank, 0 where the input broadcasts.
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t in_axis = shape.size() - 1 - i;
    size_t out_axis = out.size() - 1 - i;
    strides[out_axis] = shape[in_axis] == 1 ? 0 : stride;
    stride *= shape[in_axis];
  }
  return strides;
}

template <BinaryOp kOp>
class BinaryKernel final : public PreparedKernel {
 public:
  BinaryKernel(absl::string_view op, const TensorDesc& a, const TensorDesc& b, float alpha,
               Shape out_shape)
      : op_(op), alpha_(alpha), out_shape_(std::move(out_shape)) {
    outputs_.push_back(TensorDesc{DataType::kFloat32, out_shape_});
    count_ = runtime::NumElements(out_shape_);
    a_count_ = runtime::NumElements(a.shape);
    b_count_ = runtime::NumElements(b.shape);
    a_strides_ = BroadcastStrides(a.shape, out_shape_);
    b_strides_ = BroadcastStrides(b.shape, out_shape_);
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }

  absl::Status Run(const KernelArgs& args) const override {
    const float* a = static_cast<const float*>(args.inputs[0]);
    const float* b = static_cast<const float*>(args.inputs[1]);
    float* out = static_cast<float*>(args.outputs[0]);
    const float alpha = alpha_;
    if (a_count_ == count_ && b_count_ == count_) {
      for (int64_t i = 0; i < count_; ++i) out[i] = Apply<kOp>(a[i], b[i], alpha);
    } else if (a_count_ == count_ && b_count_ == 1) {
      const float bv = b[0];
      for (int64_t i = 0; i < count_; ++i) out[i] = Apply<kOp>(a[i], bv, alpha);
    } else if (a_count_ == 1 && b_count_ == count_) {
      const float av = a[0];
      for (int64_t i = 0; i < count_; ++i) out[i] = Apply<kOp>(av, b[i], alpha);
    } else {
      RunBroadcast(a, b, out);
    }
    return absl::OkStatus();
  }

 private:
  void RunBroadcast(const float* a, const float* b, float* out) const {
    const size_t rank = out_shape_.size();
    std::vector<int64_t> index(rank, 0);
    int64_t ia = 0;
    int64_t ib = 0;
    for (int64_t i = 0; i < count_; ++i) {
      out[i] = Apply<kOp>(a[ia], b[ib], alpha_);
      // Advance the multi-index, innermost axis first.
      for (size_t axis = rank; axis-- > 0;) {
        ++index[axis];
        ia += a_strides_[axis];
        ib += b_strides_[axis];
        if (index[axis] < out_shape_[axis]) break;
        ia -= a_strides_[axis] * out_shape_[axis];
        ib -= b_strides_[axis] * out_shape_[axis];
        index[axis] = 0;
      }
    }
  }

  std::string op_;
  float alpha_;
  Shape out_shape_;
  std::vector<TensorDesc> outputs_;
  int64_t count_ = 0;
  int64_t a_count_ = 0;
  int64_t b_count_ = 0;
  std::vector<int64_t> a_strides_;
  std::vector<int64_t> b_strides_;
};

template <BinaryOp kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareBinary(const PrepareContext& context) {
  if (context.inputs.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(context.op, ": expected 2 inputs, got ", context.inputs.size()));
  }
  const TensorDesc& a = context.inputs[0];
  const TensorDesc& b = context.inputs[1];
  if (a.dtype != DataType::kFloat32 || b.dtype != DataType::kFloat32) {
    return absl::UnimplementedError(
        absl::StrCat(context.op, ": element types ", runtime::DataTypeName(a.dtype), " and ",
                     runtime::DataTypeName(b.dtype), " are not supported (float32 only)"));
  }
  float alpha = 1.0f;
  if (kOp == BinaryOp::kAdd && context.attributes != nullptr) {
    ASSIGN_OR_RETURN(alpha, context.attributes->GetFloat("alpha", 1.0f));
  }
  ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(a.shape, b.shape));
  return std::make_unique<BinaryKernel<kOp>>(context.op, a, b, alpha, std::move(out_shape));
}

}  // namespace

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", runtime::ShapeToString(a), " and ",
                                                     runtime::ShapeToString(b),
                                                     " do not broadcast"));
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

absl::Status RegisterBinaryKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("Add", &PrepareBinary<BinaryOp::kAdd>));
  RETURN_IF_ERROR(registry->Register("Sub", &PrepareBinary<BinaryOp::kSub>));
  RETURN_IF_ERROR(registry->Register("Mul", &PrepareBinary<BinaryOp::kMul>));
  RETURN_IF_ERROR(registry->Register("Div", &PrepareBinary<BinaryOp::kDiv>));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
