// Stop strings over streamed text (see stop_filter.h).
#include "scheduler/stop_filter.h"

#include <algorithm>

namespace df11 {

StopFilter::StopFilter(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopFilter::Push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopFilter::Flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

}  // namespace df11
