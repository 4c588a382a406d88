// Device helpers of the DF11 decoders (df11_decode.cu, df11_lanes.cu): composing BF16 words and
// walking the published LUTs. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace df11 {

// Joins 4 exponents and 4 sign_mantissa bytes (one per byte lane) into 4 BF16 (two u32).
__device__ __forceinline__ uint2 Compose4(uint32_t exps, uint32_t sms) {
  uint2 r;
  const uint32_t e_lo = __byte_perm(exps, 0, 0x4140), s_lo = __byte_perm(sms, 0, 0x4140);
  const uint32_t e_hi = __byte_perm(exps, 0, 0x4342), s_hi = __byte_perm(sms, 0, 0x4342);
  r.x = ((s_lo & 0x00800080u) << 8) | (e_lo << 7) | (s_lo & 0x007F007Fu);
  r.y = ((s_hi & 0x00800080u) << 8) | (e_hi << 7) | (s_hi & 0x007F007Fu);
  return r;
}

// Symbol and length of the code at the top of `peek` by walking the published LUTs (validated:
// at most 4 lookups). Used only where the pair table cannot settle a code.
static __device__ __noinline__ uint32_t WalkLuts(const uint8_t* __restrict__ luts, int num_luts, uint32_t peek) {
  uint32_t t = 0, symbol = 0;
  for (int level = 0; level < 4; ++level) {
    symbol = __ldg(&luts[t * 256 + ((peek >> (24 - 8 * level)) & 0xFF)]);
    if (symbol < 240) break;
    t = 256 - symbol;
  }
  return symbol | static_cast<uint32_t>(__ldg(&luts[(num_luts - 1) * 256 + symbol])) << 16;
}

}  // namespace df11
