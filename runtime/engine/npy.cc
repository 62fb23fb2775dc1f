#include "runtime/engine/npy.h"

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/bool_bytes.h"
#include "runtime/core/checked_size.h"

namespace reprise::runtime::engine {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);

struct Code {
  DataType dtype;
  absl::string_view descr;  // without the byte-order character
};

constexpr Code kCodes[] = {
    {DataType::kBool, "b1"},    {DataType::kInt8, "i1"},    {DataType::kUInt8, "u1"},
    {DataType::kInt16, "i2"},   {DataType::kUInt16, "u2"},  {DataType::kInt32, "i4"},
    {DataType::kUInt32, "u4"},  {DataType::kInt64, "i8"},   {DataType::kUInt64, "u8"},
    {DataType::kFloat16, "f2"}, {DataType::kFloat32, "f4"}, {DataType::kFloat64, "f8"},
};

// The value of `key` in the header dict, up to the next top-level comma or closing brace.
absl::StatusOr<std::string> HeaderField(absl::string_view header, absl::string_view key,
                                        absl::string_view what) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t pos = header.find(quoted);
  if (pos == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": npy header has no ", quoted));
  }
  pos = header.find(':', pos + quoted.size());
  if (pos == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": malformed npy header"));
  }
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(pos + 1));
  size_t end = 0;
  if (!rest.empty() && rest[0] == '(') {
    end = rest.find(')');
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": malformed npy shape"));
    }
    ++end;
  } else {
    end = rest.find_first_of(",}");
    if (end == absl::string_view::npos) end = rest.size();
  }
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

}  // namespace

absl::StatusOr<TensorValue> ParseNpy(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file (bad magic)"));
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError(absl::StrCat(what, ": truncated"));
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(bytes[8 + i]);
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": npy version ", major, " is not supported"));
  }
  if (header_len > bytes.size() - header_start) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": truncated npy header"));
  }
  absl::string_view header = bytes.substr(header_start, header_len);
  ASSIGN_OR_RETURN(std::string descr, HeaderField(header, "descr", what));
  ASSIGN_OR_RETURN(std::string fortran, HeaderField(header, "fortran_order", what));
  ASSIGN_OR_RETURN(std::string shape_text, HeaderField(header, "shape", what));
  if (fortran != "False") {
    return absl::UnimplementedError(absl::StrCat(what, ": Fortran-order arrays are not supported"));
  }
  absl::string_view code = absl::StripSuffix(absl::StripPrefix(descr, "'"), "'");
  if (!code.empty() && (code[0] == '<' || code[0] == '|' || code[0] == '=')) code.remove_prefix(1);
  TensorValue tensor;
  for (const Code& c : kCodes) {
    if (c.descr == code) tensor.dtype = c.dtype;
  }
  if (tensor.dtype == DataType::kUndefined) {
    return absl::UnimplementedError(
        absl::StrCat(what, ": npy element type ", descr, " is not supported"));
  }
  absl::string_view dims = absl::StripSuffix(absl::StripPrefix(shape_text, "("), ")");
  for (absl::string_view part : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bad npy shape ", shape_text));
    }
    tensor.shape.push_back(d);
  }
  const std::optional<int64_t> count = CheckedElementCount(tensor.shape);
  const std::optional<int64_t> data_bytes =
      count.has_value() ? CheckedByteSize(*count, static_cast<int64_t>(DataTypeSize(tensor.dtype)))
                        : std::nullopt;
  if (!data_bytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": npy shape ", shape_text, " of ",
                                                   DataTypeName(tensor.dtype),
                                                   " is too large (its byte size overflows)"));
  }
  absl::string_view data = bytes.substr(header_start + header_len);
  if (static_cast<int64_t>(data.size()) != *data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": npy data has ", data.size(), " bytes, shape ", ShapeToString(tensor.shape), " of ",
        DataTypeName(tensor.dtype), " needs ", *data_bytes));
  }
  tensor.bytes.assign(data.begin(), data.end());
  if (tensor.dtype == DataType::kBool) {
    const size_t i = FirstNonBoolByte(tensor.bytes.data(), tensor.bytes.size());
    if (i < tensor.bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bool element ", i, " is ",
                                                     static_cast<int>(tensor.bytes[i]),
                                                     "; bool bytes must be 0 or 1"));
    }
  }
  return tensor;
}

absl::StatusOr<std::string> SerializeNpy(const TensorValue& tensor) {
  absl::string_view code;
  for (const Code& c : kCodes) {
    if (c.dtype == tensor.dtype) code = c.descr;
  }
  if (code.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("npy: element type ", DataTypeName(tensor.dtype), " has no NumPy equivalent"));
  }
  std::string shape = absl::StrJoin(tensor.shape, ", ");
  if (tensor.shape.size() == 1) shape.push_back(',');  // a Python 1-tuple: (2,)
  const char order = code[0] == 'b' || code[1] == '1' ? '|' : '<';
  std::string header = absl::StrCat("{'descr': '", std::string(1, order), code,
                                    "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  return out;
}

absl::StatusOr<TensorValue> ReadNpyFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open \"", path, "\""));
  std::stringstream buffer;
  buffer << file.rdbuf();
  return ParseNpy(buffer.str(), absl::StrCat("\"", path, "\""));
}

absl::Status WriteNpyFile(const std::string& path, const TensorValue& tensor) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write \"", path, "\""));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::DataLossError(absl::StrCat("short write to \"", path, "\""));
  return absl::OkStatus();
}

}  // namespace reprise::runtime::engine
