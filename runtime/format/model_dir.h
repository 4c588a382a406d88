// The one reader of a model directory's small text files (tokenizer.json, tokenizer_config.json,
// generation_config.json, chat_template.jinja): the tokenizer and the chat-template loaders both
// read them through here, so paths and errors read the same. (config.json is read by
// Checkpoint::Open, whose errors say whether the directory is a model directory at all.)
#pragma once

#include <optional>
#include <string>

#include "kernels/base/status.h"

namespace df11 {

// DIR/name; a trailing '/' of dir is optional, an empty dir means the working directory.
std::string ModelDirPath(const std::string& dir, const std::string& name);

// The whole file DIR/name. NOT_FOUND "PATH: cannot open" when it cannot be opened, DATA_LOSS
// "PATH: read error" when reading fails.
StatusOr<std::string> ReadModelDirFile(const std::string& dir, const std::string& name);

// As ReadModelDirFile, but nullopt when DIR/name cannot be opened (an optional file).
StatusOr<std::optional<std::string>> ReadOptionalModelDirFile(const std::string& dir, const std::string& name);

}  // namespace df11
