// For the server fuzz targets: PromptSources of the tiny test tokenizer (tests/fixtures/
// tiny-tokenizer, with its ChatML template), loaded once; aborts when the fixture is missing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "server/translate.h"

namespace df11::fuzz {

inline df11::server::PromptSources& TinyPromptSources() {
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

}  // namespace df11::fuzz
