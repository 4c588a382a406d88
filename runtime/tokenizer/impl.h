// TokenizerImpl: the loaded state behind df11::Tokenizer (runtime/tokenizer/tokenizer.h) and the two
// entry points the rest of the tokenizer code shares: building from JSON, and decoding a window
// of token strings (used by Decode and by IncrementalDetokenizer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/added_tokens.h"
#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/components.h"

namespace df11::tokenizer_internal {

struct TokenizerImpl {
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  std::unique_ptr<Normalizer> normalizer;         // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;    // may be null
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // may be null: tokens joined by " "

  std::optional<int32_t> bos_id, eos_id, pad_id;
  std::vector<int32_t> stop_ids;

  // Token string of an id as decoding sees it (added tokens first), nullopt if unknown.
  std::optional<std::string_view> TokenString(int32_t id) const;
  // The token Decode feeds to the decoders for `id`: nullopt when unknown or skipped as special.
  std::optional<std::string_view> DecodedToken(int32_t id, bool skip_special_tokens) const;
  // Runs the decoders over one window of tokens (see DecodeContext) and joins the result.
  std::string DecodeWindow(std::vector<std::string> tokens, const DecodeContext& context, DecodeState& state) const;
};

// Builds from file contents. `config_json` / `generation_config_json` may be empty (absent).
StatusOr<std::unique_ptr<TokenizerImpl>> BuildTokenizerImpl(std::string_view tokenizer_json,
                                                            std::string_view config_json,
                                                            std::string_view generation_config_json);

}  // namespace df11::tokenizer_internal
