#include "runtime/core/data_type.h"

#include "gtest/gtest.h"

namespace reprise::runtime {
namespace {

TEST(DataTypeTest, SizesAndNames) {
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kString), sizeof(StringElement));
  EXPECT_EQ(DataTypeSize(DataType::kUndefined), 0u);
  EXPECT_EQ(DataTypeName(DataType::kUInt64), "uint64");
}

TEST(DataTypeTest, FromCodeRejectsUnknown) {
  EXPECT_EQ(*DataTypeFromCode(7), DataType::kInt64);
  EXPECT_EQ(*DataTypeFromCode(16), DataType::kBFloat16);
  EXPECT_FALSE(DataTypeFromCode(0).ok());
  EXPECT_FALSE(DataTypeFromCode(14).ok());  // complex64: not supported
  EXPECT_FALSE(DataTypeFromCode(-3).ok());
}

TEST(DataTypeTest, ShapeHelpers) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({2, 0, 4}), 0);
  EXPECT_EQ(ShapeToString({1, 3, 224, 224}), "[1,3,224,224]");
  EXPECT_EQ(ShapeToString({}), "[]");
}

}  // namespace
}  // namespace reprise::runtime
