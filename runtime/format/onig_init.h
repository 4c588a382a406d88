// One process-wide Oniguruma initialisation (UTF-8), shared by every user of the library.
#pragma once

namespace df11 {
// Thread-safe; cheap after the first call.
void EnsureOnigInitialized();
}  // namespace df11
