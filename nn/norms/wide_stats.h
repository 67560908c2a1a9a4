// The rare group whose statistics overflow the compute type: found after the kernel, computed again scaled.
//
// The problem. Every norm takes a group's statistics (a LayerNorm or RMSNorm row, a GroupNorm group, a
// BatchNorm channel) in its compute type: float for f32, f16 and bf16 x, double for f64. A square overflows
// float once |x - K| passes ~1.8e19 (double: ~1.3e154), and a sum of n squares sooner, though every x is
// finite. Then var = inf, rstd = 1 / sqrt(inf) = 0 and y = (x - mean) * 0 * w + b = b: a silently wrong
// answer, since LayerNorm is scale-invariant and the exact y is O(1). (PyTorch 2.x gives NaN for LayerNorm
// and 0 for RMSNorm there. normgrad gave b and 0 until 2026-11-28.) A sum of values can overflow the same
// way, and then the mean is inf or NaN.
//
// What normgrad does. After a kernel has written a range of groups, one vector comparison per lane-count of
// groups (not per value) looks at their saved rstd: 0, or not finite, means the arithmetic overflowed (or
// the group holds a NaN or an inf). Such a group is computed again here, slowly and exactly, if all its
// values are finite. With e the binary exponent of max |x_i|:
//
//   scale  = 2^-e                                   every x_i * scale lies in (-2, 2), exactly
//   mean_s = (1/n) sum_i x_i * scale                in double, centred two-pass
//   var_s  = (1/n) sum_i (x_i * scale - mean_s)^2   RMSNorm: (1/n) sum_i (x_i * scale)^2
//   rstd_s = 1 / sqrt(var_s + eps * scale^2)        the rstd of x * scale
//   xhat_i = (x_i * scale - mean_s) * rstd_s        = (x_i - mean) * rstd, as wanted
//   saved: mean = mean_s / scale, rstd = rstd_s * scale   (both finite: |mean| <= max |x|)
//
// Nothing here can overflow: the scaled values are below 2 in magnitude, and eps * scale^2 can only
// underflow (to a term that was negligible anyway). A group with a NaN or an inf keeps what the kernel gave
// it (NaN in, NaN out). The fast kernels are untouched; the groups that take the slow path are the ones that
// were wrong before. (Values near float's largest, of both signs, overflow x - mean itself: BatchNorm's
// output pass, which computes it in float, writes such a channel again in double when it uses batch
// statistics (not with running ones), batch_norm.cpp; a kernel's
// clamp of var at 0 must keep a NaN, or a group whose mean is inf looks usable, group_norm.cpp
// PairStatistics. Test: NormOverflow.ValuesNearTheLargestFloatOfBothSigns.)
//
// The backward never squares x, so LayerNorm's, RMSNorm's and GroupNorm's need no such path. They read
// x - mean (below 2 max |x|) and sum dy * w * (x - mean) over the group, which stays finite while
// n * |dy * w| * max |x| does (max |x| up to ~1e34 at n = 4096 and |dy * w| ~ 1 in float). Past that their
// sums overflow to inf and dx is inf or NaN, which anomaly mode names, never a finite wrong value.
// BatchNorm's fast backward multiplies rstd by rstd; it takes a scalar path for a channel where that
// product has no normal number (batch_norm.cpp, batch_norm_backward).
//
// Tests: tests/test_norms_overflow.cpp (every norm, dtype and kernel path, against the op at scale 1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "nn/norms/norm_common.h"

