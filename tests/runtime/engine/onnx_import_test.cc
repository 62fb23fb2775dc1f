#include "runtime/engine/onnx_import.h"

#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok()); }
  KernelRegistry registry_;
};

ModelBuilder AddModel() {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 3}).Output("y", {-1, 3});
  b.FloatInit("w", {3}, {1, 2, 3});
  b.Node("Add", {"x", "w"}, {"y"});
  return b;
}

TEST_F(OnnxImportTest, ImportsValuesNodesAndDeclaredShapes) {
  auto graph = ImportOnnxBytes(AddModel().Bytes(), registry_);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->inputs.size(), 1u);
  const Value& x = graph->values[graph->inputs[0]];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DataType::kFloat32);
  EXPECT_EQ(DimsToString(x.dims), "[N,3]");
  ASSERT_EQ(graph->nodes.size(), 1u);
  EXPECT_EQ(graph->nodes[0].op, "Add");
  const TensorValue* w = graph->FindConstant(graph->FindValue("w"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(testing::Floats(*w), (std::vector<float>{1, 2, 3}));
  ASSERT_EQ(graph->outputs.size(), 1u);
  EXPECT_EQ(graph->outputs[0].name, "y");
  // Shape inference filled in the output's type and shape.
  const Value& y = graph->values[graph->outputs[0].value];
  EXPECT_EQ(y.dtype, DataType::kFloat32);
  EXPECT_EQ(DimsToString(y.dims), "[N,3]");
}

TEST_F(OnnxImportTest, RejectsBytesThatAreNotOnnx) {
  auto graph = ImportOnnxBytes("this is certainly not a protobuf \xff\xff\xff", registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(graph.status().message(), HasSubstr("onnx model"));
  EXPECT_FALSE(ImportOnnxBytes("", registry_).ok());
}

TEST_F(OnnxImportTest, RejectsTruncatedFiles) {
  const std::string bytes = AddModel().Bytes();
  for (size_t len : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 3}) {
    auto graph = ImportOnnxBytes(bytes.substr(0, len), registry_);
    EXPECT_FALSE(graph.ok()) << "length " << len;
  }
}

TEST_F(OnnxImportTest, CorruptedBytesNeverCrash) {
  // Flip bytes all over a valid model: every import returns (ok or an error), none crashes.
  const std::string bytes = AddModel().Bytes();
  std::mt19937 rng(99);
  int errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string corrupt = bytes;
    for (int k = 0; k < 3; ++k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng());
    auto graph = ImportOnnxBytes(corrupt, registry_);
    if (!graph.ok()) ++errors;
  }
  EXPECT_GT(errors, 0);
}

TEST_F(OnnxImportTest, ReportsCheckerFailures) {
  ModelBuilder b = AddModel();
  b.proto().set_ir_version(0);  // the checker requires an IR version
  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("checker"));

  ModelBuilder wrong_arity = AddModel();
  wrong_arity.Node("Add", {"x"}, {"z"});  // Add needs two inputs
  graph = ImportOnnxBytes(wrong_arity.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("checker"));
}

TEST_F(OnnxImportTest, ListsEveryUnsupportedOp) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3}).Output("z", {1, 3});
  b.Node("Scan", {"x"}, {"a"});  // ops the CPU kernels lack
  b.Node("StringNormalizer", {"a"}, {"b"});
  b.Node("Scan", {"b"}, {"c"});
  b.Node("Add", {"c", "c"}, {"z"});
  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(graph.status().message(), HasSubstr("2 unsupported op(s): Scan, StringNormalizer"));
  auto ops = UnsupportedOps(b.Bytes(), registry_);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(*ops, (std::vector<std::string>{"Scan", "StringNormalizer"}));
}

TEST_F(OnnxImportTest, RejectsOpsetsOutsideTheSupportedRange) {
  ModelBuilder b(18);
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  b.Node("Add", {"x", "x"}, {"y"});
  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("opset 18"));
}

