#include "server/infer_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using runtime::DataType;
using ::testing::HasSubstr;

constexpr absl::string_view kLabel = "model \"m\" version 1";

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string Serialized(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out.append(s);
  }
  return out;
}

ModelSignature AddSignature() {
  ModelSignature s;
  s.inputs = {{"a", DataType::kFloat32, {-1, 2}}, {"b", DataType::kFloat32, {-1, 2}}};
  s.outputs = {{"sum", DataType::kFloat32, {-1, 2}}, {"diff", DataType::kFloat32, {-1, 2}}};
  return s;
}

inference::ModelInferRequest RawAddRequest() {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  for (const char* name : {"a", "b"}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(2);
    r.add_raw_input_contents(Floats({1.0f, 2.0f}));
  }
  return r;
}

absl::Status Decode(const inference::ModelInferRequest& r, const ModelSignature& s,
                    int max_batch = 0) {
  return DecodeInferRequest(r, s, max_batch, kLabel).status();
}

void ExpectInvalid(const absl::Status& s, absl::string_view fragment) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(fragment));
  EXPECT_THAT(s.message(), HasSubstr(kLabel));
}

TEST(InferCodecTest, DatatypeNamesRoundTrip) {
  for (const char* name : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                           "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"}) {
    absl::StatusOr<DataType> t = DataTypeFromKServe(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(KServeDatatypeName(*t), name);
  }
  EXPECT_FALSE(DataTypeFromKServe("FLOAT").ok());
}

TEST(InferCodecTest, RawRequestDecodes) {
  const inference::ModelInferRequest request = RawAddRequest();  // decoded data points into it
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(request, AddSignature(), 8, kLabel);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->inputs.size(), 2u);
  EXPECT_EQ(d->inputs[0].name, "a");
  EXPECT_EQ(d->inputs[0].shape, (runtime::Shape{1, 2}));
  EXPECT_EQ(d->inputs[0].data, Floats({1.0f, 2.0f}));
  EXPECT_EQ(d->outputs, (std::vector<std::string>{"sum", "diff"}));
}

TEST(InferCodecTest, InputsAreReorderedToTheModelsOrder) {
  inference::ModelInferRequest r = RawAddRequest();
  r.mutable_inputs()->SwapElements(0, 1);
  r.mutable_raw_input_contents()->SwapElements(0, 1);
  *r.mutable_raw_input_contents(0) = Floats({5.0f, 6.0f});  // now b's data
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, AddSignature(), 0, kLabel);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->inputs[0].name, "a");
  EXPECT_EQ(d->inputs[1].name, "b");
  EXPECT_EQ(d->inputs[1].data, Floats({5.0f, 6.0f}));
}

