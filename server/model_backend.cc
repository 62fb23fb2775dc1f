#include "server/model_backend.h"

#include <utility>

#include "server/notification.h"

namespace reprise::server {

absl::StatusOr<std::vector<OutputTensor>> LoadedModel::Infer(std::span<const InputTensor> inputs,
                                                             std::span<const std::string> outputs,
                                                             const InferOptions& options,
                                                             InferTimings* timings) {
  absl::StatusOr<std::vector<OutputTensor>> result = absl::UnknownError("not run");
  Notification done;
  InferAsync(inputs, outputs, options,
             [&](absl::StatusOr<std::vector<OutputTensor>> r, const InferTimings& t) {
               result = std::move(r);
               if (timings != nullptr) *timings = t;
               done.Notify();
             });
  done.WaitForNotification();
  return result;
}

}  // namespace reprise::server
