// Fuzz target: request bytes -> inference::ModelInferRequest -> DecodeInferRequest against a
// fixed signature (FP32 [-1, 4], INT64 [-1, -1], BYTES [-1]; max_batch_size 8) -> when that
// succeeds, EncodeInferResponse on outputs shaped as a backend would return them.
#include <algorithm>
#include <string>
#include <vector>

#include "grpc_service.pb.h"
#include "server/infer_codec.h"
#include "server/model_backend.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {
namespace {

using runtime::DataType;

const server::ModelSignature& Signature() {
  static const server::ModelSignature* signature = [] {
    auto* s = new server::ModelSignature;
    s->inputs = {{"dense", DataType::kFloat32, {-1, 4}},
                 {"ids", DataType::kInt64, {-1, -1}},
                 {"text", DataType::kString, {-1}}};
    s->outputs = {{"scores", DataType::kFloat32, {-1, 4}}, {"echo", DataType::kString, {-1}}};
    return s;
  }();
  return *signature;
}

constexpr int kMaxBatchSize = 8;

}  // namespace

int FuzzInferRequest(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto decoded =
      server::DecodeInferRequest(request, Signature(), kMaxBatchSize, "model \"fuzz\" version 1");
  if (!decoded.ok()) return 0;

  // The batch is the first dimension of the first input, bounded by max_batch_size once decoded.
  int64_t batch = 1;
  if (!decoded->inputs.empty() && !decoded->inputs[0].shape.empty()) {
    batch = std::clamp<int64_t>(decoded->inputs[0].shape[0], 0, kMaxBatchSize);
  }
  std::vector<server::OutputTensor> outputs;
  server::OutputTensor scores;
  scores.name = "scores";
  scores.dtype = DataType::kFloat32;
  scores.shape = {batch, 4};
  scores.data.assign(static_cast<size_t>(batch) * 4 * sizeof(float), '\0');
  outputs.push_back(std::move(scores));
  server::OutputTensor echo;
  echo.name = "echo";
  echo.dtype = DataType::kString;
  echo.shape = {batch};
  for (int64_t i = 0; i < batch; ++i) echo.data.append("\x01\0\0\0x", 5);
  outputs.push_back(std::move(echo));

  inference::ModelInferResponse response;
  auto status = server::EncodeInferResponse(request, *decoded, "1", std::move(outputs),
                                            "model \"fuzz\" version 1", &response);
  (void)status;
  return 0;
}

}  // namespace reprise::fuzz