// Opsets 7 to 17 load; below 7 only the ops whose form has not changed since opset 1 (Add's
// legacy broadcasting, for one, is refused rather than read as numpy broadcasting).
TEST_F(OnnxImportTest, LegacyOpsetsTakeOnlyTheOpsWhoseFormIsUnchanged) {
  for (int opset : {7, 9, 10}) {
    ModelBuilder b(opset);
    b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
    b.Node("Add", {"x", "x"}, {"y"});
    EXPECT_TRUE(ImportOnnxBytes(b.Bytes(), registry_).ok()) << opset;
  }
  ModelBuilder add(6);
  add.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  add.Node("Add", {"x", "x"}, {"y"});
  auto graph = ImportOnnxBytes(add.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(graph.status().message(), HasSubstr("Add (its opset 6 form)"));
  ModelBuilder relu(6);
  relu.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  relu.Node("Relu", {"x"}, {"y"});
  EXPECT_TRUE(ImportOnnxBytes(relu.Bytes(), registry_).ok());
}

TEST_F(OnnxImportTest, MissingExternalDataIsAnError) {
  ModelBuilder b = AddModel();
  auto* w = b.proto().mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  // From bytes: no directory to look in.
  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("weights.bin"));

  // From a file whose weights file does not exist.
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/external_model.onnx";
  std::ofstream(path, std::ios::binary) << b.Bytes();
  std::remove((dir + "/weights.bin").c_str());
  graph = ImportOnnxFile(path, registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("weights.bin"));
  EXPECT_THAT(graph.status().message(), HasSubstr("missing"));

  // Present: the data is read from it.
  const float values[3] = {4, 5, 6};
  std::ofstream(dir + "/weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(values), sizeof values);
  graph = ImportOnnxFile(path, registry_);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(testing::Floats(*graph->FindConstant(graph->FindValue("w"))),
            (std::vector<float>{4, 5, 6}));
}

// y = x · w + b with a weight large enough for the import to lift it out of the parse
// (model > 1 MiB, payload > 64 KiB); b stays small.
ModelBuilder LargeWeightModel(std::vector<float>* w_values) {
  constexpr int64_t kIn = 512, kOut = 640;
  *w_values = testing::RandomFloats(kIn * kOut, 7);
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, kIn}).Output("y", {1, kOut});
  auto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(kIn);
  w->add_dims(kOut);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(w_values->data()),
                              w_values->size() * sizeof(float)));
  b.FloatInit("b", {kOut}, std::vector<float>(kOut, 0.5f));
  b.Node("MatMul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"y"});
  return b;
}

TEST_F(OnnxImportTest, LargeInitializersAreCopiedOutOfBytesAndFiles) {
  std::vector<float> w_values;
  ModelBuilder b = LargeWeightModel(&w_values);
  auto bytes = std::make_unique<std::string>(b.Bytes());
  ASSERT_GT(bytes->size(), 1u << 20);
  auto from_bytes = ImportOnnxBytes(*bytes, registry_);
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status();
  const std::string path = ::testing::TempDir() + "/large_weight_model.onnx";
  std::ofstream(path, std::ios::binary) << *bytes;
  auto from_file = ImportOnnxFile(path, registry_);
  std::remove(path.c_str());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  // The graphs own their weights: the serialised model is gone (and its memory overwritten).
  std::fill(bytes->begin(), bytes->end(), '\xff');
  bytes.reset();
  for (const Graph* graph : {&*from_bytes, &*from_file}) {
    const TensorValue* w = graph->FindConstant(graph->FindValue("w"));
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (Shape{512, 640}));
    EXPECT_EQ(testing::Floats(*w), w_values);
    const TensorValue* bias = graph->FindConstant(graph->FindValue("b"));
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(testing::Floats(*bias), std::vector<float>(640, 0.5f));
    // Shape inference ran on the stripped model and still typed the outputs.
    const Value& y = graph->values[graph->outputs[0].value];
    EXPECT_EQ(DimsToString(y.dims), "[1,640]");
    const Value& xw = graph->values[graph->FindValue("xw")];
    EXPECT_EQ(DimsToString(xw.dims), "[1,640]");
  }
}

TEST_F(OnnxImportTest, ReadsModelsFromPipes) {
  // A FIFO has no size: the file is read whole, in growing chunks, and lifted in memory.
  std::vector<float> w_values;
  const std::string bytes = LargeWeightModel(&w_values).Bytes();
  const std::string path = ::testing::TempDir() + "/model_fifo.onnx";
  std::remove(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // Should the import stop reading early, the writer fails instead of killing the test.
  std::signal(SIGPIPE, SIG_IGN);
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << bytes; });
  auto graph = ImportOnnxFile(path, registry_);
  writer.join();
  std::remove(path.c_str());
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(testing::Floats(*graph->FindConstant(graph->FindValue("w"))), w_values);
}

