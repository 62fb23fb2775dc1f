// Batch assembly: concatenation along the batch dimension, zero padding, per-request slices.
#include "server/batch_assembly.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/string_tensor.h"
#include "server/bytes_tensor.h"

namespace reprise::server {
namespace {

using runtime::DataType;
using runtime::engine::NamedTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The plan-output view of a tensor (as StreamSession hands outputs over).
runtime::engine::PlanTensor View(const NamedTensor& t) {
  runtime::engine::PlanTensor p;
  p.name = t.name;
  p.dtype = t.value.dtype;
  p.shape = t.value.shape;
  p.bytes = t.value.bytes.size();
  p.data = const_cast<uint8_t*>(t.value.bytes.data());
  return p;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> ToFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

InputTensor In(const std::string& name, runtime::Shape shape, const std::string& data) {
  return InputTensor{name, DataType::kFloat32, std::move(shape), data};
}

TEST(BatchAssemblyTest, ConcatenatesAndPadsWithZeros) {
  const std::string a = Floats({1, 2, 3, 4});  // 2 rows of 2
  const std::string b = Floats({5, 6});        // 1 row
  std::vector<InputTensor> ra = {In("x", {2, 2}, a)};
  std::vector<InputTensor> rb = {In("x", {1, 2}, b)};
  absl::StatusOr<std::vector<NamedTensor>> t = AssembleBatch({ra, rb}, 4);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].name, "x");
  EXPECT_THAT((*t)[0].value.shape, ElementsAre(4, 2));
  std::vector<float> got((*t)[0].value.bytes.size() / 4);
  std::memcpy(got.data(), (*t)[0].value.bytes.data(), (*t)[0].value.bytes.size());
  EXPECT_THAT(got, ElementsAre(1, 2, 3, 4, 5, 6, 0, 0));
  EXPECT_FALSE(AssembleBatch({ra, rb}, 2).ok());  // fewer rows than the requests hold
}

// BYTES inputs in the serialized form: the requests' strings in order, then copies of the first
// row as padding; each request gets its own rows of a string output back serialized.
TEST(BatchAssemblyTest, StringsPadWithTheFirstRowAndSliceSerialized) {
  auto serialized = [](const std::vector<std::string>& elements) {
    std::string out;
    for (const std::string& e : elements) EXPECT_TRUE(AppendSerializedString(e, &out).ok());
    return out;
  };
  const std::string a = serialized({"1", "22"});               // 1 row of 2
  const std::string b = serialized({"333", "", "4", "5555"});  // 2 rows
  std::vector<InputTensor> ra = {InputTensor{"s", DataType::kString, {1, 2}, a}};
  std::vector<InputTensor> rb = {InputTensor{"s", DataType::kString, {2, 2}, b}};
  absl::StatusOr<std::vector<NamedTensor>> t = AssembleBatch({ra, rb}, 4);
  ASSERT_TRUE(t.ok()) << t.status();
  const runtime::TensorValue& v = (*t)[0].value;
  EXPECT_THAT(v.shape, ElementsAre(4, 2));
  std::vector<std::string> got;
  for (int64_t i = 0; i < 8; ++i) got.emplace_back(runtime::StringAt(v.bytes.data(), i));
  EXPECT_THAT(got, ElementsAre("1", "22", "333", "", "4", "5555", "1", "22"));

  absl::StatusOr<OutputTensor> second = CopyOutputRows(View((*t)[0]), 4, 1, 2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(second->shape, ElementsAre(2, 2));
  EXPECT_EQ(second->data, b);

  // A request whose data does not hold its rows is an error, never a read past it.
  std::vector<InputTensor> bad = {InputTensor{"s", DataType::kString, {2, 2}, a}};
  EXPECT_FALSE(AssembleBatch({ra, bad}, 4).ok());
}

TEST(BatchAssemblyTest, EachRequestGetsExactlyItsRows) {
  NamedTensor out{"y", {DataType::kFloat32, {4, 1}, {}}};
  const std::string bytes = Floats({10, 20, 30, 99});  // row 3 is padding
  out.value.bytes.assign(bytes.begin(), bytes.end());
  absl::StatusOr<OutputTensor> first = CopyOutputRows(View(out), 4, 0, 2);
  absl::StatusOr<OutputTensor> second = CopyOutputRows(View(out), 4, 2, 1);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_THAT(first->shape, ElementsAre(2, 1));
  EXPECT_THAT(ToFloats(first->data), ElementsAre(10, 20));
  EXPECT_THAT(second->shape, ElementsAre(1, 1));
  EXPECT_THAT(ToFloats(second->data), ElementsAre(30));  // never the padded 99
  absl::StatusOr<OutputTensor> whole = CopyOutputRows(View(out), -1, 0, 0);
  ASSERT_TRUE(whole.ok());
  EXPECT_THAT(whole->shape, ElementsAre(4, 1));
  EXPECT_THAT(ToFloats(whole->data), ElementsAre(10, 20, 30, 99));
  // Rows outside the batch are an error, never a read past the buffer.
  EXPECT_EQ(CopyOutputRows(View(out), 4, 3, 2).status().code(), absl::StatusCode::kInternal);

  NamedTensor scalar{"s", {DataType::kFloat32, {}, {0, 0, 0, 0}}};
  absl::Status s = CopyOutputRows(View(scalar), 4, 0, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("output \"s\""));
}

TEST(BatchAssemblyTest, KeyDependsOnNonBatchDimensionsOnly) {
  const std::string d;
  std::vector<InputTensor> a = {In("x", {1, 64}, d)};
  std::vector<InputTensor> b = {In("x", {7, 64}, d)};
  std::vector<InputTensor> c = {In("x", {1, 32}, d)};
  EXPECT_EQ(BatchKey(a), BatchKey(b));
  EXPECT_NE(BatchKey(a), BatchKey(c));
  std::vector<InputTensor> e = {InputTensor{"x", DataType::kInt32, {1, 64}, d}};
  EXPECT_NE(BatchKey(a), BatchKey(e));
}

}  // namespace
}  // namespace reprise::server
