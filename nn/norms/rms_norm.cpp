// RMSNorm (Zhang, Sennrich 2019): LayerNorm without the mean. Used by LLaMA, MiniMind and most recent LLMs.
// Walk-through: docs/norms/rms_norm.md.
//
// ---- 1. The formula ---------------------------------------------------------------------------------------
//
//   x: (rows, n)  -- every leading dim is a row, n = the last dim
//
//   ms_r    = (1/n) sum_i x_ri^2                  mean square; no mean is subtracted
//   rstd_r  = 1 / sqrt(ms_r + eps)                (torch.rsqrt(x.pow(2).mean(-1) + eps))
//   xhat_ri = x_ri * rstd_r
//   y_ri    = xhat_ri * weight_i                   (no bias)
//
// Worked example (docs/norms/rms_norm.md): x = [3, -1, 4, -2]: ms = (9 + 1 + 16 + 4) / 4 = 7.5,
// RMS = sqrt(7.5) = 2.739, y = [1.095, -0.365, 1.461, -0.730], and y's own RMS is 1.
//
// Saved for backward: rstd (one number per row); xhat is recomputed from x.
//
// Half precision (f16/bf16 x). We do what MiniMind's `self._norm(x.float())` intends, all the way: upcast x
// to f32, compute ms, rstd, xhat AND the weight multiply in f32, and round once, at the end, to x's dtype.
// Why the f32 matters: with f16 values around 300, x^2 = 9e4 is above f16's largest finite value 65504, so a
// sum of squares in f16 is inf and the output is 0 or nan; in f32 it is fine.
//
// How this differs from MiniMind's earlier `self.weight * self._norm(x.float()).type_as(x)` (its current
// `(self.weight * self.norm(x.float())).type_as(x)` rounds once, as here):
//   * there, norm(x) is rounded to the half dtype FIRST, and the weight multiply then happens in low
//     precision (weight in f16/bf16) and is rounded again: two roundings. Here: one rounding of the f32
//     product. For bf16 (8 significant bits) the extra rounding is up to 2^-8 relative error per element.
//   * there, an f32 weight with a bf16 x makes the output f32 (PyTorch type promotion); here the output
//     always has x's dtype.
//   * the backward here is entirely in f32 (dweight summed in f32), then rounded to weight's dtype.
//
// Layout of this file: 1. formula  2. scalar reference loop  3. fast Highway + OpenMP kernel  4. backward:
// derivation, reference, fast kernel  5. the autograd op F::rms_norm  6. nn::RMSNorm.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/rms_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "nn/norms/norm_simd-inl.h"

#include "autograd/function.h"
#include "nn/norms/norm_math.h"
#include "tensor/device_kernels.h"
#include "nn/norms/rms_norm.h"

