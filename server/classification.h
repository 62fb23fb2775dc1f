// Triton's classification extension: an output requested with the parameter `classification`
// = k comes back as its top k entries, as BYTES strings "score:index" or "score:index:label".
#ifndef REPRISE_SERVER_CLASSIFICATION_H_
#define REPRISE_SERVER_CLASSIFICATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/model_settings.h"
#include "server/model_backend.h"

namespace reprise::server {

/// Labels longer than this many bytes, or files with more lines, are refused at load.
inline constexpr int64_t kMaxLabelFileBytes = int64_t{16} << 20;

/// The labels of a label file: one per line ("\r\n" or "\n"), the last line's newline optional.
/// INVALID_ARGUMENT (naming `source`) when it is over kMaxLabelFileBytes.
absl::StatusOr<std::vector<std::string>> ParseLabels(absl::string_view text,
                                                     absl::string_view source);

/// Fills the `labels` of every output of `settings` that names a label_filename, read from that
/// file in `model_dir` (a relative path, checked like an uploaded file's). NOT_FOUND when it
/// cannot be read; INVALID_ARGUMENT when it is over kMaxLabelFileBytes or the path is bad.
absl::Status ReadLabelFiles(const std::string& model_dir, config::ModelSettings* settings);

/// `output` replaced by its top `k` classes (k >= 1), as a BYTES tensor in KServe's serialized
/// form. With `batched` (max_batch_size > 0) each row of the first dimension is classified on
/// its own and the shape is [rows, min(k, per-row count)]; otherwise the whole tensor is one row
/// and the shape is [min(k, count)]. Scores are written as C's "%f" for floating types and as
/// integers otherwise; ties keep the lower index first; NaN ranks lowest. `labels` (may be
/// null) name the classes by index. INVALID_ARGUMENT for an output type that has no order
/// (BOOL, BYTES, FP16, BF16); `where` names the output in messages.
absl::StatusOr<OutputTensor> Classify(const OutputTensor& output, int64_t k, bool batched,
                                      const std::vector<std::string>* labels,
                                      absl::string_view where);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_CLASSIFICATION_H_
