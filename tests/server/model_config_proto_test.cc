#include "server/model_config_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;

config::ModelSettings Settings(int max_batch_size) {
  config::ModelSettings s;
  s.name.assign(1, 'm');
  s.max_batch_size = max_batch_size;
  return s;
}

// ToModelConfigProto casts config::TensorType to inference::DataType: the numbers must agree.
TEST(ModelConfigProtoTest, TensorTypeNumbersAreProtoNumbers) {
  for (int i = 0; i <= 14; ++i) {
    const auto type = static_cast<config::TensorType>(i);
    EXPECT_EQ(inference::DataType_Name(static_cast<inference::DataType>(i)),
              config::TensorTypeName(type))
        << i;
  }
}

TEST(ModelConfigProtoTest, DeclaredTensorsAndPolicy) {
  config::ModelSettings s = Settings(0);
  config::TensorSettings x;
  x.name = "x";
  x.data_type = config::TensorType::kString;
  x.dims = {-1};
  s.inputs = {x};
  s.version_policy.kind = config::VersionPolicy::Kind::kSpecific;
  s.version_policy.versions = {2, 5};
  ModelSignature sig;  // ignored: the file declares the tensors
  sig.inputs = {{"other", runtime::DataType::kFloat32, {1}}};
  inference::ModelConfig c = ToModelConfigProto(s, sig);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "x");
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_STRING);
  EXPECT_THAT(c.version_policy().specific().versions(), ElementsAre(2, 5));
  EXPECT_FALSE(c.has_dynamic_batching());
  EXPECT_EQ(c.instance_group_size(), 0);
}

TEST(ModelConfigProtoTest, TensorsFromSignatureWithoutBatchDim) {
  const config::ModelSettings s = Settings(4);
  ModelSignature sig;
  sig.inputs = {{"x", runtime::DataType::kFloat16, {-1, 3, 8}}};
  sig.outputs = {{"y", runtime::DataType::kInt64, {-1}}};
  inference::ModelConfig c = ToModelConfigProto(s, sig);
  EXPECT_TRUE(c.version_policy().has_latest());
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1u);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP16);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(3, 8));
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).data_type(), inference::TYPE_INT64);
  EXPECT_TRUE(c.output(0).dims().empty());
}

}  // namespace
}  // namespace reprise::server