#if HWY_ONCE
namespace ng::norms {

// ---- 2. The scalar reference loop -------------------------------------------------------------------------
// x, y: (rows, n); w: (n) or null;
// rstd: (rows).
template <typename T, typename A>
void rms_norm_forward_reference(const T* x, const A* w, T* y, A* rstd, int64_t rows, int64_t n, A eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    auto get = [&](int64_t i) { return load_acc<A>(xr[i]); };
    const A rs = norm_math::rstd_from_var(norm_math::mean_square<A>(get, n), eps);
    rstd[r] = rs;
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = store_acc<T>(get(i) * rs * (w ? w[i] : A(1)));
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// ---- 3. The fast kernel -----------------------------------------------------------------------------------
// Per row, two passes over x (the row stays in cache for the second):
//   pass 1: ms = mean(x^2)                    (four vector accumulators, FMA)
//   pass 2: y  = (x * rstd) * w               (two multiplies per element)
// Rows wider than 2048 floats go four at a time (pass 1 for each, one pass 2 for the four), so that each
// vector of w is loaded once for four rows.
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// rstd = 1 / sqrt(mean(x^2) + eps) from the vector of sums of squares of a row of n values.
template <class D>
HWY_INLINE hn::TFromD<D> RstdFromSquares(D d, hn::Vec<D> ss, int64_t n, double eps) {
  using A = hn::TFromD<D>;
  return A(1) / std::sqrt(ReduceSum(d, ss) / A(n) + A(eps));
}
// x^2 added into acc: pass 1's step (Sum4).
struct AddSquare {
  template <class V>
  HWY_INLINE V operator()(V acc, V v) const {
    return hn::MulAdd(v, v, acc);
  }
};

// pass 1 for row xr: rstd = 1 / sqrt(mean(x^2) + eps).
template <class D, typename T>
HWY_INLINE hn::TFromD<D> RMSNormRowRstd(D d, const T* HWY_RESTRICT xr, int64_t n, double eps) {
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  const size_t rest = size_t(n - n_main);
  auto ss = Accumulate4(d, xr, n_main, AddSquare());
  if (rest) {
    const auto v = Tail<D, T>(xr + n_main, rest).load(d);  // zero-padded: adds 0 to the sum of squares
    ss = hn::MulAdd(v, v, ss);
  }
  return RstdFromSquares(d, ss, n, eps);
}

// One step of pass 2 for R rows at once, columns [i, i + 2 Lanes): y = (x * rstd) * w, two vectors per row
// so that one instruction stores both as bf16 (StoreAs2).
template <int R, class D, typename T>
HWY_INLINE void RMSNormOutputPair(D d, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                  T* HWY_RESTRICT y, int64_t n, int64_t i, const hn::Vec<D>* vrs) {
  const int64_t L = int64_t(hn::Lanes(d));
  const auto vw0 = hn::LoadU(d, w + i), vw1 = hn::LoadU(d, w + i + L);
  for (int k = 0; k < R; ++k)
    StoreAs2(d, hn::Mul(hn::Mul(LoadAs(d, x + k * n + i), vrs[k]), vw0),
             hn::Mul(hn::Mul(LoadAs(d, x + k * n + i + L), vrs[k]), vw1), y + k * n + i);
}

// pass 2 for R rows at once, from x, y (rows n apart): y = (x * rstd) * w; each vector of w loaded serves
// the R rows. ahead (R = 1; null: none): a row of n 16-bit values to prefetch on the way, one prefetch per
// two vectors (a 64-byte line on AVX-512; RowAfterNext, norm_simd-inl.h).
template <int R, typename T>
HWY_INLINE void RMSNormOutputRows(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w, T* HWY_RESTRICT y,
                                  int64_t n, const AccT<T>* rs, const T* ahead = nullptr) {
  using D = hn::ScalableTag<AccT<T>>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  const size_t rest = size_t(n - n_main);
  hn::Vec<D> vrs[R];
  for (int k = 0; k < R; ++k) vrs[k] = hn::Set(d, rs[k]);
  int64_t i = 0;
  for (; i + 2 * L <= n_main; i += 2 * L) {
    if (ahead) hwy::Prefetch(ahead + i);
    RMSNormOutputPair<R>(d, x, w, y, n, i, vrs);
  }
  for (; i < n_main; i += L) {
    const auto vw = hn::LoadU(d, w + i);
    for (int k = 0; k < R; ++k)
      StoreAs(d, hn::Mul(hn::Mul(LoadAs(d, x + k * n + i), vrs[k]), vw), y + k * n + i);
  }
  if (rest) {
    const auto vw = LoadTailA(d, w + n_main, rest);
    for (int k = 0; k < R; ++k) {
      Tail<D, T> y_tail(rest);
      y_tail.store(d, hn::Mul(hn::Mul(Tail<D, T>(x + k * n + n_main, rest).load(d), vrs[k]), vw),
                   y + k * n + n_main);
    }
  }
}

// Rows [r0, r1) kRows at a time (r1 - r0 a multiple of kRows): pass 1 row by row, then one pass 2 for all
// of them. With n a multiple of 4 vectors, the next group's pass 1 runs inside this group's pass 2
// (FusedGroupWalk, norm_simd-inl.h: the same operations, so the same bits). Out of line, as LayerNorm's
// (layer_norm.cpp), so the one-row forward loop keeps its code.
template <int kRows, typename T>
HWY_NOINLINE void RMSNormForwardRowGroups(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                                          T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT rstd, int64_t r0,
                                          int64_t r1, int64_t n, double eps) {
  using D = hn::ScalableTag<AccT<T>>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const bool fused = n % (4 * L) == 0;
  for (int k = 0; k < kRows && r0 < r1; ++k) rstd[r0 + k] = RMSNormRowRstd(d, x + (r0 + k) * n, n, eps);
  for (int64_t r = r0; r < r1; r += kRows) {
    if (!fused || r + kRows == r1) {  // this group's output; the next group's pass 1 (if any) after it
      RMSNormOutputRows<kRows>(x + r * n, w, y + r * n, n, rstd + r);
      for (int k = 0; k < kRows && r + kRows < r1; ++k)
        rstd[r + kRows + k] = RMSNormRowRstd(d, x + (r + kRows + k) * n, n, eps);
      continue;
    }
    hn::Vec<D> vrs[kRows];
    for (int k = 0; k < kRows; ++k) vrs[k] = hn::Set(d, rstd[r + k]);
    // the next group's pass 1: its rows one after another, one vector sum, (kRows / 2) * 4 vectors per step
    FusedGroupWalk<kRows>(
        d, x + (r + kRows) * n, n, Sum4<D, AddSquare>(d, AddSquare()),
        [&](int k, auto& sum) HWY_ATTR NG_ALWAYS_INLINE {
          const T* row = x + (r + kRows + k) * n;
          rstd[r + kRows + k] = RstdFromSquares(d, sum.Finish(d, row, n, n), n, eps);
          sum = Sum4<D, AddSquare>(d, AddSquare());
        },
        [&](int64_t i) HWY_ATTR NG_ALWAYS_INLINE {
          RMSNormOutputPair<kRows>(d, x + r * n, w, y + r * n, n, i, vrs);  // this group's output
        });
  }
}

template <typename T>
void RMSNormForwardRows(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w, T* HWY_RESTRICT y,
                        AccT<T>* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t n, double eps) {
  using A = AccT<T>;
  const hn::ScalableTag<A> d;
  // Wide rows (w past a quarter of the L1: n > 2048 in f32) go four at a time. One row per output walk
  // reloads w from the L2 for every row: measured (1 thread, AMD Zen 4, f32 forward) 2.6-2.9 ms at
  // 1024 x 4096 against 1.6-1.8 ms at 4096 x 1024, the same bytes.
  constexpr int kRows = 4;
  int64_t r = r0;
  if (int64_t(sizeof(A)) * n > 8192) {
    r = r0 + (r1 - r0) / kRows * kRows;
    RMSNormForwardRowGroups<kRows>(x, w, y, rstd, r0, r, n, eps);
  }
  if (r < r1 && sizeof(T) == 2 && n <= 1024) {
    // Short f16/bf16 rows (at most 2 KiB): the next row's pass 1 before this row's pass 2, as in LayerNorm's
    // forward (layer_norm.cpp), so that the chain that ends pass 1 (the horizontal sum, the division, the
    // square root) runs under the output walk. The same operations per row, so the same bits. Measured
    // (AMD Zen 4, 2 threads, A/B in one process, best): bf16 16384 x 256 0.410 -> 0.292 ms, 8192 x 512
    // 0.332 -> 0.274 ms, 4096 x 1024 0.293 -> 0.263 ms. f32 rows, whose pass 1 is a few FMAs per vector
    // and which wait on memory instead, were level or either way by 5-10% (n = 64 to 512), so they keep
    // the plain loop. Rows of 1 KiB and more ask for the row after next during the output walk
    // (RowAfterNext, norm_simd-inl.h).
    A rs = RMSNormRowRstd(d, x + r * n, n, eps);
    for (; r < r1; ++r) {
      const A rs_next = r + 1 < r1 ? RMSNormRowRstd(d, x + (r + 1) * n, n, eps) : A(0);
      rstd[r] = rs;
      RMSNormOutputRows<1>(x + r * n, w, y + r * n, n, &rs, RowAfterNext(x, r, r1, n));
      rs = rs_next;
    }
    return;
  }
  for (; r < r1; ++r) {
    rstd[r] = RMSNormRowRstd(d, x + r * n, n, eps);
    RMSNormOutputRows<1>(x + r * n, w, y + r * n, n, rstd + r);
  }
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

// ---- 4. The backward --------------------------------------------------------------------------------------
//
// One row, r = rstd, xhat_i = x_i * r, y_i = xhat_i * w_i, and g_i = dL/dxhat_i = dy_i * w_i.
//
//   dweight_i = sum_rows dy_i * xhat_i            (weight is shared by all rows)
//
// x_j reaches the loss directly through xhat_j and through r (which every xhat_i of the row uses):
//   d ms / dx_j    = 2 x_j / n
//   dr / dx_j      = -1/2 (ms + eps)^(-3/2) * 2 x_j / n = -r^3 x_j / n = -r^2 xhat_j / n
//   dxhat_i / dx_j = r delta_ij + x_i dr/dx_j = r (delta_ij - xhat_i xhat_j / n)
//
//   dx_j = sum_i g_i dxhat_i/dx_j = r * ( g_j - xhat_j * (1/n) sum_i g_i xhat_i )
//
// The exact formula coded (norm_math::rms_norm_dx), with mean_gx = (1/n) sum_i g_i xhat_i:
//
//   dx_j = rstd * g_j  -  rstd * xhat_j * mean_gx
//          term 1         term 2
//   term 1: the direct path x_j -> xhat_j; term 2: the path through the mean square.
// Compared with LayerNorm, the "through the mean" term is gone, because there is no mean.

// Reference. dy, x, dx: (rows, n); w: (n) or null; rstd: (rows); dw: (n) or null, summed in row order.
template <typename T, typename A>
void rms_norm_backward_reference(const T* dy, const T* x, const A* w, const A* rstd, T* dx, A* dw,
                                 int64_t rows, int64_t n) {
  if (dw) std::fill(dw, dw + n, A(0));
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    const A rs = rstd[r];
    auto xhat = [&](int64_t i) { return load_acc<A>(xr[i]) * rs; };
    auto g = [&](int64_t i) { return load_acc<A>(dyr[i]) * (w ? w[i] : A(1)); };

    A sum_gx = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum_gx += g(i) * xhat(i);
      if (dw) dw[i] += load_acc<A>(dyr[i]) * xhat(i);
    }
    if (!dx) continue;
    const A mean_gx = sum_gx / A(n);
    for (int64_t i = 0; i < n; ++i)
      dx[r * n + i] = store_acc<T>(norm_math::rms_norm_dx(g(i), xhat(i), rs, mean_gx));
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// The fast backward, two passes per row:
//   pass 1: sum_gx (vector accumulator); this chunk's dweight partial row += dy * xhat
//   pass 2: dx = fma(g, rstd, xhat * (-rstd * mean_gx))        term 1 + term 2
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// Rows [r0, r1) kRows at a time (r1 - r0 a multiple of kRows; kRows = 1 for ordinary rows, 4 for wide ones):
//   pass 1: sum g xhat (g = dy w, xhat = x rstd); this chunk's partial dweight += dy * xhat
//   pass 2: dx = g * rstd + xhat * (-rstd * mean(g xhat))
// With kRows = 4 each vector of w and dweight is loaded (and stored) once for the four rows in pass 1, and
// w once in pass 2. The rows' dweight updates are added in row order, so the bits are those of one row at
// a time. The tails are zero-padded: they add nothing to the sums.
// kBuffer (f16/bf16 rows of at most kBackwardBufferFloats values): pass 1 also keeps g and xhat as floats in
// L1 for pass 2, which then neither converts x and dy again nor recomputes them (the same values, the same
// bits), as LayerNorm's backward does (LayerNormBackwardRowGroups says why). Measured in docs/performance.md
// ("stop 24").
template <int kRows, bool kBuffer, typename T>
HWY_NOINLINE void RMSNormBackwardRowGroups(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x,
                                           const AccT<T>* HWY_RESTRICT w, const AccT<T>* HWY_RESTRICT rstd,
                                           T* HWY_RESTRICT dx, AccT<T>* HWY_RESTRICT dw_part, int64_t r0,
                                           int64_t r1, int64_t n) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  const size_t rest = size_t(n - n_main);
  const int64_t n_pad = n_main + (rest ? L : 0);  // kBuffer: g and xhat of the kRows rows, rows of n_pad
  HWY_ALIGN A gbuf[kBuffer ? kBackwardBufferFloats : 1], xbuf[kBuffer ? kBackwardBufferFloats : 1];
  for (int64_t r = r0; r < r1; r += kRows) {
    hn::Vec<D> vrs[kRows], sum_gx[kRows];
    for (int k = 0; k < kRows; ++k) {
      vrs[k] = hn::Set(d, rstd[r + k]);
      sum_gx[k] = hn::Zero(d);
    }
    // pass 1 at columns [i, i + count) (tails zero-padded)
    auto step1 = [&](int64_t i, size_t count) HWY_ATTR {
      const auto wv = LoadAN(d, w + i, count);
      auto dwv = dw_part ? LoadAN(d, dw_part + i, count) : hn::Zero(d);
      for (int k = 0; k < kRows; ++k) {
        const int64_t off = (r + k) * n + i;
        const auto dyv = LoadAsN(d, dy + off, count);
        const auto xhat = hn::Mul(LoadAsN(d, x + off, count), vrs[k]);
        const auto g = hn::Mul(dyv, wv);
        if constexpr (kBuffer) {
          hn::Store(g, d, gbuf + k * n_pad + i);
          hn::Store(xhat, d, xbuf + k * n_pad + i);
        }
        sum_gx[k] = hn::MulAdd(g, xhat, sum_gx[k]);
        dwv = hn::MulAdd(dyv, xhat, dwv);
      }
      if (dw_part) StoreAN(d, dwv, dw_part + i, count);
    };
    for (int64_t i = 0; i < n_main; i += L) step1(i, size_t(L));
    if (rest) step1(n_main, rest);
    if (!dx) continue;

    // pass 2
    hn::Vec<D> k2[kRows];
    for (int k = 0; k < kRows; ++k) k2[k] = hn::Set(d, -rstd[r + k] * (ReduceSum(d, sum_gx[k]) / A(n)));
    auto dx_of = [&](int k, int64_t off, hn::Vec<D> wv, size_t count) HWY_ATTR {
      hn::Vec<D> g, xhat;
      if constexpr (kBuffer) {  // pass 1's g and xhat (in a tail, lanes past count are not stored)
        const int64_t i = off - (r + k) * n;
        g = hn::Load(d, gbuf + k * n_pad + i);
        xhat = hn::Load(d, xbuf + k * n_pad + i);
      } else {
        g = hn::Mul(LoadAsN(d, dy + off, count), wv);
        xhat = hn::Mul(LoadAsN(d, x + off, count), vrs[k]);
      }
      return hn::MulAdd(g, vrs[k], hn::Mul(xhat, k2[k]));
    };
    // Two vectors per store (StoreRowsInPairs, norm_simd-inl.h), as in the forward. Measured
    // (AMD Zen 4, scripts/bench_ab.py, stop 20): bf16 backward, 1 thread, best / median: 4096 x 1024 0.99
    // / 1.16 -> 0.92 / 0.92 ms, 16384 x 256 1.06 / 1.07 -> 0.98 / 1.01 ms; f32 level and bit for bit the
    // same.
    StoreRowsInPairs<kRows>(d, w, r, n, dx, dx_of);
  }
}

template <typename T>
void RMSNormBackwardRows(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                         const AccT<T>* HWY_RESTRICT rstd, T* HWY_RESTRICT dx, AccT<T>* HWY_RESTRICT dw_part,
                         int64_t r0, int64_t r1, int64_t n) {
  using A = AccT<T>;
  int64_t r = r0;
  // Wide rows (w and dweight past half the L1: n > 2048 in f32) four at a time, as in LayerNorm's backward
  // (layer_norm.cpp), and for the same reason. Unlike LayerNorm's, this holds for f16/bf16 rows too: measured
  // (AMD Zen 4, A/B in alternating runs, bf16 backward at 1024 x 4096) 0.59 / 0.66 -> 0.51 / 0.53 ms at 2
  // threads and 1.34 / 1.42 -> 1.03 / 1.12 ms at 1 (best / median).
  if (int64_t(2 * sizeof(A)) * n > 16384) {
    r = r0 + (r1 - r0) / 4 * 4;
    RMSNormBackwardRowGroups<4, false>(dy, x, w, rstd, dx, dw_part, r0, r, n);
  }
  // f16/bf16 rows short enough keep pass 1's g and xhat for pass 2 (RMSNormBackwardRowGroups: kBuffer)
  if (KeepsRowsForPass2<T>(n))
    return RMSNormBackwardRowGroups<1, true>(dy, x, w, rstd, dx, dw_part, r, r1, n);
  RMSNormBackwardRowGroups<1, false>(dy, x, w, rstd, dx, dw_part, r, r1, n);
}

#define NG_RMS_NORM_INSTANCES(NAME, T)                                                                 \
  void RMSNormForward##NAME(const T* x, const AccT<T>* w, T* y, AccT<T>* rstd, int64_t r0, int64_t r1, \
                            int64_t n, double eps) {                                                   \
    RMSNormForwardRows<T>(x, w, y, rstd, r0, r1, n, eps);                                              \
  }                                                                                                    \
  void RMSNormBackward##NAME(const T* dy, const T* x, const AccT<T>* w, const AccT<T>* rstd, T* dx,    \
                             AccT<T>* dw, int64_t r0, int64_t r1, int64_t n) {                         \
    RMSNormBackwardRows<T>(dy, x, w, rstd, dx, dw, r0, r1, n);                                         \
  }
