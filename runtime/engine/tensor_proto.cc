#include "runtime/engine/tensor_proto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/bool_bytes.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"

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

// A file descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The canonical absolute path of `path` (symlinks resolved); nullopt when it does not exist.
std::optional<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (real == nullptr) return std::nullopt;
  return std::string(real.get());
}

// Checks an external data location: a relative path of plain components (no absolute path, no
// ".." component, no NUL byte).
absl::Status CheckLocation(const std::string& tensor, const std::string& location) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor \"", tensor, "\": external data location \"", absl::CHexEscape(location),
        "\" must be a relative path inside the model's directory (", why, ")"));
  };
  if (location.find('\0') != std::string::npos) return refuse("it holds a NUL byte");
  if (location.front() == '/') return refuse("it is absolute");
  for (absl::string_view part : absl::StrSplit(location, '/')) {
    if (part == "..") return refuse("it has a \"..\" component");
  }
  return absl::OkStatus();
}

// Reads the external data of `proto` into `out` (a std::vector<uint8_t> or a std::string, so
// that the bytes land where they are used without another copy). The file must resolve (after
// symlinks) to a regular file inside `base_dir`, and hold offset + length bytes: both are
// checked before anything is allocated or read, so a declared size is never trusted.
template <typename Buffer>
absl::Status ReadExternal(const onnx::TensorProto& proto, const std::string& base_dir,
                          int64_t expected_bytes, Buffer* out) {
  const std::string name = TensorName(proto);
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t v = 0;
      if (!absl::SimpleAtoi(entry.value(), &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\": bad external data ",
                                                       entry.key(), " \"",
                                                       absl::CHexEscape(entry.value()), "\""));
      }
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", name, "\": external data without a location"));
  }
  if (base_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor \"", name, "\" needs external data file \"",
                     absl::CHexEscape(location), "\" but the model was loaded from bytes"));
  }
  RETURN_IF_ERROR(CheckLocation(name, location));
  if (length < 0) length = expected_bytes;
  if (length != expected_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\": external data length ",
                                                   length, ", expected ", expected_bytes,
                                                   " bytes"));
  }
  const std::string path = absl::StrCat(base_dir, "/", location);
  const std::optional<std::string> dir = RealPath(base_dir);
  const std::optional<std::string> real = RealPath(path);
  if (!dir.has_value() || !real.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("tensor \"", name, "\": external data file \"", path, "\" is missing"));
  }
  const std::string inside = *dir == "/" ? *dir : absl::StrCat(*dir, "/");
  if (!absl::StartsWith(*real, inside)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", name, "\": external data file \"", path, "\" resolves to \"",
                     *real, "\", outside the model's directory \"", *dir, "\""));
  }
  // Checked before opening: opening a FIFO would block, a device could be read forever.
  struct stat info = {};
  if (::stat(real->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\": external data file \"",
                                                   path, "\" is not a regular file"));
  }
  Fd fd(::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0 || ::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::NotFoundError(absl::StrCat("tensor \"", name, "\": external data file \"", path,
                                            "\" cannot be opened as a regular file"));
  }
  int64_t end = 0;
  if (!CheckedAdd(offset, length, &end) || end > static_cast<int64_t>(info.st_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", name, "\": external data file \"", path, "\" has ", info.st_size,
                     " bytes, offset ", offset, " + length ", length, " lies past its end"));
  }
  out->resize(static_cast<size_t>(length));
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd.get(), out->data() + done, static_cast<size_t>(length - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat("tensor \"", name, "\": external data file \"", path,
                                              "\" is shorter than ", offset, " + ", length,
                                              " bytes (it changed while loading?)"));
    }
    done += n;
  }
  return absl::OkStatus();
}

// The byte size of `proto`'s dense data as its dims and element type declare it: error naming
// the tensor when a dim is negative or the size overflows. Nothing is allocated here; callers
// compare the result with the bytes actually present first.
absl::StatusOr<int64_t> DeclaredBytes(const onnx::TensorProto& proto, DataType dtype,
                                      Shape* shape) {
  for (int64_t d : proto.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", TensorName(proto), "\" has a negative dimension ", d));
    }
    if (shape != nullptr) shape->push_back(d);
  }
  const std::optional<int64_t> count = CheckedElementCount(proto.dims());
  const std::optional<int64_t> bytes =
      count.has_value() ? CheckedByteSize(*count, static_cast<int64_t>(DataTypeSize(dtype)))
                        : std::nullopt;
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor \"", TensorName(proto), "\": shape [", absl::StrJoin(proto.dims(), ","), "] of ",
        DataTypeName(dtype), " is too large (its element count or byte size overflows)"));
  }
  return *bytes;
}

