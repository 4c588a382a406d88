// Decoders of the tokenizer: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence
// (HF `tokenizers` decoders), runnable over a window of tokens for streaming: see DecodeContext.
// NOTE: every decoder must keep "window output is a prefix of the final output" unless it sets
// state.streamable = false, and must set state.held while later tokens could still change or
// extend what it produced from the window's end.
#include "runtime/tokenizer/components.h"
#include "runtime/tokenizer/unicode.h"

namespace df11::tokenizer_internal {
namespace {

std::vector<char32_t> CodePoints(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, i));
  return out;
}

std::string FromCodePoints(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], &out);
  return out;
}

class ByteLevelDecoder : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    if (state.fused) state.streamable = false;  // the byte mapping is all-or-nothing per token
    std::string bytes;
    for (const std::string& token : tokens) {
      size_t mark = bytes.size();
      bool all_mapped = true;
      for (size_t i = 0; i < token.size();) {
        int b = ByteLevelByte(NextCodePoint(token, i));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all_mapped) {
        bytes.resize(mark);
        bytes += token;
      }
    }
    size_t held = 0;
    std::string text = Utf8Lossy(bytes, !context.at_end, &held);
    if (held != 0) state.held = true;
    tokens.clear();
    tokens.push_back(std::move(text));
    state.fused = true;
  }
};

// "<0xNN>" -> NN (Rust u8::from_str_radix on the two middle bytes, which also accepts "+N").
int ByteTokenValue(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (token[3] == '+') return hex(token[4]);
  int hi = hex(token[3]), lo = hex(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    if (state.fused) state.streamable = false;
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;  // bytes of consecutive <0xNN> tokens
    auto flush = [&] {
      if (run.empty()) return;
      if (FindInvalidUtf8(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run.size(); ++i) out.emplace_back("\xEF\xBF\xBD");  // one U+FFFD per byte
      }
      run.clear();
    };
    for (std::string& token : tokens) {
      int byte = ByteTokenValue(token);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    if (context.at_end) {
      flush();
    } else if (!run.empty()) {
      state.held = true;  // the run's validity depends on the bytes still to come
    }
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void Decode(std::vector<std::string>& tokens, const DecodeContext&, DecodeState& state) const override {
    std::string joined;
    for (const std::string& t : tokens) joined += t;
    tokens.clear();
    tokens.push_back(std::move(joined));
    state.fused = true;
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    if (!state.fused) {
      for (std::string& token : tokens) token = StripToken(token);
      return;
    }
    // One string: this window's part of the text's only token.
    bool pending_start = false;
    std::string& text = tokens[0];
    std::vector<char32_t> cps = CodePoints(text);
    size_t begin = 0;
    if (context.at_start) {
      while (begin < start_ && begin < cps.size() && cps[begin] == content_) ++begin;
      pending_start = begin == cps.size() && begin < start_;
    }
    size_t end = cps.size();
    if (context.at_end) {
      for (size_t i = 0; i < stop_ && end > 0 && cps[end - 1] == content_; ++i) --end;
    } else {
      // Trailing content characters may turn out to be the text's end: hold them back.
      for (size_t i = 0; i < stop_ && end > begin && cps[end - 1] == content_; ++i) --end;
      if (end != cps.size()) state.held = true;
    }
    if (pending_start && !context.at_end) state.held = true;
    text = begin < end ? FromCodePoints(cps, begin, end) : std::string();
  }

 private:
  // HF Strip on one token (clamped where HF would panic on short tokens).
  std::string StripToken(const std::string& token) const {
    std::vector<char32_t> cps = CodePoints(token);
    size_t begin = 0, end = cps.size();
    while (begin < start_ && begin < cps.size() && cps[begin] == content_) ++begin;
    for (size_t i = 0; i < stop_ && end > 0 && cps[end - 1] == content_; ++i) --end;
    return begin < end ? FromCodePoints(cps, begin, end) : std::string();
  }
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    if (!state.fused) {
      for (std::string& token : tokens) token = pattern_.Replace(token, content_);
      return;
    }
    if (!pattern_.is_literal()) {
      state.streamable = false;  // a regex match may span windows
      tokens[0] = pattern_.Replace(tokens[0], content_);
      return;
    }
    std::string_view text = tokens[0];
    size_t keep = text.size();
    if (!context.at_end) {
      // Hold back a tail that could still become a match: the longest suffix after the last
      // match that is a proper prefix of the literal.
      std::vector<std::pair<size_t, size_t>> matches;
      pattern_.FindAll(text, matches);
      size_t after = matches.empty() ? 0 : matches.back().second;
      const std::string& lit = pattern_.literal();
      for (size_t len = std::min(lit.size() - 1, text.size() - after); len > 0; --len) {
        if (text.substr(text.size() - len) == std::string_view(lit).substr(0, len)) {
          keep = text.size() - len;
          state.held = true;
          break;
        }
      }
    }
    tokens[0] = pattern_.Replace(text.substr(0, keep), content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends)
      : replacement_(std::move(replacement)), prepends_(prepends) {}
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      // HF drops every replacement character of token 0 when a prefix is prepended on encode.
      bool first = state.fused || (context.at_start && i == 0);
      std::string out;
      std::string_view t = tokens[i];
      for (size_t pos = 0; pos < t.size();) {
        if (t.compare(pos, replacement_.size(), replacement_) == 0) {
          if (!(first && prepends_)) out.push_back(' ');
          pos += replacement_.size();
        } else {
          out.push_back(t[pos++]);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepends_;  // prepend_scheme != "never"
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void Decode(std::vector<std::string>& tokens, const DecodeContext& context, DecodeState& state) const override {
    for (const auto& step : steps_) step->Decode(tokens, context, state);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

StatusOr<char32_t> SingleChar(const JsonNode& node, std::string_view key) {
  DF11_ASSIGN_OR_RETURN(std::string s, node.GetString(key));
  if (CountCodePoints(s) != 1) return node.Error(std::string(key) + ": expected one character");
  size_t i = 0;
  return NextCodePoint(s, i);
}

}  // namespace

StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const JsonNode& node) {
  if (node.is_null()) return std::unique_ptr<Decoder>();
  DF11_ASSIGN_OR_RETURN(std::string type, node.Type());
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder);
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder);
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder);
  if (type == "Strip") {
    DF11_ASSIGN_OR_RETURN(char32_t content, SingleChar(node, "content"));
    DF11_ASSIGN_OR_RETURN(int64_t start, node.GetInt("start"));
    DF11_ASSIGN_OR_RETURN(int64_t stop, node.GetInt("stop"));
    if (start < 0 || stop < 0) return node.Error("start/stop: expected non-negative integers");
    return std::unique_ptr<Decoder>(new StripDecoder(content, static_cast<size_t>(start), static_cast<size_t>(stop)));
  }
  if (type == "Replace") {
    DF11_ASSIGN_OR_RETURN(Pattern pattern, Pattern::Parse(node));
    DF11_ASSIGN_OR_RETURN(std::string content, node.GetString("content"));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(pattern), std::move(content)));
  }
  if (type == "Metaspace") {
    DF11_ASSIGN_OR_RETURN(MetaspaceOptions options, ParseMetaspaceOptions(node));
    return std::unique_ptr<Decoder>(
        new MetaspaceDecoder(std::move(options.replacement), options.scheme != PrependScheme::kNever));
  }
  if (type == "Sequence") return ParseSequence<SequenceDecoder, Decoder>(node, "decoders", "decoder", ParseDecoder);
  return Unimplemented(node.file() + ": " + node.path() + ": decoder type \"" + type + "\" is not supported");
}

}  // namespace df11::tokenizer_internal
