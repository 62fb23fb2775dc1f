// TfIdfVectorizer (opset 9): counts the n-grams of a pool in each row of int32, int64 or string
// tokens, with n from min_gram_length to max_gram_length and, for n > 1, every skip from 0 to
// max_skip_count between consecutive tokens; mode TF gives the counts, IDF the weight of each
// n-gram seen, TFIDF their product. The output is [max(ngram_indexes) + 1] per row, float32.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/string_tensor.h"

namespace reprise::kernels::cpu {
namespace {

// The n-grams of the pool by length, each with its output slot.
template <typename Token>
struct Pool {
  std::vector<std::map<std::vector<Token>, int64_t>> by_length;  // [n - 1]
};

template <typename Token>
absl::StatusOr<Pool<Token>> MakePool(const PrepareContext& context,
                                     const std::vector<Token>& tokens,
                                     const std::vector<int64_t>& counts,
                                     const std::vector<int64_t>& indexes) {
  // counts[n - 1] is where the n-grams start in `tokens`; n-grams of length n run to the next
  // start (or the end), n tokens each.
  Pool<Token> pool;
  size_t item = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t begin = counts[level];
    const int64_t end =
        level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(tokens.size());
    const int64_t n = static_cast<int64_t>(level) + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(tokens.size()) ||
        (end - begin) % n != 0) {
      return InvalidArgument(context, "ngram_counts ", runtime::ShapeToString(counts),
                             " do not divide a pool of ", tokens.size(), " tokens");
    }
    pool.by_length.emplace_back();
    for (int64_t at = begin; at < end; at += n, ++item) {
      if (item >= indexes.size()) {
        return InvalidArgument(context, "ngram_indexes has ", indexes.size(),
                               " entries for more n-grams");
      }
      std::vector<Token> gram(tokens.begin() + at, tokens.begin() + at + n);
      pool.by_length.back().emplace(std::move(gram), indexes[item]);
    }
  }
  return pool;
}

struct TfIdfOptions {
  int mode = 0;  // 0 TF, 1 IDF, 2 TFIDF
  int64_t min_n = 1, max_n = 1, max_skip = 0, slots = 0, rows = 1, row_length = 0;
  std::vector<float> weights;  // per output slot; empty: all 1
};

