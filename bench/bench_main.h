// RunBenchMain: a benchmark's main(): runs `main_fn`; an exception (a JSON or allocation failure)
// becomes one line naming the program and exit status 1 instead of an abort. JsonPathArg: the
// value of a benchmark's `--json OUT` flag. ParseList: a comma-separated list of integers. Median: the
// middle of a list of timings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

namespace df11 {

// The path after `--json` in argv (the last one given), or "" when there is none.
inline std::string JsonPathArg(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc) path = argv[++i];
  }
  return path;
}

// "1,8,64" as {1, 8, 64} (std::stoll: a malformed item throws, which RunBenchMain reports).
inline std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// The middle value of `v` (the upper one of an even count), 0 when empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline int RunBenchMain(const char* name, int (*main_fn)(int, char**), int argc, char** argv) {
  try {
    return main_fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace df11
