// Model files and .npy files are outside data: declared sizes are checked against the bytes
// present, external data stays inside the model's directory, and a broken model fails its own
// load with a status (never an exception, an abort or a huge allocation).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/model.h"
#include "runtime/engine/npy.h"
#include "runtime/engine/onnx_import.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;

class HostileModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok());
    // A fresh directory per test: the model's version directory, with a sibling outside it.
    root_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("hostile_model_", ::getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    dir_ = root_ / "model" / "1";
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // y = x + w, where w (4 floats) is stored as external data at `location`.
  static ModelBuilder ExternalModel(const std::string& location, const std::string& offset = "",
                                    const std::string& length = "") {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4});
    auto* w = b.proto().mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [w](const std::string& key, const std::string& value) {
      auto* entry = w->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", location);
    if (!offset.empty()) add("offset", offset);
    if (!length.empty()) add("length", length);
    b.Node("Add", {"x", "w"}, {"y"});
    return b;
  }

  // Writes `b` as dir_/model.onnx and loads it.
  absl::StatusOr<std::shared_ptr<const Model>> LoadFromDir(const ModelBuilder& b) {
    const std::string path = (dir_ / "model.onnx").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b.Bytes();
    return Model::LoadFile(path, registry_);
  }

  static void WriteFloats(const std::filesystem::path& path, const std::vector<float>& values) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(float)));
  }

  KernelRegistry registry_;
  std::filesystem::path root_;
  std::filesystem::path dir_;
};

// --- declared dims against the bytes present ------------------------------------------------

TEST_F(HostileModelTest, InitializerWithOverflowingDimsAndNoDataIsRefused) {
  // [2^62, 4] floats: 2^64 elements, the count wraps to 0 and 0 stored values "matched" it.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4});
  auto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 62);
  w->add_dims(4);
  b.Node("Add", {"x", "w"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("tensor \"w\""));
  EXPECT_THAT(model.status().message(), HasSubstr("[4611686018427387904,4]"));
  EXPECT_THAT(model.status().message(), HasSubstr("too large"));
}

TEST_F(HostileModelTest, InitializerDeclaringMoreThanItsRawDataIsRefused) {
  // 2^40 x 4 floats declared (16 TiB), 16 bytes present: refused without allocating.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4});
  auto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 40);
  w->add_dims(4);
  w->set_raw_data(std::string(16, '\0'));
  b.Node("Add", {"x", "w"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("raw_data has 16 bytes"));
  EXPECT_THAT(model.status().message(), HasSubstr("needs 17592186044416"));
}

TEST_F(HostileModelTest, InitializerDeclaringMoreThanItsTypedValuesIsRefused) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::INT64, {-1, 4}).Output("y", {-1, 4}, onnx::TensorProto::INT64);
  b.Int64Init("w", {int64_t{1} << 50, 4}, {1, 2, 3});
  b.Node("Add", {"x", "w"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("3 elements stored"));
  EXPECT_THAT(model.status().message(), HasSubstr("needs 4503599627370496"));
}

