#include "runtime/engine/onnx_wire.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace reprise::runtime::engine {
namespace {

// Field numbers of onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto.raw_data).
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;

// What a lifted raw_data holds in the stripped bytes: not empty, because onnx's checker counts
// an empty raw_data as no value at all (it does not compare raw_data's size with the shape);
// 16 zero bytes, a whole number of elements of every type, because libonnx's shape inference
// copies a raw_data it reads (e.g. a Reshape's shape) into a vector of whole elements.
constexpr absl::string_view kPlaceholder("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Sequential input over bytes in memory.
class MemoryInput {
 public:
  explicit MemoryInput(absl::string_view data) : data_(data) {}
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return data_.size(); }
  bool Byte(uint8_t* byte) {
    if (pos_ >= data_.size()) return false;
    *byte = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  // Appends the next `n` bytes to `out` (the caller checked that they exist).
  bool Append(uint64_t n, std::string* out) {
    out->append(data_.data() + pos_, static_cast<size_t>(n));
    pos_ += n;
    return true;
  }
  bool Skip(uint64_t n) {
    pos_ += n;
    return true;
  }

 private:
  absl::string_view data_;
  uint64_t pos_ = 0;
};

// Sequential input over a file, read with pread through a buffer; skipped ranges are not read.
class FileInput {
 public:
  FileInput(int fd, uint64_t size)
      : fd_(fd), size_(size), buffer_(std::make_unique_for_overwrite<char[]>(kBufferBytes)) {}
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  bool Byte(uint8_t* byte) {
    if (pos_ >= size_ || !Buffer()) return false;
    *byte = static_cast<uint8_t>(buffer_[pos_++ - start_]);
    return true;
  }
  bool Append(uint64_t n, std::string* out) {
    while (n > 0) {
      if (!Buffer()) return false;
      const uint64_t take = std::min<uint64_t>(n, start_ + length_ - pos_);
      out->append(buffer_.get() + (pos_ - start_), static_cast<size_t>(take));
      pos_ += take;
      n -= take;
    }
    return true;
  }
  bool Skip(uint64_t n) {
    pos_ += n;
    return true;
  }

 private:
  static constexpr size_t kBufferBytes = 256 * 1024;

  // Makes the buffer hold `pos_` (refilling from there when it does not).
  bool Buffer() {
    if (pos_ >= start_ && pos_ < start_ + length_) return true;
    start_ = pos_;
    length_ = 0;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, size_ - pos_));
    while (length_ < want) {
      const ssize_t n = ::pread(fd_, buffer_.get() + length_, want - length_,
                                static_cast<off_t>(start_ + length_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // an error, or the file shrank
      length_ += static_cast<size_t>(n);
    }
    return length_ > 0;
  }

  int fd_;
  uint64_t size_;
  std::unique_ptr<char[]> buffer_;
  uint64_t start_ = 0;   // file offset of buffer_[0]
  uint64_t length_ = 0;  // valid bytes in buffer_
  uint64_t pos_ = 0;
};

template <typename Input>
bool ReadVarint(Input& in, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t byte = 0;
    if (!in.Byte(&byte)) return false;
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendTag(uint32_t number, uint32_t type, std::string* out) {
  AppendVarint((static_cast<uint64_t>(number) << 3) | type, out);
}

// One field's header. For a length-delimited field `*length` is its payload's size (checked to
// lie before `end`) and the input stands at the payload; other fields are copied to `out` whole
// (tag included) and skipped.
template <typename Input>
bool NextField(Input& in, uint64_t end, uint32_t* number, uint32_t* type, uint64_t* length,
               std::string* out) {
  uint64_t tag = 0;
  if (!ReadVarint(in, &tag) || in.pos() > end || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) {
    return false;
  }
  *number = static_cast<uint32_t>(tag >> 3);
  *type = static_cast<uint32_t>(tag & 7);
  switch (*type) {
    case kVarint: {
      uint64_t value = 0;
      if (!ReadVarint(in, &value)) return false;
      AppendTag(*number, *type, out);
      AppendVarint(value, out);
      return in.pos() <= end;
    }
    case kFixed64:
    case kFixed32: {
      const uint64_t n = *type == kFixed64 ? 8 : 4;
      if (n > end - in.pos()) return false;
      AppendTag(*number, *type, out);
      return in.Append(n, out);
    }
    case kLengthDelimited:
      if (!ReadVarint(in, length) || in.pos() > end || *length > end - in.pos()) return false;
      return true;
    default:  // groups (deprecated, never used by onnx.proto) and invalid types
      return false;
  }
}

// Copies the current length-delimited field (header already read) to `out` unchanged.
template <typename Input>
bool CopyLengthDelimited(Input& in, uint32_t number, uint64_t length, std::string* out) {
  AppendTag(number, kLengthDelimited, out);
  AppendVarint(length, out);
  return in.Append(length, out);
}

// Rewrites one TensorProto ending at `end`; `*lifted` is the payload that the parsed tensor
// would hold, when it was cut out.
template <typename Input>
bool RewriteTensor(Input& in, uint64_t end, size_t min_bytes, std::string* out,
                   std::optional<LiftedRange>* lifted) {
  lifted->reset();
  while (in.pos() < end) {
    uint32_t number = 0, type = 0;
    uint64_t length = 0;
    if (!NextField(in, end, &number, &type, &length, out)) return false;
    if (type != kLengthDelimited) continue;
    if (number == kTensorRawData) {
      // The last occurrence wins, as in protobuf's parser.
      if (length >= min_bytes) {
        *lifted = LiftedRange{in.pos(), length};
        AppendTag(kTensorRawData, kLengthDelimited, out);
        AppendVarint(kPlaceholder.size(), out);
        out->append(kPlaceholder.data(), kPlaceholder.size());
        if (!in.Skip(length)) return false;
        continue;
      }
      lifted->reset();
    }
    if (!CopyLengthDelimited(in, number, length, out)) return false;
  }
  return in.pos() == end;
}

template <typename Input>
bool RewriteGraph(Input& in, uint64_t end, size_t min_bytes, std::string* out,
                  std::vector<std::optional<LiftedRange>>* lifted) {
  std::string tensor;
  while (in.pos() < end) {
    uint32_t number = 0, type = 0;
    uint64_t length = 0;
    if (!NextField(in, end, &number, &type, &length, out)) return false;
    if (type != kLengthDelimited) continue;
    if (number == kGraphInitializer) {
      tensor.clear();
      std::optional<LiftedRange> data;
      if (!RewriteTensor(in, in.pos() + length, min_bytes, &tensor, &data)) return false;
      lifted->push_back(data);
      AppendTag(kGraphInitializer, kLengthDelimited, out);
      AppendVarint(tensor.size(), out);
      out->append(tensor);
      continue;
    }
    if (!CopyLengthDelimited(in, number, length, out)) return false;
  }
  return in.pos() == end;
}

template <typename Input>
std::optional<LiftedModel> Lift(Input& in, size_t min_bytes) {
  if (min_bytes == 0) min_bytes = 1;  // an empty payload is never worth lifting
  LiftedModel result;
  std::string graph;
  const uint64_t end = in.size();
  while (in.pos() < end) {
    uint32_t number = 0, type = 0;
    uint64_t length = 0;
    if (!NextField(in, end, &number, &type, &length, &result.stripped)) return std::nullopt;
    if (type != kLengthDelimited) continue;
    if (number == kModelGraph) {
      graph.clear();
      if (!RewriteGraph(in, in.pos() + length, min_bytes, &graph, &result.raw_data)) {
        return std::nullopt;
      }
      AppendTag(kModelGraph, kLengthDelimited, &result.stripped);
      AppendVarint(graph.size(), &result.stripped);
      result.stripped.append(graph);
      continue;
    }
    if (!CopyLengthDelimited(in, number, length, &result.stripped)) return std::nullopt;
  }
  for (const auto& data : result.raw_data) {
    if (data.has_value()) return result;
  }
  return std::nullopt;
}

}  // namespace

std::optional<LiftedModel> LiftInitializerData(absl::string_view model, size_t min_bytes) {
  MemoryInput in(model);
  return Lift(in, min_bytes);
}

std::optional<LiftedModel> LiftInitializerDataFromFile(int fd, uint64_t size, size_t min_bytes) {
  FileInput in(fd, size);
  return Lift(in, min_bytes);
}

}  // namespace reprise::runtime::engine
