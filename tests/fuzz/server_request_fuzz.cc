// libFuzzer target for df11d's request translation (server/translate.h): arbitrary bytes parsed
// as a df11.v1.GenerateRequest (what a client can send), then validation and prompt building
// with the tiny test tokenizer and a ChatML template. Any crash, exception, hang or sanitizer
// report is a bug; errors must be statuses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/translate.h"
#include "tests/fuzz/tiny_prompt_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  df11::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto translated = df11::server::TranslateGenerateRequest(request);
  auto prompt = df11::server::BuildPrompt(request, df11::fuzz::TinyPromptSources());
  if (translated.ok() && prompt.ok() && prompt->empty() && request.input_case() != df11::v1::GenerateRequest::kText) {
    std::abort();  // an accepted non-text input always has tokens
  }
  return 0;
}
