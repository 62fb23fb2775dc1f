// Reading a model config into inference.ModelConfig: protobuf text format and YAML, each
// recording the line of every field it sets (config/model_config.h).
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/model_config.h"
#include "config/model_config_paths.h"
#include "config/yaml_reader.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "runtime/base/status_macros.h"

namespace reprise::config {
namespace {

namespace pb = google::protobuf;

using internal::Index;
using internal::IsPlaceholder;
using internal::Join;

// ---- protobuf text format ----

class FirstError : public pb::io::ErrorCollector {
 public:
  FirstError(const std::string& source, ConfigLocations* locations)
      : source_(source), locations_(locations) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat(source_, " line ", line + 1, " column ", column + 1, ": ", message);
  }
  void AddWarning(int line, pb::io::ColumnNumber, const std::string& message) override {
    locations_->AddUnknown(line + 1, message);
  }
  const std::string& error() const { return error_; }

 private:
  const std::string& source_;
  ConfigLocations* locations_;
  std::string error_;
};

// Records the line of every field set in `message`, from the parser's location tree.
void RecordTextLocations(const pb::Message& message, const pb::TextFormat::ParseInfoTree& tree,
                         const std::string& path, ConfigLocations* out) {
  const pb::Descriptor* d = message.GetDescriptor();
  const pb::Reflection* r = message.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const pb::FieldDescriptor* field = d->field(f);
    const std::string fpath = Join(path, field->name());
    if (field->is_repeated()) {
      const int n = r->FieldSize(message, field);
      if (n == 0) continue;
      const int first = tree.GetLocation(field, 0).line;
      if (first >= 0) out->Set(fpath, first + 1);
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
      for (int i = 0; i < n; ++i) {
        const int line = tree.GetLocation(field, i).line;
        if (line >= 0) out->Set(Index(fpath, i), line + 1);
        if (const auto* nested = tree.GetTreeForNested(field, i); nested != nullptr) {
          RecordTextLocations(r->GetRepeatedMessage(message, field, i), *nested, Index(fpath, i),
                              out);
        }
      }
      continue;
    }
    const int line = tree.GetLocation(field, -1).line;
    if (line < 0) continue;
    out->Set(fpath, line + 1);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (const auto* nested = tree.GetTreeForNested(field, -1); nested != nullptr) {
        RecordTextLocations(r->GetMessage(message, field), *nested, fpath, out);
      }
    }
  }
}

// ---- YAML ----

class YamlToProto {
 public:
  YamlToProto(const YamlReader& reader, ConfigLocations* locations)
      : r_(reader), locations_(locations) {}

  absl::Status Message(const YAML::Node& node, const std::string& path, pb::Message* out) {
    if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
    if (!node.IsMap()) return r_.Error(node, path.empty() ? "<top>" : path, "must be a mapping");
    const pb::Descriptor* d = out->GetDescriptor();
    if (IsPlaceholder(d)) return absl::OkStatus();  // refused by name later; contents unread
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return r_.Error(kv.first, path, "keys must be plain strings");
      const std::string key = kv.first.Scalar();
      const std::string fpath = Join(path, key);
      const pb::FieldDescriptor* field = d->FindFieldByName(key);
      if (field == nullptr) {
        return r_.Error(kv.first, path.empty() ? key : path,
                        absl::StrCat("unknown key \"", fpath, "\""));
      }
      locations_->Set(fpath, kv.first.Mark().line + 1);
      RETURN_IF_ERROR(Field(kv.second, fpath, field, out));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Field(const YAML::Node& node, const std::string& path,
                     const pb::FieldDescriptor* field, pb::Message* out) {
    const pb::Reflection* r = out->GetReflection();
    if (field->is_map()) {
      if (node.IsNull()) return absl::OkStatus();
      if (!node.IsMap()) return r_.Error(node, path, "must be a mapping");
      const pb::Descriptor* entry = field->message_type();
      for (const auto& kv : node) {
        pb::Message* item = r->AddMessage(out, field);
        const std::string ipath = absl::StrCat(path, "[\"", kv.first.Scalar(), "\"]");
        RETURN_IF_ERROR(Scalar(kv.first, ipath, entry->map_key(), item));
        RETURN_IF_ERROR(Value(kv.second, ipath, entry->map_value(), item));
      }
      return absl::OkStatus();
    }
    if (field->is_repeated()) {
      if (node.IsNull()) return absl::OkStatus();
      if (!node.IsSequence()) return r_.Error(node, path, "must be a list");
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string ipath = Index(path, static_cast<int>(i));
        locations_->Set(ipath, node[i].Mark().line + 1);
        RETURN_IF_ERROR(Value(node[i], ipath, field, out));
      }
      return absl::OkStatus();
    }
    return Value(node, path, field, out);
  }