TEST(InferCodecTest, TypedContentsOfEveryTypedDatatype) {
  struct Case {
    DataType type;
    const char* name;
    std::function<void(inference::InferTensorContents*)> fill;
    std::string expected;
  };
  auto bytes = [](auto... v) {
    std::string s;
    (s.append(reinterpret_cast<const char*>(&v), sizeof(v)), ...);
    return s;
  };
  const std::vector<Case> cases = {
      {DataType::kBool, "BOOL",
       [](auto* c) {
         c->add_bool_contents(true);
         c->add_bool_contents(false);
       },
       std::string("\x01\x00", 2)},
      {DataType::kUInt8, "UINT8",
       [](auto* c) {
         c->add_uint_contents(7);
         c->add_uint_contents(255);
       },
       bytes(uint8_t{7}, uint8_t{255})},
      {DataType::kUInt16, "UINT16",
       [](auto* c) {
         c->add_uint_contents(1);
         c->add_uint_contents(65535);
       },
       bytes(uint16_t{1}, uint16_t{65535})},
      {DataType::kUInt32, "UINT32",
       [](auto* c) {
         c->add_uint_contents(3);
         c->add_uint_contents(4);
       },
       bytes(uint32_t{3}, uint32_t{4})},
      {DataType::kUInt64, "UINT64",
       [](auto* c) {
         c->add_uint64_contents(5);
         c->add_uint64_contents(6);
       },
       bytes(uint64_t{5}, uint64_t{6})},
      {DataType::kInt8, "INT8",
       [](auto* c) {
         c->add_int_contents(-128);
         c->add_int_contents(127);
       },
       bytes(int8_t{-128}, int8_t{127})},
      {DataType::kInt16, "INT16",
       [](auto* c) {
         c->add_int_contents(-2);
         c->add_int_contents(300);
       },
       bytes(int16_t{-2}, int16_t{300})},
      {DataType::kInt32, "INT32",
       [](auto* c) {
         c->add_int_contents(-9);
         c->add_int_contents(9);
       },
       bytes(int32_t{-9}, int32_t{9})},
      {DataType::kInt64, "INT64",
       [](auto* c) {
         c->add_int64_contents(-1);
         c->add_int64_contents(1);
       },
       bytes(int64_t{-1}, int64_t{1})},
      {DataType::kFloat32, "FP32",
       [](auto* c) {
         c->add_fp32_contents(1.5f);
         c->add_fp32_contents(-2);
       },
       bytes(1.5f, -2.0f)},
      {DataType::kFloat64, "FP64",
       [](auto* c) {
         c->add_fp64_contents(0.25);
         c->add_fp64_contents(8);
       },
       bytes(0.25, 8.0)},
      {DataType::kString, "BYTES",
       [](auto* c) {
         c->add_bytes_contents("hi");
         c->add_bytes_contents("");
       },
       Serialized({"hi", ""})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelSignature sig;
    sig.inputs = {{"x", c.type, {2}}};
    sig.outputs = {{"y", c.type, {2}}};
    inference::ModelInferRequest r;
    auto* in = r.add_inputs();
    in->set_name("x");
    in->set_datatype(c.name);
    in->add_shape(2);
    c.fill(in->mutable_contents());
    absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, sig, 0, kLabel);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->inputs[0].data, c.expected);
  }
}

TEST(InferCodecTest, RawBytesTensor) {
  ModelSignature sig;
  sig.inputs = {{"s", DataType::kString, {-1}}};
  sig.outputs = {{"o", DataType::kString, {-1}}};
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("s");
  in->set_datatype("BYTES");
  in->add_shape(3);
  r.add_raw_input_contents(Serialized({"a", "bc", ""}));
  EXPECT_TRUE(Decode(r, sig).ok());
  *r.mutable_raw_input_contents(0) = Serialized({"a", "bc"});
  ExpectInvalid(Decode(r, sig), "2 BYTES elements, expected 3");
  *r.mutable_raw_input_contents(0) = Serialized({"a", "bc", ""}) + std::string("\x05\x00", 2);
  ExpectInvalid(Decode(r, sig), "truncated 4-byte length prefix");
  std::string lying = Serialized({"a", "bc"});
  lying += std::string("\x09\x00\x00\x00xy", 6);
  *r.mutable_raw_input_contents(0) = lying;
  ExpectInvalid(Decode(r, sig), "claims 9 bytes but only 2 remain");
  // A length prefix far past the end (the largest uint32) is the same error, not a read.
  *r.mutable_raw_input_contents(0) = std::string("\xff\xff\xff\xff", 4) + "abc";
  ExpectInvalid(Decode(r, sig), "claims 4294967295 bytes but only 3 remain");
}

TEST(InferCodecTest, MixedRawAndTypedIsInvalid) {
  inference::ModelInferRequest r = RawAddRequest();
  r.mutable_inputs(1)->mutable_contents()->add_fp32_contents(1.0f);
  ExpectInvalid(Decode(r, AddSignature()), "cannot be mixed");
}

TEST(InferCodecTest, RawCountMustMatchInputs) {
  inference::ModelInferRequest r = RawAddRequest();
  r.add_raw_input_contents("x");
  ExpectInvalid(Decode(r, AddSignature()), "raw_input_contents has 3 entries for 2 inputs");
}

