// Model tiers on the CPU backend (scheduler/residency.h): three tiny models whose weights exceed
// the device budget (max_model_bytes) start in tiers without any other flag, are served in
// rotation by concurrent clients with the same greedy tokens as when all are resident, and move
// in LRU order; pinned and busy models are never demoted; deadlines run while a request waits for
// its model; a model whose files are corrupt fails only its own requests; Admin operations; the
// KV pool follows residency; the observer's move records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "scheduler/residency.h"
#include "tests/scheduler/engine_harness.h"

namespace df11 {
namespace {

TEST(Residency, PicksLeastRecentlyUsedDemotableModels) {
  // bytes, resident, demotable, last_used
  const std::vector<ResidencyCandidate> m = {
      {100, true, true, 5}, {100, true, true, 2}, {100, true, false, 1}, {100, false, false, 0}};
  EXPECT_EQ(PickVictims(m, 100, 300), std::vector<size_t>{1});       // LRU of the demotable ones
  EXPECT_EQ(PickVictims(m, 200, 300), (std::vector<size_t>{1, 0}));  // then the next
  EXPECT_EQ(PickVictims(m, 250, 300), std::nullopt);                 // the busy one never leaves
  EXPECT_EQ(PickVictims(m, 0, 300), std::vector<size_t>{});          // fits already
  EXPECT_EQ(PickVictims(m, 1000, 0), std::vector<size_t>{});         // no budget: nothing to do
  EXPECT_EQ(DemotionTier(10, 90, 100), ModelTier::kHost);
  EXPECT_EQ(DemotionTier(11, 90, 100), ModelTier::kDisk);
  EXPECT_EQ(DemotionTier(1, 0, 0), ModelTier::kDisk);
  EXPECT_STREQ(TierName(ModelTier::kHost), "host");
}

class EngineTierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir("df11_engine_tier");
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(WriteTinyModel(Dir(kNames[i]), {.preset = "qwen3-tiny", .seed = static_cast<uint32_t>(10 + i)}).ok());
    }
    auto model = Model::Load(Dir("a"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    bytes_ = (*model)->load_report().weight_bytes + (*model)->load_report().scratch_bytes;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Dir(const std::string& m) { return dir_->path() + "/" + m; }
  static std::vector<ModelSpec> Specs(std::vector<bool> pinned = {false, false, false}) {
    std::vector<ModelSpec> specs;
    specs.reserve(3);
    for (int i = 0; i < 3; ++i) specs.push_back({.name = kNames[i], .path = Dir(kNames[i]), .pinned = pinned[i]});
    return specs;
  }
  // Room on the "device" for `models` of the three, host tier for `host` of them.
  static EngineOptions TierOptions(double models, double host) {
    EngineOptions o = SmallEngineOptions();
    o.max_model_bytes = static_cast<int64_t>(models * static_cast<double>(bytes_));
    o.max_host_model_bytes = static_cast<int64_t>(host * static_cast<double>(bytes_));
    return o;
  }
  static std::map<std::string, ModelInfo> Infos(const Engine& e) {
    std::map<std::string, ModelInfo> out;
    for (const ModelInfo& m : e.Models()) out[m.name] = m;
    return out;
  }
  // KV caches are resized by the engine thread once idle: polls up to 2 s for `blocks_ok`.
  static bool KvEventually(const Engine& e, const std::string& model, const std::function<bool(int64_t)>& blocks_ok) {
    for (int i = 0; i < 400; ++i) {
      if (blocks_ok(Infos(e)[model].kv_blocks_total)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  static constexpr const char* kNames[3] = {"a", "b", "c"};
  static ScopedTempDir* dir_;
  static uint64_t bytes_;
};
ScopedTempDir* EngineTierTest::dir_ = nullptr;
uint64_t EngineTierTest::bytes_ = 0;

// Records moves and request ends in one ordered log.
struct TierLog {
  std::mutex mu;
  std::vector<std::string> events;  // "move <model> <from>-><to> <reason>" | "end <model> <id>"
  std::vector<MoveRecord> moves;
  std::vector<RequestRecord> requests;
  EngineObserver Observer() {
    EngineObserver o;
    o.on_move = [this](const MoveRecord& m) {
      std::lock_guard lock(mu);
      moves.push_back(m);
      events.push_back("move " + m.model + " " + TierName(m.from) + "->" + TierName(m.to) + " " + m.reason);
    };
    o.on_request = [this](const RequestRecord& r) {
      std::lock_guard lock(mu);
      requests.push_back(r);
      events.push_back("end " + r.model + " " + std::to_string(r.id));
    };
    return o;
  }
  size_t Find(const std::string& prefix) {
    std::lock_guard lock(mu);
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].rfind(prefix, 0) == 0) return i;
    }
    return events.size();
  }
};

TEST_F(EngineTierTest, StartsInTiersWithoutOtherFlags) {
  for (double host : {1.0, 0.0}) {
    auto engine = Engine::Create(TierOptions(2.5, host));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    ASSERT_TRUE((*engine)->LoadModels(Specs()).ok());
    auto info = Infos(**engine);
    // Loaded last-configured first: "c" left the device when "a" came.
    EXPECT_EQ(info["a"].tier, ModelTier::kResident);
    EXPECT_EQ(info["b"].tier, ModelTier::kResident);
    EXPECT_EQ(info["c"].tier, host > 0 ? ModelTier::kHost : ModelTier::kDisk);
    EXPECT_EQ(info["c"].kv_blocks_total, 0) << "a model off the device holds no KV";
    EXPECT_GT(info["a"].kv_blocks_total, 0);
  }
}

TEST_F(EngineTierTest, PinnedModelsOverTheBudgetAreRefusedAtStart) {
  auto engine = Engine::Create(TierOptions(1.5, 1));
  ASSERT_TRUE(engine.ok());
  const Status s = (*engine)->LoadModels(Specs({true, true, false}));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.ToString();
  EXPECT_TRUE((*engine)->Models().empty());
}

TEST_F(EngineTierTest, ConcurrentClientsInRotationGetTheTokensOfAllResident) {
  // Reference: everything resident.
  auto all = Engine::Create(SmallEngineOptions());
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE((*all)->LoadModels(Specs()).ok());
  constexpr int kRounds = 3, kPerModel = 2;
  std::map<int, std::vector<int32_t>> expected;
  auto request = [](int key) { return Greedy(kNames[key % 3], TestPrompt(6 + key % 5, key), 6); };
  for (int key = 0; key < 3 * kPerModel * kRounds; ++key) expected[key] = RunAlone(**all, request(key)).tokens;

  for (double host : {3.0, 0.0}) {  // room for every image in host memory, then none (all to disk)
    TierLog log;
    auto engine = Engine::Create(TierOptions(1.5, host), log.Observer());
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->LoadModels(Specs()).ok());
    Recorder rec;
    std::vector<std::thread> clients;
    clients.reserve(3);
    for (int m = 0; m < 3; ++m) {
      clients.emplace_back([&, m] {
        for (int r = 0; r < kRounds; ++r) {
          for (int k = 0; k < kPerModel; ++k) {
            const int key = (r * kPerModel + k) * 3 + m;
            ASSERT_TRUE((*engine)->Submit(request(key), rec.Sink(key)).ok());
          }
        }
      });
    }
    for (auto& t : clients) t.join();
    ASSERT_TRUE(rec.WaitFinished(3 * kPerModel * kRounds));
    for (const auto& [key, tokens] : expected) {
      const Outcome o = rec.Get(key);
      EXPECT_TRUE(o.status.ok()) << key << ": " << o.status.ToString();
      EXPECT_EQ(o.tokens, tokens) << "request " << key << " on " << kNames[key % 3] << " (host " << host << ")";
    }
    std::lock_guard lock(log.mu);
    int promotions = 0, demotions = 0, waited = 0;
    for (const MoveRecord& m : log.moves) {
      EXPECT_TRUE(m.status.ok()) << m.model << ": " << m.status.ToString();
      EXPECT_EQ(m.promotion, m.to == ModelTier::kResident);
      if (m.promotion) {
        ++promotions;
        EXPECT_EQ(m.reason, "request");
        EXPECT_GT(m.bytes, 0u);
      } else {
        ++demotions;
        EXPECT_EQ(m.reason, "capacity");
        EXPECT_EQ(m.to, host > 0 ? ModelTier::kHost : ModelTier::kDisk);
      }
    }
    for (const RequestRecord& r : log.requests) waited += r.timings.waited_for_promotion;
    EXPECT_GE(promotions, 2) << "one model fits at a time: the other two had to come in";
    EXPECT_EQ(promotions, demotions);
    EXPECT_GE(waited, 2 * kPerModel);
  }
}

TEST_F(EngineTierTest, LeastRecentlyUsedLeavesAndPinnedStays) {
  for (bool pin_a : {false, true}) {
    TierLog log;
    auto engine = Engine::Create(TierOptions(2.5, 3), log.Observer());
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->LoadModels(Specs({pin_a, false, false})).ok());
    ASSERT_EQ(Infos(**engine)["c"].tier, ModelTier::kHost);
    // "a" is used first, then "b": "a" is the least recently used.
    EXPECT_TRUE(RunAlone(**engine, Greedy("a", TestPrompt(5, 1), 3)).status.ok());
    EXPECT_TRUE(RunAlone(**engine, Greedy("b", TestPrompt(5, 2), 3)).status.ok());
    EXPECT_TRUE(RunAlone(**engine, Greedy("c", TestPrompt(5, 3), 3)).status.ok());
    auto info = Infos(**engine);
    EXPECT_EQ(info["c"].tier, ModelTier::kResident);
    EXPECT_EQ(info["a"].tier, pin_a ? ModelTier::kResident : ModelTier::kHost) << "pinned: " << pin_a;
    EXPECT_EQ(info["b"].tier, pin_a ? ModelTier::kHost : ModelTier::kResident) << "pinned: " << pin_a;
    EXPECT_EQ(info["a"].pinned, pin_a);
  }
}

