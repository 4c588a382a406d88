// Names of the request contract's enums (see request.h).
#include "scheduler/request.h"

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

}  // namespace df11
