// GroupNorm (Wu, He 2018), and InstanceNorm (Ulyanov et al. 2016) as its G = C case.
//
// ---- 1. The formula ---------------------------------------------------------------------------------------
//
//   x: (N, C, S)  -- S = the product of the spatial dims (1 for a plain (N, C) input)
//   G groups of C/G consecutive channels. One "row" is one sample's group: the C/G * S values
//   x[n, g*C/G : (g+1)*C/G, :], contiguous in memory. So rows = N * G, row length m = (C/G) * S.
//
//   mean_ng = (1/m) sum over the row of x
//   var_ng  = (1/m) sum over the row of (x - mean_ng)^2          (biased)
//   rstd_ng = 1 / sqrt(var_ng + eps)
//   y[n, c, s] = (x[n, c, s] - mean_ng) * rstd_ng * weight_c + bias_c       (g = c / (C/G))
//
// So GroupNorm is LayerNorm over each (sample, group), except that weight and bias are per CHANNEL, not per
// element of the row. G = 1 normalizes each sample over everything (LayerNorm over (C, S) with per-channel
// affine); G = C is InstanceNorm: each (sample, channel) over its positions. Like LayerNorm it never looks
// across samples, so it works with a batch of 2 (detection models) where BatchNorm's statistics are noise.
//
// Saved for backward: mean and rstd per row.
//
// Layout of this file: 1. formula  2. scalar reference loop  3. fast Highway + OpenMP kernel  4. backward:
// derivation, reference, fast kernel  5. the autograd op F::group_norm  6. nn::GroupNorm, nn::InstanceNorm.
// Walk-through: docs/norms/group_norm.md.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/group_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "nn/norms/norm_simd-inl.h"

#include "autograd/function.h"
#include "nn/norms/batch_norm.h"
#include "nn/norms/group_norm.h"
#include "nn/norms/norm_math.h"
#include "tensor/device_kernels.h"
#include "tensor/ops/elementwise.h"

#include <algorithm>
#include <vector>

#if HWY_ONCE
namespace ng::norms {

// ---- 2. The scalar reference loop -------------------------------------------------------------------------
// x, y: (N, C, S) contiguous; w, b: (C) or null; mean, rstd: (N * G).
template <typename T, typename A>
void group_norm_forward_reference(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t N,
                                  int64_t C, int64_t S, int64_t G, A eps) {
  const int64_t cpg = C / G, m = cpg * S;
  for (int64_t r = 0; r < N * G; ++r) {
    const T* xr = x + r * m;
    auto get = [&](int64_t i) { return load_acc<A>(xr[i]); };
    A shift, d, var;
    norm_math::centered_moments<A>(get, m, shift, d, var);
    const A rs = norm_math::rstd_from_var(var, eps);
    mean[r] = shift + d;
    rstd[r] = rs;
    const int64_t g = r % G;
    for (int64_t k = 0; k < cpg; ++k) {
      const int64_t c = g * cpg + k;
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = k * S + s;
        const A xhat = ((get(i) - shift) - d) * rs;
        y[r * m + i] = store_acc<T>(xhat * (w ? w[c] : A(1)) + (b ? b[c] : A(0)));
      }
    }
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// ---- 3. The fast kernel -----------------------------------------------------------------------------------
// Per row: the statistics are LayerNorm's forward's (ShiftedRowStatistics, norm_simd-inl.h): one pass for
// sum (x - K) and sum (x - K)^2, K = the mean of the row's first vector, and a centred second pass only where
// the check finds K far from the mean. The output pass walks the row channel by channel and folds everything
// per channel into one scale and one shift:
//   sc_c = rstd * w_c,  tc_c = b_c - d * sc_c,   y = fma(x - K, sc_c, tc_c)
// (Until 2026-11-25 this kernel always took two passes, sum (x - K) with K = the first value, then the
// centred sum of squares: a third pass over the row. Measured (AMD Zen 4, 2 threads, A/B of two builds in
// alternating runs, best): f32 (16, 256, 32x32) 0.416 -> 0.344 ms, (256, 256, 8x8) 0.490 -> 0.372 ms; bf16
// (16, 256, 32x32) 0.427 -> 0.329 ms, (16, 1024, 16x16) 0.432 -> 0.335 ms.)
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

template <typename T>
void GroupNormForwardRows(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                          const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean,
                          AccT<T>* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t C, int64_t S, int64_t G,
                          double eps) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t cpg = C / G, m = cpg * S;
  const int64_t m_main = m - m % L;
  const size_t m_rest = size_t(m - m_main);
  const int64_t s_main = S - S % L;
  const size_t s_rest = size_t(S - s_main);

  // g: the row's group, stepped along with r (a division per row costs as much as a short row's math)
  for (int64_t r = r0, g = r0 % G; r < r1; ++r, g = g + 1 == G ? 0 : g + 1) {
    const T* HWY_RESTRICT xr = x + r * m;
    T* HWY_RESTRICT yr = y + r * m;
    const Tail<D, T> x_tail(xr + m_main, m_rest);

    // passes 1 and 2: LayerNorm's statistics of the row (K, d = mean - K, rstd)
    A K, dmean, rs;
    ShiftedRowStatistics(d, xr, m, eps, K, dmean, rs);
    const auto vK = hn::Set(d, K);
    mean[r] = K + dmean;
    rstd[r] = rs;

    // pass 3: channel by channel
    if (S == 1) {
      // One value per channel (an (N, C) input): the row is the group's channels, so vectors run across
      // channels and each lane takes its own weight and bias, exactly LayerNorm's output pass.
      const AccT<T>* HWY_RESTRICT wg = w + g * cpg;
      const AccT<T>* HWY_RESTRICT bg = b + g * cpg;
      const auto vrs = hn::Set(d, rs), vneg = hn::Set(d, -dmean * rs);
      for (int64_t i = 0; i < m_main; i += L) {
        const auto xhat = hn::MulAdd(hn::Sub(LoadAs(d, xr + i), vK), vrs, vneg);
        StoreAs(d, hn::MulAdd(xhat, hn::LoadU(d, wg + i), hn::LoadU(d, bg + i)), yr + i);
      }
      if (m_rest) {
        const auto xhat = hn::MulAdd(hn::Sub(x_tail.load(d), vK), vrs, vneg);
        Tail<D, T> yt(m_rest);
        yt.store(d, hn::MulAdd(xhat, LoadTailA(d, wg + m_main, m_rest), LoadTailA(d, bg + m_main, m_rest)),
                 yr + m_main);
      }
      continue;
    }
    for (int64_t k = 0; k < cpg; ++k) {
      const int64_t c = g * cpg + k;
      const A sc = rs * w[c];
      const auto vsc = hn::Set(d, sc);
      const auto vtc = hn::Set(d, b[c] - dmean * sc);
      const T* HWY_RESTRICT xs = xr + k * S;
      T* HWY_RESTRICT ys = yr + k * S;
      auto y_of = [&](int64_t s) HWY_ATTR { return hn::MulAdd(hn::Sub(LoadAs(d, xs + s), vK), vsc, vtc); };
      int64_t s = 0;
      // Two vectors at a time: one instruction stores both as bf16 (StoreAs2), as in the row norms. bf16
      // (16, 256, 32, 32), 1 thread (bench_ab, stop 20, best / median): 0.640 / 0.661 -> 0.515 / 0.543 ms;
      // f32 level. (The same in the backward's dx loop measured level, and was left out.)
      for (; s + 2 * L <= s_main; s += 2 * L) StoreAs2(d, y_of(s), y_of(s + L), ys + s);
      for (; s < s_main; s += L) StoreAs(d, y_of(s), ys + s);
      if (s_rest) {
        const Tail<D, T> xt(xs + s_main, s_rest);
        Tail<D, T> yt(s_rest);
        yt.store(d, hn::MulAdd(hn::Sub(xt.load(d), vK), vsc, vtc), ys + s_main);
      }
    }
  }
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

// ---- 4. The backward --------------------------------------------------------------------------------------
//
// Within one row (n, g) this is LayerNorm's backward with m values, except that the weight multiplying xhat
// belongs to the channel: g_i = dy_i * w_c(i). Same steps (see layer_norm.cpp for each one):
//   dmean/dx_j = 1/m,  dvar/dx_j = (2/m)(x_j - mean),  dxhat_i/dx_j = rstd (delta_ij - 1/m - xhat_i xhat_j /
//   m)
//
//   dx_j = rstd * ( g_j  -  mean_g  -  xhat_j * mean_gx )        mean over the row's m values
//          term 1: direct   term 2: through the mean   term 3: through the variance
//
// weight and bias are per channel, so their gradients sum over samples and positions:
//   dweight_c = sum_n sum_s dy * xhat          dbias_c = sum_n sum_s dy
//
// Exact code (norm_math::centered_norm_dx), computed per channel segment with the channel's weight:
//   dx = dy * (rstd * w_c)  +  (-rstd * mean_g)  +  xhat * (-rstd * mean_gx)
//        term 1                term 2               term 3
//
// Recomputing xhat precisely, as LayerNorm's backward does (layer_norm.cpp, section 4): the saved mean is
// rounded to the compute type, and for a group with mean 1e4 and std 1e-2 in f32 that moves every
// (x - saved mean) * rstd by up to 0.05. So the saved mean s is only a shift: c = x - s is exact for the
// values near it, the group's offset d = (1/m) sum c is measured from the data, and xhat = (c - d) * rstd.
// The sums over c give what the sums over xhat would, without a pass that waits for d:
//   sum g xhat = rstd (sum g c - d sum g),   per channel: sum dy xhat = rstd (sum dy c - d sum dy).
// (Until 2026-11-25 the backward used (x - s) * rstd: on such groups dweight was off by 4% of its scale.)

// Reference. dy, x, dx: (N, C, S); w: (C) or null; mean, rstd: (N * G); dw, db: (C) or null.
template <typename T, typename A>
void group_norm_backward_reference(const T* dy, const T* x, const A* w, const A* mean, const A* rstd, T* dx,
                                   A* dw, A* db, int64_t N, int64_t C, int64_t S, int64_t G) {
  const int64_t cpg = C / G, m = cpg * S;
  if (dw) std::fill(dw, dw + C, A(0));
  if (db) std::fill(db, db + C, A(0));
  for (int64_t r = 0; r < N * G; ++r) {
    const int64_t g = r % G;
    const A mu = mean[r], rs = rstd[r];
    auto channel = [&](int64_t i) { return g * cpg + i / S; };
    // the group's offset from the saved mean, measured on the data (section 4 above)
    A sum_c = 0;
    for (int64_t i = 0; i < m; ++i) sum_c += load_acc<A>(x[r * m + i]) - mu;
    const A dmean = sum_c / A(m);
    auto xhat = [&](int64_t i) { return ((load_acc<A>(x[r * m + i]) - mu) - dmean) * rs; };
    auto dyv = [&](int64_t i) { return load_acc<A>(dy[r * m + i]); };
    auto gv = [&](int64_t i) { return dyv(i) * (w ? w[channel(i)] : A(1)); };

    A sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < m; ++i) {
      sum_g += gv(i);
      sum_gx += gv(i) * xhat(i);
      if (dw) dw[channel(i)] += dyv(i) * xhat(i);
      if (db) db[channel(i)] += dyv(i);
    }
    if (!dx) continue;
    const A mean_g = sum_g / A(m), mean_gx = sum_gx / A(m);
    for (int64_t i = 0; i < m; ++i)
      dx[r * m + i] = store_acc<T>(norm_math::centered_norm_dx(gv(i), xhat(i), rs, mean_g, mean_gx));
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// The fast backward, per row, channel segment by channel segment, with s = the saved mean and c = x - s:
//   pass 1: per channel sdy = sum dy, sdyc = sum dy * c (vector accumulators); the row's sum c
//   then:   d = sum c / m; per channel sdyx = rstd (sdyc - d sdy) (= sum dy * xhat);
//           sum_g += w_c sdy, sum_gx += w_c sdyx; this chunk's partial dweight_c += sdyx, dbias_c += sdy
//   pass 2: xhat = fma(c, rstd, -d * rstd);  dx = fma(dy, rstd * w_c, fma(xhat, k3, k2))
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// S == 1 (an (N, C) input): the row is the group's m = C/G channels, one value each. LayerNorm's backward
// with the group's slice of weight and of the dweight/dbias partial rows: vectors run across channels.
// (The shapes the batch path below does not take: m neither a divisor nor a multiple of the vector length.)
template <typename T>
void RowBackwardOneValuePerChannel(const T* HWY_RESTRICT dyr, const T* HWY_RESTRICT xr,
                                   const AccT<T>* HWY_RESTRICT wg, AccT<T> mu, AccT<T> rs,
                                   T* HWY_RESTRICT dxr, AccT<T>* HWY_RESTRICT dwg, AccT<T>* HWY_RESTRICT dbg,
                                   int64_t m) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t m_main = m - m % L;
  const size_t rest = size_t(m - m_main);
  const auto vs = hn::Set(d, mu), vrs = hn::Set(d, rs);  // the saved mean: a shift (section 4)
  const auto tail_mask = hn::FirstN(d, rest);
  const Tail<D, T> x_tail(xr + m_main, rest), dy_tail(dyr + m_main, rest);  // zero-padded dy: adds nothing

  // pass 1: sum c, sum g, sum g c (c = x - s; the tail's c is masked, its g is 0)
  auto sum_c = hn::Zero(d), sum_g = hn::Zero(d), sum_gc = hn::Zero(d);
  auto step1 = [&](hn::Vec<D> c, hn::Vec<D> dyv, hn::Vec<D> wv) {
    const auto g = hn::Mul(dyv, wv);
    sum_c = hn::Add(sum_c, c);
    sum_g = hn::Add(sum_g, g);
    sum_gc = hn::MulAdd(g, c, sum_gc);
  };
  for (int64_t i = 0; i < m_main; i += L)
    step1(hn::Sub(LoadAs(d, xr + i), vs), LoadAs(d, dyr + i), hn::LoadU(d, wg + i));
  if (rest)
    step1(hn::IfThenElseZero(tail_mask, hn::Sub(x_tail.load(d), vs)), dy_tail.load(d),
          LoadTailA(d, wg + m_main, rest));
  const A dmean = ReduceSum(d, sum_c) / A(m);
  const A mean_g = ReduceSum(d, sum_g) / A(m);
  const A mean_gx = rs * (ReduceSum(d, sum_gc) / A(m) - dmean * mean_g);

  // pass 2: xhat = c * rstd - d * rstd; partial dweight += dy * xhat, dbias += dy;
  //         dx = g * rstd + (xhat * k3 + k2)          term 1 + term 3 + term 2
  const auto vdr = hn::Set(d, -dmean * rs);
  const auto k2 = hn::Set(d, -rs * mean_g);
  const auto k3 = hn::Set(d, -rs * mean_gx);
  auto step2 = [&](hn::Vec<D> xv, hn::Vec<D> dyv, int64_t i, size_t cnt) {
    const bool full = cnt == size_t(L);
    const auto xhat = hn::MulAdd(hn::Sub(xv, vs), vrs, vdr);
    if (dwg) {
      const auto v = hn::MulAdd(dyv, xhat, full ? hn::LoadU(d, dwg + i) : LoadTailA(d, dwg + i, cnt));
      full ? hn::StoreU(v, d, dwg + i) : StoreTailA(d, v, dwg + i, cnt);
    }
    if (dbg) {
      const auto v = hn::Add(dyv, full ? hn::LoadU(d, dbg + i) : LoadTailA(d, dbg + i, cnt));
      full ? hn::StoreU(v, d, dbg + i) : StoreTailA(d, v, dbg + i, cnt);
    }
    if (!dxr) return;
    const auto wv = full ? hn::LoadU(d, wg + i) : LoadTailA(d, wg + i, cnt);
    const auto out = hn::MulAdd(hn::Mul(dyv, wv), vrs, hn::MulAdd(xhat, k3, k2));
    if (full) {
      StoreAs(d, out, dxr + i);
    } else {
      Tail<D, T> dx_tail(cnt);
      dx_tail.store(d, out, dxr + i);
    }
  };
  for (int64_t i = 0; i < m_main; i += L) step2(LoadAs(d, xr + i), LoadAs(d, dyr + i), i, size_t(L));
  if (rest) step2(x_tail.load(d), dy_tail.load(d), m_main, rest);
}

template <typename T>
void GroupNormBackwardRows(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                           const AccT<T>* HWY_RESTRICT mean, const AccT<T>* HWY_RESTRICT rstd,
                           T* HWY_RESTRICT dx, AccT<T>* HWY_RESTRICT dw_part, AccT<T>* HWY_RESTRICT db_part,
                           int64_t r0, int64_t r1, int64_t C, int64_t S, int64_t G) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t cpg = C / G, m = cpg * S;
  const int64_t s_main = S - S % L;
  const size_t s_rest = size_t(S - s_main);
  const auto s_mask = hn::FirstN(d, s_rest);
  // per channel of the row: sum dy and sum dy c, kept until the row's offset d is known
  std::vector<A> seg_dy(S == 1 ? 0 : size_t(cpg)), seg_dyc(S == 1 ? 0 : size_t(cpg));

  // g: the row's group, stepped along with r (a division per row costs as much as a short row's math)
  for (int64_t r = r0, g = r0 % G; r < r1; ++r, g = g + 1 == G ? 0 : g + 1) {
    const A rs = rstd[r];
    const auto vs = hn::Set(d, mean[r]);  // the saved mean: a shift (section 4)
    const auto vrs = hn::Set(d, rs);

    if (S == 1) {
      RowBackwardOneValuePerChannel<T>(dy + r * m, x + r * m, w + g * cpg, mean[r], rs,
                                       dx ? dx + r * m : nullptr, dw_part ? dw_part + g * cpg : nullptr,
                                       db_part ? db_part + g * cpg : nullptr, m);
      continue;
    }

    // pass 1: per channel segment sum dy and sum dy c (c = x - s), and the row's sum c
    auto sum_c = hn::Zero(d);
    for (int64_t k = 0; k < cpg; ++k) {
      const T* HWY_RESTRICT xs = x + r * m + k * S;
      const T* HWY_RESTRICT dys = dy + r * m + k * S;
      auto sdy = hn::Zero(d), sdyc = hn::Zero(d);
      for (int64_t s = 0; s < s_main; s += L) {
        const auto dyv = LoadAs(d, dys + s);
        const auto cv = hn::Sub(LoadAs(d, xs + s), vs);
        sum_c = hn::Add(sum_c, cv);
        sdy = hn::Add(sdy, dyv);
        sdyc = hn::MulAdd(dyv, cv, sdyc);
      }
      if (s_rest) {  // zero-padded tails: dy = 0 there; c = -s there, so sum_c masks it
        const auto dyv = Tail<D, T>(dys + s_main, s_rest).load(d);
        const auto cv = hn::IfThenElseZero(s_mask, hn::Sub(Tail<D, T>(xs + s_main, s_rest).load(d), vs));
        sum_c = hn::Add(sum_c, cv);
        sdy = hn::Add(sdy, dyv);
        sdyc = hn::MulAdd(dyv, cv, sdyc);
      }
      seg_dy[size_t(k)] = ReduceSum(d, sdy);
      seg_dyc[size_t(k)] = ReduceSum(d, sdyc);
    }
    // the row's offset d = mean - s; per channel sum dy xhat = rstd (sum dy c - d sum dy)
    const A dmean = ReduceSum(d, sum_c) / A(m);
    A sum_g = 0, sum_gx = 0;
    for (int64_t k = 0; k < cpg; ++k) {
      const int64_t c = g * cpg + k;
      const A seg_dyx = rs * (seg_dyc[size_t(k)] - dmean * seg_dy[size_t(k)]);
      sum_g += w[c] * seg_dy[size_t(k)];
      sum_gx += w[c] * seg_dyx;
      if (dw_part) dw_part[c] += seg_dyx;
      if (db_part) db_part[c] += seg_dy[size_t(k)];
    }
    if (!dx) continue;

    // pass 2
    const auto vdr = hn::Set(d, -dmean * rs);         // xhat = c * rstd - d * rstd
    const auto k2 = hn::Set(d, -rs * sum_g / A(m));   // term 2
    const auto k3 = hn::Set(d, -rs * sum_gx / A(m));  // term 3 = xhat * k3
    for (int64_t k = 0; k < cpg; ++k) {
      const int64_t c = g * cpg + k;
      const auto k1 = hn::Set(d, rs * w[c]);  // term 1 = dy * k1
      const T* HWY_RESTRICT xs = x + r * m + k * S;
      const T* HWY_RESTRICT dys = dy + r * m + k * S;
      T* HWY_RESTRICT dxs = dx + r * m + k * S;
      auto dx_of = [&](hn::Vec<D> xv, hn::Vec<D> dyv) {
        const auto xhat = hn::MulAdd(hn::Sub(xv, vs), vrs, vdr);
        return hn::MulAdd(dyv, k1, hn::MulAdd(xhat, k3, k2));
      };
      for (int64_t s = 0; s < s_main; s += L)
        StoreAs(d, dx_of(LoadAs(d, xs + s), LoadAs(d, dys + s)), dxs + s);
      if (s_rest) {
        Tail<D, T> out(s_rest);
        out.store(d, dx_of(Tail<D, T>(xs + s_main, s_rest).load(d), Tail<D, T>(dys + s_main, s_rest).load(d)),
                  dxs + s_main);
      }
    }
  }
}

// ---- 3b. The (N, C) fast path: many small groups, reduced together ---------------------------------------
//
// With S == 1 a group is m = C/G consecutive channels of one sample, often fewer than a vector holds (the
// benchmark's 16384 x 256 with 32 groups has m = 8). A group's own arithmetic is then a few vector ops, and
// reducing it alone costs more: a horizontal sum (log2 L shuffles and adds) for each of its sums, a division
// and a square root. So the groups go in batches of L (the vector length, B below), and a batch's sums are
// reduced TOGETHER into one vector whose lane q holds group q's sum (SumRuns). The statistics of L groups
// then take one division and one square root, and are spread back to the lanes that need them:
//
//   K      = per group, its first value (the shift, as in the row kernel)
//   s1     = group sum of (x - K)                     d    = s1 / m
//   s2     = group sum of ((x - K) - d)^2             rstd = 1 / sqrt(s2 / m + eps)
//   y      = ((x - K) - d) * rstd * w_c + b_c         w, b loaded as vectors across channels
//
// Two shapes of batch in the forward (fewer groups in a chunk's last batch):
//   m < L  (L % m == 0): L groups in m vectors, each holding L/m whole groups, kept in registers. x - K goes
//          to SumRuns as it is; per-lane values come back with a lane permute (tables in GroupLanes).
//   m >= L (m % L == 0): up to L groups of m/L whole vectors, first added into one vector per group;
//          SumRuns then reduces the group vectors; per-group values come back as broadcasts. The passes
//          after the first read the batch from L1 (f16/bf16: from a buffer of x - K, converted once).
// The backward batches the small groups the same way and takes large groups one at a time (see there); bf16
// groups of the shapes 3c takes go to 3d (in pairs) instead.
// A batch may span samples (the groups of all samples are consecutive rows of m values); only w and b
// depend on the channel, which wraps at C (C % L == 0, so a vector never straddles two samples).
//
// The sums are the pairwise trees the per-group reduction used when this path was written (see SumRuns). The
// per-row kernel (section 3) has since taken LayerNorm's one-pass statistics, so the two agree to rounding.
//
// Eligible when m % L == 0, or L % m == 0 and C % L == 0. Other shapes keep the per-group kernel above.

// The lanes of v[0 .. W), read in order, are L runs of W consecutive lanes (W a power of two, W <= L).
// Returns the vector whose lane q is the sum of run q. A step takes two vectors (lo, hi) and adds
// neighbouring lanes, packing both halves into one vector:
//   Add(ConcatEven(hi, lo), ConcatOdd(hi, lo)):  lane j < L/2 = lo[2j] + lo[2j + 1], the upper half the
//   same of hi
// so the runs keep their order and halve in width; log2(W) rounds, W - 1 steps of 3 ops in all. Each sum is
// the pairwise tree ((a0 + a1) + (a2 + a3)) + ..., which is also what the butterfly v + v[lane ^ k] of one
// group at a time computes (the same operands, so the same bits). v is overwritten. W is a template
// parameter so that the tree is unrolled and stays in registers (a first version kept the rounds in an L1
// buffer: each round then waited for the stores of the one before, and the whole path ran 1.3-1.4x slower
// than one group at a time).
template <int W, bool kSum, class D>
HWY_INLINE hn::Vec<D> FoldRuns(D d, hn::Vec<D>* HWY_RESTRICT v) {
#if HWY_TARGET != HWY_SCALAR  // (one lane there: W == 1)
  if constexpr (W > 1) {
    HWY_UNROLL(8)
    for (int i = 0; i < W / 2; ++i) {
      const auto even = hn::ConcatEven(d, v[2 * i + 1], v[2 * i]);
      if constexpr (kSum) {
        v[i] = hn::Add(even, hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]));
      } else {
        v[i] = even;
      }
    }
    return FoldRuns<W / 2, kSum>(d, v);
  }
