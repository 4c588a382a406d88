// Build identity of df11-serve (exported later as the build-info metric).
#pragma once

namespace df11 {
const char* Version();          // "0.1.0"
bool BuiltWithCuda();           // kernels compiled for the GPU
}  // namespace df11