// BOOL elements other than 0 and 1 (kernels read the bytes as C++ bool): in raw_data, in
// int32_data (256 would narrow to a false byte), and a well-formed pair that loads and runs.
TEST_F(HostileModelTest, BoolInitializerBytesOtherThanZeroOrOneAreRefused) {
  struct Case {
    std::string raw;
    std::vector<int32_t> typed;
    const char* error;  // nullptr: loads
  };
  const Case cases[] = {{std::string("\x01\x02", 2), {}, "BOOL element 1 is 2"},
                        {"", {1, 256}, "BOOL element 1 is 256"},
                        {"", {-1, 0}, "BOOL element 0 is -1"},
                        {std::string("\x01\x00", 2), {}, nullptr},
                        {"", {1, 0}, nullptr}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error == nullptr ? "valid" : c.error);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
    auto* w = b.proto().mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::BOOL);
    w->add_dims(2);
    if (c.typed.empty()) {
      w->set_raw_data(c.raw);
    } else {
      for (int32_t v : c.typed) w->add_int32_data(v);
    }
    auto& cast = b.Node("Cast", {"w"}, {"wf"});
    testing::SetIntAttr(&cast, "to", onnx::TensorProto::FLOAT);
    b.Node("Add", {"x", "wf"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    if (c.error != nullptr) {
      ASSERT_FALSE(model.ok());
      EXPECT_THAT(model.status().message(), HasSubstr(c.error));
      EXPECT_THAT(model.status().message(), HasSubstr("tensor \"w\""));
      continue;
    }
    ASSERT_TRUE(model.ok()) << model.status();
    auto out = testing::RunPlan(**model, {{"x", testing::FloatTensor({2}, {0.5f, 0.5f})}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(testing::Floats((*out)[0].value), (std::vector<float>{1.5f, 0.5f}));
  }
}

TEST_F(HostileModelTest, ZeroDimDoesNotHideAnOverflowingDim) {
  // [0, 2^62, 4]: no element, but the other dims overflow together; refused like [2^62, 4]
  // (an initializer no node reads is converted too).
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4});
  auto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t{0}, int64_t{1} << 62, int64_t{4}}) w->add_dims(d);
  b.Node("Add", {"x", "x"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("too large"));
}

// Weights of no elements may declare any other dim: a Conv's [2^40, 2, 0, 1] (2^40 output
// channels) or a ConvTranspose's [2, 2^40, 0, 1], each scaled by a Mul, must not make the
// BatchNormalization fold build a factor per output channel (4 TiB). The model loads; planning
// it is refused as any output of 2^40 channels is.
TEST_F(HostileModelTest, ChannelFoldIgnoresWeightsOfNoElements) {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    SCOPED_TRACE(op);
    const bool transposed = std::string(op) == "ConvTranspose";
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 3, 3}).Output("y", {1, -1, -1, -1});
    auto* w = b.proto().mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    const int64_t huge = int64_t{1} << 40;
    for (int64_t d :
         {transposed ? int64_t{2} : huge, transposed ? huge : int64_t{2}, int64_t{0}, int64_t{1}}) {
      w->add_dims(d);
    }
    b.FloatInit("s", {}, {2.0f});
    b.Node(op, {"x", "w"}, {"c"});
    b.Node("Mul", {"c", "s"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_FALSE(testing::RunPlan(**model, {{"x", testing::FloatTensor(
                                                      {1, 2, 3, 3}, std::vector<float>(18, 1.0f))}})
                     .ok());
  }
}

// --- external data --------------------------------------------------------------------------

