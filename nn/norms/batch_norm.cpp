// BatchNorm (Ioffe, Szegedy 2015): normalize each channel with statistics taken across the batch.
//
// ---- 1. The formula ---------------------------------------------------------------------------------------
//
//   x: (N, C, S)  -- S = product of the spatial dims (1 for a plain (N, C) input)
//   per channel c, over its M = N * S values x[:, c, :]:
//
//   mean_c = (1/M) sum_{n,s} x[n, c, s]
//   var_c  = (1/M) sum_{n,s} (x[n, c, s] - mean_c)^2          biased: this is what the forward divides by
//   rstd_c = 1 / sqrt(var_c + eps)
//   y[n, c, s] = (x[n, c, s] - mean_c) * rstd_c * weight_c + bias_c
//
// Training uses the batch's own mean_c, var_c, and keeps running estimates for inference (PyTorch's rule):
//   running_mean = (1 - momentum) * running_mean + momentum * mean_c
//   running_var  = (1 - momentum) * running_var  + momentum * var_c * M / (M - 1)     <- UNBIASED
// momentum weighs the NEW batch (0.1 = 10% new); "none" = cumulative average, momentum_t = 1 / t.
// Eval uses running_mean, running_var in place of mean_c, var_c: y is then an affine map of x per channel.
//
// Why the statistics cross samples: BatchNorm was designed for convolutional nets trained with large
// batches, where the batch is a good sample of the data. It is why a batch of one cannot be trained
// (var = 0 over one value) and why small batches make the statistics noisy.
//
// Saved for backward: mean (f64) and rstd per channel, and whether the batch statistics were used.
//
// Layout of this file: 1. formula  2. scalar reference loop  3. fast Highway + OpenMP kernel  4. backward:
// derivation, reference, fast kernel  5. the autograd op F::batch_norm  6. nn::BatchNorm1d/2d.
// Walk-through: docs/norms/batch_norm.md.
#include <algorithm>
#include <limits>
#include <memory>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/batch_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "nn/norms/norm_simd-inl.h"

#include "autograd/function.h"
#include "nn/norms/batch_norm.h"
#include "nn/norms/norm_math.h"
#include "nn/norms/wide_stats.h"
#include "tensor/device_kernels.h"
#include "tensor/ops/elementwise.h"

// Where the (N, C) kernels switch to their wide-row forms: when the per-channel arrays a loop reads with
// every sample would crowd a 32 KiB L1. `acc` is the size of the compute type. Defined once (this file is
// compiled once per SIMD target) and used both by the kernels and by the chunking in batch_norm_forward and
// batch_norm_backward, which must agree with them.
#ifndef NG_BATCH_NORM_WIDE_ROWS_
#define NG_BATCH_NORM_WIDE_ROWS_
namespace ng::norms {
// The statistics and the output pass: four arrays past half the L1 (C > 1024 in f32).
constexpr bool bn_stats_wide(int64_t C, size_t acc) {
  return int64_t(4 * acc) * C > 16384;
}
// The backward's sums: five arrays past 20 KiB.
constexpr bool bn_sums_wide(int64_t C, size_t acc) {
  return int64_t(5 * acc) * C > 20480;
}
// The dx pass: the six arrays and one sample's x, dy and dx past the L1 (f32: C > 910; bf16: C > 1092).
// (Since stop 24 the pass reads four arrays, not six (section 4); the limit stays where it was measured.)
// Measured (AMD Zen 4, 2 threads, A/B): at 4096 x 1024 in f32 (36 KiB) four samples per walk take the
// backward from 1.38 / 2.13 to 1.02 / 1.11 ms (best / median); in bf16 (30 KiB) they made it slower, 0.69
// -> 1.06 ms. At C = 683 in f32 (24.6 KiB) the two were level, at C = 512 one sample per walk was 10%
// faster. (Until 2026-11-25 the limit was the six arrays alone past the whole L1.)
// f16 and bf16 storage never take it: at 1024 x 4096 in bf16 (96 KiB of arrays) one sample per walk was
// faster too. A/B on an Intel Xeon VM (AVX-512; 2026-11-25, stop 21; `scripts/bench_ab.py --rounds 5`,
// best / median): 1 thread 1.93 / 1.98 -> 1.66 / 1.84 ms, 2 threads 1.04 / 1.08 -> 0.97 / 0.99 ms.
// `perf annotate` shows why: GCC 12 does not inline the block lambda there (the conversions make it
// bigger), so every 16 channels pay a call, a stack realignment and the six constants spilled and reloaded
// for each sample. (Forcing it inline with always_inline made the bf16 forward, which shares the pattern,
// 25-35% slower.) Each dx is computed the same way on both paths.
constexpr bool bn_dx_wide(int64_t C, size_t acc, size_t elem) {
  return elem >= acc && int64_t(6 * acc + 3 * elem) * C > 32768;
}
// The fixed chunks of samples for the statistics and the backward's sums: row_chunks' (~32K values each, at
// most 64), but at most kChunkGroups (16) chunks, and on the wide path (register blocks of channels, only a
// column block of the chunk in L1) at least 128 samples. Why: each chunk ends with per-channel work (its
// float sums turned into double moments, in a row of 16 bytes per channel that the merge reads back), so a
// chunk of g samples pays ~16 bytes per channel against g * sizeof(T) bytes of x: 12.5% more traffic for
// the 64 samples of bf16 that row_chunks gives at 4096 x 1024 (64 chunks), and as much at 1024 x 4096 with
// the old minimum of 64 samples. `perf` put a third of the statistics' time at 1024 x 4096 bf16 outside
// their loop over x. Measured (Xeon model 167, 2 threads, `scripts/bench_ab.py --rounds 5`, best / median,
// forward): bf16 4096 x 1024 0.558 / 0.574 -> 0.507 / 0.519 ms, 1024 x 4096 0.646 / 0.664 -> 0.586 / 0.609;
// f32 4096 x 1024 1.014 / 1.018 -> 0.947 / 0.959, 1024 x 4096 1.011 / 1.018 -> 0.964 / 0.982; 16384 x 256
// (64 chunks of 256 before) within the noise; the backward level. A chunk need not fit the L2: its one walk
// reads it from memory anyway, and only the rare second walk of a channel that fails the check (part 3)
// reads it again. Like row_chunks, this depends on the sizes only, so the bits do not depend on the thread
// count; and with at most 16 chunks each group (chunk_groups) is one chunk.
inline RowChunks bn_chunks(int64_t N, int64_t C, int64_t S, bool wide) {
  RowChunks chunks = row_chunks(N, C * S);
  int64_t grain = std::max(chunks.grain, (N + kChunkGroups - 1) / kChunkGroups);
  if (S == 1 && wide) grain = std::max(grain, std::min<int64_t>(N, 128));
  chunks.grain = std::max<int64_t>(grain, 1);
  chunks.count = (N + chunks.grain - 1) / chunks.grain;
  return chunks;
}
}  // namespace ng::norms
#endif

