// Test helpers for the metrics: GET over plain HTTP, and a reader of the Prometheus text format.
#ifndef REPRISE_TESTS_SERVER_METRICS_TEXT_H_
#define REPRISE_TESTS_SERVER_METRICS_TEXT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reprise::server::testing {

/// `method` `path` to 127.0.0.1:`port` over HTTP/1.0, without a body; the whole response
/// (status line, headers, body), or "" when it fails.
inline std::string HttpExchange(int port, const std::string& method, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

/// GET `path` from 127.0.0.1:`port` over HTTP/1.0; the body, or "" when it fails.
inline std::string HttpGet(int port, const std::string& path) {
  const std::string response = HttpExchange(port, "GET", path);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

/// One sample line of the text format.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// The samples of `text` (comment lines skipped). Label values hold no '"' or ',' here.
inline std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    Sample s;
    const size_t space = line.rfind(' ');
    absl::string_view head = line.substr(0, space);
    const std::string value(line.substr(space + 1));
    if (value == "+Inf") {
      s.value = 1e308;
    } else if (!absl::SimpleAtod(value, &s.value)) {
      continue;
    }
    const size_t brace = head.find('{');
    s.name = std::string(head.substr(0, brace));
    if (brace != absl::string_view::npos) {
      absl::string_view labels = head.substr(brace + 1, head.size() - brace - 2);
      for (absl::string_view pair : absl::StrSplit(labels, ',', absl::SkipEmpty())) {
        const size_t eq = pair.find('=');
        s.labels[std::string(pair.substr(0, eq))] =
            std::string(pair.substr(eq + 2, pair.size() - eq - 3));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

/// The value of the sample `name` whose labels include `labels`; nullopt when there is none.
/// Sums when several match.
inline std::optional<double> Value(const std::string& text, const std::string& name,
                                   const std::map<std::string, std::string>& labels = {}) {
  std::optional<double> sum;
  for (const Sample& s : ParseSamples(text)) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

}  // namespace reprise::server::testing

#endif  // REPRISE_TESTS_SERVER_METRICS_TEXT_H_
