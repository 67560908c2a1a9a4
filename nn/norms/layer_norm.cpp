// LayerNorm (Ba, Kiros, Hinton 2016): normalize every sample over its own features.
//
// ---- 1. The formula ---------------------------------------------------------------------------------------
//
//   x: (rows, n)  -- every leading dim is a row, the trailing normalized_shape is flattened into n
//
//   mean_r = (1/n) sum_i x_ri
//   var_r  = (1/n) sum_i (x_ri - mean_r)^2        biased (divide by n), as PyTorch does
//   rstd_r = 1 / sqrt(var_r + eps)
//   xhat_ri = (x_ri - mean_r) * rstd_r
//   y_ri    = xhat_ri * weight_i + bias_i
//
// The statistics are per row, so a sample never sees its neighbours: training and inference compute the
// same thing, and a batch of one works. weight, bias are per feature, shared by all rows.
// Saved for backward: mean and rstd (one number each per row); xhat is recomputed from x (it costs two
// subtracts and one multiply per element, while caching it would double the memory the graph holds). The
// saved mean serves as the backward's shift, not as the mean itself (section 4 says why).
//
// Layout of this file (read it top to bottom):
//   1. formula (above)  2. scalar reference loop  3. fast Highway + OpenMP kernel
//   4. backward: derivation, reference loop, fast kernel  5. the autograd op F::layer_norm  6. nn::LayerNorm
// Walk-through: docs/norms/layer_norm.md.
//
// This file is compiled once per SIMD target (Highway dynamic dispatch, see
// tensor/kernels/elementwise_simd.cpp): the parts inside `#if HWY_ONCE` are compiled once, the Highway
// kernels once per target.
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/layer_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "nn/norms/norm_simd-inl.h"

#include "autograd/function.h"
#include "nn/norms/layer_norm.h"
#include "nn/norms/norm_math.h"
#include "tensor/device_kernels.h"

