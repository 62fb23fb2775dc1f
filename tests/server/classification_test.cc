// The classification extension: top-k strings in Triton's "score:index[:label]" form.
#include "server/classification.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using runtime::DataType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
OutputTensor Tensor(DataType type, runtime::Shape shape, const std::vector<T>& values) {
  OutputTensor t;
  t.name = "probs";
  t.dtype = type;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(T));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// The elements of KServe's serialized BYTES form.
std::vector<std::string> Strings(const std::string& data) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos + 4 <= data.size()) {
    uint32_t len = 0;
    std::memcpy(&len, data.data() + pos, 4);
    out.push_back(data.substr(pos + 4, len));
    pos += 4 + len;
  }
  EXPECT_EQ(pos, data.size());
  return out;
}

TEST(ClassificationTest, TopKOfOneRowWithAndWithoutLabels) {
  const OutputTensor probs = Tensor<float>(DataType::kFloat32, {4}, {0.1f, 0.5f, 0.25f, 0.15f});
  absl::StatusOr<OutputTensor> top = Classify(probs, 2, /*batched=*/false, nullptr, "o");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->dtype, DataType::kString);
  EXPECT_EQ(top->shape, (runtime::Shape{2}));
  EXPECT_THAT(Strings(top->data), ElementsAre("0.500000:1", "0.250000:2"));

  const std::vector<std::string> labels = {"cat", "dog", "", "fish"};  // "" : no label
  top = Classify(probs, 10, false, &labels, "o");  // k over the count: every class
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->shape, (runtime::Shape{4}));
  EXPECT_THAT(Strings(top->data),
              ElementsAre("0.500000:1:dog", "0.250000:2", "0.150000:3:fish", "0.100000:0:cat"));
  const std::vector<std::string> short_labels = {"cat"};  // indexes past the list: no label
  top = Classify(probs, 1, false, &short_labels, "o");
  EXPECT_THAT(Strings(top->data), ElementsAre("0.500000:1"));
}

TEST(ClassificationTest, BatchedRowsAreClassifiedEachOnTheirOwn) {
  const OutputTensor scores =
      Tensor<int32_t>(DataType::kInt32, {2, 3}, {7, -2, 9, 1, 1, 0});  // ties keep index order
  absl::StatusOr<OutputTensor> top = Classify(scores, 2, /*batched=*/true, nullptr, "o");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->shape, (runtime::Shape{2, 2}));
  EXPECT_THAT(Strings(top->data), ElementsAre("9:2", "7:0", "1:0", "1:1"));
  // The same tensor unbatched is one row of six.
  top = Classify(scores, 2, /*batched=*/false, nullptr, "o");
  EXPECT_EQ(top->shape, (runtime::Shape{2}));
  EXPECT_THAT(Strings(top->data), ElementsAre("9:2", "7:0"));
}

TEST(ClassificationTest, EightBitScoresPrintAsNumbersAndNanRanksLast) {
  const OutputTensor u8 = Tensor<uint8_t>(DataType::kUInt8, {3}, {3, 200, 65});
  EXPECT_THAT(Strings(Classify(u8, 3, false, nullptr, "o")->data),
              ElementsAre("200:1", "65:2", "3:0"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const OutputTensor f = Tensor<float>(DataType::kFloat32, {4}, {nan, -1.0f, nan, 2.0f});
  EXPECT_THAT(Strings(Classify(f, 4, false, nullptr, "o")->data),
              ElementsAre("2.000000:3", "-1.000000:1", "nan:0", "nan:2"));
}

TEST(ClassificationTest, UnorderedTypesAreRefused) {
  const OutputTensor b = Tensor<uint8_t>(DataType::kBool, {2}, {0, 1});
  absl::StatusOr<OutputTensor> top = Classify(b, 1, false, nullptr, "output \"b\"");
  EXPECT_EQ(top.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(top.status().message(), HasSubstr("output \"b\""));
  EXPECT_THAT(top.status().message(), HasSubstr("class result not available"));
}

TEST(ClassificationTest, LabelsFromText) {
  absl::StatusOr<std::vector<std::string>> labels = ParseLabels("a\r\nb\n\nd", "l.txt");
  ASSERT_TRUE(labels.ok());
  EXPECT_THAT(*labels, ElementsAre("a", "b", "", "d"));
  EXPECT_THAT(*ParseLabels("a\nb\n", "l.txt"), ElementsAre("a", "b"));
  EXPECT_TRUE(ParseLabels("", "l.txt")->empty());
}

}  // namespace
}  // namespace reprise::server