#if HWY_ONCE
namespace ng::norms {

// A channel whose statistics overflowed (|x| past ~1e19: the fast path's float squares; past ~1e154: the
// reference's double ones): its mean, biased var and rstd again, from its values scaled by a power of two
// (wide_stats.h). var may still be inf, for f64 values whose variance has no double; rstd is right either
// way. Returns false, and changes nothing, when the channel holds a NaN or an inf.
template <typename T>
bool batch_norm_channel_scaled(const T* x, int64_t N, int64_t C, int64_t S, int64_t c, double eps,
                               double& mean, double& var, double& rs) {
  auto get = [&](int64_t i) { return load_acc<double>(x[((i / S) * C + c) * S + i % S]); };
  ScaledMoments m;
  if (!scaled_moments(get, N * S, true, m)) return false;
  mean = m.mean / m.scale;
  var = m.var / (m.scale * m.scale);
  rs = m.scale / std::sqrt(m.var + eps * m.scale * m.scale);
  return true;
}

// ---- 2. The scalar reference loop -------------------------------------------------------------------------
// The reference computes the statistics in double (it is the tests' oracle). Channel c's values are
// x[(n * C + c) * S + s]. mean_in, var_in: use these (eval) instead of the batch's.
// x, y: (N, C, S); w, b: (C) or null; mean, var: (C) f64 out; rstd: (C) out.
template <typename T, typename A>
void batch_norm_forward_reference(const T* x, const A* w, const A* b, T* y, const double* mean_in,
                                  const double* var_in, double* mean, double* var, A* rstd, int64_t N,
                                  int64_t C, int64_t S, double eps) {
  const int64_t M = N * S;
  for (int64_t c = 0; c < C; ++c) {
    auto index = [&](int64_t i) { return ((i / S) * C + c) * S + i % S; };  // i-th value of channel c
    auto get = [&](int64_t i) { return load_acc<double>(x[index(i)]); };
    if (mean_in) {
      mean[c] = mean_in[c];
      var[c] = var_in[c];
    } else {
      double shift, d;
      norm_math::centered_moments<double>(get, M, shift, d, var[c]);
      mean[c] = shift + d;
    }
    double rs = norm_math::rstd_from_var(var[c], eps);
    if (!mean_in && (rstd_unusable(rs) || !std::isfinite(mean[c])))
      batch_norm_channel_scaled(x, N, C, S, c, eps, mean[c], var[c], rs);
    rstd[c] = A(rs);
    for (int64_t i = 0; i < M; ++i) {
      const double xhat = (get(i) - mean[c]) * rs;
      y[index(i)] = store_acc<T>(xhat * (w ? double(w[c]) : 1.0) + (b ? double(b[c]) : 0.0));
    }
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// ---- 3. The fast kernel -----------------------------------------------------------------------------------
//
// A channel's values are spread over the whole tensor, so (unlike LayerNorm) they cannot sit in cache while
// we make three passes. Plan, with x read twice from memory in training and once in eval:
//   statistics: fixed chunks of samples (bn_chunks: ~32K values, at most 16 chunks). Per chunk and channel
//               shifted sums (count, mean, M2), checked; the chunks are merged in chunk order with Chan's
//               formula, in double:  delta = mean_b - mean_a,  mean += delta * n_b / n,
//                                    M2 = M2_a + M2_b + delta^2 * n_a * n_b / n.
//   output:     per channel three constants: sc_c = rstd_c * w_c, mean_hi_c = the f64 mean rounded to a
//               float, and b0_c = b_c - (mean_c - mean_hi_c) * sc_c (in double, rounded once):
//               y = fma(x - mean_hi_c, sc_c, b0_c)
//               (= ((x - mean_hi_c) - mean_lo_c) * sc_c + b_c with the low part of the mean folded into the
//               shift, so a channel with mean 1e4 and std 1e-2 is centred exactly.)
// Two layouts: S == 1 ((N, C) input): vectors run ACROSS channels, per-channel constants are loaded as
// vectors; S > 1: vectors run along each (n, c) segment of S positions, constants are broadcast.
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// sum over p[0 .. len) of f(v) for vectors v of p (tail lanes masked out)
template <class D, typename T, class F>
HWY_INLINE hn::TFromD<D> SumSegment(D d, const T* HWY_RESTRICT p, int64_t len, const F& f) {
  const int64_t L = int64_t(hn::Lanes(d));
  auto acc = hn::Zero(d);
  int64_t i = 0;
  for (; i + L <= len; i += L) acc = hn::Add(acc, f(LoadAs(d, p + i)));
  if (i < len) {
    const size_t rest = size_t(len - i);
    acc = hn::Add(acc, hn::IfThenElseZero(hn::FirstN(d, rest), f(Tail<D, T>(p + i, rest).load(d))));
  }
  return ReduceSum(d, acc);
}

// s1 += sum over p[0 .. len) of (v - K), s2 += the same of (v - K)^2 (tail lanes masked out): the shifted
// sums of one segment of a feature map, in one walk.
template <class D, typename T>
HWY_INLINE void ShiftedSegmentSums(D d, const T* HWY_RESTRICT p, int64_t len, hn::TFromD<D> K,
                                   hn::TFromD<D>& s1, hn::TFromD<D>& s2) {
  const int64_t L = int64_t(hn::Lanes(d));
  const auto vK = hn::Set(d, K);
  auto a1 = hn::Zero(d), a2 = hn::Zero(d);
  int64_t i = 0;
  for (; i + L <= len; i += L) {
    const auto t = hn::Sub(LoadAs(d, p + i), vK);
    a1 = hn::Add(a1, t);
    a2 = hn::MulAdd(t, t, a2);
  }
  if (i < len) {
    const size_t rest = size_t(len - i);
    const auto t = hn::IfThenElseZero(hn::FirstN(d, rest), hn::Sub(Tail<D, T>(p + i, rest).load(d), vK));
    a1 = hn::Add(a1, t);
    a2 = hn::MulAdd(t, t, a2);
  }
  s1 += ReduceSum(d, a1);
  s2 += ReduceSum(d, a2);
}

// R consecutive samples of an (N, stride) input, channels [0, C) from row (the first sample's) on:
//   acc[c] += (f(x_0c) + f(x_1c)) + (f(x_2c) + f(x_3c))   (R = 4; R = 2: f(x_0c) + f(x_1c); R = 1: f(x_0c))
// for every channel c, vectors across channels. f(v, c, cnt) gets the vector of channels [c, c + cnt).
// More than one sample per walk loads and stores acc (and whatever f loads) once for R vectors of x.
template <int R, class D, typename T, class F>
HWY_INLINE void AccumulateAcross(D d, const T* HWY_RESTRICT row, int64_t stride, int64_t C,
                                 hn::TFromD<D>* HWY_RESTRICT acc, const F& f) {
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t c_main = C - C % L;
  auto sum_rows = [&](int64_t c, size_t cnt) {
    auto v = [&](int k) { return f(LoadAsN(d, row + k * stride + c, cnt), c, cnt); };
    if constexpr (R == 4) return hn::Add(hn::Add(v(0), v(1)), hn::Add(v(2), v(3)));
    if constexpr (R == 2) return hn::Add(v(0), v(1));
    if constexpr (R == 1) return v(0);
  };
  for (int64_t c = 0; c < c_main; c += L)
    hn::StoreU(hn::Add(hn::LoadU(d, acc + c), sum_rows(c, size_t(L))), d, acc + c);
  if (c_main < C) {
    const size_t rest = size_t(C - c_main);
    StoreTailA(d, hn::Add(LoadTailA(d, acc + c_main, rest), sum_rows(c_main, rest)), acc + c_main, rest);
  }
}

// Samples [n0, n1) of an (N, stride) input, channels [0, C) from x on: four at a time, then one by one.
template <class D, typename T, class F>
HWY_INLINE void AccumulateSamples(D d, const T* HWY_RESTRICT x, int64_t n0, int64_t n1, int64_t stride,
                                  int64_t C, hn::TFromD<D>* HWY_RESTRICT acc, const F& f) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) AccumulateAcross<4>(d, x + n * stride, stride, C, acc, f);
  for (; n < n1; ++n) AccumulateAcross<1>(d, x + n * stride, stride, C, acc, f);
}

// The tree every statistics walk adds R samples' vectors in: (v0 + v1) + (v2 + v3), or v0.
template <int R, class V>
HWY_INLINE V Tree(const V* v) {
  static_assert(R == 4 || R == 1);
  if constexpr (R == 4) return hn::Add(hn::Add(v[0], v[1]), hn::Add(v[2], v[3]));
  return v[0];
}

// R consecutive samples of an (N, stride) input, channels [0, C) from row on, shifted by K:
//   s1[c] += tree(x_kc - K_c),  s2[c] += tree((x_kc - K_c)^2)      (the statistics' pass A, below)
// `ahead` (or null): the next R samples' row, asked for line by line, in step with this walk (see below).
template <int R, class D, typename T>
HWY_INLINE void ShiftedSumsAcross(D d, const T* HWY_RESTRICT row, int64_t stride, int64_t C,
                                  const hn::TFromD<D>* HWY_RESTRICT K, hn::TFromD<D>* HWY_RESTRICT s1,
                                  hn::TFromD<D>* HWY_RESTRICT s2, const T* ahead = nullptr) {
  const int64_t L = int64_t(hn::Lanes(d));
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));  // values per cache line
  for (int64_t c = 0; c < C; c += L) {
    if (ahead && c % kLine == 0)
      for (int k = 0; k < R; ++k) hwy::Prefetch(ahead + k * stride + c);
    const size_t cnt = size_t(std::min(L, C - c));
    const auto vK = LoadAN(d, K + c, cnt);
    hn::Vec<D> t[R], sq[R];
    for (int k = 0; k < R; ++k) {
      t[k] = hn::Sub(LoadAsN(d, row + k * stride + c, cnt), vK);
      sq[k] = hn::Mul(t[k], t[k]);
    }
    StoreAN(d, hn::Add(LoadAN(d, s1 + c, cnt), Tree<R>(t)), s1 + c, cnt);
    StoreAN(d, hn::Add(LoadAN(d, s2 + c, cnt), Tree<R>(sq)), s2 + c, cnt);
  }
}

// From a chunk's shifted sums s1 = sum (x - K), s2 = sum (x - K)^2 of `count` values: dmean = s1 / count and
// m2 = s2 - s1 * dmean. Returns the lanes whose m2 cannot be trusted: count * dmean^2 > 4 m2 (more than two
// bits lost to the cancellation), or m2 negative, infinite or NaN.
template <class D, class V = hn::Vec<D>>
HWY_INLINE hn::Mask<D> ShiftedMoments(D d, V s1, V s2, V count, V& dmean, V& m2) {
  dmean = hn::Div(s1, count);
  m2 = hn::NegMulAdd(s1, dmean, s2);
  const auto trusted = hn::And(hn::Le(hn::Mul(s1, dmean), hn::Mul(hn::Set(d, hn::TFromD<D>(4)), m2)),
                               hn::Lt(m2, hn::Set(d, std::numeric_limits<hn::TFromD<D>>::infinity())));
  return hn::Not(trusted);
}

// ShiftedMoments for channels [c0, c1) of the sums s1, s2, into dmean and m2; returns whether any channel
// failed the check.
template <class D, typename A = hn::TFromD<D>>
HWY_INLINE bool ChannelMoments(D d, const A* HWY_RESTRICT s1, const A* HWY_RESTRICT s2, int64_t c0,
                               int64_t c1, hn::Vec<D> vcount, A* HWY_RESTRICT dmean, A* HWY_RESTRICT m2) {
  const int64_t L = int64_t(hn::Lanes(d));
  bool any_bad = false;
  for (int64_t c = c0; c < c1; c += L) {
    const size_t cnt = size_t(std::min(L, c1 - c));
    hn::Vec<D> vdm, vm2;
    any_bad |= !hn::AllFalse(
        d, hn::And(hn::FirstN(d, cnt),
                   ShiftedMoments(d, LoadAN(d, s1 + c, cnt), LoadAN(d, s2 + c, cnt), vcount, vdm, vm2)));
    StoreAN(d, vdm, dmean + c, cnt);
    StoreAN(d, vm2, m2 + c, cnt);
  }
  return any_bad;
}

// After pass B: m2[c] = centred[c] for the channels [0, C) that fail the check; the others keep their
// one-walk M2.
template <class D, typename A = hn::TFromD<D>>
HWY_INLINE void TakeCentredWhereBad(D d, const A* HWY_RESTRICT s1, const A* HWY_RESTRICT s2,
                                    const A* HWY_RESTRICT centred, int64_t C, hn::Vec<D> vcount,
                                    A* HWY_RESTRICT m2) {
  const int64_t L = int64_t(hn::Lanes(d));
  for (int64_t c = 0; c < C; c += L) {
    const size_t cnt = size_t(std::min(L, C - c));
    hn::Vec<D> vdm, vm2;
    const auto bad = ShiftedMoments(d, LoadAN(d, s1 + c, cnt), LoadAN(d, s2 + c, cnt), vcount, vdm, vm2);
    StoreAN(d, hn::IfThenElse(bad, LoadAN(d, centred + c, cnt), vm2), m2 + c, cnt);
  }
}