TEST_F(EngineTierTest, BusyModelsStayAndDeadlinesRunWhileWaiting) {
  TierLog log;
  auto engine = Engine::Create(TierOptions(2.5, 3), log.Observer());
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModels(Specs()).ok());
  Recorder rec;
  // "a" and "b" are busy with long requests; "c" cannot come in until one of them is idle.
  ASSERT_TRUE((*engine)->Submit(Greedy("a", TestPrompt(6, 1), 60), rec.Sink(0)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("b", TestPrompt(6, 2), 120), rec.Sink(1)).ok());
  GenerateRequest hurried = Greedy("c", TestPrompt(6, 3), 4);
  hurried.deadline = Clock::now() + std::chrono::milliseconds(1);
  ASSERT_TRUE((*engine)->Submit(std::move(hurried), rec.Sink(2)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("c", TestPrompt(6, 4), 4), rec.Sink(3)).ok());
  ASSERT_TRUE(rec.WaitFinished(4));
  EXPECT_EQ(rec.Get(2).reason, FinishReason::kDeadline);
  EXPECT_EQ(rec.Get(2).status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(rec.Get(3).status.ok()) << rec.Get(3).status.ToString();
  EXPECT_EQ(rec.Get(3).tokens.size(), 4u);
  // "c" came in only after "a" (the first to be idle) ended its request, and "a" left for it.
  const size_t a_end = log.Find("end a "), c_in = log.Find("move c host->resident");
  EXPECT_LT(a_end, c_in);
  EXPECT_LT(log.Find("move a resident->host capacity"), log.events.size());
  EXPECT_EQ(log.Find("move b "), log.events.size()) << "the busy model moved";
}

