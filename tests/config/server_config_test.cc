#include "config/server_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::config {
namespace {

using ::testing::HasSubstr;

TEST(ServerConfigTest, EmptyDocumentGivesDefaults) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("", "empty.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen_address, "0.0.0.0");
  EXPECT_EQ(c->grpc_port, 8001);
  EXPECT_EQ(c->metrics_port, 8002);
  EXPECT_EQ(c->model_repositories, std::vector<std::string>{"/models"});
  EXPECT_EQ(c->control_mode, ControlMode::kNone);
  EXPECT_TRUE(c->load_models.empty());
  EXPECT_EQ(c->max_message_bytes, 0);  // derived from max_request_bytes
  EXPECT_EQ(EffectiveMaxMessageBytes(*c), (int64_t{64} << 20) + (1 << 20));
  EXPECT_EQ(c->max_tensor_rank, 16);
  EXPECT_EQ(c->max_tensor_elements, int64_t{1} << 28);
  EXPECT_EQ(c->max_plan_bytes, int64_t{2} << 30);
  EXPECT_EQ(c->shutdown_timeout_s, 30);
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->log_format, "text");
}

TEST(ServerConfigTest, ShippedFileParsesToTheDefaults) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfigFile(std::string(REPRISE_SOURCE_DIR) + "/config/reprise.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ServerConfig d;
  EXPECT_EQ(c->listen_address, d.listen_address);
  EXPECT_EQ(c->grpc_port, d.grpc_port);
  EXPECT_EQ(c->metrics_port, d.metrics_port);
  EXPECT_EQ(c->model_repositories, d.model_repositories);
  EXPECT_EQ(c->control_mode, d.control_mode);
  EXPECT_EQ(c->load_threads, d.load_threads);
  EXPECT_EQ(c->streams_per_device, d.streams_per_device);
  EXPECT_EQ(c->cpu_threads, d.cpu_threads);
  EXPECT_EQ(c->intra_op_threads, d.intra_op_threads);
  EXPECT_TRUE(c->choose_threads);
  EXPECT_EQ(c->choose_threads, d.choose_threads);
  EXPECT_EQ(c->max_message_bytes, d.max_message_bytes);
  EXPECT_EQ(c->max_tensor_rank, d.max_tensor_rank);
  EXPECT_EQ(c->max_tensor_elements, d.max_tensor_elements);
  EXPECT_EQ(c->max_request_bytes, d.max_request_bytes);
  EXPECT_EQ(c->max_plan_bytes, d.max_plan_bytes);
  EXPECT_EQ(c->max_queue_length, d.max_queue_length);
  EXPECT_EQ(c->request_timeout_ms, d.request_timeout_ms);
  EXPECT_EQ(c->shutdown_timeout_s, d.shutdown_timeout_s);
  EXPECT_EQ(c->log_level, d.log_level);
  EXPECT_EQ(c->log_format, d.log_format);
  EXPECT_EQ(c->batching_max_queue_delay_us, d.batching_max_queue_delay_us);
  EXPECT_EQ(c->batching_default_timeout_us, d.batching_default_timeout_us);
  EXPECT_EQ(c->capture_memory_budget_bytes, d.capture_memory_budget_bytes);
  EXPECT_EQ(c->capture_max_instances_per_stream, d.capture_max_instances_per_stream);
  EXPECT_EQ(c->capture_warmup, d.capture_warmup);
  EXPECT_EQ(c->kernels_conv_winograd, d.kernels_conv_winograd);
  EXPECT_EQ(c->kernels_conv_taps_as_channels, d.kernels_conv_taps_as_channels);
  EXPECT_EQ(c->kernels_conv_tap_regions, d.kernels_conv_tap_regions);
  EXPECT_EQ(c->kernels_conv_own_depthwise, d.kernels_conv_own_depthwise);
  EXPECT_EQ(c->kernels_conv_chain_layout, d.kernels_conv_chain_layout);
  EXPECT_EQ(c->kernels_clear_outputs, d.kernels_clear_outputs);
}