// A string tensor: ONNX keeps strings in string_data only (never raw_data or external data).
// Nothing is sized from the dims: the count they declare must equal the strings present, which
// the parse already holds in memory, so the copy is bounded by the model file.
absl::StatusOr<TensorValue> StringTensorFromProto(const onnx::TensorProto& proto) {
  if (proto.has_raw_data() || proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor \"", TensorName(proto),
        "\": a string tensor must keep its elements in string_data (not raw_data or external "
        "data)"));
  }
  Shape shape;
  for (int64_t d : proto.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", TensorName(proto), "\" has a negative dimension ", d));
    }
    shape.push_back(d);
  }
  const std::optional<int64_t> count = CheckedElementCount(proto.dims());
  if (!count.has_value() || *count != proto.string_data_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", TensorName(proto), "\": ", proto.string_data_size(),
                     " strings stored, shape [", absl::StrJoin(proto.dims(), ","), "] needs ",
                     count.has_value() ? absl::StrCat(*count) : std::string("more than 2^63")));
  }
  std::vector<absl::string_view> elements(proto.string_data().begin(), proto.string_data().end());
  return MakeStringTensor(std::move(shape), elements);
}

// The tensor's elements, not yet checked as values of its type.
absl::StatusOr<TensorValue> DecodeTensor(const onnx::TensorProto& proto,
                                         const std::string& base_dir, const LiftedRawData* lifted) {
  TensorValue tensor;
  auto dtype = DataTypeFromCode(proto.data_type());
  if (!dtype.ok()) {
    return absl::UnimplementedError(absl::StrCat("tensor \"", TensorName(proto),
                                                 "\": element type code ", proto.data_type(),
                                                 " is not supported"));
  }
  tensor.dtype = *dtype;
  if (tensor.dtype == DataType::kString) return StringTensorFromProto(proto);
  ASSIGN_OR_RETURN(const int64_t declared, DeclaredBytes(proto, tensor.dtype, &tensor.shape));
  // In range: the element count is at most the byte size, which fits int64.
  const int64_t count = declared / static_cast<int64_t>(DataTypeSize(tensor.dtype));
  const size_t bytes = static_cast<size_t>(declared);

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    RETURN_IF_ERROR(ReadExternal(proto, base_dir, declared, &tensor.bytes));
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

}  // namespace

absl::StatusOr<TensorValue> TensorFromProto(const onnx::TensorProto& proto,
                                            const std::string& base_dir,
                                            const LiftedRawData* lifted) {
  // A BOOL element in int32_data must be 0 or 1 before it is narrowed to a byte (256 would
  // read as false).
  if (proto.data_type() == onnx::TensorProto::BOOL && !proto.has_raw_data()) {
    for (int i = 0; i < proto.int32_data_size(); ++i) {
      if (proto.int32_data(i) != 0 && proto.int32_data(i) != 1) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", TensorName(proto),
                                                       "\": BOOL element ", i, " is ",
                                                       proto.int32_data(i), "; must be 0 or 1"));
      }
    }
  }
  ASSIGN_OR_RETURN(TensorValue tensor, DecodeTensor(proto, base_dir, lifted));
  const size_t bad = tensor.dtype == DataType::kBool
                         ? FirstNonBoolByte(tensor.bytes.data(), tensor.bytes.size())
                         : tensor.bytes.size();
  if (bad < tensor.bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", TensorName(proto), "\": BOOL element ", bad, " is ",
                     static_cast<int>(tensor.bytes[bad]), "; BOOL bytes must be 0 or 1"));
  }
  return tensor;
}

absl::Status InlineExternalData(onnx::ModelProto* model, const std::string& base_dir) {
  auto inline_one = [&](onnx::TensorProto* tensor) -> absl::Status {
    if (tensor->data_location() != onnx::TensorProto::EXTERNAL) return absl::OkStatus();
    auto dtype = DataTypeFromCode(tensor->data_type());
    if (!dtype.ok() || *dtype == DataType::kString) {
      return absl::UnimplementedError(absl::StrCat("tensor \"", TensorName(*tensor),
                                                   "\": external data of element type code ",
                                                   tensor->data_type(), " is not supported"));
    }
    ASSIGN_OR_RETURN(const int64_t declared, DeclaredBytes(*tensor, *dtype, nullptr));
    std::string bytes;
    RETURN_IF_ERROR(ReadExternal(*tensor, base_dir, declared, &bytes));
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
  if (tensor.dtype == DataType::kString) {
    const int64_t count = NumElements(tensor.shape);
    for (int64_t i = 0; i < count; ++i) {
      const absl::string_view e = StringAt(tensor.bytes.data(), i);
      proto.add_string_data(e.data(), e.size());
    }
    return proto;
  }
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
