// The HTTP/REST body codec (server/http_codec.h) and compression (server/http_compression.h).
#include "server/http_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http_compression.h"
#include "server/http_json.h"
#include "server/http_service.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

absl::StatusOr<HttpInferRequest> Parse(absl::string_view body,
                                       std::optional<absl::string_view> header = std::nullopt,
                                       int64_t max_bytes = 1 << 20) {
  HttpCodecLimits limits;
  limits.max_tensor_bytes = max_bytes;
  return ParseHttpInferRequest(body, header, "m", "2", limits);
}

TEST(HttpCodecTest, JsonTensorsBecomeRawLittleEndianBytes) {
  auto r = Parse(R"({"id": "a", "parameters": {"priority": 2, "flag": true, "s": "x", "d": 0.5},
    "inputs": [
      {"name": "f", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2.5], [-3, 1e-3]]},
      {"name": "i", "shape": [3], "datatype": "INT16", "data": [-32768, 0, 32767]},
      {"name": "u", "shape": [1], "datatype": "UINT64", "data": [18446744073709551615]},
      {"name": "b", "shape": [2], "datatype": "BOOL", "data": [true, false]},
      {"name": "s", "shape": [2], "datatype": "BYTES", "data": ["hi", ""]}],
    "outputs": [{"name": "y", "parameters": {"binary_data": true, "classification": 2}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const inference::ModelInferRequest& q = r->request;
  EXPECT_EQ(q.model_name(), "m");
  EXPECT_EQ(q.model_version(), "2");
  EXPECT_EQ(q.id(), "a");
  EXPECT_EQ(q.parameters().at("priority").int64_param(), 2);
  EXPECT_TRUE(q.parameters().at("flag").bool_param());
  EXPECT_EQ(q.parameters().at("s").string_param(), "x");
  EXPECT_EQ(q.parameters().at("d").double_param(), 0.5);
  ASSERT_EQ(q.raw_input_contents_size(), 5);
  EXPECT_EQ(q.raw_input_contents(0), Bytes<float>({1.0f, 2.5f, -3.0f, 1e-3f}));
  EXPECT_EQ(q.raw_input_contents(1), Bytes<int16_t>({-32768, 0, 32767}));
  EXPECT_EQ(q.raw_input_contents(2), Bytes<uint64_t>({UINT64_MAX}));
  EXPECT_EQ(q.raw_input_contents(3), std::string("\1\0", 2));
  EXPECT_EQ(q.raw_input_contents(4), Bytes<uint32_t>({2}) + "hi" + Bytes<uint32_t>({0}));
  EXPECT_EQ(q.inputs(0).shape_size(), 2);
  ASSERT_EQ(q.outputs_size(), 1);
  // binary_data is the HTTP layer's; other parameters go on to the service.
  EXPECT_FALSE(q.outputs(0).parameters().contains("binary_data"));
  EXPECT_EQ(q.outputs(0).parameters().at("classification").int64_param(), 2);
  ASSERT_EQ(r->output_binary.size(), 1u);
  EXPECT_EQ(r->output_binary[0], true);
}

TEST(HttpCodecTest, ExactTypeChecks) {
  auto one = [](absl::string_view datatype, absl::string_view value) {
    return Parse(absl::StrCat(R"({"inputs": [{"name": "x", "shape": [1], "datatype": ")", datatype,
                              R"(", "data": [)", value, "]}]}"));
  };
  EXPECT_TRUE(one("INT8", "127").ok());
  EXPECT_THAT(one("INT8", "128").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("INT8", "-129").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("INT32", "1.0").status().message(), HasSubstr("an integer"));
  EXPECT_THAT(one("INT64", "9223372036854775808").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("UINT8", "-1").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("UINT16", "65536").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("BOOL", "1").status().message(), HasSubstr("true or false"));
  EXPECT_THAT(one("FP32", "\"1\"").status().message(), HasSubstr("a number"));
  EXPECT_THAT(one("FP32", "1e39").status().message(), HasSubstr("out of range"));
  EXPECT_TRUE(one("FP64", "1e300").ok());
  EXPECT_EQ(one("FP64", "0e-31")->request.raw_input_contents(0), Bytes<double>({0.0}));
  EXPECT_EQ(one("FP64", "4.4444444444444436e+123")->request.raw_input_contents(0),
            Bytes<double>({4.4444444444444436e+123}));  // correctly rounded
  EXPECT_EQ(one("FP64", "1e-400")->request.raw_input_contents(0), Bytes<double>({0.0}));
  EXPECT_THAT(one("FP64", "1e400").status().message(), HasSubstr("malformed JSON"));
  auto nan = one("FP32", "NaN");
  ASSERT_TRUE(nan.ok()) << nan.status();
  float f = 0;
  std::memcpy(&f, nan->request.raw_input_contents(0).data(), sizeof(f));
  EXPECT_TRUE(std::isnan(f));
  EXPECT_EQ(one("FP32", "-Infinity")->request.raw_input_contents(0),
            Bytes<float>({-std::numeric_limits<float>::infinity()}));
  EXPECT_THAT(one("BYTES", "1").status().message(), HasSubstr("a string"));
  EXPECT_EQ(one("FP16", "1")->request.raw_input_contents(0), Bytes<uint16_t>({0x3c00}));
  EXPECT_EQ(one("FP16", "-2.0009765625")->request.raw_input_contents(0),  // a tie: to even
            Bytes<uint16_t>({0xc000}));
  EXPECT_EQ(one("FP16", "6e-8")->request.raw_input_contents(0), Bytes<uint16_t>({0x0001}));
  EXPECT_EQ(one("BF16", "1.5")->request.raw_input_contents(0), Bytes<uint16_t>({0x3fc0}));
  EXPECT_THAT(one("FP16", "65520").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(one("INT4", "1").status().message(), HasSubstr("unknown datatype"));
  EXPECT_EQ(one("INT8", "1, 2").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpCodecTest, MalformedRequests) {
  EXPECT_THAT(Parse("{").status().message(), HasSubstr("malformed JSON"));
  EXPECT_THAT(Parse("{} x").status().message(), HasSubstr("malformed JSON"));
  EXPECT_THAT(Parse(std::string("{}\0", 3)).status().message(), HasSubstr("NUL"));
  EXPECT_THAT(Parse(std::string(10000, '[')).status().message(), HasSubstr("nested deeper"));
  EXPECT_THAT(Parse("[]").status().message(), HasSubstr("expected an object"));
  EXPECT_THAT(Parse(R"({"id": "a\uDDDD", "inputs": []})").status().message(),
              HasSubstr("lone surrogate"));
  EXPECT_TRUE(Parse(R"({"id": "\uD83D\uDE00\uEAAD", "inputs": []})").ok());  // a pair is fine
  EXPECT_THAT(Parse(R"({"inputs": {}})").status().message(), HasSubstr("\"inputs\""));
  EXPECT_THAT(Parse(R"({"inputs": [], "x": 1})").status().message(), HasSubstr("unknown key"));
  EXPECT_THAT(Parse(R"({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]})")
                  .status()
                  .message(),
              HasSubstr("non-negative"));
  EXPECT_THAT(
      Parse(R"({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]})")
          .status()
          .message(),
      HasSubstr("2 elements, the shape 3"));
  EXPECT_THAT(Parse(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
      "data": [1], "parameters": {"p": [1]}}]})")
                  .status()
                  .message(),
              HasSubstr("parameter \"p\""));
  // The tensor-data budget: RESOURCE_EXHAUSTED, not an allocation.
  EXPECT_EQ(Parse(R"({"inputs": [{"name": "x", "shape": [4], "datatype": "FP64",
      "data": [1, 2, 3, 4]}]})",
                  std::nullopt, 16)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(HttpCodecTest, BinaryDataAndTheHeaderLength) {
  const std::string header =
      R"({"inputs": [{"name": "a", "shape": [2], "datatype": "INT32",
          "parameters": {"binary_data_size": 8}},
         {"name": "b", "shape": [1], "datatype": "FP32", "data": [1]}]})";
  const std::string data = Bytes<int32_t>({7, -7});
  const std::string length = std::to_string(header.size());
  auto r = Parse(header + data, length);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.raw_input_contents(0), data);
  EXPECT_FALSE(r->request.inputs(0).parameters().contains("binary_data_size"));
  EXPECT_THAT(Parse(header + data, "x1").status().message(), HasSubstr("not a decimal"));
  EXPECT_THAT(Parse(header + data, "99999").status().message(), HasSubstr("past the end"));
  EXPECT_THAT(Parse(header + data.substr(0, 4), length).status().message(),
              HasSubstr("past the end"));
  EXPECT_THAT(Parse(header + data + "z", length).status().message(), HasSubstr("not used"));
  EXPECT_THAT(Parse(header + data, std::to_string(header.size() - 1)).status().message(),
              HasSubstr("malformed JSON"));
}

