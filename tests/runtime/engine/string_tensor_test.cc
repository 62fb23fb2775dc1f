// String tensors through the engine: loading string initializers, Cast's parsing and formatting
// rules, string views that outlive the buffer of the value they were read from, and capture /
// replay (each run's strings, not the first run's).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;
using testing::SetIntAttr;

TensorValue Strings(const Shape& shape, const std::vector<std::string>& values) {
  std::vector<absl::string_view> views(values.begin(), values.end());
  return MakeStringTensor(shape, views);
}

std::vector<std::string> StringsOf(const TensorValue& t) {
  EXPECT_EQ(t.dtype, DataType::kString);
  std::vector<std::string> out;
  for (int64_t i = 0; i < NumElements(t.shape); ++i) {
    out.emplace_back(StringAt(t.bytes.data(), i));
  }
  return out;
}

template <typename T>
std::vector<T> ValuesOf(const TensorValue& t) {
  std::vector<T> out(t.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

void AddStringInit(ModelBuilder* b, const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<std::string>& values) {
  onnx::TensorProto* t = b->proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::STRING);
  for (int64_t d : dims) t->add_dims(d);
  for (const std::string& v : values) t->add_string_data(v);
}

class StringTensorTest : public runtime::testing::CoreTest {
 protected:
  // Runs `inputs` through `bytes` in eager and in replay mode (the same result expected).
  absl::StatusOr<std::vector<NamedTensor>> RunBoth(const std::string& bytes,
                                                   const std::vector<NamedTensor>& inputs) {
    auto model = Model::LoadBytes(bytes, *device_->kernels());
    if (!model.ok()) return model.status();
    std::vector<NamedTensor> first;
    for (ExecMode mode : {ExecMode::kEager, ExecMode::kReplay}) {
      auto session = StreamSession::Create(*model, device_, mode);
      if (!session.ok()) return session.status();
      auto out = (*session)->Run(inputs);
      if (!out.ok()) return out.status();
      if (mode == ExecMode::kEager) {
        first = *std::move(out);
        continue;
      }
      for (size_t i = 0; i < out->size(); ++i) {
        if ((*out)[i].value.dtype == DataType::kString) {
          EXPECT_EQ(StringsOf((*out)[i].value), StringsOf(first[i].value));
        } else {
          EXPECT_EQ((*out)[i].value.bytes, first[i].value.bytes);
        }
      }
    }
    return first;
  }
};

std::string CastModel(int from, int to) {
  ModelBuilder b;
  b.Input("x", from, {-1});
  b.Output("y", {-1}, to);
  SetIntAttr(&b.Node("Cast", {"x"}, {"y"}), "to", to);
  return b.Bytes();
}

TEST_F(StringTensorTest, CastParsesIntegersFloatsAndBools) {
  const std::vector<std::string> text = {"7", "+12", "-3", "100.5", "1e3", "99999999999", "-0"};
  auto ints = RunBoth(CastModel(onnx::TensorProto::STRING, onnx::TensorProto::INT32),
                      {{"x", Strings({7}, text)}});
  ASSERT_TRUE(ints.ok()) << ints.status();
  // Decimal integers exactly; other numbers truncated and saturated like a float cast.
  EXPECT_THAT(ValuesOf<int32_t>((*ints)[0].value),
              ::testing::ElementsAre(7, 12, -3, 100, 1000, 2147483647, 0));

  const std::vector<std::string> floats = {"3.14", "1E8", "inf", "-Infinity", "+INF", "1e50"};
  auto f = RunBoth(CastModel(onnx::TensorProto::STRING, onnx::TensorProto::FLOAT),
                   {{"x", Strings({6}, floats)}});
  ASSERT_TRUE(f.ok()) << f.status();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(ValuesOf<float>((*f)[0].value),
              ::testing::ElementsAre(3.14f, 1e8f, inf, -inf, inf, inf));

  auto b = RunBoth(CastModel(onnx::TensorProto::STRING, onnx::TensorProto::BOOL),
                   {{"x", Strings({4}, {"TRUE", "false", "0", "2.5"})}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(ValuesOf<uint8_t>((*b)[0].value), ::testing::ElementsAre(1, 0, 0, 1));
}

TEST_F(StringTensorTest, CastRefusesTextThatIsNotANumber) {
  for (const char* bad : {"", "abc", "12abc", " 5", "++5", "0x10"}) {
    auto out = RunBoth(CastModel(onnx::TensorProto::STRING, onnx::TensorProto::INT64),
                       {{"x", Strings({2}, {"1", bad})}});
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("string element 1"));
    EXPECT_THAT(out.status().message(), HasSubstr("is not a number"));
  }
}

TEST_F(StringTensorTest, CastFormatsNumbers) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1});
  b.Output("y", {-1}, onnx::TensorProto::STRING);
  SetIntAttr(&b.Node("Cast", {"x"}, {"y"}), "to", onnx::TensorProto::STRING);
  TensorValue x{DataType::kFloat32, {6}, {}};
  const std::vector<float> values = {0.1f, 1e-5f, -2.5f, inf, -inf, std::nanf("")};
  x.bytes.resize(values.size() * sizeof(float));
  std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
  auto out = RunBoth(b.Bytes(), {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(StringsOf((*out)[0].value),
              ::testing::ElementsAre("0.1", "1e-05", "-2.5", "INF", "-INF", "NaN"));

  auto ints = RunBoth(CastModel(onnx::TensorProto::INT64, onnx::TensorProto::STRING),
                      {{"x", TensorValue{DataType::kInt64, {1}, {0, 0, 0, 0, 0, 0, 0, 0x80}}}});
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_THAT(StringsOf((*ints)[0].value), ::testing::ElementsAre("-9223372036854775808"));
}

// The strings Cast makes live in its output's storage; Gather copies the views, and the
// storage's last direct reader is then done. A larger float intermediate made before Concat
// reads the views would reuse that arena space if string buffers died with their last reader.
// Each run must also see its own strings (replays rewrite the storage).
TEST_F(StringTensorTest, ViewsOutliveTheirBufferAndReplaysSeeNewValues) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::INT32, {8}, "");
  b.Input("w", onnx::TensorProto::FLOAT, {1024}, "");
  b.Output("y", {3}, onnx::TensorProto::STRING);
  b.Output("z", {1024}, onnx::TensorProto::FLOAT);
  b.Int64Init("idx", {2}, {7, 0});
  AddStringInit(&b, "tail", {1}, {"end"});
  SetIntAttr(&b.Node("Cast", {"x"}, {"s"}), "to", onnx::TensorProto::STRING);
  SetIntAttr(&b.Node("Gather", {"s", "idx"}, {"g"}), "axis", 0);
  b.Node("Mul", {"w", "w"}, {"w2"});
  b.Node("Add", {"w2", "w"}, {"z"});
  SetIntAttr(&b.Node("Concat", {"g", "tail"}, {"y"}), "axis", 0);
  auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
  ASSERT_TRUE(model.ok()) << model.status();
  auto session = StreamSession::Create(*model, device_, ExecMode::kReplay);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int32_t base : {10, 2000, -7}) {
    TensorValue x{DataType::kInt32, {8}, {}};
    std::vector<int32_t> v(8);
    for (int i = 0; i < 8; ++i) v[i] = base + i;
    x.bytes.resize(32);
    std::memcpy(x.bytes.data(), v.data(), 32);
    TensorValue w{DataType::kFloat32, {1024}, ValueBytes(4096, 0x41)};
    StreamRunInfo info;
    auto out = (*session)->Run({{"x", x}, {"w", w}}, &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_FALSE(info.capture_failed) << info.capture_error;
    EXPECT_THAT(StringsOf((*out)[0].value),
                ::testing::ElementsAre(std::to_string(base + 7), std::to_string(base), "end"));
  }
  EXPECT_GE((*session)->counters().replays, 2u);
}

