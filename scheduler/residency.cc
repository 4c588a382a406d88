// Residency policy (see residency.h).
#include "scheduler/residency.h"

#include <algorithm>
#include <numeric>

namespace df11 {

const char* TierName(ModelTier tier) {
  switch (tier) {
    case ModelTier::kResident:
      return "resident";
    case ModelTier::kHost:
      return "host";
    case ModelTier::kDisk:
      return "disk";
  }
  return "?";
}

std::optional<std::vector<size_t>> PickVictims(const std::vector<ResidencyCandidate>& models, uint64_t need,
                                               uint64_t budget) {
  std::vector<size_t> victims;
  if (budget == 0) return victims;
  uint64_t used = 0;
  for (const ResidencyCandidate& m : models) used += m.resident ? m.device_bytes : 0;
  std::vector<size_t> order(models.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return models[a].last_used < models[b].last_used; });
  for (size_t i : order) {
    if (used + need <= budget) break;
    if (!models[i].demotable) continue;
    victims.push_back(i);
    used -= models[i].device_bytes;
  }
  if (used + need > budget) return std::nullopt;
  return victims;
}

ModelTier DemotionTier(uint64_t bytes, uint64_t host_used, uint64_t host_budget) {
  return host_used + bytes <= host_budget ? ModelTier::kHost : ModelTier::kDisk;
}

}  // namespace df11
