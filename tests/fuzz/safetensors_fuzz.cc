// libFuzzer target for the safetensors reader: any byte string must either be rejected with a
// non-OK Status carrying a message, or parse into tensors whose every byte is readable and whose
// layout invariants hold. Seeds: tests/fixtures/safetensors/; dictionary: safetensors.dict there.
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/format/safetensors.h"

namespace {

// Traps (reported by libFuzzer as a crash) when an invariant of an accepted file is broken.
void Require(bool condition) {
  if (!condition) __builtin_trap();
}

void CheckAccepted(const df11::SafetensorsFile& file, size_t input_size) {
  uint64_t expected_offset = 0;
  bool first = true;
  volatile uint8_t sink = 0;
  for (const df11::TensorInfo& info : file.tensors()) {
    Require(file.Find(info.name) == &info);
    Require(info.numel() >= 0);
    Require(static_cast<uint64_t>(info.numel()) * df11::DTypeSize(info.dtype) == info.nbytes);
    Require(first || info.offset == expected_offset);  // contiguous, in offset order
    first = false;
    expected_offset = info.offset + info.nbytes;
    const std::span<const uint8_t> data = file.Data(info);
    Require(data.size() == info.nbytes);
    for (uint8_t b : data) sink = sink ^ b;  // ASan flags any byte outside the buffer
  }
  Require(file.tensors().empty() || expected_offset == input_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = df11::SafetensorsFile::FromBytes("fuzz.safetensors", std::span<const uint8_t>(data, size));
  if (!file.ok()) {
    Require(!file.status().message().empty());
    return 0;
  }
  CheckAccepted(**file, size);
  return 0;
}
