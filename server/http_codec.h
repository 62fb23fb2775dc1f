// The KServe v2 REST infer body <-> the gRPC ModelInfer messages, with Triton's binary-data
// extension. Pure functions over bytes (no server, no sockets): the server turns an HTTP body
// into the same inference::ModelInferRequest that gRPC delivers, and the clients (reprise,
// reprise-bench) do the reverse. Fuzzed by tests/fuzz/fuzz_http_request.cc.
//
// Body layout: a JSON object, followed by the tensors sent as binary data when the header
// `Inference-Header-Content-Length` gives the JSON's length. JSON tensor data is row-major,
// flat or nested arrays; values are checked exactly against the datatype (integers in range,
// true / false for BOOL, strings for BYTES, finite numbers for FP32 / FP64).
#ifndef REPRISE_SERVER_HTTP_CODEC_H_
#define REPRISE_SERVER_HTTP_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpc_service.pb.h"

namespace reprise::server {

/// The HTTP-only parameters (Triton's binary-data extension), never passed on to the service.
inline constexpr absl::string_view kBinaryDataOutput = "binary_data_output";  // request
inline constexpr absl::string_view kBinaryDataSize = "binary_data_size";      // tensor
inline constexpr absl::string_view kBinaryData = "binary_data";               // output

/// Bounds on what one body may decode to.
struct HttpCodecLimits {
  /// Tensor data of all tensors together (the decoded bytes; limits.max_request_bytes).
  int64_t max_tensor_bytes = int64_t{64} << 20;
};

/// A request as decoded from an HTTP body: the ModelInferRequest for the service (tensor data
/// in raw_input_contents, the binary-data parameters removed) and how each output is to be
/// sent back.
struct HttpInferRequest {
  inference::ModelInferRequest request;
  bool all_outputs_binary = false;  // request parameter binary_data_output
  /// Per requested output (request.outputs() order): its binary_data parameter, when given.
  std::vector<std::optional<bool>> output_binary;
};

/// An HTTP body and, when it carries binary data, the length of its JSON part (the value of
/// Inference-Header-Content-Length).
struct HttpBody {
  std::string body;
  std::optional<size_t> header_length;
};

/// The JSON part and the binary part of `body` given the Inference-Header-Content-Length
/// value (absent: the whole body is JSON). INVALID_ARGUMENT for a value that is not a decimal
/// length or that is past the end of the body.
absl::StatusOr<std::pair<absl::string_view, absl::string_view>> SplitInferBody(
    absl::string_view body, std::optional<absl::string_view> header_length);

/// Server side: the request in `body` for model `model_name` / `model_version`.
/// INVALID_ARGUMENT naming the field for malformed JSON, unknown keys, wrong types, values out
/// of range for the datatype, a data count that disagrees with the shape, binary sizes that
/// disagree with the binary part; RESOURCE_EXHAUSTED when the tensors exceed the limits.
absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(
    absl::string_view body, std::optional<absl::string_view> header_length,
    absl::string_view model_name, absl::string_view model_version,
    const HttpCodecLimits& limits = {});

/// Server side: `response` as an HTTP body, each output in JSON or binary as `request` asked.
/// INVALID_ARGUMENT for an output that cannot be written (malformed BYTES).
absl::StatusOr<HttpBody> WriteHttpInferResponse(const inference::ModelInferResponse& response,
                                                const HttpInferRequest& request);

/// Client side: `request` (inputs in raw_input_contents) as an HTTP body; inputs as binary data
/// when `binary_inputs`, outputs asked as binary data when `binary_outputs`.
absl::StatusOr<HttpBody> WriteHttpInferRequest(const inference::ModelInferRequest& request,
                                               bool binary_inputs, bool binary_outputs);

/// Client side: the response in `body` (outputs in raw_output_contents).
absl::StatusOr<inference::ModelInferResponse> ParseHttpInferResponse(
    absl::string_view body, std::optional<absl::string_view> header_length,
    const HttpCodecLimits& limits = {});

/// The message of an error body `{"error": "..."}`; the body itself when it is not one.
std::string HttpErrorMessage(absl::string_view body);

/// `{"error": "<message>"}`.
std::string HttpErrorBody(absl::string_view message);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_HTTP_CODEC_H_
