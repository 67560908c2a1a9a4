// The check of wide_stats.h with Highway: is any of a range of saved rstd not a positive finite number?
//
//   naive:  for r: bad |= !(rstd[r] > 0 && rstd[r] <= max)
//   here:   the same per vector of rstd, as mask operations (rstd > 0 and rstd < inf; NaN fails both),
//           OR-ed into one mask, tested once at the end; the last count % lanes values through the scalar
//           line.
//
// This file is compiled once per SIMD target (Highway dynamic dispatch, see
// tensor/kernels/elementwise_simd.cpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/wide_stats.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "nn/norms/wide_stats.h"

HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename A>
HWY_INLINE bool AnyUnusableRstd(const A* HWY_RESTRICT rstd, int64_t count) {
  const hn::ScalableTag<A> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto zero = hn::Zero(d), inf = hn::Set(d, std::numeric_limits<A>::infinity());
  auto bad = hn::Lt(zero, zero);  // all false
  int64_t r = 0;
  for (; r + L <= count; r += L) {
    const auto v = hn::LoadU(d, rstd + r);
    bad = hn::Or(bad, hn::Not(hn::And(hn::Gt(v, zero), hn::Lt(v, inf))));
  }
  bool any = !hn::AllFalse(d, bad);
  for (; r < count; ++r) any |= rstd_unusable(rstd[r]);
  return any;
}

bool AnyUnusableRstdF32(const float* rstd, int64_t count) {
  return AnyUnusableRstd(rstd, count);
}
bool AnyUnusableRstdF64(const double* rstd, int64_t count) {
  return AnyUnusableRstd(rstd, count);
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

HWY_EXPORT(AnyUnusableRstdF32);
HWY_EXPORT(AnyUnusableRstdF64);

bool any_unusable_rstd(const float* rstd, int64_t count) {
  return HWY_DYNAMIC_DISPATCH(AnyUnusableRstdF32)(rstd, count);
}
bool any_unusable_rstd(const double* rstd, int64_t count) {
  return HWY_DYNAMIC_DISPATCH(AnyUnusableRstdF64)(rstd, count);
}

}  // namespace ng::norms
#endif  // HWY_ONCE
