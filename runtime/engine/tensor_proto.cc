#include "runtime/engine/tensor_proto.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace reprise::runtime::engine {
namespace {

std::string TensorName(const onnx::TensorProto& proto) {
  return proto.name().empty() ? std::string("<unnamed>") : proto.name();
}

// Copies `count` elements of a repeated field into `out`, converting each to T.
template <typename T, typename Field>
void CopyField(const Field& field, uint8_t* out) {
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

// Reads the external data of `proto` into `out` (a std::vector<uint8_t> or a std::string, so
// that the bytes land where they are used without another copy).
template <typename Buffer>
absl::Status ReadExternal(const onnx::TensorProto& proto, const std::string& base_dir,
                          size_t expected_bytes, Buffer* out) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t v = 0;
      std::istringstream in(entry.value());
      if (!(in >> v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", TensorName(proto),
                                                       "\": bad external data ", entry.key(), " \"",
                                                       entry.value(), "\""));
      }
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", TensorName(proto), "\": external data without a location"));
  }
  if (base_dir.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("tensor \"", TensorName(proto),
                                                      "\" needs external data file \"", location,
                                                      "\" but the model was loaded from bytes"));
  }
  if (location.find("..") != std::string::npos || location.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", TensorName(proto), "\": external data location \"", location,
                     "\" must be a relative path inside the model's directory"));
  }
  const std::string path = absl::StrCat(base_dir, "/", location);
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("tensor \"", TensorName(proto),
                                            "\": external data file \"", path, "\" is missing"));
  }
  if (length < 0) length = static_cast<int64_t>(expected_bytes);
  if (static_cast<size_t>(length) != expected_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", TensorName(proto),
                                                   "\": external data length ", length,
                                                   ", expected ", expected_bytes, " bytes"));
  }
  out->resize(expected_bytes);
  file.seekg(offset);
  file.read(reinterpret_cast<char*>(out->data()), static_cast<std::streamsize>(expected_bytes));
  if (!file || file.gcount() != static_cast<std::streamsize>(expected_bytes)) {
    return absl::DataLossError(
        absl::StrCat("tensor \"", TensorName(proto), "\": external data file \"", path,
                     "\" is shorter than ", offset, " + ", expected_bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorValue> TensorFromProto(const onnx::TensorProto& proto,
                                            const std::string& base_dir,
                                            const LiftedRawData* lifted) {
  TensorValue tensor;
  auto dtype = DataTypeFromCode(proto.data_type());
  if (!dtype.ok()) {
    return absl::UnimplementedError(absl::StrCat("tensor \"", TensorName(proto),
                                                 "\": element type code ", proto.data_type(),
                                                 " is not supported"));
  }
  tensor.dtype = *dtype;
  if (tensor.dtype == DataType::kString) {
    return absl::UnimplementedError(
        absl::StrCat("tensor \"", TensorName(proto), "\": string tensors are not supported"));
  }
  for (int64_t d : proto.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", TensorName(proto), "\" has a negative dimension ", d));
    }
    tensor.shape.push_back(d);
  }
  const int64_t count = NumElements(tensor.shape);
  const size_t elem = DataTypeSize(tensor.dtype);
  const size_t bytes = static_cast<size_t>(count) * elem;
  if (count > 0 && bytes / static_cast<size_t>(count) != elem) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", TensorName(proto), "\" is too large"));
  }

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    RETURN_IF_ERROR(ReadExternal(proto, base_dir, bytes, &tensor.bytes));
    return tensor;
  }
  if (proto.has_raw_data()) {
    const uint64_t size = lifted != nullptr ? lifted->size : proto.raw_data().size();
    if (size != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", TensorName(proto), "\": raw_data has ", size, " bytes, shape ",
          ShapeToString(tensor.shape), " of ", DataTypeName(tensor.dtype), " needs ", bytes));
    }
    const char* data = lifted != nullptr ? lifted->data : proto.raw_data().data();
    if (data != nullptr) {
      // Pointers of one type make this a memcpy (char iterators would copy byte by byte).
      const auto* begin = reinterpret_cast<const uint8_t*>(data);
      tensor.bytes.assign(begin, begin + bytes);
    } else {
      tensor.bytes.resize(bytes);
      absl::Status read = lifted->read(tensor.bytes.data());
      if (!read.ok()) {
        return absl::Status(read.code(),
                            absl::StrCat("tensor \"", TensorName(proto), "\": ", read.message()));
      }
    }
    return tensor;
  }

  // Typed fields; which field holds which type follows onnx.proto's comments.
  int field_size = 0;
  switch (tensor.dtype) {
    case DataType::kFloat32:
      field_size = proto.float_data_size();
      break;
    case DataType::kInt32:
    case DataType::kInt16:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kUInt8:
    case DataType::kBool:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      field_size = proto.int32_data_size();
      break;
    case DataType::kInt64:
      field_size = proto.int64_data_size();
      break;
    case DataType::kFloat64:
      field_size = proto.double_data_size();
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      field_size = proto.uint64_data_size();
      break;
    default:
      break;
  }
  if (field_size != count) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", TensorName(proto),
                                                   "\": ", field_size, " elements stored, shape ",
                                                   ShapeToString(tensor.shape), " needs ", count));
  }
  tensor.bytes.resize(bytes);
  uint8_t* out = tensor.bytes.data();
  switch (tensor.dtype) {
    case DataType::kFloat32:
      CopyField<float>(proto.float_data(), out);
      break;
    case DataType::kInt32:
      CopyField<int32_t>(proto.int32_data(), out);
      break;
    case DataType::kInt16:
      CopyField<int16_t>(proto.int32_data(), out);
      break;
    case DataType::kInt8:
      CopyField<int8_t>(proto.int32_data(), out);
      break;
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      CopyField<uint16_t>(proto.int32_data(), out);
      break;
    case DataType::kUInt8:
    case DataType::kBool:
      CopyField<uint8_t>(proto.int32_data(), out);
      break;
    case DataType::kInt64:
      CopyField<int64_t>(proto.int64_data(), out);
      break;
    case DataType::kFloat64:
      CopyField<double>(proto.double_data(), out);
      break;
    case DataType::kUInt32:
      CopyField<uint32_t>(proto.uint64_data(), out);
      break;
    case DataType::kUInt64:
      CopyField<uint64_t>(proto.uint64_data(), out);
      break;
    default:
      break;
  }
  return tensor;
}

