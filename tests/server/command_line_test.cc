#include "server/command_line.h"
#include "server/admin_service.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CommandLineTest, DefaultsWithoutFlags) {
  absl::StatusOr<CommandLine> c = ParseCommandLine({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.grpc_port, 8001);
  EXPECT_TRUE(c->config.strict_readiness);
  EXPECT_FALSE(c->help);
}

TEST(CommandLineTest, StrictReadinessFromTheFileAndTheFlag) {
  const std::string path = ::testing::TempDir() + "/cli_strict.yaml";
  std::ofstream(path) << "server: {strict_readiness: false}\n";
  absl::StatusOr<CommandLine> c = ParseCommandLine({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->config.strict_readiness);
  c = ParseCommandLine({"--config", path, "--strict-readiness=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->config.strict_readiness);
  // Triton's boolean spellings (1/0, on/off, yes/no) are accepted; anything else is refused.
  c = ParseCommandLine({"--config", path, "--strict-readiness=yes"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->config.strict_readiness);
  EXPECT_THAT(ParseCommandLine({"--strict-readiness=maybe"}).status().message(),
              HasSubstr("--strict-readiness: \"maybe\""));
}

TEST(CommandLineTest, HttpFromTheFileAndTheFlags) {
  absl::StatusOr<CommandLine> c = ParseCommandLine({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.http_port, 8000);
  EXPECT_TRUE(c->config.allow_http);
  const std::string path = ::testing::TempDir() + "/cli_http.yaml";
  std::ofstream(path) << "server: {http_port: 9100, http_address: 127.0.0.1}\n"
                         "http: {thread_count: 3, restricted_api: [\"health:k=v\"]}\n";
  c = ParseCommandLine({"--config", path, "--allow-http=false", "--http-thread-count", "5",
                        "--http-restricted-api=model-repository,statistics:Admin-Key=s"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.http_port, 9100);
  EXPECT_EQ(c->config.http_address, "127.0.0.1");
  EXPECT_FALSE(c->config.allow_http);
  EXPECT_EQ(c->config.http_threads, 5);
  ASSERT_EQ(c->config.http_restricted_apis.size(), 2u);
  EXPECT_EQ(c->config.http_restricted_apis[1].header, "admin-key");  // lower case
  EXPECT_THAT(c->config.http_restricted_apis[1].groups,
              ElementsAre("model-repository", "statistics"));
  c = ParseCommandLine({"--http-port", "8080"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.http_port, 8080);
  EXPECT_THAT(ParseCommandLine({"--allow-http=maybe"}).status().message(),
              HasSubstr("--allow-http"));
  EXPECT_THAT(ParseCommandLine({"--http-port=65536"}).status().message(), HasSubstr("65536"));
  EXPECT_THAT(ParseCommandLine({"--http-restricted-api=nope:k=v"}).status().message(),
              HasSubstr("unknown group"));
}

TEST(CommandLineTest, FlagsOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "/cli_test.yaml";
  std::ofstream(path) << "server: {grpc_port: 9000, metrics_port: 9001}\n"
                         "repository: {paths: [/from/file], load_models: [x]}\n";
  absl::StatusOr<CommandLine> c =
      ParseCommandLine({"--grpc-port=7001", "--config", path, "--model-repository", "/a",
                        "--model-repository=/b", "--model-control-mode=explicit", "--load-model",
                        "m1", "--load-model=m2", "--log-level", "debug", "--exit-timeout-secs=3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.grpc_port, 7001);     // flag wins, wherever it stands
  EXPECT_EQ(c->config.metrics_port, 9001);  // from the file
  EXPECT_THAT(c->config.model_repositories, ElementsAre("/a", "/b"));
  EXPECT_EQ(c->config.control_mode, config::ControlMode::kExplicit);
  EXPECT_THAT(c->config.load_models, ElementsAre("m1", "m2"));
  EXPECT_EQ(c->config.log_level, "debug");
  EXPECT_EQ(c->config.shutdown_timeout_s, 3);
}

TEST(CommandLineTest, Errors) {
  EXPECT_THAT(ParseCommandLine({"--grpc-port=http"}).status().message(), HasSubstr("--grpc-port"));
  EXPECT_THAT(ParseCommandLine({"--grpc-port=70000"}).status().message(), HasSubstr("70000"));
  EXPECT_THAT(ParseCommandLine({"--frobnicate=1"}).status().message(),
              HasSubstr("unknown flag --frobnicate"));
  EXPECT_THAT(ParseCommandLine({"--model-control-mode=watch"}).status().message(),
              HasSubstr("\"watch\""));
  EXPECT_THAT(ParseCommandLine({"--load-model"}).status().message(), HasSubstr("needs a value"));
  EXPECT_THAT(ParseCommandLine({"stray"}).status().message(), HasSubstr("\"stray\""));
  EXPECT_EQ(ParseCommandLine({"--config=/nonexistent.yaml"}).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<CommandLine> help = ParseCommandLine({"--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
}

TEST(CommandLineTest, GrpcSecurityFlags) {
  absl::StatusOr<CommandLine> c = ParseCommandLine(
      {"--grpc-use-ssl=true", "--grpc-use-ssl-mutual=true", "--grpc-server-cert=/s.pem",
       "--grpc-server-key=/s.key", "--grpc-root-cert=/ca.pem",
       "--grpc-restricted-protocol=admin:X-Key=secret", "--model-repository-service=off",
       "--allow-address-dump=true", "--grpc-keepalive-permit-without-calls=true",
       "--grpc-http2-max-ping-strikes=0", "--metrics-address=127.0.0.1"});
  ASSERT_TRUE(c.ok()) << c.status();
  const config::GrpcConfig& g = c->config.grpc;
  EXPECT_TRUE(g.use_ssl_mutual);
  EXPECT_EQ(g.root_cert, "/ca.pem");
  ASSERT_EQ(g.restricted_protocols.size(), 1u);
  EXPECT_EQ(g.restricted_protocols[0].header, "x-key");  // gRPC metadata keys are lower case
  EXPECT_FALSE(g.model_repository_service);
  EXPECT_TRUE(g.allow_address_dump);
  EXPECT_TRUE(g.keepalive_permit_without_calls);
  EXPECT_EQ(g.http2_max_ping_strikes, 0);
  EXPECT_EQ(c->config.metrics_address, "127.0.0.1");
  // Mutual TLS without the CA of the client certificates is refused at parse time.
  EXPECT_THAT(ParseCommandLine({"--grpc-use-ssl-mutual=true", "--grpc-server-cert=/s.pem",
                                "--grpc-server-key=/s.key"})
                  .status()
                  .message(),
              HasSubstr("grpc-root-cert"));
  EXPECT_THAT(ParseCommandLine({"--grpc-infer-response-compression-level=max"}).status().message(),
              HasSubstr("\"max\""));
  EXPECT_THAT(ParseCommandLine({"--admin-service=maybe"}).status().message(),
              HasSubstr("--admin-service"));
  EXPECT_THAT(ParseCommandLine({"--use-ssl=true"}).status().message(),
              HasSubstr("unknown flag --use-ssl"));
}

TEST(CommandLineTest, TritonFlags) {
  // Both spellings, as Triton takes them.
  absl::StatusOr<CommandLine> c = ParseCommandLine(
      {"--model-control-mode", "poll", "--repository-poll-secs=3", "--load-model=*",
       "--exit-on-error", "true", "--disable-auto-complete-config",
       "--backend-config=onnxruntime,default-max-batch-size=16", "--log-format", "ISO8601",
       "--log-file=/tmp/reprise.log"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.control_mode, config::ControlMode::kPoll);
  EXPECT_EQ(c->config.poll_seconds, 3);
  EXPECT_THAT(c->config.load_models, ElementsAre("*"));
  EXPECT_TRUE(c->config.exit_on_error);
  EXPECT_FALSE(c->config.auto_complete_config);
  EXPECT_EQ(c->config.default_max_batch_size, 16);
  EXPECT_EQ(c->config.log_format, "ISO8601");
  EXPECT_EQ(c->config.log_file, "/tmp/reprise.log");
  // The value-less flag still takes an explicit value; the backend name is optional.
  c = ParseCommandLine({"--disable-auto-complete-config=false", "--strict-model-config=false",
                        "--backend-config=default-max-batch-size=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->config.auto_complete_config);
  EXPECT_EQ(c->config.default_max_batch_size, 0);
  EXPECT_THAT(ParseCommandLine({"--backend-config=tensorrt,coalesce-request-input=true"})
                  .status()
                  .message(),
              HasSubstr("backend \"tensorrt\""));
  EXPECT_THAT(ParseCommandLine({"--backend-config=onnxruntime,enable-global-threadpool=1"})
                  .status()
                  .message(),
              HasSubstr("is not supported"));
  EXPECT_THAT(ParseCommandLine({"--exit-on-error=maybe"}).status().message(),
              HasSubstr("--exit-on-error"));
}

TEST(CommandLineTest, TritonLogFlagsBecomeALevel) {
  auto level = [](std::vector<std::string> args) {
    absl::StatusOr<CommandLine> c = ParseCommandLine(args);
    return c.ok() ? c->config.log_level : std::string(c.status().message());
  };
  EXPECT_EQ(level({}), "info");
  EXPECT_EQ(level({"--log-verbose", "1"}), "debug");
  EXPECT_EQ(level({"--log-verbose=2"}), "trace");
  EXPECT_EQ(level({"--log-verbose=0"}), "info");
  EXPECT_EQ(level({"--log-info", "false"}), "warn");
  EXPECT_EQ(level({"--log-info=false", "--log-warning=false"}), "error");
  EXPECT_EQ(level({"--log-info=0", "--log-warning=off", "--log-error=false"}), "off");
  EXPECT_EQ(level({"--log-verbose=1", "--log-info=false"}), "warn");
  EXPECT_THAT(level({"--log-error=false"}), HasSubstr("cannot be off while a lower one is on"));
  EXPECT_THAT(level({"--log-format=fancy"}), HasSubstr("default, ISO8601"));
}

TEST(AdminRedactionTest, AddressesAndKeyValues) {
  EXPECT_EQ(RedactAddresses(R"({"address": "0x7f12ab", "name": "0xnode", "n": "0x"})"),
            R"({"address": "redacted", "name": "0xnode", "n": "0x"})");
  EXPECT_EQ(RedactKeyValues("x:[1,4];k:[2]=(3,5)"), "x:[1,4];k:[2]=(redacted)");
  EXPECT_EQ(RedactKeyValues("x:[1,4]"), "x:[1,4]");
}

}  // namespace
}  // namespace reprise::server
