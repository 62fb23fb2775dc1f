// Access control per protocol group (Triton's --grpc-restricted-protocol): a call in a
// restricted group must carry the group's header with the configured value, else UNAVAILABLE.
#ifndef REPRISE_SERVER_ACCESS_CONTROL_H_
#define REPRISE_SERVER_ACCESS_CONTROL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/grpc_config.h"
#include "grpcpp/grpcpp.h"

namespace reprise::server {

/// The groups in config::kProtocolGroups order.
enum class ProtocolGroup : int {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
  kAdmin,
};
inline constexpr int kProtocolGroupCount = 10;

/// The rules of the restricted groups. Immutable after Create; thread-safe.
class AccessControl {
 public:
  /// INVALID_ARGUMENT when a group is restricted twice.
  static absl::StatusOr<std::unique_ptr<AccessControl>> Create(
      const std::vector<config::RestrictedProtocol>& restrictions);

  /// OK when `group` is not restricted or the call's metadata has the group's header with the
  /// value; UNAVAILABLE (as Triton) naming the header otherwise. The value is compared in
  /// constant time (SHA-256 of both sides, then CRYPTO_memcmp), so neither its bytes nor its
  /// length leak through timing.
  [[nodiscard]] grpc::Status Check(const grpc::ServerContextBase& ctx, ProtocolGroup group) const;

  /// The header a call in `group` must carry (lower case); null when `group` is not restricted.
  /// For transports whose headers are not gRPC metadata (the HTTP endpoint).
  const std::string* RequiredHeader(ProtocolGroup group) const;
  /// Whether `value` is the value `group` needs (constant time, as Check); true when `group` is
  /// not restricted.
  bool Matches(ProtocolGroup group, std::string_view value) const;

 private:
  struct Rule {
    std::string header;
    std::array<uint8_t, 32> value_digest;
  };
  AccessControl() = default;
  std::array<std::optional<Rule>, kProtocolGroupCount> rules_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_ACCESS_CONTROL_H_
