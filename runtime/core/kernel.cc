#include "runtime/core/kernel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace reprise::runtime {
namespace {

template <typename T>
absl::StatusOr<T> GetAs(const Attributes& attrs, absl::string_view name, T fallback,
                        absl::string_view type_name) {
  const AttributeValue* value = attrs.Find(name);
  if (value == nullptr) return fallback;
  if (const T* typed = std::get_if<T>(value)) return *typed;
  return absl::InvalidArgumentError(
      absl::StrCat("attribute \"", name, "\" is not of type ", type_name));
}

}  // namespace

const AttributeValue* Attributes::Find(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> Attributes::GetInt(absl::string_view name, int64_t fallback) const {
  return GetAs<int64_t>(*this, name, fallback, "int");
}

absl::StatusOr<float> Attributes::GetFloat(absl::string_view name, float fallback) const {
  return GetAs<float>(*this, name, fallback, "float");
}

absl::StatusOr<std::string> Attributes::GetString(absl::string_view name,
                                                  std::string fallback) const {
  return GetAs<std::string>(*this, name, std::move(fallback), "string");
}

absl::StatusOr<std::vector<int64_t>> Attributes::GetInts(absl::string_view name,
                                                         std::vector<int64_t> fallback) const {
  return GetAs<std::vector<int64_t>>(*this, name, std::move(fallback), "ints");
}

absl::StatusOr<std::vector<float>> Attributes::GetFloats(absl::string_view name,
                                                         std::vector<float> fallback) const {
  return GetAs<std::vector<float>>(*this, name, std::move(fallback), "floats");
}

absl::StatusOr<const TensorValue*> Attributes::GetTensor(absl::string_view name) const {
  const AttributeValue* value = Find(name);
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("attribute \"", name, "\" is missing"));
  }
  if (const auto* tensor = std::get_if<TensorValue>(value)) return tensor;
  return absl::InvalidArgumentError(absl::StrCat("attribute \"", name, "\" is not a tensor"));
}

absl::Status KernelRegistry::Register(std::string op, KernelFactory factory) {
  if (factory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel \"", op, "\": null factory"));
  }
  auto [it, inserted] = factories_.emplace(std::move(op), factory);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("kernel \"", it->first, "\" registered twice"));
  }
  return absl::OkStatus();
}

absl::Status KernelRegistry::SetState(std::shared_ptr<KernelState> state) {
  if (state_ != nullptr) {
    return absl::AlreadyExistsError("the kernel registry already has a kernel library's state");
  }
  state_ = std::move(state);
  return absl::OkStatus();
}

KernelFactory KernelRegistry::Find(absl::string_view op) const {
  auto it = factories_.find(op);
  return it == factories_.end() ? nullptr : it->second;
}

std::vector<std::string> KernelRegistry::Ops() const {
  std::vector<std::string> ops;
  ops.reserve(factories_.size());
  for (const auto& [op, factory] : factories_) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> KernelRegistry::Prepare(
    const PrepareContext& context) const {
  KernelFactory factory = Find(context.op);
  if (factory == nullptr) {
    return absl::NotFoundError(absl::StrCat("no kernel for op \"", context.op, "\""));
  }
  // A registry nested in another library (the CUDA kernels' CPU reference) prepares with its
  // own state, not the caller's.
  PrepareContext with_state = context;
  with_state.kernel_state = state_;
  return factory(with_state);
}

}  // namespace reprise::runtime