TEST(HttpCodecTest, ResponsesInJsonAndBinary) {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_model_version("1");
  response.set_id("r");
  auto* y = response.add_outputs();
  y->set_name("y");
  y->set_datatype("FP32");
  y->add_shape(3);
  response.add_raw_output_contents(Bytes<float>({2.0f, 0.1f, -1.5f}));
  auto* h = response.add_outputs();
  h->set_name("h");
  h->set_datatype("FP16");
  h->add_shape(1);
  response.add_raw_output_contents(Bytes<uint16_t>({0x3c00}));  // 1.0

  HttpInferRequest json_all;
  auto body = WriteHttpInferResponse(response, json_all);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(body->header_length.has_value());
  EXPECT_THAT(body->body, HasSubstr(R"("data":[2.0,0.1,-1.5])"));
  EXPECT_THAT(body->body, HasSubstr(R"("data":[1.0])"));

  HttpInferRequest y_binary;
  y_binary.request.add_outputs()->set_name("y");
  y_binary.output_binary.push_back(true);
  body = WriteHttpInferResponse(response, y_binary);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_TRUE(body->header_length.has_value());
  EXPECT_EQ(body->body.substr(*body->header_length), response.raw_output_contents(0));
  EXPECT_THAT(body->body.substr(0, *body->header_length), HasSubstr(R"("binary_data_size":12)"));

  // The client side reads both forms back to the same response.
  for (const HttpInferRequest* how : {&json_all, &y_binary}) {
    auto again = WriteHttpInferResponse(response, *how);
    ASSERT_TRUE(again.ok());
    std::optional<std::string> length;
    if (again->header_length) length = std::to_string(*again->header_length);
    auto parsed = ParseHttpInferResponse(again->body, length);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->id(), "r");
    EXPECT_EQ(parsed->raw_output_contents(0), response.raw_output_contents(0));
  }
}