NG_RMS_NORM_INSTANCES(F32, float)
NG_RMS_NORM_INSTANCES(F64, double)
NG_RMS_NORM_INSTANCES(F16, hwy::float16_t)
NG_RMS_NORM_INSTANCES(BF16, hwy::bfloat16_t)
#undef NG_RMS_NORM_INSTANCES

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "nn/norms/norm_dispatch.h"
#include "nn/norms/wide_stats.h"

namespace ng::norms {

HWY_EXPORT(RMSNormForwardF32);
HWY_EXPORT(RMSNormForwardF64);
HWY_EXPORT(RMSNormForwardF16);
HWY_EXPORT(RMSNormForwardBF16);
HWY_EXPORT(RMSNormBackwardF32);
HWY_EXPORT(RMSNormBackwardF64);
HWY_EXPORT(RMSNormBackwardF16);
HWY_EXPORT(RMSNormBackwardBF16);

// The rows [r0, r1) whose mean(x^2) overflowed the compute type (|x| past ~1e19 in float: rstd came out 0
// and y 0), computed again scaled (wide_stats.h); every other row is left as the kernel wrote it. w: (n) or
// null.
template <typename T, typename A>
static void rms_norm_redo_overflowed(const T* x, const A* w, T* y, A* rstd, int64_t r0, int64_t r1, int64_t n,
                                     A eps) {
  redo_overflowed_groups(
      x, y, static_cast<A*>(nullptr), rstd, r0, r1, n, double(eps),
      [&](int64_t, int64_t i) { return std::pair<double, double>(w ? double(w[i]) : 1.0, 0.0); });
}

// Row-range entries (rms_norm.h): one thread, one SIMD call, pointers at the range's first row.
template <typename T, typename A>
void rms_norm_forward_rows(const T* x, const A* w, T* y, A* rstd, int64_t rows, int64_t n, A eps) {
  NG_NORM_SIMD_CALL(T, RMSNormForward, hwy_ptr(x), w, hwy_ptr(y), rstd, int64_t(0), rows, n, double(eps));
  rms_norm_redo_overflowed(x, w, y, rstd, int64_t(0), rows, n, eps);
}
template <typename T, typename A>
void rms_norm_backward_rows(const T* dy, const T* x, const A* w, const A* rstd, T* dx, A* dw, int64_t rows,
                            int64_t n) {
  NG_NORM_SIMD_CALL(T, RMSNormBackward, hwy_ptr(dy), hwy_ptr(x), w, rstd, hwy_ptr(dx), dw, int64_t(0), rows,
                    n);
}
#define NG_RMS_NORM_ROWS(T, A)                                                                        \
  template void rms_norm_forward_rows<T, A>(const T*, const A*, T*, A*, int64_t, int64_t, A);         \
  template void rms_norm_backward_rows<T, A>(const T*, const T*, const A*, const A*, T*, A*, int64_t, \
                                             int64_t);
NG_RMS_NORM_ROWS(float, float)
NG_RMS_NORM_ROWS(double, double)
NG_RMS_NORM_ROWS(f16, float)
NG_RMS_NORM_ROWS(bf16, float)
#undef NG_RMS_NORM_ROWS

NormStats rms_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, double eps, Impl impl) {
  NG_CHECK(x.is_contiguous(), "rms_norm_forward", "expected a contiguous x");
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = n > 0 ? x.numel() / n : 0;
  NormStats s;
  s.y = empty(x.shape(), x.dtype());
  s.rstd = empty({rows}, acc);
  if (x.numel() == 0) return s;
  dispatch_storage(x.dtype(), "rms_norm", [&]<typename T, typename A>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* py = static_cast<T*>(s.y.raw_data());
    A* prstd = s.rstd.data<A>();
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    if (impl == Impl::reference) {
      rms_norm_forward_reference<T, A>(px, pw, py, prstd, rows, n, A(eps));
      rms_norm_redo_overflowed(px, pw, py, prstd, int64_t(0), rows, n, A(eps));
      return;
    }
    std::vector<A> ones;
    if (!pw) ones.assign(size_t(n), A(1)), pw = ones.data();
    // Each thread's run of chunks in one call, as in LayerNorm's forward (layer_norm_forward_fast says why).
    // Every row gives the same bits in any run: the kernel carries nothing from row to row that changes them.
    const int64_t grain = std::max<int64_t>(1, 16384 / n);
    parallel_for_runs(rows, grain, [&](int64_t r0, int64_t r1) {
      NG_NORM_SIMD_CALL(T, RMSNormForward, hwy_ptr(px), pw, hwy_ptr(py), prstd, r0, r1, n, eps);
      rms_norm_redo_overflowed(px, pw, py, prstd, r0, r1, n, A(eps));
    });
  });
  return s;
}

NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                            bool need_dx, bool need_dweight, Impl impl) {
  NG_CHECK(x.is_contiguous() && dy.is_contiguous(), "rms_norm_backward", "expected contiguous x and dy");
  NG_CHECK(dy.dtype() == x.dtype() && dy.shape() == x.shape(), "rms_norm_backward", "dy ",
           shape_str(dy.shape()), " ", dtype_name(dy.dtype()), " does not match x ", shape_str(x.shape()),
           " ", dtype_name(x.dtype()));
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = rstd.numel();
  const int64_t n = x.size(-1);  // (x.numel() / rows would say 0 for an input of no rows)
  NormGrads gr;
  if (need_dx) gr.dx = empty(x.shape(), x.dtype());
  if (need_dweight) gr.dweight = zeros({n}, acc);
  if (x.numel() == 0) return gr;
  dispatch_storage(x.dtype(), "rms_norm", [&]<typename T, typename A>() {
    const T* pdy = static_cast<const T*>(dy.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    T* pdx = need_dx ? static_cast<T*>(gr.dx.raw_data()) : nullptr;
    A* pdw = need_dweight ? gr.dweight.data<A>() : nullptr;
    const A* prstd = rstd.data<A>();
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    if (impl == Impl::reference) {
      rms_norm_backward_reference<T, A>(pdy, px, pw, prstd, pdx, pdw, rows, n);
      return;
    }
    std::vector<A> ones;
    if (!pw) ones.assign(size_t(n), A(1)), pw = ones.data();
    // Fixed row chunks, a dweight partial row per group of chunks, summed in group order (norm_common.h).
    const RowChunks chunks = row_chunks(rows, n);
    sum_over_chunks(chunks, rows, n, pdw, static_cast<A*>(nullptr),
                    [&](int64_t r0, int64_t r1, A* dw_part, A*) {
                      NG_NORM_SIMD_CALL(T, RMSNormBackward, hwy_ptr(pdy), hwy_ptr(px), pw, prstd,
                                        hwy_ptr(pdx), dw_part, r0, r1, n);
                    });
  });
  return gr;
}

}  // namespace ng::norms