// Statistics of samples [n0, n1): per channel, out_mean[c] and out_m2[c] = sum (x - out_mean[c])^2 (double).
template <typename T>
void BatchNormMomentsChunk(const T* HWY_RESTRICT x, int64_t n0, int64_t n1, int64_t C, int64_t S,
                           double* HWY_RESTRICT out_mean, double* HWY_RESTRICT out_m2) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const A count = A((n1 - n0) * S);
  std::vector<A> K(static_cast<size_t>(C));

  if (S == 1) {
    // Vectors across channels. Per channel c, one walk over the chunk from memory (pass A), with a shift:
    //   K_c  = the mean of the chunk's first m = min(8, samples) samples
    //   pass A: s1_c = sum_n (x_nc - K_c),  s2_c = sum_n (x_nc - K_c)^2
    //           dmean_c = s1_c / count,     m2_c = s2_c - s1_c * dmean_c      (mean = K_c + dmean_c)
    // and a check, as in LayerNorm's statistics (layer_norm.cpp, part 3): s2 - s1 * dmean cancels in
    // proportion to dmean^2 / var, how far K sits from the chunk's mean in units of its spread. When
    // count * dmean^2 > 4 * m2 (more than two bits lost: an outlier among the first samples, sorted data), or
    // the sums are not finite, that channel's M2 is taken again the centred way from the chunk, still in the
    // cache (pass B):  m2_c = sum_n ((x_nc - K_c) - dmean_c)^2.
    // K averages 8 samples so that the check almost never fails on ordinary data: dmean is then the
    // difference of two sample means, dmean^2 / var ~ chi^2(1) / 8, past 4 about once in 10^8 channels.
    // (Until 2026-11-26 every chunk took both passes, K the first sample. One walk instead of two: measured
    // in docs/performance.md, "stop 24".) Whether pass B runs never changes another channel's bits.
    //
    // Channels in blocks of kBlock vectors whose shift and sums stay in registers while the block's column of
    // the chunk is walked. The same operations in the same order per channel as the loop over whole rows
    // below (which does the channels left over), so the same bits (as long as the compiler fuses no multiply
    // into an add: this file is built with -ffp-contract=off, see CMakeLists.txt; test
    // BatchNorm.RegisterBlocksGiveTheBitsOfTheWholeRowLoop). Why: that loop keeps K and the sums in
    // arrays, so each vector of x costs loads and stores besides its own load, and at C = 4096 the arrays (64
    // KiB) no longer fit the L1: the statistics took longer than the output pass. But walking a chunk
    // column-block by column-block reads its rows as many short streams (32 rows of 4 KiB at C = 1024),
    // which the hardware prefetchers follow worse than whole rows: measured (1 thread, AMD Zen 4, forward
    // f32, A/B) 5.8 -> 4.7 ms at 1024 x 4096, but 3.2 -> 3.5-3.9 ms at 4096 x 1024 and 2.4-2.8 -> 2.9-3.3
    // ms at 16384 x 256. So the blocks are used only where four arrays would not fit half of a 32 KiB L1
    // (C > 1024 in f32).
    //
    // f16/bf16 rows of up to 8192 values keep the whole-row loop past that: their blocks' columns are half as
    // wide in bytes (128 B per row at kBlock = 4), and reading whole rows gains more than the arrays cost
    // from the L2. Measured (Xeon model 167, 2 threads, bf16, the statistics' time = a training forward less
    // an eval one, best of 200): 1024 x 4096 0.32-0.33 -> 0.27-0.28 ms, 512 x 8192 0.31-0.32 -> 0.27-0.29,
    // 2048 x 2048 0.25 -> 0.24; but 256 x 16384 0.21-0.22 -> 0.28-0.29, so wider rows keep the blocks. f32
    // keeps the blocks at 1024 x 4096 (0.34 -> 0.42 ms the other way). Same bits either way.
    constexpr int64_t kBlock = 4;
    const bool arrays_fit_l1 = !bn_stats_wide(C, sizeof(A)) || (sizeof(T) < sizeof(A) && C <= 8192);
    const int64_t L = int64_t(hn::Lanes(d));
    const int64_t m = std::min<int64_t>(n1 - n0, 8);
    const auto vm = hn::Set(d, A(m)), vcount = hn::Set(d, count);
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(A);
    HWY_ALIGN A k_out[kBlock * kMaxLanes], dmean_out[kBlock * kMaxLanes], m2_out[kBlock * kMaxLanes];
    int64_t cb = 0;
    for (; !arrays_fit_l1 && cb + kBlock * L <= C; cb += kBlock * L) {
      hn::Vec<D> vK[kBlock], vs1[kBlock], vs2[kBlock];
      for (int64_t j = 0; j < kBlock; ++j) vK[j] = vs1[j] = vs2[j] = hn::Zero(d);
      // Samples [n0, e) four at a time, then one by one, in the same trees as AccumulateSamples:
      // f(j, vectors of R samples) adds them into block j's sums.
      auto walk = [&](int64_t e, const auto& f) {
        int64_t n = n0;
        for (; n + 4 <= e; n += 4)
          for (int64_t j = 0; j < kBlock; ++j) {
            const T* HWY_RESTRICT p = x + n * C + cb + j * L;
            const hn::Vec<D> v[4] = {LoadAs(d, p), LoadAs(d, p + C), LoadAs(d, p + 2 * C),
                                     LoadAs(d, p + 3 * C)};
            f.template operator()<4>(j, v);
          }
        for (; n < e; ++n)
          for (int64_t j = 0; j < kBlock; ++j) {
            const hn::Vec<D> v[1] = {LoadAs(d, x + n * C + cb + j * L)};
            f.template operator()<1>(j, v);
          }
      };
      walk(n0 + m, [&]<int R>(int64_t j, const hn::Vec<D>* v) { vK[j] = hn::Add(vK[j], Tree<R>(v)); });
      for (int64_t j = 0; j < kBlock; ++j) vK[j] = hn::Div(vK[j], vm);
      // pass A
      walk(n1, [&]<int R>(int64_t j, const hn::Vec<D>* v) {
        hn::Vec<D> t[R], sq[R];
        for (int k = 0; k < R; ++k) t[k] = hn::Sub(v[k], vK[j]), sq[k] = hn::Mul(t[k], t[k]);
        vs1[j] = hn::Add(vs1[j], Tree<R>(t));
        vs2[j] = hn::Add(vs2[j], Tree<R>(sq));
      });
      hn::Vec<D> vdm[kBlock], vm2[kBlock];
      hn::Mask<D> bad[kBlock];
      bool any_bad = false;
      for (int64_t j = 0; j < kBlock; ++j) {
        bad[j] = ShiftedMoments(d, vs1[j], vs2[j], vcount, vdm[j], vm2[j]);
        any_bad |= !hn::AllFalse(d, bad[j]);
      }
      if (any_bad) {  // pass B for the block; the channels that passed the check keep their one-walk M2
        hn::Vec<D> vc[kBlock];
        for (int64_t j = 0; j < kBlock; ++j) vc[j] = hn::Zero(d);
        walk(n1, [&]<int R>(int64_t j, const hn::Vec<D>* v) {
          hn::Vec<D> sq[R];
          for (int k = 0; k < R; ++k) {
            const auto t = hn::Sub(hn::Sub(v[k], vK[j]), vdm[j]);
            sq[k] = hn::Mul(t, t);
          }
          vc[j] = hn::Add(vc[j], Tree<R>(sq));
        });
        for (int64_t j = 0; j < kBlock; ++j) vm2[j] = hn::IfThenElse(bad[j], vc[j], vm2[j]);
      }
      for (int64_t j = 0; j < kBlock; ++j) {
        hn::Store(vK[j], d, k_out + j * L);
        hn::Store(vdm[j], d, dmean_out + j * L);
        hn::Store(vm2[j], d, m2_out + j * L);
      }
      for (int64_t i = 0; i < kBlock * L; ++i) {  // mean = K + dmean, added in double as below
        out_mean[cb + i] = double(k_out[i]) + double(dmean_out[i]);
        out_m2[cb + i] = double(m2_out[i]);
      }
    }
    if (cb == C) return;

    // The channels left over, [cb, C): whole-row loops over arrays, in column blocks of at most kArrayCols
    // channels walked one after the other, so that a block's three arrays (K, s1, s2: 24 KiB in f32) stay in
    // the L1 beside x. Each channel gets the same operations either way (the same bits). At 1024 x 4096 in
    // bf16 the three arrays of whole rows (48 KiB) came from the L2 for every four samples; in two blocks
    // of 4 KiB rows (which also ask ahead, below) the statistics region of the forward went from 0.26-0.29
    // to 0.24-0.25 ms (Xeon model 167, 2 threads, mean of 1000 calls; blocks of 512 channels were slower,
    // of 1024 level), and the forward 0.597 / 0.619 -> 0.581 / 0.593 ms (best / median, `scripts/bench_ab.py
    // --rounds 6`).
    const int64_t Cr = C - cb;
    const size_t nr = static_cast<size_t>(Cr);
    std::vector<A> s1(nr, A(0)), s2(nr, A(0)), dmean(nr), m2(nr);
    constexpr int64_t kArrayCols = 2048;
    bool any_bad = false;
    for (int64_t c0 = 0; c0 < Cr; c0 += kArrayCols) {
      const int64_t w = std::min(kArrayCols, Cr - c0);
      const T* HWY_RESTRICT xb = x + cb + c0;
      A* HWY_RESTRICT Kb = K.data() + c0;
      AccumulateSamples(d, xb, n0, n0 + m, C, w, Kb, [&](hn::Vec<D> v, int64_t, size_t) { return v; });
      for (int64_t c = 0; c < w; ++c) Kb[c] = Kb[c] / A(m);
      // pass A
      // Four samples per walk are four streams, each of one row; on rows of a few KiB the hardware
      // prefetchers start them anew every four samples and the walk waits on memory at each start. So rows
      // (of a block) of at most kAskAheadRowBytes ask for the next four samples during the walk. Measured
      // (Xeon model 167, 2 threads): a standalone copy of this walk over 4096 x 1024 bf16 took 0.198 ms
      // against 0.153 for a plain read of x, and 0.153 asking ahead (16384 x 256: 0.198 -> 0.164); at 1024 x
      // 4096 (8 KiB rows, before the column blocks) asking made it slower, 0.180 -> 0.199, and f32 rows of
      // 1-4 KiB already ran at the read's speed. In the forward (`scripts/bench_ab.py --filter batch_norm
      // --rounds 4`, best): bf16 4096 x 1024 0.585 -> 0.565 ms, 16384 x 256 0.537 -> 0.494; f32 level.
      // (Prefetches only: the same bits.)
      constexpr int64_t kAskAheadRowBytes = 4096;
      const bool ask_ahead = w * int64_t(sizeof(T)) <= kAskAheadRowBytes;
      int64_t n = n0;
      for (; n + 4 <= n1; n += 4)
        ShiftedSumsAcross<4>(d, xb + n * C, C, w, Kb, s1.data() + c0, s2.data() + c0,
                             ask_ahead && n + 8 <= n1 ? xb + (n + 4) * C : nullptr);
      for (; n < n1; ++n) ShiftedSumsAcross<1>(d, xb + n * C, C, w, Kb, s1.data() + c0, s2.data() + c0);
      any_bad |= ChannelMoments(d, s1.data(), s2.data(), c0, c0 + w, vcount, dmean.data(), m2.data());
    }
    if (any_bad) {  // pass B; the channels that passed the check keep their one-walk M2
      std::vector<A> centred(nr, A(0));
      AccumulateSamples(d, x + cb, n0, n1, C, Cr, centred.data(), [&](hn::Vec<D> v, int64_t c, size_t cnt) {
        const auto t = hn::Sub(hn::Sub(v, LoadAN(d, K.data() + c, cnt)), LoadAN(d, dmean.data() + c, cnt));
        return hn::Mul(t, t);
      });
      TakeCentredWhereBad(d, s1.data(), s2.data(), centred.data(), Cr, vcount, m2.data());
    }
    for (int64_t c = 0; c < Cr; ++c) {
      out_mean[cb + c] = double(K[c]) + double(dmean[c]);
      out_m2[cb + c] = double(m2[c]);
    }
    return;
  }

  // S > 1 (a feature map): segment by segment, one walk of shifted sums with the check, as above. K_c is the
  // mean of the first min(8, S) values of channel c's first segment in the chunk, and a channel that fails
  // the check takes its M2 again the centred way (pass B). Until stop 36 every chunk took both walks, with
  // K_c the first value alone; at (16, 256, 32, 32) in f32 (2 threads) the forward took 1.13 ms, its
  // statistics ~0.43 of them (`perf`) where a read of x takes ~0.28. Measured (Xeon model 167, 2 threads, a
  // driver, best of 300, two runs, the two builds in turns), forward: (16, 256, 32, 32) f32 1.10-1.11 ->
  // 0.97 ms, bf16 0.62-0.63 -> 0.54-0.55; (32, 64, 56, 56) f32 1.88-1.90 -> 1.57-1.61, bf16 0.92-0.93 ->
  // 0.75-0.76; (128, 128, 8, 8) f32 0.27-0.28 -> 0.24-0.25.
  // BatchNorm.ShiftedStatisticsOnFeatureMapsAreChecked fails without pass B.
  const int64_t m = std::min<int64_t>(S, 8);
  std::vector<A> s1(static_cast<size_t>(C), A(0)), s2(s1.size(), A(0)), dmean(s1.size()), m2(s1.size());
  for (int64_t c = 0; c < C; ++c)
    K[c] = SumSegment(d, x + (n0 * C + c) * S, m, [](hn::Vec<D> v) { return v; }) / A(m);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = 0; c < C; ++c) ShiftedSegmentSums(d, x + (n * C + c) * S, S, K[c], s1[c], s2[c]);
  const auto vcount = hn::Set(d, count);
  // pass B where a channel fails the check; the channels that pass it keep their one-walk M2
  if (ChannelMoments(d, s1.data(), s2.data(), 0, C, vcount, dmean.data(), m2.data())) {
    std::vector<A> centred(s1.size(), A(0));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const auto vK = hn::Set(d, K[c]), vd = hn::Set(d, dmean[c]);
        centred[c] += SumSegment(d, x + (n * C + c) * S, S, [&](hn::Vec<D> v) {
          const auto t = hn::Sub(hn::Sub(v, vK), vd);
          return hn::Mul(t, t);
        });
      }
    TakeCentredWhereBad(d, s1.data(), s2.data(), centred.data(), C, vcount, m2.data());
  }
  for (int64_t c = 0; c < C; ++c) {
    out_mean[c] = double(K[c]) + double(dmean[c]);
    out_m2[c] = double(m2[c]);
  }
}

