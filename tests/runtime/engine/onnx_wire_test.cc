#include "runtime/engine/onnx_wire.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

std::string RawFloats(size_t n, uint32_t seed) {
  const std::vector<float> values = testing::RandomFloats(n, seed);
  return std::string(reinterpret_cast<const char*>(values.data()), n * sizeof(float));
}

onnx::TensorProto* AddRawInit(onnx::GraphProto* graph, const std::string& name,
                              const std::string& raw) {
  onnx::TensorProto* init = graph->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(static_cast<int64_t>(raw.size() / sizeof(float)));
  init->set_raw_data(raw);
  return init;
}

void AppendVarint(uint64_t v, std::string* out) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  out->push_back(static_cast<char>(v));
}

// A length-delimited field on the wire.
std::string Field(int number, const std::string& payload) {
  std::string out;
  AppendVarint((static_cast<uint64_t>(number) << 3) | 2, &out);
  AppendVarint(payload.size(), &out);
  return out + payload;
}

// A model with big and small initializers interleaved, and a node and graph inputs around them.
onnx::ModelProto MixedModel(int big_count, size_t big_floats) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("g");
  for (int i = 0; i < big_count; ++i) {
    AddRawInit(graph, "big" + std::to_string(i), RawFloats(big_floats, i));
    AddRawInit(graph, "small" + std::to_string(i), RawFloats(3, 100 + i));
  }
  graph->add_node()->set_op_type("Relu");
  graph->add_input()->set_name("x");
  return model;
}

// Checks `lifted` against `bytes`: every lifted range holds the original payload, and the
// stripped bytes parse to the original model with those payloads replaced by the placeholder.
void ExpectFaithful(const std::string& bytes, const LiftedModel& lifted, size_t min_bytes) {
  onnx::ModelProto original, stripped;
  ASSERT_TRUE(original.ParseFromString(bytes));
  ASSERT_TRUE(stripped.ParseFromString(lifted.stripped));
  ASSERT_EQ(lifted.raw_data.size(), static_cast<size_t>(original.graph().initializer_size()));
  for (int i = 0; i < original.graph().initializer_size(); ++i) {
    onnx::TensorProto* init = original.mutable_graph()->mutable_initializer(i);
    const auto& range = lifted.raw_data[i];
    if (init->raw_data().size() >= min_bytes) {
      ASSERT_TRUE(range.has_value()) << init->name();
      EXPECT_EQ(bytes.substr(range->offset, range->size), init->raw_data()) << init->name();
      init->set_raw_data(std::string(16, '\0'));
    } else {
      EXPECT_FALSE(range.has_value()) << init->name();
    }
  }
  EXPECT_EQ(stripped.SerializeAsString(), original.SerializeAsString());
  EXPECT_LT(lifted.stripped.size(), bytes.size());
}

TEST(OnnxWireTest, LiftsLargePayloadsAndKeepsTheRest) {
  const std::string bytes = MixedModel(3, 20000).SerializeAsString();
  auto lifted = LiftInitializerData(bytes);
  ASSERT_TRUE(lifted.has_value());
  ExpectFaithful(bytes, *lifted, kMinLiftedBytes);
  EXPECT_TRUE(lifted->raw_data[0].has_value());
  EXPECT_FALSE(lifted->raw_data[1].has_value());
}

TEST(OnnxWireTest, NothingToLiftIsNullopt) {
  EXPECT_FALSE(LiftInitializerData(MixedModel(2, 100).SerializeAsString()).has_value());
  EXPECT_FALSE(LiftInitializerData("").has_value());
  // A smaller threshold lifts them.
  const std::string bytes = MixedModel(2, 100).SerializeAsString();
  auto lifted = LiftInitializerData(bytes, 400);
  ASSERT_TRUE(lifted.has_value());
  ExpectFaithful(bytes, *lifted, 400);
}

TEST(OnnxWireTest, MalformedBytesAreNullopt) {
  const std::string bytes = MixedModel(2, 20000).SerializeAsString();
  // Truncated inside a payload, inside a header, and after one byte.
  for (size_t size : {bytes.size() - 1, bytes.size() / 2, size_t{1}}) {
    EXPECT_FALSE(LiftInitializerData(bytes.substr(0, size)).has_value()) << size;
  }
  EXPECT_FALSE(LiftInitializerData("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").has_value());
  // A group (wire type 3), which onnx.proto never uses.
  EXPECT_FALSE(LiftInitializerData(std::string("\x0b", 1) + bytes).has_value());
  // A tensor whose length runs past the end of its graph (but not of the bytes).
  const std::string tensor = Field(9, RawFloats(20000, 1));
  std::string graph;
  AppendVarint((5 << 3) | 2, &graph);
  AppendVarint(tensor.size() + 5, &graph);
  graph += tensor;
  EXPECT_FALSE(LiftInitializerData(Field(7, graph) + std::string(10, '\0')).has_value());
}

