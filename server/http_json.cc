#include "server/http_json.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "rapidjson/error/en.h"
#include "rapidjson/reader.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace reprise::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// SAX events into the document, refusing nesting past kMaxJsonDepth.
class DepthLimitedHandler {
 public:
  explicit DepthLimitedHandler(rapidjson::Document* doc) : doc_(doc) {}
  bool Null() { return doc_->Null(); }
  bool Bool(bool b) { return doc_->Bool(b); }
  bool Int(int i) { return doc_->Int(i); }
  bool Uint(unsigned u) { return doc_->Uint(u); }
  bool Int64(int64_t i) { return doc_->Int64(i); }
  bool Uint64(uint64_t u) { return doc_->Uint64(u); }
  bool Double(double d) { return doc_->Double(d); }
  // Numbers arrive as text (kParseNumbersAsStringsFlag) and are converted here with
  // std::from_chars, correctly rounded: RapidJSON 1.1.0's own conversion is either up to an ulp
  // off (default) or calls clz(0) on some zeros ("0e-31", full precision).
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    const char* const end = s + n;
    if (std::find_if(s, end, [](char c) { return !(c == '-' || (c >= '0' && c <= '9')); }) == end) {
      int64_t i = 0;
      if (auto [p, ec] = std::from_chars(s, end, i); ec == std::errc() && p == end) {
        return doc_->Int64(i);
      }
      uint64_t u = 0;
      if (auto [p, ec] = std::from_chars(s, end, u); ec == std::errc() && p == end) {
        return doc_->Uint64(u);
      }
    }
    double d = 0;
    const auto [p, ec] = std::from_chars(s, end, d);
    if (ec == std::errc::result_out_of_range) {
      // Below the smallest subnormal is zero; above the largest double is refused.
      const std::string_view text(s, n);
      if (text.find("e-") == std::string_view::npos && text.find("E-") == std::string_view::npos) {
        bad_number_ = true;
        return false;
      }
      d = s[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || p != end) {
      bad_number_ = true;
      return false;
    }
    return doc_->Double(d);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    return Valid(s, n) && doc_->String(s, n, copy);
  }
  bool StartObject() { return Enter() && doc_->StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    return Valid(s, n) && doc_->Key(s, n, copy);
  }
  bool EndObject(rapidjson::SizeType members) {
    --depth_;
    return doc_->EndObject(members);
  }
  bool StartArray() { return Enter() && doc_->StartArray(); }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return doc_->EndArray(elements);
  }
  bool too_deep() const { return too_deep_; }
  bool surrogate() const { return surrogate_; }
  bool bad_number() const { return bad_number_; }

 private:
  // The raw text is validated as UTF-8 by the reader, but RapidJSON 1.1.0 decodes the escape
  // of a lone low surrogate (backslash, u, DC00 to DFFF) into the bytes of a surrogate
  // (ED B0..BF xx), which are not UTF-8: refuse them here, or they would pass on as text that
  // no parser reads back.
  bool Valid(const char* s, rapidjson::SizeType n) {
    for (rapidjson::SizeType i = 0; i + 1 < n; ++i) {
      if (static_cast<unsigned char>(s[i]) == 0xED &&
          static_cast<unsigned char>(s[i + 1]) >= 0xA0) {
        surrogate_ = true;
        return false;
      }
    }
    return true;
  }
  bool Enter() {
    if (++depth_ > kMaxJsonDepth) too_deep_ = true;
    return !too_deep_;
  }
  rapidjson::Document* const doc_;
  int depth_ = 0;
  bool too_deep_ = false;
  bool surrogate_ = false;
  bool bad_number_ = false;
};

void WriteField(const Message& m, const FieldDescriptor* f, int index, Writer* w);

void WriteMessage(const Message& m, Writer* w) {
  const Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  w->StartObject();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      w->Key(f->name().c_str());
      if (f->is_map()) {
        // Map entries are messages of key (field 1) and value (field 2).
        w->StartObject();
        for (int j = 0; j < n; ++j) {
          const Message& entry = r->GetRepeatedMessage(m, f, j);
          const FieldDescriptor* key = entry.GetDescriptor()->field(0);
          const FieldDescriptor* value = entry.GetDescriptor()->field(1);
          std::string key_text;
          if (key->type() == FieldDescriptor::TYPE_STRING) {
            key_text = entry.GetReflection()->GetString(entry, key);
          } else {
            key_text = std::to_string(entry.GetReflection()->GetInt64(entry, key));
          }
          w->Key(key_text.data(), static_cast<rapidjson::SizeType>(key_text.size()));
          WriteField(entry, value, -1, w);
        }
        w->EndObject();
        continue;
      }
      w->StartArray();
      for (int j = 0; j < n; ++j) WriteField(m, f, j, w);
      w->EndArray();
      continue;
    }
    const bool message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if ((message || f->containing_oneof() != nullptr) && !r->HasField(m, f)) continue;
    w->Key(f->name().c_str());
    WriteField(m, f, -1, w);
  }
  w->EndObject();
}

// One value of `f` (element `index` of a repeated field, or the singular value for -1).
void WriteField(const Message& m, const FieldDescriptor* f, int index, Writer* w) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      w->Int(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      w->Int64(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      w->Uint(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      w->Uint64(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      w->Double(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      w->Double(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      w->Bool(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const std::string& name = (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
      w->String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == FieldDescriptor::TYPE_BYTES) s = absl::Base64Escape(s);
      w->String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      WriteMessage(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), w);
      break;
  }
}

}  // namespace

absl::Status ParseJson(absl::string_view text, absl::string_view what, rapidjson::Document* doc) {
  // RapidJSON's streams end at a NUL byte; JSON text never holds one (strings escape it).
  if (size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": malformed JSON at offset ", nul, ": a NUL byte"));
  }
  DepthLimitedHandler handler(doc);
  rapidjson::ParseResult result;
  auto generator = [&](rapidjson::Document&) {
    rapidjson::MemoryStream ms(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> in(ms);
    rapidjson::Reader reader;
    result = reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag |
                          rapidjson::kParseNanAndInfFlag | rapidjson::kParseNumbersAsStringsFlag>(
        in, handler);
    return !result.IsError();
  };
  doc->Populate(generator);
  if (handler.too_deep()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  if (handler.bad_number()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": malformed JSON at offset ",
                                                   result.Offset(), ": a number out of range"));
  }
  if (handler.surrogate()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": malformed JSON at offset ",
                                                   result.Offset(),
                                                   ": a \\u escape of a lone surrogate"));
  }
  if (result.IsError()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": malformed JSON at offset ",
                                                   result.Offset(), ": ",
                                                   rapidjson::GetParseError_En(result.Code())));
  }
  return absl::OkStatus();
}

std::string ProtoToJson(const Message& message) {
  rapidjson::StringBuffer buffer;
  Writer writer(buffer);
  WriteMessage(message, &writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

absl::string_view JsonTypeName(const rapidjson::Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "a value";
}

}  // namespace reprise::server
