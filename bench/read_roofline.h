// The read-bandwidth roofline of the current GPU (read_roofline.cu).
#pragma once

#include <cstdint>

namespace df11 {

// Bytes per second a read-only kernel streams from a `bytes` buffer: median of `reps` timed runs
// after two warm-ups (CUDA events). 0 when allocation or a launch fails.
double ReadBandwidthBytesPerSecond(int64_t bytes = int64_t{4} << 30, int reps = 10);

}  // namespace df11