TEST_F(EngineTierTest, CorruptModelOnDiskFailsOnlyItsOwnRequests) {
  ScopedTempDir tmp("df11_tier_corrupt");
  const std::string broken = tmp.path() + "/c";
  std::filesystem::copy(Dir("c"), broken);
  std::vector<ModelSpec> specs = Specs();
  specs[2].path = broken;
  TierLog log;
  auto engine = Engine::Create(TierOptions(2.5, 0), log.Observer());
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->LoadModels(specs).ok());
  ASSERT_EQ(Infos(**engine)["c"].tier, ModelTier::kDisk);
  // Its weights file is cut short on disk after the start.
  for (const auto& f : std::filesystem::directory_iterator(broken)) {
    if (f.path().extension() == ".safetensors") std::filesystem::resize_file(f.path(), 1000);
  }
  Recorder rec;
  ASSERT_TRUE((*engine)->Submit(Greedy("c", TestPrompt(6, 1), 4), rec.Sink(0)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("c", TestPrompt(6, 2), 4), rec.Sink(1)).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy("a", TestPrompt(6, 3), 4), rec.Sink(2)).ok());
  ASSERT_TRUE(rec.WaitFinished(3));
  for (int k : {0, 1}) {
    const Outcome o = rec.Get(k);
    EXPECT_EQ(o.reason, FinishReason::kError);
    EXPECT_NE(o.status.message().find("model 'c' could not be brought to the device"), std::string::npos)
        << o.status.ToString();
    EXPECT_NE(o.status.message().find(broken), std::string::npos) << "names the file: " << o.status.ToString();
  }
  EXPECT_TRUE(rec.Get(2).status.ok()) << rec.Get(2).status.ToString();
  auto info = Infos(**engine);
  EXPECT_EQ(info["c"].tier, ModelTier::kDisk);
  EXPECT_FALSE(info["c"].tier_error.empty());
  EXPECT_EQ(info["a"].tier, ModelTier::kResident);
  // "b" (idle, least recently used) left the device to make room before the load failed; it is
  // brought back by its next request like any demoted model.
  EXPECT_EQ(info["b"].tier, ModelTier::kDisk);
  EXPECT_TRUE(RunAlone(**engine, Greedy("b", TestPrompt(6, 5), 4)).status.ok());
}

