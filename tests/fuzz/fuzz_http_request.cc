// Fuzz target: bytes -> the HTTP/REST body codec (server/http_codec.h) and the inflater.
// Input layout: an optional first line "<Inference-Header-Content-Length value>\n" (when the
// input starts with '#': "#<value>\n"), then the body. Decoded requests are written back as a
// binary body and must decode again to the same message.
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/http_codec.h"
#include "server/http_compression.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {

int FuzzHttpRequest(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::optional<absl::string_view> header_length;
  if (!bytes.empty() && bytes[0] == '#') {
    const size_t eol = bytes.find('\n');
    if (eol != absl::string_view::npos) {
      header_length = bytes.substr(1, eol - 1);
      bytes.remove_prefix(eol + 1);
    }
  }
  server::HttpCodecLimits limits;
  limits.max_tensor_bytes = 1 << 16;
  auto request = server::ParseHttpInferRequest(bytes, header_length, "m", "", limits);
  if (request.ok()) {
    auto body = server::WriteHttpInferRequest(request->request, /*binary_inputs=*/true,
                                              /*binary_outputs=*/false);
    if (!body.ok()) __builtin_trap();
    const std::string length = std::to_string(*body->header_length);
    auto again = server::ParseHttpInferRequest(body->body, length, "m", "", limits);
    if (!again.ok() ||
        !google::protobuf::util::MessageDifferencer::Equals(again->request, request->request)) {
      __builtin_trap();  // the codec does not round-trip its own output
    }
  }
  auto response = server::ParseHttpInferResponse(bytes, header_length, limits);
  if (response.ok()) {
    server::HttpInferRequest all_binary;
    all_binary.all_outputs_binary = true;
    (void)server::WriteHttpInferResponse(*response, all_binary);
  }
  (void)server::Inflate(bytes, server::HttpEncoding::kGzip, 1 << 16);
  (void)server::Inflate(bytes, server::HttpEncoding::kDeflate, 1 << 16);
  return 0;
}

}  // namespace reprise::fuzz