#if HWY_ONCE
namespace ng::norms {

// ---- 2. The scalar reference loop -------------------------------------------------------------------------
//
// T: storage type of x and y (float, double, f16, bf16); A: compute type (double for double, else float).
// x, y: (rows, n); w, b: (n) or null; mean, rstd: (rows).
template <typename T, typename A>
void layer_norm_forward_reference(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t rows,
                                  int64_t n, A eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    auto get = [&](int64_t i) { return load_acc<A>(xr[i]); };

    // mean and var, centred two-pass with a shift (norm_math.h says why)
    A shift, d, var;
    norm_math::centered_moments<A>(get, n, shift, d, var);
    const A rs = norm_math::rstd_from_var(var, eps);
    mean[r] = shift + d;
    rstd[r] = rs;

    for (int64_t i = 0; i < n; ++i) {
      const A xhat = ((get(i) - shift) - d) * rs;
      const A out = xhat * (w ? w[i] : A(1)) + (b ? b[i] : A(0));
      yr[i] = store_acc<T>(out);
    }
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// ---- 3. The fast kernel (Highway SIMD per row, OpenMP over rows) ------------------------------------------
//
// Per row, one pass that reads x from memory and one that writes y; the row (up to tens of KB) stays in L1/L2
// in between, so memory traffic is the compulsory read of x and write of y.
//   pass 1: s1 = sum (x - K),  s2 = sum (x - K)^2       K = the mean of the row's first vector of values
//           d = s1 / n (so mean = K + d),  var = s2 / n - d^2
//   pass 2: y  = fma(fma(x - K, rstd, -d * rstd), w, b)
//
// Why pass 1 may use s2/n - d^2 here although the reference never does (norm_math.h explains why E[x^2] -
// E[x]^2 fails): the subtraction cancels in proportion to d^2 / var, i.e. to how far the shift K sits from
// the mean, in units of the row's spread. K is the mean of the first vector of the row (16 values on
// AVX-512), which is typically within std / 4 of the row's mean, so s2/n exceeds var by a few percent and the
// subtraction loses well under one bit. The kernel checks that on every row: when d^2 > var / 4 (the start of
// the row is not representative: sorted data, an outlier up front) or a sum overflowed, it recomputes var the
// centred way,
// var = mean(((x - K) - d)^2), from the row still in cache. A row with mean 1e4 and std 1e-2 is handled
// like any other: x - K is exact for values near K, so neither sum ever sees the 1e4.
//
// Rows wider than 2048 floats go four at a time: pass 1 for each, then one pass 2 for the four, so that
// each vector of w and b (together 32 KiB at n = 4096, the whole L1) is loaded once for four rows.
//
// Pass 2 folds the per-row scale: after the subtract, each output costs two FMAs. (Folding K into the FMA,
// y = fma(x, rstd, -mean * rstd), would save the subtract but bring back the cancellation the shift avoids:
// with mean 1e4 and std 1e-2, x * rstd is about 1e6 and loses the digits that matter.)
//
// The result can differ from the reference loop's in the last bits (another summation order and the
// one-pass variance); tests/test_norms_layer_norm.cpp bounds the difference on random and hostile rows.
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// One step of pass 2 for R rows at once, columns [j, j + 2 Lanes): y = (x - K) * rstd + (-d * rstd), then
// * w + b (vneg = -d * rstd), two vectors per row so that one instruction stores both as bf16 (StoreAs2).
// !kShifted: the rows' statistics came unshifted (K = 0), and x - K is x.
template <int R, bool kShifted, bool kInstruction, class D, typename T>
HWY_INLINE void LayerNormOutputPair(D d, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                    const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n, int64_t j,
                                    const hn::Vec<D>* vK, const hn::Vec<D>* vrs, const hn::Vec<D>* vneg) {
  const int64_t L = int64_t(hn::Lanes(d));
  auto centre = [&](hn::Vec<D> v, int k) HWY_ATTR { return kShifted ? hn::Sub(v, vK[k]) : v; };
  const auto vw0 = hn::LoadU(d, w + j), vb0 = hn::LoadU(d, b + j);
  const auto vw1 = hn::LoadU(d, w + j + L), vb1 = hn::LoadU(d, b + j + L);
  for (int k = 0; k < R; ++k) {
    const auto xhat0 = hn::MulAdd(centre(LoadAs(d, x + k * n + j), k), vrs[k], vneg[k]);
    const auto xhat1 = hn::MulAdd(centre(LoadAs(d, x + k * n + j + L), k), vrs[k], vneg[k]);
    StoreAs2With<kInstruction>(d, hn::MulAdd(xhat0, vw0, vb0), hn::MulAdd(xhat1, vw1, vb1), y + k * n + j);
  }
}

// pass 2 for R rows at once, from x, y (rows n apart): y = (x - K) * rstd + (-d * rstd), then * w + b.
// Each vector of w and b loaded serves the R rows. ahead (R = 1; null: none): a row of n 16-bit values
// to prefetch on the way, one prefetch per two vectors (a 64-byte line on AVX-512; RowAfterNext,
// norm_simd-inl.h).
template <int R, bool kShifted, bool kInstruction, typename T>
HWY_INLINE void LayerNormOutputRows(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                    const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n,
                                    const AccT<T>* K, const AccT<T>* dmean, const AccT<T>* rs,
                                    const T* ahead) {
  using D = hn::ScalableTag<AccT<T>>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  const size_t rest = size_t(n - n_main);
  hn::Vec<D> vK[R], vrs[R], vneg[R];
  for (int k = 0; k < R; ++k) {
    vK[k] = hn::Set(d, K[k]);
    vrs[k] = hn::Set(d, rs[k]);
    vneg[k] = hn::Set(d, -dmean[k] * rs[k]);
  }
  // x - K; no subtraction in the rows whose statistics came unshifted (the same value: x - 0 = x)
  auto centre = [&](hn::Vec<D> v, int k) HWY_ATTR { return kShifted ? hn::Sub(v, vK[k]) : v; };
  int64_t j = 0;
  for (; j + 2 * L <= n_main; j += 2 * L) {
    if (ahead) hwy::Prefetch(ahead + j);
    LayerNormOutputPair<R, kShifted, kInstruction>(d, x, w, b, y, n, j, vK, vrs, vneg);
  }
  for (; j < n_main; j += L) {
    const auto vw = hn::LoadU(d, w + j), vb = hn::LoadU(d, b + j);
    for (int k = 0; k < R; ++k) {
      const auto xhat = hn::MulAdd(centre(LoadAs(d, x + k * n + j), k), vrs[k], vneg[k]);
      StoreAs(d, hn::MulAdd(xhat, vw, vb), y + k * n + j);
    }
  }
  if (rest) {
    const auto vw = LoadTailA(d, w + n_main, rest), vb = LoadTailA(d, b + n_main, rest);
    for (int k = 0; k < R; ++k) {
      const auto xhat = hn::MulAdd(centre(Tail<D, T>(x + k * n + n_main, rest).load(d), k), vrs[k], vneg[k]);
      Tail<D, T> y_tail(rest);
      y_tail.store(d, hn::MulAdd(xhat, vw, vb), y + k * n + n_main);
    }
  }
}

// Whether the output walk of R rows with shifts K must subtract them: false only for bf16 rows whose
// statistics all came from the unshifted sums (K = 0).
template <int R, typename T>
HWY_INLINE bool AnyShifted(const AccT<T>* K) {
  if constexpr (!std::is_same_v<T, hwy::bfloat16_t>) return true;
  bool shifted = false;
  for (int k = 0; k < R; ++k) shifted |= K[k] != 0;
  return shifted;
}

// pass 2 for R rows. When the statistics of all R came from the unshifted bf16 sums (K = 0), without the
// subtraction of K: one operation of the five per vector.
// kInstruction: see StoreAs2With (norm_simd-inl.h); the four-row groups take it (LayerNormForwardRowGroups).
template <int R, typename T, bool kInstruction = false>
HWY_INLINE void LayerNormOutput(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n, const AccT<T>* K,
                                const AccT<T>* dmean, const AccT<T>* rs, const T* ahead = nullptr) {
  if (!AnyShifted<R, T>(K))
    return LayerNormOutputRows<R, false, kInstruction>(x, w, b, y, n, K, dmean, rs, ahead);
  LayerNormOutputRows<R, true, kInstruction>(x, w, b, y, n, K, dmean, rs, ahead);
}

// The output walk of the kRows rows at x (statistics K, dm, rs) with the next group's statistics inside it
// (FusedGroupWalk, norm_simd-inl.h; n a multiple of 4 vectors): the rows at next get their K, dm and rs, and
// their mean and rstd stored at mean_next, rstd_next. The walk takes the rows' unshifted sums (kTry, bf16)
// or their shifted ones, and hands them to LayerNormRowStatistics, which takes the other kind from the cache
// where a row needs it. The same operations per row as a row on its own, so the same bits.
template <int kRows, bool kShifted, bool kTry, bool kInstruction, typename T>
HWY_INLINE void LayerNormOutputFused(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                     const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, int64_t n,
                                     const AccT<T>* K, const AccT<T>* dm, const AccT<T>* rs,
                                     const T* HWY_RESTRICT next, AccT<T>* K_next, AccT<T>* dm_next,
                                     AccT<T>* rs_next, AccT<T>* HWY_RESTRICT mean_next,
                                     AccT<T>* HWY_RESTRICT rstd_next, UnshiftedGate& gate, double eps) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  hn::Vec<D> vK[kRows], vrs[kRows], vneg[kRows];
  for (int k = 0; k < kRows; ++k) {
    vK[k] = hn::Set(d, K[k]);
    vrs[k] = hn::Set(d, rs[k]);
    vneg[k] = hn::Set(d, -dm[k] * rs[k]);
  }
  using Sums = MomentSums4<!kTry, D>;  // unshifted sums for kTry
  auto start = [&](int k) HWY_ATTR NG_ALWAYS_INLINE {
    if (!kTry) K_next[k] = RowShift(d, next + k * n, n);
    return Sums(d, hn::Set(d, kTry ? A(0) : K_next[k]));
  };
  FusedGroupWalk<kRows>(
      d, next, n, start(0),
      [&](int k, Sums& sums) HWY_ATTR NG_ALWAYS_INLINE {
        const T* row = next + k * n;
        A s12[2];
        sums.Finish(d, row, n, n, s12[0], s12[1]);
        if constexpr (kTry) {
          LayerNormRowStatistics(d, row, n, eps, gate, K_next[k], dm_next[k], rs_next[k], s12);
        } else {
          const A sums_K[3] = {K_next[k], s12[0], s12[1]};
          LayerNormRowStatistics(d, row, n, eps, gate, K_next[k], dm_next[k], rs_next[k], nullptr, sums_K);
        }
        mean_next[k] = K_next[k] + dm_next[k];
        rstd_next[k] = rs_next[k];
        if (k + 1 < kRows) sums = start(k + 1);
      },
      [&](int64_t j) HWY_ATTR NG_ALWAYS_INLINE {
        LayerNormOutputPair<kRows, kShifted, kInstruction>(d, x, w, b, y, n, j, vK, vrs, vneg);
      });
}

// Rows [r0, r1) kRows at a time (r1 - r0 a multiple of kRows): their statistics row by row
// (LayerNormRowStatistics, the rows in order through the gate), then one output walk for all of them; with n
// a multiple of 4 vectors, the next group's statistics inside this group's output walk
// (LayerNormOutputFused). Out of line, so that it does not change the code of the one-row loop below (when
// it was inlined there, that loop ran 15-30% slower at 4096 x 1024).
template <int kRows, bool kInstruction, typename T>
HWY_NOINLINE void LayerNormForwardRowGroups(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                            const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y,
                                            AccT<T>* HWY_RESTRICT mean, AccT<T>* HWY_RESTRICT rstd,
                                            int64_t r0, int64_t r1, int64_t n, double eps,
                                            UnshiftedGate& gate) {
  using A = AccT<T>;
  constexpr bool kBf16 = std::is_same_v<T, hwy::bfloat16_t>;
  const hn::ScalableTag<A> d;
  const bool fused = n % (4 * int64_t(hn::Lanes(d))) == 0;
  A K[kRows], dm[kRows], rs[kRows];  // the statistics of the group at r
  auto statistics = [&](int64_t r) HWY_ATTR {
    for (int k = 0; k < kRows; ++k) {
      LayerNormRowStatistics(d, x + (r + k) * n, n, eps, gate, K[k], dm[k], rs[k]);
      mean[r + k] = K[k] + dm[k];
      rstd[r + k] = rs[k];
    }
  };
  if (r0 < r1) statistics(r0);
  for (int64_t r = r0; r < r1; r += kRows) {
    if (!fused || r + kRows == r1) {  // this group's output; the next group's statistics (if any) after it
      LayerNormOutput<kRows, T, kInstruction>(x + r * n, w, b, y + r * n, n, K, dm, rs);
      if (r + kRows < r1) statistics(r + kRows);
      continue;
    }
    A K1[kRows], dm1[kRows], rs1[kRows];
    const T* next = x + (r + kRows) * n;
    A* mean1 = mean + r + kRows;
    A* rstd1 = rstd + r + kRows;
    const bool shifted = AnyShifted<kRows, T>(K);  // as LayerNormOutput
    // The walk takes the sums the rows will most likely use: unshifted while the gate is open. (It guesses
    // for a block that starts in the next group; a wrong guess costs a pass over a row from the cache.)
    const bool tries = kBf16 && gate.open;
#define NG_LN_FUSED(kShifted, kTry)                                                                         \
  LayerNormOutputFused<kRows, kShifted, kTry, kInstruction>(x + r * n, w, b, y + r * n, n, K, dm, rs, next, \
                                                            K1, dm1, rs1, mean1, rstd1, gate, eps)
    if (shifted && !tries) {
      NG_LN_FUSED(true, false);
    } else if constexpr (kBf16) {
      if (shifted)
        NG_LN_FUSED(true, true);
      else if (tries)
        NG_LN_FUSED(false, true);
      else
        NG_LN_FUSED(false, false);
    }
#undef NG_LN_FUSED
    std::copy(K1, K1 + kRows, K), std::copy(dm1, dm1 + kRows, dm), std::copy(rs1, rs1 + kRows, rs);
  }
}

// ---- bf16 short rows: the output from the values the statistics pass loaded ----
//
// A short bf16 row's statistics pass loads x in pairs (LoadBf16Pairs: one load and two bit operations for 2L
// values, the even-indexed ones and the odd-indexed ones); the output walk then converted x again, in order,
// two shuffles and two shifts per 2L values more. These rows are bound by the two vector ports (~212 slots
// per row of 256 values, stop 28). So for rows of at most kKeptRowMax values, n a multiple of 4L, the
// statistics pass also stores what it loaded, in pairs, into an L1 buffer (keep: MomentSums4::Step4), and
// the output walk reads it there, with w and b laid out in pairs once per call and y put back in place by
// StoreBf16Interleaved (vcvtne2ps2bf16 and one vpermw on AVX512-BF16). Each y is computed from the same x,
// w, b and statistics as in LayerNormOutputRows, so the bits are the same. A/B in docs/performance.md
// (stop 30).

// The longest rows that take it: 512 values (1 KiB). Rows of 1024, which are bound by memory rather than by
// the vector ports (4096 x 1024 reads 95% of the copy), measured 2% slower with it (0.312 -> 0.318 ms, best
// of 5, 2 threads), and level without it again (0.309); the bench has no length in between.
inline constexpr int64_t kKeptRowMax = 512;

// src (n floats, n a multiple of 2L) laid out in pairs: in each block of 2L, the even columns, then the odd.
template <class D>
HWY_INLINE void LayOutInPairs(D d, const float* HWY_RESTRICT src, int64_t n, float* HWY_RESTRICT dst) {
#if HWY_TARGET == HWY_SCALAR
  (void)d, (void)src, (void)n, (void)dst;
#else
  const int64_t L = int64_t(hn::Lanes(d));
  for (int64_t j = 0; j < n; j += 2 * L) {
    const auto v0 = hn::LoadU(d, src + j), v1 = hn::LoadU(d, src + j + L);
    hn::Store(hn::ConcatEven(d, v1, v0), d, dst + j);
    hn::Store(hn::ConcatOdd(d, v1, v0), d, dst + j + L);
  }
#endif
}

// Whether this target's bf16 kernels may work in pairs (LoadBf16Pairs, StoreBf16Interleaved).
template <typename T>
constexpr bool PairsHere() {
#if HWY_TARGET == HWY_SCALAR || (defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
  return false;
#else
  return UseBf16Pairs<hn::ScalableTag<AccT<T>>, T>();
#endif
}

#if HWY_TARGET != HWY_SCALAR
// One row's output walk from keep (its n values in pairs); wp, bp: w and b in pairs. ahead: as
// LayerNormOutputRows.
template <bool kShifted>
HWY_INLINE void LayerNormOutputKept(const float* HWY_RESTRICT keep, const float* HWY_RESTRICT wp,
                                    const float* HWY_RESTRICT bp, hwy::bfloat16_t* HWY_RESTRICT y, int64_t n,
                                    float K, float dm, float rs, const hwy::bfloat16_t* ahead) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto vK = hn::Set(d, K), vrs = hn::Set(d, rs), vneg = hn::Set(d, -dm * rs);
  for (int64_t j = 0; j < n; j += 2 * L) {
    if (ahead) hwy::Prefetch(ahead + j);
    auto even = hn::Load(d, keep + j), odd = hn::Load(d, keep + j + L);
    if constexpr (kShifted) even = hn::Sub(even, vK), odd = hn::Sub(odd, vK);
    const auto y0 = hn::MulAdd(hn::MulAdd(even, vrs, vneg), hn::Load(d, wp + j), hn::Load(d, bp + j));
    const auto y1 = hn::MulAdd(hn::MulAdd(odd, vrs, vneg), hn::Load(d, wp + j + L), hn::Load(d, bp + j + L));
    ng::simd::HWY_NAMESPACE::StoreBf16Interleaved(d, y0, y1, y + j);
  }
}

