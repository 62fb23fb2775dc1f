#include "server/infer_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/bool_bytes.h"
#include "runtime/core/checked_size.h"
#include "server/bytes_tensor.h"
#include "server/classification.h"
#include "server/client_text.h"

namespace reprise::server {
namespace {

using runtime::DataType;

std::string ShapeString(const google::protobuf::RepeatedField<int64_t>& shape) {
  return runtime::ShapeToString(runtime::Shape(shape.begin(), shape.end()));
}

absl::Status Invalid(absl::string_view label, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", what));
}

// Element count of a request shape, checked against the limits before anything is sized
// from it: dimensions must be >= 0, and each dimension and the product of the non-zero ones
// within max_elements (so that [0, 2^61] is refused like [1, 2^61]).
absl::StatusOr<int64_t> ElementCount(const runtime::Shape& shape, const RequestLimits& limits,
                                     absl::string_view label, absl::string_view tensor) {
  for (int64_t d : shape) {
    if (d < 0) {
      return Invalid(label, absl::StrCat("input \"", tensor, "\" has negative dimension ", d,
                                         " in shape ", runtime::ShapeToString(shape)));
    }
  }
  std::optional<int64_t> count = runtime::CheckedElementCount(shape, limits.max_elements);
  if (!count.has_value()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(label, ": input \"", tensor, "\" shape ", runtime::ShapeToString(shape),
                     " is over limits.max_tensor_elements (", limits.max_elements,
                     " elements, for each dimension and for the product of the non-zero ones)"));
  }
  return *count;
}

absl::Status RequestTooLarge(absl::string_view label, absl::string_view tensor, int64_t bytes,
                             const RequestLimits& limits) {
  return absl::ResourceExhaustedError(
      absl::StrCat(label, ": the request's input data reaches ", bytes, " bytes at input \"",
                   tensor, "\", over limits.max_request_bytes (", limits.max_request_bytes, ")"));
}

// Counts the elements of KServe's serialized BYTES form; error naming the input if it is
// malformed.
absl::StatusOr<int64_t> CountSerializedStrings(absl::string_view data, absl::string_view label,
                                               absl::string_view tensor) {
  absl::StatusOr<int64_t> count = SplitSerializedStrings(data, nullptr);
  if (!count.ok()) {
    return Invalid(label, absl::StrCat("input \"", tensor, "\" ", count.status().message()));
  }
  return count;
}

template <typename To, typename From>
absl::Status AppendConverted(const google::protobuf::RepeatedField<From>& values,
                             absl::string_view label, absl::string_view tensor,
                             absl::string_view dtype, std::string* out) {
  out->resize(values.size() * sizeof(To));
  char* p = out->data();
  for (int i = 0; i < values.size(); ++i) {
    const From v = values[i];
    if constexpr (!std::is_same_v<To, From> && std::is_integral_v<To>) {
      if (v < static_cast<From>(std::numeric_limits<To>::min()) ||
          v > static_cast<From>(std::numeric_limits<To>::max())) {
        return Invalid(label, absl::StrCat("input \"", tensor, "\" value ", v, " at index ", i,
                                           " does not fit ", dtype));
      }
    }
    const To converted = static_cast<To>(v);
    std::memcpy(p + i * sizeof(To), &converted, sizeof(To));
  }
  return absl::OkStatus();
}

// The typed contents field that holds values of `type`, or nullptr for FP16 / BF16.
const char* TypedFieldName(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "bool_contents";
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
      return "uint_contents";
    case DataType::kUInt64:
      return "uint64_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return "int_contents";
    case DataType::kInt64:
      return "int64_contents";
    case DataType::kFloat32:
      return "fp32_contents";
    case DataType::kFloat64:
      return "fp64_contents";
    case DataType::kString:
      return "bytes_contents";
    default:
      return nullptr;
  }
}