#endif
  (void)d;
  return v[0];
}
template <int W, class D>
HWY_INLINE hn::Vec<D> SumRuns(D d, hn::Vec<D>* HWY_RESTRICT v) {
  return FoldRuns<W, true>(d, v);
}

// The same, from W vectors stored at p.
template <int W, class D>
HWY_INLINE hn::Vec<D> SumRunsAt(D d, const hn::TFromD<D>* HWY_RESTRICT p) {
  hn::Vec<D> v[W];
  HWY_UNROLL(16)
  for (int i = 0; i < W; ++i) v[i] = hn::Load(d, p + i * int(hn::Lanes(d)));
  return SumRuns<W>(d, v);
}

// The same walk keeping the first lane of each run instead of the sum (ConcatEven alone): lane q = run q's
// first lane.
template <int W, class D>
HWY_INLINE hn::Vec<D> FirstOfRuns(D d, hn::Vec<D>* HWY_RESTRICT v) {
  return FoldRuns<W, false>(d, v);
}

// m < L: the lane permutes of a batch of m vectors (vector j holds lanes j*L .. j*L + L - 1 of the batch).
template <class D>
struct GroupLanes {
  using TI = hwy::MakeSigned<hn::TFromD<D>>;
  static constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  using Idx = decltype(hn::SetTableIndices(D(), static_cast<const TI*>(nullptr)));
  Idx first;              // lane i <- the first lane of its group (the same in every vector)
  Idx spread[kMaxLanes];  // spread[j]: lane i of vector j <- lane (j*L + i) / m (its group's statistic)
  GroupLanes(D d, int64_t m) {
    const int64_t L = int64_t(hn::Lanes(d));
    HWY_ALIGN TI idx[kMaxLanes];
    for (int64_t i = 0; i < L; ++i) idx[i] = TI(i / m * m);
    first = hn::SetTableIndices(d, idx);
    for (int64_t j = 0; j < m && j < L; ++j) {
      for (int64_t i = 0; i < L; ++i) idx[i] = TI((j * L + i) / m);
      spread[j] = hn::SetTableIndices(d, idx);
    }
  }
};

// Is the batch path usable for this shape on this target?
template <typename T>
bool GroupNormBatchesEligible(int64_t C, int64_t S, int64_t G) {
  using D = hn::ScalableTag<AccT<T>>;
  const int64_t L = int64_t(hn::Lanes(D()));
  const int64_t m = C / G;
  if (S != 1 || m < 1 || L > 16) return false;
  return m % L == 0 || (L % m == 0 && C % L == 0);
}

// The next channel after a vector at channel ch (vectors never straddle samples: C % L == 0)
HWY_INLINE int64_t NextChannel(int64_t ch, int64_t L, int64_t C) {
  return ch + L == C ? 0 : ch + L;
}

// f.template operator()<kVpg>(), with kVpg = vpg (a group's m / L vectors) where vpg is 2, 4 or (kMax 8) 8,
// else kVpg = 0 (the kernels then read the count at run time). Why: the passes of the m >= L kernels loop
// over a group's vectors, and with the benchmark's groups of 32 channels that is a loop of two (f32 on
// AVX-512), whose index arithmetic and branch cost as much as its vector work. With the count a constant the
// compiler unrolls those loops. The same operations in the same order, so the same bits. Measured (Xeon
// model 207, 2 threads, scripts/bench_ab.py --filter group_norm/ --rounds 5, best ms): 4096 x 1024 (m = 32)
// bf16 forward 0.712 -> 0.618, backward 1.287 -> 1.132; f32 forward 0.671 -> 0.649, backward 1.145 -> 1.064;
// 1024 x 4096 (m = 128, 8 vectors) bf16 forward 0.517 -> 0.468, f32 0.724 -> 0.700 (--rounds 6). The
// backward's four-sample kernel (BackwardLargeGroups4) measured level at 8 and is left with its loop.
template <int kMax, class F>
HWY_INLINE void WithVectorsPerGroup(int64_t vpg, const F& f) {
  if (vpg == 2) return f.template operator()<2>();
  if (vpg == 4) return f.template operator()<4>();
  if constexpr (kMax >= 8)
    if (vpg == 8) return f.template operator()<8>();
  f.template operator()<0>();
}

// Forward, groups [r0, r1) of an (N, C) input; W = m < L: a batch is W vectors, all in registers.
template <int W, typename T>
void ForwardSmallGroups(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w, const AccT<T>* HWY_RESTRICT b,
                        T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean, AccT<T>* HWY_RESTRICT rstd, int64_t r0,
                        int64_t r1, int64_t C, int64_t G, double eps) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto inv_m = hn::Set(d, A(1) / A(W)), veps = hn::Set(d, A(eps)), one = hn::Set(d, A(1));
  const GroupLanes<D> lanes(d, W);
  for (int64_t r = r0, ch = r0 % G * W; r < r1; r += L) {     // r: the batch's first group, ch: its channel
    const int64_t nb = std::min(L, r1 - r), nv = nb * W / L;  // groups, vectors
    const T* HWY_RESTRICT xb = x + r * W;
    T* HWY_RESTRICT yb = y + r * W;
    hn::Vec<D> c[W], s[W], k[W];
    // pass 1: c = x - K (K per lane: its group's first value), summed per group
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      const auto xv = j < nv ? LoadAs(d, xb + j * L) : hn::Zero(d);
      k[j] = hn::TableLookupLanes(xv, lanes.first);
      c[j] = hn::Sub(xv, k[j]);
      s[j] = c[j];
    }
    const auto vd = hn::Mul(SumRuns<W>(d, s), inv_m);  // lane q: group q's d
    const auto vK = FirstOfRuns<W>(d, k);              // lane q: group q's K
    // pass 2: c = (x - K) - d, and its squares summed per group
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      c[j] = hn::Sub(c[j], hn::TableLookupLanes(vd, lanes.spread[j]));
      s[j] = hn::Mul(c[j], c[j]);
    }
    const auto vrs = hn::Div(one, hn::Sqrt(hn::MulAdd(SumRuns<W>(d, s), inv_m, veps)));
    // pass 3
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      if (j >= nv) break;
      const auto xhat = hn::Mul(c[j], hn::TableLookupLanes(vrs, lanes.spread[j]));
      StoreAs(d, hn::MulAdd(xhat, hn::LoadU(d, w + ch), hn::LoadU(d, b + ch)), yb + j * L);
      ch = NextChannel(ch, L, C);
    }
    StoreAN(d, hn::Add(vK, vd), mean + r, size_t(nb));
    StoreAN(d, vrs, rstd + r, size_t(nb));
  }
}