// y = fma(x - mh_c, sc_c, b0_c) for samples [n0, n1).
template <typename T>
void BatchNormApplyRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n0, int64_t n1, int64_t C,
                        int64_t S, const AccT<T>* HWY_RESTRICT mh, const AccT<T>* HWY_RESTRICT sc,
                        const AccT<T>* HWY_RESTRICT b) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  if (S == 1) {
    // R samples from n per walk over the channels: each per-channel constant loaded serves R vectors.
    const int64_t c_main = C - C % L;
    auto rows = [&]<int R>(int64_t n) {
      auto block = [&](int64_t c, size_t cnt) {
        const auto vmh = LoadAN(d, mh + c, cnt), vsc = LoadAN(d, sc + c, cnt), vb = LoadAN(d, b + c, cnt);
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + c;
          StoreAsN(d, hn::MulAdd(hn::Sub(LoadAsN(d, x + off, cnt), vmh), vsc, vb), y + off, cnt);
        }
      };
      for (int64_t c = 0; c < c_main; c += L) block(c, size_t(L));
      if (c_main < C) block(c_main, size_t(C - c_main));
    };
    // The four arrays are reloaded for every walk. While they fit half the L1 that is cheap; wider (64 KiB at
    // C = 4096 in f32) they come from the L2 each time, and one sample per walk measured (1 thread, AMD Zen
    // 4, eval forward = this loop alone) 2.1-2.5 ms at 1024 x 4096 against 1.1 ms at 4096 x 1024.
    const bool wide = bn_stats_wide(C, sizeof(A));
    int64_t n = n0;
    if (wide) {
      for (; n + 4 <= n1; n += 4) rows.template operator()<4>(n);
      for (; n + 2 <= n1; n += 2) rows.template operator()<2>(n);
    }
    for (; n < n1; ++n) rows.template operator()<1>(n);
    return;
  }
  const int64_t s_main = S - S % L;
  const size_t s_rest = size_t(S - s_main);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* HWY_RESTRICT xs = x + (n * C + c) * S;
      T* HWY_RESTRICT ys = y + (n * C + c) * S;
      const auto vmh = hn::Set(d, mh[c]), vsc = hn::Set(d, sc[c]), vb = hn::Set(d, b[c]);
      for (int64_t s = 0; s < s_main; s += L)
        StoreAs(d, hn::MulAdd(hn::Sub(LoadAs(d, xs + s), vmh), vsc, vb), ys + s);
      if (s_rest) {
        Tail<D, T> out(s_rest);
        out.store(d, hn::MulAdd(hn::Sub(Tail<D, T>(xs + s_main, s_rest).load(d), vmh), vsc, vb), ys + s_main);
      }
    }
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

// ---- 4. The backward --------------------------------------------------------------------------------------
//
// Channel c, its M values x_i (i runs over n and s), r = rstd_c, xhat_i = (x_i - mean) r,
// y_i = xhat_i w + b, and g_i = dL/dxhat_i = dy_i * w (w = weight_c, one number for the whole channel).
//
//   dbias_c   = sum_i dy_i              dweight_c = sum_i dy_i * xhat_i
//
// EVAL: mean and r are the running statistics, constants. y is affine in x:  dx_i = g_i * r.
//
// TRAINING: mean and var depend on every x_i of the channel. The step-by-step chain rule, as it appears in
// many published implementations (the computational-graph derivation):
//   dvar  = sum_i g_i (x_i - mean) * (-1/2) (var + eps)^(-3/2)
//   dmean = sum_i g_i * (-r)  +  dvar * (-2/M) sum_i (x_i - mean)
//   dx_i  = g_i r  +  dvar * 2 (x_i - mean) / M  +  dmean / M
// The second part of dmean is ZERO, because sum_i (x_i - mean) = 0 by the definition of the mean: that is
// the "mean term" that some codes drop. It does NOT make the mean's influence on dx vanish: dmean keeps its
// first part, -r sum_i g_i, and every x_i receives dmean / M. Dropping it (treating the mean as a constant)
// gives a wrong gradient, and gradcheck catches it (tests/test_norms_batch_norm.cpp).
//
// Substituting, with dvar * 2 (x_i - mean) / M = -r xhat_i (1/M) sum_j g_j xhat_j:
//
//   dx_i = r * ( g_i  -  (1/M) sum_j g_j  -  xhat_i (1/M) sum_j g_j xhat_j )
//
// which is LayerNorm's formula over the channel (norm_math::centered_norm_dx). As coded, with
// mean_dy = dbias_c / M and mean_dyx = dweight_c / M, and the weight folded in:
//
//   dx_i = dy_i * (r w)  +  (-r w mean_dy)  +  xhat_i * (-r w mean_dyx)
//          term 1           term 2              term 3
//   term 1: the direct path; term 2: through the mean; term 3: through the variance. Eval: term 1 only.

// Reference (double sums per channel). mean: (C) f64; rstd: (C); w: (C) or null.
template <typename T, typename A>
void batch_norm_backward_reference(const T* dy, const T* x, const A* w, const double* mean, const A* rstd,
                                   T* dx, A* dw, A* db, int64_t N, int64_t C, int64_t S, bool batch_stats) {
  const int64_t M = N * S;
  for (int64_t c = 0; c < C; ++c) {
    auto index = [&](int64_t i) { return ((i / S) * C + c) * S + i % S; };
    const double rs = double(rstd[c]), wc = w ? double(w[c]) : 1.0;
    auto xhat = [&](int64_t i) { return (load_acc<double>(x[index(i)]) - mean[c]) * rs; };
    auto dyv = [&](int64_t i) { return load_acc<double>(dy[index(i)]); };
    double sum_dy = 0, sum_dyx = 0;
    for (int64_t i = 0; i < M; ++i) {
      sum_dy += dyv(i);
      sum_dyx += dyv(i) * xhat(i);
    }
    if (dw) dw[c] = A(sum_dyx);
    if (db) db[c] = A(sum_dy);
    if (!dx) continue;
    for (int64_t i = 0; i < M; ++i) {
      const double g = dyv(i) * wc;
      const double v = batch_stats ? norm_math::centered_norm_dx(g, xhat(i), rs, wc * sum_dy / double(M),
                                                                 wc * sum_dyx / double(M))
                                   : g * rs;  // eval: term 1 only
      dx[index(i)] = store_acc<T>(v);
    }
  }
}

}  // namespace ng::norms
#endif  // HWY_ONCE