std::vector<std::pair<const char*, int>> FilledFields(const inference::InferTensorContents& c) {
  std::vector<std::pair<const char*, int>> filled;
  auto add = [&](const char* name, int size) {
    if (size > 0) filled.emplace_back(name, size);
  };
  add("bool_contents", c.bool_contents_size());
  add("int_contents", c.int_contents_size());
  add("int64_contents", c.int64_contents_size());
  add("uint_contents", c.uint_contents_size());
  add("uint64_contents", c.uint64_contents_size());
  add("fp32_contents", c.fp32_contents_size());
  add("fp64_contents", c.fp64_contents_size());
  add("bytes_contents", c.bytes_contents_size());
  return filled;
}

// Converts typed contents of one input into its raw form in `out`.
absl::Status ConvertTyped(const inference::InferTensorContents& c, DataType type,
                          absl::string_view label, absl::string_view tensor,
                          absl::string_view dtype, std::string* out) {
  switch (type) {
    case DataType::kBool: {
      out->resize(c.bool_contents_size());
      for (int i = 0; i < c.bool_contents_size(); ++i) (*out)[i] = c.bool_contents(i) ? 1 : 0;
      return absl::OkStatus();
    }
    case DataType::kUInt8:
      return AppendConverted<uint8_t>(c.uint_contents(), label, tensor, dtype, out);
    case DataType::kUInt16:
      return AppendConverted<uint16_t>(c.uint_contents(), label, tensor, dtype, out);
    case DataType::kUInt32:
      return AppendConverted<uint32_t>(c.uint_contents(), label, tensor, dtype, out);
    case DataType::kUInt64:
      return AppendConverted<uint64_t>(c.uint64_contents(), label, tensor, dtype, out);
    case DataType::kInt8:
      return AppendConverted<int8_t>(c.int_contents(), label, tensor, dtype, out);
    case DataType::kInt16:
      return AppendConverted<int16_t>(c.int_contents(), label, tensor, dtype, out);
    case DataType::kInt32:
      return AppendConverted<int32_t>(c.int_contents(), label, tensor, dtype, out);
    case DataType::kInt64:
      return AppendConverted<int64_t>(c.int64_contents(), label, tensor, dtype, out);
    case DataType::kFloat32:
      return AppendConverted<float>(c.fp32_contents(), label, tensor, dtype, out);
    case DataType::kFloat64:
      return AppendConverted<double>(c.fp64_contents(), label, tensor, dtype, out);
    case DataType::kString:
      for (const std::string& s : c.bytes_contents()) {
        if (absl::Status st = AppendSerializedString(s, out); !st.ok()) {
          return Invalid(label, absl::StrCat("input \"", tensor, "\": ", st.message()));
        }
      }
      return absl::OkStatus();
    default:
      return Invalid(label, absl::StrCat("input \"", tensor, "\": ", dtype,
                                         " data must be sent in raw_input_contents"));
  }
}

// The extensions a requested output's parameters ask for: classification and shared memory.
absl::StatusOr<OutputOptions> ReadOutputOptions(const InferParameters& params,
                                                const SharedMemoryRegistry* shared_memory,
                                                absl::string_view label, absl::string_view name) {
  OutputOptions options;
  const std::string where = absl::StrCat(label, ": output ", QuotedName(name));
  if (auto it = params.find("classification"); it != params.end()) {
    const inference::InferParameter& p = it->second;
    if (p.parameter_choice_case() == inference::InferParameter::kInt64Param) {
      options.classification = p.int64_param();
    } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
      options.classification = static_cast<int64_t>(
          std::min<uint64_t>(p.uint64_param(), std::numeric_limits<int64_t>::max()));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": parameter \"classification\" must be an int64_param"));
    }
    if (options.classification < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"classification\" is ",
                                                     options.classification, "; it must be >= 0"));
    }
  }
  if (UsesSharedMemory(params)) {
    if (options.classification > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": classification cannot be combined with shared memory on one output"));
    }
    absl::StatusOr<SharedMemoryRef> ref = ResolveSharedMemory(params, shared_memory, where);
    if (!ref.ok()) return ref.status();
    options.shared_memory = *std::move(ref);
  }
  return options;
}

