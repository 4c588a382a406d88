// Model-directory text files (see model_dir.h).
#include "runtime/format/model_dir.h"

#include <fstream>
#include <sstream>

namespace df11 {

std::string ModelDirPath(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

StatusOr<std::string> ReadModelDirFile(const std::string& dir, const std::string& name) {
  const std::string path = ModelDirPath(dir, name);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLoss(path + ": read error");
  return ss.str();
}

StatusOr<std::optional<std::string>> ReadOptionalModelDirFile(const std::string& dir, const std::string& name) {
  if (!std::ifstream(ModelDirPath(dir, name)).good()) return std::optional<std::string>();
  DF11_ASSIGN_OR_RETURN(std::string text, ReadModelDirFile(dir, name));
  return std::optional<std::string>(std::move(text));
}

}  // namespace df11