// ---- 5. The autograd op -----------------------------------------------------------------------------------
namespace ng::F {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const char* op = "rms_norm";
  const int64_t n = norms::check_rms_norm_args(x, weight, eps, op);
  if (on_device({x, weight}, op)) return device_kernels(x, op).rms_norm(x, weight, eps);  // the backend's op

  // x: (rows, C) once contiguous; weight: (C) in the compute dtype.
  const DType acc = compute_dtype(x.dtype());
  Tensor xc = x.detach().contiguous();
  Tensor wc = norms::contiguous_as(weight, acc);
  norms::NormStats fwd = norms::rms_norm_forward(xc, n, wc, eps);
  Tensor y = fwd.y;

  if (needs_grad({x, weight})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), srstd(fwd.rstd, op);
    attach(y, "RMSNormBackward", {x, weight}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor dy = dout.to(x_dtype).contiguous();
      norms::NormGrads g =
          norms::rms_norm_backward(dy, sx.unpack(), srstd.unpack(), sw.unpack(), need_dx, need_dw);
      return {g.dx, norms::grad_like(g.dweight, w_dtype, Shape{n})};
    });
  }
  return y;
}

}  // namespace ng::F

// ---- 6. The module ----------------------------------------------------------------------------------------
namespace ng::nn {

RMSNorm::RMSNorm(int64_t dim_in, double eps_in, bool elementwise_affine) : dim(dim_in), eps(eps_in) {
  NG_CHECK(dim > 0, "RMSNorm", "dim must be positive, got ", dim);
  norms::check_eps(eps, "RMSNorm");
  if (elementwise_affine) weight = register_parameter("weight", ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) {
  // Checked here too: without a weight (elementwise_affine = false) nothing else compares x with dim.
  NG_CHECK(x.dim() >= 1 && x.size(-1) == dim, "RMSNorm", "expected x of shape (*, ", dim, "), got ",
           shape_str(x.shape()));
  return F::rms_norm(x, weight, eps);
}

}  // namespace ng::nn
#endif  // HWY_ONCE