TEST_F(EngineTierTest, AdminPromoteDemotePin) {
  TierLog log;
  auto engine = Engine::Create(TierOptions(2.5, 1.5), log.Observer());
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.LoadModels(Specs()).ok());
  EXPECT_EQ(e.SetPinned("zz", true).code(), StatusCode::kNotFound);
  EXPECT_EQ(e.Demote("a", ModelTier::kResident).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Promote("zz").code(), StatusCode::kNotFound);
  ASSERT_TRUE(e.SetPinned("a", true).ok());
  const Status pinned = e.Demote("a", ModelTier::kHost);
  EXPECT_EQ(pinned.code(), StatusCode::kFailedPrecondition) << pinned.ToString();
  // "c" holds the host tier: "b" does not fit beside it.
  const Status full = e.Demote("b", ModelTier::kHost);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  ASSERT_TRUE(e.Demote("b", ModelTier::kDisk).ok());
  auto info = Infos(e);
  EXPECT_EQ(info["b"].tier, ModelTier::kDisk);
  EXPECT_TRUE(KvEventually(e, "b", [](int64_t n) { return n == 0; }));
  ASSERT_TRUE(e.Promote("c").ok());
  ASSERT_TRUE(e.Promote("b").ok()) << "needs a demotion: a is pinned, so c leaves";
  info = Infos(e);
  EXPECT_EQ(info["a"].tier, ModelTier::kResident);
  EXPECT_EQ(info["b"].tier, ModelTier::kResident);
  EXPECT_EQ(info["c"].tier, ModelTier::kHost);
  // Two resident models share the KV pool again.
  EXPECT_TRUE(KvEventually(e, "b", [](int64_t n) { return n > 0; }));
  EXPECT_TRUE(KvEventually(e, "c", [](int64_t n) { return n == 0; }));
  // Busy models are in the way for now (FAILED_PRECONDITION names them); pinned ones for good.
  Recorder rec;
  ASSERT_TRUE(e.Submit(Greedy("b", TestPrompt(6, 1), 200), rec.Sink(0)).ok());
  const Status busy = e.Promote("c");
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();
  EXPECT_NE(busy.message().find("'a'"), std::string::npos) << busy.ToString();
  EXPECT_NE(busy.message().find("'b'"), std::string::npos) << busy.ToString();
  ASSERT_TRUE(rec.WaitFinished(1));
  ASSERT_TRUE(e.SetPinned("b", true).ok());
  const Status never = e.Promote("c");
  EXPECT_EQ(never.code(), StatusCode::kResourceExhausted) << never.ToString();
  EXPECT_NE(never.message().find("pinned"), std::string::npos) << never.ToString();
  // A request for it does not wait for a room that cannot come.
  const Outcome o = RunAlone(e, Greedy("c", TestPrompt(6, 2), 3));
  EXPECT_EQ(o.reason, FinishReason::kError);
  EXPECT_EQ(o.status.code(), StatusCode::kResourceExhausted) << o.status.ToString();
  std::lock_guard lock(log.mu);
  ASSERT_FALSE(log.moves.empty());
  EXPECT_EQ(log.moves.front().reason, "admin");
}

