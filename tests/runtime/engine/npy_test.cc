#include "runtime/engine/npy.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::HasSubstr;

TEST(NpyTest, WritesTheStandardHeader) {
  TensorValue t{DataType::kFloat32, {2, 3}, ValueBytes(24, 0)};
  auto bytes = SerializeNpy(t);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>((*bytes)[8]) | (*bytes)[9] << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_THAT(*bytes, HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  EXPECT_EQ((*bytes)[10 + header_len - 1], '\n');
  EXPECT_EQ(bytes->size(), 10 + header_len + 24);

  TensorValue v{DataType::kInt64, {5}, ValueBytes(40, 0)};
  EXPECT_THAT(*SerializeNpy(v), HasSubstr("'shape': (5,)"));
  TensorValue s{DataType::kUInt8, {}, {7}};
  EXPECT_THAT(*SerializeNpy(s), HasSubstr("'descr': '|u1'"));
  EXPECT_THAT(*SerializeNpy(s), HasSubstr("'shape': ()"));
}

TEST(NpyTest, RoundTripsEveryNumpyType) {
  for (DataType dtype :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt8,
        DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32, DataType::kUInt32,
        DataType::kInt64, DataType::kUInt64, DataType::kBool}) {
    TensorValue t{dtype, {3, 1, 2}, {}};
    t.bytes.resize(6 * DataTypeSize(dtype));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    if (dtype == DataType::kBool) {
      for (auto& b : t.bytes) b &= 1;
    }
    auto bytes = SerializeNpy(t);
    ASSERT_TRUE(bytes.ok()) << DataTypeName(dtype);
    auto back = ParseNpy(*bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, dtype);
    EXPECT_EQ(back->shape, t.shape);
    EXPECT_EQ(back->bytes, t.bytes);
  }
}

TEST(NpyTest, ParsesVersion2AndRejectsBadFiles) {
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  header.append(64 - (12 + header.size() + 1) % 64, ' ');
  header.push_back('\n');
  std::string v2("\x93NUMPY\x02\x00", 8);
  const uint32_t len = static_cast<uint32_t>(header.size());
  v2.append(reinterpret_cast<const char*>(&len), 4);
  v2 += header;
  const int32_t data[2] = {-1, 42};
  v2.append(reinterpret_cast<const char*>(data), 8);
  auto t = ParseNpy(v2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DataType::kInt32);
  int32_t back[2];
  std::memcpy(back, t->bytes.data(), 8);
  EXPECT_EQ(back[1], 42);

  EXPECT_THAT(ParseNpy("not numpy at all").status().message(), HasSubstr("bad magic"));
  EXPECT_FALSE(ParseNpy(v2.substr(0, v2.size() - 1)).ok());  // truncated data
  std::string fortran = v2;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THAT(ParseNpy(fortran).status().message(), HasSubstr("Fortran"));
  std::string big = v2;
  big.replace(big.find("<i4"), 3, ">i4");
  EXPECT_THAT(ParseNpy(big).status().message(), HasSubstr(">i4"));
  TensorValue bf{DataType::kBFloat16, {1}, {0, 0}};
  EXPECT_FALSE(SerializeNpy(bf).ok());
}

}  // namespace
}  // namespace reprise::runtime::engine