TEST_F(StringTensorTest, StringInitializersLoadAndAreChecked) {
  auto make = [](const std::vector<std::string>& values, bool raw) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::STRING, {2}, "");
    b.Output("y", {2}, onnx::TensorProto::BOOL);
    AddStringInit(&b, "want", {2}, values);
    if (raw) b.proto().mutable_graph()->mutable_initializer(0)->set_raw_data("0123456789abcdef");
    b.Node("Equal", {"x", "want"}, {"y"});
    return b.Bytes();
  };
  auto out =
      RunBoth(make({"a", std::string("b\0c", 3)}, false), {{"x", Strings({2}, {"a", "bc"})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf<uint8_t>((*out)[0].value), ::testing::ElementsAre(1, 0));

  auto short_data = Model::LoadBytes(make({"only one"}, false), *device_->kernels());
  ASSERT_FALSE(short_data.ok());
  EXPECT_THAT(short_data.status().message(), HasSubstr("1 strings stored"));
  auto raw = Model::LoadBytes(make({"a", "b"}, true), *device_->kernels());
  ASSERT_FALSE(raw.ok());
  EXPECT_THAT(raw.status().message(), HasSubstr("string_data"));
}

TEST_F(StringTensorTest, InputViewsMustLieInTheirStringBytes) {
  auto model = Model::LoadBytes(CastModel(onnx::TensorProto::STRING, onnx::TensorProto::STRING),
                                *device_->kernels());
  ASSERT_TRUE(model.ok()) << model.status();
  TensorValue x = Strings({2}, {"ab", "cd"});
  const std::string elsewhere = "not in the tensor";
  const StringElement stray{elsewhere.data(), elsewhere.size()};
  std::memcpy(x.bytes.data() + sizeof(StringElement), &stray, sizeof(stray));
  auto matched = (*model)->MatchInputs({{"x", x}});
  ASSERT_FALSE(matched.ok());
  EXPECT_THAT(matched.status().message(), HasSubstr("string element 1"));
}

}  // namespace
}  // namespace reprise::runtime::engine