// A promoted model keeps its host image, and a later LoadModels counts it against the host budget:
// here the budget holds one image ("a"'s), so the model demoted to make room goes to disk.
TEST_F(EngineTierTest, LaterLoadsCountTheImagesResidentModelsKeep) {
  if (!std::filesystem::exists(Dir("d"))) {
    ASSERT_TRUE(WriteTinyModel(Dir("d"), {.preset = "qwen3-tiny", .seed = 13}).ok());
  }
  auto engine = Engine::Create(TierOptions(2.5, 1.5));
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.LoadModels({Specs()[0]}).ok());
  ASSERT_TRUE(e.Demote("a", ModelTier::kHost).ok());
  ASSERT_TRUE(e.Promote("a").ok());
  ASSERT_EQ(Infos(e)["a"].tier, ModelTier::kResident);
  // "d" loads first (reverse order), then "c" needs its room.
  const Status loaded = e.LoadModels({Specs()[2], {.name = "d", .path = Dir("d")}});
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  auto info = Infos(e);
  EXPECT_EQ(info["a"].tier, ModelTier::kResident);
  EXPECT_EQ(info["c"].tier, ModelTier::kResident);
  EXPECT_EQ(info["d"].tier, ModelTier::kDisk) << "the host budget holds a's image already";
}

// A model loaded into the running engine makes room as a promotion would: the least recently used
// idle unpinned resident model leaves; with every resident model pinned, the load is refused.
TEST_F(EngineTierTest, RuntimeLoadDemotesTheLeastRecentlyUsedIdleModel) {
  for (bool pin_both : {false, true}) {
    SCOPED_TRACE(pin_both ? "both pinned" : "unpinned");
    auto engine = Engine::Create(TierOptions(2.5, 1.5));
    ASSERT_TRUE(engine.ok());
    Engine& e = **engine;
    ASSERT_TRUE(e.LoadModels({Specs()[0], Specs()[1]}).ok());
    // "b" then "a" serve a request: "b" is the least recently used.
    for (const char* m : {"b", "a"}) ASSERT_EQ(RunAlone(e, Greedy(m, TestPrompt(6, 1), 2)).tokens.size(), 2u) << m;
    if (pin_both) {
      ASSERT_TRUE(e.SetPinned("a", true).ok());
      ASSERT_TRUE(e.SetPinned("b", true).ok());
    }
    const Status loaded = e.LoadModel(Specs()[2]);
    auto info = Infos(e);
    if (pin_both) {
      EXPECT_EQ(loaded.code(), StatusCode::kResourceExhausted) << loaded.ToString();
      EXPECT_FALSE(info.contains("c"));
      EXPECT_EQ(info["a"].tier, ModelTier::kResident);
      EXPECT_EQ(info["b"].tier, ModelTier::kResident);
      continue;
    }
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    EXPECT_EQ(info["a"].tier, ModelTier::kResident);
    EXPECT_EQ(info["b"].tier, ModelTier::kHost);
    EXPECT_EQ(info["c"].tier, ModelTier::kResident);
    // Every model still answers: "b" comes back by demoting the least recently used of "a", "c",
    // to disk: "b" keeps its image, and the host budget holds only one.
    for (const char* m : {"c", "b"}) EXPECT_EQ(RunAlone(e, Greedy(m, TestPrompt(6, 2), 2)).tokens.size(), 2u) << m;
    EXPECT_EQ(Infos(e)["a"].tier, ModelTier::kDisk);
  }
}

TEST_F(EngineTierTest, KvPoolFollowsResidency) {
  auto engine = Engine::Create(TierOptions(2.5, 3));
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.LoadModels(Specs()).ok());
  const int64_t shared = Infos(e)["a"].kv_blocks_total;
  ASSERT_TRUE(e.Demote("b", ModelTier::kHost).ok());
  EXPECT_TRUE(KvEventually(e, "a", [&](int64_t n) { return n > shared; }))
      << "a demoted model's blocks return to the pool";
  EXPECT_TRUE(KvEventually(e, "b", [](int64_t n) { return n == 0; }));
}

}  // namespace
}  // namespace df11