// Forward, m >= L: a batch is up to L groups of m/L vectors; the groups' sums go through a small buffer into
// SumRunsAt (lane q: group q), and the groups' d and rstd come back as broadcasts. For f16/bf16, x - K (then
// (x - K) - d) waits in an L1 buffer of the batch's values as floats, so that x is converted once; f32 and
// f64 read x again instead (measured at 1024 x 4096, 1 thread: the buffer's extra stores made f32 1.3x
// slower, while bf16 gained 1.7x).
//
// A batch is R strips of nb groups: strip k starts at group r + k * G, i.e. the same groups of R consecutive
// samples. R = 1 (the usual case): nb consecutive groups from r, which may cross into the next sample. R = 4
// for f32 and f64 where w and b pass half the L1 (C > 2048 in f32): pass 3 then loads each vector of w and b
// once for the four samples, as LayerNorm's output pass does for wide rows. Each group's arithmetic is the
// same for every R (its own lane of the same reductions), so R never changes a bit.
// Why: at C = 4096 w and b are 32 KiB, and with the batch and y they crowd the 48 KiB L1, so one sample per
// output walk took them from the L2 each time. A build reading w and b from an 8 KiB window (wrong output, a
// bound only) ran 1024 x 4096 f32 in 0.673 ms against 0.783; with R = 4, 0.799 / 0.808 -> 0.711 / 0.723 ms
// (Xeon model 207, 2 threads, scripts/bench_ab.py --rounds 5, best / median). Not for f16/bf16: there it
// measured 0.511 / 0.526 -> 0.589 / 0.593 ms (and slower still with two vectors per store), so they keep R
// = 1.
// kVpg: the group's m / L vectors as a constant, or 0 (read at run time): see WithVectorsPerGroup.
template <int R, typename T, int kVpg = 0>
void ForwardLargeGroupsR(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                         const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean,
                         AccT<T>* HWY_RESTRICT rstd, int64_t n0, int64_t n1, int64_t C, int64_t G, int64_t B,
                         double eps) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  constexpr int kL = int(hn::MaxLanes(D()));
  constexpr bool kBuffer = !std::is_same_v<T, A>;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t m = C / G, vpg = kVpg ? kVpg : m / L;
  const auto inv_m = hn::Set(d, A(1) / A(m)), veps = hn::Set(d, A(eps)), one = hn::Set(d, A(1));
  auto buf = hwy::AllocateAligned<A>(kBuffer ? size_t(B * m) : 1);
  A* HWY_RESTRICT cb = buf.get();
  // ks, dbuf, rbuf: 2 kL, so that a vector can be read from any strip's first lane
  HWY_ALIGN A red[kL * kL], ks[2 * kL], dbuf[2 * kL], rbuf[2 * kL];
  for (int64_t q = 0; q < kL; ++q) hn::Store(hn::Zero(d), d, red + q * L);
  for (int64_t q = 0; q < 2 * kL; ++q) ks[q] = dbuf[q] = rbuf[q] = A(0);

  // Pass 1 reads the batch from memory, passes 2 and 3 work in L1, so the stream of x stops and restarts
  // with every batch: pass 1 asks for each line 2 KiB (about one batch) ahead. Measured (Xeon model 207, 2
  // threads, scripts/bench_ab.py --rounds 4, best / median ms): f32 4096 x 1024 0.742 / 0.761 -> 0.686 /
  // 0.695, 1024 x 4096 0.804 / 0.821 -> 0.788 / 0.800; 4 KiB ahead the same, 8 KiB slower; bf16 level.
  constexpr int64_t kLine = 64 / int64_t(sizeof(T)), kAhead = 2048 / int64_t(sizeof(T));
  const T* x_end = x + n1 * C;

  // The batches: R = 1, B consecutive groups from group n0 * G on (crossing samples); R > 1, per block of R
  // samples (n1 - n0 a multiple of R), strips of S = B / R groups of the block's first sample.
  const int64_t S = B / R, strips = (G + S - 1) / S;
  const int64_t batches = R == 1 ? ((n1 - n0) * G + B - 1) / B : (n1 - n0) / R * strips;
  for (int64_t t = 0, ch0 = 0; t < batches; ++t) {
    // r: the batch's first group; nb groups per strip; strip k starts at group r + k * G; lane q = k * nb + i
    // holds strip k's group i
    const int64_t r = R == 1 ? n0 * G + t * B : (n0 + t / strips * R) * G + t % strips * S;
    const int64_t nb = R == 1 ? std::min(B, n1 * G - r) : std::min(S, G - t % strips * S);
    if (R > 1) ch0 = t % strips * S * m;
    for (int64_t q = R * nb; q < B; ++q) hn::Store(hn::Zero(d), d, red + q * L);  // (a last, short batch)
    // pass 1: per group, c = x - K summed into one vector
    for (int k = 0; k < R; ++k) {
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t q = k * nb + i;
        const T* HWY_RESTRICT xg = x + (r + k * G + i) * m;
        for (int64_t j = 0; j < m; j += kLine) PrefetchAhead<kAhead>(xg + j, x_end);
        const A K = hn::GetLane(LoadAs(d, xg));
        const auto vK = hn::Set(d, K);
        ks[q] = K;
        auto acc = hn::Zero(d);
        for (int64_t j = 0; j < vpg; ++j) {
          const auto c0 = hn::Sub(LoadAs(d, xg + j * L), vK);
          if constexpr (kBuffer) hn::Store(c0, d, cb + q * m + j * L);
          acc = hn::Add(acc, c0);
        }
        hn::Store(acc, d, red + q * L);
      }
    }
    const auto vd = hn::Mul(SumRunsAt<kL>(d, red), inv_m);  // lane q: group q's d
    hn::Store(vd, d, dbuf);
    // c = (x - K) - d of vector j of group q, whose values start at xg (vKq, vdq: its K and d)
    auto centred = [&](const T* HWY_RESTRICT xg, int64_t q, int64_t j, hn::Vec<D> vKq, hn::Vec<D> vdq) {
      if constexpr (kBuffer) return hn::Sub(hn::Load(d, cb + q * m + j * L), vdq);
      return hn::Sub(hn::Sub(LoadAs(d, xg + j * L), vKq), vdq);
    };
    // pass 2: c, and its squares summed per group
    for (int k = 0; k < R; ++k) {
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t q = k * nb + i;
        const T* HWY_RESTRICT xg = x + (r + k * G + i) * m;
        const auto vKq = hn::Set(d, ks[q]), vdq = hn::Set(d, dbuf[q]);
        auto acc = hn::Zero(d);
        for (int64_t j = 0; j < vpg; ++j) {
          const auto c = centred(xg, q, j, vKq, vdq);
          if constexpr (kBuffer) hn::Store(c, d, cb + q * m + j * L);
          acc = hn::MulAdd(c, c, acc);
        }
        hn::Store(acc, d, red + q * L);
      }
    }
    const auto vrs = hn::Div(one, hn::Sqrt(hn::MulAdd(SumRunsAt<kL>(d, red), inv_m, veps)));
    hn::Store(vrs, d, rbuf);
    // pass 3: vector j of group i in each strip k; each vector of w and b loaded once for the R strips
    int64_t ch = ch0;
    for (int64_t i = 0; i < nb; ++i) {
      hn::Vec<D> vrsq[R], vKq[R], vdq[R];
      for (int k = 0; k < R; ++k) {
        const int64_t q = k * nb + i;
        vrsq[k] = hn::Set(d, rbuf[q]), vKq[k] = hn::Set(d, ks[q]), vdq[k] = hn::Set(d, dbuf[q]);
      }
      for (int64_t j = 0; j < vpg; ++j, ch = NextChannel(ch, L, C)) {
        const auto vw = hn::LoadU(d, w + ch), vb = hn::LoadU(d, b + ch);
        for (int k = 0; k < R; ++k) {
          const int64_t q = k * nb + i, g = r + k * G + i;
          // (with the buffer, pass 2 left c there)
          const auto c = kBuffer ? hn::Load(d, cb + q * m + j * L) : centred(x + g * m, q, j, vKq[k], vdq[k]);
          StoreAs(d, hn::MulAdd(hn::Mul(c, vrsq[k]), vw, vb), y + g * m + j * L);
        }
      }
    }
    ch0 = ch;
    for (int k = 0; k < R; ++k) {  // strip k's lanes, as vectors (a scalar loop here became a rep movs)
      const int64_t q = k * nb;
      StoreAN(d, hn::Add(hn::LoadU(d, ks + q), hn::LoadU(d, dbuf + q)), mean + r + k * G, size_t(nb));
      StoreAN(d, hn::LoadU(d, rbuf + q), rstd + r + k * G, size_t(nb));
    }
  }
}

// Forward, samples [n0, n1), m >= L: blocks of 4 samples where C is wide, the rest one batch of consecutive
// groups at a time.
template <typename T>
void ForwardLargeGroups(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w, const AccT<T>* HWY_RESTRICT b,
                        T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean, AccT<T>* HWY_RESTRICT rstd, int64_t n0,
                        int64_t n1, int64_t C, int64_t G, double eps) {
  using A = AccT<T>;
  const int64_t L = int64_t(hn::Lanes(hn::ScalableTag<A>()));
  // at most 2048 values per batch, so that the buffer stays in L1. A batch of fewer than L groups leaves
  // lanes of the reductions that no group reads (SumRuns never mixes lanes); they are kept at zero.
  const int64_t B = std::clamp<int64_t>(2048 / (C / G), 1, L);
  constexpr int kR = 4;
  int64_t n = n0;
  const int64_t vpg = C / G / L;
  if constexpr (std::is_same_v<T, A>) {
    if (int64_t(2 * sizeof(A)) * C > 16384 && B >= kR) {  // w, b past half the L1
      n = n0 + (n1 - n0) / kR * kR;
      WithVectorsPerGroup<8>(vpg, [&]<int kVpg>() {
        ForwardLargeGroupsR<kR, T, kVpg>(x, w, b, y, mean, rstd, n0, n, C, G, B, eps);
      });
    }
  }
  if (n < n1) {
    WithVectorsPerGroup<8>(vpg, [&]<int kVpg>() {
      ForwardLargeGroupsR<1, T, kVpg>(x, w, b, y, mean, rstd, n, n1, C, G, B, eps);
    });
  }
}

// ---- 3c. The (N, C) fast path for bf16: the values in pairs ----------------------------------------------
//
// The bf16 forward of 3b measured no faster than the f32 one (4096 x 1024, 2 threads: 0.62 against 0.64 ms),
// for half the bytes: 13 cycles per 16 values, bound by the work per value, not by memory. Per 16 values it
// converted x twice (two shuffles and two shifts), subtracted the shift, stored and reloaded c twice
// (passes 1 and 2), and reduced each group twice, the second reduction waiting for the first. This path
// spends less per value:
//   - x is loaded in pairs (LoadBf16Pairs): one load and two bit operations give 32 values as two vectors,
//     the even-indexed values (lo) and the odd-indexed ones (hi). A group of m consecutive values then sits
//     in m/2 consecutive lanes of lo and the same lanes of hi, so the groups keep their order, and a group's
//     sums are its lanes' sums, lo and hi added together;
//   - the statistics take one pass, shifted as LayerNorm's are: s1 = sum (x - K), s2 = sum (x - K)^2 with K
//     the group's first value, var = s2 / m - d^2 (d = s1 / m). The subtraction loses in proportion to
//     d^2 / var (norm_math.h), and with K one of the group's values d^2 / var <= m - 1. It is trusted where
//     d^2 <= kPairTrust var: a relative error of at most ~65 roundings of the sums, far below bf16's own
//     2^-8. LayerNorm's stricter check (d^2 <= var / 4) sent ~62% of random groups, whose first value is
//     more than half a std from their mean, to the centred pass, and the path ran slower than 3b. A batch
//     with a group beyond the check, or whose sums overflowed, takes a centred second pass over c = x - K.
//     Both sums of L groups go through SumRuns side by side;
//   - the output is computed in the same order, y = fma(fma(c, rstd, -d rstd), w, b), with w and b laid out
//     in pairs once per call (pair_slot: within each block of 2L channels the even channels, then the odd
//     ones), and stored by StoreBf16Interleaved (half-inl.h), which puts each pair back in place.
// c = x - K waits for the output in a buffer in L1 (2 KiB to 8 KiB), so x is converted once.
// Groups of m < 2L values (m = 2, 4, 8, 16 on AVX-512): a batch is m/2 loads of 2L/m groups each (L groups),
// the lane permutes of 3b (GroupLanes, with runs of m/2 lanes). m >= 2L: a batch is up to L groups of m/(2L)
// loads, reduced as 3b's large groups are.

// The check of the one-pass variance: trusted where var * kPairTrust >= d^2 (see above).
constexpr float kPairTrust = 32.0f;

// How far ahead (in values) pass 1 asks for x.
constexpr int64_t kPairAhead = 1024;

// The largest group the pairs path takes (its batch buffer holds max(m, 2048) floats).
constexpr int64_t kMaxPairGroup = 2048;

// The f32 lane count L of the pairs path for bf16 x of shape (N, C) with G groups on this target, or 0 where
// it does not apply: m = C / G even, at most kMaxPairGroup, and either a multiple of 2L or a divisor of 2L
// with C a multiple of 2L (a load of 2L values never straddles two samples).
template <typename T>
int64_t GroupNormPairLanes(int64_t C, int64_t S, int64_t G) {
#if HWY_TARGET == HWY_SCALAR || (defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
  (void)C, (void)S, (void)G;
  return 0;
#else
  using D = hn::ScalableTag<AccT<T>>;
  if constexpr (!UseBf16Pairs<D, T>()) {
    (void)C, (void)S, (void)G;
    return 0;
  } else {
    const int64_t L = int64_t(hn::Lanes(D())), P = 2 * L, m = C / G;
    if (S != 1 || L > 16 || C % G != 0 || m < 2 || m % 2 != 0 || m > kMaxPairGroup || C % P != 0) return 0;
    return m % P == 0 || P % m == 0 ? L : 0;
  }
#endif
}

// 1 / sqrt(v) for v > 0 (and 0 for v = inf, as Div(1, Sqrt(v)) gives): the CPU's estimate (vrsqrt14ps on
// AVX-512: 14 bits) and one Newton step,
//   r1 = r0 (3/2 - (v/2) r0^2),
// which squares the relative error. Measured against 1/sqrt in f64 over floats from 2^-20 to 2^40: within
// 1.72 ulp on AVX-512 (vrsqrt14ps, 14 bits), 3.31 ulp where the estimate has 12 bits (rsqrtps). Why not
// Div(1, Sqrt(v)): on the Xeon the two take ~22 cycles of the divider per vector (512-bit vsqrtps and vdivps
// each hold it ~10 cycles), as much as a batch of 128 values' other work.
template <class D>
HWY_INLINE hn::Vec<D> RsqrtNewton(D d, hn::Vec<D> v) {
  const auto r0 = hn::ApproximateReciprocalSqrt(v);
  const auto half_v = hn::Mul(v, hn::Set(d, 0.5f));
  const auto r1 = hn::Mul(r0, hn::NegMulAdd(half_v, hn::Mul(r0, r0), hn::Set(d, 1.5f)));
  return hn::IfThenZeroElse(hn::IsInf(v), r1);  // 1 / sqrt(inf) = 0 (the step would make it inf * 0 = NaN)
}

// (the lambdas of the kernels below are large, and GCC called them out of line, each call behind a
// vzeroupper: 20% slower; hence NG_ALWAYS_INLINE, norm_simd-inl.h)

// The statistics of a batch, lane q for its group q (nb groups from group r, the first at channel ch).
template <class D>
struct PairBatch {
  int64_t r = 0, nb = 0, ch = 0;
  hn::Vec<D> vmean, vrs, vdr;  // mean = K + d, rstd, -d * rstd
};

