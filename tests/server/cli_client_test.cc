// The df11 client commands against the real df11d: generate (text, --tokens, --chat), models,
// health, bench --json; and their errors (exit codes, messages).
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/format/compress.h"
#include "tests/server/daemon_test_util.h"

namespace df11::test {
namespace {

struct CliRun {
  int code;
  std::string out;
};

// Runs `df11 ARGS` (stdout captured, stderr merged when `merge`).
CliRun Df11(const std::string& args, bool merge = false) {
  std::string cmd = std::string(DF11_CLI_PATH) + " " + args + (merge ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A model whose load warned: the daemon logs each warning (model_load_warning) and counts them in
// model_ready, and `df11 models` shows them (table and --json). The warning: a DF11 pattern_dict
// entry that matches no unit.
TEST(CliClient, ModelsShowTheLoadsWarnings) {
  ScopedTempDir tmp("srvwarn");
  ASSERT_TRUE(WriteTinyModel(tmp.path() + "/m").ok());
  ASSERT_TRUE(CompressCheckpoint(tmp.path() + "/m", tmp.path() + "/d", {}).ok());
  EditModelConfig(tmp.path() + "/d", [](nlohmann::json& c) {
    c["dfloat11_config"]["pattern_dict"]["no\\.such\\.module"] = nlohmann::json::array();
  });
  Daemon d({"--model", "warned=" + tmp.path() + "/d"}, tmp.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  const std::string addr = " --addr " + d.address();
  CliRun models = Df11("models --json" + addr);
  ASSERT_EQ(models.code, 0);
  auto list = nlohmann::json::parse(models.out);
  ASSERT_EQ(list.size(), 1u);
  ASSERT_EQ(list[0]["load_warnings"].size(), 1u) << models.out;
  const std::string warning = list[0]["load_warnings"][0];
  EXPECT_NE(warning.find("pattern \"no\\.such\\.module\" matches no unit"), std::string::npos) << warning;
  CliRun table = Df11("models" + addr);
  EXPECT_NE(table.out.find("  load warning: " + warning), std::string::npos) << table.out;
  const std::string log = d.LogText();
  EXPECT_NE(log.find("model_load_warning"), std::string::npos) << log;
  EXPECT_NE(log.find("load_warnings=1"), std::string::npos) << log;
}

TEST(CliClient, CommandsAgainstARunningDaemon) {
  ScopedTempDir tmp("srvcli");
  ASSERT_TRUE(WriteTinyModel(tmp.path() + "/m").ok());
  Daemon d({"--model", "tiny=" + tmp.path() + "/m"}, tmp.path());
  ASSERT_TRUE(WaitServing(d.Channel())) << d.LogText();
  const std::string addr = " --addr " + d.address();

  CliRun health = Df11("health" + addr);
  EXPECT_EQ(health.code, 0);
  EXPECT_EQ(health.out, "SERVING\n");
  EXPECT_EQ(Df11("health --service nope" + addr).code, 1) << "unknown service is not serving";

  CliRun models = Df11("models --json" + addr);
  ASSERT_EQ(models.code, 0);
  auto list = nlohmann::json::parse(models.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "tiny");
  EXPECT_EQ(list[0]["state"], "ready");
  EXPECT_EQ(list[0]["load_warnings"], nlohmann::json::array());

  // The CLI prints exactly the streamed text (plus a newline): compare with the API's stream.
  auto stub = pb::Generation::NewStub(d.Channel());
  pb::GenerateRequest by_ids = TextRequest("tiny", "", 8);
  for (int32_t id : {10, 20, 30}) by_ids.mutable_tokens()->add_ids(id);
  StreamResult api = Collect(*stub, by_ids);
  ASSERT_TRUE(api.status.ok());
  CliRun generated = Df11("generate -m tiny --tokens 10,20,30 -n 8 -t 0 --ignore-eos" + addr);
  EXPECT_EQ(generated.code, 0);
  EXPECT_EQ(generated.out, api.text + "\n");
  EXPECT_EQ(Df11("generate -m tiny --chat hello -n 4 --ignore-eos" + addr).code, 0);
  EXPECT_EQ(Df11("generate -m tiny 'plain prompt' -n 4 --seed 3 --top-p 0.9 --top-k 5" + addr).code, 0);

  CliRun bad = Df11("generate -m tiny hi --top-p 2" + addr, /*merge=*/true);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("INVALID_ARGUMENT: sampling.top_p"), std::string::npos) << bad.out;
  CliRun unknown = Df11("generate -m nope hi" + addr, true);
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.out.find("NOT_FOUND"), std::string::npos) << unknown.out;
  EXPECT_EQ(Df11("generate -m tiny --tokens 1,x" + addr).code, 2);

  CliRun bench = Df11("bench -m tiny -c 4 --requests 12 --duration 30 --prompt-tokens 8 --output-tokens 5 --json" + addr);
  ASSERT_EQ(bench.code, 0) << bench.out;
  auto report = nlohmann::json::parse(bench.out);
  EXPECT_EQ(report["requests_ok"], 12);
  EXPECT_EQ(report["requests_failed"], 0);
  EXPECT_EQ(report["output_tokens_total"], 60);
  EXPECT_EQ(report["ttft_s"]["n"], 12);
  EXPECT_EQ(report["itl_s"]["n"], 48) << "4 gaps per 5-token request";
  EXPECT_LE(report["ttft_s"]["p50"].get<double>(), report["ttft_s"]["p99"].get<double>());
  EXPECT_GT(report["output_tokens_per_s"].get<double>(), 0.0);

  d.Signal(SIGTERM);
  EXPECT_EQ(d.Wait(), 0);
  EXPECT_EQ(Df11("health --timeout 2" + addr).code, 1) << "daemon gone";
}

}  // namespace
}  // namespace df11::test
