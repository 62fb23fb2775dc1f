// Model upload over RepositoryModelLoad: the `config` and `file:<path>` parameters, and the
// private directory where uploaded model files live while their model is loaded.
#ifndef REPRISE_SERVER_MODEL_UPLOAD_H_
#define REPRISE_SERVER_MODEL_UPLOAD_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"
#include "grpc_service.pb.h"

namespace reprise::server {

/// One file of a load's file override: `path` is relative to the model's directory
/// ("1/model.onnx"); `content` is borrowed from the request, which outlives the load.
struct UploadedFile {
  std::string path;
  absl::string_view content;
};

/// What a RepositoryModelLoad's parameters ask for.
struct LoadParameters {
  std::optional<std::string> config_json;  // `config`: a JSON ModelConfig
  std::vector<UploadedFile> files;         // `file:<path>`, by path
};

/// Reads `config` (string_param) and `file:<path>` (bytes_param) and checks each path
/// (CheckRelativePath). INVALID_ARGUMENT for another key, a wrong parameter type, or files
/// without `config` (the override replaces the whole model directory, so it needs a config).
absl::StatusOr<LoadParameters> ReadLoadParameters(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params);

/// Checks a path below a model directory: relative, every '/'-separated component non-empty,
/// not "." or "..", without NUL. INVALID_ARGUMENT naming `what`, except for a component longer
/// than NAME_MAX: INTERNAL "failed to poll from model repository" (Triton's answer, where the
/// file system refuses the name).
absl::Status CheckRelativePath(absl::string_view path, absl::string_view what);

/// The server's directory for uploaded models: each upload gets a fresh subdirectory (mode
/// 0700), removed when its model is unloaded or replaced. Never inside a model repository.
/// Thread-safe.
class UploadArea {
 public:
  struct Options {
    std::string root;                       // empty: a new directory under $TMPDIR
    int64_t max_bytes = int64_t{64} << 20;  // the files of one upload together
    int max_uploads = 16;                   // upload directories alive at once
    int max_files = 1024;                   // files in one upload
  };
  /// Makes (or takes) `root`, mode 0700. An existing root must be a directory of this user, not
  /// a symbolic link. INVALID_ARGUMENT / INTERNAL otherwise.
  static absl::StatusOr<std::unique_ptr<UploadArea>> Create(Options options);
  /// Removes every upload directory, and the root when this object made it.
  ~UploadArea();
  UploadArea(const UploadArea&) = delete;
  UploadArea& operator=(const UploadArea&) = delete;

  /// Writes `files` into a new directory and returns its path. Paths are checked again; the
  /// total size against max_bytes (RESOURCE_EXHAUSTED), as are max_uploads and max_files.
  /// Nothing is left behind on failure.
  absl::StatusOr<std::string> Write(std::span<const UploadedFile> files);
  /// Removes a directory returned by Write (anything else is ignored).
  void Remove(const std::string& dir);

  const std::string& root() const { return root_; }
  int max_uploads() const { return options_.max_uploads; }

 private:
  UploadArea(Options options, std::string root, bool owns_root)
      : options_(std::move(options)), root_(std::move(root)), owns_root_(owns_root) {}

  const Options options_;
  const std::string root_;
  const bool owns_root_;
  std::mutex mu_;
  std::set<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_UPLOAD_H_
