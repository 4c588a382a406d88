// JSON <-> Value and Python-compatible json.dumps (see json.h).
#include "runtime/template/jinja/json.h"

#include <algorithm>
#include <cmath>

#include "runtime/template/jinja/pystr.h"

namespace df11::jinja {
namespace {

constexpr int kMaxJsonDepth = 512;

template <typename Json>
StatusOr<Value> Convert(const Json& j, int depth) {
  if (depth > kMaxJsonDepth) return InvalidArgument("JSON nested deeper than 512 levels");
  switch (j.type()) {
    case Json::value_t::null: return Value::None();
    case Json::value_t::boolean: return Value(j.template get<bool>());
    case Json::value_t::number_integer: return Value(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Unimplemented("JSON integer " + std::to_string(u) + " does not fit in int64");
      }
      return Value(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value(j.template get<double>());
    case Json::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      if (!IsValidUtf8(s)) return InvalidArgument("JSON string is not valid UTF-8");
      return Value(s);
    }
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        DF11_ASSIGN_OR_RETURN(Value v, Convert(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!IsValidUtf8(it.key())) return InvalidArgument("JSON key is not valid UTF-8");
        DF11_ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        d.Set(Value(it.key()), std::move(v));
      }
      return Value::MakeDict(std::move(d));
    }
    default: return InvalidArgument("unsupported JSON value (binary or discarded)");
  }
}

void AppendJsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  static const char* kHex = "0123456789abcdef";
  auto hex4 = [&](unsigned v) {
    out->append("\\u");
    for (int k = 3; k >= 0; --k) out->push_back(kHex[(v >> (4 * k)) & 0xF]);
  };
  out->push_back('"');
  if (!ensure_ascii || pystr::IsAscii(s)) {
    for (char ch : s) {
      unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
            hex4(c);
          } else {
            out->push_back(ch);
          }
      }
    }
  } else {
    for (char32_t c : pystr::Decode(s)) {
      if (c < 0x80) {
        std::string one(1, static_cast<char>(c));
        std::string tmp;
        AppendJsonString(one, true, &tmp);
        out->append(tmp, 1, tmp.size() - 2);
      } else if (c < 0x10000) {
        hex4(c);
      } else {
        char32_t v = c - 0x10000;
        hex4(0xD800 | (v >> 10));
        hex4(0xDC00 | (v & 0x3FF));
      }
    }
  }
  out->push_back('"');
}

class Dumper {
 public:
  Dumper(const JsonDumpOptions& o, std::string* out) : o_(o), out_(out) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  Status Dump(const Value& v, int level) {
    if (level > kMaxJsonDepth) return InvalidArgument("ValueError: value nested too deeply for tojson");
    if (out_->size() > o_.max_bytes) return ResourceExhausted("tojson output exceeds " + std::to_string(o_.max_bytes) + " bytes");
    switch (v.kind()) {
      case Value::Kind::kNone: out_->append("null"); return Status::Ok();
      case Value::Kind::kBool: out_->append(v.as_bool() ? "true" : "false"); return Status::Ok();
      case Value::Kind::kInt: out_->append(std::to_string(v.as_int())); return Status::Ok();
      case Value::Kind::kFloat: out_->append(FloatText(v.as_double())); return Status::Ok();
      case Value::Kind::kString: AppendJsonString(v.str(), o_.ensure_ascii, out_); return Status::Ok();
      case Value::Kind::kList:
      case Value::Kind::kTuple: return DumpList(v.items(), level);
      case Value::Kind::kDict: return DumpDict(v.dict(), level);
      default:
        return TypeError(std::string("Object of type ") + v.TypeName() + " is not JSON serializable");
    }
  }

 private:
  static std::string FloatText(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return pystr::FloatRepr(d);
  }

  void Newline(int level) {
    if (!o_.indent) return;
    out_->push_back('\n');
    for (int i = 0; i < level; ++i) out_->append(*o_.indent);
  }

  Status DumpList(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_->append("[]");
      return Status::Ok();
    }
    out_->push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_->append(item_sep_);
      Newline(level + 1);
      DF11_RETURN_IF_ERROR(Dump(items[i], level + 1));
    }
    Newline(level);
    out_->push_back(']');
    return Status::Ok();
  }

  StatusOr<std::string> KeyText(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString: return k.str();
      case Value::Kind::kNone: return std::string("null");
      case Value::Kind::kBool: return std::string(k.as_bool() ? "true" : "false");
      case Value::Kind::kInt: return std::to_string(k.as_int());
      case Value::Kind::kFloat: return FloatText(k.as_double());
      default:
        return TypeError(std::string("keys must be str, int, float, bool or None, not ") + k.TypeName());
    }
  }

  Status DumpDict(const Dict& d, int level) {
    if (d.size() == 0) {
      out_->append("{}");
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (o_.sort_keys) {
      for (const auto* e : entries) {
        if (!e->first.is_string()) return Unimplemented("tojson(sort_keys=true) with non-string keys");
      }
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first.str() < b->first.str(); });
    }
    out_->push_back('{');
    bool first = true;
    for (const auto* e : entries) {
      if (!first) out_->append(item_sep_);
      first = false;
      Newline(level + 1);
      DF11_ASSIGN_OR_RETURN(std::string key, KeyText(e->first));
      AppendJsonString(key, o_.ensure_ascii, out_);
      out_->append(key_sep_);
      DF11_RETURN_IF_ERROR(Dump(e->second, level + 1));
    }
    Newline(level);
    out_->push_back('}');
    return Status::Ok();
  }

  const JsonDumpOptions& o_;
  std::string* out_;
  std::string item_sep_, key_sep_;
};

}  // namespace

StatusOr<Value> FromJson(const nlohmann::ordered_json& j) { return Convert(j, 0); }
StatusOr<Value> FromJson(const nlohmann::json& j) { return Convert(j, 0); }

Status DumpJson(const Value& v, const JsonDumpOptions& options, std::string* out) {
  Dumper dumper(options, out);
  return dumper.Dump(v, 0);
}

}  // namespace df11::jinja
