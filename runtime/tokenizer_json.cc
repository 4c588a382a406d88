// JSON access with error paths for the tokenizer loaders (see tokenizer_components.h).
#include <exception>

#include "runtime/tokenizer_components.h"

namespace df11::tokenizer_internal {

StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(file + ": invalid JSON: " + e.what());
  } catch (const std::exception& e) {
    return Internal(file + ": " + e.what());
  }
}

Status JsonNode::Error(std::string_view what) const {
  std::string message = file_ + ": ";
  if (!path_.empty()) message += path_ + ": ";
  message += what;
  return InvalidArgument(std::move(message));
}

std::optional<JsonNode> JsonNode::Find(std::string_view key) const {
  if (!value_->is_object()) return std::nullopt;
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonNode(*it, file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

StatusOr<JsonNode> JsonNode::Get(std::string_view key) const {
  if (!value_->is_object()) return Error("expected an object");
  std::optional<JsonNode> child = Find(key);
  if (!child) {
    std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    return JsonNode(*value_, file_, std::move(path)).Error("missing");
  }
  return *child;
}

JsonNode JsonNode::At(size_t index) const {
  return JsonNode((*value_)[index], file_, path_ + "[" + std::to_string(index) + "]");
}

StatusOr<std::string> JsonNode::AsString() const {
  if (!value_->is_string()) return Error("expected a string");
  return value_->get<std::string>();
}

StatusOr<bool> JsonNode::AsBool() const {
  if (!value_->is_boolean()) return Error("expected true or false");
  return value_->get<bool>();
}

StatusOr<int64_t> JsonNode::AsInt() const {
  if (value_->is_number_unsigned()) {
    auto v = value_->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return Error("integer out of range");
    return static_cast<int64_t>(v);
  }
  if (!value_->is_number_integer()) return Error("expected an integer");
  return value_->get<int64_t>();
}

StatusOr<std::string> JsonNode::GetString(std::string_view key) const {
  DF11_ASSIGN_OR_RETURN(JsonNode child, Get(key));
  return child.AsString();
}

StatusOr<bool> JsonNode::GetBool(std::string_view key, std::optional<bool> fallback) const {
  if (fallback && !Find(key)) return *fallback;
  DF11_ASSIGN_OR_RETURN(JsonNode child, Get(key));
  return child.AsBool();
}

StatusOr<int64_t> JsonNode::GetInt(std::string_view key, std::optional<int64_t> fallback) const {
  if (fallback && !Find(key)) return *fallback;
  DF11_ASSIGN_OR_RETURN(JsonNode child, Get(key));
  return child.AsInt();
}

}  // namespace df11::tokenizer_internal