// rstd and -d * rstd from a batch's d and m2 (the mean of c^2), lane by lane, after the check (see above):
// where var = m2 - d^2 is not trusted, centred(vd) gives the mean of (c - d)^2 instead.
template <class D, class Centred>
HWY_INLINE void PairStatistics(D d, hn::Vec<D> vd, hn::Vec<D> m2, double eps, const Centred& centred,
                               hn::Vec<D>& vrs, hn::Vec<D>& vdr) {
  auto var = hn::NegMulAdd(vd, vd, m2);
  // (lanes without a group hold zeros, which pass)
  const auto bad =
      hn::Or(hn::Lt(hn::Mul(var, hn::Set(d, kPairTrust)), hn::Mul(vd, vd)), hn::Not(hn::IsFinite(var)));
  if (HWY_UNLIKELY(!hn::AllFalse(d, bad))) var = hn::IfThenElse(bad, centred(vd), var);
  // var < 0 (rounding) is clamped to 0, but a NaN var must stay NaN: it is how a group whose sums overflowed
  // (|x| near float's max: the mean itself inf) reaches the repair (wide_stats.h) through an unusable rstd.
  // Max(var, 0) gave 0 for a NaN on x86 (maxps returns its second operand), so such a group kept rstd
  // 1/sqrt(eps), mean inf and an output of -inf and NaN.
  const auto zero = hn::Zero(d);
  vrs = RsqrtNewton(d, hn::Add(hn::IfThenElse(hn::Lt(var, zero), zero, var), hn::Set(d, float(eps))));
  vdr = hn::Neg(hn::Mul(vd, vrs));
}

// y = fma(fma(c, rstd, -d rstd), w, b) for the 2L values of c at cb (lo, then hi) whose first channel is ch,
// stored in place at y
template <class D>
HWY_INLINE void PairOutput(D d, const float* HWY_RESTRICT cb, hn::Vec<D> rs, hn::Vec<D> dr,
                           const float* HWY_RESTRICT wp, const float* HWY_RESTRICT bp, int64_t ch,
                           hwy::bfloat16_t* HWY_RESTRICT y) {
  const size_t L = hn::Lanes(d);
  const auto y0 =
      hn::MulAdd(hn::MulAdd(hn::Load(d, cb), rs, dr), hn::LoadU(d, wp + ch), hn::LoadU(d, bp + ch));
  const auto y1 = hn::MulAdd(hn::MulAdd(hn::Load(d, cb + L), rs, dr), hn::LoadU(d, wp + ch + L),
                             hn::LoadU(d, bp + ch + L));
  ng::simd::HWY_NAMESPACE::StoreBf16Interleaved(d, y0, y1, y);
}

// Both kernels below work one batch ahead: the statistics of batch t + 1 (pass 1, the reductions, the square
// root) come before the output of batch t in program order, each batch's c in its own half of cb. Why: a
// batch's statistics are a chain of ~60-90 cycles (the reductions' permutes and adds, the check, the
// reciprocal square root) that its output must wait for; written in order, the core ran out of independent
// work before the chain ended (measured in docs/performance.md, "stop 27").

// m < 2L (W = m / 2 lanes of lo and of hi per group): groups [r0, r1); a batch is W loads of 2L values, L
// groups; c = x - K waits in cb.
template <int W>
void ForwardPairsSmall(const hwy::bfloat16_t* HWY_RESTRICT x, const float* HWY_RESTRICT wp,
                       const float* HWY_RESTRICT bp, hwy::bfloat16_t* HWY_RESTRICT y,
                       float* HWY_RESTRICT mean, float* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t C,
                       int64_t G, double eps) {
  using D = hn::ScalableTag<float>;
  const D d;
  constexpr int64_t m = 2 * W;
  constexpr size_t kBatch = 2 * W * hn::MaxLanes(D());  // floats of c per batch
  const int64_t L = int64_t(hn::Lanes(d)), P = 2 * L;
  const auto inv_m = hn::Set(d, 1.0f / float(m));
  const GroupLanes<D> lanes(d, W);  // runs of W lanes: a group's lanes in lo and in hi
  HWY_ALIGN float cbuf[2 * kBatch];
  const hwy::bfloat16_t* x_end = x + r1 * m;

  // pass 1 and the statistics of the batch from group r (channel ch), c into cb
  auto stats = [&](int64_t r, int64_t ch, float* HWY_RESTRICT cb,
                   PairBatch<D>& bt) HWY_ATTR NG_ALWAYS_INLINE {
    const int64_t nb = std::min(L, r1 - r), nv = nb * W / L;  // groups, loads
    const hwy::bfloat16_t* HWY_RESTRICT xb = x + r * m;
    // c = x - K (K: the group's first value, lane by lane), its sum and its sum of squares
    hn::Vec<D> s1[W], s2[W], k[W];
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      if (j < nv) {
        PrefetchAhead<kPairAhead>(xb + j * P, x_end);
        hn::Vec<D> lo, hi;
        LoadBf16Pairs(d, xb + j * P, lo, hi);
        k[j] = hn::TableLookupLanes(lo, lanes.first);  // (lo's lane i/W*W: the group's value 0)
        const auto c0 = hn::Sub(lo, k[j]), c1 = hn::Sub(hi, k[j]);
        hn::Store(c0, d, cb + j * P);
        hn::Store(c1, d, cb + j * P + L);
        s1[j] = hn::Add(c0, c1);
        s2[j] = hn::MulAdd(c0, c0, hn::Mul(c1, c1));
      } else {
        s1[j] = s2[j] = k[j] = hn::Zero(d);
      }
    }
    const auto vK = FirstOfRuns<W>(d, k);               // lane q: group q's K
    const auto vd = hn::Mul(SumRuns<W>(d, s1), inv_m);  // lane q: group q's d = mean - K
    const auto m2 = hn::Mul(SumRuns<W>(d, s2), inv_m);  // ... and the mean of c^2
    auto centred = [&lanes, cb, nv, d, P, L, inv_m](hn::Vec<D> dv) HWY_ATTR {
      hn::Vec<D> t[W];
      HWY_UNROLL(8)
      for (int j = 0; j < W; ++j) {
        t[j] = hn::Zero(d);
        if (j < nv) {
          const auto dj = hn::TableLookupLanes(dv, lanes.spread[j]);
          const auto c0 = hn::Sub(hn::Load(d, cb + j * P), dj), c1 = hn::Sub(hn::Load(d, cb + j * P + L), dj);
          t[j] = hn::MulAdd(c0, c0, hn::Mul(c1, c1));
        }
      }
      return hn::Mul(SumRuns<W>(d, t), inv_m);
    };
    bt.r = r, bt.nb = nb, bt.ch = ch;
    bt.vmean = hn::Add(vK, vd);
    PairStatistics(d, vd, m2, eps, centred, bt.vrs, bt.vdr);
  };
  // pass 2 of a batch whose c is in cb: y, mean and rstd
  auto output = [&](const PairBatch<D>& bt, const float* HWY_RESTRICT cb) HWY_ATTR NG_ALWAYS_INLINE {
    const int64_t nv = bt.nb * W / L;
    hwy::bfloat16_t* HWY_RESTRICT yb = y + bt.r * m;
    int64_t ch = bt.ch;
    for (int64_t j = 0; j < nv; ++j, ch = NextChannel(ch, P, C)) {
      PairOutput(d, cb + j * P, hn::TableLookupLanes(bt.vrs, lanes.spread[j]),
                 hn::TableLookupLanes(bt.vdr, lanes.spread[j]), wp, bp, ch, yb + j * P);
    }
    StoreAN(d, bt.vmean, mean + bt.r, size_t(bt.nb));
    StoreAN(d, bt.vrs, rstd + bt.r, size_t(bt.nb));
    return ch;  // the next batch's channel
  };

  if (r0 >= r1) return;
  PairBatch<D> cur, next;
  stats(r0, r0 % G * m, cbuf, cur);
  for (int64_t t = 0;; ++t) {
    float* HWY_RESTRICT cb = cbuf + (t % 2) * kBatch;
    const int64_t r = cur.r + L;
    const bool more = r < r1;
    if (more) stats(r, (cur.ch + int64_t(W) * P) % C, cbuf + ((t + 1) % 2) * kBatch, next);
    output(cur, cb);
    if (!more) break;
    cur = next;
  }
}

// m >= 2L (kV = m / (2L) loads per group, or 0: read at run time, see WithVectorsPerGroup): groups
// [r0, r1); a batch is up to L groups (at most 2048 values), their two sums through red1 and red2.
template <int kV>
void ForwardPairsLarge(const hwy::bfloat16_t* HWY_RESTRICT x, const float* HWY_RESTRICT wp,
                       const float* HWY_RESTRICT bp, hwy::bfloat16_t* HWY_RESTRICT y,
                       float* HWY_RESTRICT mean, float* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t C,
                       int64_t G, double eps) {
  using D = hn::ScalableTag<float>;
  const D d;
  constexpr int kL = int(hn::MaxLanes(D()));
  const int64_t L = int64_t(hn::Lanes(d)), P = 2 * L, m = C / G, V = kV ? kV : m / P;
  const int64_t B = std::clamp<int64_t>(2048 / m, 1, L);  // groups per batch
  const auto inv_m = hn::Set(d, 1.0f / float(m));
  HWY_ALIGN float cbuf[2 * kMaxPairGroup];  // two batches' c = x - K, B * m <= 2048 values each
  HWY_ALIGN float red1[kL * kL], red2[kL * kL], ks[kL], rb[2][kL], drb[2][kL];
  for (int64_t q = 0; q < kL * kL; ++q) red1[q] = red2[q] = 0.0f;  // (lanes past B stay 0)
  for (int64_t q = 0; q < kL; ++q) ks[q] = 0.0f;                   // (read as a vector, lanes past nb too)
  const hwy::bfloat16_t* x_end = x + r1 * m;

  // pass 1 and the statistics of the batch from group r (channel ch), c into cb; rstd and -d rstd also
  // into rsb and drsb (pass 2 broadcasts them group by group)
  auto stats = [&](int64_t r, int64_t ch, float* HWY_RESTRICT cb, float* HWY_RESTRICT rsb,
                   float* HWY_RESTRICT drsb, PairBatch<D>& bt) HWY_ATTR NG_ALWAYS_INLINE {
    const int64_t nb = std::min(B, r1 - r);
    for (int64_t q = nb; q < B; ++q) {  // a last, short batch: its unused lanes back to 0
      hn::Store(hn::Zero(d), d, red1 + q * L);
      hn::Store(hn::Zero(d), d, red2 + q * L);
    }
    // per group, c = x - K, summed (and squared and summed) into one vector each
    for (int64_t q = 0; q < nb; ++q) {
      const hwy::bfloat16_t* HWY_RESTRICT xg = x + (r + q) * m;
      float* HWY_RESTRICT cg = cb + q * m;
      PrefetchAhead<kPairAhead>(xg, x_end);
      hn::Vec<D> lo, hi;
      LoadBf16Pairs(d, xg, lo, hi);
      const float K = hn::GetLane(lo);  // the group's first value (lo: the even-indexed values)
      const auto vK = hn::Set(d, K);
      ks[q] = K;
      auto c0 = hn::Sub(lo, vK), c1 = hn::Sub(hi, vK);
      hn::Store(c0, d, cg);
      hn::Store(c1, d, cg + L);
      // (no zeros added: c0 + c1 could be -0 where 0 + (c0 + c1) is +0, but lane 0 holds x_0 - K = +0, so a
      // group's sum is +0 where it is zero either way: the same bits)
      auto a1 = hn::Add(c0, c1), a2 = hn::MulAdd(c0, c0, hn::Mul(c1, c1));
      for (int64_t j = 1; j < V; ++j) {
        PrefetchAhead<kPairAhead>(xg + j * P, x_end);
        LoadBf16Pairs(d, xg + j * P, lo, hi);
        c0 = hn::Sub(lo, vK), c1 = hn::Sub(hi, vK);
        hn::Store(c0, d, cg + j * P);
        hn::Store(c1, d, cg + j * P + L);
        a1 = hn::Add(a1, hn::Add(c0, c1));
        a2 = hn::MulAdd(c0, c0, hn::MulAdd(c1, c1, a2));
      }
      hn::Store(a1, d, red1 + q * L);
      hn::Store(a2, d, red2 + q * L);
    }
    const auto vd = hn::Mul(SumRunsAt<kL>(d, red1), inv_m);  // lane q: group q's d = mean - K
    const auto m2 = hn::Mul(SumRunsAt<kL>(d, red2), inv_m);
    auto centred = [&](hn::Vec<D> dv) HWY_ATTR {
      hn::Store(dv, d, drsb);
      for (int64_t q = 0; q < nb; ++q) {
        const auto dq = hn::Set(d, drsb[q]);
        auto a2 = hn::Zero(d);
        for (int64_t j = 0; j < 2 * V; ++j) {
          const auto c = hn::Sub(hn::Load(d, cb + q * m + j * L), dq);
          a2 = hn::MulAdd(c, c, a2);
        }
        hn::Store(a2, d, red2 + q * L);
      }
      return hn::Mul(SumRunsAt<kL>(d, red2), inv_m);
    };
    bt.r = r, bt.nb = nb, bt.ch = ch;
    bt.vmean = hn::Add(hn::Load(d, ks), vd);
    PairStatistics(d, vd, m2, eps, centred, bt.vrs, bt.vdr);
    hn::Store(bt.vrs, d, rsb);
    hn::Store(bt.vdr, d, drsb);
  };
  // pass 2 of a batch whose c is in cb
  auto output = [&](const PairBatch<D>& bt, const float* HWY_RESTRICT cb, const float* HWY_RESTRICT rsb,
                    const float* HWY_RESTRICT drsb) HWY_ATTR NG_ALWAYS_INLINE {
    int64_t ch = bt.ch;
    for (int64_t q = 0; q < bt.nb; ++q) {
      const auto rs = hn::Set(d, rsb[q]), dr = hn::Set(d, drsb[q]);
      const float* HWY_RESTRICT cg = cb + q * m;
      hwy::bfloat16_t* HWY_RESTRICT yg = y + (bt.r + q) * m;
      for (int64_t j = 0; j < V; ++j, ch = NextChannel(ch, P, C))
        PairOutput(d, cg + j * P, rs, dr, wp, bp, ch, yg + j * P);
    }
    StoreAN(d, bt.vmean, mean + bt.r, size_t(bt.nb));
    StoreAN(d, bt.vrs, rstd + bt.r, size_t(bt.nb));
    return ch;  // the next batch's channel
  };

  if (r0 >= r1) return;
  if constexpr (kV != 1) {  // one batch at a time (see above)
    PairBatch<D> bt;
    for (int64_t r = r0, ch = r0 % G * m; r < r1; r += B) {
      stats(r, ch, cbuf, rb[0], drb[0], bt);
      ch = output(bt, cbuf, rb[0], drb[0]);
    }
    return;
  }
  PairBatch<D> cur, next;
  stats(r0, r0 % G * m, cbuf, rb[0], drb[0], cur);
  for (int64_t t = 0;; ++t) {
    const int64_t h = t % 2, r = cur.r + B;
    const bool more = r < r1;
    if (more) stats(r, (cur.ch + B * m) % C, cbuf + (1 - h) * kMaxPairGroup, rb[1 - h], drb[1 - h], next);
    output(cur, cbuf + h * kMaxPairGroup, rb[h], drb[h]);
    if (!more) break;
    cur = next;
  }
}

// Samples [n0, n1) of a bf16 (N, C) input that GroupNormPairLanes accepts; wp, bp: w and b laid out by
// pair_slot.
template <typename T>
void GroupNormForwardPairs(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT wp,
                           const AccT<T>* HWY_RESTRICT bp, T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean,
                           AccT<T>* HWY_RESTRICT rstd, int64_t n0, int64_t n1, int64_t C, int64_t G,
                           double eps) {
  using D = hn::ScalableTag<AccT<T>>;
  if constexpr (UseBf16Pairs<D, T>() && HWY_TARGET != HWY_SCALAR) {
    constexpr int kL = int(hn::MaxLanes(D()));
    const int64_t m = C / G, r0 = n0 * G, r1 = n1 * G;
    if (m >= 2 * kL) {
      const int64_t V = m / (2 * kL);
      if (V == 1) return ForwardPairsLarge<1>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps);
      return WithVectorsPerGroup<4>(
          V, [&]<int kV>() { ForwardPairsLarge<kV>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps); });
    }
    if constexpr (kL > 1)
      if (m == 2) return ForwardPairsSmall<1>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps);
    if constexpr (kL > 2)
      if (m == 4) return ForwardPairsSmall<2>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps);
    if constexpr (kL > 4)
      if (m == 8) return ForwardPairsSmall<4>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps);
    if constexpr (kL > 8)
      if (m == 16) return ForwardPairsSmall<8>(x, wp, bp, y, mean, rstd, r0, r1, C, G, eps);
  } else {
    (void)x, (void)wp, (void)bp, (void)y, (void)mean, (void)rstd, (void)n0, (void)n1, (void)C, (void)G,
        (void)eps;
  }
}