namespace ng::norms {

// True when a group's saved rstd says its arithmetic overflowed or it saw a NaN or inf: rstd is not a
// positive finite number (NaN fails every comparison, so it is caught too).
template <typename A>
inline bool rstd_unusable(A rstd) {
  return !(rstd > A(0) && rstd <= std::numeric_limits<A>::max());
}

// Whether any of `count` saved rstd is unusable (rstd_unusable; the check of the groups a kernel has just
// written; a mean that overflowed makes its rstd 0 or NaN too, see redo_overflowed_groups).
// Highway, one vector compare per lane-count of groups (wide_stats.cpp): GroupNorm's (N, C) kernels write a
// group every 8 values at 16384 x 256, and a plain loop over rstd_unusable (~5 cycles a group) slowed that
// forward from 0.43 to 0.84 ms (bf16, 2 threads); the compiler's SSE2 loop still cost 14%.
bool any_unusable_rstd(const float* rstd, int64_t count);
bool any_unusable_rstd(const double* rstd, int64_t count);

// A group's moments, of its values times `scale` (see the top of the file).
struct ScaledMoments {
  double scale = 1;  // 2^-e
  double mean = 0;   // mean of x * scale (centred), else 0
  double var = 0;    // variance of x * scale (centred), or the mean of (x * scale)^2 (RMSNorm)
};

// The moments of n values, get(i) giving the i-th as a double. False (and m untouched) when a value is NaN
// or infinite.
template <typename Get>
bool scaled_moments(const Get& get, int64_t n, bool centred, ScaledMoments& m) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = get(i);
    if (!std::isfinite(v)) return false;
    amax = std::max(amax, std::fabs(v));
  }
  const double scale = amax > 0 ? std::ldexp(1.0, -std::ilogb(amax)) : 1.0;
  double mean = 0;
  if (centred) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += get(i) * scale;
    mean = s / double(n);
  }
  double m2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double c = get(i) * scale - mean;
    m2 += c * c;
  }
  m = ScaledMoments{scale, mean, m2 / double(n)};
  return true;
}

// Look at the groups [r0, r1) a kernel has just written (group r: the n contiguous values x + r * n, its
// output y + r * n, its statistics mean[r] (null for RMSNorm) and rstd[r]), and compute again each one whose
// rstd is unusable. wb(r, i) returns the weight and bias of value i of group r as a pair of doubles.
//
// Only rstd is looked at. A mean that overflowed leaves it unusable too: the kernels sum x - K (K a value of
// the group) and square the centred values, so an inf or NaN in that sum makes var inf or NaN and rstd 0 or
// NaN. The one mean that can be inf beside a usable rstd is K + d rounding past the largest float, for a
// group whose values all lie within an ulp or so of it; y is right there (the kernels use K and d, not the
// mean), and the backward, which shifts by the saved mean, gives NaN, not a wrong number.
template <typename T, typename A, typename WB>
void redo_overflowed_groups(const T* x, T* y, A* mean, A* rstd, int64_t r0, int64_t r1, int64_t n, double eps,
                            const WB& wb) {
  // Nearly always there is nothing to do. A short range (the fused add + norm calls in blocks of one row at
  // n = 256) is checked inline: the dispatched call itself cost 8% of that op.
  bool any = false;
  if (r1 - r0 < 16) {
    for (int64_t r = r0; r < r1; ++r) any |= rstd_unusable(rstd[r]);
  } else {
    any = any_unusable_rstd(rstd + r0, r1 - r0);
  }
  if (!any) return;
  for (int64_t r = r0; r < r1; ++r) {
    if (!rstd_unusable(rstd[r])) continue;
    const T* xr = x + r * n;
    auto get = [&](int64_t i) { return double(load_acc<A>(xr[i])); };
    ScaledMoments m;
    if (!scaled_moments(get, n, mean != nullptr, m)) continue;  // a NaN or an inf: left as the kernel made it

    const double rstd_s = 1.0 / std::sqrt(m.var + eps * m.scale * m.scale);
    if (mean) mean[r] = A(m.mean / m.scale);
    rstd[r] = A(rstd_s * m.scale);
    for (int64_t i = 0; i < n; ++i) {
      const double xhat = (get(i) * m.scale - m.mean) * rstd_s;
      const auto [w, b] = wb(r, i);
      y[r * n + i] = store_acc<T>(A(xhat * w + b));
    }
  }
}

}  // namespace ng::norms