TEST(InferCodecTest, RawByteSizeMustMatchShape) {
  inference::ModelInferRequest r = RawAddRequest();
  *r.mutable_raw_input_contents(1) = Floats({1.0f, 2.0f, 3.0f});
  ExpectInvalid(Decode(r, AddSignature()), "input \"b\" has 12 bytes of data, expected 8");
}

TEST(InferCodecTest, MissingExtraAndDuplicateInputs) {
  inference::ModelInferRequest missing = RawAddRequest();
  missing.mutable_inputs()->RemoveLast();
  missing.mutable_raw_input_contents()->RemoveLast();
  ExpectInvalid(Decode(missing, AddSignature()), "missing input \"b\"");

  inference::ModelInferRequest extra = RawAddRequest();
  extra.mutable_inputs(1)->set_name("c");
  ExpectInvalid(Decode(extra, AddSignature()), "unexpected input \"c\"");

  inference::ModelInferRequest twice = RawAddRequest();
  twice.mutable_inputs(1)->set_name("a");
  ExpectInvalid(Decode(twice, AddSignature()), "input \"a\" given twice");
}

TEST(InferCodecTest, WrongAndUnknownDatatype) {
  inference::ModelInferRequest r = RawAddRequest();
  r.mutable_inputs(0)->set_datatype("FP64");
  ExpectInvalid(Decode(r, AddSignature()), "input \"a\" has datatype FP64, expected FP32");
  r.mutable_inputs(0)->set_datatype("FLOAT");
  ExpectInvalid(Decode(r, AddSignature()), "unknown datatype \"FLOAT\"");
  // BYTES only where the model takes strings.
  r.mutable_inputs(0)->set_datatype("BYTES");
  ExpectInvalid(Decode(r, AddSignature()), "has datatype BYTES, expected FP32");
}

TEST(InferCodecTest, WrongShape) {
  inference::ModelInferRequest rank = RawAddRequest();
  rank.mutable_inputs(0)->add_shape(1);
  ExpectInvalid(Decode(rank, AddSignature()), "input \"a\" has shape [1,2,1], expected [-1,2]");
  inference::ModelInferRequest dim = RawAddRequest();
  dim.mutable_inputs(0)->set_shape(1, 3);
  ExpectInvalid(Decode(dim, AddSignature()), "has shape [1,3], expected [-1,2]");
  inference::ModelInferRequest negative = RawAddRequest();
  negative.mutable_inputs(0)->set_shape(0, -1);
  ExpectInvalid(Decode(negative, AddSignature()), "negative dimension -1");
}

TEST(InferCodecTest, BatchLimits) {
  inference::ModelInferRequest r = RawAddRequest();
  for (int i = 0; i < 2; ++i) {
    r.mutable_inputs(i)->set_shape(0, 3);
    *r.mutable_raw_input_contents(i) = Floats({1, 2, 3, 4, 5, 6});
  }
  ExpectInvalid(Decode(r, AddSignature(), 2), "batch size 3 exceeds max_batch_size 2");
  EXPECT_TRUE(Decode(r, AddSignature(), 4).ok());
  r.mutable_inputs(1)->set_shape(0, 1);
  *r.mutable_raw_input_contents(1) = Floats({1, 2});
  ExpectInvalid(Decode(r, AddSignature(), 4), "batch size 1 but another input has 3");
}

TEST(InferCodecTest, TypedContentRules) {
  ModelSignature sig;
  sig.inputs = {{"x", DataType::kInt8, {2}}};
  sig.outputs = {{"y", DataType::kInt8, {2}}};
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("INT8");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(1);
  ExpectInvalid(Decode(r, sig), "has 1 values in int_contents, expected 2");
  in->mutable_contents()->add_int_contents(200);
  ExpectInvalid(Decode(r, sig), "value 200 at index 1 does not fit INT8");
  in->mutable_contents()->Clear();
  in->mutable_contents()->add_fp32_contents(1);
  in->mutable_contents()->add_fp32_contents(2);
  ExpectInvalid(Decode(r, sig), "sets fp32_contents; its values go in int_contents");
  in->mutable_contents()->Clear();
  ExpectInvalid(Decode(r, sig), "has no data");
}