// Samples [n0, n1) of an (N, C) input.
template <typename T>
void GroupNormForwardBatches(const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT w,
                             const AccT<T>* HWY_RESTRICT b, T* HWY_RESTRICT y, AccT<T>* HWY_RESTRICT mean,
                             AccT<T>* HWY_RESTRICT rstd, int64_t n0, int64_t n1, int64_t C, int64_t G,
                             double eps) {
  using D = hn::ScalableTag<AccT<T>>;
  constexpr int kL = int(hn::MaxLanes(D()));
  const int64_t m = C / G, r0 = n0 * G, r1 = n1 * G;
  if (m >= kL) return ForwardLargeGroups<T>(x, w, b, y, mean, rstd, n0, n1, C, G, eps);
  if constexpr (kL > 1)
    if (m == 1) return ForwardSmallGroups<1, T>(x, w, b, y, mean, rstd, r0, r1, C, G, eps);
  if constexpr (kL > 2)
    if (m == 2) return ForwardSmallGroups<2, T>(x, w, b, y, mean, rstd, r0, r1, C, G, eps);
  if constexpr (kL > 4)
    if (m == 4) return ForwardSmallGroups<4, T>(x, w, b, y, mean, rstd, r0, r1, C, G, eps);
  if constexpr (kL > 8)
    if (m == 8) return ForwardSmallGroups<8, T>(x, w, b, y, mean, rstd, r0, r1, C, G, eps);
}

// The backward. Per batch of groups (m < L) or per group (m >= L):
//   pass 1: c = x - s (s: the saved mean, a shift as in section 4), g = dy * w; group sums of c, g and g c
//           -> per group d = sum c / m, mean_g, mean_gx = rstd (mean of g c - d mean_g)
//   pass 2: xhat = fma(c, rstd, -d * rstd); dw_part += dy * xhat, db_part += dy (vectors across channels);
//           dx = g * rstd + (xhat * k3 + k2), k2 = -rstd * mean_g, k3 = -rstd * mean_gx
// Pass 2 reads x and dy again, from L1 (buffering c and dy from pass 1 measured no faster).
// (dweight and dbias are summed in pass 2, where xhat is exact: the split LayerNorm's backward uses, c * rstd
// in pass 1 and -d * rstd where it matters, measured slower here: 16384 x 256, 2 threads, 1.40 -> 2.41 ms.)
// The largest group (m values) whose c and dy BackwardLargeGroups keeps for pass 2 (two 4 KiB buffers).
constexpr int64_t kMaxBufferedGroup = 1024;

template <typename T>
struct BackwardVectors {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const T* HWY_RESTRICT dy;
  const T* HWY_RESTRICT x;
  const A* HWY_RESTRICT w;
  T* HWY_RESTRICT dx;
  A* HWY_RESTRICT dw_part;
  A* HWY_RESTRICT db_part;
  int64_t C;

  // f16/bf16: pass 1 also keeps c and dy (as floats) in a buffer in L1, and pass 2 reads them there instead
  // of converting x and dy again (the same values, so the same bits). Why: the bf16 backward is bound by the
  // two vector ports, and the two conversions and the subtraction were 5 of pass 2's ~16 operations per
  // vector; the buffer's stores and loads take the load and store ports. Measured in docs/performance.md
  // ("stop 24"). (f32 keeps reading x and dy again: on AMD Zen 4 a buffer there measured no faster.)
  static constexpr bool kBuffer = !std::is_same_v<T, A>;

  // pass 1 for the vector at offset off (channel ch) with shift s: c, g and g c added to sc, sg, sgc; kBuf:
  // c and dy also stored at cb and dyb
  template <bool kBuf = false>
  HWY_INLINE void pass1(int64_t off, int64_t ch, hn::Vec<D> s, hn::Vec<D>& sc, hn::Vec<D>& sg,
                        hn::Vec<D>& sgc, A* HWY_RESTRICT cb = nullptr, A* HWY_RESTRICT dyb = nullptr) const {
    const D d;
    const auto cv = hn::Sub(LoadAs(d, x + off), s);
    const auto dyv = LoadAs(d, dy + off);
    if constexpr (kBuf) {
      hn::Store(cv, d, cb);
      hn::Store(dyv, d, dyb);
    }
    const auto g = hn::Mul(dyv, hn::LoadU(d, w + ch));
    sc = hn::Add(sc, cv);
    sg = hn::Add(sg, g);
    sgc = hn::MulAdd(g, cv, sgc);
  }
  // pass 2 for the same vector (x and dy read again from L1, or, kBuf, c and dy from cb and dyb): the
  // group's s, rstd, -d * rstd, k2 and k3 (per lane)
  template <bool kBuf = false>
  HWY_INLINE void pass2(int64_t off, int64_t ch, hn::Vec<D> s, hn::Vec<D> vrs, hn::Vec<D> vdr, hn::Vec<D> k2,
                        hn::Vec<D> k3, const A* HWY_RESTRICT cb = nullptr,
                        const A* HWY_RESTRICT dyb = nullptr) const {
    const D d;
    hn::Vec<D> dyv, cv;
    if constexpr (kBuf) {
      dyv = hn::Load(d, dyb);
      cv = hn::Load(d, cb);
    } else {
      dyv = LoadAs(d, dy + off);
      cv = hn::Sub(LoadAs(d, x + off), s);
    }
    const auto xhat = hn::MulAdd(cv, vrs, vdr);
    if (dw_part) hn::StoreU(hn::MulAdd(dyv, xhat, hn::LoadU(d, dw_part + ch)), d, dw_part + ch);
    if (db_part) hn::StoreU(hn::Add(dyv, hn::LoadU(d, db_part + ch)), d, db_part + ch);
    if (!dx) return;
    const auto g = hn::Mul(dyv, hn::LoadU(d, w + ch));
    StoreAs(d, hn::MulAdd(g, vrs, hn::MulAdd(xhat, k3, k2)), dx + off);
  }
};

// The per-group constants of pass 2 from the three group sums (lane q: group q).
template <class D>
struct BackwardConstants {
  hn::Vec<D> vdr, k2, k3;
  BackwardConstants(hn::Vec<D> vrs, hn::Vec<D> sum_c, hn::Vec<D> sum_g, hn::Vec<D> sum_gc, hn::Vec<D> inv_m) {
    const auto vd = hn::Mul(sum_c, inv_m);  // the group's offset d = mean - s
    const auto mean_g = hn::Mul(sum_g, inv_m);
    const auto mean_gx = hn::Mul(vrs, hn::NegMulAdd(vd, mean_g, hn::Mul(sum_gc, inv_m)));
    vdr = hn::Neg(hn::Mul(vd, vrs));      // xhat = c * rstd - d * rstd
    k2 = hn::Neg(hn::Mul(vrs, mean_g));   // term 2
    k3 = hn::Neg(hn::Mul(vrs, mean_gx));  // term 3 = xhat * k3
  }
};

// Groups [r0, r1); W = m < L: a batch is W vectors, whose three sums stay in registers. kBuffered: c and dy
// kept for pass 2 (BackwardVectors::kBuffer).
template <int W, bool kBuffered, typename T>
void BackwardSmallGroups(const BackwardVectors<T>& v, const AccT<T>* HWY_RESTRICT mean,
                         const AccT<T>* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t G) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto inv_m = hn::Set(d, A(1) / A(W));
  const GroupLanes<D> lanes(d, W);
  constexpr size_t kBuf = kBuffered ? size_t(W) * hn::MaxLanes(D()) : 1;
  HWY_ALIGN A cb[kBuf], dyb[kBuf];  // the batch's c and dy (f16/bf16)
  // Vector j's place in a buffer; unbuffered, the one-element array itself (pass1/pass2 do not touch it, and
  // cb + j * L past its end would be undefined behaviour even unread: clang's UBSan reported it).
  const auto at = [L](A* buf, int64_t j) { return kBuffered ? buf + j * L : buf; };
  for (int64_t r = r0, ch0 = r0 % G * W; r < r1; r += L) {  // r: the batch's first group, ch0: its channel
    const int64_t nb = std::min(L, r1 - r), nv = nb * W / L;
    const int64_t off0 = r * W;
    const auto vs = LoadAN(d, mean + r, size_t(nb));  // lane q: group q's saved mean and rstd
    const auto vrs = LoadAN(d, rstd + r, size_t(nb));
    hn::Vec<D> sc[W], sg[W], sgc[W];
    int64_t ch = ch0;
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      sc[j] = sg[j] = sgc[j] = hn::Zero(d);
      if (j < nv) {
        v.template pass1<kBuffered>(off0 + j * L, ch, hn::TableLookupLanes(vs, lanes.spread[j]), sc[j], sg[j],
                                    sgc[j], at(cb, j), at(dyb, j));
        ch = NextChannel(ch, L, v.C);
      }
    }
    const auto sum_c = SumRuns<W>(d, sc), sum_g = SumRuns<W>(d, sg), sum_gc = SumRuns<W>(d, sgc);
    const BackwardConstants<D> k(vrs, sum_c, sum_g, sum_gc, inv_m);
    ch = ch0;
    for (int64_t j = 0; j < nv; ++j, ch = NextChannel(ch, L, v.C)) {
      const auto& sp = lanes.spread[j];
      v.template pass2<kBuffered>(off0 + j * L, ch, hn::TableLookupLanes(vs, sp),
                                  hn::TableLookupLanes(vrs, sp), hn::TableLookupLanes(k.vdr, sp),
                                  hn::TableLookupLanes(k.k2, sp), hn::TableLookupLanes(k.k3, sp), at(cb, j),
                                  at(dyb, j));
    }
    ch0 = ch;
  }
}

// The sum of all L lanes of v, left in every lane, by the butterfly v + v[lane ^ k] (k = 1, 2, 4, ...): the
// same pairwise tree as SumRuns. For float the steps are fixed shuffles: lane ^ 1 and lane ^ 2 stay inside a
// 128-bit block (vshufps / vpermilps), lane ^ 4 swaps adjacent blocks and lane ^ 8 the two 256-bit halves,
// cheaper than a general lane permute (vpermps); other types use the permute.
template <class D>
struct AllLanesSum {
  using TI = hwy::MakeSigned<hn::TFromD<D>>;
  static constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  using Idx = decltype(hn::SetTableIndices(D(), static_cast<const TI*>(nullptr)));
  Idx butterfly[8];  // butterfly[j]: lane i <- lane i ^ (1 << j)
  int steps = 0;
  explicit AllLanesSum(D d) {
    const int64_t L = int64_t(hn::Lanes(d));
    HWY_ALIGN TI idx[kMaxLanes];
    for (int64_t k = 1; k < L; k *= 2, ++steps) {
      for (int64_t i = 0; i < L; ++i) idx[i] = TI(i ^ k);
      butterfly[steps] = hn::SetTableIndices(d, idx);
    }
  }
  hn::Vec<D> operator()(hn::Vec<D> v) const { return Steps(v, steps); }
  // The first `upto` butterfly steps only: each run of 2^upto lanes (in order, from lane 0) then holds its
  // own sum in every lane.
  hn::Vec<D> Steps(hn::Vec<D> v, int upto) const {
#if HWY_TARGET != HWY_SCALAR  // (one lane there: no steps)
    if constexpr (std::is_same_v<hn::TFromD<D>, float>) {
      if (upto > 0) v = hn::Add(v, hn::Shuffle2301(v));
      if (upto > 1) v = hn::Add(v, hn::Shuffle1032(v));
      if constexpr (HWY_MAX_BYTES >= 32) {
        if (upto > 2) v = hn::Add(v, hn::SwapAdjacentBlocks(v));
      }
      if constexpr (HWY_MAX_BYTES >= 64) {
        if (upto > 3) v = hn::Add(v, hn::ConcatLowerUpper(D(), v, v));
      }
      return v;
    }
#endif
    for (int j = 0; j < upto; ++j) v = hn::Add(v, hn::TableLookupLanes(v, butterfly[j]));
    return v;
  }
};

// The sums of K vectors at once, each left in every lane of its own output vector: the same pairwise trees
// as AllLanesSum, one vector at a time (so the same bits), in fewer operations. Three sums one at a time
// take 4 shuffles and 4 adds each on AVX-512 (24 operations); together they take 16.
//
// Up to P = L vectors (K rounded up to a power of two, zeros in the padding) are folded into ONE vector
// whose P runs of L/P lanes are the P partial trees, in order. A round takes two vectors a and b:
//   Add(ConcatEven(b, a), ConcatOdd(b, a)):  lanes [0, L/2) = a[2j] + a[2j + 1], lanes [L/2, L) the same of b
// which is the first level of each one's tree, with a's runs in the lower half and b's in the upper. After
// log2(P) rounds the butterfly finishes each run (AllLanesSum::Steps), and a lane permute (vpermps) copies
// run k's sum to every lane of out[k]. Where P > L (more sums than lanes, as on AVX2 with 12), the vectors
// go in batches of L.
//   v: K vectors; out: K vectors, out[k] = the sum of the lanes of v[k], in every lane
template <int K, class D>
struct SumsOfEach {
  using TI = hwy::MakeSigned<hn::TFromD<D>>;
  static constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  using Idx = decltype(hn::SetTableIndices(D(), static_cast<const TI*>(nullptr)));
  const AllLanesSum<D>& sum;
  int64_t L;
  Idx spread[K];  // spread[k]: every lane <- the first lane of k's run in its batch's folded vector

  static int PowerOfTwoAtLeast(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
  }
  // The vectors [first, first + count) of a batch
  int BatchSize(int first) const { return std::min(K - first, int(L)); }

  SumsOfEach(D d, const AllLanesSum<D>& s) : sum(s), L(int64_t(hn::Lanes(d))) {
    HWY_ALIGN TI idx[kMaxLanes];
    for (int first = 0; first < K; first += int(L)) {
      const int count = BatchSize(first);
      const int64_t run = L / PowerOfTwoAtLeast(count);  // lanes per run
      for (int k = 0; k < count; ++k) {
        for (int64_t i = 0; i < L; ++i) idx[i] = TI(k * run);
        spread[first + k] = hn::SetTableIndices(d, idx);
      }
    }
  }

  HWY_INLINE void operator()(const hn::Vec<D>* HWY_RESTRICT v, hn::Vec<D>* HWY_RESTRICT out) const {
    for (int first = 0; first < K; first += int(L)) Batch(v + first, BatchSize(first), out + first, first);
  }

 private:
  static constexpr int kFold = 2 * (K < int(kMaxLanes) ? K : int(kMaxLanes));  // >= P

  HWY_INLINE void Batch(const hn::Vec<D>* HWY_RESTRICT v, int count, hn::Vec<D>* HWY_RESTRICT out,
                        int first) const {
    const D d;
    const int P = PowerOfTwoAtLeast(count);
    if (P == 1 || L == 1) {  // one vector (or one lane): the butterfly alone
      for (int k = 0; k < count; ++k) out[k] = sum(v[k]);
      return;
    }
    hn::Vec<D> w[kFold];
    for (int k = 0; k < P; ++k) w[k] = k < count ? v[k] : hn::Zero(d);
    hn::Vec<D> folded;
    int rounds = 0;
    if (P == 2) folded = SumRuns<2>(d, w), rounds = 1;
    if constexpr (kFold >= 4)
      if (P == 4) folded = SumRuns<4>(d, w), rounds = 2;
    if constexpr (kFold >= 8)
      if (P == 8) folded = SumRuns<8>(d, w), rounds = 3;
    if constexpr (kFold >= 16)
      if (P == 16) folded = SumRuns<16>(d, w), rounds = 4;
    const auto all = sum.Steps(folded, sum.steps - rounds);
    for (int k = 0; k < count; ++k) out[k] = hn::TableLookupLanes(all, spread[first + k]);
  }
};

