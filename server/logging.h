// The daemon's logging: spdlog set up as human-readable text or one JSON object per line, the
// start-up line with the effective config, and rate-limited lines for rejected requests.
#ifndef REPRISE_SERVER_LOGGING_H_
#define REPRISE_SERVER_LOGGING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "config/server_config.h"
#include "runtime/core/json_text.h"
#include "spdlog/formatter.h"

namespace reprise::server {

/// Formats each record as one JSON object on one line:
/// {"time":"2026-11-30T10:00:00.123456Z","level":"info","thread":42,"message":"..."}
/// The message is escaped (quotes, backslashes, control characters), so every line parses.
class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

/// JSON string literals (shared with the instance dumps).
using runtime::JsonQuote;

/// Sets spdlog's default logger: `level` (trace ... off) and `format` ("text": time, level
/// letter, thread, message; "json": JsonLogFormatter; Triton's "default" (glog-like) and
/// "ISO8601" lines), writing to `file` (appended; empty: standard output). Call once at
/// start-up, before threads log. Unknown values and a file that cannot be opened are
/// INVALID_ARGUMENT.
absl::Status ConfigureLogging(absl::string_view level, absl::string_view format,
                              const std::string& file = "");

/// The effective configuration as one line of text (every key of config/README.md).
std::string DescribeConfig(const config::ServerConfig& config);

/// Logs rejected requests at most once per `interval` per class (reason and model), so a bad
/// client cannot flood the log: the first rejection of a class is logged at once, later ones
/// within the interval are counted and reported with the next line of that class
/// ("... (12 more like it since the last line)"). Classes are few (6 reasons x loaded models).
/// Thread-safe. The clock is injectable for tests.
class RejectedRequestLog {
 public:
  using Clock = std::function<absl::Time()>;
  explicit RejectedRequestLog(
      absl::Duration interval = absl::Seconds(10), Clock clock = [] { return absl::Now(); });

  /// Notes one rejected request of `model` (may be empty) with `reason` (the metric label);
  /// logs `status` at warn level when the class's interval has passed. Returns true if it
  /// logged a line.
  bool Note(absl::string_view reason, absl::string_view model, const absl::Status& status);

 private:
  struct ClassState {
    absl::Time last_logged = absl::InfinitePast();
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  const Clock clock_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, ClassState> classes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_LOGGING_H_
