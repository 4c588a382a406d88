// Names of the request contract's enums (see request.h).
#include "scheduler/request.h"

#include <algorithm>
#include <utility>

namespace df11 {
namespace {

template <typename Enum, size_t N>
const char* NameIn(const std::pair<Enum, const char*> (&names)[N], Enum value, const char* unknown) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return unknown;
}

constexpr std::pair<FinishReason, const char*> kFinishReasonNames[] = {
    {FinishReason::kNone, "none"},   {FinishReason::kStop, "stop"},           {FinishReason::kLength, "length"},
    {FinishReason::kEos, "eos"},     {FinishReason::kCancelled, "cancelled"}, {FinishReason::kDeadline, "deadline"},
    {FinishReason::kError, "error"},
};
constexpr std::pair<RejectReason, const char*> kRejectReasonNames[] = {
    {RejectReason::kNone, "none"},
    {RejectReason::kInvalid, "invalid"},
    {RejectReason::kPromptTooLong, "too_long"},
    {RejectReason::kQueueFull, "queue_full"},
    {RejectReason::kUnavailable, "unavailable"},
    {RejectReason::kUnknownModel, "unknown_model"},
};

}  // namespace

const char* FinishReasonName(FinishReason reason) { return NameIn(kFinishReasonNames, reason, "unknown"); }
const char* RejectReasonName(RejectReason reason) { return NameIn(kRejectReasonNames, reason, "other"); }

std::vector<int32_t> WarmupPrompt(int64_t length, int64_t first_id, int64_t max_tokens, int64_t vocab,
                                  int64_t max_positions) {
  if (max_positions > 0) length = std::clamp<int64_t>(max_positions - max_tokens, 1, length);
  vocab = std::max<int64_t>(vocab, 1);
  std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(length, 1)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((first_id + static_cast<int64_t>(i)) % vocab);
  return ids;
}

}  // namespace df11