// Groups [r0, r1); m >= L: one group at a time, its m/L vectors read twice (pass 2 from L1), its three sums
// reduced together (SumsOfEach; one AllLanesSum each until stop 31: the same bits, measured in
// docs/performance.md). (Batches of L groups reduced with SumRuns, as the forward does, measured slower
// here: 4096 x 1024 f32, 2 threads, 1.31 -> 2.12 ms. The forward gains from sharing one division and one
// square root among L groups; the backward has neither, and a batch's long reduction before its pass 2
// keeps the next batch's loads of x and dy from starting early.)
// kBuffered: c and dy kept for pass 2 (BackwardVectors::kBuffer; groups of at most kMaxBufferedGroup values).
// kVpg: m / L as a constant, or 0 (see WithVectorsPerGroup).
template <bool kBuffered, typename T, int kVpg = 0>
void BackwardLargeGroups(const BackwardVectors<T>& v, const AccT<T>* HWY_RESTRICT mean,
                         const AccT<T>* HWY_RESTRICT rstd, int64_t r0, int64_t r1, int64_t G) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t m = v.C / G, vpg = kVpg ? kVpg : m / L;
  const auto inv_m = hn::Set(d, A(1) / A(m));
  const AllLanesSum<D> sum(d);
  const SumsOfEach<3, D> sums_of(d, sum);
  constexpr size_t kBuf = kBuffered ? size_t(kMaxBufferedGroup) : 1;
  HWY_ALIGN A cb[kBuf], dyb[kBuf];
  const auto at = [L](A* buf, int64_t j) { return kBuffered ? buf + j * L : buf; };  // as BackwardSmallGroups
  for (int64_t r = r0, ch0 = r0 % G * m; r < r1; ++r) {  // ch0: the group's first channel
    const int64_t off0 = r * m;
    const auto vs = hn::Set(d, mean[r]), vrs = hn::Set(d, rstd[r]);
    auto sc = hn::Zero(d), sg = hn::Zero(d), sgc = hn::Zero(d);
    int64_t ch = ch0;
    for (int64_t j = 0; j < vpg; ++j, ch = NextChannel(ch, L, v.C)) {
      v.template pass1<kBuffered>(off0 + j * L, ch, vs, sc, sg, sgc, at(cb, j), at(dyb, j));
    }
    hn::Vec<D> sums[3] = {sc, sg, sgc}, total[3];
    sums_of(sums, total);
    const BackwardConstants<D> k(vrs, total[0], total[1], total[2], inv_m);
    ch = ch0;
    for (int64_t j = 0; j < vpg; ++j, ch = NextChannel(ch, L, v.C)) {
      v.template pass2<kBuffered>(off0 + j * L, ch, vs, vrs, k.vdr, k.k2, k.k3, at(cb, j), at(dyb, j));
    }
    ch0 = ch;
  }
}

// Samples [n0, n1) (n1 - n0 a multiple of 4), m >= L, C wide (w, dweight and dbias past half the L1): the
// same group g of four samples at a time, as LayerNorm's backward takes wide rows four at a time. Pass 1
// loads each vector of w once for the four; pass 2 loads (and stores) each vector of w, dweight and dbias
// once, and adds the four samples' terms to dweight and dbias in sample order, the order in which
// BackwardLargeGroups, one group after another, adds them: the same bits. Why: at C = 4096 the three arrays
// are 48 KiB, and one sample at a time took them from the L2 for every sample. Measured in
// docs/performance.md ("stop 24"). Its passes are BackwardVectors::pass1 and pass2 written out, with w loaded
// once per vector and dweight, dbias kept in registers for the four samples: calling pass1 and a shared core
// of pass2 instead (w reloaded per sample) measured 8% slower at 1024 x 4096 f32 (1.038 -> 1.126 ms, best of
// 8), and the shared core cost the one-sample pass2 2-4%.
template <typename T>
void BackwardLargeGroups4(const BackwardVectors<T>& v, const AccT<T>* HWY_RESTRICT mean,
                          const AccT<T>* HWY_RESTRICT rstd, int64_t n0, int64_t n1, int64_t G) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  constexpr int R = 4;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t C = v.C, m = C / G, vpg = m / L;
  const auto inv_m = hn::Set(d, A(1) / A(m));
  const AllLanesSum<D> sum(d);
  const SumsOfEach<3 * R, D> sums_of(d, sum);
  for (int64_t n = n0; n + R <= n1; n += R) {
    for (int64_t g = 0; g < G; ++g) {
      // group g of sample n + k: row (n + k) * G + g of mean and rstd, values from (n + k) * C + g * m
      hn::Vec<D> vs[R], vrs[R], sc[R], sg[R], sgc[R];
      for (int k = 0; k < R; ++k) {
        vs[k] = hn::Set(d, mean[(n + k) * G + g]);
        vrs[k] = hn::Set(d, rstd[(n + k) * G + g]);
        sc[k] = sg[k] = sgc[k] = hn::Zero(d);
      }
      // pass 1: per sample, c = x - s, g = dy w, and the sums of c, g and g c
      for (int64_t j = 0; j < vpg; ++j) {
        const int64_t ch = g * m + j * L;
        const auto wv = hn::LoadU(d, v.w + ch);
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + ch;
          const auto cv = hn::Sub(LoadAs(d, v.x + off), vs[k]);
          const auto gv = hn::Mul(LoadAs(d, v.dy + off), wv);
          sc[k] = hn::Add(sc[k], cv);
          sg[k] = hn::Add(sg[k], gv);
          sgc[k] = hn::MulAdd(gv, cv, sgc[k]);
        }
      }
      hn::Vec<D> sums[3 * R], total[3 * R];
      for (int k = 0; k < R; ++k) sums[3 * k] = sc[k], sums[3 * k + 1] = sg[k], sums[3 * k + 2] = sgc[k];
      sums_of(sums, total);
      hn::Vec<D> vdr[R], k2[R], k3[R];
      for (int k = 0; k < R; ++k) {
        const BackwardConstants<D> kk(vrs[k], total[3 * k], total[3 * k + 1], total[3 * k + 2], inv_m);
        vdr[k] = kk.vdr, k2[k] = kk.k2, k3[k] = kk.k3;
      }
      // pass 2: xhat; dweight, dbias (the four samples in order); dx
      for (int64_t j = 0; j < vpg; ++j) {
        const int64_t ch = g * m + j * L;
        const auto wv = hn::LoadU(d, v.w + ch);
        auto dwv = v.dw_part ? hn::LoadU(d, v.dw_part + ch) : hn::Zero(d);
        auto dbv = v.db_part ? hn::LoadU(d, v.db_part + ch) : hn::Zero(d);
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + ch;
          const auto dyv = LoadAs(d, v.dy + off);
          const auto xhat = hn::MulAdd(hn::Sub(LoadAs(d, v.x + off), vs[k]), vrs[k], vdr[k]);
          dwv = hn::MulAdd(dyv, xhat, dwv);
          dbv = hn::Add(dyv, dbv);
          if (v.dx)
            StoreAs(d, hn::MulAdd(hn::Mul(dyv, wv), vrs[k], hn::MulAdd(xhat, k3[k], k2[k])), v.dx + off);
        }
        if (v.dw_part) hn::StoreU(dwv, d, v.dw_part + ch);
        if (v.db_part) hn::StoreU(dbv, d, v.db_part + ch);
      }
    }
  }
}

// ---- 3d. The (N, C) backward for bf16: the values in pairs ---------------------------------------------
//
// The bf16 backward of 3b converts x and dy twice per value (once in each pass: a widening shuffle and a
// shift per 16 values each), and at 4096 x 1024 it took longer than its f32 backward for half the bytes. As
// the forward of 3c does, this path loads x and dy
// in pairs (LoadBf16Pairs: one load and two bit operations give 2L values as two vectors, the even channels
// and the odd ones), for the shapes of 3c: groups of m = a multiple of 2L values (V = m / 2L whole pair
// blocks, BackwardPairGroups), or of m < 2L dividing 2L (BackwardPairSmall, below).
// Everything a value meets per channel is in the same pair order (pair_slot): w, laid out once per call by
// group_norm_backward, and the dweight and dbias partial rows, which stay in pair order through
// sum_over_chunks and are put back in channel order once, at the end. dx goes back in place as it is stored
// (StoreBf16Interleaved). Per pair block, with s the saved mean, c = x - s and g = dy w (lo, then hi):
//   pass 1: sum_c += c_lo, += c_hi;  sum_g += g_lo, += g_hi;  sum_gc = fma(g_hi, c_hi, fma(g_lo, c_lo, .))
//   then:   the three sums of each sample reduced together (SumsOfEach), BackwardConstants as in 3b
//   pass 2: x and dy loaded (and c taken) again from L1; xhat = fma(c, rstd, -d rstd);
//           dweight = fma(dy, xhat, .), dbias += dy;  dx = fma(g, rstd, fma(xhat, k3, k2))
// These are 3b's operations per value; the sums add the values in another order, so d, mean_g, mean_gx and
// dx can differ from 3b's in the last bits (the tests hold both to the reference).
// Measured (Xeon model 167, 2 threads, best of 5): 4096 x 1024 0.874 -> 0.763 ms, 16384 x 256 0.869 -> 0.762;
// 1024 x 4096 (four samples at a time) level, 0.616 -> 0.615, so that kernel is not bound by its conversions.
// R samples at a time (R = 4 where w, dweight and dbias are past half the L1, as BackwardLargeGroups4 does,
// then R = 1 for the samples left over): per sample the same operations in the same order, and dweight and
// dbias take the samples in order either way, so the bits do not depend on R.
// One sample at a time, pass 1 asks for x and dy 4 KiB ahead (PrefetchAhead), one prefetch per 64 bytes of
// each. Measured (Xeon model 167, 2 threads, bf16 bwd 4096 x 1024, two runs each): none 0.82-0.85 ms, 1 KiB
// ahead 0.74-0.76, 2 KiB 0.75-0.79, 4 KiB 0.74, 8 KiB 0.75. Four samples at a time (1024 x 4096: four rows
// of 8 KiB read side by side) none 0.65-0.68 ms, 1 to 4 KiB ahead 0.63-0.71, so there it does not ask.
// kV: V as a constant (1, 2 or 4), or 0 (read at run time).
#if HWY_TARGET != HWY_SCALAR
template <int R, int kV>
void BackwardPairGroups(const hwy::bfloat16_t* HWY_RESTRICT dy, const hwy::bfloat16_t* HWY_RESTRICT x,
                        const float* HWY_RESTRICT wp, const float* HWY_RESTRICT mean,
                        const float* HWY_RESTRICT rstd, hwy::bfloat16_t* HWY_RESTRICT dx,
                        float* HWY_RESTRICT dwp, float* HWY_RESTRICT dbp, int64_t n0, int64_t n1, int64_t C,
                        int64_t G) {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d)), P = 2 * L, m = C / G, nv = kV ? kV : m / P;
  const auto inv_m = hn::Set(d, 1.0f / float(m));
  const AllLanesSum<D> sum(d);
  const SumsOfEach<3 * R, D> sums_of(d, sum);
  const hwy::bfloat16_t *x_end = x + n1 * C, *dy_end = dy + n1 * C;
  for (int64_t n = n0; n + R <= n1; n += R) {
    for (int64_t g = 0; g < G; ++g) {
      // group g of sample n + k: row (n + k) * G + g of mean and rstd; its values (and its slots in wp, dwp
      // and dbp) from channel g * m
      V vs[R], vrs[R], sums[3 * R], total[3 * R];
      for (int k = 0; k < R; ++k) {
        vs[k] = hn::Set(d, mean[(n + k) * G + g]);
        vrs[k] = hn::Set(d, rstd[(n + k) * G + g]);
        sums[3 * k] = sums[3 * k + 1] = sums[3 * k + 2] = hn::Zero(d);
      }
      // pass 1: c, g and the sums of c, g and g c, per sample
      for (int64_t j = 0; j < nv; ++j) {
        const int64_t ch = g * m + j * P;
        const V w[2] = {hn::LoadU(d, wp + ch), hn::LoadU(d, wp + ch + L)};
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + ch;
          V xv[2], dyv[2];
          if constexpr (R == 1) {  // one sample at a time: ask for x and dy 4 KiB ahead (see above)
            PrefetchAhead(x + off, x_end);
            PrefetchAhead(dy + off, dy_end);
          }
          LoadBf16Pairs(d, x + off, xv[0], xv[1]);
          LoadBf16Pairs(d, dy + off, dyv[0], dyv[1]);
          for (int h = 0; h < 2; ++h) {
            const auto c = hn::Sub(xv[h], vs[k]);
            const auto gv = hn::Mul(dyv[h], w[h]);
            sums[3 * k] = hn::Add(sums[3 * k], c);
            sums[3 * k + 1] = hn::Add(sums[3 * k + 1], gv);
            sums[3 * k + 2] = hn::MulAdd(gv, c, sums[3 * k + 2]);
          }
        }
      }
      sums_of(sums, total);
      V vdr[R], k2[R], k3[R];
      for (int k = 0; k < R; ++k) {
        const BackwardConstants<D> kk(vrs[k], total[3 * k], total[3 * k + 1], total[3 * k + 2], inv_m);
        vdr[k] = kk.vdr, k2[k] = kk.k2, k3[k] = kk.k3;
      }
      // pass 2: xhat; dweight, dbias (the samples in order); dx
      for (int64_t j = 0; j < nv; ++j) {
        const int64_t ch = g * m + j * P;
        const V w[2] = {hn::LoadU(d, wp + ch), hn::LoadU(d, wp + ch + L)};
        V dwv[2], dbv[2];
        for (int h = 0; h < 2; ++h) {
          dwv[h] = dwp ? hn::LoadU(d, dwp + ch + h * L) : hn::Zero(d);
          dbv[h] = dbp ? hn::LoadU(d, dbp + ch + h * L) : hn::Zero(d);
        }
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + ch;
          V xv[2], dyv[2], out[2];
          LoadBf16Pairs(d, x + off, xv[0], xv[1]);
          LoadBf16Pairs(d, dy + off, dyv[0], dyv[1]);
          for (int h = 0; h < 2; ++h) {
            const auto xhat = hn::MulAdd(hn::Sub(xv[h], vs[k]), vrs[k], vdr[k]);
            dwv[h] = hn::MulAdd(dyv[h], xhat, dwv[h]);
            dbv[h] = hn::Add(dyv[h], dbv[h]);
            out[h] = hn::MulAdd(hn::Mul(dyv[h], w[h]), vrs[k], hn::MulAdd(xhat, k3[k], k2[k]));
          }
          if (dx) ng::simd::HWY_NAMESPACE::StoreBf16Interleaved(d, out[0], out[1], dx + off);
        }
        for (int h = 0; h < 2; ++h) {
          if (dwp) hn::StoreU(dwv[h], d, dwp + ch + h * L);
          if (dbp) hn::StoreU(dbv[h], d, dbp + ch + h * L);
        }
      }
    }
  }
}

