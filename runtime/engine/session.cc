#include "runtime/engine/session.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace reprise::runtime::engine {
namespace {

std::string Signature(const std::vector<Shape>& shapes) {
  std::string key;
  for (const Shape& shape : shapes) absl::StrAppend(&key, ShapeToString(shape), ";");
  return key;
}

}  // namespace

absl::StatusOr<Session::Entry*> Session::GetEntry(const std::vector<Shape>& input_shapes) {
  const std::string key = Signature(input_shapes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
  }
  // Plan outside the lock so that other shapes are not held up; the first plan stored wins.
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model_->Plan(input_shapes));
  auto entry = std::make_unique<Entry>();
  entry->plan = std::move(plan);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = plans_.emplace(key, std::move(entry));
  return it->second.get();
}

absl::StatusOr<Session::Entry*> Session::GetEntryForInputs(
    const std::vector<const TensorValue*>& inputs) {
  auto key_for = [&](bool keyed) {
    std::string key;
    for (const TensorValue* t : inputs) {
      absl::StrAppend(&key, ShapeToString(t->shape), ";");
      if (keyed && model_->IsValueKeyCandidate(*t)) {
        key.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
        key.push_back(';');
      }
    }
    return key;
  };
  bool keyed = value_keyed_.load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key_for(keyed));
    if (it != plans_.end()) return it->second.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model_->PlanForInputs(inputs, &keyed));
  if (keyed) value_keyed_.store(true);
  auto entry = std::make_unique<Entry>();
  entry->plan = std::move(plan);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = plans_.emplace(key_for(keyed), std::move(entry));
  return it->second.get();
}

absl::StatusOr<ExecutionPlan*> Session::GetPlan(const std::vector<Shape>& input_shapes) {
  ASSIGN_OR_RETURN(Entry * entry, GetEntry(input_shapes));
  return entry->plan.get();
}

absl::StatusOr<std::vector<NamedTensor>> Session::Run(const std::vector<NamedTensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, model_->MatchInputs(inputs));
  ASSIGN_OR_RETURN(Entry * entry, GetEntryForInputs(ordered));
  std::lock_guard<std::mutex> lock(entry->run_mu);
  return entry->plan->Run(ordered);
}

size_t Session::cached_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

}  // namespace reprise::runtime::engine
