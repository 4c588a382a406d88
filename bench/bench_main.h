// RunBenchMain: a benchmark's main(): runs `main_fn`; an exception (a JSON or allocation failure)
// becomes one line naming the program and exit status 1 instead of an abort.
#pragma once

#include <cstdio>
#include <exception>

namespace df11 {

inline int RunBenchMain(const char* name, int (*main_fn)(int, char**), int argc, char** argv) {
  try {
    return main_fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace df11
