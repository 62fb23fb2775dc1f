#include "server/http_codec.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"
#include "server/http_json.h"

namespace reprise::server {
namespace {

constexpr char kSharedMemoryRegion[] = "shared_memory_region";

static_assert(std::endian::native == std::endian::little, "tensor bytes are little-endian");

using rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
using ParameterMap = google::protobuf::Map<std::string, inference::InferParameter>;

// How a KServe datatype is held: its element size (0 for BYTES) and how JSON values map to it.
struct TypeInfo {
  enum Kind { kBool, kInt, kUint, kFloat, kHalf, kBytes } kind;
  size_t size;
};

std::optional<TypeInfo> TypeOf(absl::string_view datatype) {
  struct Entry {
    absl::string_view name;
    TypeInfo info;
  };
  static constexpr Entry kTypes[] = {
      {"BOOL", {TypeInfo::kBool, 1}},   {"UINT8", {TypeInfo::kUint, 1}},
      {"UINT16", {TypeInfo::kUint, 2}}, {"UINT32", {TypeInfo::kUint, 4}},
      {"UINT64", {TypeInfo::kUint, 8}}, {"INT8", {TypeInfo::kInt, 1}},
      {"INT16", {TypeInfo::kInt, 2}},   {"INT32", {TypeInfo::kInt, 4}},
      {"INT64", {TypeInfo::kInt, 8}},   {"FP16", {TypeInfo::kHalf, 2}},
      {"BF16", {TypeInfo::kHalf, 2}},   {"FP32", {TypeInfo::kFloat, 4}},
      {"FP64", {TypeInfo::kFloat, 8}},  {"BYTES", {TypeInfo::kBytes, 0}},
  };
  for (const Entry& e : kTypes) {
    if (e.name == datatype) return e.info;
  }
  return std::nullopt;
}

absl::string_view View(const Value& v) { return {v.GetString(), v.GetStringLength()}; }

// Names a client chose, cut short for messages.
std::string Quoted(absl::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return absl::StrCat("\"", s, "\"");
  return absl::StrCat("\"", s.substr(0, kMax), "...\"");
}

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

template <typename T>
void AppendRaw(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

// ---- JSON -> protobuf ----

// The members of `params` into `*out`, except `http_key`, whose value goes to `*http_value`.
absl::Status ReadParameters(const Value& params, absl::string_view where,
                            absl::string_view http_key, ParameterMap* out,
                            const Value** http_value) {
  if (!params.IsObject()) {
    return Invalid(
        where, absl::StrCat("\"parameters\" is ", JsonTypeName(params), ", expected an object"));
  }
  for (const auto& m : params.GetObject()) {
    const absl::string_view key = View(m.name);
    const Value& v = m.value;
    if (key == http_key) {
      *http_value = &v;
      continue;
    }
    inference::InferParameter p;
    if (v.IsBool()) {
      p.set_bool_param(v.GetBool());
    } else if (v.IsInt64()) {
      p.set_int64_param(v.GetInt64());
    } else if (v.IsUint64()) {
      p.set_uint64_param(v.GetUint64());
    } else if (v.IsNumber()) {
      p.set_double_param(v.GetDouble());
    } else if (v.IsString()) {
      p.set_string_param(std::string(View(v)));
    } else {
      return Invalid(where, absl::StrCat("parameter ", Quoted(key), " is ", JsonTypeName(v),
                                         ", expected a boolean, number or string"));
    }
    (*out)[std::string(key)] = std::move(p);
  }
  return absl::OkStatus();
}

// `f` as IEEE half (FP16) or bfloat16, rounded to nearest even.
uint16_t FloatToHalf(float f, bool bf16) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if (bf16) {
    if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
    return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
  }
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t exp = (x >> 23) & 0xff;
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant != 0 ? 0x200 : 0));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t half = 0;
  uint32_t rem = 0;
  uint32_t mid = 0;
  if (e <= 0) {  // a subnormal half (or zero)
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - e;
    half = mant >> shift;
    rem = mant & ((1u << shift) - 1);
    mid = 1u << (shift - 1);
  } else {
    half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    rem = mant & 0x1fff;
    mid = 0x1000;
  }
  if (rem > mid || (rem == mid && (half & 1) != 0)) ++half;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | half);
}

