// ModelInfer request decoding / validation and response encoding (KServe v2 wire rules).
#ifndef REPRISE_SERVER_INFER_CODEC_H_
#define REPRISE_SERVER_INFER_CODEC_H_

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpc_service.pb.h"
#include "runtime/core/data_type.h"
#include "server/kserve_types.h"
#include "server/model_backend.h"
#include "server/shared_memory.h"

namespace reprise::server {

/// What one request may ask for (the server config's `limits`). Checked before anything is
/// allocated for the request's tensors.
struct RequestLimits {
  int max_rank = 16;
  /// Per input: every dimension, and the product of the non-zero dimensions (a zero dimension
  /// does not exempt the others: padding and batching size buffers from them).
  int64_t max_elements = int64_t{1} << 28;
  int64_t max_request_bytes = int64_t{64} << 20;  // all inputs' data together
};

/// What a request asks of one output beyond its data (Triton's extensions).
struct OutputOptions {
  /// `classification`: the top k entries as "score:index[:label]" BYTES (classification.h);
  /// 0: the output itself.
  int64_t classification = 0;
  /// The output's labels (its label_filename), for classification; null: none. Borrowed from
  /// the model's settings, set by the caller after decoding.
  const std::vector<std::string>* labels = nullptr;
  /// `shared_memory_*`: the output is written into this region and not into the response.
  std::optional<SharedMemoryRef> shared_memory;
};

/// A checked ModelInfer request, ready for LoadedModel::Infer. Input data points into the
/// request (raw contents) or into `storage` (converted typed contents): keep both the request
/// and this object alive while the inputs are used. Move-only (inputs point into storage).
struct DecodedRequest {
  std::vector<InputTensor> inputs;            // in the model's input order
  std::vector<std::string> outputs;           // wanted outputs, in the response's order
  std::vector<OutputOptions> output_options;  // one per entry of `outputs`
  bool batched = false;                       // the model's max_batch_size > 0
  std::deque<std::string> storage;
  /// The request parameters `priority` (level, 1 = highest; 0 = default) and `timeout` (µs in
  /// the queue; 0 = the model's default). The deadline is the caller's to set.
  InferOptions options;

  DecodedRequest() = default;
  DecodedRequest(DecodedRequest&&) = default;
  DecodedRequest& operator=(DecodedRequest&&) = default;
  DecodedRequest(const DecodedRequest&) = delete;
  DecodedRequest& operator=(const DecodedRequest&) = delete;
};

/// Checks `request` against the model's `signature` and decodes it. `label` names the model in
/// messages (e.g. `model "m" version 1`); `max_batch_size` > 0 bounds the first dimension, which
/// must then be at least 1. A shape over `limits` is RESOURCE_EXHAUSTED naming the limit. Every
/// other problem is INVALID_ARGUMENT naming the tensor and the values: raw and typed contents
/// mixed, wrong raw count, unknown / missing / duplicate input, wrong datatype, negative or
/// overflowing dimensions, wrong shape, byte size mismatch, malformed BYTES, BOOL not 0/1,
/// values out of range, typed contents in the wrong field, unknown / duplicate requested
/// output, unsupported parameters. Names the client chose are cut short in messages.
/// Inputs and outputs may name a region of `shared_memory` (null: none registered; see
/// shared_memory.h): an input's bytes are copied out of it here, counted against the limits
/// like raw data; an output's range is checked here and written by EncodeInferResponse.
absl::StatusOr<DecodedRequest> DecodeInferRequest(
    const inference::ModelInferRequest& request, const ModelSignature& signature,
    int max_batch_size, absl::string_view label, const RequestLimits& limits = {},
    const SharedMemoryRegistry* shared_memory = nullptr);

/// Fills `response`: model name and version, the request's `id` and parameters echoed, each
/// output (raw, in `decoded.outputs` order) with the requested output's parameters. INTERNAL
/// if the backend returned a missing output or one whose byte size disagrees with its shape.
/// An output asked for with `classification` is replaced by its top k; one in shared memory is
/// written there (INVALID_ARGUMENT if it does not fit) and its raw contents entry left empty.
absl::Status EncodeInferResponse(const inference::ModelInferRequest& request,
                                 const DecodedRequest& decoded, absl::string_view model_version,
                                 std::vector<OutputTensor> outputs, absl::string_view label,
                                 inference::ModelInferResponse* response);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_INFER_CODEC_H_