TEST(ServerConfigTest, ReadsKernelOptions) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(
      "kernels: {conv_winograd: false, conv_taps_as_channels: false, conv_tap_regions: false,\n"
      "          conv_own_depthwise: false, conv_chain_layout: nhwc, clear_outputs: off}\n",
      "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->kernels_conv_winograd);
  EXPECT_FALSE(c->kernels_conv_taps_as_channels);
  EXPECT_FALSE(c->kernels_conv_tap_regions);
  EXPECT_FALSE(c->kernels_conv_own_depthwise);
  EXPECT_EQ(c->kernels_conv_chain_layout, "nhwc");
  EXPECT_EQ(c->kernels_clear_outputs, "off");
  absl::Status bad =
      ParseServerConfig("kernels: {conv_chain_layout: nchw16c}\n", "f.yaml").status();
  EXPECT_THAT(bad.message(), HasSubstr("kernels.conv_chain_layout"));
  bad = ParseServerConfig("kernels: {clear_outputs: yes}\n", "f.yaml").status();
  EXPECT_THAT(bad.message(), HasSubstr("kernels.clear_outputs"));
  bad = ParseServerConfig("kernels: {winograd: false}\n", "f.yaml").status();
  EXPECT_THAT(bad.message(), HasSubstr("kernels.winograd"));
}

TEST(ServerConfigTest, ReadsBatchingAndCaptureDefaults) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(
      "batching: {max_queue_delay_microseconds: 250, default_timeout_microseconds: 9000}\n"
      "capture: {memory_budget_bytes: 1048576, max_instances_per_stream: 4, warmup: true}\n",
      "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->batching_max_queue_delay_us, 250);
  EXPECT_EQ(c->batching_default_timeout_us, 9000);
  EXPECT_EQ(c->capture_memory_budget_bytes, 1048576);
  EXPECT_EQ(c->capture_max_instances_per_stream, 4);
  EXPECT_TRUE(c->capture_warmup);
  absl::Status bad = ParseServerConfig("capture: {memory_budget_bytes: -1}\n", "f.yaml").status();
  EXPECT_THAT(bad.message(), HasSubstr("capture.memory_budget_bytes"));
  bad = ParseServerConfig("capture: {warm_up: true}\n", "f.yaml").status();
  EXPECT_THAT(bad.message(), HasSubstr("capture.warm_up"));
}

TEST(ServerConfigTest, ReadsEveryField) {
  const char* text = R"(
server: {listen_address: 127.0.0.1, grpc_port: 9001, metrics_port: 9002}
repository:
  paths: [/a, /b]
  control_mode: explicit
  load_models: [m1, m2]
  load_threads: 2
runtime: {streams_per_device: 4, cpu_threads: 3, intra_op_threads: 2, choose_threads: false}
limits: {max_message_bytes: 4096, max_queue_length: 7, request_timeout_ms: 250}
shutdown: {timeout_seconds: 5}
log: {level: debug, format: json}
)";
  absl::StatusOr<ServerConfig> c = ParseServerConfig(text, "full.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen_address, "127.0.0.1");
  EXPECT_EQ(c->grpc_port, 9001);
  EXPECT_EQ(c->metrics_port, 9002);
  EXPECT_EQ(c->model_repositories, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(c->control_mode, ControlMode::kExplicit);
  EXPECT_EQ(c->load_models, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(c->load_threads, 2);
  EXPECT_EQ(c->streams_per_device, 4);
  EXPECT_EQ(c->cpu_threads, 3);
  EXPECT_EQ(c->intra_op_threads, 2);
  EXPECT_FALSE(c->choose_threads);
  EXPECT_EQ(c->max_message_bytes, 4096);
  EXPECT_EQ(c->max_queue_length, 7);
  EXPECT_EQ(c->request_timeout_ms, 250);
  EXPECT_EQ(c->shutdown_timeout_s, 5);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_EQ(c->log_format, "json");
}

TEST(ServerConfigTest, SingleRepositoryStringIsAList) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("repository: {paths: /srv/m}", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_repositories, std::vector<std::string>{"/srv/m"});
}

TEST(ServerConfigTest, UnknownKeyNamesKeyAndLine) {
  absl::StatusOr<ServerConfig> c =
      ParseServerConfig("server:\n  grpc_port: 1\n  grpc_prot: 2\n", "bad.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("bad.yaml line 3"));
  EXPECT_THAT(c.status().message(), HasSubstr("unknown key \"server.grpc_prot\""));
}

TEST(ServerConfigTest, UnknownTopLevelSection) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("log: {}\nplugins: {}\n", "bad.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(c.status().message(), HasSubstr("\"plugins\""));
}

TEST(ServerConfigTest, WrongTypeNamesKeyAndLine) {
  absl::StatusOr<ServerConfig> c =
      ParseServerConfig("log:\n  level: info\nserver:\n  grpc_port: eighty\n", "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("t.yaml line 4"));
  EXPECT_THAT(c.status().message(), HasSubstr("\"server.grpc_port\""));
  EXPECT_THAT(c.status().message(), HasSubstr("eighty"));
}

TEST(ServerConfigTest, SectionOfWrongShape) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("limits: [1, 2]\n", "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("\"limits\": must be a mapping"));
}