absl::Status CheckRequestParameters(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    absl::string_view label) {
  for (const char* key : {"sequence_id", "sequence_start", "sequence_end"}) {
    auto it = params.find(key);
    if (it == params.end()) continue;
    const inference::InferParameter& p = it->second;
    const bool set = p.bool_param() || p.int64_param() != 0 || p.uint64_param() != 0 ||
                     !p.string_param().empty();
    if (set) {
      return Invalid(label,
                     absl::StrCat("parameter \"", key, "\": sequence batching is not supported"));
    }
  }
  return absl::OkStatus();
}

// A non-negative integer request parameter (int64 or uint64; a bool or string is refused).
absl::Status ReadCount(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                       const char* key, absl::string_view label, uint64_t* out) {
  auto it = params.find(key);
  if (it == params.end()) return absl::OkStatus();
  const inference::InferParameter& p = it->second;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p.int64_param() < 0) {
        return Invalid(label, absl::StrCat("parameter \"", key, "\" is ", p.int64_param(),
                                           "; it must not be negative"));
      }
      *out = static_cast<uint64_t>(p.int64_param());
      return absl::OkStatus();
    case inference::InferParameter::kUint64Param:
      *out = p.uint64_param();
      return absl::OkStatus();
    default:
      return Invalid(label, absl::StrCat("parameter \"", key, "\" must be an integer"));
  }
}

}  // namespace

absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& request,
                                                  const ModelSignature& signature,
                                                  int max_batch_size, absl::string_view label,
                                                  const RequestLimits& limits,
                                                  const SharedMemoryRegistry* shared_memory) {
  if (absl::Status s = CheckRequestParameters(request.parameters(), label); !s.ok()) return s;
  const bool raw = request.raw_input_contents_size() > 0;
  // Inputs in shared memory have no raw_input_contents entry (as with Triton's clients).
  int shm_inputs = 0;
  for (const auto& in : request.inputs()) shm_inputs += UsesSharedMemory(in.parameters()) ? 1 : 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size() - shm_inputs) {
    return Invalid(label, absl::StrCat("raw_input_contents has ", request.raw_input_contents_size(),
                                       " entries for ", request.inputs_size() - shm_inputs,
                                       " inputs not in shared memory; there must be one per "
                                       "input"));
  }
  int raw_index = 0;
  absl::flat_hash_map<absl::string_view, int> by_name;  // signature input index
  for (size_t i = 0; i < signature.inputs.size(); ++i) by_name[signature.inputs[i].name] = i;

  DecodedRequest decoded;
  if (absl::Status st =
          ReadCount(request.parameters(), "priority", label, &decoded.options.priority);
      !st.ok()) {
    return st;
  }
  uint64_t timeout_us = 0;
  if (absl::Status st = ReadCount(request.parameters(), "timeout", label, &timeout_us); !st.ok()) {
    return st;
  }
  decoded.options.timeout_us =
      static_cast<int64_t>(std::min<uint64_t>(timeout_us, std::numeric_limits<int64_t>::max()));
  decoded.inputs.resize(signature.inputs.size());
  std::vector<bool> seen(signature.inputs.size(), false);
  int64_t batch = -1;
  int64_t request_bytes = 0;  // all inputs' data so far
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    auto it = by_name.find(in.name());
    if (it == by_name.end()) {
      return Invalid(label, absl::StrCat("unexpected input ", QuotedName(in.name()),
                                         " (the model has no input of that name)"));
    }
    const int index = it->second;
    if (seen[index]) return Invalid(label, absl::StrCat("input \"", in.name(), "\" given twice"));
    seen[index] = true;
    const TensorInfo& info = signature.inputs[index];
    if (in.parameters().contains("classification")) {
      return Invalid(label, absl::StrCat("input ", QuotedName(in.name()),
                                         ": parameter \"classification\" applies to outputs"));
    }
    const bool in_shm = UsesSharedMemory(in.parameters());

    absl::StatusOr<DataType> type = DataTypeFromKServe(in.datatype());
    if (!type.ok()) {
      return Invalid(label, absl::StrCat("input \"", in.name(), "\" has unknown datatype \"",
                                         in.datatype(), "\""));
    }
    if (*type != info.dtype) {
      return Invalid(label, absl::StrCat("input \"", in.name(), "\" has datatype ", in.datatype(),
                                         ", expected ", KServeDatatypeName(info.dtype)));
    }
    if (in.shape_size() > limits.max_rank) {
      return absl::ResourceExhaustedError(
          absl::StrCat(label, ": input \"", in.name(), "\" has rank ", in.shape_size(),
                       ", over limits.max_tensor_rank (", limits.max_rank, ")"));
    }
    const runtime::Shape shape(in.shape().begin(), in.shape().end());
    bool shape_ok = shape.size() == info.shape.size();
    for (size_t d = 0; shape_ok && d < shape.size(); ++d) {
      shape_ok = info.shape[d] < 0 || info.shape[d] == shape[d];
    }
    if (!shape_ok) {
      return Invalid(label,
                     absl::StrCat("input \"", in.name(), "\" has shape ", ShapeString(in.shape()),
                                  ", expected ", runtime::ShapeToString(info.shape)));
    }
    absl::StatusOr<int64_t> count = ElementCount(shape, limits, label, in.name());
    if (!count.ok()) return count.status();
    if (max_batch_size > 0 && !shape.empty()) {
      if (shape[0] < 1) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" has batch size ", shape[0],
                                           "; a request must have at least one row"));
      }
      if (shape[0] > max_batch_size) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" batch size ", shape[0],
                                           " exceeds max_batch_size ", max_batch_size));
      }
      if (batch >= 0 && shape[0] != batch) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" has batch size ", shape[0],
                                           " but another input has ", batch));
      }
      batch = shape[0];
    }

    const auto filled = in.has_contents() ? FilledFields(in.contents())
                                          : std::vector<std::pair<const char*, int>>{};
    absl::string_view data;
    if (in_shm) {
      if (!filled.empty()) {
        return Invalid(label, absl::StrCat("unexpected 'content' provided when using shared "
                                           "memory for input tensor ",
                                           QuotedName(in.name())));
      }
      absl::StatusOr<SharedMemoryRef> ref = ResolveSharedMemory(
          in.parameters(), shared_memory, absl::StrCat(label, ": input ", QuotedName(in.name())));
      if (!ref.ok()) return ref.status();
      if (ref->byte_size > static_cast<uint64_t>(limits.max_request_bytes - request_bytes)) {
        return RequestTooLarge(label, in.name(),
                               request_bytes + static_cast<int64_t>(std::min<uint64_t>(
                                                   ref->byte_size, int64_t{1} << 62)),
                               limits);
      }
      // Copied out once: the client may change the region while the request runs, and the
      // checks below must hold for the bytes the model reads.
      std::string& copy = decoded.storage.emplace_back();
      if (absl::Status s = ref->region->Read(ref->offset, ref->byte_size, &copy); !s.ok()) {
        return s;
      }
      data = copy;
    } else if (raw) {
      if (!filled.empty()) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" sets ", filled[0].first,
                                           " but the request uses raw_input_contents; raw and "
                                           "typed contents cannot be mixed"));
      }
      data = request.raw_input_contents(raw_index++);
    } else {
      // Typed contents become raw bytes below: bound them first (at most 8 bytes a value, 4
      // more for a BYTES length prefix).
      int64_t typed_bytes = 0;
      for (const auto& [name, size] : filled) typed_bytes += int64_t{size} * 8;
      if (info.dtype == DataType::kString) {
        for (const std::string& v : in.contents().bytes_contents()) {
          typed_bytes += static_cast<int64_t>(v.size()) + 4;
        }
      }
      if (typed_bytes > limits.max_request_bytes - request_bytes) {
        return RequestTooLarge(label, in.name(), request_bytes + typed_bytes, limits);
      }
      const char* field = TypedFieldName(info.dtype);
      for (const auto& [name, size] : filled) {
        if (field == nullptr || std::strcmp(name, field) != 0) {
          return Invalid(label, field == nullptr
                                    ? absl::StrCat("input \"", in.name(), "\": ", in.datatype(),
                                                   " data must be sent in raw_input_contents")
                                    : absl::StrCat("input \"", in.name(), "\" (", in.datatype(),
                                                   ") sets ", name, "; its values go in ", field));
        }
        if (size != *count) {
          return Invalid(
              label, absl::StrCat("input \"", in.name(), "\" has ", size, " values in ", name,
                                  ", expected ", *count, " for shape ", ShapeString(in.shape())));
        }
      }
      if (filled.empty() && *count > 0) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" has no data (neither ",
                                           "raw_input_contents nor contents)"));
      }
      std::string& converted = decoded.storage.emplace_back();
      if (!filled.empty()) {
        if (absl::Status s = ConvertTyped(in.contents(), info.dtype, label, in.name(),
                                          in.datatype(), &converted);
            !s.ok()) {
          return s;
        }
      }
      data = converted;
    }

    if (static_cast<int64_t>(data.size()) > limits.max_request_bytes - request_bytes) {
      return RequestTooLarge(label, in.name(), request_bytes + static_cast<int64_t>(data.size()),
                             limits);
    }
    request_bytes += static_cast<int64_t>(data.size());
    if (info.dtype == DataType::kString) {
      absl::StatusOr<int64_t> strings = CountSerializedStrings(data, label, in.name());
      if (!strings.ok()) return strings.status();
      if (*strings != *count) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" has ", *strings,
                                           " BYTES elements, expected ", *count, " for shape ",
                                           ShapeString(in.shape())));
      }
    } else {
      // Cannot overflow: count <= max_elements <= 2^40, element size <= 8.
      const int64_t expected = *count * static_cast<int64_t>(runtime::DataTypeSize(info.dtype));
      if (static_cast<int64_t>(data.size()) != expected) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" has ", data.size(),
                                           " bytes of data, expected ", expected, " (shape ",
                                           ShapeString(in.shape()), ", ", in.datatype(), ")"));
      }
      const size_t b = info.dtype == DataType::kBool
                           ? runtime::FirstNonBoolByte(data.data(), data.size())
                           : data.size();
      if (b < data.size()) {
        return Invalid(label, absl::StrCat("input \"", in.name(), "\" BOOL element ", b, " is ",
                                           static_cast<int>(static_cast<uint8_t>(data[b])),
                                           "; BOOL bytes must be 0 or 1"));
      }
    }
    decoded.inputs[index] = InputTensor{info.name, info.dtype, shape, data};
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return Invalid(label, absl::StrCat("missing input \"", signature.inputs[i].name, "\""));
    }
  }

  decoded.batched = max_batch_size > 0;
  if (request.outputs_size() == 0) {
    for (const TensorInfo& out : signature.outputs) decoded.outputs.push_back(out.name);
    decoded.output_options.resize(decoded.outputs.size());
  } else {
    absl::flat_hash_set<absl::string_view> known;
    for (const TensorInfo& out : signature.outputs) known.insert(out.name);
    absl::flat_hash_set<absl::string_view> wanted;
    for (const auto& out : request.outputs()) {
      if (!known.contains(out.name())) {
        return Invalid(label, absl::StrCat("requested output ", QuotedName(out.name()),
                                           " is not an output of the model"));
      }
      if (!wanted.insert(out.name()).second) {
        return Invalid(label, absl::StrCat("output \"", out.name(), "\" requested twice"));
      }
      absl::StatusOr<OutputOptions> options =
          ReadOutputOptions(out.parameters(), shared_memory, label, out.name());
      if (!options.ok()) return options.status();
      decoded.outputs.push_back(out.name());
      decoded.output_options.push_back(*std::move(options));
    }
  }
  return decoded;
}

