// EndRequest (scheduler/model_slot.h): the one routine that ends a request, used by a model slot
// and by the engine for a request whose model was unloaded before it arrived. The final event, the
// observer's record and the engine's counters must agree whichever way the request ended.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "scheduler/model_slot.h"

namespace df11 {
namespace {

TEST(EndRequest, FinalEventRecordAndCountersOfAWaitingRequest) {
  EngineCounters counters;
  counters.waiting = 1;  // as Submit leaves them
  counters.in_flight = 1;
  std::optional<RequestRecord> record;
  EngineObserver observer;
  observer.on_request = [&](const RequestRecord& r) { record = r; };
  std::optional<RequestEvent> final_event;
  int64_t in_flight_at_event = -1;
  GenerateRequest request;
  request.model = "m";
  request.prompt_tokens = {1, 2, 3};
  request.client_request_id = "client-7";
  auto seq = std::make_unique<Sequence>(
      7, request,
      [&](RequestEvent&& e) {
        in_flight_at_event = counters.in_flight.load();
        final_event = std::move(e);
      },
      nullptr);

  EndRequest(*seq, FinishReason::kCancelled, Status(StatusCode::kCancelled, "model 'm' was unloaded"), "m", counters,
             observer);

  ASSERT_TRUE(final_event.has_value());
  EXPECT_TRUE(final_event->finished);
  EXPECT_EQ(final_event->id, 7u);
  EXPECT_EQ(final_event->finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(final_event->status.code(), StatusCode::kCancelled);
  EXPECT_EQ(final_event->status.message(), "model 'm' was unloaded");
  EXPECT_EQ(final_event->usage.prompt_tokens, 3);
  EXPECT_EQ(final_event->usage.generated_tokens, 0);
  EXPECT_GE(final_event->timings.total_seconds, 0.0);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->model, "m");
  EXPECT_EQ(record->id, 7u);
  EXPECT_EQ(record->client_request_id, "client-7");
  EXPECT_EQ(record->finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(record->usage.prompt_tokens, 3);
  EXPECT_EQ(counters.waiting.load(), 0);  // never admitted: it leaves the waiting count
  EXPECT_EQ(counters.in_flight.load(), 0);
  EXPECT_EQ(in_flight_at_event, 0);  // a client that saw the final event sees the count
}

}  // namespace
}  // namespace df11