// The fast backward:
//   sums: per fixed chunk of samples, per channel sum dy and sum dy * xhat (partials, summed in chunk order)
//   dx:   dx = dy * k1 + xhat * k3 + k2  with k1 = r w, k2 = -r w mean_dy, k3 = -r w mean_dyx (eval: k2 = k3
//   =
//         0), and xhat = ((x - mh) - ml) * r (mean = mh + ml, split as in the forward). Folded per channel
//         into four constants (in double, then rounded once):
//           kx = r * k3,   k0 = k2 - ml * kx:    dx = fma(dy, k1, fma(x - mh, kx, k0))
//         (x - mh) * kx + k0 = ((x - mh) - ml) * r * k3 + k2, so this is the formula above with one rounding
//         per constant in place of the subtraction of ml and the product by r. Why: at C = 4096 the dx pass
//         reloads its per-channel arrays from the L2 for every sample; four arrays instead of six, and three
//         vector operations instead of five. Measured in docs/performance.md ("stop 24").
HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// Samples [n0, n1): sdy[c] = sum dy, sdyx[c] = sum dy * xhat (A), xhat = ((x - mh) - ml) * rs.
template <typename T>
void BatchNormBackwardSumsRows(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, int64_t n0, int64_t n1,
                               int64_t C, int64_t S, const AccT<T>* HWY_RESTRICT mh,
                               const AccT<T>* HWY_RESTRICT ml, const AccT<T>* HWY_RESTRICT rs,
                               AccT<T>* HWY_RESTRICT sdy, AccT<T>* HWY_RESTRICT sdyx) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  if (S == 1) {
    // Wide rows (the five per-channel arrays would overflow the L1): channels in register blocks, as in
    // BatchNormMomentsChunk, each block's column of the chunk walked once, its mean, rstd and both sums in
    // registers. The same operations in the same order per channel, so the same bits (-ffp-contract=off, as
    // above). The whole backward (these sums, then dx) at 1024 x 4096 f32 on AMD Zen 4, A/B in alternating
    // runs: 6.3-6.9 -> 6.0-6.4 ms on 1 thread, 3.2-3.7 -> 3.1-3.2 ms on 2.
    //
    // f16/bf16 rows of up to 8192 channels keep the whole-row loop (below) instead, in column blocks, as the
    // forward's statistics do (BatchNormMomentsChunk): their register blocks read 128-byte columns of each
    // row. Measured (Xeon model 167, 2 threads, the whole bf16 backward, best / median of 500, the two builds
    // in turns): 1024 x 4096 0.93-0.96 / 0.97-1.00 -> 0.86-0.87 / 0.90-0.92 ms, 512 x 8192 0.97 / 1.01-1.02
    // -> 0.88-0.90 / 0.93, 2048 x 2048 0.90 / 0.95 -> 0.84 / 0.86-0.88. The same bits.
    constexpr int64_t kBlock = 4;
    int64_t cb = 0;
    if (bn_sums_wide(C, sizeof(A)) && !(sizeof(T) < sizeof(A) && C <= 8192)) {
      for (; cb + kBlock * L <= C; cb += kBlock * L) {
        hn::Vec<D> vmh[kBlock], vml[kBlock], vrs[kBlock], a_dy[kBlock], a_dyx[kBlock];
        for (int64_t j = 0; j < kBlock; ++j) {
          const int64_t c = cb + j * L;
          vmh[j] = hn::LoadU(d, mh + c);
          vml[j] = hn::LoadU(d, ml + c);
          vrs[j] = hn::LoadU(d, rs + c);
          a_dy[j] = hn::LoadU(d, sdy + c);
          a_dyx[j] = hn::LoadU(d, sdyx + c);
        }
        for (int64_t n = n0; n < n1; ++n) {
          const T* HWY_RESTRICT xr = x + n * C + cb;
          const T* HWY_RESTRICT dyr = dy + n * C + cb;
          for (int64_t j = 0; j < kBlock; ++j) {
            const auto dyv = LoadAs(d, dyr + j * L);
            const auto xhat = hn::Mul(hn::Sub(hn::Sub(LoadAs(d, xr + j * L), vmh[j]), vml[j]), vrs[j]);
            a_dy[j] = hn::Add(a_dy[j], dyv);
            a_dyx[j] = hn::MulAdd(dyv, xhat, a_dyx[j]);
          }
        }
        for (int64_t j = 0; j < kBlock; ++j) {
          hn::StoreU(a_dy[j], d, sdy + cb + j * L);
          hn::StoreU(a_dyx[j], d, sdyx + cb + j * L);
        }
      }
    }
    // The channels left over (all of them for narrower rows): row by row over the arrays, four samples per
    // walk over the channels where there are four. Each channel's sums take the samples' terms one by one,
    // in order, as the row-by-row loop below does (the same bits); the walk loads the per-channel arrays
    // once for four samples instead of once for each. Measured (Xeon model 167, 2 threads, bf16, the sums
    // alone, best of 300): 4096 x 1024 0.362 -> 0.339 ms, 16384 x 256 0.340 -> 0.318; f32 level (it reads at
    // the speed of a plain read already). Asking for the next four samples as the statistics do (above) added
    // at most 0.01 ms there, and cost f32 as much, so it does not.
    const int64_t c_main = C - C % L;
    const size_t c_rest = size_t(C - c_main);
    // the last c_rest channels of one sample (zero-padded dy: the padding adds nothing)
    auto tail = [&](const T* HWY_RESTRICT xr, const T* HWY_RESTRICT dyr) {
      const auto dyv = Tail<D, T>(dyr + c_main, c_rest).load(d);
      const auto xv = Tail<D, T>(xr + c_main, c_rest).load(d);
      const auto xhat =
          hn::Mul(hn::Sub(hn::Sub(xv, LoadTailA(d, mh + c_main, c_rest)), LoadTailA(d, ml + c_main, c_rest)),
                  LoadTailA(d, rs + c_main, c_rest));
      StoreTailA(d, hn::Add(LoadTailA(d, sdy + c_main, c_rest), dyv), sdy + c_main, c_rest);
      StoreTailA(d, hn::MulAdd(dyv, xhat, LoadTailA(d, sdyx + c_main, c_rest)), sdyx + c_main, c_rest);
    };
    // Column blocks of at most kSumCols channels, walked one after the other, so that a block's five arrays
    // (20 KiB in f32) stay in the L1; then the last c_rest channels.
    constexpr int64_t kSumCols = 1024;
    for (int64_t c0 = cb; c0 < c_main; c0 += kSumCols) {
      const int64_t c1 = std::min(c_main, c0 + kSumCols);
      int64_t n = n0;
      for (; n + 4 <= n1; n += 4) {
        const T* HWY_RESTRICT xr = x + n * C;
        const T* HWY_RESTRICT dyr = dy + n * C;
        for (int64_t c = c0; c < c1; c += L) {
          const auto vmh = hn::LoadU(d, mh + c), vml = hn::LoadU(d, ml + c), vrs = hn::LoadU(d, rs + c);
          auto a_dy = hn::LoadU(d, sdy + c), a_dyx = hn::LoadU(d, sdyx + c);
          for (int64_t k = 0; k < 4; ++k) {
            const auto dyv = LoadAs(d, dyr + k * C + c);
            const auto xhat = hn::Mul(hn::Sub(hn::Sub(LoadAs(d, xr + k * C + c), vmh), vml), vrs);
            a_dy = hn::Add(a_dy, dyv);
            a_dyx = hn::MulAdd(dyv, xhat, a_dyx);
          }
          hn::StoreU(a_dy, d, sdy + c);
          hn::StoreU(a_dyx, d, sdyx + c);
        }
      }
      for (; n < n1; ++n) {
        const T* HWY_RESTRICT xr = x + n * C;
        const T* HWY_RESTRICT dyr = dy + n * C;
        for (int64_t c = c0; c < c1; c += L) {
          const auto dyv = LoadAs(d, dyr + c);
          const auto xhat =
              hn::Mul(hn::Sub(hn::Sub(LoadAs(d, xr + c), hn::LoadU(d, mh + c)), hn::LoadU(d, ml + c)),
                      hn::LoadU(d, rs + c));
          hn::StoreU(hn::Add(hn::LoadU(d, sdy + c), dyv), d, sdy + c);
          hn::StoreU(hn::MulAdd(dyv, xhat, hn::LoadU(d, sdyx + c)), d, sdyx + c);
        }
      }
    }
    if (c_rest)
      for (int64_t n = n0; n < n1; ++n) tail(x + n * C, dy + n * C);
    return;
  }
  const int64_t s_main = S - S % L;
  const size_t s_rest = size_t(S - s_main);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* HWY_RESTRICT xs = x + (n * C + c) * S;
      const T* HWY_RESTRICT dys = dy + (n * C + c) * S;
      const auto vmh = hn::Set(d, mh[c]), vml = hn::Set(d, ml[c]), vrs = hn::Set(d, rs[c]);
      auto a_dy = hn::Zero(d), a_dyx = hn::Zero(d);
      for (int64_t s = 0; s < s_main; s += L) {
        const auto dyv = LoadAs(d, dys + s);
        a_dy = hn::Add(a_dy, dyv);
        a_dyx = hn::MulAdd(dyv, hn::Mul(hn::Sub(hn::Sub(LoadAs(d, xs + s), vmh), vml), vrs), a_dyx);
      }
      if (s_rest) {
        const auto dyv = Tail<D, T>(dys + s_main, s_rest).load(d);
        const auto xv = Tail<D, T>(xs + s_main, s_rest).load(d);
        a_dy = hn::Add(a_dy, dyv);
        a_dyx = hn::MulAdd(dyv, hn::Mul(hn::Sub(hn::Sub(xv, vmh), vml), vrs), a_dyx);
      }
      sdy[c] += ReduceSum(d, a_dy);
      sdyx[c] += ReduceSum(d, a_dyx);
    }
}