TEST_F(OnnxImportTest, LargeInitializerOfTheWrongSizeIsAnError) {
  std::vector<float> w_values;
  ModelBuilder b = LargeWeightModel(&w_values);
  b.proto().mutable_graph()->mutable_initializer(0)->set_dims(1, 641);
  const std::string bytes = b.Bytes();
  const std::string path = ::testing::TempDir() + "/large_weight_bad_size.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  auto from_file = ImportOnnxFile(path, registry_);
  std::remove(path.c_str());
  auto from_bytes = ImportOnnxBytes(bytes, registry_);
  for (const absl::StatusOr<Graph>* graph : {&from_bytes, &from_file}) {
    ASSERT_FALSE(graph->ok());
    EXPECT_EQ(graph->status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(graph->status().message(),
                HasSubstr("tensor \"w\": raw_data has 1310720 bytes, shape [512,641]"));
  }
}

TEST_F(OnnxImportTest, LargeModelsStillReportUnsupportedOps) {
  std::vector<float> w_values;
  ModelBuilder b = LargeWeightModel(&w_values);
  b.proto().mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  auto ops = UnsupportedOps(b.Bytes(), registry_);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(*ops, (std::vector<std::string>{"NoSuchOp"}));
}

TEST_F(OnnxImportTest, MissingFileIsNotFound) {
  auto graph = ImportOnnxFile("/nonexistent/model.onnx", registry_);
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(OnnxImportTest, ConvertsAttributesAndConstantNodes) {
  testing::RegisterFakeShapeKernels(&registry_);
  if (!registry_.Has("ConstantOfShape")) {
    ASSERT_TRUE(registry_.Register("ConstantOfShape", registry_.Find("Shape")).ok());
  }
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::INT64, {2}).Output("y", {4}, onnx::TensorProto::INT64);
  b.Output("filled", {-1, -1}, onnx::TensorProto::INT8);
  auto& constant = b.Node("Constant", {}, {"c"});
  auto* value = constant.add_attribute();
  value->set_name("value_ints");
  value->set_type(onnx::AttributeProto::INTS);
  value->add_ints(5);
  value->add_ints(-6);
  auto& concat = b.Node("Concat", {"x", "c"}, {"y"});
  testing::SetIntAttr(&concat, "axis", 0);
  auto& fill = b.Node("ConstantOfShape", {"x"}, {"filled"});
  auto* tensor = fill.add_attribute();
  tensor->set_name("value");
  tensor->set_type(onnx::AttributeProto::TENSOR);
  tensor->mutable_t()->set_data_type(onnx::TensorProto::INT8);
  tensor->mutable_t()->add_dims(1);
  tensor->mutable_t()->add_int32_data(-3);

  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->nodes.size(), 2u);  // the Constant became a constant
  const TensorValue* c = graph->FindConstant(graph->FindValue("c"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, DataType::kInt64);
  EXPECT_EQ(c->shape, (Shape{2}));
  EXPECT_EQ(testing::Int64s(*c), (std::vector<int64_t>{5, -6}));
  EXPECT_EQ(*graph->nodes[0].attributes.GetInt("axis", -1), 0);
  auto filled = graph->nodes[1].attributes.GetTensor("value");
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ((*filled)->dtype, DataType::kInt8);
  ASSERT_EQ((*filled)->bytes.size(), 1u);
  EXPECT_EQ(static_cast<int8_t>((*filled)->bytes[0]), -3);
}

TEST_F(OnnxImportTest, ConvertsTypedTensorFields) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1}).Output("y", {1});
  b.Node("Add", {"x", "x"}, {"y"});
  auto* g = b.proto().mutable_graph();
  auto* i16 = g->add_initializer();
  i16->set_name("i16");
  i16->set_data_type(onnx::TensorProto::INT16);
  i16->add_dims(2);
  i16->add_int32_data(-2);
  i16->add_int32_data(300);
  auto* u64 = g->add_initializer();
  u64->set_name("u64");
  u64->set_data_type(onnx::TensorProto::UINT64);
  u64->add_uint64_data(1ull << 40);
  auto* f64 = g->add_initializer();
  f64->set_name("f64");
  f64->set_data_type(onnx::TensorProto::DOUBLE);
  f64->add_double_data(2.5);
  auto* raw = g->add_initializer();
  raw->set_name("raw");
  raw->set_data_type(onnx::TensorProto::INT32);
  raw->add_dims(1);
  const int32_t v = 0x01020304;
  raw->set_raw_data(std::string(reinterpret_cast<const char*>(&v), sizeof v));

  auto graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const TensorValue* t = graph->FindConstant(graph->FindValue("i16"));
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->bytes.size(), 4u);
  int16_t a[2];
  std::memcpy(a, t->bytes.data(), 4);
  EXPECT_EQ(a[0], -2);
  EXPECT_EQ(a[1], 300);
  t = graph->FindConstant(graph->FindValue("u64"));
  uint64_t u;
  std::memcpy(&u, t->bytes.data(), 8);
  EXPECT_EQ(u, 1ull << 40);
  EXPECT_TRUE(t->shape.empty());
  t = graph->FindConstant(graph->FindValue("f64"));
  double d;
  std::memcpy(&d, t->bytes.data(), 8);
  EXPECT_EQ(d, 2.5);
  t = graph->FindConstant(graph->FindValue("raw"));
  int32_t r;
  std::memcpy(&r, t->bytes.data(), 4);
  EXPECT_EQ(r, v);

  raw->set_raw_data("abc");  // 3 bytes for one int32
  graph = ImportOnnxBytes(b.Bytes(), registry_);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("raw"));
}

}  // namespace
}  // namespace reprise::runtime::engine
