// Oniguruma initialisation.
#include "runtime/format/onig_init.h"

#include <oniguruma.h>

#include <mutex>

namespace df11 {
void EnsureOnigInitialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}
}  // namespace df11