template <typename Token, typename Read>
absl::StatusOr<std::unique_ptr<PreparedKernel>> MakeTfIdf(const PrepareContext& context,
                                                          Pool<Token> pool, TfIdfOptions o,
                                                          Shape out, Read read) {
  auto shared = std::make_shared<const Pool<Token>>(std::move(pool));
  return MakeKernel(context, {Desc(DataType::kFloat32, std::move(out))},
                    [shared, o, read](const KernelArgs& args) {
                      float* y = static_cast<float*>(args.outputs[0]);
                      std::fill(y, y + o.rows * o.slots, 0.0f);
                      std::vector<Token> row(static_cast<size_t>(o.row_length));
                      std::vector<Token> gram;
                      for (int64_t r = 0; r < o.rows; ++r) {
                        for (int64_t i = 0; i < o.row_length; ++i) {
                          row[i] = read(args.inputs[0], r * o.row_length + i);
                        }
                        float* counts = y + r * o.slots;
                        for (int64_t n = o.min_n; n <= o.max_n; ++n) {
                          if (n > static_cast<int64_t>(shared->by_length.size())) break;
                          const auto& grams = shared->by_length[n - 1];
                          if (grams.empty()) continue;
                          // Unigrams have no gaps: count them once.
                          const int64_t skips = n == 1 ? 0 : o.max_skip;
                          for (int64_t skip = 0; skip <= skips; ++skip) {
                            const int64_t span = (n - 1) * (skip + 1);
                            for (int64_t start = 0; start + span < o.row_length; ++start) {
                              gram.clear();
                              for (int64_t j = 0; j < n; ++j) {
                                gram.push_back(row[start + j * (skip + 1)]);
                              }
                              auto it = grams.find(gram);
                              if (it != grams.end()) counts[it->second] += 1.0f;
                            }
                          }
                        }
                        if (o.mode == 0) continue;
                        for (int64_t s = 0; s < o.slots; ++s) {
                          const float w = o.weights.empty() ? 1.0f : o.weights[s];
                          counts[s] = o.mode == 1 ? (counts[s] > 0 ? w : 0.0f) : counts[s] * w;
                        }
                      }
                      return absl::OkStatus();
                    });
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTfIdf(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kInt32, DataType::kInt64, DataType::kString}));
  const Attributes& attrs = AttrsOf(context);
  const TensorDesc& x = context.inputs[0];
  if (x.shape.empty() || x.shape.size() > 2) {
    return InvalidArgument(context, "input must be [C] or [N, C], got ",
                           runtime::ShapeToString(x.shape));
  }
  TfIdfOptions o;
  ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", ""));
  if (mode == "TF") {
    o.mode = 0;
  } else if (mode == "IDF") {
    o.mode = 1;
  } else if (mode == "TFIDF") {
    o.mode = 2;
  } else {
    return InvalidArgument(context, "mode must be TF, IDF or TFIDF, got \"", mode, "\"");
  }
  ASSIGN_OR_RETURN(o.min_n, attrs.GetInt("min_gram_length", 0));
  ASSIGN_OR_RETURN(o.max_n, attrs.GetInt("max_gram_length", 0));
  ASSIGN_OR_RETURN(o.max_skip, attrs.GetInt("max_skip_count", 0));
  if (o.min_n < 1 || o.max_n < o.min_n || o.max_n > 64 || o.max_skip < 0 ||
      o.max_skip > (int64_t{1} << 20)) {
    return InvalidArgument(context, "min_gram_length ", o.min_n, ", max_gram_length ", o.max_n,
                           " and max_skip_count ", o.max_skip, " are out of range");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> counts, attrs.GetInts("ngram_counts", {}));
  ASSIGN_OR_RETURN(std::vector<int64_t> indexes, attrs.GetInts("ngram_indexes", {}));
  ASSIGN_OR_RETURN(o.weights, attrs.GetFloats("weights", {}));
  for (int64_t index : indexes) {
    if (index < 0 || index >= (int64_t{1} << 24)) {
      return InvalidArgument(context, "ngram_indexes value ", index, " is out of range");
    }
    o.slots = std::max(o.slots, index + 1);
  }
  if (!o.weights.empty() && static_cast<int64_t>(o.weights.size()) < o.slots) {
    return InvalidArgument(context, "weights has ", o.weights.size(), " values for ", o.slots,
                           " outputs");
  }
  o.rows = x.shape.size() == 2 ? x.shape[0] : 1;
  o.row_length = x.shape.back();
  Shape out = x.shape.size() == 2 ? Shape{o.rows, o.slots} : Shape{o.slots};
  if (x.dtype == DataType::kString) {
    const runtime::AttributeValue* strings = attrs.Find("pool_strings");
    const auto* list = strings ? std::get_if<std::vector<std::string>>(strings) : nullptr;
    if (list == nullptr) return InvalidArgument(context, "string input needs pool_strings");
    ASSIGN_OR_RETURN(Pool<std::string> pool, MakePool(context, *list, counts, indexes));
    return MakeTfIdf<std::string>(
        context, std::move(pool), o, std::move(out),
        [](const void* data, int64_t i) { return std::string(runtime::StringAt(data, i)); });
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> tokens, attrs.GetInts("pool_int64s", {}));
  ASSIGN_OR_RETURN(Pool<int64_t> pool, MakePool(context, tokens, counts, indexes));
  const bool is64 = x.dtype == DataType::kInt64;
  return MakeTfIdf<int64_t>(
      context, std::move(pool), o, std::move(out), [is64](const void* data, int64_t i) -> int64_t {
        return is64 ? static_cast<const int64_t*>(data)[i] : static_cast<const int32_t*>(data)[i];
      });
}

}  // namespace

absl::Status RegisterTfIdfKernels(runtime::KernelRegistry* registry) {
  return registry->Register("TfIdfVectorizer", &PrepareTfIdf);
}

}  // namespace reprise::kernels::cpu
