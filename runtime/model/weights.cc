// LinearWeight lookup, the DF11 unit scratch and ApplyLinear (see weights.h).
#include "runtime/model/weights.h"

#include <cstring>

#include "kernels/cpu_ops.h"
#include "kernels/df11_codec.h"

namespace df11 {

StatusOr<LinearWeight> LocateLinear(const Checkpoint& checkpoint, const std::string& name, int64_t rows, int64_t cols) {
  DF11_ASSIGN_OR_RETURN(const Checkpoint::Location loc, checkpoint.Locate(name));
  LinearWeight w;
  w.name = name;
  w.out_features = rows;
  w.in_features = cols;
  const uint64_t want = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
  if (loc.unit != nullptr) {
    if (loc.weight->numel != want) {
      return InvalidArgument(checkpoint.dir() + ": " + name + ": DF11 slice has " + std::to_string(loc.weight->numel) +
                             " elements, expected " + std::to_string(rows) + "x" + std::to_string(cols));
    }
    w.unit = loc.unit;
    w.unit_offset = loc.weight->offset;
    return w;
  }
  if (loc.plain.info->dtype != DType::kBF16) {
    return InvalidArgument(loc.plain.file->path() + ": " + name + " is " + DTypeName(loc.plain.info->dtype) +
                           ", expected BF16");
  }
  const auto bytes = checkpoint.store().Data(loc.plain);
  if (bytes.size() != want * 2) {
    return InvalidArgument(loc.plain.file->path() + ": " + name + " has " + std::to_string(bytes.size() / 2) +
                           " elements, expected " + std::to_string(rows) + "x" + std::to_string(cols));
  }
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint16_t) == 0) {
    w.plain = reinterpret_cast<const uint16_t*>(bytes.data());
  } else {  // NOTE: safetensors does not promise aligned data; copy the rare odd tensor.
    w.owned.resize(want);
    std::memcpy(w.owned.data(), bytes.data(), bytes.size());
  }
  return w;
}

StatusOr<std::vector<float>> ReadVectorF32(const Checkpoint& checkpoint, const std::string& name, int64_t size) {
  DF11_ASSIGN_OR_RETURN(const std::vector<uint16_t> words, checkpoint.ReadBf16(name, 1));
  if (static_cast<int64_t>(words.size()) != size) {
    return InvalidArgument(checkpoint.dir() + ": " + name + " has " + std::to_string(words.size()) +
                           " elements, expected " + std::to_string(size));
  }
  std::vector<float> out(words.size());
  for (size_t i = 0; i < words.size(); ++i) out[i] = cpu::Bf16ToFloat(words[i]);
  return out;
}

Status UnitScratch::Load(const Df11Unit& unit, const std::string& what, int threads) {
  if (loaded_ == &unit) return Status::Ok();
  if (buffer_.size() < unit.layout.num_elements) buffer_.resize(unit.layout.num_elements);
  loaded_ = nullptr;
  DF11_RETURN_IF_ERROR(DecodeUnitCpuFast(unit.view, unit.layout, 0, unit.layout.num_elements, buffer_.data(), threads,
                                     what + ": " + unit.path));
  loaded_ = &unit;
  return Status::Ok();
}

StatusOr<const uint16_t*> WeightData(const LinearWeight& w, const UnitScratch& scratch) {
  if (!w.owned.empty()) return w.owned.data();
  if (w.plain != nullptr) return w.plain;
  if (w.unit == nullptr || scratch.loaded() != w.unit) {
    return FailedPrecondition(w.name + ": its DF11 unit is not decoded in the scratch buffer");
  }
  return scratch.data() + w.unit_offset;
}

Status ApplyLinear(const LinearWeight& w, const UnitScratch& scratch, const float* x, int64_t tokens, float* y,
                   int threads) {
  DF11_ASSIGN_OR_RETURN(const uint16_t* data, WeightData(w, scratch));
  cpu::MatmulBf16(x, data, w.bias.empty() ? nullptr : w.bias.data(), tokens, w.out_features, w.in_features, y, threads);
  return Status::Ok();
}

}  // namespace df11