TEST(ServerConfigTest, OutOfRangeAndBadEnum) {
  absl::StatusOr<ServerConfig> port = ParseServerConfig("server: {grpc_port: 70000}", "t.yaml");
  ASSERT_FALSE(port.ok());
  EXPECT_THAT(port.status().message(), HasSubstr("70000"));
  absl::StatusOr<ServerConfig> mode =
      ParseServerConfig("repository:\n  control_mode: watch\n", "t.yaml");
  ASSERT_FALSE(mode.ok());
  EXPECT_THAT(mode.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(mode.status().message(), HasSubstr("\"watch\""));
  absl::StatusOr<ServerConfig> poll = ParseServerConfig(
      "repository:\n  control_mode: poll\n  poll_seconds: 2\nlog: {format: ISO8601, file: "
      "/tmp/x}\n",
      "t.yaml");
  ASSERT_TRUE(poll.ok()) << poll.status();
  EXPECT_EQ(poll->control_mode, ControlMode::kPoll);
  EXPECT_EQ(poll->poll_seconds, 2);
  EXPECT_EQ(poll->log_format, "ISO8601");
  EXPECT_EQ(poll->log_file, "/tmp/x");
  absl::StatusOr<ServerConfig> list =
      ParseServerConfig("repository: {load_models: [a, [b]]}", "t.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("repository.load_models"));
}

TEST(ServerConfigTest, SyntaxErrorHasLine) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("server:\n  a: [1, 2\n", "s.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("s.yaml line"));
  EXPECT_THAT(c.status().message(), HasSubstr("syntax"));
}

TEST(ServerConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<ServerConfig> c = LoadServerConfigFile("/nonexistent/reprise.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/reprise.yaml"));
}

TEST(ServerConfigTest, GrpcSection) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(
      "server: {metrics_address: 127.0.0.1}\n"
      "grpc:\n  use_ssl: true\n  server_cert: /c.pem\n  server_key: /k.pem\n"
      "  restricted_protocol: [\"model-repository,admin:x-key=v=1\"]\n"
      "  admin_service: false\n  max_concurrent_streams: 8\n  keepalive_time: 1000\n"
      "  infer_response_compression_level: high\n",
      "g.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics_address, "127.0.0.1");
  EXPECT_TRUE(c->grpc.use_ssl);
  EXPECT_EQ(c->grpc.server_cert, "/c.pem");
  ASSERT_EQ(c->grpc.restricted_protocols.size(), 1u);
  EXPECT_EQ(c->grpc.restricted_protocols[0].groups,
            (std::vector<std::string>{"model-repository", "admin"}));
  EXPECT_EQ(c->grpc.restricted_protocols[0].header, "x-key");
  EXPECT_EQ(c->grpc.restricted_protocols[0].value, "v=1");
  EXPECT_FALSE(c->grpc.admin_service);
  EXPECT_EQ(c->grpc.max_concurrent_streams, 8);
  EXPECT_EQ(c->grpc.keepalive_time, 1000);
  EXPECT_EQ(c->grpc.infer_response_compression_level, "high");
  // The receive limit is the message limit (derived from limits.max_request_bytes) by default,
  // and never above it.
  EXPECT_EQ(EffectiveMaxReceiveMessageBytes(c->grpc, EffectiveMaxMessageBytes(*c)),
            (int64_t{64} << 20) + (1 << 20));
  EXPECT_EQ(EffectiveMaxReceiveMessageBytes(c->grpc, 4096), 4096);
}

TEST(ServerConfigTest, GrpcSectionErrors) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("grpc:\n  use_tls: true\n", "g.yaml");
  EXPECT_THAT(c.status().message(), HasSubstr("unknown key \"grpc.use_tls\""));
  c = ParseServerConfig("grpc: {restricted_protocol: \"inferenc:k=v\"}", "g.yaml");
  EXPECT_THAT(c.status().message(), HasSubstr("unknown group \"inferenc\""));
  c = ParseServerConfig("grpc: {restricted_protocol: \"inference\"}", "g.yaml");
  EXPECT_THAT(c.status().message(), HasSubstr("<groups>:<header>=<value>"));
  c = ParseServerConfig("grpc: {use_ssl: true}", "g.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(ValidateGrpcConfig(c->grpc).message(), HasSubstr("grpc-server-cert"));
}

}  // namespace
}  // namespace reprise::config