TEST_F(HostileModelTest, ExternalDataInsideTheDirectoryLoads) {
  std::filesystem::create_directories(dir_ / "weights");
  WriteFloats(dir_ / "weights" / "w.bin", {9, 9, 1, 2, 3, 4});
  auto model = LoadFromDir(ExternalModel("weights/w.bin", "8", "16"));
  ASSERT_TRUE(model.ok()) << model.status();
  const Graph& graph = (*model)->graph();
  const TensorValue* w = graph.FindConstant(graph.FindValue("w"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(testing::Floats(*w), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(HostileModelTest, ExternalDataAbsolutePathIsRefused) {
  WriteFloats(root_ / "outside.bin", {1, 2, 3, 4});
  auto model = LoadFromDir(ExternalModel((root_ / "outside.bin").string()));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("it is absolute"));
}

TEST_F(HostileModelTest, ExternalDataDotDotComponentIsRefused) {
  WriteFloats(root_ / "outside.bin", {1, 2, 3, 4});
  for (const std::string location :
       {"../../outside.bin", "weights/../../../outside.bin", "..", "a/.."}) {
    auto model = LoadFromDir(ExternalModel(location));
    ASSERT_FALSE(model.ok()) << location;
    EXPECT_THAT(model.status().message(), HasSubstr("has a \"..\" component")) << location;
  }
  // ".." inside a name is no component: the file is looked up (and missing here).
  auto model = LoadFromDir(ExternalModel("w..bin"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("is missing"));
}

TEST_F(HostileModelTest, ExternalDataWithANulByteIsRefused) {
  WriteFloats(dir_ / "w.bin", {1, 2, 3, 4});
  auto model = LoadFromDir(ExternalModel(std::string("w.bin\0/../../x", 14)));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("NUL byte"));
}

TEST_F(HostileModelTest, ExternalDataSymlinkOutOfTheDirectoryIsRefused) {
  WriteFloats(root_ / "outside.bin", {1, 2, 3, 4});
  std::filesystem::create_symlink(root_ / "outside.bin", dir_ / "w.bin");
  auto model = LoadFromDir(ExternalModel("w.bin"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("outside the model's directory"));
  // A symlinked directory on the way out is refused the same way.
  std::filesystem::create_directory_symlink(root_, dir_ / "up");
  model = LoadFromDir(ExternalModel("up/outside.bin"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("outside the model's directory"));
}

TEST_F(HostileModelTest, ExternalDataSymlinkWithinTheDirectoryLoads) {
  WriteFloats(dir_ / "real.bin", {1, 2, 3, 4});
  std::filesystem::create_symlink("real.bin", dir_ / "w.bin");
  auto model = LoadFromDir(ExternalModel("w.bin"));
  ASSERT_TRUE(model.ok()) << model.status();
}

TEST_F(HostileModelTest, ExternalDataFifoAndDirectoryAreRefusedWithoutBlocking) {
  // Opening a FIFO for reading blocks until a writer comes: the check must come first.
  ASSERT_EQ(::mkfifo((dir_ / "w.fifo").c_str(), 0600), 0);
  auto model = LoadFromDir(ExternalModel("w.fifo"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("is not a regular file"));
  std::filesystem::create_directories(dir_ / "sub");
  model = LoadFromDir(ExternalModel("sub"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("is not a regular file"));
  model = LoadFromDir(ExternalModel("/dev/zero"));
  ASSERT_FALSE(model.ok());
}

TEST_F(HostileModelTest, ExternalDataRangePastTheFileIsRefused) {
  WriteFloats(dir_ / "w.bin", {1, 2, 3, 4});
  auto model = LoadFromDir(ExternalModel("w.bin", "4", "16"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("has 16 bytes, offset 4 + length 16"));
  // offset + length overflows int64.
  model = LoadFromDir(ExternalModel("w.bin", "9223372036854775807", "16"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("lies past its end"));
  model = LoadFromDir(ExternalModel("w.bin", "-1"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("bad external data offset"));
  model = LoadFromDir(ExternalModel("w.bin", "0", "8"));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("external data length 8, expected 16"));
}

TEST_F(HostileModelTest, ExternalDataDeclaringHugeDimsIsRefusedBeforeReading) {
  WriteFloats(dir_ / "w.bin", {1, 2, 3, 4});
  ModelBuilder b = ExternalModel("w.bin");
  auto* w = b.proto().mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  w->add_dims(int64_t{1} << 40);
  w->add_dims(4);
  auto model = LoadFromDir(b);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("lies past its end"));
  w->clear_dims();
  w->add_dims(int64_t{1} << 62);
  w->add_dims(4);
  model = LoadFromDir(b);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("too large"));
}

// --- the load boundary ----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareOutOfMemory(const PrepareContext&) {
  throw std::bad_alloc();
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareThrows(const PrepareContext&) {
  throw std::runtime_error("kernel library bug");
}

// c = Op(k) with k a constant: folding prepares Op's kernel at load.
Graph OneConstantNode(const std::string& op) {
  Graph graph;
  Value k;
  k.name = "k";
  k.dtype = DataType::kFloat32;
  const int kid = graph.AddValue(k);
  graph.constants[kid] = std::make_unique<TensorValue>(testing::FloatTensor({2}, {1, 2}));
  Value c;
  c.name = "c";
  const int cid = graph.AddValue(c);
  Node node;
  node.op = op;
  node.name = "n";
  node.inputs = {kid};
  node.outputs = {cid};
  graph.nodes.push_back(std::move(node));
  graph.outputs.push_back(GraphOutput{"c", cid});
  return graph;
}

TEST_F(HostileModelTest, AllocationFailureWhileLoadingIsResourceExhausted) {
  ASSERT_TRUE(registry_.Register("OutOfMemory", &PrepareOutOfMemory).ok());
  auto model = Model::FromGraph(OneConstantNode("OutOfMemory"), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kResourceExhausted) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("out of memory while loading"));
}

TEST_F(HostileModelTest, ExceptionWhileLoadingIsInternal) {
  ASSERT_TRUE(registry_.Register("Throws", &PrepareThrows).ok());
  auto model = Model::FromGraph(OneConstantNode("Throws"), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInternal) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("kernel library bug"));
}

// y = x + ConstantOfShape([n]): folding computes n floats at load.
ModelBuilder ConstantOfShapeModel(int64_t n) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {n}).Output("y", {n});
  b.Int64Init("shape", {1}, {n});
  b.Node("ConstantOfShape", {"shape"}, {"c"});
  b.Node("Add", {"x", "c"}, {"y"});
  return b;
}

TEST_F(HostileModelTest, FoldingIsBoundedByMaxFoldedBytes) {
  ModelOptions options;
  options.max_folded_bytes = 1024;
  // 256 floats fit: folded.
  auto small = Model::LoadBytes(ConstantOfShapeModel(256).Bytes(), registry_, options);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(testing::CountOps((*small)->graph(), "ConstantOfShape"), 0);
  // 2^28 floats (1 GiB) do not: the node is kept for the plan, nothing is allocated at load.
  auto large = Model::LoadBytes(ConstantOfShapeModel(int64_t{1} << 28).Bytes(), registry_, options);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(testing::CountOps((*large)->graph(), "ConstantOfShape"), 1);
}

// A Conv whose weights have fewer spatial axes than the input computed for it (its rank known
// only during shape inference) made libonnx's convPoolShapeInference read past the kernel
// shape (found by fuzz_onnx_model): refused with an error, and the same graph with weights of
// the input's rank loads.
TEST_F(HostileModelTest, ConvWeightsOfAnotherSpatialRankThanTheirInputAreRefused) {
  for (const bool matching : {false, true}) {
    SCOPED_TRACE(matching ? "weights [3,2,1,1]" : "weights [3,2,1]");
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 8, 8}).Output("y", {1, 3, 8, 8});
    const std::vector<int64_t> dims =
        matching ? std::vector<int64_t>{3, 2, 1, 1} : std::vector<int64_t>{3, 2, 1};
    b.FloatInit("w", dims, std::vector<float>(6, 1.0f));
    b.Node("Relu", {"x"}, {"r"});
    b.Node("Conv", {"r", "w"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    if (matching) {
      EXPECT_TRUE(model.ok()) << model.status();
    } else {
      ASSERT_FALSE(model.ok());
      EXPECT_THAT(std::string(model.status().message()), HasSubstr("spatial rank"));
    }
  }
}

// --- .npy -----------------------------------------------------------------------------------

std::string NpyWithHeader(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

TEST(HostileNpyTest, OverflowingShapeIsRefused) {
  auto t = ParseNpy(NpyWithHeader(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", ""));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("too large"));
  t = ParseNpy(NpyWithHeader(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }", ""));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("too large"));
}

TEST(HostileNpyTest, ShapeLargerThanTheDataIsRefused) {
  auto t = ParseNpy(NpyWithHeader(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", "abcd"));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("npy data has 4 bytes"));
  EXPECT_THAT(t.status().message(), HasSubstr("needs 4398046511104"));
}

TEST(HostileNpyTest, BoolBytesOtherThanZeroOrOneAreRefused) {
  auto t = ParseNpy(NpyWithHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                  std::string("\x01\x00\x07", 3)));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("bool element 2 is 7"));
  t = ParseNpy(NpyWithHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                             std::string("\x01\x00\x01", 3)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(std::vector<uint8_t>(t->bytes.begin(), t->bytes.end()),
            (std::vector<uint8_t>{1, 0, 1}));
}

TEST(HostileNpyTest, HeaderLengthPastTheFileIsRefused) {
  std::string bytes("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
  auto t = ParseNpy(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("truncated npy header"));
  bytes = std::string("\x93NUMPY\x01\x00\xff\xff{}", 12);
  t = ParseNpy(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("truncated npy header"));
}

}  // namespace
}  // namespace reprise::runtime::engine
