// Black-box tests of `df11 tokenize` (the real binary, DF11_CLI_PATH) on the tiny fixtures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/runtime/tokenizer_test_util.h"

namespace df11 {
namespace {

struct CliRun {
  int exit_code;
  std::string out;
};

// Runs `df11 tokenize ARGS` with `input` on stdin.
CliRun Tokenize(const std::string& args, const std::string& input) {
  // Unique per process and call: ctest runs tests in parallel processes.
  static int calls = 0;
  std::string in_path =
      ::testing::TempDir() + "tokenize_in_" + std::to_string(getpid()) + "_" + std::to_string(calls++) + ".txt";
  std::ofstream(in_path, std::ios::binary) << input;
  std::string cmd = std::string(DF11_CLI_PATH) + " tokenize " + args + " < " + in_path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  CliRun run{-1, ""};
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(in_path.c_str());
  return run;
}

TEST(TokenizeCli, EncodesLines) {
  std::string dir = tokenizer_test::FixturePath("tiny_bytelevel");
  CliRun run = Tokenize(dir, "abc\nab ab\n\n");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "12 6\n12 4 3 4\n12\n");
  run = Tokenize(dir + " --no-special", "abc\n");
  EXPECT_EQ(run.out, "6\n");
}

TEST(TokenizeCli, JsonLinesCarryAnyText) {
  std::string dir = tokenizer_test::FixturePath("tiny_bytefallback");
  CliRun run = Tokenize(dir + " --json --no-special", "\"hi\\n\\nhi\"\n\"\\u20ac\"\n");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "5 12 5\n9 10 11\n");
  run = Tokenize(dir + " --json", "not json\n");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("line 1: expected a JSON string literal"), std::string::npos) << run.out;
}

TEST(TokenizeCli, Decodes) {
  std::string dir = tokenizer_test::FixturePath("tiny_bytefallback");
  CliRun run = Tokenize(dir + " --decode --json", "1 5 12 5\n9 10\n\n");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "\"<s>hi\\n\\nhi\"\n\"\xEF\xBF\xBD\xEF\xBF\xBD\"\n\"\"\n");
  run = Tokenize(dir + " --decode --no-special", "1 5 6\n");
  EXPECT_EQ(run.out, "hi hi\n");
  run = Tokenize(dir + " --decode", "1 x\n");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("line 1: \"x\" is not a token id"), std::string::npos) << run.out;
}

TEST(TokenizeCli, MissingDirectoryFails) {
  CliRun run = Tokenize(tokenizer_test::FixturePath("no_such_dir"), "");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("tokenizer.json"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace df11
