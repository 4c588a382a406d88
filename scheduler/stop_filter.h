// StopFilter: cuts generated text at the first stop string, across text deltas. Text that could
// still turn out to start a stop string is held back (never emitted if it becomes a stop).
// Given valid UTF-8 deltas, every returned string is valid UTF-8 (a held-back suffix is a prefix
// of a stop string, so it starts on a character boundary).
// Thread-compatible: one per request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace df11 {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops);

  // Adds text; returns what can be emitted now. After a stop string matched, returns the text
  // before it, sets stopped() and ignores all later input.
  std::string Push(std::string_view text);
  // No more text will come: returns everything held back (nothing after a stop).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::string pending_;             // held back: a suffix that is a proper prefix of some stop
  bool stopped_ = false;
};

}  // namespace df11