absl::Status InlineExternalData(onnx::ModelProto* model, const std::string& base_dir) {
  auto inline_one = [&](onnx::TensorProto* tensor) -> absl::Status {
    if (tensor->data_location() != onnx::TensorProto::EXTERNAL) return absl::OkStatus();
    auto dtype = DataTypeFromCode(tensor->data_type());
    if (!dtype.ok() || DataTypeSize(*dtype) == 0) {
      return absl::UnimplementedError(absl::StrCat("tensor \"", TensorName(*tensor),
                                                   "\": external data of element type code ",
                                                   tensor->data_type(), " is not supported"));
    }
    int64_t count = 1;
    for (int64_t d : tensor->dims()) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor \"", TensorName(*tensor), "\" has a negative dimension ", d));
      }
      count *= d;
    }
    std::string bytes;
    RETURN_IF_ERROR(
        ReadExternal(*tensor, base_dir, static_cast<size_t>(count) * DataTypeSize(*dtype), &bytes));
    tensor->mutable_raw_data()->swap(bytes);
    tensor->clear_external_data();
    tensor->set_data_location(onnx::TensorProto::DEFAULT);
    return absl::OkStatus();
  };
  onnx::GraphProto* graph = model->mutable_graph();
  for (auto& init : *graph->mutable_initializer()) RETURN_IF_ERROR(inline_one(&init));
  for (auto& node : *graph->mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_t()) RETURN_IF_ERROR(inline_one(attr.mutable_t()));
    }
  }
  return absl::OkStatus();
}

onnx::TensorProto TensorToProto(const TensorValue& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype));
  for (int64_t d : tensor.shape) proto.add_dims(d);
  proto.set_raw_data(std::string(tensor.bytes.begin(), tensor.bytes.end()));
  return proto;
}

absl::StatusOr<TensorValue> ReadTensorProtoFile(const std::string& path, std::string* name) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open \"", path, "\""));
  std::stringstream buffer;
  buffer << file.rdbuf();
  onnx::TensorProto proto;
  if (!proto.ParseFromString(buffer.str())) {
    return absl::InvalidArgumentError(absl::StrCat("\"", path, "\" is not a TensorProto"));
  }
  if (name != nullptr) *name = proto.name();
  return TensorFromProto(proto, "");
}

}  // namespace reprise::runtime::engine
