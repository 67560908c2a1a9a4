// The per-row math every norm shares, written once so the CPU reference loops and the CUDA kernels run
// exactly the same arithmetic.
//
// Every function here works on ONE group of n values (a LayerNorm row, a BatchNorm channel, a GroupNorm
// group) read through an accessor `get(i)` that returns the i-th value already converted to the compute type
// A (float for f32/f16/bf16 inputs, double for f64). The accessor hides the layout: a LayerNorm row is
// contiguous, a BatchNorm channel is N strided segments.
//
// NG_HOST_DEVICE marks them callable from both host and device code: under nvcc it is
// `__host__ __device__`, elsewhere it is empty.
//
// Notation (one set of letters for all norms):
//   n       number of values normalized together
//   mean    (1/n) sum_i x_i
//   var     (1/n) sum_i (x_i - mean)^2                      (biased: what the forward divides by)
//   rstd    1 / sqrt(var + eps)
//   xhat_i  (x_i - mean) * rstd                              (RMSNorm: x_i * rstd, with rstd from mean(x^2))
//   y_i     xhat_i * w_i + b_i
//   g_i     dy_i * w_i                                       (the gradient arriving at xhat_i)
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define NG_HOST_DEVICE __host__ __device__
#else
#define NG_HOST_DEVICE
#endif

namespace ng::norm_math {

// Mean and biased variance of n values, centred two-pass with a shift.
//
//   pass 1: d    = (1/n) sum_i (x_i - K)          with K = x_0, so mean = K + d
//   pass 2: var  = (1/n) sum_i ((x_i - K) - d)^2
//
// Why not E[x^2] - E[x]^2: for a row with mean 1e4 and std 1e-2, E[x^2] ~ 1e8 and the difference we want is
// 1e-4, far below the float rounding of 1e8 (~8): the one-pass formula returns noise, even negative values.
// Why the shift K: summing a thousand values of 1e4 in float already loses ~1e-3 in the mean, a tenth of the
// std. x_i - K is exact for values close to K (Sterbenz), so the sums only ever see numbers the size of the
// spread, and `(x_i - K) - d` is the centred value with no large cancellation left.
// `shift` and `d` are returned as well: the forward computes xhat as ((x - shift) - d) * rstd.
template <typename A, typename Get>
NG_HOST_DEVICE inline void centered_moments(const Get& get, int64_t n, A& shift, A& d, A& var) {
  shift = get(0);
  A s = 0;
  for (int64_t i = 0; i < n; ++i) s += get(i) - shift;
  d = s / A(n);
  A m2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A c = (get(i) - shift) - d;
    m2 += c * c;
  }
  var = m2 / A(n);
}

// (1/n) sum_i x_i^2, the RMSNorm statistic (no mean is removed, so there is nothing to cancel).
template <typename A, typename Get>
NG_HOST_DEVICE inline A mean_square(const Get& get, int64_t n) {
  A s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A v = get(i);
    s += v * v;
  }
  return s / A(n);
}

// rstd = 1 / sqrt(var + eps). eps > 0 keeps a constant row (var = 0) finite: rstd = 1/sqrt(eps).
template <typename A>
NG_HOST_DEVICE inline A rstd_from_var(A var, A eps) {
  return A(1) / std::sqrt(var + eps);
}

// ---- backward: dx of the centred norms (LayerNorm, BatchNorm in training, GroupNorm) ----------------------
//
// With g = dy * w and the two row means  mean_g = (1/n) sum_j g_j,  mean_gx = (1/n) sum_j g_j xhat_j:
//
//   dx_i = rstd * ( g_i  -  mean_g  -  xhat_i * mean_gx )
//                   term 1  term 2     term 3
//
// term 1: the direct path x_i -> xhat_i; term 2: the path through the mean; term 3: the path through the
// variance. The derivation is in nn/norms/layer_norm.cpp and docs/norms/layer_norm.md.
template <typename A>
NG_HOST_DEVICE inline A centered_norm_dx(A g, A xhat, A rstd, A mean_g, A mean_gx) {
  return rstd * (g - mean_g - xhat * mean_gx);
}

// ---- backward: dx of RMSNorm -----------------------------------------------------------------------------
//
//   dx_i = rstd * ( g_i  -  xhat_i * mean_gx )
//                   term 1  term 2 (the path through mean(x^2))
//
// Derivation in nn/norms/rms_norm.cpp and docs/norms/rms_norm.md.
template <typename A>
NG_HOST_DEVICE inline A rms_norm_dx(A g, A xhat, A rstd, A mean_gx) {
  return rstd * (g - xhat * mean_gx);
}

}  // namespace ng::norm_math