// Samples [n0, n1): dx = dy * k1 + (xhat * k3 + k2), xhat = ((x - mh) - ml) * rs.
template <typename T>
void BatchNormBackwardDxRows(const T* HWY_RESTRICT dy, const T* HWY_RESTRICT x, T* HWY_RESTRICT dx,
                             int64_t n0, int64_t n1, int64_t C, int64_t S, const AccT<T>* HWY_RESTRICT mh,
                             const AccT<T>* HWY_RESTRICT k1, const AccT<T>* HWY_RESTRICT kx,
                             const AccT<T>* HWY_RESTRICT k0) {
  using A = AccT<T>;
  using D = hn::ScalableTag<A>;
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  // term 1 + (terms 3 and 2, folded: see above)
  auto dx_of = [&](hn::Vec<D> dyv, hn::Vec<D> xv, hn::Vec<D> vmh, hn::Vec<D> vk1, hn::Vec<D> vkx,
                   hn::Vec<D> vk0) { return hn::MulAdd(dyv, vk1, hn::MulAdd(hn::Sub(xv, vmh), vkx, vk0)); };
  if (S == 1) {
    // R samples from n per walk over the channels, each per-channel constant loaded once for R vectors (as
    // in BatchNormApplyRows; here four arrays).
    const int64_t c_main = C - C % L;
    auto rows = [&]<int R>(int64_t n) {
      auto block = [&](int64_t c, size_t cnt) {
        auto get = [&](const A* p) { return LoadAN(d, p + c, cnt); };
        const auto vmh = get(mh), vk1 = get(k1), vkx = get(kx), vk0 = get(k0);
        for (int k = 0; k < R; ++k) {
          const int64_t off = (n + k) * C + c;
          StoreAsN(d, dx_of(LoadAsN(d, dy + off, cnt), LoadAsN(d, x + off, cnt), vmh, vk1, vkx, vk0),
                   dx + off, cnt);
        }
      };
      for (int64_t c = 0; c < c_main; c += L) block(c, size_t(L));
      if (c_main < C) block(c_main, size_t(C - c_main));
    };
    const bool wide = bn_dx_wide(C, sizeof(A), sizeof(T));
    int64_t n = n0;
    if (wide) {
      for (; n + 4 <= n1; n += 4) rows.template operator()<4>(n);
      for (; n + 2 <= n1; n += 2) rows.template operator()<2>(n);
    }
    const size_t c_rest = size_t(C - c_main);
    for (; n < n1; ++n) {  // one sample per walk
      const T* HWY_RESTRICT xr = x + n * C;
      const T* HWY_RESTRICT dyr = dy + n * C;
      T* HWY_RESTRICT dxr = dx + n * C;
      for (int64_t c = 0; c < c_main; c += L)
        StoreAs(d,
                dx_of(LoadAs(d, dyr + c), LoadAs(d, xr + c), hn::LoadU(d, mh + c), hn::LoadU(d, k1 + c),
                      hn::LoadU(d, kx + c), hn::LoadU(d, k0 + c)),
                dxr + c);
      if (c_rest) {
        const size_t r = c_rest;
        const int64_t c = c_main;
        Tail<D, T> out(r);
        out.store(
            d,
            dx_of(Tail<D, T>(dyr + c, r).load(d), Tail<D, T>(xr + c, r).load(d), LoadTailA(d, mh + c, r),
                  LoadTailA(d, k1 + c, r), LoadTailA(d, kx + c, r), LoadTailA(d, k0 + c, r)),
            dxr + c);
      }
    }
    return;
  }
  const int64_t s_main = S - S % L;
  const size_t s_rest = size_t(S - s_main);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t off = (n * C + c) * S;
      const auto vmh = hn::Set(d, mh[c]), vk1 = hn::Set(d, k1[c]), vkx = hn::Set(d, kx[c]),
                 vk0 = hn::Set(d, k0[c]);
      for (int64_t s = 0; s < s_main; s += L)
        StoreAs(d, dx_of(LoadAs(d, dy + off + s), LoadAs(d, x + off + s), vmh, vk1, vkx, vk0), dx + off + s);
      if (s_rest) {
        Tail<D, T> out(s_rest);
        out.store(d,
                  dx_of(Tail<D, T>(dy + off + s_main, s_rest).load(d),
                        Tail<D, T>(x + off + s_main, s_rest).load(d), vmh, vk1, vkx, vk0),
                  dx + off + s_main);
      }
    }
}

#define NG_BATCH_NORM_INSTANCES(NAME, T)                                                                  \
  void BatchNormMoments##NAME(const T* x, int64_t n0, int64_t n1, int64_t C, int64_t S, double* mean,     \
                              double* m2) {                                                               \
    BatchNormMomentsChunk<T>(x, n0, n1, C, S, mean, m2);                                                  \
  }                                                                                                       \
  void BatchNormApply##NAME(const T* x, T* y, int64_t n0, int64_t n1, int64_t C, int64_t S,               \
                            const AccT<T>* mh, const AccT<T>* sc, const AccT<T>* b) {                     \
    BatchNormApplyRows<T>(x, y, n0, n1, C, S, mh, sc, b);                                                 \
  }                                                                                                       \
  void BatchNormBackwardSums##NAME(const T* dy, const T* x, int64_t n0, int64_t n1, int64_t C, int64_t S, \
                                   const AccT<T>* mh, const AccT<T>* ml, const AccT<T>* rs, AccT<T>* sdy, \
                                   AccT<T>* sdyx) {                                                       \
    BatchNormBackwardSumsRows<T>(dy, x, n0, n1, C, S, mh, ml, rs, sdy, sdyx);                             \
  }                                                                                                       \
  void BatchNormBackwardDx##NAME(const T* dy, const T* x, T* dx, int64_t n0, int64_t n1, int64_t C,       \
                                 int64_t S, const AccT<T>* mh, const AccT<T>* k1, const AccT<T>* kx,      \
                                 const AccT<T>* k0) {                                                     \
    BatchNormBackwardDxRows<T>(dy, x, dx, n0, n1, C, S, mh, k1, kx, k0);                                  \
  }
NG_BATCH_NORM_INSTANCES(F32, float)
NG_BATCH_NORM_INSTANCES(F64, double)
NG_BATCH_NORM_INSTANCES(F16, hwy::float16_t)
NG_BATCH_NORM_INSTANCES(BF16, hwy::bfloat16_t)
#undef NG_BATCH_NORM_INSTANCES

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "nn/norms/norm_dispatch.h"

