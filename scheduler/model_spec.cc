// The one check of a ModelSpec (see model_spec.h).
#include "scheduler/model_spec.h"

#include <cstdio>

namespace df11 {
namespace {

// printf's %g: "inf", "nan", "2.5".
std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

Status ValidateModelSpec(const ModelSpec& s) {
  if (s.name.empty() || s.name.size() > kMaxModelNameBytes) {
    return InvalidArgument("name: must be 1 to " + std::to_string(kMaxModelNameBytes) + " bytes, got " +
                           std::to_string(s.name.size()));
  }
  for (size_t i = 0; i < s.name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s.name[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgument("name: byte " + std::to_string(i) + " is not printable ASCII (" + std::to_string(c) +
                             "); names are printable ASCII without spaces");
    }
  }
  if (s.path.empty()) return InvalidArgument("path: must not be empty");
  for (size_t i = 0; i < s.path.size(); ++i) {
    if (static_cast<unsigned char>(s.path[i]) < 0x20 || s.path[i] == 0x7f) {
      return InvalidArgument("path: byte " + std::to_string(i) + " is a control character");
    }
  }
  // Written so that NaN fails every check.
  if (!(s.kv_share > 0 && s.kv_share <= kMaxModelShare)) {
    return InvalidArgument("kv_share: must be in (0, 1e6], got " + Num(s.kv_share));
  }
  if (!(s.weight > 0 && s.weight <= kMaxModelShare)) {
    return InvalidArgument("weight: must be in (0, 1e6], got " + Num(s.weight));
  }
  if (s.kv_min_blocks < 0 || s.kv_min_blocks > kMaxKvMinBlocks) {
    return InvalidArgument("kv_min_blocks: must be in [0, 2^40], got " + std::to_string(s.kv_min_blocks));
  }
  if (s.tile_max_tokens != 32 && s.tile_max_tokens != 64) {
    return InvalidArgument("tile_max_tokens: must be 32 or 64, got " + std::to_string(s.tile_max_tokens));
  }
  if (s.max_seqs < 0 || s.max_seqs > kMaxModelSeqs) {
    return InvalidArgument("max_seqs: must be in [0, 1000000], got " + std::to_string(s.max_seqs));
  }
  return Status::Ok();
}

}  // namespace df11
