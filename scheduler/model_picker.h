// ModelPicker: which model runs the next step when several have pending work. Weighted fair
// queuing over steps: every model has a virtual time that grows by 1/weight per step it runs; the
// model with work and the smallest virtual time goes next (ties: the earlier registered). A model
// that becomes busy again starts at the current virtual time, so idle time earns no burst.
// Bounded wait: while model i has work, between two of its steps any other model j runs at most
// ceil(weight_j / weight_i) + 1 steps (with equal weights: strict round-robin).
// Thread-safety: none; engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace df11 {

class ModelPicker {
 public:
  void Add(const std::string& name, double weight);
  void Remove(const std::string& name);
  // Index (in registration order among the current models) of the model to step, or -1 when
  // none has work. has_work[i] tells whether model i has pending work.
  int Pick(const std::vector<bool>& has_work);
  // Charges one step to model `index`.
  void Charge(int index);

 private:
  struct Entry {
    std::string name;
    double weight = 1;
    double vtime = 0;
    bool busy = false;
  };
  std::vector<Entry> entries_;
  double now_ = 0;  // virtual time of the last step
};

}  // namespace df11
