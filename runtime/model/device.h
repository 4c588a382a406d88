// Device: where a model's weights, KV cache and activations live.
#pragma once

namespace df11 {

enum class Device { kCpu, kCuda };

inline const char* DeviceName(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace df11
