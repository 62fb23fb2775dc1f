#include "runtime/engine/graph.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reprise::runtime::engine {

std::string DimsToString(const std::vector<Dim>& dims) {
  return absl::StrCat("[",
                      absl::StrJoin(dims, ",",
                                    [](std::string* out, const Dim& d) {
                                      if (d.known()) {
                                        absl::StrAppend(out, d.value);
                                      } else {
                                        absl::StrAppend(out, d.symbol.empty() ? "?" : d.symbol);
                                      }
                                    }),
                      "]");
}

const Subgraph* Node::FindSubgraph(absl::string_view attribute) const {
  for (const Subgraph& subgraph : subgraphs) {
    if (subgraph.attribute == attribute) return &subgraph;
  }
  return nullptr;
}

bool IsControlFlowOp(absl::string_view op) { return op == "If" || op == "Loop"; }

int Graph::AddValue(Value value) {
  const int id = static_cast<int>(values.size());
  if (!value.name.empty()) by_name_.emplace(value.name, id);
  values.push_back(std::move(value));
  return id;
}

int Graph::FindValue(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

const TensorValue* Graph::FindConstant(int value) const {
  auto it = constants.find(value);
  return it == constants.end() ? nullptr : it->second.get();
}

std::vector<int> Graph::UseCounts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& node : nodes) {
    for (int in : node.inputs) {
      if (in != kNoValue) ++uses[in];
    }
  }
  for (const GraphOutput& out : outputs) ++uses[out.value];
  return uses;
}

absl::Status Graph::Validate() const {
  const int n = static_cast<int>(values.size());
  std::vector<bool> defined(values.size(), false);
  auto in_range = [n](int id) { return id >= 0 && id < n; };
  for (int id : inputs) {
    if (!in_range(id)) return absl::InternalError(absl::StrCat("graph input id ", id));
    defined[id] = true;
  }
  for (const auto& [id, tensor] : constants) {
    if (!in_range(id)) return absl::InternalError(absl::StrCat("constant id ", id));
    if (defined[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("value \"", values[id].name, "\" is both a graph input and a constant"));
    }
    defined[id] = true;
  }
  for (const Node& node : nodes) {
    for (int in : node.inputs) {
      if (in == kNoValue) continue;
      if (!in_range(in) || !defined[in]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node \"", node.name, "\" (", node.op, ") reads value \"",
            in_range(in) ? values[in].name : absl::StrCat("#", in), "\" before it is defined"));
      }
    }
    for (int out : node.outputs) {
      if (out == kNoValue) continue;
      if (!in_range(out)) return absl::InternalError(absl::StrCat("output id ", out));
      if (defined[out]) {
        return absl::InvalidArgumentError(
            absl::StrCat("value \"", values[out].name, "\" is defined more than once"));
      }
      defined[out] = true;
    }
  }
  for (const GraphOutput& out : outputs) {
    if (!in_range(out.value) || !defined[out.value]) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output \"", out.name, "\" is never computed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace reprise::runtime::engine
