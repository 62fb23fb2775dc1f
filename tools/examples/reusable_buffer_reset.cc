// Scenario 4 of capture_semantics.md §7 ("enumerate and edit") as a tool: a 4 KiB reusable
// buffer filled with 0xA5 is reset by a captured asynchronous memset; the instance is
// enumerated (count first, then an array of that size) and executed, and the buffer is checked
// byte by byte. Prints three lines (the manifest counts every task of every stream).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime {
namespace {

constexpr size_t kBufferBytes = 4096;
constexpr uint8_t kPattern = 0xA5;

absl::Status RunReusableBufferReset() {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend("cpu"));
  ASSIGN_OR_RETURN(Device * device, backend->device(0));
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->CreateStream());
  ASSIGN_OR_RETURN(void* buffer, device->Malloc(kBufferBytes));
  RETURN_IF_ERROR(device->Memset(buffer, kPattern, kBufferBytes));
  std::printf("Prepared %zu-byte reusable buffer with pattern 0x%02X.\n", kBufferBytes, kPattern);

  RETURN_IF_ERROR(BeginCapture(stream.get(), CaptureMode::kGlobal));
  RETURN_IF_ERROR(stream->MemsetAsync(buffer, 0, kBufferBytes));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRI> ri, EndCapture(stream.get()));

  // Enumerate: the stream count first, then an array of that size; per stream the same.
  std::vector<RiStreamInfo> streams(ri->NumStreams());
  RETURN_IF_ERROR(ri->GetStreams(streams));
  size_t num_tasks = 0;
  for (const RiStreamInfo& info : streams) {
    ASSIGN_OR_RETURN(size_t count, ri->NumTasks(info.index));
    std::vector<TaskInfo> tasks(count);
    RETURN_IF_ERROR(ri->GetTasks(info.index, tasks));
    num_tasks += tasks.size();
  }
  std::printf("Model RI manifest: streams=%zu, tasks=%zu.\n", streams.size(), num_tasks);

  RETURN_IF_ERROR(ExecuteAsync(*ri, stream.get()));
  RETURN_IF_ERROR(stream->Synchronize());
  std::vector<uint8_t> bytes(kBufferBytes);
  RETURN_IF_ERROR(device->Memcpy(bytes.data(), buffer, kBufferBytes, CopyKind::kDeviceToHost));
  for (size_t i = 0; i < kBufferBytes; ++i) {
    if (bytes[i] != 0) {
      return absl::InternalError(absl::StrCat("byte ", i, " of the reusable buffer is ", bytes[i],
                                              " after the reset, expected 0"));
    }
  }
  std::printf("Verified %zu-byte reusable buffer reset to zero.\n", kBufferBytes);
  ri.reset();
  return device->Free(buffer);
}

}  // namespace
}  // namespace reprise::runtime

int main() {
  absl::Status status = reprise::runtime::RunReusableBufferReset();
  if (!status.ok()) {
    std::fprintf(stderr, "reusable_buffer_reset: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
