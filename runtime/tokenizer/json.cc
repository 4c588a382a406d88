// JSON access with error paths for the tokenizer loaders (see components.h).
#include <exception>

#include "runtime/tokenizer/components.h"

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

namespace df11::tokenizer_internal {
namespace {

using Json = nlohmann::json;

// SAX handler: builds the DOM through nlohmann's own DOM builder, except for the contents of
// root.model.vocab (an object) and root.model.merges (an array), which go to BpeTables. After
// the first malformed entry it stops collecting (the load fails) but keeps the nesting in step.
class TokenizerJsonSax {
 public:
  TokenizerJsonSax(Json& root, BpeTables& tables) : dom_(root, /*allow_exceptions=*/false), tables_(tables) {}
  const std::string& parse_error_message() const { return parse_error_; }

  bool null() { return mode_ == kDom ? dom_.null() : Scalar(); }
  bool boolean(bool v) { return mode_ == kDom ? dom_.boolean(v) : Scalar(); }
  bool number_integer(Json::number_integer_t v) { return mode_ == kDom ? dom_.number_integer(v) : Integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) {
    if (mode_ == kDom) return dom_.number_unsigned(v);
    return Integer(v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
  }
  bool number_float(Json::number_float_t v, const std::string& s) {
    return mode_ == kDom ? dom_.number_float(v, s) : Scalar();
  }
  bool string(std::string& v) { return mode_ == kDom ? dom_.string(v) : String(v); }
  bool binary(Json::binary_t& v) { return mode_ == kDom ? dom_.binary(v) : Scalar(); }
  bool key(std::string& k) {
    if (mode_ != kDom) {
      pending_key_ = k;
      return true;
    }
    if (!frames_.empty()) frames_.back().key = k;
    return dom_.key(k);
  }
  bool start_object(size_t n) { return Start(/*is_array=*/false, n); }
  bool start_array(size_t n) { return Start(/*is_array=*/true, n); }
  bool end_object() { return End(/*is_array=*/false); }
  bool end_array() { return End(/*is_array=*/true); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    parse_error_ = e.what();
    return false;
  }

 private:
  enum Mode { kDom, kVocab, kMerges };
  struct Frame {
    bool is_object;
    std::string key;  // the member whose value comes next
  };

  // A container opens: model.vocab (an object) and model.merges (an array) switch to their
  // tables, anything else goes to the DOM (or, inside a table, to Open).
  bool Start(bool is_array, size_t n) {
    if (mode_ != kDom) return Open(is_array);
    if (AtModelMember(is_array ? "merges" : "vocab")) return Enter(is_array ? kMerges : kVocab);
    frames_.push_back({!is_array, {}});
    return is_array ? dom_.start_array(n) : dom_.start_object(n);
  }
  bool End(bool is_array) {
    if (mode_ != kDom) return Close();
    frames_.pop_back();
    return is_array ? dom_.end_array() : dom_.end_object();
  }
  // True when the value about to start is root.model.<member>.
  bool AtModelMember(const char* member) const {
    return frames_.size() == 2 && frames_[0].is_object && frames_[0].key == "model" && frames_[1].is_object &&
           frames_[1].key == member;
  }
  bool Enter(Mode mode) {
    mode_ = mode;
    depth_ = 0;
    failed_ = false;
    merge_index_ = 0;
    if (mode == kVocab) tables_.vocab.clear();
    if (mode == kMerges) tables_.merges.clear();
    return true;
  }
  bool Fail() {
    if (!failed_ && tables_.error.empty()) {
      tables_.error = mode_ == kVocab
                          ? "model.vocab[" + Json(pending_key_).dump(-1, ' ', false, Json::error_handler_t::replace) +
                                "]: expected an integer id in [0, 2^24)"
                          : "model.merges[" + std::to_string(merge_index_) + "]: expected string or pair";
    }
    failed_ = true;
    return true;
  }
  bool Scalar() { return failed_ ? true : Fail(); }
  bool Integer(int64_t v) {
    if (failed_) return true;
    if (mode_ != kVocab || depth_ != 0) return Fail();
    tables_.vocab.emplace_back(pending_key_, v);
    return true;
  }
  bool String(std::string& v) {
    if (failed_) return true;
    if (mode_ != kMerges) return Fail();
    if (depth_ == 0) {
      tables_.merges.push_back({merge_index_++, /*legacy=*/true, std::move(v), {}});
      return true;
    }
    if (depth_ != 1 || pair_.size() == 2) return Fail();
    pair_.push_back(std::move(v));
    return true;
  }
  bool Open(bool is_array) {
    if (!failed_ && !(mode_ == kMerges && depth_ == 0 && is_array)) Fail();
    if (!failed_) pair_.clear();
    ++depth_;
    return true;
  }
  bool Close() {
    if (depth_ == 0) {  // the end of model.vocab / model.merges: an empty placeholder in the DOM
      bool vocab = mode_ == kVocab;
      (vocab ? tables_.has_vocab : tables_.has_merges) = true;
      mode_ = kDom;
      return vocab ? dom_.start_object(0) && dom_.end_object() : dom_.start_array(0) && dom_.end_array();
    }
    --depth_;
    if (!failed_ && mode_ == kMerges && depth_ == 0) {  // end of a ["left", "right"] rule
      if (pair_.size() != 2) return Fail();
      tables_.merges.push_back({merge_index_++, /*legacy=*/false, std::move(pair_[0]), std::move(pair_[1])});
      pair_.clear();
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  BpeTables& tables_;
  std::vector<Frame> frames_;
  Mode mode_ = kDom;
  int depth_ = 0;        // containers open inside model.vocab / model.merges
  bool failed_ = false;  // a malformed entry was seen: stop collecting
  size_t merge_index_ = 0;
  std::vector<std::string> pair_;
  std::string pending_key_, parse_error_;
};

}  // namespace

StatusOr<nlohmann::json> ParseTokenizerJson(std::string_view text, BpeTables& tables) {
  Json root;
  TokenizerJsonSax sax(root, tables);
  try {
    if (!Json::sax_parse(text.begin(), text.end(), &sax)) {
      return InvalidArgument("tokenizer.json: invalid JSON: " + sax.parse_error_message());
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("tokenizer.json: invalid JSON: ") + e.what());
  }
  return root;
}

}  // namespace df11::tokenizer_internal
