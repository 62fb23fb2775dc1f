#include "server/logging.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/spdlog.h"

namespace reprise::server {

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const absl::Time time = absl::FromChrono(msg.time);
  const std::string line = absl::StrCat(
      "{\"time\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone()),
      "\",\"level\":\"",
      absl::string_view(spdlog::level::to_string_view(msg.level).data(),
                        spdlog::level::to_string_view(msg.level).size()),
      "\",\"thread\":", msg.thread_id,
      ",\"message\":", JsonQuote(absl::string_view(msg.payload.data(), msg.payload.size())), "}\n");
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

absl::Status ConfigureLogging(absl::string_view level, absl::string_view format,
                              const std::string& file) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str answers "off" for anything it does not know.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("log level \"", level, "\" is unknown"));
  }
  if (format != "json" && format != "text" && format != "default" && format != "ISO8601") {
    return absl::InvalidArgumentError(
        absl::StrCat("log format \"", format, "\" is not one of text, json, default, ISO8601"));
  }
  if (!file.empty()) {
    try {
      spdlog::set_default_logger(spdlog::basic_logger_mt("reprise", file));
    } catch (const spdlog::spdlog_ex& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open log file \"", file, "\": ", e.what()));
    }
    spdlog::flush_on(spdlog::level::trace);  // the file is read by people and tools live
  }
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  } else if (format == "text") {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %L %t] %v", spdlog::pattern_time_type::utc);
  } else if (format == "default") {
    // Triton's default: severity letter, MMDD, time with microseconds, thread.
    spdlog::set_pattern("%L%m%d %H:%M:%S.%f %t] %v", spdlog::pattern_time_type::utc);
  } else {
    // Triton's ISO8601.
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%SZ %L %t] %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_level(parsed);
  return absl::OkStatus();
}

std::string DescribeConfig(const config::ServerConfig& c) {
  return absl::StrCat(
      "effective config: server.listen_address=", c.listen_address,
      " server.grpc_port=", c.grpc_port, " server.metrics_port=", c.metrics_port,
      " server.allow_metrics=", c.allow_metrics ? "true" : "false",
      " server.strict_readiness=", c.strict_readiness ? "true" : "false", " repository.paths=[",
      absl::StrJoin(c.model_repositories, ","), "]",
      " repository.control_mode=", config::ControlModeName(c.control_mode),
      " repository.load_models=[", absl::StrJoin(c.load_models, ","), "]",
      " repository.load_threads=", c.load_threads,
      " runtime.streams_per_device=", c.streams_per_device, " runtime.cpu_threads=", c.cpu_threads,
      " runtime.intra_op_threads=", c.intra_op_threads,
      " runtime.choose_threads=", c.choose_threads ? "true" : "false",
      " kernels.conv_winograd=", c.kernels_conv_winograd ? "true" : "false",
      " kernels.conv_taps_as_channels=", c.kernels_conv_taps_as_channels ? "true" : "false",
      " kernels.conv_tap_regions=", c.kernels_conv_tap_regions ? "true" : "false",
      " kernels.conv_own_depthwise=", c.kernels_conv_own_depthwise ? "true" : "false",
      " kernels.conv_chain_layout=", c.kernels_conv_chain_layout,
      " kernels.clear_outputs=", c.kernels_clear_outputs,
      " limits.max_message_bytes=", config::EffectiveMaxMessageBytes(c),
      " limits.max_tensor_rank=", c.max_tensor_rank,
      " limits.max_tensor_elements=", c.max_tensor_elements,
      " limits.max_request_bytes=", c.max_request_bytes,
      " limits.max_plan_bytes=", c.max_plan_bytes,
      " capture.memory_budget_bytes=", c.capture_memory_budget_bytes,
      " limits.max_queue_length=", c.max_queue_length,
      " limits.request_timeout_ms=", c.request_timeout_ms,
      " shutdown.timeout_seconds=", c.shutdown_timeout_s, " log.level=", c.log_level,
      " log.format=", c.log_format, " log.file=", c.log_file,
      " repository.poll_seconds=", c.poll_seconds,
      " repository.auto_complete_config=", c.auto_complete_config ? "true" : "false",
      " repository.default_max_batch_size=", c.default_max_batch_size,
      " repository.exit_on_error=", c.exit_on_error ? "true" : "false");
}

RejectedRequestLog::RejectedRequestLog(absl::Duration interval, Clock clock)
    : interval_(interval), clock_(std::move(clock)) {}

bool RejectedRequestLog::Note(absl::string_view reason, absl::string_view model,
                              const absl::Status& status) {
  const absl::Time now = clock_();
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ClassState& s = classes_[absl::StrCat(reason, "/", model)];
    if (now - s.last_logged < interval_) {
      ++s.suppressed;
      return false;
    }
    suppressed = s.suppressed;
    s.suppressed = 0;
    s.last_logged = now;
  }
  // fmt cannot format Debian's absl::string_view: std::string it is.
  const std::string why(reason);
  const std::string message(status.message());
  if (suppressed == 0) {
    spdlog::warn("request rejected ({}): {}", why, message);
  } else {
    spdlog::warn("request rejected ({}): {} ({} more like it since the last line)", why, message,
                 suppressed);
  }
  return true;
}

}  // namespace reprise::server
