#include "server/access_control.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace reprise::server {
namespace {

std::array<uint8_t, 32> Digest(const char* data, size_t size) {
  std::array<uint8_t, 32> out;
  SHA256(reinterpret_cast<const unsigned char*>(data), size, out.data());
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Create(
    const std::vector<config::RestrictedProtocol>& restrictions) {
  static_assert(std::size(config::kProtocolGroups) == kProtocolGroupCount);
  std::unique_ptr<AccessControl> ac(new AccessControl());
  for (const config::RestrictedProtocol& r : restrictions) {
    for (const std::string& name : r.groups) {
      const auto* it =
          std::find(std::begin(config::kProtocolGroups), std::end(config::kProtocolGroups), name);
      if (it == std::end(config::kProtocolGroups)) {
        return absl::InvalidArgumentError(absl::StrCat("unknown protocol group \"", name, "\""));
      }
      std::optional<Rule>& rule = ac->rules_[it - std::begin(config::kProtocolGroups)];
      if (rule.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("protocol group \"", name, "\" is restricted twice"));
      }
      rule = Rule{r.header, Digest(r.value.data(), r.value.size())};
    }
  }
  return ac;
}

grpc::Status AccessControl::Check(const grpc::ServerContextBase& ctx, ProtocolGroup group) const {
  const std::optional<Rule>& rule = rules_[static_cast<int>(group)];
  if (!rule.has_value()) return grpc::Status::OK;
  const auto [begin, end] = ctx.client_metadata().equal_range(rule->header);
  bool match = false;
  for (auto it = begin; it != end; ++it) {
    match |= Matches(group, std::string_view(it->second.data(), it->second.size()));
  }
  if (match) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("this protocol is restricted, expecting header \"", rule->header, "\""));
}

const std::string* AccessControl::RequiredHeader(ProtocolGroup group) const {
  const std::optional<Rule>& rule = rules_[static_cast<int>(group)];
  return rule.has_value() ? &rule->header : nullptr;
}

bool AccessControl::Matches(ProtocolGroup group, std::string_view value) const {
  const std::optional<Rule>& rule = rules_[static_cast<int>(group)];
  if (!rule.has_value()) return true;
  const std::array<uint8_t, 32> got = Digest(value.data(), value.size());
  return CRYPTO_memcmp(got.data(), rule->value_digest.data(), got.size()) == 0;
}

}  // namespace reprise::server
