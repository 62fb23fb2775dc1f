#include "server/model_upload.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/core/checked_size.h"
#include "server/client_text.h"

namespace reprise::server {
namespace fs = std::filesystem;
namespace {

constexpr absl::string_view kFilePrefix = "file:";

absl::Status Errno(absl::string_view what, const std::string& path, int err) {
  return absl::InternalError(absl::StrCat(what, " ", QuotedName(path), ": ", std::strerror(err)));
}

// Creates `dir` (mode 0700) unless it is a directory already (not a link).
absl::Status MakeDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) == 0) return absl::OkStatus();
  const int err = errno;
  struct stat st;
  if (err == EEXIST && lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  return Errno("cannot create directory", dir, err);
}

absl::Status WriteFile(const std::string& path, absl::string_view content) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create file", path, errno);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return Errno("cannot write file", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Errno("cannot write file", path, errno);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRelativePath(absl::string_view path, absl::string_view what) {
  if (path.empty() || path[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", QuotedName(path), ": the path must be relative to the model directory"));
  }
  if (path.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", QuotedName(path), ": the path contains a NUL byte"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", QuotedName(path),
                       ": every path component must be a name (no empty, \".\" or \"..\")"));
    }
    if (part.size() > NAME_MAX) {
      return absl::InternalError(absl::StrCat("failed to poll from model repository: ", what, " ",
                                              QuotedName(path), ": a component of ", part.size(),
                                              " bytes is longer than NAME_MAX (", NAME_MAX, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadParameters> ReadLoadParameters(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params) {
  LoadParameters out;
  for (const auto& [key, value] : params) {
    if (key == "config") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return absl::InvalidArgumentError("parameter \"config\" must be a string_param (JSON)");
      }
      out.config_json = value.string_param();
    } else if (absl::StartsWith(key, kFilePrefix)) {
      const std::string path = key.substr(kFilePrefix.size());
      if (absl::Status s = CheckRelativePath(path, "file override"); !s.ok()) return s;
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", QuotedName(key), " must be a bytes_param"));
      }
      out.files.push_back(UploadedFile{path, value.bytes_param()});
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", QuotedName(key),
          " is not supported (load parameters: \"config\" and \"file:<version>/<name>\")"));
    }
  }
  if (!out.files.empty() && !out.config_json.has_value()) {
    return absl::InvalidArgumentError(
        "file override parameters need a \"config\" parameter as well (the files replace the "
        "model's directory, config included)");
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const UploadedFile& a, const UploadedFile& b) { return a.path < b.path; });
  return out;
}

absl::StatusOr<std::unique_ptr<UploadArea>> UploadArea::Create(Options options) {
  if (options.root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/reprise-uploads-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return Errno("cannot create the upload directory", pattern, errno);
    }
    std::string root = pattern;
    return std::unique_ptr<UploadArea>(new UploadArea(std::move(options), std::move(root), true));
  }
  std::string root = options.root;
  if (absl::Status s = MakeDirectory(root); !s.ok()) return s;
  struct stat st;
  if (lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("repository.upload_dir ", QuotedName(root),
                     " must be a directory owned by the server's user (not a link)"));
  }
  if (chmod(root.c_str(), 0700) != 0) return Errno("cannot chmod", root, errno);
  return std::unique_ptr<UploadArea>(new UploadArea(std::move(options), std::move(root), false));
}

UploadArea::~UploadArea() {
  std::error_code ec;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& dir : dirs_) fs::remove_all(dir, ec);
  if (owns_root_) fs::remove_all(root_, ec);
}

absl::StatusOr<std::string> UploadArea::Write(std::span<const UploadedFile> files) {
  if (static_cast<int64_t>(files.size()) > options_.max_files) {
    return absl::ResourceExhaustedError(absl::StrCat("the upload has ", files.size(),
                                                     " files, over the ", options_.max_files,
                                                     " an upload may have"));
  }
  int64_t total = 0;
  for (const UploadedFile& f : files) {
    if (absl::Status s = CheckRelativePath(f.path, "file override"); !s.ok()) return s;
    if (!runtime::CheckedAdd(total, static_cast<int64_t>(f.content.size()), &total) ||
        total > options_.max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the uploaded files exceed limits.max_upload_bytes (", options_.max_bytes, " bytes)"));
    }
  }
  std::string dir = absl::StrCat(root_, "/model-XXXXXX");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(dirs_.size()) >= options_.max_uploads) {
      return absl::ResourceExhaustedError(absl::StrCat(
          options_.max_uploads,
          " uploaded models are loaded (limits.max_uploaded_models); unload one first"));
    }
    if (mkdtemp(dir.data()) == nullptr) return Errno("cannot create", dir, errno);
    dirs_.insert(dir);
  }
  for (const UploadedFile& f : files) {
    std::string path = dir;
    absl::Status status;
    std::vector<absl::string_view> parts = absl::StrSplit(f.path, '/');
    for (size_t i = 0; status.ok() && i + 1 < parts.size(); ++i) {
      absl::StrAppend(&path, "/", parts[i]);
      status = MakeDirectory(path);
    }
    if (status.ok()) status = WriteFile(absl::StrCat(path, "/", parts.back()), f.content);
    if (!status.ok()) {
      Remove(dir);
      return status;
    }
  }
  return dir;
}

void UploadArea::Remove(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dirs_.erase(dir) == 0) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace reprise::server