TEST(InferCodecTest, HalfPrecisionIsRawOnly) {
  ModelSignature sig;
  sig.inputs = {{"h", DataType::kFloat16, {1}}};
  sig.outputs = {{"o", DataType::kFloat16, {1}}};
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("h");
  in->set_datatype("FP16");
  in->add_shape(1);
  in->mutable_contents()->add_fp32_contents(1.0f);
  ExpectInvalid(Decode(r, sig), "FP16 data must be sent in raw_input_contents");
  in->clear_contents();
  r.add_raw_input_contents(std::string("\x00\x3c", 2));
  EXPECT_TRUE(Decode(r, sig).ok());
}

TEST(InferCodecTest, BoolBytesMustBeZeroOrOne) {
  ModelSignature sig;
  sig.inputs = {{"f", DataType::kBool, {2}}};
  sig.outputs = {{"o", DataType::kBool, {2}}};
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("f");
  in->set_datatype("BOOL");
  in->add_shape(2);
  r.add_raw_input_contents(std::string("\x01\x02", 2));
  ExpectInvalid(Decode(r, sig), "BOOL element 1 is 2");
}

TEST(InferCodecTest, RequestedOutputs) {
  inference::ModelInferRequest r = RawAddRequest();
  r.add_outputs()->set_name("diff");
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, AddSignature(), 0, kLabel);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->outputs, std::vector<std::string>{"diff"});
  r.add_outputs()->set_name("diff");
  ExpectInvalid(Decode(r, AddSignature()), "output \"diff\" requested twice");
  r.mutable_outputs(1)->set_name("prod");
  ExpectInvalid(Decode(r, AddSignature()), "requested output \"prod\" is not an output");
}

TEST(InferCodecTest, UnsupportedParametersAreRefused) {
  inference::ModelInferRequest seq = RawAddRequest();
  (*seq.mutable_parameters())["sequence_id"].set_int64_param(3);
  ExpectInvalid(Decode(seq, AddSignature()), "sequence batching is not supported");
  inference::ModelInferRequest shm = RawAddRequest();
  (*shm.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  ExpectInvalid(Decode(shm, AddSignature()), "1 inputs not in shared memory");
  shm.mutable_raw_input_contents()->DeleteSubrange(0, 1);  // raw entries: the other inputs only
  ExpectInvalid(Decode(shm, AddSignature()), "needs \"shared_memory_byte_size\"");
  (*shm.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  absl::Status unknown = Decode(shm, AddSignature());
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.message(), HasSubstr("Unable to find shared memory region"));
  inference::ModelInferRequest cls = RawAddRequest();
  (*cls.mutable_inputs(0)->mutable_parameters())["classification"].set_int64_param(3);
  ExpectInvalid(Decode(cls, AddSignature()), "\"classification\" applies to outputs");
  inference::ModelInferRequest harmless = RawAddRequest();
  (*harmless.mutable_parameters())["priority"].set_int64_param(1);
  EXPECT_TRUE(Decode(harmless, AddSignature()).ok());
}

TEST(InferCodecTest, EncodeEchoesIdAndParametersAndUsesRaw) {
  inference::ModelInferRequest r = RawAddRequest();
  r.set_id("req-7");
  (*r.mutable_parameters())["tag"].set_string_param("x");
  auto* wanted = r.add_outputs();
  wanted->set_name("sum");
  (*wanted->mutable_parameters())["binary_data"].set_bool_param(true);
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, AddSignature(), 0, kLabel);
  ASSERT_TRUE(d.ok());
  std::vector<OutputTensor> outputs = {{"diff", DataType::kFloat32, {1, 2}, Floats({0, 0})},
                                       {"sum", DataType::kFloat32, {1, 2}, Floats({2, 4})}};
  inference::ModelInferResponse response;
  ASSERT_TRUE(EncodeInferResponse(r, *d, "3", std::move(outputs), kLabel, &response).ok());
  EXPECT_EQ(response.model_name(), "m");
  EXPECT_EQ(response.model_version(), "3");
  EXPECT_EQ(response.id(), "req-7");
  EXPECT_EQ(response.parameters().at("tag").string_param(), "x");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "sum");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_THAT(response.outputs(0).shape(), ::testing::ElementsAre(1, 2));
  EXPECT_TRUE(response.outputs(0).parameters().at("binary_data").bool_param());
  EXPECT_FALSE(response.outputs(0).has_contents());
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0), Floats({2, 4}));
}

