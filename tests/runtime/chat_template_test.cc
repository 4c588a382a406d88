// Chat templates of real models rendered byte-for-byte like transformers' apply_chat_template:
// every template in tests/fixtures/chat/templates.json x every conversation in
// conversations.json is compared with goldens.json (made by scripts/make_chat_goldens.py with
// python3-jinja2). Templates from the npm tokenizer packages are read from the tokenizer cache
// (DF11_TOKENIZER_DIR or ~/.cache/df11-serve/tokenizers) and the tests FAIL when it is missing.
#include "runtime/template/chat_template.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace df11 {
namespace {

namespace fs = std::filesystem;
const std::string kChatFixtures = std::string(DF11_TEST_FIXTURES) + "/chat";

nlohmann::ordered_json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return nlohmann::ordered_json::parse(in);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TokenizerDir() {
  if (const char* d = std::getenv("DF11_TOKENIZER_DIR")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/df11-serve/tokenizers";
}

std::tm FixedNow() {  // the goldens' strftime_now clock: 2025-03-14 09:26:53
  std::tm tm{};
  tm.tm_year = 125, tm.tm_mon = 2, tm.tm_mday = 14, tm.tm_hour = 9, tm.tm_min = 26, tm.tm_sec = 53;
  time_t t = timegm(&tm);
  gmtime_r(&t, &tm);
  return tm;
}

std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  std::ostringstream out;
  out << "first difference at byte " << i << " of " << want.size() << ": want ..." << want.substr(i, 60)
      << "... got ..." << got.substr(i, 60) << "...";
  return out.str();
}

// Loads a template the way the goldens did: from the tokenizer cache or a committed file.
StatusOr<ChatTemplate> LoadForTest(const std::string& name, const nlohmann::ordered_json& spec) {
  if (spec.contains("tokenizer")) {
    std::string dir = TokenizerDir() + "/" + spec["tokenizer"].get<std::string>();
    if (!fs::exists(dir + "/tokenizer_config.json")) {
      return NotFound(dir + "/tokenizer_config.json is missing: run scripts/fetch-test-tokenizers.sh "
                            "(or point DF11_TOKENIZER_DIR at its cache)");
    }
    return LoadChatTemplate(dir);
  }
  StatusOr<ChatTemplate> t = ChatTemplate::Parse(ReadText(kChatFixtures + "/" + spec["file"].get<std::string>()));
  if (!t.ok()) return t;
  if (spec.contains("bos_token")) t->set_bos_token(spec["bos_token"].get<std::string>());
  if (spec.contains("eos_token")) t->set_eos_token(spec["eos_token"].get<std::string>());
  return t;
}

class ChatGoldenTest : public testing::TestWithParam<std::string> {};

TEST_P(ChatGoldenTest, RendersLikeTransformers) {
  const std::string name = GetParam();
  nlohmann::ordered_json manifest = ReadJson(kChatFixtures + "/templates.json");
  nlohmann::ordered_json conversations = ReadJson(kChatFixtures + "/conversations.json");
  nlohmann::ordered_json goldens = ReadJson(kChatFixtures + "/goldens.json");
  ASSERT_TRUE(manifest.contains(name));
  StatusOr<ChatTemplate> t = LoadForTest(name, manifest[name]);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->source(), goldens["templates"][name].get<std::string>())
      << name << ": the template differs from the one the goldens were made from; re-fetch the tokenizers "
      << "or rerun scripts/make_chat_goldens.py";
  t->set_clock(FixedNow);
  int compared = 0;
  for (const auto& conv : conversations) {
    const std::string key = name + "/" + conv["name"].get<std::string>();
    SCOPED_TRACE(key);
    ASSERT_TRUE(goldens["renders"].contains(key)) << "rerun scripts/make_chat_goldens.py";
    const auto& g = goldens["renders"][key];
    nlohmann::ordered_json vars = conv.contains("vars") ? conv["vars"] : nlohmann::ordered_json::object();
    StatusOr<std::string> got = t->Render(conv["messages"], conv["add_generation_prompt"].get<bool>(), vars);
    if (g.contains("output")) {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const std::string want = g["output"];
      EXPECT_EQ(*got, want) << FirstDifference(want, *got);
    } else {
      ASSERT_FALSE(got.ok()) << "transformers fails with " << g["error"] << "; we rendered:\n" << *got;
      if (g["raised"].get<bool>()) {
        EXPECT_EQ(got.status().message(), g["message"].get<std::string>());
      }
    }
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(conversations.size()));
}

INSTANTIATE_TEST_SUITE_P(Models, ChatGoldenTest,
                         testing::Values("qwen3", "gemma3", "llama3_1", "llama3_1_instruct", "llama3_2_instruct",
                                         "mistral_nemo_instruct_2407", "phi4", "deepseek_r1_distill_qwen"));

TEST(ChatGoldenManifestTest, EveryTemplateIsTested) {
  nlohmann::ordered_json manifest = ReadJson(kChatFixtures + "/templates.json");
  EXPECT_EQ(manifest.size(), 8u) << "add the new template to INSTANTIATE_TEST_SUITE_P above";
}

// ---- loader ----
class LoadChatTemplateTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("df11_chat_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& file, const std::string& text) { std::ofstream(dir_ / file) << text; }
  fs::path dir_;
};

TEST_F(LoadChatTemplateTest, StringTemplateAndTokenObjects) {
  Write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
    "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  StatusOr<ChatTemplate> t = LoadChatTemplate(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->bos_token().value_or(""), "<s>");
  StatusOr<std::string> r = t->Render(nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])"), false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<s>hi</s>");
}

