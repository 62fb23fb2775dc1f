// The daemon's logging: JSON lines that parse, the rate-limited rejected-request lines, the
// effective-config line, and the observability flags of the command line.
#include "server/logging.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/command_line.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Sends the default logger's lines to a string for the test's duration.
class CapturedLog {
 public:
  explicit CapturedLog(std::unique_ptr<spdlog::formatter> formatter = nullptr) {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    if (formatter) logger->set_formatter(std::move(formatter));
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> Lines() const {
    return absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(JsonQuoteTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a \"b\" \\ c"), R"("a \"b\" \\ c")");
  EXPECT_EQ(JsonQuote("line\nnext\ttab\r"), R"("line\nnext\ttab\r")");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), R"("\u0001")");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 unchanged
}

TEST(JsonLogFormatterTest, OneObjectPerLine) {
  std::vector<std::string> lines;
  {
    CapturedLog log(std::make_unique<JsonLogFormatter>());
    spdlog::warn("model \"m\" failed:\nbad {}", 42);
    spdlog::info("second");
    lines = log.Lines();
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0],
              MatchesRegex(R"(\{"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{6}Z",)"
                           R"("level":"warning","thread":[0-9]+,)"
                           R"("message":"model \\"m\\" failed:\\nbad 42"\})"));
  EXPECT_THAT(lines[1], HasSubstr(R"("level":"info")"));
  EXPECT_THAT(lines[1], HasSubstr(R"("message":"second"})"));
}

TEST(ConfigureLoggingTest, RefusesUnknownValues) {
  EXPECT_EQ(ConfigureLogging("loud", "text").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConfigureLogging("info", "xml").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ConfigureLogging("warn", "json").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  ASSERT_TRUE(ConfigureLogging("info", "text").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST(RejectedRequestLogTest, OneLinePerClassPerInterval) {
  absl::Time now = absl::FromUnixSeconds(1000);
  RejectedRequestLog rejected(absl::Seconds(10), [&now] { return now; });
  const absl::Status bad = absl::InvalidArgumentError("input \"x\" has shape [2]");
  std::vector<std::string> lines;
  {
    CapturedLog log;
    EXPECT_TRUE(rejected.Note("invalid_argument", "m", bad));
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(rejected.Note("invalid_argument", "m", bad));
    // Another class (another model, another reason) has its own budget.
    EXPECT_TRUE(rejected.Note("invalid_argument", "other", bad));
    EXPECT_TRUE(rejected.Note("not_found", "m", absl::NotFoundError("no model")));
    now += absl::Seconds(9);
    EXPECT_FALSE(rejected.Note("invalid_argument", "m", bad));
    now += absl::Seconds(1);
    EXPECT_TRUE(rejected.Note("invalid_argument", "m", bad));
    lines = log.Lines();
  }
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("request rejected (invalid_argument): input \"x\" has shape"));
  EXPECT_THAT(lines[0], Not(HasSubstr("more like it")));
  EXPECT_THAT(lines[3], HasSubstr("(101 more like it since the last line)"));
}

TEST(DescribeConfigTest, NamesTheEffectiveValues) {
  config::ServerConfig c;
  c.grpc_port = 9001;
  c.model_repositories = {"/a", "/b"};
  c.log_format = "json";
  c.kernels_conv_winograd = false;
  const std::string line = DescribeConfig(c);
  EXPECT_THAT(line, HasSubstr("server.grpc_port=9001"));
  EXPECT_THAT(line, HasSubstr("server.metrics_port=8002"));
  EXPECT_THAT(line, HasSubstr("repository.paths=[/a,/b]"));
  EXPECT_THAT(line, HasSubstr("log.format=json"));
  EXPECT_THAT(line, HasSubstr("kernels.conv_winograd=false"));
  EXPECT_THAT(line, HasSubstr("kernels.conv_taps_as_channels=true"));
  EXPECT_THAT(line, HasSubstr("kernels.conv_tap_regions=true"));
  EXPECT_THAT(line, HasSubstr("kernels.conv_own_depthwise=true"));
  EXPECT_THAT(line, HasSubstr("kernels.conv_chain_layout=auto"));
  EXPECT_THAT(line, HasSubstr("kernels.clear_outputs=auto"));
}

TEST(ObservabilityFlagsTest, ParsesAllowMetricsAndLogFormat) {
  absl::StatusOr<CommandLine> c =
      ParseCommandLine({"--allow-metrics=false", "--log-format", "json", "--metrics-port=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->config.allow_metrics);
  EXPECT_EQ(c->config.log_format, "json");
  EXPECT_EQ(c->config.metrics_port, 0);
  absl::StatusOr<CommandLine> bad = ParseCommandLine({"--log-format=xml"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--log-format"));
  bad = ParseCommandLine({"--allow-metrics=maybe"});  // Triton's yes/no/on/off/1/0 are taken
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--allow-metrics"));

  absl::StatusOr<config::ServerConfig> file =
      config::ParseServerConfig("server: {allow_metrics: false, metrics_port: 0}\n", "test.yaml");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->allow_metrics);
  EXPECT_EQ(file->metrics_port, 0);
  EXPECT_TRUE(config::ServerConfig().allow_metrics);
}

}  // namespace
}  // namespace reprise::server