absl::Status EncodeInferResponse(const inference::ModelInferRequest& request,
                                 const DecodedRequest& decoded, absl::string_view model_version,
                                 std::vector<OutputTensor> outputs, absl::string_view label,
                                 inference::ModelInferResponse* response) {
  response->set_model_name(request.model_name());
  response->set_model_version(std::string(model_version));
  response->set_id(request.id());
  *response->mutable_parameters() = request.parameters();
  absl::flat_hash_map<absl::string_view, OutputTensor*> by_name;
  for (OutputTensor& out : outputs) by_name[out.name] = &out;
  absl::flat_hash_map<absl::string_view,
                      const inference::ModelInferRequest::InferRequestedOutputTensor*>
      requested;
  for (const auto& r : request.outputs()) requested[r.name()] = &r;

  for (size_t k = 0; k < decoded.outputs.size(); ++k) {
    const std::string& name = decoded.outputs[k];
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InternalError(
          absl::StrCat(label, ": the backend produced no output \"", name, "\""));
    }
    OutputTensor& out = *it->second;
    const OutputOptions* options =
        k < decoded.output_options.size() ? &decoded.output_options[k] : nullptr;
    if (options != nullptr && options->classification > 0) {
      absl::StatusOr<OutputTensor> classes =
          Classify(out, options->classification, decoded.batched, options->labels,
                   absl::StrCat(label, ": output ", QuotedName(name)));
      if (!classes.ok()) return classes.status();
      // Not `out = ...`: by_name's keys view out.name.
      out.dtype = classes->dtype;
      out.shape = std::move(classes->shape);
      out.data = std::move(classes->data);
    }
    absl::string_view dtype = KServeDatatypeName(out.dtype);
    if (dtype.empty()) {
      return absl::InternalError(absl::StrCat(label, ": output \"", name, "\" has type ",
                                              runtime::DataTypeName(out.dtype),
                                              " which KServe cannot express"));
    }
    if (out.dtype == DataType::kString) {
      // The serialized form, one element per element of the shape.
      absl::StatusOr<int64_t> count = SplitSerializedStrings(out.data, nullptr);
      if (!count.ok() || *count != runtime::NumElements(out.shape)) {
        return absl::InternalError(
            absl::StrCat(label, ": output \"", name, "\" is not ", runtime::NumElements(out.shape),
                         " serialized BYTES elements for shape ", runtime::ShapeToString(out.shape),
                         count.ok() ? absl::StrCat(" (it has ", *count, ")")
                                    : absl::StrCat(": ", count.status().message())));
      }
    } else {
      const int64_t expected =
          runtime::NumElements(out.shape) * static_cast<int64_t>(runtime::DataTypeSize(out.dtype));
      if (static_cast<int64_t>(out.data.size()) != expected) {
        return absl::InternalError(absl::StrCat(label, ": output \"", name, "\" has ",
                                                out.data.size(), " bytes, expected ", expected,
                                                " for shape ", runtime::ShapeToString(out.shape)));
      }
    }
    auto* tensor = response->add_outputs();
    tensor->set_name(name);
    tensor->set_datatype(std::string(dtype));
    for (int64_t d : out.shape) tensor->add_shape(d);
    if (auto r = requested.find(name); r != requested.end()) {
      *tensor->mutable_parameters() = r->second->parameters();
    }
    if (options != nullptr && options->shared_memory.has_value()) {
      const SharedMemoryRef& ref = *options->shared_memory;
      if (out.data.size() > ref.byte_size) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": shared memory size specified with the request for output ",
                         QuotedName(name), " (", ref.byte_size, " bytes) should be at least ",
                         out.data.size(), " bytes to hold the results"));
      }
      if (absl::Status s = ref.region->Write(ref.offset, out.data); !s.ok()) return s;
      response->add_raw_output_contents();  // keeps raw entries aligned with outputs
      continue;
    }
    response->add_raw_output_contents(std::move(out.data));
  }
  return absl::OkStatus();
}

}  // namespace reprise::server