// Short bf16 rows [r, r1) of n values (n a multiple of 4L, at most kKeptRowMax), pipelined as in
// LayerNormForwardRows (row r + 1's statistics before row r's output walk), each row's values kept in its
// own half of the buffer.
HWY_NOINLINE void LayerNormForwardKeptRows(const hwy::bfloat16_t* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                                           const float* HWY_RESTRICT b, hwy::bfloat16_t* HWY_RESTRICT y,
                                           float* HWY_RESTRICT mean, float* HWY_RESTRICT rstd, int64_t r,
                                           int64_t r1, int64_t n, double eps, UnshiftedGate& gate) {
  const hn::ScalableTag<float> d;
  // w, b, and the two rows' values, 128 bytes further apart than their length (no two at a multiple of 4 KiB)
  constexpr int64_t kStride = kKeptRowMax + 32;
  HWY_ALIGN float block[4 * kStride];
  float* HWY_RESTRICT wp = block;
  float* HWY_RESTRICT bp = block + kStride;
  float* keep[2] = {block + 2 * kStride, block + 3 * kStride};
  LayOutInPairs(d, w, n, wp);
  LayOutInPairs(d, b, n, bp);
  float K, dm, rs;
  LayerNormRowStatistics(d, x + r * n, n, eps, gate, K, dm, rs, nullptr, nullptr, keep[r & 1]);
  for (; r < r1; ++r) {
    float K_next = 0, dm_next = 0, rs_next = 0;
    if (r + 1 < r1)
      LayerNormRowStatistics(d, x + (r + 1) * n, n, eps, gate, K_next, dm_next, rs_next, nullptr, nullptr,
                             keep[(r + 1) & 1]);
    mean[r] = K + dm;
    rstd[r] = rs;
    const hwy::bfloat16_t* ahead = RowAfterNext(x, r, r1, n);
    if (K != 0) {  // as AnyShifted
      LayerNormOutputKept<true>(keep[r & 1], wp, bp, y + r * n, n, K, dm, rs, ahead);
    } else {
      LayerNormOutputKept<false>(keep[r & 1], wp, bp, y + r * n, n, K, dm, rs, ahead);
    }
    K = K_next, dm = dm_next, rs = rs_next;
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

template <typename T>
void LayerNormForwardRows(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                          const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean,
                          AccT<T>* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t n, double eps) {
  using A = AccT<T>;
  const hn::ScalableTag<A> d;
  // Wide rows (w and b past half the L1: n > 2048 in f32) go four at a time. One row per output walk would
  // reload w and b from the L2 for every row: measured (1 thread, AMD Zen 4, f32 forward) 2.1-3.0 ms at
  // 1024 x 4096 against 1.2-1.3 ms at 4096 x 1024, the same bytes.
  constexpr int kRows = 4;
  int64_t r = r0;
  UnshiftedGate gate;  // which bf16 rows try the unshifted sums (norm_simd-inl.h)
  if (int64_t(2 * sizeof(A)) * n > 16384) {
    r = r0 + (r1 - r0) / kRows * kRows;
    // the group's stores with the bf16 instruction and the rare rounding by hand as a call (StoreAs2With)
    if (Bf16InstructionHere<decltype(d), T>())
      LayerNormForwardRowGroups<kRows, true>(x, w, b, y, mean, rstd, r0, r, n, eps, gate);
    else
      LayerNormForwardRowGroups<kRows, false>(x, w, b, y, mean, rstd, r0, r, n, eps, gate);
  }
  if (r < r1 && n * int64_t(sizeof(T)) <= 2048) {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (PairsHere<T>()) {  // bf16, n a multiple of 4L, at most 512: the output from the kept values
      if (n % (4 * int64_t(hn::Lanes(d))) == 0 && n <= kKeptRowMax)
        return LayerNormForwardKeptRows(x, w, b, y, mean, rstd, r, r1, n, eps, gate);
    }
#endif
    // Short rows (at most 2 KiB of x): software-pipelined, the NEXT row's statistics before this row's
    // output walk. A row's statistics end in a chain of dependent steps (the horizontal sums, a division,
    // the square root, another division; their latencies add up to some 80 cycles by the instruction
    // tables, not measured: the VM has no cycle counters) that the output walk must wait for;
    // started a row early, the chain runs under the output walk's loads and stores. The same operations per
    // row, so the same bits. Measured (AMD Zen 4, 2 threads, A/B in one process, best): f32 16384 x 256
    // 0.382 -> 0.324 ms, 65536 x 64 0.701 -> 0.637 ms, 8192 x 512 0.310 -> 0.297 ms; bf16 16384 x 256
    // 0.582 -> 0.474 ms, 4096 x 1024 0.396 -> 0.364 ms. With 4 KiB rows (f32 4096 x 1024) it was 4-8% slower.
    //
    // bf16 rows try the unshifted sums (UnshiftedStatisticsFromSums, UnshiftedGate: norm_simd-inl.h).
    // Measured (Intel Xeon VM, 2 threads, scripts/bench_ab.py --rounds 5, best ms; randn rows): 16384 x 256
    // 0.503 -> 0.400, 4096 x 1024 0.415 -> 0.376. Rows at mean 4, std 1 (--norm-mean 4: every block of 16
    // rows pays for one refused attempt): 0.503 -> 0.517 and 0.421 -> 0.430. (Rows of 8 KiB, 1024 x 4096,
    // were level with the first version of it, vdpbf16ps, 0.386 -> 0.386; they try the unshifted sums since
    // their next group's sums are taken inside the output walk: LayerNormOutputFused.)
    //
    // f16/bf16 rows of 1 KiB and more ask for the row after next during the output walk (RowAfterNext,
    // norm_simd-inl.h, says why and what it measured).
    A K, dm, rs;
    LayerNormRowStatistics(d, x + r * n, n, eps, gate, K, dm, rs);
    for (; r < r1; ++r) {
      A K_next = 0, dm_next = 0, rs_next = 0;
      if (r + 1 < r1) LayerNormRowStatistics(d, x + (r + 1) * n, n, eps, gate, K_next, dm_next, rs_next);
      mean[r] = K + dm;
      rstd[r] = rs;
      LayerNormOutput<1>(x + r * n, w, b, y + r * n, n, &K, &dm, &rs, RowAfterNext(x, r, r1, n));
      K = K_next, dm = dm_next, rs = rs_next;
    }
    return;
  }
  for (; r < r1; ++r) {
    A K, dm, rs;
    LayerNormRowStatistics(d, x + r * n, n, eps, gate, K, dm, rs);
    mean[r] = K + dm;
    rstd[r] = rs;
    LayerNormOutput<1>(x + r * n, w, b, y + r * n, n, &K, &dm, &rs);
  }
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

// ---- 4. The backward --------------------------------------------------------------------------------------
//
// Given dy = dL/dy for one row, find dL/dx, dL/dweight, dL/dbias. Write r = rstd, and
//   g_i = dL/dxhat_i = dy_i * w_i                                 (y_i = xhat_i w_i + b_i)
//
// weight and bias are per feature and shared by every row, so their gradients sum over rows:
//   dweight_i = sum_rows dy_i * xhat_i          dbias_i = sum_rows dy_i
//
// x_j reaches the loss through every xhat_i of its row (through mean and var), so
//   dx_j = sum_i g_i * dxhat_i/dx_j.
//
// With xhat_i = (x_i - mean) * r:
//   dmean/dx_j = 1/n
//   dvar/dx_j  = (2/n) sum_k (x_k - mean)(delta_kj - 1/n) = (2/n)(x_j - mean)
//                (the -1/n part is -(2/n^2) sum_k (x_k - mean), and sum_k (x_k - mean) = 0)
//   dr/dx_j    = -1/2 (var + eps)^(-3/2) dvar/dx_j = -r^3 (x_j - mean) / n = -r^2 xhat_j / n
//   dxhat_i/dx_j = r (delta_ij - 1/n) + (x_i - mean) dr/dx_j
//                = r (delta_ij - 1/n - xhat_i xhat_j / n)
//
// So  dx_j = r * ( g_j  -  (1/n) sum_i g_i  -  xhat_j (1/n) sum_i g_i xhat_i ).
//
// The formula coded below (norm_math::centered_norm_dx), with mean_g = (1/n) sum_i g_i and
// mean_gx = (1/n) sum_i g_i xhat_i (the next paragraph computes them precisely):
//
//   dx_j = rstd * g_j  -  rstd * mean_g  -  rstd * xhat_j * mean_gx
//          term 1         term 2            term 3
//   term 1: x_j -> xhat_j directly; term 2: through the mean; term 3: through the variance.
//
// Recomputing xhat precisely. The saved mean is rounded to the compute type: for a row with mean 1e4 and
// std 1e-2 in f32 it is off by up to ulp(1e4)/2 ~ 5e-4, 5% of the std, and (x - saved mean) * rstd would move
// every xhat of the row by up to 0.05. So the backward does what the forward does (section 3): it centres
// with a shift s and measures the row's offset from s itself. Its shift is the saved mean s = mean~ (x - s is
// then exact for the values near it, Sterbenz, and the offset d is tiny whatever x_0 is):
//
//   c_i = x_i - s,    d = (1/n) sum_i c_i  (= mean - s, to float precision),   xhat_i = (c_i - d) * r.
//
// d is only known after a pass over the row, and mean_gx is needed before dx. Both come from the same first
// pass, since sum_i g_i xhat_i = r (sum_i g_i c_i - d sum_i g_i):
//
//   pass 1 (one read of x and dy):  sum_c = sum c_i,  sum_g = sum g_i,  sum_gc = sum g_i c_i
//   then   d = sum_c / n,  mean_g = sum_g / n,  mean_gx = r * (sum_gc / n - d * mean_g)
//   pass 2 (the row in cache):      xhat_i = (c_i - d) * r;  dweight_i += dy_i xhat_i;  dbias_i += dy_i;
//                                    dx_i = r g_i - r mean_g - r xhat_i mean_gx   (terms 1, 2, 3 above)
//
// (sum_gc / n - d * mean_g subtracts nothing large: c_i is the size of the row's spread, d smaller still.)

// Reference. dy, x, dx: (rows, n); w: (n) or null; mean, rstd: (rows), saved by the forward; dw, db: (n) or
// null, summed over rows in row order. dx may be null (not needed).
template <typename T, typename A>
void layer_norm_backward_reference(const T* dy, const T* x, const A* w, const A* mean, const A* rstd, T* dx,
                                   A* dw, A* db, int64_t rows, int64_t n) {
  if (dw) std::fill(dw, dw + n, A(0));
  if (db) std::fill(db, db + n, A(0));
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    const A shift = mean[r], rs = rstd[r];
    auto c = [&](int64_t i) { return load_acc<A>(xr[i]) - shift; };  // x_i - s
    auto g = [&](int64_t i) { return load_acc<A>(dyr[i]) * (w ? w[i] : A(1)); };

    // pass 1: the row's offset from the shift, and the two sums dx needs
    A sum_c = 0, sum_g = 0, sum_gc = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum_c += c(i);
      sum_g += g(i);
      sum_gc += g(i) * c(i);
    }
    const A d = sum_c / A(n);  // mean - shift
    const A mean_g = sum_g / A(n);
    const A mean_gx = rs * (sum_gc / A(n) - d * mean_g);

    // pass 2: xhat, the parameter gradients and dx
    for (int64_t i = 0; i < n; ++i) {
      const A xhat = (c(i) - d) * rs;
      if (dw) dw[i] += load_acc<A>(dyr[i]) * xhat;
      if (db) db[i] += load_acc<A>(dyr[i]);
      if (dx) dx[r * n + i] = store_acc<T>(norm_math::centered_norm_dx(g(i), xhat, rs, mean_g, mean_gx));
    }
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// The fast backward. Per row two passes (the row is in cache for the second), with s = the saved mean and
// c = x - s. The order differs from the reference loop's in one place, for speed: the dweight, dbias partial
// rows are updated in pass 1, where the row streams in from memory and the extra loads and stores cost
// nothing, rather than in pass 2, where they would slow the dx loop by ~25% (measured, 1 thread, 4096 x 1024
// and 1024 x 4096 f32). But pass 1 does not know d yet, so it adds dy * (c * rstd), and a loop of its own
// adds the rest, dy * (-d * rstd) (dy * xhat = dy * (c * rstd) + dy * (-d * rstd)), only for a row whose
// |d * rstd| is above the rounding noise of d itself: eps/2 * sqrt(n / L) (eps/2: half an ulp of 1 in the
// compute type; L: lanes). Why that floor: d is sum c / n with sum c added up in L lanes of n / L values
// each, and that sum's rounding error grows with the lanes' length. On ordinary rows the computed d is that
// noise and nothing else: bf16 rows of 4096 normal values at mean 0 have a true |d * rstd| below 4e-9 (from
// f64 sums), but the f32 lanes give up to 2.5e-7 (2 eps), and half the rows passed the old floor of eps/2,
// which ran the loop (6-8% of the backward) to add noise. Below the new floor (16 eps/2 at n = 4096 with 16
// lanes) the term is no bigger than the error the reference's own d carries. A row with mean 1e4 and std 1e-2
// in f32 (|d * rstd| up to 0.05) is far above it.
//   pass 1: sum_c = sum c, sum_g = sum g, sum_gc = sum g c;   dweight += dy * (c * rstd), dbias += dy
//   pass 2: [dweight += dy * (-d * rstd)];  xhat = fma(c, rstd, -d * rstd);
//           dx = fma(g, rstd, fma(xhat, -rstd * mean_gx, -rstd * mean_g))
//                    term 1         term 3              term 2
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// Rows [r0, r1) kRows at a time (r1 - r0 a multiple of kRows; kRows = 1 for ordinary rows, 4 for wide ones).
// Per row, with s = the saved mean (a shift) and c = x - s:
//   pass 1: sum c, sum g, sum g c (g = dy w); this chunk's partial dweight += dy * c * rstd, dbias += dy
//   then:   d = sum c / n (the row's offset from s), the two means dx needs, and dweight's second part
//           (-d * rstd * dy, in a loop of its own, only for a row where it matters: fix_dw)
//   pass 2: xhat = c * rstd - d * rstd;  dx = g * rstd + (xhat * k3 + term2)
// With kRows = 4 each vector of w, dweight and dbias is loaded (and stored) once for the four rows in pass
// 1, and each vector of w once in pass 2. The rows' updates of dweight and dbias are added in row order;
// only a row that needs fix_dw adds that part after its group's pass 1 instead of before the next row's,
// so such a row's dweight can differ in the last bit from one row at a time. The tails are zero-padded:
// there dy = 0, so g, g * c, dy * anything and dy add nothing; c = -s is not zero there, so sum c masks it.
// prefetch: the page-ahead prefetch of x and dy in pass 1 (see LayerNormBackwardRows).
// kBuffer (f16/bf16 rows of at most kBackwardBufferFloats values): pass 1 also stores c and g as floats in
// an L1 buffer, and pass 2 reads them there instead of converting x and dy again and recomputing them (the
// same values, so the same bits). Why: these rows are bound by the two vector ports, not by memory, and pass
// 2's two conversions, subtraction and product were 6 of its ~11 vector operations per vector; the buffer's
// stores and loads use the load and store ports. Measured in docs/performance.md ("stop 24").
template <int kRows, bool kBuffer, typename T>
HWY_NOINLINE void LayerNormBackwardRowGroups(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x,
                                             const AccT<T>* HWY_RESTRICT w, const AccT<T>* HWY_RESTRICT mean,
                                             const AccT<T>* HWY_RESTRICT rstd, T* HWY_RESTRICT dx,
                                             AccT<T>* HWY_RESTRICT dw_part, AccT<T>* HWY_RESTRICT db_part,
                                             int64_t r0, int64_t r1, int64_t n, bool prefetch) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  const size_t rest = size_t(n - n_main);
  const auto tail_mask = hn::FirstN(d, rest);
  const T* x_end = x + r1 * n;
  const T* dy_end = dy + r1 * n;
  // fix_dw's floor (above): eps/2 * sqrt(n / L), and never below eps/2
  const A fix_floor = std::numeric_limits<A>::epsilon() / 2 * std::max(A(1), std::sqrt(A(n) / A(L)));
  // kBuffer: c and g of the kRows rows, as pass 1 computes them, for pass 2 (rows of n_pad floats)
  const int64_t n_pad = n_main + (rest ? L : 0);
  HWY_ALIGN A cbuf[kBuffer ? kBackwardBufferFloats : 1], gbuf[kBuffer ? kBackwardBufferFloats : 1];
  for (int64_t r = r0; r < r1; r += kRows) {
    hn::Vec<D> vs[kRows], vrs[kRows], sum_c[kRows], sum_g[kRows], sum_gc[kRows];
    for (int k = 0; k < kRows; ++k) {
      vs[k] = hn::Set(d, mean[r + k]);
      vrs[k] = hn::Set(d, rstd[r + k]);
      sum_c[k] = sum_g[k] = sum_gc[k] = hn::Zero(d);
    }
    // pass 1 at columns [i, i + count). Forced inline, as the forward's walks are: without it GCC kept the
    // four rows' sums on the stack, one store and one reload per sum per vector, in the loop of the bf16
    // four-row kernel. A/B in docs/performance.md (stop 30).
    auto step1 = [&](int64_t i, size_t count) HWY_ATTR NG_ALWAYS_INLINE {
      const bool full = count == size_t(L);
      const auto wv = LoadAN(d, w + i, count);
      auto dwv = dw_part ? LoadAN(d, dw_part + i, count) : hn::Zero(d);
      auto dbv = db_part ? LoadAN(d, db_part + i, count) : hn::Zero(d);
      for (int k = 0; k < kRows; ++k) {
        const int64_t off = (r + k) * n + i;
        const auto xv = LoadAsN(d, x + off, count), dyv = LoadAsN(d, dy + off, count);
        const auto c = full ? hn::Sub(xv, vs[k]) : hn::IfThenElseZero(tail_mask, hn::Sub(xv, vs[k]));
        const auto g = hn::Mul(dyv, wv);
        if constexpr (kBuffer) {
          hn::Store(c, d, cbuf + k * n_pad + i);
          hn::Store(g, d, gbuf + k * n_pad + i);
        }
        sum_c[k] = hn::Add(sum_c[k], c);
        sum_g[k] = hn::Add(sum_g[k], g);
        sum_gc[k] = hn::MulAdd(g, c, sum_gc[k]);
        dwv = hn::MulAdd(dyv, hn::Mul(c, vrs[k]), dwv);
        dbv = hn::Add(dyv, dbv);
      }
      if (dw_part) StoreAN(d, dwv, dw_part + i, count);
      if (db_part) StoreAN(d, dbv, db_part + i, count);
    };
    for (int64_t i = 0; i < n_main; i += L) {
      if (prefetch) {
        for (int k = 0; k < kRows; ++k) {
          PrefetchAhead(x + (r + k) * n + i, x_end);  // the rows come from memory: a page ahead
          PrefetchAhead(dy + (r + k) * n + i, dy_end);
        }
      }
      step1(i, size_t(L));
    }
    if (rest) step1(n_main, rest);

    // between the passes, per row
    hn::Vec<D> vdr[kRows], term2[kRows], k3[kRows];
    for (int k = 0; k < kRows; ++k) {
      const A rs = rstd[r + k];
      const A dmean = ReduceSum(d, sum_c[k]) / A(n);
      const A mean_g = ReduceSum(d, sum_g[k]) / A(n);
      const A mean_gx = rs * (ReduceSum(d, sum_gc[k]) / A(n) - dmean * mean_g);
      vdr[k] = hn::Set(d, -dmean * rs);
      term2[k] = hn::Set(d, -rs * mean_g);
      k3[k] = hn::Set(d, -rs * mean_gx);
      if (dw_part && std::abs(dmean * rs) > fix_floor) {  // fix_dw
        const T* HWY_RESTRICT dyr = dy + (r + k) * n;
        for (int64_t i = 0; i < n_main; i += L)
          hn::StoreU(hn::MulAdd(LoadAs(d, dyr + i), vdr[k], hn::LoadU(d, dw_part + i)), d, dw_part + i);
        if (rest)
          StoreTailA(d,
                     hn::MulAdd(Tail<D, T>(dyr + n_main, rest).load(d), vdr[k],
                                LoadTailA(d, dw_part + n_main, rest)),
                     dw_part + n_main, rest);
      }
    }
    if (!dx) continue;

    // pass 2 at columns [i, i + count)
    auto dx_of = [&](int k, int64_t off, hn::Vec<D> wv, size_t count) HWY_ATTR NG_ALWAYS_INLINE {
      hn::Vec<D> c, g;
      if constexpr (kBuffer) {  // pass 1's c and g (in a tail, lanes past count are not stored)
        const int64_t i = off - (r + k) * n;
        c = hn::Load(d, cbuf + k * n_pad + i);
        g = hn::Load(d, gbuf + k * n_pad + i);
      } else {
        c = hn::Sub(LoadAsN(d, x + off, count), vs[k]);
        g = hn::Mul(LoadAsN(d, dy + off, count), wv);
      }
      const auto xhat = hn::MulAdd(c, vrs[k], vdr[k]);
      return hn::MulAdd(g, vrs[k], hn::MulAdd(xhat, k3[k], term2[k]));
    };
    // Two vectors per store (StoreRowsInPairs, norm_simd-inl.h), as in the forward. Measured
    // (AMD Zen 4, scripts/bench_ab.py, stop 20): bf16 backward, 1 thread, best / median: 4096 x 1024 1.61
    // / 1.70 -> 1.46 / 1.51 ms, 1024 x 4096 level; f32 level and bit for bit the same.
    StoreRowsInPairs<kRows>(d, w, r, n, dx, dx_of);
  }
}

// The bf16 rows of n values, n a multiple of 2L and at most kPairRowMax (the rows that go one at a time,
// with the buffer): the same two passes, with x and dy loaded in pairs. LoadBf16Pairs (norm_simd-inl.h)
// gives 2L values as two vectors, the even-indexed values and the odd-indexed ones, for one load and two
// bit operations, where LoadAs spends two widening shuffles and two shifts. Why: pass 1 converts x and dy,
// 4 of its 12 vector operations per vector, and these rows are bound by the two vector ports. Everything a
// value meets per column is laid out the same way once per call, in blocks of 2L columns (the even columns,
// then the odd ones): w, and the call's dweight and dbias partial rows, which go back into the row's order
// at the end of the call. dx goes back in place as it is stored (StoreBf16Interleaved: vcvtne2ps2bf16 and
// one vpermw on AVX512-BF16). Per column the operations of LayerNormBackwardRowGroups; the row sums are
// added in another lane order, so d, mean_g, mean_gx and dx can differ from it in the last bits. Wider rows
// (four at a time) keep LayerNormBackwardRowGroups: in pairs they measured no faster at 1024 x 4096 (0.704
// -> 0.716 ms, 2 threads). A/B in docs/performance.md (stop 30).
inline constexpr int64_t kPairRowMax = 2048;

#if HWY_TARGET != HWY_SCALAR
HWY_NOINLINE void LayerNormBackwardPairRows(const hwy::bfloat16_t* HWY_RESTRICT dy,
                                            const hwy::bfloat16_t* HWY_RESTRICT x,
                                            const float* HWY_RESTRICT w, const float* HWY_RESTRICT mean,
                                            const float* HWY_RESTRICT rstd, hwy::bfloat16_t* HWY_RESTRICT dx,
                                            float* HWY_RESTRICT dw_part, float* HWY_RESTRICT db_part,
                                            int64_t r0, int64_t r1, int64_t n) {
  using D = hn::ScalableTag<float>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  // w, dweight, dbias in pair order (blocks of 2L: the even columns, then the odd ones); c and g of the row
  // One block, its five rows 2 KiB further apart than their length. As five arrays of 8 KiB (offsets a
  // multiple of 4 KiB apart) the kernel was 2-3% slower (16384 x 256, 2 threads, best of 5: 0.650 -> 0.633
  // ms; 4096 x 1024 0.580 -> 0.567), likely the 4 KiB aliasing of a load with an older store to another row.
  constexpr int64_t kStride = kPairRowMax + 512;
  HWY_ALIGN float block[5 * kStride];
  float* HWY_RESTRICT wp = block;
  float* HWY_RESTRICT dwp = block + kStride;
  float* HWY_RESTRICT dbp = block + 2 * kStride;
  float* HWY_RESTRICT cbuf = block + 3 * kStride;
  float* HWY_RESTRICT gbuf = block + 4 * kStride;
  auto from_pairs = [&](const float* HWY_RESTRICT src, float* HWY_RESTRICT dst) {
    for (int64_t j = 0; j < n; j += 2 * L)
      for (int64_t i = 0; i < L; ++i) dst[j + 2 * i] = src[j + i], dst[j + 2 * i + 1] = src[j + L + i];
  };
  LayOutInPairs(d, w, n, wp);
  if (dw_part) LayOutInPairs(d, dw_part, n, dwp);
  if (db_part) LayOutInPairs(d, db_part, n, dbp);
  const float fix_floor = std::numeric_limits<float>::epsilon() / 2 * std::sqrt(float(n) / float(L));
  for (int64_t r = r0; r < r1; ++r) {
    const hwy::bfloat16_t* HWY_RESTRICT xr = x + r * n;
    const hwy::bfloat16_t* HWY_RESTRICT dyr = dy + r * n;
    const auto vs = hn::Set(d, mean[r]), vrs = hn::Set(d, rstd[r]);
    auto sum_c = hn::Zero(d), sum_g = hn::Zero(d), sum_gc = hn::Zero(d);
    // pass 1, columns [j, j + 2L): the even values (h = 0), then the odd ones (h = 1)
    for (int64_t j = 0; j < n; j += 2 * L) {
      const hn::Vec<D> wv[2] = {hn::Load(d, wp + j), hn::Load(d, wp + j + L)};
      hn::Vec<D> dwv[2], dbv[2], xv[2], dyv[2];
      for (int h = 0; h < 2; ++h) {
        dwv[h] = dw_part ? hn::Load(d, dwp + j + h * L) : hn::Zero(d);
        dbv[h] = db_part ? hn::Load(d, dbp + j + h * L) : hn::Zero(d);
      }
      LoadBf16Pairs(d, xr + j, xv[0], xv[1]);
      LoadBf16Pairs(d, dyr + j, dyv[0], dyv[1]);
      for (int h = 0; h < 2; ++h) {
        const auto c = hn::Sub(xv[h], vs);
        const auto g = hn::Mul(dyv[h], wv[h]);
        hn::Store(c, d, cbuf + j + h * L);
        hn::Store(g, d, gbuf + j + h * L);
        sum_c = hn::Add(sum_c, c);
        sum_g = hn::Add(sum_g, g);
        sum_gc = hn::MulAdd(g, c, sum_gc);
        dwv[h] = hn::MulAdd(dyv[h], hn::Mul(c, vrs), dwv[h]);
        dbv[h] = hn::Add(dyv[h], dbv[h]);
      }
      for (int h = 0; h < 2; ++h) {
        if (dw_part) hn::Store(dwv[h], d, dwp + j + h * L);
        if (db_part) hn::Store(dbv[h], d, dbp + j + h * L);
      }
    }
    // between the passes (as LayerNormBackwardRowGroups)
    const float rs = rstd[r];
    const float dmean = ReduceSum(d, sum_c) / float(n);
    const float mean_g = ReduceSum(d, sum_g) / float(n);
    const float mean_gx = rs * (ReduceSum(d, sum_gc) / float(n) - dmean * mean_g);
    const auto vdr = hn::Set(d, -dmean * rs), term2 = hn::Set(d, -rs * mean_g),
               k3 = hn::Set(d, -rs * mean_gx);
    if (dw_part && std::abs(dmean * rs) > fix_floor) {  // fix_dw, in pair order
      for (int64_t j = 0; j < n; j += 2 * L) {
        hn::Vec<D> lo, hi;
        LoadBf16Pairs(d, dyr + j, lo, hi);
        hn::Store(hn::MulAdd(lo, vdr, hn::Load(d, dwp + j)), d, dwp + j);
        hn::Store(hn::MulAdd(hi, vdr, hn::Load(d, dwp + j + L)), d, dwp + j + L);
      }
    }
    if (!dx) continue;
    // pass 2, columns [j, j + 2L), from the buffer; the pairs go back in place as they are stored
    for (int64_t j = 0; j < n; j += 2 * L) {
      const hn::Vec<D> c[2] = {hn::Load(d, cbuf + j), hn::Load(d, cbuf + j + L)};
      const hn::Vec<D> g[2] = {hn::Load(d, gbuf + j), hn::Load(d, gbuf + j + L)};
      hn::Vec<D> out[2];
      for (int h = 0; h < 2; ++h)
        out[h] = hn::MulAdd(g[h], vrs, hn::MulAdd(hn::MulAdd(c[h], vrs, vdr), k3, term2));
      ng::simd::HWY_NAMESPACE::StoreBf16Interleaved(d, out[0], out[1], dx + r * n + j);
    }
  }
  if (dw_part) from_pairs(dwp, dw_part);
  if (db_part) from_pairs(dbp, db_part);
}
#endif  // HWY_TARGET != HWY_SCALAR

// Whether LayerNormBackwardPairRows takes rows of n values of type T on this target.
template <typename T>
bool BackwardTakesPairs(int64_t n) {
  if constexpr (!PairsHere<T>()) {
    (void)n;
    return false;
  } else {
    const int64_t L = int64_t(hn::Lanes(hn::ScalableTag<AccT<T>>()));
    return n > 0 && n % (2 * L) == 0 && n <= kPairRowMax;
  }
}

template <typename T>
void LayerNormBackwardRows(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                           const AccT<T>* HWY_RESTRICT mean, const AccT<T>* HWY_RESTRICT rstd,
                           T* HWY_RESTRICT dx, AccT<T>* HWY_RESTRICT dw_part, AccT<T>* HWY_RESTRICT db_part,
                           int64_t r0, int64_t r1, int64_t n) {
  using A = AccT<T>;
  // The page-ahead prefetch (norm_simd-inl.h) only for long rows (8 KiB and up). Measured on AMD Zen 4,
  // f32, A/B of the whole backward in alternating runs: with short rows it reaches several rows ahead and
  // costs more than it brings (16384 x 256: 1.28 -> 0.93 ms without it at 2 threads, 2.6 -> 1.9 ms at 1;
  // 4096 x 1024: 1.69 -> 1.58 ms and 3.5 -> 2.9 ms), while at 1024 x 4096 it still helps a little (2.14
  // -> 2.01 ms, 4.37 -> 4.26 ms), as it did on the Zen 5 machine where it was introduced.
  // Never for f16/bf16 rows: their four-row groups (below) are bound by the conversions and the arithmetic,
  // not by memory, and the prefetches only got in the way. Measured on an Intel Xeon VM (AVX-512, stop 22,
  // `scripts/bench_ab.py --rounds 5`, best / median), bf16 backward at 1024 x 4096: 2 threads 0.71 / 0.74
  // -> 0.60 / 0.65 ms without, 1 thread 1.39-1.48 -> 1.19-1.24 ms; a prefetch once per 64-byte line instead
  // of once per vector gained nothing. (f32 there: 0.97-0.99 -> 0.92-0.94 ms at 2 threads, level at 1;
  // kept, for the AMD runs above.)
  const bool prefetch = sizeof(T) >= 4 && n * int64_t(sizeof(T)) >= 8192;
  int64_t r = r0;
  // Wide rows (w, dweight and dbias past the L1: n > 2048 in f32) four at a time. Measured (AMD Zen 4, A/B in
  // alternating runs), backward at 1024 x 4096: f32 2.1-2.3 -> 1.9-2.0 ms at 2 threads, 4.4-4.7 -> 3.5-3.6
  // ms at 1; bf16 0.888 / 0.894 -> 0.774 / 0.776 ms at 2 threads, 1.68 / 1.71 -> 1.49 / 1.59 ms at 1 (best /
  // median). (bf16 had measured slower grouped, 1.03-1.11 -> 1.32-1.37 ms, when the one-row and the grouped
  // loops were separate functions; since they are one kernel it gains.)
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {  // bf16 rows in pairs (LayerNormBackwardPairRows)
    if (BackwardTakesPairs<T>(n))
      return LayerNormBackwardPairRows(dy, x, w, mean, rstd, dx, dw_part, db_part, r0, r1, n);
  }
#endif
  if (int64_t(3 * sizeof(A)) * n > 24576) {
    r = r0 + (r1 - r0) / 4 * 4;
    LayerNormBackwardRowGroups<4, false>(dy, x, w, mean, rstd, dx, dw_part, db_part, r0, r, n, prefetch);
  }
  // f16/bf16 rows short enough keep pass 1's c and g for pass 2 (LayerNormBackwardRowGroups: kBuffer)
  if (KeepsRowsForPass2<T>(n))
    return LayerNormBackwardRowGroups<1, true>(dy, x, w, mean, rstd, dx, dw_part, db_part, r, r1, n,
                                               prefetch);
  LayerNormBackwardRowGroups<1, false>(dy, x, w, mean, rstd, dx, dw_part, db_part, r, r1, n, prefetch);
}

// Concrete, exportable instances (HWY_EXPORT needs plain functions).
#define NG_LAYER_NORM_INSTANCES(NAME, T)                                                                     \
  void LayerNormForward##NAME(const T* x, const AccT<T>* w, const AccT<T>* b, T* y, AccT<T>* mean,           \
                              AccT<T>* rstd, int64_t r0, int64_t r1, int64_t n, double eps) {                \
    LayerNormForwardRows<T>(x, w, b, y, mean, rstd, r0, r1, n, eps);                                         \
  }                                                                                                          \
  void LayerNormBackward##NAME(const T* dy, const T* x, const AccT<T>* w, const AccT<T>* mean,               \
                               const AccT<T>* rstd, T* dx, AccT<T>* dw, AccT<T>* db, int64_t r0, int64_t r1, \
                               int64_t n) {                                                                  \
    LayerNormBackwardRows<T>(dy, x, w, mean, rstd, dx, dw, db, r0, r1, n);                                   \
  }