TEST(HttpCodecTest, ClientRequestRoundTrips) {
  inference::ModelInferRequest q;
  q.set_model_name("m");
  q.set_model_version("2");
  auto* in = q.add_inputs();
  in->set_name("x");
  in->set_datatype("INT64");
  in->add_shape(2);
  q.add_raw_input_contents(Bytes<int64_t>({INT64_MIN, 5}));
  for (bool binary : {false, true}) {
    auto body = WriteHttpInferRequest(q, binary, binary);
    ASSERT_TRUE(body.ok());
    std::optional<std::string> length;
    if (body->header_length) length = std::to_string(*body->header_length);
    auto back = Parse(body->body, length);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->request.raw_input_contents(0), q.raw_input_contents(0));
    EXPECT_EQ(back->all_outputs_binary, binary);
  }
}

TEST(HttpCompressionTest, RoundTripsAndCapsTheInflatedSize) {
  const std::string text(100000, 'a');
  for (HttpEncoding e : {HttpEncoding::kGzip, HttpEncoding::kDeflate}) {
    auto packed = Deflate(text, e);
    ASSERT_TRUE(packed.ok());
    EXPECT_LT(packed->size(), 1000u);
    auto unpacked = Inflate(*packed, e, 100000);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    EXPECT_EQ(*unpacked, text);
    EXPECT_EQ(Inflate(*packed, e, 99999).status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Inflate(packed->substr(0, packed->size() / 2), e, 100000).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ChooseResponseEncoding("br, gzip;q=0, deflate"), HttpEncoding::kDeflate);
  EXPECT_EQ(ChooseResponseEncoding("gzip, deflate"), HttpEncoding::kGzip);
  EXPECT_EQ(ChooseResponseEncoding(""), HttpEncoding::kIdentity);
  EXPECT_FALSE(ParseContentEncoding("br").ok());
}

TEST(HttpServiceTest, StatusCodesFollowTriton) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(HttpErrorMessage(HttpErrorBody("a \"b\"")), "a \"b\"");
}

}  // namespace
}  // namespace reprise::server
