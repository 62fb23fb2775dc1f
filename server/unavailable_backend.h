// The backend of reprise-server until the engine (runtime/engine) is plugged in: it loads
// nothing, so every model shows UNAVAILABLE with a reason that says why. It never pretends to
// serve a model it cannot run.
#ifndef REPRISE_SERVER_UNAVAILABLE_BACKEND_H_
#define REPRISE_SERVER_UNAVAILABLE_BACKEND_H_

#include "absl/strings/str_cat.h"
#include "server/model_backend.h"

namespace reprise::server {

/// Refuses every load with UNIMPLEMENTED. Thread-safe (stateless).
class UnavailableBackend final : public ModelBackend {
 public:
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const LoadSpec& spec) override {
    return absl::UnimplementedError(
        absl::StrCat("no inference engine is linked into this reprise-server build; cannot run \"",
                     spec.model_path, "\""));
  }
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_UNAVAILABLE_BACKEND_H_