NG_LAYER_NORM_INSTANCES(F32, float)
NG_LAYER_NORM_INSTANCES(F64, double)
NG_LAYER_NORM_INSTANCES(F16, hwy::float16_t)
NG_LAYER_NORM_INSTANCES(BF16, hwy::bfloat16_t)
#undef NG_LAYER_NORM_INSTANCES

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "nn/norms/norm_dispatch.h"
#include "nn/norms/wide_stats.h"

namespace ng::norms {

HWY_EXPORT(LayerNormForwardF32);
HWY_EXPORT(LayerNormForwardF64);
HWY_EXPORT(LayerNormForwardF16);
HWY_EXPORT(LayerNormForwardBF16);
HWY_EXPORT(LayerNormBackwardF32);
HWY_EXPORT(LayerNormBackwardF64);
HWY_EXPORT(LayerNormBackwardF16);
HWY_EXPORT(LayerNormBackwardBF16);

namespace {

// The rows [r0, r1) whose statistics overflowed the compute type (|x| past ~1e19 in float), computed again
// scaled (wide_stats.h); every other row is left as the kernel wrote it. w, b: (n) or null.
template <typename T, typename A>
void layer_norm_redo_overflowed(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t r0,
                                int64_t r1, int64_t n, A eps) {
  redo_overflowed_groups(x, y, mean, rstd, r0, r1, n, double(eps), [&](int64_t, int64_t i) {
    return std::pair<double, double>(w ? double(w[i]) : 1.0, b ? double(b[i]) : 0.0);
  });
}

// The fast forward: rows in parallel, in chunks fixed by the row length, each thread's run of chunks one
// SIMD call (parallel_for_runs), so that the kernel's software pipelining and prefetch run on across the
// chunks. (One call per chunk, 4 rows at n = 4096 and 16 at n = 1024, restarted them at every chunk.) A bf16
// chunk is a whole number of UnshiftedGate blocks, so every run starts a block and a row's path does not
// depend on the thread count.
template <typename T, typename A>
void layer_norm_forward_fast(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t rows,
                             int64_t n, A eps) {
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  if constexpr (std::is_same_v<T, bf16>)
    grain = (grain + kUnshiftedGateRows - 1) / kUnshiftedGateRows * kUnshiftedGateRows;
  parallel_for_runs(rows, grain, [&](int64_t r0, int64_t r1) {
    NG_NORM_SIMD_CALL(T, LayerNormForward, hwy_ptr(x), w, b, hwy_ptr(y), mean, rstd, r0, r1, n, double(eps));
    layer_norm_redo_overflowed(x, w, b, y, mean, rstd, r0, r1, n, eps);
  });
}

// The fast backward: fixed row chunks, dweight/dbias partial rows per group of chunks, then an ordered sum.
template <typename T, typename A>
void layer_norm_backward_fast(const T* dy, const T* x, const A* w, const A* mean, const A* rstd, T* dx, A* dw,
                              A* db, int64_t rows, int64_t n) {
  const RowChunks chunks = row_chunks(rows, n);
  sum_over_chunks(chunks, rows, n, dw, db, [&](int64_t r0, int64_t r1, A* dw_part, A* db_part) {
    NG_NORM_SIMD_CALL(T, LayerNormBackward, hwy_ptr(dy), hwy_ptr(x), w, mean, rstd, hwy_ptr(dx), dw_part,
                      db_part, r0, r1, n);
  });
}

}  // namespace

// Row-range entries (layer_norm.h): one thread, one SIMD call, pointers at the range's first row.
template <typename T, typename A>
void layer_norm_forward_rows(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t rows,
                             int64_t n, A eps) {
  NG_NORM_SIMD_CALL(T, LayerNormForward, hwy_ptr(x), w, b, hwy_ptr(y), mean, rstd, int64_t(0), rows, n,
                    double(eps));
  layer_norm_redo_overflowed(x, w, b, y, mean, rstd, int64_t(0), rows, n, eps);
}
template <typename T, typename A>
void layer_norm_backward_rows(const T* dy, const T* x, const A* w, const A* mean, const A* rstd, T* dx, A* dw,
                              A* db, int64_t rows, int64_t n) {
  NG_NORM_SIMD_CALL(T, LayerNormBackward, hwy_ptr(dy), hwy_ptr(x), w, mean, rstd, hwy_ptr(dx), dw, db,
                    int64_t(0), rows, n);
}
#define NG_LAYER_NORM_ROWS(T, A)                                                                             \
  template void layer_norm_forward_rows<T, A>(const T*, const A*, const A*, T*, A*, A*, int64_t, int64_t,    \
                                              A);                                                            \
  template void layer_norm_backward_rows<T, A>(const T*, const T*, const A*, const A*, const A*, T*, A*, A*, \
                                               int64_t, int64_t);
NG_LAYER_NORM_ROWS(float, float)
NG_LAYER_NORM_ROWS(double, double)
NG_LAYER_NORM_ROWS(f16, float)
NG_LAYER_NORM_ROWS(bf16, float)
#undef NG_LAYER_NORM_ROWS

NormStats layer_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias, double eps,
                             Impl impl) {
  NG_CHECK(x.is_contiguous(), "layer_norm_forward", "expected a contiguous x");
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = n > 0 ? x.numel() / n : 0;
  NormStats s;
  s.y = empty(x.shape(), x.dtype());
  s.mean = empty({rows}, acc);
  s.rstd = empty({rows}, acc);
  if (x.numel() == 0) return s;
  dispatch_storage(x.dtype(), "layer_norm", [&]<typename T, typename A>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* py = static_cast<T*>(s.y.raw_data());
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data<A>() : nullptr;
    if (impl == Impl::reference) {
      layer_norm_forward_reference<T, A>(px, pw, pb, py, s.mean.data<A>(), s.rstd.data<A>(), rows, n, A(eps));
      layer_norm_redo_overflowed(px, pw, pb, py, s.mean.data<A>(), s.rstd.data<A>(), int64_t(0), rows, n,
                                 A(eps));
      return;
    }
    // The kernel always reads a weight and a bias; absent ones are ones and zeros.
    std::vector<A> ones, zeros;
    if (!pw) ones.assign(size_t(n), A(1)), pw = ones.data();
    if (!pb) zeros.assign(size_t(n), A(0)), pb = zeros.data();
    layer_norm_forward_fast<T, A>(px, pw, pb, py, s.mean.data<A>(), s.rstd.data<A>(), rows, n, A(eps));
  });
  return s;
}

NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, bool need_dx, bool need_dweight, bool need_dbias,
                              Impl impl) {
  NG_CHECK(x.is_contiguous() && dy.is_contiguous(), "layer_norm_backward", "expected contiguous x and dy");
  NG_CHECK(dy.dtype() == x.dtype() && dy.shape() == x.shape(), "layer_norm_backward", "dy ",
           shape_str(dy.shape()), " ", dtype_name(dy.dtype()), " does not match x ", shape_str(x.shape()),
           " ", dtype_name(x.dtype()));
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = mean.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : 0;
  NormGrads gr;
  if (need_dx) gr.dx = empty(x.shape(), x.dtype());
  if (need_dweight) gr.dweight = zeros({n}, acc);
  if (need_dbias) gr.dbias = zeros({n}, acc);
  if (x.numel() == 0) return gr;
  dispatch_storage(x.dtype(), "layer_norm", [&]<typename T, typename A>() {
    const T* pdy = static_cast<const T*>(dy.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    T* pdx = need_dx ? static_cast<T*>(gr.dx.raw_data()) : nullptr;
    A* pdw = need_dweight ? gr.dweight.data<A>() : nullptr;
    A* pdb = need_dbias ? gr.dbias.data<A>() : nullptr;
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    if (impl == Impl::reference) {
      layer_norm_backward_reference<T, A>(pdy, px, pw, mean.data<A>(), rstd.data<A>(), pdx, pdw, pdb, rows,
                                          n);
      return;
    }
    std::vector<A> ones;
    if (!pw) ones.assign(size_t(n), A(1)), pw = ones.data();
    layer_norm_backward_fast<T, A>(pdy, px, pw, mean.data<A>(), rstd.data<A>(), pdx, pdw, pdb, rows, n);
  });
  return gr;
}

}  // namespace ng::norms

