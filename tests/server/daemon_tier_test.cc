// df11d with more models than its device budget (--max-model-bytes; CPU backend): the models
// start in tiers with health SERVING, a request that can never be served (pinned models in the
// way) ends at once, a request brings its model in (request log line says it waited), ListModels shows each tier, Admin
// SetModelTier demotes, promotes and pins (with clear errors for pinned, unknown and bad values), the config file's
// "pinned", and the tier metrics.
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/model/model.h"
#include "tests/server/daemon_test_util.h"
#include "tests/server/metrics_test_util.h"

namespace df11::test {
namespace {

std::map<std::string, pb::ModelInfo> List(pb::Generation::Stub& stub) {
  grpc::ClientContext ctx;
  pb::ListModelsResponse response;
  EXPECT_TRUE(stub.ListModels(&ctx, pb::ListModelsRequest(), &response).ok());
  std::map<std::string, pb::ModelInfo> out;
  for (const auto& m : response.models()) out[m.name()] = m;
  return out;
}

grpc::Status SetTier(pb::Admin::Stub& admin, const std::string& name, pb::ModelTier tier, std::optional<bool> pinned,
                     pb::SetModelTierResponse* response) {
  grpc::ClientContext ctx;
  pb::SetModelTierRequest request;
  request.set_name(name);
  request.set_tier(tier);
  if (pinned) request.set_pinned(*pinned);
  return admin.SetModelTier(&ctx, request, response);
}

TEST(DaemonTierTest, ModelsBeyondTheBudgetServeFromTiers) {
  ScopedTempDir tmp("srvtier");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        WriteTinyModel(tmp.path() + "/" + std::string(1, char('a' + i)), {.seed = static_cast<uint32_t>(i + 1)}).ok());
  }
  auto model = Model::Load(tmp.path() + "/a");
  ASSERT_TRUE(model.ok());
  const uint64_t bytes = (*model)->load_report().weight_bytes + (*model)->load_report().scratch_bytes;
  {
    std::ofstream config(tmp.path() + "/models.json");
    config << R"({"models": [{"name": "a", "path": ")" << tmp.path() << R"(/a", "pinned": true},
                             {"name": "b", "path": ")"
           << tmp.path() << R"(/b"},
                             {"name": "c", "path": ")"
           << tmp.path() << R"(/c"}]})";
  }
  const int metrics_port = FreePort();
  Daemon d({"--config", tmp.path() + "/models.json", "--max-model-bytes", std::to_string(bytes * 3 / 2),
            "--max-host-model-bytes", std::to_string(bytes * 3), "--metrics-address",
            "127.0.0.1:" + std::to_string(metrics_port)},
           tmp.path());
  auto channel = d.Channel();
  ASSERT_TRUE(WaitServing(channel)) << d.LogText();
  for (const char* m : {"a", "b", "c"}) EXPECT_EQ(Health(channel, m), 1) << m << " is SERVING in any tier";
  auto stub = pb::Generation::NewStub(channel);
  auto admin = pb::Admin::NewStub(channel);
  auto models = List(*stub);
  EXPECT_EQ(models["a"].tier(), pb::MODEL_TIER_RESIDENT);
  EXPECT_TRUE(models["a"].pinned());
  EXPECT_EQ(models["b"].tier(), pb::MODEL_TIER_HOST);
  EXPECT_EQ(models["c"].tier(), pb::MODEL_TIER_HOST);

  // "a" is pinned and only one model fits: "c" can never come in, so its request ends at once,
  // saying why.
  {
    const StreamResult r = Collect(*stub, TextRequest("c", "hi", 2));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("pinned"), std::string::npos) << r.status.error_message();
  }
  pb::SetModelTierResponse response;
  grpc::Status s = SetTier(*admin, "a", pb::MODEL_TIER_DISK, std::nullopt, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("pinned"), std::string::npos) << s.error_message();
  EXPECT_EQ(SetTier(*admin, "zz", pb::MODEL_TIER_HOST, std::nullopt, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(SetTier(*admin, "a", static_cast<pb::ModelTier>(99), std::nullopt, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Unpin and demote in one call; then a request brings "c" in.
  s = SetTier(*admin, "a", pb::MODEL_TIER_HOST, false, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model().tier(), pb::MODEL_TIER_HOST);
  EXPECT_FALSE(response.model().pinned());
  EXPECT_TRUE(Collect(*stub, TextRequest("c", "hi", 3)).status.ok());
  models = List(*stub);
  EXPECT_EQ(models["c"].tier(), pb::MODEL_TIER_RESIDENT);
  // Promote "b" by Admin: "c" (idle) leaves for the host tier.
  s = SetTier(*admin, "b", pb::MODEL_TIER_RESIDENT, true, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model().tier(), pb::MODEL_TIER_RESIDENT);
  EXPECT_TRUE(response.model().pinned());
  models = List(*stub);
  EXPECT_EQ(models["c"].tier(), pb::MODEL_TIER_HOST);

  const std::string metrics = testing::HttpGet(metrics_port, "/metrics").value_or("");
  EXPECT_NE(metrics.find(R"(df11_model_promotions_total{model="c",reason="request",result="ok"} 1)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(df11_model_promotions_total{model="b",reason="admin",result="ok"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(df11_model_demotions_total{model="a",reason="admin",tier="host"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(df11_model_demotions_total{model="c",reason="capacity",tier="host"} 1)"),
            std::string::npos);
  EXPECT_NE(metrics.find(R"(df11_model_tier{model="b",tier="resident",pinned="true"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(df11_model_promotion_seconds_count{model="c"} 1)"), std::string::npos);
  EXPECT_NE(
      metrics.find("df11_model_host_tier_bytes{model=\"a\"} " + std::to_string((*model)->load_report().weight_bytes)),
      std::string::npos);
  EXPECT_NE(d.LogText().find("waited_for_promotion=true"), std::string::npos) << d.LogText();
  EXPECT_NE(d.LogText().find("model_promoted"), std::string::npos);
}

}  // namespace
}  // namespace df11::test