// Triton's classification: the output asked with `classification` comes back as BYTES top-k
// (with the labels the caller attached); the others as they are. Names longer than the small
// string buffer, so that a stale view of a replaced name would show under ASan.
TEST(InferCodecTest, EncodeClassifiesTheOutputsAskedFor) {
  const std::string probs = "probabilities_of_each_class";
  const std::string other = "another_rather_long_output";
  ModelSignature sig;
  sig.inputs = {{"x", DataType::kFloat32, {-1, 3}}};
  sig.outputs = {{probs, DataType::kFloat32, {-1, 3}}, {other, DataType::kFloat32, {-1, 3}}};
  inference::ModelInferRequest r;
  r.set_model_name("m");
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(3);
  r.add_raw_input_contents(Floats({0.2f, 0.7f, 0.1f}));
  auto* wanted = r.add_outputs();
  wanted->set_name(probs);
  (*wanted->mutable_parameters())["classification"].set_int64_param(2);
  r.add_outputs()->set_name(other);
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, sig, /*max_batch_size=*/4, kLabel);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->output_options.size(), 2u);
  EXPECT_EQ(d->output_options[0].classification, 2);
  const std::vector<std::string> labels = {"a", "b", "c"};
  d->output_options[0].labels = &labels;
  std::vector<OutputTensor> outputs = {
      {other, DataType::kFloat32, {1, 3}, Floats({1, 2, 3})},
      {probs, DataType::kFloat32, {1, 3}, Floats({0.2f, 0.7f, 0.1f})}};
  inference::ModelInferResponse response;
  ASSERT_TRUE(EncodeInferResponse(r, *d, "1", std::move(outputs), kLabel, &response).ok());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), probs);
  EXPECT_EQ(response.outputs(0).datatype(), "BYTES");
  EXPECT_THAT(response.outputs(0).shape(), ::testing::ElementsAre(1, 2));
  std::string expected;
  for (const std::string e : {"0.700000:1:b", "0.200000:0:a"}) {
    const uint32_t len = static_cast<uint32_t>(e.size());
    expected.append(reinterpret_cast<const char*>(&len), 4);
    expected += e;
  }
  EXPECT_EQ(response.raw_output_contents(0), expected);
  EXPECT_EQ(response.outputs(1).name(), other);
  EXPECT_EQ(response.raw_output_contents(1), Floats({1, 2, 3}));
}

TEST(InferCodecTest, EncodeRejectsBadBackendOutput) {
  inference::ModelInferRequest r = RawAddRequest();
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r, AddSignature(), 0, kLabel);
  ASSERT_TRUE(d.ok());
  inference::ModelInferResponse response;
  absl::Status missing = EncodeInferResponse(
      r, *d, "1", {{"sum", DataType::kFloat32, {1, 2}, Floats({1, 2})}}, kLabel, &response);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(missing.message(), HasSubstr("no output \"diff\""));
  inference::ModelInferResponse response2;
  absl::Status size = EncodeInferResponse(r, *d, "1",
                                          {{"sum", DataType::kFloat32, {1, 2}, Floats({1})},
                                           {"diff", DataType::kFloat32, {1, 2}, Floats({1, 2})}},
                                          kLabel, &response2);
  EXPECT_EQ(size.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(size.message(), HasSubstr("output \"sum\" has 4 bytes, expected 8"));
}

}  // namespace
}  // namespace reprise::server

namespace reprise::server {
namespace {

void ExpectExhausted(const absl::Status& s, absl::string_view fragment) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr(fragment));
}

inference::ModelInferRequest OneInput(absl::string_view datatype, std::vector<int64_t> shape,
                                      std::string raw) {
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype(std::string(datatype));
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(std::move(raw));
  return r;
}

