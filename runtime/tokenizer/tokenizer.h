// Tokenizer: text <-> token ids exactly as Hugging Face `tokenizers` computes them, loaded from a
// model directory (tokenizer.json, tokenizer_config.json, optional generation_config.json; chat
// templates are runtime/template/). CPU only. Supported: BPE models (byte-level as in Qwen2/3, Llama 3,
// Mistral-Nemo, Phi-4, DeepSeek; byte_fallback as in Gemma 3), the normalizers, pre-tokenizers,
// post-processors and decoders those files use, and added tokens. Anything else loads as
// UNIMPLEMENTED naming the component.
//
// Pipeline of Encode (same order as HF): added tokens that are not `normalized` are cut out of
// the raw text -> normalizer on each remaining piece -> `normalized` added tokens cut out ->
// pre-tokenizer -> BPE per pre-token -> post-processor (special tokens when add_special_tokens).
//
// Post-processing follows transformers rather than the file alone where they differ: when
// tokenizer_config.json sets add_bos_token/add_eos_token for a Llama/Gemma-style tokenizer (or for
// one whose post-processor is a TemplateProcessing/Sequence), the template becomes
// "[bos] $A [eos]" as configured. Decode matches `tokenizers` decode (no transformers
// clean_up_tokenization_spaces).
//
// Thread-safety: immutable after Load; Encode, Decode and all accessors may be called from any
// number of threads concurrently (the internal BPE cache is sharded and locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

namespace tokenizer_internal {
struct TokenizerImpl;
}
class IncrementalDetokenizer;

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and DIR/tokenizer_config.json (both required), and
  // DIR/generation_config.json when present. Errors name the file and
  // the JSON field, e.g. "tokenizer.json: model.merges[12]: expected string or pair";
  // NOT_FOUND for a missing required file, UNIMPLEMENTED for an unsupported component type.
  static StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& dir);
  // Same, from the files' contents (tests, fuzzing). `config_json` may be empty ("{}").
  static StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view tokenizer_json, std::string_view config_json,
                                                       std::string_view generation_config_json = {});
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // INVALID_ARGUMENT (with the byte offset) if `text` is not valid UTF-8.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;
  // Ids outside the vocabulary are dropped, as HF does. Always valid UTF-8.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Number of distinct ids: model vocabulary plus added tokens not in it (HF len(tokenizer)).
  int64_t vocab_size() const;
  // Id of a token string (added tokens first, then the model vocabulary), if any.
  std::optional<int32_t> TokenId(std::string_view token) const;
  // Token string of an id (added tokens first), if any.
  std::optional<std::string> TokenString(int32_t id) const;
  // True for ids of added tokens marked special (the ones skip_special_tokens drops).
  bool IsSpecial(int32_t id) const;

  // From tokenizer_config.json bos_token/eos_token/pad_token (string or {"content": ...}).
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  // Generation stops at any of these: eos_id, then generation_config.json eos_token_id (an int
  // or a list), without duplicates.
  const std::vector<int32_t>& stop_ids() const;

 private:
  friend class IncrementalDetokenizer;  // decodes windows of tokens through impl()
  explicit Tokenizer(std::unique_ptr<tokenizer_internal::TokenizerImpl> impl);
  const tokenizer_internal::TokenizerImpl& impl() const { return *impl_; }
  std::unique_ptr<tokenizer_internal::TokenizerImpl> impl_;
};

}  // namespace df11
