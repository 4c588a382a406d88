// libFuzzer target for df11d's models config file parser (server/config.h ParseModelsConfig):
// arbitrary bytes as the file's text. Any crash, exception, hang or sanitizer report is a bug;
// every result must be a spec list or an INVALID_ARGUMENT naming the source.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto specs = df11::server::ParseModelsConfig(text, "fuzz.json");
  if (!specs.ok()) {
    if (specs.status().code() != df11::StatusCode::kInvalidArgument) std::abort();
    if (specs.status().message().rfind("fuzz.json", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& spec : *specs) {
    if (spec.name.empty() || spec.path.empty() || !(spec.kv_share > 0) || !(spec.weight > 0) || spec.max_seqs < 0) std::abort();
  }
  return 0;
}
