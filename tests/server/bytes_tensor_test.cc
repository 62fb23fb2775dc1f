#include "server/bytes_tensor.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/string_tensor.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Serialized(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) EXPECT_TRUE(AppendSerializedString(e, &out).ok());
  return out;
}

TEST(BytesTensorTest, LengthPrefixIsFourBytesLittleEndian) {
  std::string out;
  ASSERT_TRUE(AppendSerializedString(std::string(258, 'x'), &out).ok());
  EXPECT_EQ(out.substr(0, 4), std::string("\x02\x01\x00\x00", 4));
  EXPECT_EQ(out.size(), 4u + 258u);
}

TEST(BytesTensorTest, SplitsWhatAppendWrites) {
  const std::string data = Serialized({"", "a", std::string("b\0c", 3), std::string(300, 'z')});
  std::vector<absl::string_view> elements;
  absl::StatusOr<int64_t> count = SplitSerializedStrings(data, &elements);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 4);
  EXPECT_THAT(elements, ElementsAre("", "a", absl::string_view("b\0c", 3), std::string(300, 'z')));
  EXPECT_EQ(*SplitSerializedStrings("", nullptr), 0);
}

TEST(BytesTensorTest, RefusesMalformedForms) {
  const std::string one = Serialized({"abc"});
  struct Case {
    std::string data;
    const char* fragment;
  } cases[] = {
      {one + std::string("\x01\x00", 2),
       "BYTES element 1: truncated 4-byte length prefix at byte 7"},
      {one.substr(0, 5), "BYTES element 0 claims 3 bytes but only 1 remain"},
      {std::string("\xff\xff\xff\xff", 4), "claims 4294967295 bytes but only 0 remain"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> count = SplitSerializedStrings(c.data, nullptr);
    ASSERT_FALSE(count.ok());
    EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(count.status().message(), HasSubstr(c.fragment));
  }
}

TEST(BytesTensorTest, TensorRoundTripAndCount) {
  const std::string data = Serialized({"1", "22", "333", "4444"});
  absl::StatusOr<runtime::TensorValue> t = StringTensorFromSerialized({2, 2}, data);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(runtime::CheckStringTensor(*t, "t").ok());
  EXPECT_EQ(runtime::StringAt(t->bytes.data(), 3), "4444");
  EXPECT_EQ(*SerializeStrings(t->bytes.data(), 0, 4), data);
  EXPECT_EQ(*SerializeStrings(t->bytes.data(), 2, 2), Serialized({"333", "4444"}));

  absl::StatusOr<runtime::TensorValue> wrong = StringTensorFromSerialized({5}, data);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("4 BYTES elements, expected 5"));
}

}  // namespace
}  // namespace reprise::server
