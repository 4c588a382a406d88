// IncrementalDetokenizer: streaming Decode for generated tokens. Each Push returns the text that
// the new id completes; text that later ids could still change is held back (an incomplete UTF-8
// sequence, a run of <0xNN> byte tokens, a Strip decoder's trailing characters, ...). Invariant:
// Push(id_1) + ... + Push(id_n) + Flush() == tokenizer.Decode({id_1..id_n}, skip_special_tokens),
// byte for byte, and every returned string is valid UTF-8.
//
// Cost: decoding restarts after the last point where the text could be cut safely, so each Push
// decodes only a few tokens for the supported decoder chains. Chains whose output cannot be cut
// (a regex Replace or a ByteLevel decoder after Fuse) return everything from Flush instead.
// Thread-compatible: one instance per stream; the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace df11 {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Adds one generated id; returns the newly completed text (possibly empty). Unknown ids and
  // (with skip_special_tokens) special ids produce nothing, as in Decode.
  std::string Push(int32_t id);
  // Ends the stream: returns everything still held back, then resets to a fresh stream.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::string> window_;  // token strings since the last safe cut
  bool window_at_start_ = true;      // no cut yet: the window starts the text
  size_t emitted_ = 0;               // bytes of the window's decoded text already returned
  bool streamable_ = true;           // false: the decoders cannot be cut; all text comes at Flush
};

}  // namespace df11
