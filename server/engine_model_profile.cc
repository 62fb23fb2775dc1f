// EngineModel::Profile: the engine's profiler (runtime/engine/profiler.h) on one loaded version.
// Kept apart from the serving path: it runs on a stream of its own and touches no session.
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/engine/profile_report.h"
#include "runtime/engine/profiler.h"
#include "server/engine_model.h"

namespace reprise::server {

absl::StatusOr<ModelProfile> EngineModel::Profile(int iterations, int top, bool eager) const {
  namespace engine = runtime::engine;
  ASSIGN_OR_RETURN(std::vector<engine::NamedTensor> inputs,
                   engine::MakeProfileInputs(*params_.model));
  engine::ProfileOptions options;
  options.iterations = iterations;
  options.replay = !eager;
  absl::StatusOr<engine::Profile> profile =
      engine::ProfileModel(*params_.model, params_.device, inputs, options, params_.label);
  if (!profile.ok()) {
    return absl::Status(profile.status().code(),
                        absl::StrCat("profile: ", profile.status().message()));
  }
  return ModelProfile{engine::ProfileTraceJson(*profile), engine::ProfileTable(*profile, top)};
}

}  // namespace reprise::server