namespace ng::norms {

HWY_EXPORT(BatchNormMomentsF32);
HWY_EXPORT(BatchNormMomentsF64);
HWY_EXPORT(BatchNormMomentsF16);
HWY_EXPORT(BatchNormMomentsBF16);
HWY_EXPORT(BatchNormApplyF32);
HWY_EXPORT(BatchNormApplyF64);
HWY_EXPORT(BatchNormApplyF16);
HWY_EXPORT(BatchNormApplyBF16);
HWY_EXPORT(BatchNormBackwardSumsF32);
HWY_EXPORT(BatchNormBackwardSumsF64);
HWY_EXPORT(BatchNormBackwardSumsF16);
HWY_EXPORT(BatchNormBackwardSumsBF16);
HWY_EXPORT(BatchNormBackwardDxF32);
HWY_EXPORT(BatchNormBackwardDxF64);
HWY_EXPORT(BatchNormBackwardDxF16);
HWY_EXPORT(BatchNormBackwardDxBF16);

namespace {

// The f64 mean split into hi + lo in the compute type (lo = 0 for double).
template <typename A>
void split_mean(const double* mean, int64_t C, std::vector<A>& hi, std::vector<A>& lo) {
  hi.resize(static_cast<size_t>(C));
  lo.resize(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    hi[c] = A(mean[c]);
    lo[c] = A(mean[c] - double(hi[c]));
  }
}

}  // namespace

// Chan et al.: fold the moments of nb more values (per channel mean mb, M2 m2b) into those of na values
// (mu, m2), in place. frac = nb / (na + nb), corr = na * nb / (na + nb), the same for every channel.
static void chan_merge(double* mu, double* m2, const double* mb, const double* m2b, int64_t C, double frac,
                       double corr) {
  for (int64_t c = 0; c < C; ++c) {
    const double delta = mb[c] - mu[c];
    mu[c] += delta * frac;
    m2[c] += m2b[c] + delta * delta * corr;
  }
}

NormStats batch_norm_forward(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                             const Tensor& bias, const Tensor& mean_in, const Tensor& var_in, double eps,
                             Impl impl) {
  NG_CHECK(x.is_contiguous(), "batch_norm_forward", "expected a contiguous x");
  const DType acc = compute_dtype(x.dtype());
  NormStats s;
  s.y = empty(x.shape(), x.dtype());
  s.mean = empty({C}, DType::f64);
  s.var = empty({C}, DType::f64);
  s.rstd = empty({C}, acc);
  double* mean = s.mean.data<double>();
  double* var = s.var.data<double>();
  const double* pmean_in = mean_in.defined() ? mean_in.data<double>() : nullptr;
  const double* pvar_in = var_in.defined() ? var_in.data<double>() : nullptr;
  if (x.numel() == 0) return s;
  dispatch_storage(x.dtype(), "batch_norm", [&]<typename T, typename A>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* py = static_cast<T*>(s.y.raw_data());
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data<A>() : nullptr;
    A* prstd = s.rstd.data<A>();
    if (impl == Impl::reference) {
      batch_norm_forward_reference<T, A>(px, pw, pb, py, pmean_in, pvar_in, mean, var, prstd, N, C, S, eps);
      return;
    }
    const RowChunks chunks = bn_chunks(N, C, S, bn_stats_wide(C, sizeof(A)));

    // Per channel, from its mean and var: rstd, and the output's three constants, y = fma(x - hi, scale, b0):
    //   scale = rstd * w,  hi = the mean rounded to the compute type,  b0 = b - (mean - hi) * scale
    // That is ((x - hi) - lo) * scale + b with lo = mean - hi, the low part of the mean folded into the
    // shift (in double, rounded once). A channel with mean 1e4 and std 1e-2 is still centred exactly: x - hi
    // is exact there (Sterbenz), and lo, up to half an ulp of 1e4 (5e-4), reaches y through b0 alone
    // (BatchNorm.HostileChannels fails without it). Why: one subtraction and one array fewer per vector of
    // x; the bf16 output in the L2 (eval, 256 x 1024, 1 thread) 0.118 -> 0.106 ns per value. Measured in
    // the forward (Xeon model 167, 2 threads, `scripts/bench_ab.py --rounds 5`, best / median): bf16 4096 x
    // 1024 0.514 / 0.527 -> 0.462 / 0.508 ms, 16384 x 256 0.493 / 0.511 -> 0.448 / 0.492, 1024 x 4096
    // level; f32 level (its output pass runs at the copy's speed).
    //
    // A channel whose statistics overflowed (wide_stats.h) takes its rstd from batch_norm_channel_scaled
    // (wide_rs[c] > 0): its var may have no double.
    std::vector<A> hi(static_cast<size_t>(C)), scale(hi.size()), shift(hi.size());
    std::vector<double> wide_rs;
    std::vector<int64_t> far_channels;  // (below)
    auto finish = [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double rs = !wide_rs.empty() && wide_rs[c] > 0 ? wide_rs[c] : 1.0 / std::sqrt(var[c] + eps);
        const double sc = rs * (pw ? double(pw[c]) : 1.0);
        prstd[c] = A(rs);
        scale[c] = A(sc);
        hi[c] = A(mean[c]);
        shift[c] = A((pb ? double(pb[c]) : 0.0) - (mean[c] - double(hi[c])) * sc);
      }
    };

    // statistics: the given ones, or per-chunk moments merged in chunk order (Chan et al.)
    if (pmean_in) {
      std::copy(pmean_in, pmean_in + C, mean);
      std::copy(pvar_in, pvar_in + C, var);
      parallel_for(C, 512, finish);
    } else {
      // Per chunk (at most kChunkGroups of them, bn_chunks) the moments (mean, M2) of its values, each in
      // its own row; the rows are then merged in chunk order, per channel in parallel blocks, and each block
      // finished there. The chunks and the order of the merge depend on the sizes only, so the bits do not
      // depend on the thread count.
      const auto cmean = std::make_unique_for_overwrite<double[]>(size_t(chunks.count * C));
      const auto cm2 = std::make_unique_for_overwrite<double[]>(size_t(chunks.count * C));
      parallel_for(chunks.count, 1, [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k)
          NG_NORM_SIMD_CALL(T, BatchNormMoments, hwy_ptr(px), k * chunks.grain,
                            std::min(N, (k + 1) * chunks.grain), C, S, cmean.get() + k * C,
                            cm2.get() + k * C);
      });
      std::vector<double> frac(static_cast<size_t>(chunks.count)), corr(frac.size());
      double count = 0;
      for (int64_t k = 0; k < chunks.count; ++k) {
        const double nb = double((std::min(N, (k + 1) * chunks.grain) - k * chunks.grain) * S);
        frac[k] = nb / (count + nb);
        corr[k] = count * nb / (count + nb);
        count += nb;
      }
      wide_rs.assign(static_cast<size_t>(C), 0.0);
      // A channel whose values lie so far apart that x - mean can pass the compute type's largest value
      // (float: finite x near +-3e38 of both signs) would get +-inf from the output pass below, though its
      // y is O(1). Its largest |x - mean| is at most sqrt(M2) = sqrt(var * count); such a channel's output
      // is written again in double after that pass (as the reference loop does it). Batch statistics
      // only: with given (running) statistics x - running_mean is not bounded by them, and a running
      // mean near -+3e38 can still give inf there. (For f64 x the double pass is the same arithmetic.)
      const double far_limit = double(std::numeric_limits<A>::max()) / 2;
      std::vector<char> far(static_cast<size_t>(C), 0);
      parallel_for(C, 512, [&](int64_t c0, int64_t c1) {
        std::vector<double> mu(static_cast<size_t>(c1 - c0), 0.0), m2(mu.size(), 0.0);
        for (int64_t k = 0; k < chunks.count; ++k)
          chan_merge(mu.data(), m2.data(), cmean.get() + k * C + c0, cm2.get() + k * C + c0, c1 - c0, frac[k],
                     corr[k]);
        for (int64_t c = 0; c < c1 - c0; ++c) {
          mean[c0 + c] = mu[c];
          var[c0 + c] = m2[c] / count;
        }
        for (int64_t c = c0; c < c1; ++c) {
          if (!std::isfinite(mean[c]) || !std::isfinite(var[c]))  // rstd would be 0 or NaN
            batch_norm_channel_scaled(px, N, C, S, c, eps, mean[c], var[c], wide_rs[c]);
          far[c] = std::sqrt(var[c]) * std::sqrt(count) > far_limit;
        }
        finish(c0, c1);
      });
      far_channels.clear();
      for (int64_t c = 0; c < C; ++c)
        if (far[c]) far_channels.push_back(c);
    }

    // output: y = fma(x - hi, scale, b0)
    parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(C * S, 1)), [&](int64_t n0, int64_t n1) {
      NG_NORM_SIMD_CALL(T, BatchNormApply, hwy_ptr(px), hwy_ptr(py), n0, n1, C, S, hi.data(), scale.data(),
                        shift.data());
    });
    // the far channels (above), again: y = (x - mean) * rstd * w + b in double
    for (const int64_t c : far_channels) {
      const double rs = wide_rs[c] > 0 ? wide_rs[c] : 1.0 / std::sqrt(var[c] + eps);
      const double w = pw ? double(pw[c]) : 1.0, b = pb ? double(pb[c]) : 0.0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = (n * C + c) * S; i < (n * C + c + 1) * S; ++i)
          py[i] = store_acc<T>(A((load_acc<double>(px[i]) - mean[c]) * rs * w + b));
    }
  });
  return s;
}

NormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, int64_t N, int64_t C, int64_t S, bool batch_stats,
                              bool need_dx, bool need_dweight, bool need_dbias, Impl impl) {
  NG_CHECK(x.is_contiguous() && dy.is_contiguous(), "batch_norm_backward", "expected contiguous x and dy");
  NG_CHECK(dy.dtype() == x.dtype() && dy.shape() == x.shape(), "batch_norm_backward", "dy ",
           shape_str(dy.shape()), " ", dtype_name(dy.dtype()), " does not match x ", shape_str(x.shape()),
           " ", dtype_name(x.dtype()));
  const DType acc = compute_dtype(x.dtype());
  NormGrads gr;
  if (need_dx) gr.dx = empty(x.shape(), x.dtype());
  if (need_dweight) gr.dweight = zeros({C}, acc);
  if (need_dbias) gr.dbias = zeros({C}, acc);
  if (x.numel() == 0) return gr;
  const double M = double(N * S);
  dispatch_storage(x.dtype(), "batch_norm", [&]<typename T, typename A>() {
    const T* pdy = static_cast<const T*>(dy.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    T* pdx = need_dx ? static_cast<T*>(gr.dx.raw_data()) : nullptr;
    A* pdw = need_dweight ? gr.dweight.data<A>() : nullptr;
    A* pdb = need_dbias ? gr.dbias.data<A>() : nullptr;
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    const A* prs = rstd.data<A>();
    if (impl == Impl::reference) {
      batch_norm_backward_reference<T, A>(pdy, px, pw, mean.data<double>(), prs, pdx, pdw, pdb, N, C, S,
                                          batch_stats);
      return;
    }
    std::vector<A> hi, lo;
    split_mean(mean.data<double>(), C, hi, lo);

    // 1. per-channel sums (needed for dweight, dbias, and the training dx), fixed chunks, ordered reduction
    const bool need_sums = need_dweight || need_dbias || (need_dx && batch_stats);
    std::vector<A> sdy(static_cast<size_t>(C), A(0)), sdyx(static_cast<size_t>(C), A(0));
    if (need_sums) {
      const RowChunks chunks = bn_chunks(N, C, S, bn_sums_wide(C, sizeof(A)));
      sum_over_chunks(chunks, N, C, sdy.data(), sdyx.data(),
                      [&](int64_t n0, int64_t n1, A* part_dy, A* part_dyx) {
                        NG_NORM_SIMD_CALL(T, BatchNormBackwardSums, hwy_ptr(pdy), hwy_ptr(px), n0, n1, C, S,
                                          hi.data(), lo.data(), prs, part_dy, part_dyx);
                      });
      if (pdw) std::copy(sdyx.begin(), sdyx.end(), pdw);
      if (pdb) std::copy(sdy.begin(), sdy.end(), pdb);
    }
    if (!pdx) return;

    // 2. dx = dy * k1 + xhat * k3 + k2, as dx = fma(dy, k1, fma(x - mean_hi, kx, k0)) (section 4, the fast
    //    backward)
    std::vector<A> k1(static_cast<size_t>(C)), kx(static_cast<size_t>(C)), k0(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const A rw = prs[c] * (pw ? pw[c] : A(1));
      const A k2 = batch_stats ? A(-rw * sdy[c] / A(M)) : A(0);   // term 2: through the mean
      const A k3 = batch_stats ? A(-rw * sdyx[c] / A(M)) : A(0);  // term 3: through the variance
      k1[c] = rw;                                                 // term 1
      kx[c] = A(double(prs[c]) * double(k3));
      k0[c] = A(double(k2) - double(lo[c]) * double(kx[c]));
    }
    parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(C * S, 1)), [&](int64_t n0, int64_t n1) {
      NG_NORM_SIMD_CALL(T, BatchNormBackwardDx, hwy_ptr(pdy), hwy_ptr(px), hwy_ptr(pdx), n0, n1, C, S,
                        hi.data(), k1.data(), kx.data(), k0.data());
    });

    // 3. A channel whose rstd^2 has no normal A (rstd below ~1e-19 in float, ~1e-154 in double: its values
    //    run past ~1e19 or ~1e154, the channels of wide_stats.h) loses term 3 in kx = r * k3, which is
    //    ~r^2 (subnormal, then 0). Its dx again, xhat first as the reference computes it, in double:
    //      dx = dy * k1 + (xhat * k3 + k2),   xhat = ((x - mh) - ml) * r
    if (!batch_stats) return;
    for (int64_t c = 0; c < C; ++c) {
      const double r = double(prs[c]);
      if (!(r * r < double(std::numeric_limits<A>::min()))) continue;
      const double rw = r * (pw ? double(pw[c]) : 1.0);
      const double k2 = -rw * double(sdy[c]) / M, k3 = -rw * double(sdyx[c]) / M;
      for (int64_t i = 0; i < N * S; ++i) {
        const int64_t at = ((i / S) * C + c) * S + i % S;
        const double xhat = ((load_acc<double>(px[at]) - double(hi[c])) - double(lo[c])) * r;
        pdx[at] = store_acc<T>(A(load_acc<double>(pdy[at]) * rw + (xhat * k3 + k2)));
      }
    }
  });
  return gr;
}