// Groups of m < 2L values (W = m / 2 lanes of lo and of hi per group: m = 2, 4, 8, 16 on AVX-512): groups
// [r0, r1), a batch of L groups is W pair loads, as in ForwardPairsSmall. A load's lanes hold 2L / m whole
// groups, so its c, g and g c go to SumRuns as they are (lane q of the result: group q), the constants of the
// L groups are computed side by side, and come back to the lanes that need them by a lane permute
// (GroupLanes, runs of W lanes).
template <int W>
void BackwardPairSmall(const hwy::bfloat16_t* HWY_RESTRICT dy, const hwy::bfloat16_t* HWY_RESTRICT x,
                       const float* HWY_RESTRICT wp, const float* HWY_RESTRICT mean,
                       const float* HWY_RESTRICT rstd, hwy::bfloat16_t* HWY_RESTRICT dx,
                       float* HWY_RESTRICT dwp, float* HWY_RESTRICT dbp, int64_t r0, int64_t r1, int64_t C,
                       int64_t G) {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  const D d;
  constexpr int64_t m = 2 * W;
  const int64_t L = int64_t(hn::Lanes(d)), P = 2 * L;
  const auto inv_m = hn::Set(d, 1.0f / float(m));
  const GroupLanes<D> lanes(d, W);  // runs of W lanes: a group's lanes in lo and in hi
  const hwy::bfloat16_t *x_end = x + r1 * m, *dy_end = dy + r1 * m;
  for (int64_t r = r0, ch0 = r0 % G * m; r < r1; r += L) {    // r: the batch's first group, ch0: its channel
    const int64_t nb = std::min(L, r1 - r), nv = nb * W / L;  // groups, pair loads
    const int64_t off0 = r * m;
    const auto vs = LoadAN(d, mean + r, size_t(nb));  // lane q: group q's saved mean and rstd
    const auto vrs = LoadAN(d, rstd + r, size_t(nb));
    // pass 1: per load, c, g and g c of its groups (lo + hi)
    V sc[W], sg[W], sgc[W];
    int64_t ch = ch0;
    HWY_UNROLL(8)
    for (int j = 0; j < W; ++j) {
      sc[j] = sg[j] = sgc[j] = hn::Zero(d);
      if (j < nv) {
        const int64_t off = off0 + j * P;
        PrefetchAhead(x + off, x_end);
        PrefetchAhead(dy + off, dy_end);
        const auto sj = hn::TableLookupLanes(vs, lanes.spread[j]);
        V xv[2], dyv[2];
        LoadBf16Pairs(d, x + off, xv[0], xv[1]);
        LoadBf16Pairs(d, dy + off, dyv[0], dyv[1]);
        const V c[2] = {hn::Sub(xv[0], sj), hn::Sub(xv[1], sj)};
        const V g[2] = {hn::Mul(dyv[0], hn::LoadU(d, wp + ch)), hn::Mul(dyv[1], hn::LoadU(d, wp + ch + L))};
        sc[j] = hn::Add(c[0], c[1]);
        sg[j] = hn::Add(g[0], g[1]);
        sgc[j] = hn::MulAdd(g[1], c[1], hn::Mul(g[0], c[0]));
        ch = NextChannel(ch, P, C);
      }
    }
    const BackwardConstants<D> k(vrs, SumRuns<W>(d, sc), SumRuns<W>(d, sg), SumRuns<W>(d, sgc), inv_m);
    // pass 2: each load's groups' constants spread to its lanes; xhat, dweight, dbias, dx
    ch = ch0;
    for (int64_t j = 0; j < nv; ++j, ch = NextChannel(ch, P, C)) {
      const int64_t off = off0 + j * P;
      const auto& sp = lanes.spread[j];
      const auto sj = hn::TableLookupLanes(vs, sp), rsj = hn::TableLookupLanes(vrs, sp),
                 drj = hn::TableLookupLanes(k.vdr, sp), k2j = hn::TableLookupLanes(k.k2, sp),
                 k3j = hn::TableLookupLanes(k.k3, sp);
      V xv[2], dyv[2], out[2];
      LoadBf16Pairs(d, x + off, xv[0], xv[1]);
      LoadBf16Pairs(d, dy + off, dyv[0], dyv[1]);
      for (int h = 0; h < 2; ++h) {
        const int64_t c = ch + h * L;
        const auto xhat = hn::MulAdd(hn::Sub(xv[h], sj), rsj, drj);
        if (dwp) hn::StoreU(hn::MulAdd(dyv[h], xhat, hn::LoadU(d, dwp + c)), d, dwp + c);
        if (dbp) hn::StoreU(hn::Add(dyv[h], hn::LoadU(d, dbp + c)), d, dbp + c);
        out[h] = hn::MulAdd(hn::Mul(dyv[h], hn::LoadU(d, wp + c)), rsj, hn::MulAdd(xhat, k3j, k2j));
      }
      if (dx) ng::simd::HWY_NAMESPACE::StoreBf16Interleaved(d, out[0], out[1], dx + off);
    }
    ch0 = ch;
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// Samples [n0, n1) of a bf16 (N, C) input that GroupNormPairLanes accepts (the forward's shapes); wp: w laid
// out by pair_slot; dwp, dbp: this chunk's (C) partials, in the same order (or null).
template <typename T>
void GroupNormBackwardPairs(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, const AccT<T>* HWY_RESTRICT wp,
                            const AccT<T>* HWY_RESTRICT mean, const AccT<T>* HWY_RESTRICT rstd,
                            T* HWY_RESTRICT dx, AccT<T>* HWY_RESTRICT dwp, AccT<T>* HWY_RESTRICT dbp,
                            int64_t n0, int64_t n1, int64_t C, int64_t G) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (UseBf16Pairs<hn::ScalableTag<AccT<T>>, T>()) {
    constexpr int kL = int(hn::MaxLanes(hn::ScalableTag<float>()));
    const int64_t L = int64_t(hn::Lanes(hn::ScalableTag<float>())), m = C / G, nv = m / (2 * L);
    if (m < 2 * L) {  // small groups, L to a batch
      const int64_t r0 = n0 * G, r1 = n1 * G;
      if (m == 2) return BackwardPairSmall<1>(dy, x, wp, mean, rstd, dx, dwp, dbp, r0, r1, C, G);
      if constexpr (kL >= 2)
        if (m == 4) return BackwardPairSmall<2>(dy, x, wp, mean, rstd, dx, dwp, dbp, r0, r1, C, G);
      if constexpr (kL >= 4)
        if (m == 8) return BackwardPairSmall<4>(dy, x, wp, mean, rstd, dx, dwp, dbp, r0, r1, C, G);
      if constexpr (kL >= 8)
        if (m == 16) return BackwardPairSmall<8>(dy, x, wp, mean, rstd, dx, dwp, dbp, r0, r1, C, G);
      return;
    }
    // four samples at a time where w, dweight and dbias are past half the L1, as in 3b (C > 2048)
    const bool wide = int64_t(3 * sizeof(float)) * C > 24576;
    const int64_t n4 = wide ? n0 + (n1 - n0) / 4 * 4 : n0;
    auto run = [&]<int kV>() {
      BackwardPairGroups<4, kV>(dy, x, wp, mean, rstd, dx, dwp, dbp, n0, n4, C, G);
      BackwardPairGroups<1, kV>(dy, x, wp, mean, rstd, dx, dwp, dbp, n4, n1, C, G);
    };
    if (nv == 1) return run.template operator()<1>();
    if (nv == 2) return run.template operator()<2>();
    if (nv == 4) return run.template operator()<4>();
    return run.template operator()<0>();
  }
#endif
  (void)dy, (void)x, (void)wp, (void)mean, (void)rstd, (void)dx, (void)dwp, (void)dbp, (void)n0, (void)n1,
      (void)C, (void)G;
}

// Samples [n0, n1) of an (N, C) input; dw_part, db_part: (C) partials of this chunk (or null).
template <typename T>
void GroupNormBackwardBatches(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x,
                              const AccT<T>* HWY_RESTRICT w, const AccT<T>* HWY_RESTRICT mean,
                              const AccT<T>* HWY_RESTRICT rstd, T* HWY_RESTRICT dx,
                              AccT<T>* HWY_RESTRICT dw_part, AccT<T>* HWY_RESTRICT db_part, int64_t n0,
                              int64_t n1, int64_t C, int64_t G) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  constexpr int kL = int(hn::MaxLanes(D()));
  const int64_t m = C / G, r0 = n0 * G, r1 = n1 * G;
  const BackwardVectors<T> v{dy, x, w, dx, dw_part, db_part, C};
  // f16/bf16 keep c and dy for pass 2 where w, dweight and dbias fit half the L1 (C <= 2048 in f32). Wider,
  // the buffer measured slower: 1024 x 4096 bf16 (m = 128) 0.899 -> 0.935 ms (Xeon model 207, 2 threads,
  // best of 6), where 4096 x 1024 (m = 32) went 1.353 -> 1.235 and 16384 x 256 (m = 8) 1.093 -> 0.964.
  // Wide (w, dweight and dbias past half the L1), groups of m >= L take four samples at a time.
  const bool wide = int64_t(3 * sizeof(A)) * C > 24576;
  const bool buffered = BackwardVectors<T>::kBuffer && !wide;
  if (m >= kL) {
    int64_t n = n0;
    if (wide) {
      n = n0 + (n1 - n0) / 4 * 4;
      BackwardLargeGroups4<T>(v, mean, rstd, n0, n, G);
    }
    const bool keep = buffered && m <= kMaxBufferedGroup;
    return WithVectorsPerGroup<4>(m / kL, [&]<int kVpg>() {
      if (keep) return BackwardLargeGroups<true, T, kVpg>(v, mean, rstd, n * G, r1, G);
      BackwardLargeGroups<false, T, kVpg>(v, mean, rstd, n * G, r1, G);
    });
  }
  auto small = [&]<int W>() {
    if (buffered) return BackwardSmallGroups<W, true, T>(v, mean, rstd, r0, r1, G);
    BackwardSmallGroups<W, false, T>(v, mean, rstd, r0, r1, G);
  };
  if constexpr (kL > 1)
    if (m == 1) return small.template operator()<1>();
  if constexpr (kL > 2)
    if (m == 2) return small.template operator()<2>();
  if constexpr (kL > 4)
    if (m == 4) return small.template operator()<4>();
  if constexpr (kL > 8)
    if (m == 8) return small.template operator()<8>();
}

#define NG_GROUP_NORM_INSTANCES(NAME, T)                                                                     \
  void GroupNormForward##NAME(const T* x, const AccT<T>* w, const AccT<T>* b, T* y, AccT<T>* mean,           \
                              AccT<T>* rstd, int64_t r0, int64_t r1, int64_t C, int64_t S, int64_t G,        \
                              double eps) {                                                                  \
    GroupNormForwardRows<T>(x, w, b, y, mean, rstd, r0, r1, C, S, G, eps);                                   \
  }                                                                                                          \
  void GroupNormBackward##NAME(const T* dy, const T* x, const AccT<T>* w, const AccT<T>* mean,               \
                               const AccT<T>* rstd, T* dx, AccT<T>* dw, AccT<T>* db, int64_t r0, int64_t r1, \
                               int64_t C, int64_t S, int64_t G) {                                            \
    GroupNormBackwardRows<T>(dy, x, w, mean, rstd, dx, dw, db, r0, r1, C, S, G);                             \
  }                                                                                                          \
  bool GroupNormBatchesEligible##NAME(int64_t C, int64_t S, int64_t G) {                                     \
    return GroupNormBatchesEligible<T>(C, S, G);                                                             \
  }                                                                                                          \
  int64_t GroupNormPairLanes##NAME(int64_t C, int64_t S, int64_t G) {                                        \
    return GroupNormPairLanes<T>(C, S, G);                                                                   \
  }                                                                                                          \
  void GroupNormForwardPairs##NAME(const T* x, const AccT<T>* wp, const AccT<T>* bp, T* y, AccT<T>* mean,    \
                                   AccT<T>* rstd, int64_t n0, int64_t n1, int64_t C, int64_t G,              \
                                   double eps) {                                                             \
    GroupNormForwardPairs<T>(x, wp, bp, y, mean, rstd, n0, n1, C, G, eps);                                   \
  }                                                                                                          \
  void GroupNormForwardBatches##NAME(const T* x, const AccT<T>* w, const AccT<T>* b, T* y, AccT<T>* mean,    \
                                     AccT<T>* rstd, int64_t n0, int64_t n1, int64_t C, int64_t G,            \
                                     double eps) {                                                           \
    GroupNormForwardBatches<T>(x, w, b, y, mean, rstd, n0, n1, C, G, eps);                                   \
  }                                                                                                          \
  void GroupNormBackwardBatches##NAME(const T* dy, const T* x, const AccT<T>* w, const AccT<T>* mean,        \
                                      const AccT<T>* rstd, T* dx, AccT<T>* dw, AccT<T>* db, int64_t n0,      \
                                      int64_t n1, int64_t C, int64_t G) {                                    \
    GroupNormBackwardBatches<T>(dy, x, w, mean, rstd, dx, dw, db, n0, n1, C, G);                             \
  }                                                                                                          \
  void GroupNormBackwardPairs##NAME(const T* dy, const T* x, const AccT<T>* wp, const AccT<T>* mean,         \
                                    const AccT<T>* rstd, T* dx, AccT<T>* dwp, AccT<T>* dbp, int64_t n0,      \
                                    int64_t n1, int64_t C, int64_t G) {                                      \
    GroupNormBackwardPairs<T>(dy, x, wp, mean, rstd, dx, dwp, dbp, n0, n1, C, G);                            \
  }
NG_GROUP_NORM_INSTANCES(F32, float)
NG_GROUP_NORM_INSTANCES(F64, double)
NG_GROUP_NORM_INSTANCES(F16, hwy::float16_t)
NG_GROUP_NORM_INSTANCES(BF16, hwy::bfloat16_t)
#undef NG_GROUP_NORM_INSTANCES

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "nn/norms/norm_dispatch.h"
#include "nn/norms/wide_stats.h"

