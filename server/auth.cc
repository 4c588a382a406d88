// API key checks (see auth.h).
#include "server/auth.h"

#include <fstream>

namespace df11::server {
namespace {

bool AnyEquals(const std::vector<std::string>& keys, std::string_view candidate) {
  bool found = false;
  for (const auto& k : keys) found |= ConstantTimeEquals(k, candidate);  // no early exit
  return found;
}

Status CheckKey(const std::string& key, const std::string& where) {
  if (key.empty()) return InvalidArgument(where + ": empty API key");
  for (unsigned char c : key) {
    if (c <= 0x20 || c == 0x7f) return InvalidArgument(where + ": API key contains a space or control character");
  }
  return Status();
}

Status ReadKeys(const std::string& path, std::vector<std::string>* keys) {
  if (path.empty()) return Status();
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open API key file");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    DF11_RETURN_IF_ERROR(CheckKey(line, path + ":" + std::to_string(n)));
    keys->push_back(line);
  }
  return Status();
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  return diff == 0;
}

StatusOr<ApiKeys> ApiKeys::Load(std::vector<std::string> user_keys, const std::string& user_keys_file,
                                std::vector<std::string> admin_keys, const std::string& admin_keys_file) {
  ApiKeys keys;
  for (size_t i = 0; i < user_keys.size(); ++i) DF11_RETURN_IF_ERROR(CheckKey(user_keys[i], "--api-key #" + std::to_string(i + 1)));
  for (size_t i = 0; i < admin_keys.size(); ++i) DF11_RETURN_IF_ERROR(CheckKey(admin_keys[i], "--admin-api-key #" + std::to_string(i + 1)));
  keys.user_keys_ = std::move(user_keys);
  keys.admin_keys_ = std::move(admin_keys);
  DF11_RETURN_IF_ERROR(ReadKeys(user_keys_file, &keys.user_keys_));
  DF11_RETURN_IF_ERROR(ReadKeys(admin_keys_file, &keys.admin_keys_));
  return keys;
}

Status ApiKeys::Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, bool admin) const {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return CheckBearer(std::nullopt, admin);
  return CheckBearer(std::string_view(it->second.data(), it->second.size()), admin);
}

Status ApiKeys::CheckBearer(std::optional<std::string_view> authorization, bool admin) const {
  const bool need = admin ? enabled() : !user_keys_.empty();
  if (!need) return Status();
  if (!authorization) return Status(StatusCode::kUnauthenticated, "missing 'authorization: Bearer <key>' metadata");
  std::string_view value = *authorization;
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || value.substr(0, kBearer.size()) != kBearer) {
    return Status(StatusCode::kUnauthenticated, "authorization metadata must be 'Bearer <key>'");
  }
  std::string_view key = value.substr(kBearer.size());
  bool ok = AnyEquals(admin_keys_, key);
  if (admin) {
    if (admin_keys_.empty()) ok |= AnyEquals(user_keys_, key);
  } else {
    ok |= AnyEquals(user_keys_, key);
  }
  if (!ok) return Status(StatusCode::kUnauthenticated, admin ? "invalid admin API key" : "invalid API key");
  return Status();
}

}  // namespace df11::server
