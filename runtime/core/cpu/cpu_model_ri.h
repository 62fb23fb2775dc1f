// The CPU backend's ModelRI: a handle over the shared recorded data (task.h).
#ifndef REPRISE_RUNTIME_CORE_CPU_CPU_MODEL_RI_H_
#define REPRISE_RUNTIME_CORE_CPU_CPU_MODEL_RI_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/cpu/capture_state.h"
#include "runtime/core/cpu/task.h"
#include "runtime/core/model_ri.h"

namespace reprise::runtime::cpu {

class CpuStream;

class CpuDevice;

/// A process-unique id for streams and instances.
uint64_t NextObjectId();

/// The instance's JSON (DumpFlags semantics in model_ri.h).
std::string DumpRiJson(const RiData& data, bool verbose);

/// See ModelRI. Made at BeginCapture (top-level, owned by the capture until EndCapture hands it
/// out), by AddConditional (a child, owned by its parent) or by BuildBegin (owned by the
/// caller; build.h).
class CpuModelRI final : public ModelRI {
 public:
  CpuModelRI(CpuDevice* device, CpuModelRI* parent);
  ~CpuModelRI() override;

  uint64_t id() const override { return data_->id; }
  absl::Status ExecuteAsync(Stream* stream) override;
  /// Runs on the calling thread when the stream is idle (CpuStream::ExecuteAndWait).
  absl::Status Execute(Stream* stream) override;
  absl::StatusOr<ConditionHandle> CreateCondition(uint32_t default_value,
                                                  bool assign_default) override;
  size_t NumStreams() const override;
  absl::Status GetStreams(std::span<RiStreamInfo> out) const override;
  absl::StatusOr<size_t> NumTasks(int stream) const override;
  absl::Status GetTasks(int stream, std::span<TaskInfo> out) const override;
  std::string DumpJson(DumpFlags flags) const override;
  absl::Status SetTaskObserver(TaskObserver* observer) override;
  absl::Status BindStream(Stream* stream, StreamBinding binding) override;
  absl::Status EndTask(Stream* stream) override;
  absl::Status BuildEnd() override;
  absl::Status UnbindStream(Stream* stream) override;

  /// Makes this (new, empty, top-level) instance one being built (cpu_build.cc).
  void StartBuild();

  RiData* data() const { return data_.get(); }
  const std::shared_ptr<RiData>& shared_data() const { return data_; }
  CpuModelRI* parent() const { return parent_; }
  CpuDevice* device() const { return device_; }

  /// A new child (owned by this instance). Caller holds CaptureMutex().
  CpuModelRI* AddChild();
  /// True while a body capture fills one of the children. Caller holds CaptureMutex().
  bool AnyChildCapturing() const;

  // Guarded by CaptureMutex().
  bool capturing = false;      // a capture is filling this instance now
  bool ever_captured = false;  // a body is captured once
  /// Set when the capture that filled it ended successfully; read without the mutex.
  std::atomic<bool> sealed{false};

 private:
  // The CPU stream a launch on `stream` runs on, after the checks every launch makes; appends
  // the external events' tickets, bound now.
  absl::StatusOr<CpuStream*> LaunchStream(Stream* stream, std::vector<uint64_t>* tickets);

  absl::Status CheckSealed(absl::string_view what) const;
  /// The bound stream `stream` as a CpuStream of this build, and its index. Caller holds
  /// CaptureMutex().
  absl::StatusOr<int> BoundIndexLocked(Stream* stream, absl::string_view what) const;
  /// BuildEnd's checks of the stream graph: reachability and cycles. Caller holds
  /// CaptureMutex().
  absl::Status CheckStreamGraphLocked() const;

  CpuDevice* const device_;
  CpuModelRI* const parent_;
  std::shared_ptr<RiData> data_;
  std::vector<std::unique_ptr<CpuModelRI>> children_;
  // A built instance: its build (bound streams), kept after BuildEnd for UnbindStream.
  // Guarded by CaptureMutex().
  std::shared_ptr<CaptureState> build_;
};

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CPU_MODEL_RI_H_