namespace ng::norms {

HWY_EXPORT(GroupNormForwardF32);
HWY_EXPORT(GroupNormForwardF64);
HWY_EXPORT(GroupNormForwardF16);
HWY_EXPORT(GroupNormForwardBF16);
HWY_EXPORT(GroupNormBackwardF32);
HWY_EXPORT(GroupNormBackwardF64);
HWY_EXPORT(GroupNormBackwardF16);
HWY_EXPORT(GroupNormBackwardBF16);
HWY_EXPORT(GroupNormBatchesEligibleF32);
HWY_EXPORT(GroupNormBatchesEligibleF64);
HWY_EXPORT(GroupNormBatchesEligibleF16);
HWY_EXPORT(GroupNormBatchesEligibleBF16);
HWY_EXPORT(GroupNormPairLanesF32);
HWY_EXPORT(GroupNormPairLanesF64);
HWY_EXPORT(GroupNormPairLanesF16);
HWY_EXPORT(GroupNormPairLanesBF16);
HWY_EXPORT(GroupNormForwardPairsF32);
HWY_EXPORT(GroupNormForwardPairsF64);
HWY_EXPORT(GroupNormForwardPairsF16);
HWY_EXPORT(GroupNormForwardPairsBF16);
HWY_EXPORT(GroupNormForwardBatchesF32);
HWY_EXPORT(GroupNormForwardBatchesF64);
HWY_EXPORT(GroupNormForwardBatchesF16);
HWY_EXPORT(GroupNormForwardBatchesBF16);
HWY_EXPORT(GroupNormBackwardBatchesF32);
HWY_EXPORT(GroupNormBackwardBatchesF64);
HWY_EXPORT(GroupNormBackwardBatchesF16);
HWY_EXPORT(GroupNormBackwardBatchesBF16);
HWY_EXPORT(GroupNormBackwardPairsF32);
HWY_EXPORT(GroupNormBackwardPairsF64);
HWY_EXPORT(GroupNormBackwardPairsF16);
HWY_EXPORT(GroupNormBackwardPairsBF16);

// pair_slot (section 3c): where w and b laid out in pairs for L lanes keep channel block + i (block a
// multiple of 2L, i < 2L): within its block of 2L channels, the even channels first (slot i/2), then the
// odd ones (slot L + i/2). The loops below walk the blocks, so that no channel costs an integer division
// (the run-time 2L): with one per channel, the three layouts of a backward (w, dweight, dbias) took ~50 us at
// C = 4096 on the Xeon, 7% of the bf16 backward at 1024 x 4096.
inline int64_t pair_slot(int64_t block, int64_t i, int64_t L) {
  return block + (i % 2) * L + i / 2;
}

// The C per-channel values at p (`absent` for each where p is null), laid out in pairs for L lanes
// (C % 2L == 0, as the pairs path requires).
template <typename A>
std::vector<A> laid_out_in_pairs(const A* p, A absent, int64_t C, int64_t L) {
  std::vector<A> out(static_cast<size_t>(C));
  for (int64_t block = 0; block < C; block += 2 * L)
    for (int64_t i = 0; i < 2 * L; ++i) out[size_t(pair_slot(block, i, L))] = p ? p[block + i] : absent;
  return out;
}

// The C values at p, laid out in pairs for L lanes, put back in channel order (in place).
template <typename A>
void back_from_pairs(A* p, int64_t C, int64_t L) {
  const std::vector<A> laid(p, p + C);
  for (int64_t block = 0; block < C; block += 2 * L)
    for (int64_t i = 0; i < 2 * L; ++i) p[block + i] = laid[size_t(pair_slot(block, i, L))];
}

// Forward rows (groups) shorter than this run the scalar loop even in the fast path: a row shorter than one
// AVX-512 vector is all tail for the SIMD kernel, and the scalar loop is faster there (measured: 8.5 vs 12.9
// ns per element for rows of 8). The backward keeps the SIMD kernel at every length (it measured faster).
constexpr int64_t kShortRow = 16;

NormStats group_norm_forward(const Tensor& x, int64_t N, int64_t C, int64_t S, int64_t G,
                             const Tensor& weight, const Tensor& bias, double eps, Impl impl) {
  NG_CHECK(x.is_contiguous(), "group_norm_forward", "expected a contiguous x");
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = N * G, m = (C / G) * S;
  NormStats s;
  s.y = empty(x.shape(), x.dtype());
  s.mean = empty({rows}, acc);
  s.rstd = empty({rows}, acc);
  if (x.numel() == 0) return s;
  dispatch_storage(x.dtype(), "group_norm", [&]<typename T, typename A>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* py = static_cast<T*>(s.y.raw_data());
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data<A>() : nullptr;
    A* pmean = s.mean.data<A>();
    A* prstd = s.rstd.data<A>();
    // The groups [r0, r1) whose statistics overflowed the compute type (|x| past ~1e19 in float), computed
    // again scaled (wide_stats.h), after whichever path below wrote them. Group r is the m contiguous values
    // of sample r / G in channels (r % G) * cpg and on; its value i is in channel (r % G) * cpg + i / S.
    const int64_t cpg = C / G;
    auto redo_overflowed = [&](int64_t r0, int64_t r1) {
      redo_overflowed_groups(px, py, pmean, prstd, r0, r1, m, eps, [&](int64_t r, int64_t i) {
        const int64_t c = (r % G) * cpg + i / S;
        return std::pair<double, double>(pw ? double(pw[c]) : 1.0, pb ? double(pb[c]) : 0.0);
      });
    };
    if (impl == Impl::reference) {
      group_norm_forward_reference<T, A>(px, pw, pb, py, pmean, prstd, N, C, S, G, A(eps));
      redo_overflowed(0, rows);
      return;
    }
    int64_t pair_lanes = 0;
    NG_NORM_SIMD_CALL_RET(pair_lanes, T, GroupNormPairLanes, C, S, G);
    if (pair_lanes > 0) {
      // bf16 (N, C) input: the values in pairs (section 3c); w and b laid out in pairs once
      const std::vector<A> wp = laid_out_in_pairs(pw, A(1), C, pair_lanes);
      const std::vector<A> bp = laid_out_in_pairs(pb, A(0), C, pair_lanes);
      parallel_for(N, std::max<int64_t>(1, 16384 / C), [&](int64_t n0, int64_t n1) {
        NG_NORM_SIMD_CALL(T, GroupNormForwardPairs, hwy_ptr(px), wp.data(), bp.data(), hwy_ptr(py), pmean,
                          prstd, n0, n1, C, G, eps);
        redo_overflowed(n0 * G, n1 * G);
      });
      return;
    }
    bool batches = false;
    NG_NORM_SIMD_CALL_RET(batches, T, GroupNormBatchesEligible, C, S, G);
    if (batches) {
      // (N, C) input with groups that tile the vectors: samples in parallel, many groups per vector
      std::vector<A> ones, zeros;
      if (!pw) ones.assign(size_t(C), A(1)), pw = ones.data();
      if (!pb) zeros.assign(size_t(C), A(0)), pb = zeros.data();
      parallel_for(N, std::max<int64_t>(1, 16384 / C), [&](int64_t n0, int64_t n1) {
        NG_NORM_SIMD_CALL(T, GroupNormForwardBatches, hwy_ptr(px), pw, pb, hwy_ptr(py), pmean, prstd, n0, n1,
                          C, G, eps);
        redo_overflowed(n0 * G, n1 * G);
      });
      return;
    }
    if (m < kShortRow) {
      // Short rows: the scalar loop, samples in parallel (fixed chunks).
      parallel_for(N, std::max<int64_t>(1, 16384 / (C * S)), [&](int64_t n0, int64_t n1) {
        group_norm_forward_reference<T, A>(px + n0 * C * S, pw, pb, py + n0 * C * S, pmean + n0 * G,
                                           prstd + n0 * G, n1 - n0, C, S, G, A(eps));
        redo_overflowed(n0 * G, n1 * G);
      });
      return;
    }
    std::vector<A> ones, zeros;
    if (!pw) ones.assign(size_t(C), A(1)), pw = ones.data();
    if (!pb) zeros.assign(size_t(C), A(0)), pb = zeros.data();
    const int64_t grain = std::max<int64_t>(1, 16384 / m);
    parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      NG_NORM_SIMD_CALL(T, GroupNormForward, hwy_ptr(px), pw, pb, hwy_ptr(py), pmean, prstd, r0, r1, C, S, G,
                        eps);
      redo_overflowed(r0, r1);
    });
  });
  return s;
}

NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, int64_t N, int64_t C, int64_t S, int64_t G, bool need_dx,
                              bool need_dweight, bool need_dbias, Impl impl) {
  NG_CHECK(x.is_contiguous() && dy.is_contiguous(), "group_norm_backward", "expected contiguous x and dy");
  NG_CHECK(dy.dtype() == x.dtype() && dy.shape() == x.shape(), "group_norm_backward", "dy ",
           shape_str(dy.shape()), " ", dtype_name(dy.dtype()), " does not match x ", shape_str(x.shape()),
           " ", dtype_name(x.dtype()));
  const DType acc = compute_dtype(x.dtype());
  const int64_t rows = N * G, m = (C / G) * S;
  NormGrads gr;
  if (need_dx) gr.dx = empty(x.shape(), x.dtype());
  if (need_dweight) gr.dweight = zeros({C}, acc);
  if (need_dbias) gr.dbias = zeros({C}, acc);
  if (x.numel() == 0) return gr;
  dispatch_storage(x.dtype(), "group_norm", [&]<typename T, typename A>() {
    const T* pdy = static_cast<const T*>(dy.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    T* pdx = need_dx ? static_cast<T*>(gr.dx.raw_data()) : nullptr;
    A* pdw = need_dweight ? gr.dweight.data<A>() : nullptr;
    A* pdb = need_dbias ? gr.dbias.data<A>() : nullptr;
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    if (impl == Impl::reference) {
      group_norm_backward_reference<T, A>(pdy, px, pw, mean.data<A>(), rstd.data<A>(), pdx, pdw, pdb, N, C, S,
                                          G);
      return;
    }
    int64_t pair_lanes = 0;
    NG_NORM_SIMD_CALL_RET(pair_lanes, T, GroupNormPairLanes, C, S, G);
    if (pair_lanes > 0) {
      // bf16 (N, C) input of the forward's pairs shapes: the values in pairs (section 3d). w laid out in
      // pairs once; dweight and dbias come out in the same order, and go back once at the end.
      const std::vector<A> wp = laid_out_in_pairs(pw, A(1), C, pair_lanes);
      const RowChunks chunks = row_chunks(N, C);
      sum_over_chunks(chunks, N, C, pdw, pdb, [&](int64_t n0, int64_t n1, A* dw_part, A* db_part) {
        NG_NORM_SIMD_CALL(T, GroupNormBackwardPairs, hwy_ptr(pdy), hwy_ptr(px), wp.data(), mean.data<A>(),
                          rstd.data<A>(), hwy_ptr(pdx), dw_part, db_part, n0, n1, C, G);
      });
      if (pdw) back_from_pairs(pdw, C, pair_lanes);
      if (pdb) back_from_pairs(pdb, C, pair_lanes);
      return;
    }
    std::vector<A> ones;
    if (!pw) ones.assign(size_t(C), A(1)), pw = ones.data();
    bool batches = false;
    NG_NORM_SIMD_CALL_RET(batches, T, GroupNormBatchesEligible, C, S, G);
    if (batches) {
      // (N, C) input with groups that tile the vectors: fixed chunks of SAMPLES, (C) partials per group of
      // chunks
      const RowChunks chunks = row_chunks(N, C);
      sum_over_chunks(chunks, N, C, pdw, pdb, [&](int64_t n0, int64_t n1, A* dw_part, A* db_part) {
        NG_NORM_SIMD_CALL(T, GroupNormBackwardBatches, hwy_ptr(pdy), hwy_ptr(px), pw, mean.data<A>(),
                          rstd.data<A>(), hwy_ptr(pdx), dw_part, db_part, n0, n1, C, G);
      });
      return;
    }
    // Fixed row chunks, (C) partials for dweight and dbias per group of chunks, summed in group order.
    const RowChunks chunks = row_chunks(rows, m);
    sum_over_chunks(chunks, rows, C, pdw, pdb, [&](int64_t r0, int64_t r1, A* dw_part, A* db_part) {
      NG_NORM_SIMD_CALL(T, GroupNormBackward, hwy_ptr(pdy), hwy_ptr(px), pw, mean.data<A>(), rstd.data<A>(),
                        hwy_ptr(pdx), dw_part, db_part, r0, r1, C, S, G);
    });
  });
  return gr;
}

}  // namespace ng::norms

// ---- 5. The autograd op -----------------------------------------------------------------------------------
namespace ng::F {

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  norms::check_float_input(x, op);
  norms::check_eps(eps, x, op);
  NG_CHECK(x.dim() >= 2, op, "expected x of shape (N, C, *) with at least 2 dimensions, got ",
           shape_str(x.shape()));
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = C > 0 && N > 0 ? x.numel() / (N * C) : 0;
  const int64_t G = num_groups;
  NG_CHECK(G > 0, op, "expected num_groups > 0, got ", G);
  NG_CHECK(C % G == 0, op, "expected the number of channels C = ", C, " to be divisible by num_groups = ", G,
           ", got x ", shape_str(x.shape()));
  norms::check_affine(weight, "weight", Shape{C}, x, "the channel dimension", op);
  norms::check_affine(bias, "bias", Shape{C}, x, "the channel dimension", op);
  norms::check_affine_dtype(weight, "weight", x, op);
  norms::check_affine_dtype(bias, "bias", x, op);
  // The dispatch table has no GroupNorm entry (the CUDA backend's is ng::cuda::group_norm): mixed devices are
  // an error naming both, and a device x is refused here rather than read as host memory.
  if (on_device({x, weight, bias}, op)) check_cpu(x, op);

  // x: (N, C, S) once contiguous; weight, bias: (C) in the compute dtype.
  const DType acc = compute_dtype(x.dtype());
  Tensor xc = x.detach().contiguous();
  Tensor wc = norms::contiguous_as(weight, acc);
  Tensor bc = norms::contiguous_as(bias, acc);
  norms::NormStats fwd = norms::group_norm_forward(xc, N, C, S, G, wc, bc, eps);
  Tensor y = fwd.y;

  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc;
    const DType b_dtype = bias.defined() ? bias.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "GroupNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor dy = dout.to(x_dtype).contiguous();
      norms::NormGrads g = norms::group_norm_backward(dy, sx.unpack(), smean.unpack(), srstd.unpack(),
                                                      sw.unpack(), N, C, S, G, need_dx, need_dw, need_db);
      return {g.dx, norms::grad_like(g.dweight, w_dtype, Shape{C}),
              norms::grad_like(g.dbias, b_dtype, Shape{C})};
    });
  }
  return y;
}

}  // namespace ng::F

// ---- 6. The modules ---------------------------------------------------------------------------------------
namespace ng::nn {

GroupNorm::GroupNorm(int64_t num_groups_in, int64_t num_channels_in, double eps_in, bool affine)
    : num_groups(num_groups_in), num_channels(num_channels_in), eps(eps_in) {
  NG_CHECK(num_groups > 0 && num_channels > 0, "GroupNorm",
           "expected positive num_groups and num_channels, got ", num_groups, " and ", num_channels);
  NG_CHECK(num_channels % num_groups == 0, "GroupNorm", "expected num_channels = ", num_channels,
           " to be divisible by num_groups = ", num_groups);
  norms::check_eps(eps, "GroupNorm");
  if (affine) {
    weight = register_parameter("weight", ones({num_channels}));
    bias = register_parameter("bias", zeros({num_channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  NG_CHECK(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm", "expected x of shape (N, ", num_channels,
           ", *), got ", shape_str(x.shape()));
  return F::group_norm(x, num_groups, weight, bias, eps);
}

// PyTorch's InstanceNorm turns momentum = None into 0 (its running statistics never move); BatchNorm's
// cumulative average, which normgrad gave it until 2026-11-28, is not PyTorch's either. So it is refused, at
// construction and at each training forward (momentum is a public field).
static void check_tracked_momentum(const std::optional<double>& momentum, bool track, const char* name) {
  NG_CHECK(momentum.has_value() || !track, name,
           "momentum = nullopt (BatchNorm's cumulative average) is not supported with track_running_stats: "
           "PyTorch's InstanceNorm takes it as 0 and never moves its running statistics; give a momentum in "
           "[0, 1]");
}

InstanceNorm::InstanceNorm(int64_t num_features_in, double eps_in, std::optional<double> momentum_in,
                           bool affine_in, bool track, int64_t spatial_dims, const char* name)
    : num_features(num_features_in),
      eps(eps_in),
      momentum(momentum_in),
      affine(affine_in),
      track_running_stats(track),
      spatial_dims_(spatial_dims),
      name_(name) {
  NG_CHECK(num_features > 0, name, "expected num_features > 0, got ", num_features);
  norms::check_eps(eps, name);
  norms::check_momentum(momentum, name);
  check_tracked_momentum(momentum, track_running_stats, name);
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", zeros({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::i64));
  }
}

Tensor InstanceNorm::forward(const Tensor& x_in) {
  // (N, C, *spatial) or unbatched (C, *spatial).
  const int64_t batched = spatial_dims_ + 2, unbatched = spatial_dims_ + 1;
  NG_CHECK(x_in.dim() == batched || x_in.dim() == unbatched, name_, "expected a ", unbatched, "-D or ",
           batched, "-D input, got ", x_in.dim(), "-D ", shape_str(x_in.shape()));
  Tensor x = x_in.dim() == unbatched ? x_in.unsqueeze(0) : x_in;
  NG_CHECK(x.size(1) == num_features, name_, "expected ", num_features, " channels, got x ",
           shape_str(x_in.shape()));
  Tensor y;
  if (track_running_stats && !is_training()) {
    // eval with running statistics: per channel, exactly BatchNorm in eval mode
    y = F::batch_norm(x, running_mean, running_var, weight, bias, /*training=*/false, 0.0, eps);
  } else {
    y = F::group_norm(x, num_features, weight, bias, eps);
    if (track_running_stats) {
      check_tracked_momentum(momentum, track_running_stats, name_);
      norms::check_momentum(momentum, name_);  // a public field: NaN or 2 written after construction
      // running stats: batch average of the per-instance mean and unbiased variance, as PyTorch does.
      // num_batches_tracked is PyTorch's too: registered, saved, and never counted (F.instance_norm does not
      // touch it; normgrad counted it until 2026-11-28, so its state_dict differed from PyTorch's).
      norms::update_running_stats_per_instance(x, running_mean, running_var, *momentum, name_);
    }
  }
  return x_in.dim() == unbatched ? y.squeeze(0) : y;
}

}  // namespace ng::nn
#endif  // HWY_ONCE
