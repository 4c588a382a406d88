// Fair choice between models (see model_picker.h).
#include "scheduler/model_picker.h"

#include <algorithm>

namespace df11 {

void ModelPicker::Add(const std::string& name, double weight) { entries_.push_back({name, weight, now_, false}); }

void ModelPicker::Remove(const std::string& name) {
  std::erase_if(entries_, [&](const Entry& e) { return e.name == name; });
}

int ModelPicker::Pick(const std::vector<bool>& has_work) {
  int best = -1;
  for (size_t i = 0; i < entries_.size() && i < has_work.size(); ++i) {
    Entry& e = entries_[i];
    if (!has_work[i]) {
      e.busy = false;
      continue;
    }
    if (!e.busy) {
      e.busy = true;
      e.vtime = std::max(e.vtime, now_);
    }
    if (best < 0 || e.vtime < entries_[best].vtime) best = static_cast<int>(i);
  }
  return best;
}

void ModelPicker::Charge(int index) {
  Entry& e = entries_[index];
  now_ = e.vtime;
  e.vtime += 1.0 / e.weight;
}

}  // namespace df11
