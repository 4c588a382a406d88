// df11: the companion CLI of df11-serve (compress, inspect, verify, and more as they land).
#include <cstdio>

#include "cli/command.h"

namespace df11::cli {
std::vector<Registrar>& Registry() {
  static std::vector<Registrar> registry;
  return registry;
}
}  // namespace df11::cli

int main(int argc, char** argv) {
  CLI::App app{"df11: DFloat11 model tools (compress, inspect, verify, ...)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "df11 0.1.0");
  for (auto registrar : df11::cli::Registry()) registrar(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const df11::cli::CommandFailed& e) {
    std::fprintf(stderr, "df11: %s\n", e.what());
    return e.exit_code;
  }
  return 0;
}
