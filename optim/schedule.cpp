#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tensor/error.h"

namespace ng::optim {

// base_lr and min_lr finite and >= 0 (NaN refused), as an optimizer's lr
static void check_rate(double v, const char* name, const char* op) {
  NG_CHECK(v >= 0 && std::isfinite(v), op, "expected a finite ", name, " >= 0, got ", v);
}

// The one check of a schedule's fields, for the factories (op: the factory's name) and for a schedule
// built by hand (op "LRSchedule": it is a public aggregate, so {"cosine", 1.0, 5, 5} skipped the factories
// and gave 0/0 = NaN at step 5, {"constant", -1.0} a negative lr). Fields a kind does not use are not
// checked.
static void check_schedule(const LRSchedule& s, const char* op) {
  NG_CHECK(s.kind == "constant" || s.kind == "linear_warmup" || s.kind == "cosine", op,
           "unknown schedule kind '", s.kind, "', expected constant, linear_warmup or cosine");
  check_rate(s.base_lr, "base_lr", op);
  if (s.kind == "constant") return;
  NG_CHECK(s.warmup_steps >= 0, op, "expected warmup_steps >= 0 for ", s.kind, ", got ", s.warmup_steps);
  if (s.kind == "linear_warmup") return;
  check_rate(s.min_lr, "min_lr", op);
  // The rate falls from base_lr to min_lr: a min_lr above it would make the "decay" a rise.
  NG_CHECK(s.min_lr <= s.base_lr, op,
           "expected min_lr <= base_lr for cosine (the rate falls to it), got min_lr ", s.min_lr,
           " and base_lr ", s.base_lr);
  NG_CHECK(s.total_steps > s.warmup_steps, op, "expected 0 <= warmup_steps < total_steps for cosine, got ",
           "warmup_steps ", s.warmup_steps, " and total_steps ", s.total_steps);
}

LRSchedule constant_lr(double base_lr) {
  const LRSchedule s{"constant", base_lr, 0, 0, 0.0};
  check_schedule(s, "constant_lr");
  return s;
}

LRSchedule linear_warmup(double base_lr, int64_t warmup_steps) {
  const LRSchedule s{"linear_warmup", base_lr, warmup_steps, 0, 0.0};
  check_schedule(s, "linear_warmup");
  return s;
}

LRSchedule cosine_with_warmup(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr) {
  const LRSchedule s{"cosine", base_lr, warmup_steps, total_steps, min_lr};
  check_schedule(s, "cosine_with_warmup");
  return s;
}

double LRSchedule::operator()(int64_t step) const {
  NG_CHECK(step >= 0, "LRSchedule", "expected step >= 0, got ", step);
  check_schedule(*this, "LRSchedule");
  if (kind == "constant") return base_lr;
  // Warmup, shared by linear_warmup and cosine: ramp from base/warmup up to base.
  if (step < warmup_steps) return base_lr * double(step + 1) / double(warmup_steps);
  if (kind == "linear_warmup") return base_lr;
  if (kind == "cosine") {
    double progress = double(step - warmup_steps) / double(total_steps - warmup_steps);
    progress = std::clamp(progress, 0.0, 1.0);
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
  }
  fail("LRSchedule", "unknown schedule kind '", kind, "'");  // unreachable: check_schedule refused it
}

}  // namespace ng::optim
