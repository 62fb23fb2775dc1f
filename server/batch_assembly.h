// Turning the requests of a batch into one set of engine inputs (concatenated along the batch
// dimension, zero-padded up to a capture bucket) and the batch's outputs back into each
// request's rows.
#ifndef REPRISE_SERVER_BATCH_ASSEMBLY_H_
#define REPRISE_SERVER_BATCH_ASSEMBLY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/engine/execution_plan.h"
#include "server/model_backend.h"

namespace reprise::server {

/// The part of a request's inputs that must match for two requests to share a batch: each
/// input's element type and its dimensions after the first.
std::string BatchKey(std::span<const InputTensor> inputs);

/// One request's inputs as a batch member (borrowed, in the model's input order).
using RequestInputs = std::span<const InputTensor>;

/// Concatenates the requests' inputs along the first dimension (every request has the same
/// inputs, element types and BatchKey; at least one request) and appends zero rows up to
/// `padded_rows` (>= the rows of all requests); string inputs (BYTES, in the serialized form)
/// are padded with copies of the batch's first row instead. The tensors own their bytes.
absl::StatusOr<std::vector<runtime::engine::NamedTensor>> AssembleBatch(
    const std::vector<RequestInputs>& requests, int64_t padded_rows);

/// One request's part of a batch's output `output` (the plan's buffer): rows [`row_offset`,
/// `row_offset` + `rows`) of its `batch_rows`, or the whole output when `batch_rows` is -1 (a
/// model without a batch dimension). The one copy of the data out of the engine (strings are
/// serialized into the KServe form). INTERNAL naming the output when its first dimension is
/// not `batch_rows` (it has no batch dimension and cannot be split per request) or the rows lie
/// outside it.
absl::StatusOr<OutputTensor> CopyOutputRows(const runtime::engine::PlanTensor& output,
                                            int64_t batch_rows, int64_t row_offset, int64_t rows);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_BATCH_ASSEMBLY_H_