// running = (1 - factor) * running + factor * batch, in place (no autograd), in double, stored in running's
// dtype.
static void blend_into(Tensor& running, const std::vector<double>& batch, double factor) {
  std::vector<double> old = running.to_vector<double>();
  for (size_t c = 0; c < old.size(); ++c) old[c] = (1.0 - factor) * old[c] + factor * batch[c];
  running.copy_(from_vector(old, running.shape(), DType::f64));
}

void update_running_stats_per_instance(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                                       double factor, const char* op) {
  const int64_t N = x.size(0), C = x.size(1);
  int64_t S = 1;  // from the spatial dims themselves: numel / (N C) was 0 for N = 0
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  NG_CHECK(N > 0, op,
           "expected at least one sample to update the running statistics when training, got input of shape ",
           shape_str(x.shape()));
  NG_CHECK(S > 1, op, "expected more than 1 spatial element per channel when training, got input of shape ",
           shape_str(x.shape()));
  std::vector<double> v = x.to_vector<double>(), mean_avg(static_cast<size_t>(C), 0.0),
                      var_avg(static_cast<size_t>(C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double* p = v.data() + (n * C + c) * S;
      double shift, d, var;
      norm_math::centered_moments<double>([&](int64_t i) { return p[i]; }, S, shift, d, var);
      mean_avg[c] += (shift + d) / double(N);
      var_avg[c] += var * double(S) / double(S - 1) / double(N);  // unbiased, as PyTorch
    }
  blend_into(running_mean, mean_avg, factor);
  blend_into(running_var, var_avg, factor);
}

}  // namespace ng::norms

// ---- 5. The autograd op -----------------------------------------------------------------------------------
namespace ng::F {

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, std::optional<double> momentum,
                  double eps, const Tensor& num_batches_tracked) {
  const char* op = "batch_norm";
  norms::check_float_input(x, op);
  norms::check_eps(eps, x, op);
  norms::check_momentum(momentum, op);
  NG_CHECK(x.dim() >= 2, op, "expected x of shape (N, C) or (N, C, *), got a ", x.dim(), "-D tensor ",
           shape_str(x.shape()));
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = N * C > 0 ? x.numel() / (N * C) : 0;
  const Shape cshape{C};
  norms::check_affine(weight, "weight", cshape, x, "the channel dimension", op);
  norms::check_affine(bias, "bias", cshape, x, "the channel dimension", op);
  norms::check_affine_dtype(weight, "weight", x, op);
  norms::check_affine_dtype(bias, "bias", x, op);
  norms::check_affine(running_mean, "running_mean", cshape, x, "the channel dimension", op);
  norms::check_affine(running_var, "running_var", cshape, x, "the channel dimension", op);
  // The dispatch table has no BatchNorm entry (the CUDA backend's is ng::cuda::batch_norm): mixed devices are
  // an error naming both, and a device x is refused here rather than read as host memory.
  if (on_device({x, weight, bias, running_mean, running_var}, op)) check_cpu(x, op);
  NG_CHECK(running_mean.defined() == running_var.defined(), op,
           "expected both running_mean and running_var, or neither, got ",
           running_mean.defined() ? "running_mean without running_var" : "running_var without running_mean");
  NG_CHECK(training || running_mean.defined(), op,
           "eval mode (training = false) normalizes with running_mean and running_var, but none were given");
  const int64_t M = N * S;
  NG_CHECK(!training || M > 1, op,
           "expected more than 1 value per channel when training, got input of shape ", shape_str(x.shape()),
           " (", M, " value(s) per channel)");

  // x: (N, C, S) once contiguous; weight, bias: (C) in the compute dtype; statistics in f64.
  const DType acc = compute_dtype(x.dtype());
  Tensor xc = x.detach().contiguous();
  Tensor wc = norms::contiguous_as(weight, acc);
  Tensor bc = norms::contiguous_as(bias, acc);
  Tensor mean_in, var_in;
  if (!training) {
    mean_in = norms::contiguous_as(running_mean, DType::f64);
    var_in = norms::contiguous_as(running_var, DType::f64);
    // Eval divides by sqrt(running_var + eps): a negative or NaN variance (a hand-edited or diverged
    // state) gave NaN outputs without a word. C values: nothing next to the pass over x.
    const double* rm = mean_in.data<double>();
    const double* rv = var_in.data<double>();
    for (int64_t c = 0; c < C; ++c) {
      NG_CHECK(std::isfinite(rm[c]), op, "running_mean[", c, "] is ", rm[c], ": expected a finite mean");
      NG_CHECK(rv[c] + eps > 0 && std::isfinite(rv[c]), op, "running_var[", c, "] is ", rv[c],
               ": expected a finite variance >= 0 (eval mode divides by sqrt(running_var + eps))");
    }
  }
  norms::NormStats fwd = norms::batch_norm_forward(xc, N, C, S, wc, bc, mean_in, var_in, eps);
  Tensor y = fwd.y;

  if (training && running_mean.defined()) {
    double factor;
    if (momentum) {
      factor = *momentum;
    } else {
      NG_CHECK(num_batches_tracked.defined() && num_batches_tracked.numel() == 1, op,
               "momentum = none (cumulative average) needs num_batches_tracked, one count, got ",
               num_batches_tracked.defined() ? "shape " + shape_str(num_batches_tracked.shape()) : "none");
      NG_CHECK(
          num_batches_tracked.item() >= 1, op,
          "momentum = none (cumulative average) needs num_batches_tracked >= 1 (counting this batch), got ",
          num_batches_tracked.item());
      factor = 1.0 / num_batches_tracked.item();
    }
    std::vector<double> bmean = fwd.mean.to_vector<double>(), bvar = fwd.var.to_vector<double>();
    for (double& v : bvar) v *= double(M) / double(M - 1);  // unbiased (Bessel) for the running estimate
    Tensor rm = running_mean, rv = running_var;
    norms::blend_into(rm, bmean, factor);
    norms::blend_into(rv, bvar, factor);
  }

  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc;
    const DType b_dtype = bias.defined() ? bias.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "BatchNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor dy = dout.to(x_dtype).contiguous();
      norms::NormGrads g =
          norms::batch_norm_backward(dy, sx.unpack(), smean.unpack(), srstd.unpack(), sw.unpack(), N, C, S,
                                     training, need_dx, need_dw, need_db);
      return {g.dx, norms::grad_like(g.dweight, w_dtype, cshape), norms::grad_like(g.dbias, b_dtype, cshape)};
    });
  }
  return y;
}

}  // namespace ng::F

// ---- 6. The modules ---------------------------------------------------------------------------------------
namespace ng::nn {

BatchNorm::BatchNorm(int64_t num_features_in, double eps_in, std::optional<double> momentum_in,
                     bool affine_in, bool track, const char* name)
    : num_features(num_features_in),
      eps(eps_in),
      momentum(momentum_in),
      affine(affine_in),
      track_running_stats(track),
      name_(name) {
  NG_CHECK(num_features > 0, name, "expected num_features > 0, got ", num_features);
  norms::check_eps(eps, name);
  norms::check_momentum(momentum, name);
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

Tensor BatchNorm::forward(const Tensor& x) {
  check_input(x);
  NG_CHECK(x.size(1) == num_features, name_, "expected ", num_features, " channels (dim 1), got x ",
           shape_str(x.shape()));
  // As PyTorch: batch statistics in training, or whenever there are no running statistics.
  const bool use_batch_stats = is_training() || !track_running_stats;
  std::optional<double> factor = momentum;
  const bool counts = is_training() && track_running_stats;
  // A count below 0 (a hand-edited or corrupt state) made the cumulative factor 1 / batches leave [0, 1],
  // and F::batch_norm then spoke of a momentum the user never set.
  NG_CHECK(!counts || num_batches_tracked.item() >= 0, name_, "num_batches_tracked is ",
           num_batches_tracked.item(), ", expected a count >= 0 (a corrupt state?)");
  const double batches = counts ? num_batches_tracked.item() + 1 : 0;  // this batch included
  if (counts && !momentum) factor = 1.0 / batches;                     // cumulative average
  const bool pass_running = track_running_stats && (is_training() || !use_batch_stats);
  Tensor y = F::batch_norm(x, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(),
                           weight, bias, use_batch_stats, factor.value_or(0.0), eps);
  // Counted once the batch has gone through: a refused one (one value per channel) left the count at 1.
  if (counts) num_batches_tracked.fill_(batches);
  return y;
}

void BatchNorm1d::check_input(const Tensor& x) const {
  NG_CHECK(x.dim() == 2 || x.dim() == 3, name_, "expected a 2-D (N, C) or 3-D (N, C, L) input, got ", x.dim(),
           "-D ", shape_str(x.shape()));
}

void BatchNorm2d::check_input(const Tensor& x) const {
  NG_CHECK(x.dim() == 4, name_, "expected a 4-D (N, C, H, W) input, got ", x.dim(), "-D ",
           shape_str(x.shape()));
}

}  // namespace ng::nn
#endif  // HWY_ONCE