  // One value of `field` (added when repeated).
  absl::Status Value(const YAML::Node& node, const std::string& path,
                     const pb::FieldDescriptor* field, pb::Message* out) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return Scalar(node, path, field, out);
    }
    const pb::Reflection* r = out->GetReflection();
    pb::Message* child =
        field->is_repeated() ? r->AddMessage(out, field) : r->MutableMessage(out, field);
    return Message(node, path, child);
  }

  absl::Status Scalar(const YAML::Node& node, const std::string& path,
                      const pb::FieldDescriptor* field, pb::Message* out) {
    if (!node.IsScalar()) return r_.Error(node, path, "must be a single value");
    const std::string& text = node.Scalar();
    const pb::Reflection* r = out->GetReflection();
    const bool rep = field->is_repeated();
    auto bad = [&](absl::string_view what) {
      return r_.Error(node, path, absl::StrCat("\"", text, "\" is not ", what));
    };
    switch (field->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
      case pb::FieldDescriptor::CPPTYPE_INT64: {
        int64_t v = 0;
        const bool is32 = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32;
        if (!absl::SimpleAtoi(text, &v) || (is32 && (v < std::numeric_limits<int32_t>::min() ||
                                                     v > std::numeric_limits<int32_t>::max()))) {
          return bad(is32 ? "a 32-bit integer" : "an integer");
        }
        if (is32) {
          rep ? r->AddInt32(out, field, static_cast<int32_t>(v))
              : r->SetInt32(out, field, static_cast<int32_t>(v));
        } else {
          rep ? r->AddInt64(out, field, v) : r->SetInt64(out, field, v);
        }
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_UINT32:
      case pb::FieldDescriptor::CPPTYPE_UINT64: {
        uint64_t v = 0;
        const bool is32 = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT32;
        if (text.empty() || text[0] == '-' || !absl::SimpleAtoi(text, &v) ||
            (is32 && v > std::numeric_limits<uint32_t>::max())) {
          return bad(is32 ? "a 32-bit integer >= 0" : "an integer >= 0");
        }
        if (is32) {
          rep ? r->AddUInt32(out, field, static_cast<uint32_t>(v))
              : r->SetUInt32(out, field, static_cast<uint32_t>(v));
        } else {
          rep ? r->AddUInt64(out, field, v) : r->SetUInt64(out, field, v);
        }
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        double v = 0;
        if (!absl::SimpleAtod(text, &v)) return bad("a number");
        if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
          rep ? r->AddDouble(out, field, v) : r->SetDouble(out, field, v);
        } else {
          rep ? r->AddFloat(out, field, static_cast<float>(v))
              : r->SetFloat(out, field, static_cast<float>(v));
        }
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_BOOL: {
        bool v = false;
        if (!YAML::convert<bool>::decode(node, v)) return bad("true or false");
        rep ? r->AddBool(out, field, v) : r->SetBool(out, field, v);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_STRING:
        rep ? r->AddString(out, field, text) : r->SetString(out, field, text);
        return absl::OkStatus();
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const pb::EnumValueDescriptor* v = field->enum_type()->FindValueByName(text);
        if (v == nullptr) {
          const bool type = field->enum_type()->full_name() == "inference.DataType";
          return r_.Error(
              node, path,
              absl::StrCat("unknown ", type ? "data type" : "value", " \"", text, "\""));
        }
        rep ? r->AddEnum(out, field, v) : r->SetEnum(out, field, v);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        break;
    }
    return r_.Error(node, path, "must be a mapping");
  }

  const YamlReader& r_;
  ConfigLocations* locations_;
};

absl::StatusOr<std::string> ReadBounded(const std::string& path, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string text(static_cast<size_t>(max_bytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than ", max_bytes, " bytes, the most a model config may be"));
  }
  return text;
}

}  // namespace

int ConfigLocations::Line(absl::string_view path) const {
  std::string p(path);
  while (true) {
    if (auto it = lines_.find(p); it != lines_.end()) return it->second;
    const size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) return 0;
    p.resize(cut);
  }
}