TEST(OnnxWireTest, FollowsProtobufMergeRules) {
  // Two graph fields (the parser merges them: initializers concatenate), and tensors whose
  // raw_data occurs twice (the last one wins).
  const std::string big_a = RawFloats(20000, 1), big_b = RawFloats(20000, 2);
  const std::string small = RawFloats(4, 3);
  const std::string first_graph =
      Field(5, Field(8, "t0") + Field(9, big_a) + Field(9, small)) +  // small wins: not lifted
      Field(5, Field(8, "t1") + Field(9, small) + Field(9, big_b));   // big wins: lifted
  const std::string second_graph = Field(5, Field(8, "t2") + Field(9, big_a));
  const std::string bytes = Field(7, first_graph) + Field(2, "producer") + Field(7, second_graph);

  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.graph().initializer_size(), 3);
  EXPECT_EQ(parsed.graph().initializer(0).raw_data(), small);
  EXPECT_EQ(parsed.graph().initializer(1).raw_data(), big_b);

  auto lifted = LiftInitializerData(bytes);
  ASSERT_TRUE(lifted.has_value());
  ASSERT_EQ(lifted->raw_data.size(), 3u);
  EXPECT_FALSE(lifted->raw_data[0].has_value());
  ASSERT_TRUE(lifted->raw_data[1].has_value());
  EXPECT_EQ(bytes.substr(lifted->raw_data[1]->offset, lifted->raw_data[1]->size), big_b);
  ASSERT_TRUE(lifted->raw_data[2].has_value());
  EXPECT_EQ(bytes.substr(lifted->raw_data[2]->offset, lifted->raw_data[2]->size), big_a);

  onnx::ModelProto stripped;
  ASSERT_TRUE(stripped.ParseFromString(lifted->stripped));
  EXPECT_EQ(stripped.producer_name(), "producer");
  ASSERT_EQ(stripped.graph().initializer_size(), 3);
  EXPECT_EQ(stripped.graph().initializer(0).raw_data(), small);
  EXPECT_EQ(stripped.graph().initializer(1).raw_data().size(), 16u);
  EXPECT_EQ(stripped.graph().initializer(2).name(), "t2");
}

class TempFile {
 public:
  explicit TempFile(const std::string& bytes)
      : path_(::testing::TempDir() + "/onnx_wire_test_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".onnx") {
    std::ofstream(path_, std::ios::binary) << bytes;
    fd_ = ::open(path_.c_str(), O_RDONLY);
  }
  ~TempFile() {
    ::close(fd_);
    std::remove(path_.c_str());
  }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(OnnxWireTest, FileScanMatchesTheMemoryScan) {
  // Larger than the file reader's buffer, with payloads that straddle its refills.
  const std::string bytes = MixedModel(12, 30000).SerializeAsString();
  ASSERT_GT(bytes.size(), 1u << 20);
  TempFile file(bytes);
  ASSERT_GE(file.fd(), 0);
  auto from_file = LiftInitializerDataFromFile(file.fd(), bytes.size());
  auto from_memory = LiftInitializerData(bytes);
  ASSERT_TRUE(from_file.has_value());
  ASSERT_TRUE(from_memory.has_value());
  EXPECT_EQ(from_file->stripped, from_memory->stripped);
  ASSERT_EQ(from_file->raw_data.size(), from_memory->raw_data.size());
  for (size_t i = 0; i < from_file->raw_data.size(); ++i) {
    ASSERT_EQ(from_file->raw_data[i].has_value(), from_memory->raw_data[i].has_value()) << i;
    if (!from_file->raw_data[i]) continue;
    EXPECT_EQ(from_file->raw_data[i]->offset, from_memory->raw_data[i]->offset) << i;
    EXPECT_EQ(from_file->raw_data[i]->size, from_memory->raw_data[i]->size) << i;
  }
  ExpectFaithful(bytes, *from_file, kMinLiftedBytes);
  // A file shorter than the size it is said to have (it shrank) is not lifted.
  EXPECT_FALSE(LiftInitializerDataFromFile(file.fd(), bytes.size() + 100).has_value());
}

}  // namespace
}  // namespace reprise::runtime::engine
