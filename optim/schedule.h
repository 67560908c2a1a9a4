// Learning-rate schedules: lr as a pure function of the step (0-based), so a resumed run gets the same lr
// from the restored step alone. Use: `opt.lr = schedule(step); opt.step();`.
//
//   constant            lr(s) = base
//   linear warmup       lr(s) = base * (s + 1) / warmup            for s < warmup, then base
//   cosine with warmup  lr(s) = linear warmup for s < warmup, then
//                       progress = (s - warmup) / (total - warmup)       (clamped to [0, 1])
//                       lr(s) = min_lr + 0.5 * (base - min_lr) * (1 + cos(pi * progress))
//                       so lr falls from base at the end of warmup to min_lr at step `total`, and stays.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ng::optim {

struct LRSchedule {
  std::string kind;  // "constant", "linear_warmup" or "cosine"
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine only
  double min_lr = 0.0;      // cosine only

  // Checks the fields first, as the factories do (this is a public aggregate): an ng::Error
  // naming the field and its value for an unknown kind, a base_lr or min_lr that is not finite and >= 0, a
  // negative warmup_steps, or a cosine total_steps <= warmup_steps or min_lr > base_lr.
  double operator()(int64_t step) const;
};

LRSchedule constant_lr(double base_lr);
LRSchedule linear_warmup(double base_lr, int64_t warmup_steps);
LRSchedule cosine_with_warmup(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);

}  // namespace ng::optim