ModelSignature OneInputSignature(DataType type) {
  ModelSignature s;
  s.inputs = {{"x", type, {-1, -1}}};
  s.outputs = {{"y", type, {-1}}};
  return s;
}

TEST(InferCodecLimitsTest, AZeroDimensionDoesNotExemptTheOthers) {
  const ModelSignature sig = OneInputSignature(DataType::kFloat32);
  ExpectExhausted(Decode(OneInput("FP32", {0, int64_t{1} << 39}, ""), sig),
                  "limits.max_tensor_elements");
  ExpectExhausted(Decode(OneInput("FP32", {int64_t{1} << 39, 0}, ""), sig),
                  "limits.max_tensor_elements");
  EXPECT_TRUE(Decode(OneInput("FP32", {0, 1024}, ""), sig).ok());
}

TEST(InferCodecLimitsTest, WrappingByteSizeIsRefused) {
  // 2^61 int64 elements are 2^64 bytes, which wraps to 0 in plain arithmetic.
  const ModelSignature sig = OneInputSignature(DataType::kInt64);
  ExpectExhausted(Decode(OneInput("INT64", {0, int64_t{1} << 61}, ""), sig, 8),
                  "limits.max_tensor_elements");
  ExpectExhausted(Decode(OneInput("INT64", {1, int64_t{1} << 61}, ""), sig, 8),
                  "limits.max_tensor_elements");
}

TEST(InferCodecLimitsTest, ZeroRowsOnABatchedModel) {
  const ModelSignature sig = OneInputSignature(DataType::kFloat32);
  ExpectInvalid(Decode(OneInput("FP32", {0, 4}, ""), sig, 8), "at least one row");
}

TEST(InferCodecLimitsTest, RankElementsAndBytesFollowTheLimits) {
  const ModelSignature sig = OneInputSignature(DataType::kFloat32);
  RequestLimits limits;
  limits.max_rank = 1;
  absl::Status s =
      DecodeInferRequest(OneInput("FP32", {1, 2}, Floats({1, 2})), sig, 0, kLabel, limits).status();
  ExpectExhausted(s, "has rank 2, over limits.max_tensor_rank (1)");

  limits = RequestLimits{};
  limits.max_elements = 4;
  s = DecodeInferRequest(OneInput("FP32", {1, 5}, Floats({1, 2, 3, 4, 5})), sig, 0, kLabel, limits)
          .status();
  ExpectExhausted(s, "limits.max_tensor_elements (4");
  EXPECT_TRUE(
      DecodeInferRequest(OneInput("FP32", {2, 2}, Floats({1, 2, 3, 4})), sig, 0, kLabel, limits)
          .ok());

  limits = RequestLimits{};
  limits.max_request_bytes = 8;
  s = DecodeInferRequest(OneInput("FP32", {1, 3}, Floats({1, 2, 3})), sig, 0, kLabel, limits)
          .status();
  ExpectExhausted(s, "over limits.max_request_bytes (8)");
  // Typed contents count too, before they are converted.
  inference::ModelInferRequest typed;
  auto* in = typed.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(3);
  for (float v : {1.0f, 2.0f, 3.0f}) in->mutable_contents()->add_fp32_contents(v);
  ExpectExhausted(DecodeInferRequest(typed, sig, 0, kLabel, limits).status(),
                  "limits.max_request_bytes");
}

TEST(InferCodecLimitsTest, ClientNamesAreCutShortInMessages) {
  inference::ModelInferRequest r = RawAddRequest();
  r.mutable_inputs(1)->set_name(std::string(100000, 'n'));
  absl::Status s = Decode(r, AddSignature());
  ExpectInvalid(s, "(100000 bytes)");
  EXPECT_LT(s.message().size(), 300u);
  inference::ModelInferRequest out = RawAddRequest();
  out.add_outputs()->set_name(std::string(100000, 'o'));
  s = Decode(out, AddSignature());
  ExpectInvalid(s, "(100000 bytes)");
  EXPECT_LT(s.message().size(), 300u);
}

}  // namespace
}  // namespace reprise::server
