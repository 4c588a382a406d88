// Internal to the lane kernels: df11_lanes.cu hands fixed lanes (LaneCode::kFixed3) to
// df11_lanes_fixed.cu and, for Df11TileGemm, to cuda_tile_gemm.cu. Included only by .cu files.
#pragma once

#include <cstdint>

#include "kernels/df11_lanes_cuda.h"

namespace df11 {

// kTokens -1: *mismatches += groups of W that differ from y; 1..4: y = x · W^T (+ bias) (+ y).
// Operands checked by the caller. Asynchronous; returns the launch error. Instantiated for -1 and
// 1..4 in df11_lanes_fixed.cu.
template <int kTokens>
Status LaunchFixedLanes(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias, bool accumulate,
                        uint16_t* y, uint32_t* mismatches, GpuStream stream);

// LaunchLanesDecode's for fixed lanes: y = W (after_fixed_decode as LaunchLanesDecode's). Operands
// checked by the caller.
Status LaunchFixedLanesDecode(const DeviceLanes& w, const uint8_t* sm, uint16_t* y, bool after_fixed_decode,
                              GpuStream stream);

// Df11TileGemm's launch (cuda_tile_gemm.cu): y = x · W^T (+ bias) (+ y) for
// cuda::kTileGemmMinTokens..kTileGemmMaxTokens tokens; with inter > 0, Df11TileGemmGated's: y [T,
// inter] = the gated activation of a gate|up W of 2 inter rows (accumulate false). Operands checked
// by the caller.
Status LaunchFixedTileGemm(const uint16_t* x, const DeviceLanes& w, const uint8_t* sm, const float* bias,
                           int64_t tokens, bool accumulate, uint16_t* y, GpuStream stream,
                           Activation act = Activation::kSilu, int64_t inter = 0);

}  // namespace df11