absl::Status ConfigLocations::Error(absl::string_view path, absl::string_view what) const {
  const int line = Line(path);
  return absl::InvalidArgumentError(
      absl::StrCat(source_, line > 0 ? absl::StrCat(" line ", line) : std::string(), ": field \"",
                   path, "\": ", what));
}

absl::StatusOr<ParsedModelConfig> ParseModelConfigText(absl::string_view text,
                                                       absl::string_view source) {
  ParsedModelConfig parsed;
  parsed.locations = ConfigLocations(std::string(source));
  const std::string src(source);
  FirstError errors(src, &parsed.locations);
  pb::TextFormat::ParseInfoTree tree;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  // Unknown fields are recorded (FirstError::AddWarning) and reported after the refusals.
  parser.AllowUnknownField(true);
  parser.SetRecursionLimit(32);
  if (!parser.ParseFromString(std::string(text), &parsed.config)) {
    return absl::InvalidArgumentError(errors.error().empty()
                                          ? absl::StrCat(source, ": not a valid model config")
                                          : errors.error());
  }
  RecordTextLocations(parsed.config, tree, "", &parsed.locations);
  return parsed;
}

absl::StatusOr<ParsedModelConfig> ParseModelConfigYaml(absl::string_view text,
                                                       absl::string_view source) {
  ParsedModelConfig parsed;
  parsed.locations = ConfigLocations(std::string(source));
  YamlReader reader{std::string(source)};
  ASSIGN_OR_RETURN(YAML::Node root, reader.Parse(text));
  try {
    YamlToProto convert(reader, &parsed.locations);
    RETURN_IF_ERROR(convert.Message(root, "", &parsed.config));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, " line ", e.mark.line + 1, ": ", e.msg));
  }
  return parsed;
}

absl::StatusOr<ParsedModelConfig> ReadModelConfigDir(const std::string& model_dir,
                                                     int64_t max_bytes) {
  namespace fs = std::filesystem;
  const fs::path text_path = fs::path(model_dir) / std::string(kModelConfigText);
  const fs::path yaml_path = fs::path(model_dir) / std::string(kModelConfigYaml);
  std::error_code ec;
  const bool has_text = fs::exists(text_path, ec);
  const bool has_yaml = fs::exists(yaml_path, ec);
  if (has_text && has_yaml) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": both ", kModelConfigText, " and ",
                                                   kModelConfigYaml,
                                                   " are present; keep one of them"));
  }
  if (!has_text && !has_yaml) {
    ParsedModelConfig empty;
    empty.locations = ConfigLocations(absl::StrCat(model_dir, " (no config file)"));
    return empty;
  }
  const std::string path = (has_text ? text_path : yaml_path).string();
  ASSIGN_OR_RETURN(std::string text, ReadBounded(path, max_bytes));
  return has_text ? ParseModelConfigText(text, path) : ParseModelConfigYaml(text, path);
}

}  // namespace reprise::config
