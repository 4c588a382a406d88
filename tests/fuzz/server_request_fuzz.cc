// libFuzzer target for df11d's request translation (server/translate.h): arbitrary bytes parsed
// as a df11.v1.GenerateRequest (what a client can send), then validation and prompt building
// with the tiny test tokenizer and a ChatML template. Any crash, exception, hang or sanitizer
// report is a bug; errors must be statuses.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/translate.h"

namespace {

df11::server::PromptSources& Sources() {
  static df11::server::PromptSources* sources = [] {
    auto* s = new df11::server::PromptSources();
    std::string file = __FILE__;
    std::string dir = file.substr(0, file.rfind('/')) + "/../fixtures/tiny-tokenizer";
    auto tokenizer = df11::Tokenizer::Load(dir);
    if (!tokenizer.ok()) {
      std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
      std::abort();
    }
    s->tokenizer = std::shared_ptr<const df11::Tokenizer>(std::move(tokenizer).value());
    auto chat = df11::LoadChatTemplate(dir);
    if (!chat.ok()) std::abort();
    s->chat_template = std::make_shared<const df11::ChatTemplate>(std::move(chat).value());
    return s;
  }();
  return *sources;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  df11::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto translated = df11::server::TranslateGenerateRequest(request);
  auto prompt = df11::server::BuildPrompt(request, Sources());
  if (translated.ok() && prompt.ok() && prompt->empty() && request.input_case() != df11::v1::GenerateRequest::kText) {
    std::abort();  // an accepted non-text input always has tokens
  }
  return 0;
}
