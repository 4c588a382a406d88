// The df11 CLI's subcommand registry. Each cmd_*.cc registers its subcommands with
// DF11_REGISTER_COMMAND(fn) where fn(CLI::App& app) adds a subcommand and its callback.
// A callback reports failure by throwing CommandFailed(exit_code, message); main prints the
// message to stderr and exits with the code (1 = operation failed, 2 = usage error).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace df11::cli {

struct CommandFailed : std::runtime_error {
  CommandFailed(int code, const std::string& message) : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

// Throws CommandFailed(1, status.ToString()) when !status.ok().
inline void Check(const Status& status) {
  if (!status.ok()) throw CommandFailed(1, status.ToString());
}
template <typename T>
T Check(StatusOr<T> v) {
  if (!v.ok()) throw CommandFailed(1, v.status().ToString());
  return std::move(v).value();
}

using Registrar = void (*)(CLI::App&);
std::vector<Registrar>& Registry();
struct Register {
  explicit Register(Registrar r) { Registry().push_back(r); }
};

}  // namespace df11::cli

#define DF11_REGISTER_COMMAND(fn) static ::df11::cli::Register DF11_CONCAT(df11_register_, __LINE__)(fn)