// ---- 5. The autograd op -----------------------------------------------------------------------------------
namespace ng::F {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "layer_norm";
  const int64_t n = norms::check_layer_norm_args(x, normalized_shape, weight, bias, eps, op);
  if (on_device({x, weight, bias}, op))  // the backend's whole op (cuda/norms.h for CUDA)
    return device_kernels(x, op).layer_norm(x, normalized_shape, weight, bias, eps);

  // x: (rows, n) once made contiguous; weight, bias: (n) in the compute dtype.
  const DType acc = compute_dtype(x.dtype());
  Tensor xc = x.detach().contiguous();
  Tensor wc = norms::contiguous_as(weight, acc);
  Tensor bc = norms::contiguous_as(bias, acc);
  norms::NormStats fwd = norms::layer_norm_forward(xc, n, wc, bc, eps);
  Tensor y = fwd.y;

  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc;
    const DType b_dtype = bias.defined() ? bias.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "LayerNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor dy = dout.to(x_dtype).contiguous();
      norms::NormGrads g = norms::layer_norm_backward(dy, sx.unpack(), smean.unpack(), srstd.unpack(),
                                                      sw.unpack(), need_dx, need_dw, need_db);
      return {g.dx, norms::grad_like(g.dweight, w_dtype, normalized_shape),
              norms::grad_like(g.dbias, b_dtype, normalized_shape)};
    });
  }
  return y;
}

}  // namespace ng::F

// ---- 6. The module ----------------------------------------------------------------------------------------
namespace ng::nn {

LayerNorm::LayerNorm(Shape normalized_shape_in, double eps_in, bool elementwise_affine, bool use_bias)
    : normalized_shape(std::move(normalized_shape_in)), eps(eps_in) {
  norms::check_eps(eps, "LayerNorm");
  for (int64_t s : normalized_shape)
    NG_CHECK(s > 0, "LayerNorm", "normalized_shape must have positive sizes, got ",
             shape_str(normalized_shape));
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (use_bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  return F::layer_norm(x, normalized_shape, weight, bias, eps);
}

}  // namespace ng::nn
#endif  // HWY_ONCE
