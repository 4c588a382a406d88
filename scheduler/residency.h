// Model tiers and the one choice of which models leave the device (the policy of docs/api.md,
// "Model tiers"): a model is resident (weights on the device), host (the weights' image in host
// memory, page-locked on CUDA: Model::Offload) or disk (only its directory; promotion reloads
// it). Promotion needs the device budget: the least recently used idle models are demoted until
// the model fits; never a pinned one, never one with running or waiting requests, never one
// already moving.
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace df11 {

enum class ModelTier { kResident, kHost, kDisk };
const char* TierName(ModelTier tier);  // "resident", "host", "disk"

struct ResidencyCandidate {
  uint64_t device_bytes = 0;  // weights + own workspace when resident
  bool resident = false;      // resident now, or being promoted (counts against the budget)
  bool demotable = false;     // resident, unpinned, idle, not moving
  uint64_t last_used = 0;     // larger = used more recently
};

// Indices of the models to demote, least recently used first, so that `need` more bytes fit in
// `budget` (0 = no budget: nothing to demote). nullopt when even demoting every demotable model
// is not enough.
std::optional<std::vector<size_t>> PickVictims(const std::vector<ResidencyCandidate>& models, uint64_t need,
                                               uint64_t budget);

// Where a demoted model goes: host when its bytes fit what the host budget leaves, else disk.
ModelTier DemotionTier(uint64_t bytes, uint64_t host_used, uint64_t host_budget);

}  // namespace df11
