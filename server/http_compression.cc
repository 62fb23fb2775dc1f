#include "server/http_compression.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reprise::server {
namespace {

// zlib's window bits for `encoding` on `data`: gzip, the zlib wrapping, or raw deflate (which
// some clients send as "deflate").
int WindowBits(HttpEncoding encoding, absl::string_view data) {
  if (encoding == HttpEncoding::kGzip) return 15 + 16;
  if (data.size() >= 2) {
    const unsigned cmf = static_cast<unsigned char>(data[0]);
    const unsigned flg = static_cast<unsigned char>(data[1]);
    if ((cmf & 0x0f) == 8 && (cmf * 256 + flg) % 31 == 0) return 15;
  }
  return -15;
}

}  // namespace

absl::StatusOr<HttpEncoding> ParseContentEncoding(absl::string_view value) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v.empty() || v == "identity") return HttpEncoding::kIdentity;
  if (v == "gzip" || v == "x-gzip") return HttpEncoding::kGzip;
  if (v == "deflate") return HttpEncoding::kDeflate;
  return absl::InvalidArgumentError(absl::StrCat("Content-Encoding \"", value.substr(0, 64),
                                                 "\" is not supported (gzip, deflate, identity)"));
}

HttpEncoding ChooseResponseEncoding(absl::string_view accept_encoding) {
  bool gzip = false;
  bool deflate = false;
  for (absl::string_view item : absl::StrSplit(accept_encoding, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
    double q = 1;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
      if (absl::ConsumePrefix(&p, "q=") && !absl::SimpleAtod(p, &q)) q = 0;
    }
    if (q <= 0) continue;
    gzip = gzip || name == "gzip";
    deflate = deflate || name == "deflate";
  }
  if (gzip) return HttpEncoding::kGzip;
  if (deflate) return HttpEncoding::kDeflate;
  return HttpEncoding::kIdentity;
}

absl::string_view EncodingName(HttpEncoding encoding) {
  switch (encoding) {
    case HttpEncoding::kGzip:
      return "gzip";
    case HttpEncoding::kDeflate:
      return "deflate";
    case HttpEncoding::kIdentity:
      break;
  }
  return "identity";
}

absl::StatusOr<std::string> Inflate(absl::string_view data, HttpEncoding encoding,
                                    int64_t max_bytes) {
  if (encoding == HttpEncoding::kIdentity) return std::string(data);
  z_stream z{};
  if (inflateInit2(&z, WindowBits(encoding, data)) != Z_OK) {
    return absl::InternalError("zlib: inflateInit2 failed");
  }
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(data.size(), UINT32_MAX));
  int rc = Z_OK;
  char chunk[64 * 1024];
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", EncodingName(encoding), " body is corrupt or truncated (zlib error ", rc, ")"));
    }
    const size_t produced = sizeof(chunk) - z.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > max_bytes) {
      inflateEnd(&z);
      return absl::ResourceExhaustedError(absl::StrCat("the ", EncodingName(encoding),
                                                       " body inflates past the limit of ",
                                                       max_bytes, " bytes"));
    }
    out.append(chunk, produced);
    if (rc == Z_OK && produced == 0 && z.avail_in == 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(
          absl::StrCat("the ", EncodingName(encoding), " body is truncated"));
    }
  }
  inflateEnd(&z);
  return out;
}

absl::StatusOr<std::string> Deflate(absl::string_view data, HttpEncoding encoding) {
  if (encoding == HttpEncoding::kIdentity) return std::string(data);
  z_stream z{};
  const int bits = encoding == HttpEncoding::kGzip ? 15 + 16 : 15;
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("zlib: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END)
    return absl::InternalError(absl::StrCat("zlib: deflate failed (", rc, ")"));
  out.resize(z.total_out);
  return out;
}

}  // namespace reprise::server
