// Build identity.
#include "kernels/base/version.h"

namespace df11 {
const char* Version() { return "0.1.0"; }
bool BuiltWithCuda() {
#ifdef DF11_HAVE_CUDA
  return true;
#else
  return false;
#endif
}
}  // namespace df11
