// Content-Encoding gzip / deflate for the HTTP endpoint (zlib), with a cap on the inflated size
// so that a small compressed body cannot expand past the request limit.
#ifndef REPRISE_SERVER_HTTP_COMPRESSION_H_
#define REPRISE_SERVER_HTTP_COMPRESSION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reprise::server {

enum class HttpEncoding { kIdentity, kGzip, kDeflate };

/// The encoding a Content-Encoding value names; INVALID_ARGUMENT for any other than identity,
/// gzip and deflate (one encoding only).
absl::StatusOr<HttpEncoding> ParseContentEncoding(absl::string_view value);

/// The encoding to answer with for an Accept-Encoding value: gzip, else deflate, when accepted
/// with a non-zero q; identity otherwise.
HttpEncoding ChooseResponseEncoding(absl::string_view accept_encoding);

/// "gzip" / "deflate" / "identity".
absl::string_view EncodingName(HttpEncoding encoding);

/// `data` decompressed (gzip, or deflate in its zlib wrapping or raw). INVALID_ARGUMENT for
/// corrupt or truncated data; RESOURCE_EXHAUSTED as soon as the output would pass `max_bytes`.
absl::StatusOr<std::string> Inflate(absl::string_view data, HttpEncoding encoding,
                                    int64_t max_bytes);

/// `data` compressed as `encoding` (zlib's default level).
absl::StatusOr<std::string> Deflate(absl::string_view data, HttpEncoding encoding);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_HTTP_COMPRESSION_H_