TEST_F(LoadChatTemplateTest, SpecialTokensMapLikeTransformers) {
  Write("tokenizer_config.json", R"({"chat_template": "{{ pad_token }}|{{ unk_token }}|{{ sep_token is defined }}|{{ additional_special_tokens }}",
    "pad_token": {"content": "<pad>"}, "unk_token": "<unk>", "sep_token": "", "mask_token": null,
    "additional_special_tokens": ["<a>", {"content": "<b>", "special": true}]})");
  StatusOr<ChatTemplate> t = LoadChatTemplate(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Render(nlohmann::json::array(), false).value(), "<pad>|<unk>|False|['<a>', '<b>']");
}

TEST_F(LoadChatTemplateTest, NamedTemplateListPicksDefault) {
  Write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
    "bos_token": null})");
  StatusOr<ChatTemplate> t = LoadChatTemplate(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source(), "D");
  EXPECT_FALSE(t->bos_token().has_value());
  StatusOr<ChatTemplate> tool = LoadChatTemplate(dir_.string(), "tool_use");
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(tool->source(), "T");
  EXPECT_EQ(LoadChatTemplate(dir_.string(), "rag").status().code(), StatusCode::kNotFound);
}

TEST_F(LoadChatTemplateTest, JinjaFileTakesPriority) {
  Write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "<eos>"})");
  Write("chat_template.jinja", "file {{ eos_token }}\n");
  StatusOr<ChatTemplate> t = LoadChatTemplate(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Render(nlohmann::json::array(), false).value(), "file <eos>");
}

TEST_F(LoadChatTemplateTest, MissingTemplateAndBadConfig) {
  EXPECT_EQ(LoadChatTemplate(dir_.string()).status().code(), StatusCode::kNotFound);
  Write("tokenizer_config.json", "{not json");
  EXPECT_EQ(LoadChatTemplate(dir_.string()).status().code(), StatusCode::kInvalidArgument);
  Write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  StatusOr<ChatTemplate> t = LoadChatTemplate(dir_.string());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 1"), std::string::npos) << t.status().message();
}

// ---- API behaviour ----
TEST(ChatTemplateTest, VariablesFollowApplyChatTemplate) {
  ChatTemplate t = ChatTemplate::Parse(
                       "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ bos_token is defined }} "
                       "{{ enable_thinking }} {{ messages|length }}")
                       .value();
  StatusOr<std::string> r = t.Render(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"), true,
                                     nlohmann::json{{"enable_thinking", false}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "True True True False False 1");
  EXPECT_EQ(t.Render(nlohmann::json::object(), true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Render(nlohmann::json::array(), true, nlohmann::json::array()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, OrderedJsonKeepsToolKeyOrder) {
  ChatTemplate t = ChatTemplate::Parse("{{ tools[0]|tojson }}").value();
  auto tools = nlohmann::ordered_json::parse(R"({"tools": [{"z": 1, "a": 2}]})");
  EXPECT_EQ(t.Render(nlohmann::ordered_json::array(), false, tools).value(), R"({"z": 1, "a": 2})");
  // nlohmann::json sorts object keys, so only ordered_json reproduces Python's order.
  EXPECT_EQ(t.Render(nlohmann::json::array(), false, nlohmann::json::parse(tools.dump())).value(), R"({"a": 2, "z": 1})");
}

TEST(ChatTemplateTest, InjectedClockDrivesStrftimeNow) {
  ChatTemplate t = ChatTemplate::Parse("{{ strftime_now('%d %b %Y') }}").value();
  t.set_clock(FixedNow);
  EXPECT_EQ(t.Render(nlohmann::json::array(), false).value(), "14 Mar 2025");
}

TEST(ChatTemplateTest, ConcurrentRenders) {
  ChatTemplate t = ChatTemplate::Parse(ReadText(kChatFixtures + "/templates/mistral_nemo_instruct_2407.jinja")).value();
  t.set_bos_token("<s>");
  t.set_eos_token("</s>");
  auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  const std::string want = "<s>[INST]a[/INST]b</s>";
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 100; ++k) bad += t.Render(messages, false).value() != want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- CLI: df11 chat-template DIR --messages FILE [--add-generation-prompt] [--var k=v] ----
TEST(ChatTemplateCliTest, RendersLikeTheGolden) {
  std::string dir = TokenizerDir() + "/qwen3";
  ASSERT_TRUE(fs::exists(dir + "/tokenizer_config.json")) << dir << " missing: run scripts/fetch-test-tokenizers.sh";
  nlohmann::ordered_json conversations = ReadJson(kChatFixtures + "/conversations.json");
  nlohmann::ordered_json goldens = ReadJson(kChatFixtures + "/goldens.json");
  nlohmann::ordered_json conv;
  for (const auto& c : conversations) {
    if (c["name"] == "tools_defined") conv = c;
  }
  ASSERT_FALSE(conv.is_null());
  fs::path messages = fs::temp_directory_path() / ("df11_cli_messages_" + std::to_string(::getpid()) + ".json");
  std::ofstream(messages) << conv["messages"].dump();
  std::string cmd = std::string(DF11_CLI_PATH) + " chat-template " + dir + " --messages " + messages.string() +
                    " --add-generation-prompt --var 'tools=" + conv["vars"]["tools"].dump() + "' --var enable_thinking=true";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int rc = pclose(pipe);
  fs::remove(messages);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, goldens["renders"]["qwen3/tools_defined"]["output"].get<std::string>());

  rc = std::system((std::string(DF11_CLI_PATH) + " chat-template /nonexistent --messages /nonexistent 2>/dev/null").c_str());
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace df11