// One JSON value as an element of type `t` appended to `*out`.
absl::Status AppendElement(const Value& v, TypeInfo t, absl::string_view datatype,
                           absl::string_view where, std::string* out) {
  auto wrong = [&](absl::string_view expected) {
    return Invalid(where, absl::StrCat("data element is ", JsonTypeName(v), ", expected ", expected,
                                       " for datatype ", datatype));
  };
  auto out_of_range = [&] {
    std::string text = v.IsInt64()    ? std::to_string(v.GetInt64())
                       : v.IsUint64() ? std::to_string(v.GetUint64())
                       : v.IsNumber() ? absl::StrCat(v.GetDouble())
                                      : std::string("?");
    return Invalid(where,
                   absl::StrCat("data element ", text, " is out of range for datatype ", datatype));
  };
  switch (t.kind) {
    case TypeInfo::kBool:
      if (!v.IsBool()) return wrong("true or false");
      out->push_back(v.GetBool() ? 1 : 0);
      return absl::OkStatus();
    case TypeInfo::kInt: {
      if (!v.IsInt64()) {
        if (v.IsUint64()) return out_of_range();
        return wrong("an integer");
      }
      const int64_t x = v.GetInt64();
      const int bits = static_cast<int>(t.size * 8);
      if (bits < 64) {
        const int64_t lim = int64_t{1} << (bits - 1);
        if (x < -lim || x >= lim) return out_of_range();
      }
      switch (t.size) {
        case 1:
          AppendRaw(static_cast<int8_t>(x), out);
          break;
        case 2:
          AppendRaw(static_cast<int16_t>(x), out);
          break;
        case 4:
          AppendRaw(static_cast<int32_t>(x), out);
          break;
        default:
          AppendRaw(x, out);
          break;
      }
      return absl::OkStatus();
    }
    case TypeInfo::kUint: {
      if (!v.IsUint64()) {
        if (v.IsInt64()) return out_of_range();
        return wrong("a non-negative integer");
      }
      const uint64_t x = v.GetUint64();
      if (t.size < 8 && x >= (uint64_t{1} << (t.size * 8))) return out_of_range();
      switch (t.size) {
        case 1:
          AppendRaw(static_cast<uint8_t>(x), out);
          break;
        case 2:
          AppendRaw(static_cast<uint16_t>(x), out);
          break;
        case 4:
          AppendRaw(static_cast<uint32_t>(x), out);
          break;
        default:
          AppendRaw(x, out);
          break;
      }
      return absl::OkStatus();
    }
    case TypeInfo::kFloat: {
      if (!v.IsNumber()) return wrong("a number");
      const double d = v.GetDouble();
      if (t.size == 8) {
        AppendRaw(d, out);
        return absl::OkStatus();
      }
      if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) {
        return out_of_range();
      }
      AppendRaw(static_cast<float>(d), out);
      return absl::OkStatus();
    }
    case TypeInfo::kBytes: {
      if (!v.IsString()) return wrong("a string");
      AppendRaw(static_cast<uint32_t>(v.GetStringLength()), out);
      out->append(v.GetString(), v.GetStringLength());
      return absl::OkStatus();
    }
    case TypeInfo::kHalf: {
      if (!v.IsNumber()) return wrong("a number");
      const double d = v.GetDouble();
      const bool bf16 = datatype == "BF16";
      const double max = bf16 ? std::numeric_limits<float>::max() : 65504.0;
      if (std::isfinite(d) && std::fabs(d) > max) return out_of_range();
      AppendRaw(FloatToHalf(static_cast<float>(d), bf16), out);
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// The elements of `data` (arrays nested to any depth, row-major) appended to `*out`.
absl::Status AppendElements(const Value& data, TypeInfo t, absl::string_view datatype,
                            absl::string_view where, int64_t max_bytes, std::string* out,
                            int64_t* count) {
  for (const Value& v : data.GetArray()) {
    if (v.IsArray()) {
      RETURN_IF_ERROR(AppendElements(v, t, datatype, where, max_bytes, out, count));
      continue;
    }
    RETURN_IF_ERROR(AppendElement(v, t, datatype, where, out));
    ++*count;
    if (static_cast<int64_t>(out->size()) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          where, ": tensor data exceeds limits.max_request_bytes (", max_bytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

// One tensor object (a request input or a response output): name, datatype, shape, parameters
// and its data from "data" or from the binary part at `*binary` (which advances). `*bytes_left`
// is the tensor-data budget of the whole body.
template <typename Tensor>
absl::Status ParseTensor(const Value& obj, absl::string_view where, absl::string_view* binary,
                         int64_t* bytes_left, Tensor* tensor, std::string* raw) {
  if (!obj.IsObject()) {
    return Invalid(where, absl::StrCat("is ", JsonTypeName(obj), ", expected an object"));
  }
  const Value* name = nullptr;
  const Value* datatype = nullptr;
  const Value* shape = nullptr;
  const Value* params = nullptr;
  const Value* data = nullptr;
  for (const auto& m : obj.GetObject()) {
    const absl::string_view key = View(m.name);
    if (key == "name") {
      name = &m.value;
    } else if (key == "datatype") {
      datatype = &m.value;
    } else if (key == "shape") {
      shape = &m.value;
    } else if (key == "parameters") {
      params = &m.value;
    } else if (key == "data") {
      data = &m.value;
    } else {
      return Invalid(where, absl::StrCat("unknown key ", Quoted(key)));
    }
  }
  if (name == nullptr || !name->IsString()) return Invalid(where, "\"name\" must be a string");
  tensor->set_name(std::string(View(*name)));
  const std::string here = absl::StrCat(where, " ", Quoted(tensor->name()));
  if (datatype == nullptr || !datatype->IsString()) {
    return Invalid(here, "\"datatype\" must be a string");
  }
  tensor->set_datatype(std::string(View(*datatype)));
  const std::optional<TypeInfo> type = TypeOf(tensor->datatype());
  if (!type.has_value()) {
    return Invalid(here, absl::StrCat("unknown datatype ", Quoted(tensor->datatype())));
  }
  if (shape == nullptr || !shape->IsArray()) return Invalid(here, "\"shape\" must be an array");
  for (const Value& d : shape->GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) {
      return Invalid(here, "\"shape\" must hold non-negative integers");
    }
    tensor->add_shape(d.GetInt64());
  }
  const Value* binary_size = nullptr;
  if (params != nullptr) {
    RETURN_IF_ERROR(
        ReadParameters(*params, here, kBinaryDataSize, tensor->mutable_parameters(), &binary_size));
  }
  if (binary_size != nullptr) {
    if (data != nullptr) return Invalid(here, "has both \"data\" and binary_data_size");
    if (!binary_size->IsUint64()) {
      return Invalid(here, "binary_data_size must be a non-negative integer");
    }
    const uint64_t size = binary_size->GetUint64();
    if (size > binary->size()) {
      return Invalid(here, absl::StrCat("binary_data_size ", size, " is past the end of the body (",
                                        binary->size(), " bytes of binary data left)"));
    }
    if (static_cast<int64_t>(size) > *bytes_left) {
      return absl::ResourceExhaustedError(
          absl::StrCat(here, ": tensor data exceeds limits.max_request_bytes"));
    }
    raw->assign(binary->data(), size);
    binary->remove_prefix(size);
    *bytes_left -= static_cast<int64_t>(size);
    return absl::OkStatus();
  }
  if (data == nullptr && tensor->parameters().contains(kSharedMemoryRegion)) {
    return absl::OkStatus();  // its data is in a shared-memory region (no raw entry)
  }
  if (data == nullptr) return Invalid(here, "has neither \"data\" nor binary_data_size");
  if (!data->IsArray()) {
    return Invalid(here, absl::StrCat("\"data\" is ", JsonTypeName(*data), ", expected an array"));
  }
  const std::optional<int64_t> expected = runtime::CheckedElementCount(tensor->shape());
  if (!expected.has_value()) return Invalid(here, "the shape's element count overflows");
  int64_t reserve = 0;
  if (type->size > 0 &&
      runtime::CheckedMul(*expected, static_cast<int64_t>(type->size), &reserve) &&
      reserve <= *bytes_left) {
    raw->reserve(static_cast<size_t>(reserve));
  }
  int64_t count = 0;
  RETURN_IF_ERROR(AppendElements(*data, *type, tensor->datatype(), here, *bytes_left, raw, &count));
  if (count != *expected) {
    return Invalid(here, absl::StrCat("\"data\" has ", count, " elements, the shape ", *expected));
  }
  *bytes_left -= static_cast<int64_t>(raw->size());
  return absl::OkStatus();
}

// ---- protobuf -> JSON ----

void WriteString(absl::string_view s, Writer* w) {
  w->String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// A float in its shortest round-trip form; NaN and the infinities as Python's json writes them.
template <typename T>
void WriteFloat(T x, Writer* w) {
  if (std::isnan(x)) {
    w->RawValue("NaN", 3, rapidjson::kNumberType);
    return;
  }
  if (std::isinf(x)) {
    if (x > 0) {
      w->RawValue("Infinity", 8, rapidjson::kNumberType);
    } else {
      w->RawValue("-Infinity", 9, rapidjson::kNumberType);
    }
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 2, x);
  // "2" reads back as an integer in most clients: keep a float a float ("2.0").
  if (std::find_if(buf, end, [](char c) { return c == '.' || c == 'e'; }) == end) {
    *end++ = '.';
    *end++ = '0';
  }
  w->RawValue(buf, static_cast<size_t>(end - buf), rapidjson::kNumberType);
}

void WriteParameters(const ParameterMap& params, std::optional<uint64_t> binary_size, Writer* w) {
  w->Key("parameters");
  w->StartObject();
  for (const auto& [key, p] : params) {
    WriteString(key, w);
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        w->Bool(p.bool_param());
        break;
      case inference::InferParameter::kInt64Param:
        w->Int64(p.int64_param());
        break;
      case inference::InferParameter::kUint64Param:
        w->Uint64(p.uint64_param());
        break;
      case inference::InferParameter::kDoubleParam:
        WriteFloat(p.double_param(), w);
        break;
      case inference::InferParameter::kStringParam:
        WriteString(p.string_param(), w);
        break;
      default:
        w->Null();
        break;
    }
  }
  if (binary_size.has_value()) {
    w->Key(kBinaryDataSize.data(), static_cast<rapidjson::SizeType>(kBinaryDataSize.size()));
    w->Uint64(*binary_size);
  }
  w->EndObject();
}

float HalfToFloat(uint16_t h, bool bf16) {
  if (bf16) return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

template <typename T>
T Load(const char* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

// `raw` (the tensor's bytes) as a flat JSON array of its elements.
absl::Status WriteData(absl::string_view raw, absl::string_view datatype, absl::string_view where,
                       Writer* w) {
  const std::optional<TypeInfo> t = TypeOf(datatype);
  if (!t.has_value()) return Invalid(where, absl::StrCat("unknown datatype ", Quoted(datatype)));
  if (t->size > 0 && raw.size() % t->size != 0) {
    return Invalid(where, absl::StrCat(raw.size(), " bytes are not whole ", datatype, " elements"));
  }
  w->Key("data");
  w->StartArray();
  const char* p = raw.data();
  const char* const end = raw.data() + raw.size();
  if (t->kind == TypeInfo::kBytes) {
    while (p != end) {
      if (end - p < 4) return Invalid(where, "BYTES data ends inside a length prefix");
      const uint32_t n = Load<uint32_t>(p);
      p += 4;
      if (static_cast<size_t>(end - p) < n) {
        return Invalid(where, "a BYTES element's length is past the end of the data");
      }
      WriteString(absl::string_view(p, n), w);
      p += n;
    }
    w->EndArray();
    return absl::OkStatus();
  }
  for (; p != end; p += t->size) {
    switch (t->kind) {
      case TypeInfo::kBool:
        w->Bool(*p != 0);
        break;
      case TypeInfo::kInt:
        switch (t->size) {
          case 1:
            w->Int(Load<int8_t>(p));
            break;
          case 2:
            w->Int(Load<int16_t>(p));
            break;
          case 4:
            w->Int(Load<int32_t>(p));
            break;
          default:
            w->Int64(Load<int64_t>(p));
            break;
        }
        break;
      case TypeInfo::kUint:
        switch (t->size) {
          case 1:
            w->Uint(Load<uint8_t>(p));
            break;
          case 2:
            w->Uint(Load<uint16_t>(p));
            break;
          case 4:
            w->Uint(Load<uint32_t>(p));
            break;
          default:
            w->Uint64(Load<uint64_t>(p));
            break;
        }
        break;
      case TypeInfo::kFloat:
        if (t->size == 4) {
          WriteFloat(Load<float>(p), w);
        } else {
          WriteFloat(Load<double>(p), w);
        }
        break;
      case TypeInfo::kHalf:
        WriteFloat(HalfToFloat(Load<uint16_t>(p), datatype == "BF16"), w);
        break;
      case TypeInfo::kBytes:
        break;
    }
  }
  w->EndArray();
  return absl::OkStatus();
}

// One tensor: name, datatype, shape, parameters, and its data as JSON or (when `binary`)
// appended to `*binary_part`.
template <typename Tensor>
absl::Status WriteTensor(const Tensor& tensor, absl::string_view raw, bool binary,
                         absl::string_view where, Writer* w, std::string* binary_part) {
  w->StartObject();
  w->Key("name");
  WriteString(tensor.name(), w);
  w->Key("datatype");
  WriteString(tensor.datatype(), w);
  w->Key("shape");
  w->StartArray();
  for (int64_t d : tensor.shape()) w->Int64(d);
  w->EndArray();
  // An output written into a shared-memory region carries its parameters and no data.
  if (tensor.parameters().contains(kSharedMemoryRegion)) {
    WriteParameters(tensor.parameters(), std::nullopt, w);
    w->EndObject();
    return absl::OkStatus();
  }
  if (binary || !tensor.parameters().empty()) {
    WriteParameters(tensor.parameters(),
                    binary ? std::optional<uint64_t>(raw.size()) : std::nullopt, w);
  }
  if (binary) {
    binary_part->append(raw.data(), raw.size());
  } else {
    RETURN_IF_ERROR(WriteData(raw, tensor.datatype(), where, w));
  }
  w->EndObject();
  return absl::OkStatus();
}

// The JSON in `buffer` followed by `binary_part` (header length set when there is one).
HttpBody Assemble(const rapidjson::StringBuffer& buffer, std::string binary_part, bool binary) {
  HttpBody out;
  out.body.reserve(buffer.GetSize() + binary_part.size());
  out.body.assign(buffer.GetString(), buffer.GetSize());
  if (binary) {
    out.header_length = buffer.GetSize();
    out.body += binary_part;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::pair<absl::string_view, absl::string_view>> SplitInferBody(
    absl::string_view body, std::optional<absl::string_view> header_length) {
  if (!header_length.has_value()) return std::make_pair(body, absl::string_view());
  uint64_t length = 0;
  const absl::string_view text = *header_length;
  const bool digits = !text.empty() && text.size() <= 19 &&
                      text.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!digits || !absl::SimpleAtoi(text, &length)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Inference-Header-Content-Length ", Quoted(text), " is not a decimal length"));
  }
  if (length > body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length ", length,
                                                   " is past the end of the body (", body.size(),
                                                   " bytes)"));
  }
  return std::make_pair(body.substr(0, length), body.substr(length));
}

absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(
    absl::string_view body, std::optional<absl::string_view> header_length,
    absl::string_view model_name, absl::string_view model_version, const HttpCodecLimits& limits) {
  ASSIGN_OR_RETURN(auto parts, SplitInferBody(body, header_length));
  auto [json, binary] = parts;
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseJson(json, "infer request", &doc));
  if (!doc.IsObject()) {
    return Invalid("infer request", absl::StrCat("is ", JsonTypeName(doc), ", expected an object"));
  }
  HttpInferRequest out;
  inference::ModelInferRequest& r = out.request;
  r.set_model_name(std::string(model_name));
  r.set_model_version(std::string(model_version));
  const Value* inputs = nullptr;
  const Value* outputs = nullptr;
  for (const auto& m : doc.GetObject()) {
    const absl::string_view key = View(m.name);
    if (key == "id") {
      if (!m.value.IsString()) return Invalid("infer request", "\"id\" must be a string");
      r.set_id(std::string(View(m.value)));
    } else if (key == "parameters") {
      const Value* all_binary = nullptr;
      RETURN_IF_ERROR(ReadParameters(m.value, "infer request", kBinaryDataOutput,
                                     r.mutable_parameters(), &all_binary));
      if (all_binary != nullptr) {
        if (!all_binary->IsBool()) {
          return Invalid("infer request", "binary_data_output must be true or false");
        }
        out.all_outputs_binary = all_binary->GetBool();
      }
    } else if (key == "inputs") {
      inputs = &m.value;
    } else if (key == "outputs") {
      outputs = &m.value;
    } else {
      return Invalid("infer request", absl::StrCat("unknown key ", Quoted(key)));
    }
  }
  if (inputs == nullptr || !inputs->IsArray()) {
    return Invalid("infer request", "\"inputs\" must be an array");
  }
  int64_t bytes_left = limits.max_tensor_bytes;
  for (const Value& in : inputs->GetArray()) {
    const std::string where = absl::StrCat("input ", r.inputs_size());
    std::string* raw = r.add_raw_input_contents();
    inference::ModelInferRequest::InferInputTensor* tensor = r.add_inputs();
    RETURN_IF_ERROR(ParseTensor(in, where, &binary, &bytes_left, tensor, raw));
    // As Triton's clients send it over gRPC: raw contents only for inputs not in shared memory.
    if (tensor->parameters().contains(kSharedMemoryRegion) && raw->empty()) {
      r.mutable_raw_input_contents()->RemoveLast();
    }
  }
  if (!binary.empty()) {
    return Invalid("infer request",
                   absl::StrCat(binary.size(), " bytes of binary data are not used by any input"));
  }
  if (outputs != nullptr) {
    if (!outputs->IsArray()) return Invalid("infer request", "\"outputs\" must be an array");
    for (const Value& o : outputs->GetArray()) {
      const std::string where = absl::StrCat("output ", r.outputs_size());
      if (!o.IsObject()) return Invalid(where, "must be an object");
      auto* t = r.add_outputs();
      const Value* binary_flag = nullptr;
      for (const auto& m : o.GetObject()) {
        const absl::string_view key = View(m.name);
        if (key == "name" && m.value.IsString()) {
          t->set_name(std::string(View(m.value)));
        } else if (key == "parameters") {
          RETURN_IF_ERROR(
              ReadParameters(m.value, where, kBinaryData, t->mutable_parameters(), &binary_flag));
        } else {
          return Invalid(where, absl::StrCat("unknown key ", Quoted(key),
                                             " (or \"name\" that is not a string)"));
        }
      }
      if (t->name().empty()) return Invalid(where, "\"name\" must be a non-empty string");
      if (binary_flag != nullptr && !binary_flag->IsBool()) {
        return Invalid(where, "binary_data must be true or false");
      }
      out.output_binary.push_back(binary_flag ? std::optional<bool>(binary_flag->GetBool())
                                              : std::nullopt);
    }
  }
  return out;
}

absl::StatusOr<HttpBody> WriteHttpInferResponse(const inference::ModelInferResponse& response,
                                                const HttpInferRequest& request) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  std::string binary_part;
  bool any_binary = false;
  w.StartObject();
  w.Key("model_name");
  WriteString(response.model_name(), &w);
  w.Key("model_version");
  WriteString(response.model_version(), &w);
  if (!response.id().empty()) {
    w.Key("id");
    WriteString(response.id(), &w);
  }
  if (!response.parameters().empty()) WriteParameters(response.parameters(), std::nullopt, &w);
  w.Key("outputs");
  w.StartArray();
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& o = response.outputs(i);
    bool binary = request.all_outputs_binary;
    for (int j = 0; j < request.request.outputs_size(); ++j) {
      if (request.request.outputs(j).name() == o.name() &&
          static_cast<size_t>(j) < request.output_binary.size() &&
          request.output_binary[j].has_value()) {
        binary = *request.output_binary[j];
      }
    }
    absl::string_view raw;
    if (i < response.raw_output_contents_size()) raw = response.raw_output_contents(i);
    any_binary = any_binary || binary;
    RETURN_IF_ERROR(
        WriteTensor(o, raw, binary, absl::StrCat("output ", Quoted(o.name())), &w, &binary_part));
  }
  w.EndArray();
  w.EndObject();
  return Assemble(buffer, std::move(binary_part), any_binary);
}

absl::StatusOr<HttpBody> WriteHttpInferRequest(const inference::ModelInferRequest& request,
                                               bool binary_inputs, bool binary_outputs) {
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError("every input needs its data in raw_input_contents");
  }
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  std::string binary_part;
  w.StartObject();
  if (!request.id().empty()) {
    w.Key("id");
    WriteString(request.id(), &w);
  }
  if (!request.parameters().empty() || (binary_outputs && request.outputs().empty())) {
    ParameterMap params = request.parameters();
    if (binary_outputs && request.outputs().empty()) {
      params[std::string(kBinaryDataOutput)].set_bool_param(true);
    }
    WriteParameters(params, std::nullopt, &w);
  }
  w.Key("inputs");
  w.StartArray();
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    RETURN_IF_ERROR(WriteTensor(in, request.raw_input_contents(i), binary_inputs,
                                absl::StrCat("input ", Quoted(in.name())), &w, &binary_part));
  }
  w.EndArray();
  if (!request.outputs().empty()) {
    w.Key("outputs");
    w.StartArray();
    for (const auto& o : request.outputs()) {
      w.StartObject();
      w.Key("name");
      WriteString(o.name(), &w);
      ParameterMap params = o.parameters();
      if (binary_outputs) params[std::string(kBinaryData)].set_bool_param(true);
      if (!params.empty()) WriteParameters(params, std::nullopt, &w);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return Assemble(buffer, std::move(binary_part), binary_inputs);
}

absl::StatusOr<inference::ModelInferResponse> ParseHttpInferResponse(
    absl::string_view body, std::optional<absl::string_view> header_length,
    const HttpCodecLimits& limits) {
  ASSIGN_OR_RETURN(auto parts, SplitInferBody(body, header_length));
  auto [json, binary] = parts;
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseJson(json, "infer response", &doc));
  if (!doc.IsObject()) return Invalid("infer response", "is not an object");
  inference::ModelInferResponse out;
  int64_t bytes_left = limits.max_tensor_bytes;
  for (const auto& m : doc.GetObject()) {
    const absl::string_view key = View(m.name);
    const Value& v = m.value;
    if ((key == "model_name" || key == "model_version" || key == "id") && !v.IsString()) {
      return Invalid("infer response", absl::StrCat(Quoted(key), " must be a string"));
    }
    if (key == "model_name") {
      out.set_model_name(std::string(View(v)));
    } else if (key == "model_version") {
      out.set_model_version(std::string(View(v)));
    } else if (key == "id") {
      out.set_id(std::string(View(v)));
    } else if (key == "parameters") {
      const Value* unused = nullptr;
      RETURN_IF_ERROR(ReadParameters(v, "infer response", "", out.mutable_parameters(), &unused));
    } else if (key == "outputs") {
      if (!v.IsArray()) return Invalid("infer response", "\"outputs\" must be an array");
      for (const Value& o : v.GetArray()) {
        const std::string where = absl::StrCat("output ", out.outputs_size());
        std::string* raw = out.add_raw_output_contents();
        RETURN_IF_ERROR(ParseTensor(o, where, &binary, &bytes_left, out.add_outputs(), raw));
      }
    } else {
      return Invalid("infer response", absl::StrCat("unknown key ", Quoted(key)));
    }
  }
  return out;
}

std::string HttpErrorBody(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("error");
  WriteString(message, &w);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string HttpErrorMessage(absl::string_view body) {
  rapidjson::Document doc;
  if (ParseJson(body, "error", &doc).ok() && doc.IsObject()) {
    auto it = doc.FindMember("error");
    if (it != doc.MemberEnd() && it->value.IsString()) return std::string(View(it->value));
  }
  return std::string(body);
}

}  // namespace reprise::server
