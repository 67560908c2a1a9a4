// Highway helpers shared by the norm kernels: load any storage type as a vector of the compute type, store
// it back (with round-to-nearest-even for f16/bf16: the exact conversions of tensor/kernels/half-inl.h), and
// handle the tail of a row.
//
// This is a per-target "-inl.h" header: each norm .cpp includes it inside its Highway pass, so it is compiled
// once per SIMD target. The toggle guard below is Highway's idiom for that (a plain #pragma once would
// include it only for the first target).
//
// Storage types: float, double, hwy::float16_t, hwy::bfloat16_t (the same bits as ng::f16 / ng::bf16).
// Compute type A: double for double, float for the rest.
#if defined(NG_NORM_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NG_NORM_SIMD_INL_H_
#undef NG_NORM_SIMD_INL_H_
#else
#define NG_NORM_SIMD_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "nn/norms/norm_common.h"
#include "tensor/kernels/half-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// For the kernels' large lambdas, which GCC may otherwise call out of line (each call behind a vzeroupper,
// and the values they share kept in memory instead of registers): measured in group_norm.cpp (20% slower)
// and in LayerNormOutputFused (layer_norm.cpp).
#ifndef NG_ALWAYS_INLINE
#define NG_ALWAYS_INLINE __attribute__((always_inline))
#endif

template <typename T>
using AccT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// v = x[0 .. Lanes) converted to A (exact).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadAs(D d, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    return hn::LoadU(d, p);
  } else {
    return ng::simd::HWY_NAMESPACE::LoadHalf(d, p);  // tensor/kernels/half-inl.h
  }
}

// x[0 .. Lanes) = v converted to T, rounding to nearest even.
template <class D, typename T>
HWY_INLINE void StoreAs(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    hn::StoreU(v, d, p);
  } else {
    ng::simd::HWY_NAMESPACE::StoreHalf(d, v, p);  // tensor/kernels/half-inl.h
  }
}

// x[0 .. 2 Lanes) = lo, hi converted to T (one instruction for both where the CPU has one: StoreHalf2).
template <class D, typename T>
HWY_INLINE void StoreAs2(D d, hn::Vec<D> lo, hn::Vec<D> hi, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    hn::StoreU(lo, d, p);
    hn::StoreU(hi, d, p + hn::Lanes(d));
  } else {
    ng::simd::HWY_NAMESPACE::StoreHalf2(d, lo, hi, p);  // tensor/kernels/half-inl.h
  }
}

// The tail of a row (fewer than Lanes elements): copy it into a zero-padded buffer, work on full vectors,
// copy the result back. Never reads or writes past the row, whatever the storage type.
template <class D, typename T>
struct Tail {
  static constexpr size_t kMax = HWY_MAX_BYTES / sizeof(hn::TFromD<D>);
  HWY_ALIGN T buf[kMax];
  size_t count;
  Tail(const T* HWY_RESTRICT p, size_t count_in) : count(count_in) {
    std::memset(buf, 0, sizeof(buf));
    std::memcpy(buf, p, count * sizeof(T));
  }
  // For an output tail: nothing to read, `count` elements will be written by store().
  explicit Tail(size_t count_in) : count(count_in) {}
  hn::Vec<D> load(D d) const { return LoadAs(d, buf); }
  void store(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
    StoreAs(d, v, buf);
    std::memcpy(p, buf, count * sizeof(T));
  }
};

// Zero-padded A-typed tail (weights, partial sums).
template <class D>
HWY_INLINE hn::Vec<D> LoadTailA(D d, const hn::TFromD<D>* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
  std::memcpy(buf, p, count * sizeof(hn::TFromD<D>));
  return hn::Load(d, buf);
}
template <class D>
HWY_INLINE void StoreTailA(D d, hn::Vec<D> v, hn::TFromD<D>* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, count * sizeof(hn::TFromD<D>));
}

// cnt (<= Lanes) elements at p, for loops whose last step may be a tail: a full vector when cnt == Lanes,
// else through a zero-padded buffer. LoadAsN: storage type T read as A; StoreAsN: A written as T;
// LoadAN: an A-typed array (weights, per-channel constants, partial sums).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadAsN(D d, const T* HWY_RESTRICT p, size_t cnt) {
  return cnt == hn::Lanes(d) ? LoadAs(d, p) : Tail<D, T>(p, cnt).load(d);
}
template <class D, typename T>
HWY_INLINE void StoreAsN(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t cnt) {
  if (cnt == hn::Lanes(d)) {
    StoreAs(d, v, p);
  } else {
    Tail<D, T> out(cnt);
    out.store(d, v, p);
  }
}
template <class D>
HWY_INLINE hn::Vec<D> LoadAN(D d, const hn::TFromD<D>* HWY_RESTRICT p, size_t cnt) {
  return cnt == hn::Lanes(d) ? hn::LoadU(d, p) : LoadTailA(d, p, cnt);
}
template <class D>
HWY_INLINE void StoreAN(D d, hn::Vec<D> v, hn::TFromD<D>* HWY_RESTRICT p, size_t cnt) {
  if (cnt == hn::Lanes(d)) {
    hn::StoreU(v, d, p);
  } else {
    StoreTailA(d, v, p, cnt);
  }
}

// StoreAs2, or where kInstruction (T bf16 on a CPU with AVX512-BF16: the caller checked kCpuHasAvx512Bf16)
// StoreBf16PairWithInstruction (half-inl.h): the instruction, and the rare rounding by hand as a call
// rather than code inlined after every store.
template <bool kInstruction, class D, typename T>
HWY_INLINE void StoreAs2With(D d, hn::Vec<D> lo, hn::Vec<D> hi, T* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
  if constexpr (kInstruction && std::is_same_v<T, hwy::bfloat16_t> && hn::MaxLanes(D()) == 16)
    return ng::simd::HWY_NAMESPACE::StoreBf16PairWithInstruction(d, lo, hi, p);
#endif
  StoreAs2(d, lo, hi, p);
}
// Whether kInstruction may be true for T on this target and CPU.
template <class D, typename T>
HWY_INLINE bool Bf16InstructionHere() {
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
  if constexpr (std::is_same_v<T, hwy::bfloat16_t> && hn::MaxLanes(D()) == 16)
    return ng::simd::HWY_NAMESPACE::kCpuHasAvx512Bf16;
#endif
  return false;
}

// The output pass of a group of kRows rows of n values starting at row r: out[(r + k) n + i, + count) =
// f(k, (r + k) n + i, w[i, + count) as a vector, count), for every k and every vector i of the row. Two
// vectors at a time, so that one StoreAs2 stores both (one instruction for bf16), then the last vector and
// the tail (count < Lanes, zero-padded). Used by RMSNorm's and LayerNorm's backward (dx).
// kInstruction: bf16 on a CPU with AVX512-BF16 (StoreRowsInPairs checked), stored by
// StoreBf16PairWithInstruction (half-inl.h), whose rare rounding by hand is a call rather than inlined code.
// Measured (Xeon model 167, 2 threads, scripts/bench_ab.py --rounds 5, best / median): LayerNorm bf16
// backward at 1024 x 4096 0.671 / 0.695 -> 0.606 / 0.608 ms, at 4096 x 1024 level (0.556 -> 0.569 / 0.569
// -> 0.571); RMSNorm's bf16 backward at 1024 x 4096 0.518 / 0.550 -> 0.546 / 0.557, at 4096 x 1024 0.467 /
// 0.500 -> 0.484 / 0.496, within the noise of a driver timing its kernel (0.213-0.240 against 0.225-0.241 ns
// per value in the L2, one thread).
template <int kRows, bool kInstruction, class D, typename T, class F>
HWY_INLINE void StoreRowsInPairsWith(D d, const hn::TFromD<D>* HWY_RESTRICT w, int64_t r, int64_t n,
                                     T* HWY_RESTRICT out, const F& f) {
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  int64_t i = 0;
  for (; i + 2 * L <= n_main; i += 2 * L) {
    const auto w0 = hn::LoadU(d, w + i), w1 = hn::LoadU(d, w + i + L);
    for (int k = 0; k < kRows; ++k) {
      const int64_t off = (r + k) * n + i;
      StoreAs2With<kInstruction>(d, f(k, off, w0, size_t(L)), f(k, off + L, w1, size_t(L)), out + off);
    }
  }
  for (; i < n; i += L) {
    const size_t count = std::min<size_t>(size_t(L), size_t(n - i));
    const auto wv = LoadAN(d, w + i, count);
    for (int k = 0; k < kRows; ++k)
      StoreAsN(d, f(k, (r + k) * n + i, wv, count), out + (r + k) * n + i, count);
  }
}
template <int kRows, class D, typename T, class F>
HWY_INLINE void StoreRowsInPairs(D d, const hn::TFromD<D>* HWY_RESTRICT w, int64_t r, int64_t n,
                                 T* HWY_RESTRICT out, const F& f) {
  if (Bf16InstructionHere<D, T>()) return StoreRowsInPairsWith<kRows, true>(d, w, r, n, out, f);
  StoreRowsInPairsWith<kRows, false>(d, w, r, n, out, f);
}

// Software prefetch one page ahead, for the pass that first reads a row from memory.
//
// Why: a row kernel reads the row once from L3/DRAM (pass 1) and then works on it in L1 (passes 2, 3), so the
// memory stream stops and restarts on every row, and the hardware prefetcher, which does not run across a
// 4 KiB page, restarts with it. perf showed ~70% of LayerNorm backward's samples (1024 x 4096) on pass 1's
// loads of x and dy; asking for the line 4 KiB ahead cut its time by 10-20% (A/B, 1 thread, 4096 x 1024 and
// 1024 x 4096). The same in LayerNorm's forward and in RMSNorm's passes measured no gain (RMSNorm backward at
// 16384 x 256 got slower), so only LayerNorm's backward uses it, and (since a run on AMD Zen 4, where it
// slowed short rows by up to 40%) only for rows of 8 KiB and more; see LayerNormBackwardRows. `end` bounds
// the prefetches to memory the caller owns (the end of its chunk of rows). GroupNorm's (N, C) batches ask
// kAhead elements ahead instead (2 KiB: ForwardLargeGroups says why).
template <typename T>
inline constexpr int64_t kPrefetchAhead = 4096 / int64_t(sizeof(T));
template <int64_t kAhead, typename T>
HWY_INLINE void PrefetchAhead(const T* p, const T* end) {
  if (end - p > kAhead) hwy::Prefetch(p + kAhead);  // (no pointer past the end)
}
template <typename T>
HWY_INLINE void PrefetchAhead(const T* p, const T* end) {
  PrefetchAhead<kPrefetchAhead<T>>(p, end);
}

// The short f16/bf16 rows of LayerNorm's and RMSNorm's forwards (their software-pipelined loops: row r + 1's
// statistics, then row r's output walk) ask for row r + 2 during row r's output walk, one prefetch per 64
// bytes written. The statistics pass is the one that reads a row from memory; with rows of 1-2 KiB it
// mostly waited for it, while the output walk, working from L1, left the memory idle. Measured (Intel Xeon
// VM, 2 threads, scripts/bench_ab.py --rounds 5, best ms, bf16): LayerNorm 4096 x 1024 0.378 -> 0.319,
// RMSNorm 0.328 -> 0.318 (1 thread, 8192 x 512: LayerNorm 0.848 -> 0.804, RMSNorm 0.718 -> 0.663). Rows of
// 512 bytes (16384 x 256) were 12% slower asking two rows ahead and level asking 4 KiB ahead, so rows
// shorter than kPrefetchRowMinBytes do not ask. (Tried and dropped: the same for the four-row groups of
// 8 KiB rows, 1024 x 4096, asking for the next group into L1 or L2: level.)
inline constexpr int64_t kPrefetchRowMinBytes = 1024;
// Row r + 2 of the rows [.., r1) of n values at x where the output walk of row r should ask for it, else
// null (f32 rows, short rows, the last two rows of the range).
template <typename T>
HWY_INLINE const T* RowAfterNext(const T* x, int64_t r, int64_t r1, int64_t n) {
  if (sizeof(T) != 2 || n * int64_t(sizeof(T)) < kPrefetchRowMinBytes || r + 2 >= r1) return nullptr;
  return x + (r + 2) * n;
}

// The output walk of a group of kRows wide rows (LayerNorm's and RMSNorm's forwards, four rows of n values
// at a time) with the NEXT group's pass 1 inside it.
//
// Why: a group's pass 1 reads its rows from memory, and its output walk then works on them from the cache
// while the memory idles, so the two phases took turns instead of overlapping (RMSNorm bf16 at 1024 x 4096,
// 1 thread: 16.8 cycles per 32 values against 13.8 for the short rows at 4096 x 1024 that ask for the row
// after next, RowAfterNext). Prefetching the next group's four rows in the output walk instead made it
// slower (23 cycles); demand loads inside the walk's own work, which the core runs out of order, do not.
//
// How: the walk takes n / (2 Lanes) steps, out(j) writing the group's columns [j, j + 2 Lanes). Before each,
// acc takes kRows / 2 steps of 4 Lanes values (acc.Step4: Sum4 or MomentSums4) of the next group's rows,
// which lie one after another at `next`, so the kRows * n values take the same n / (2 Lanes) steps. At the
// end of a row, row_done(k, acc) takes row k's sums and readies acc for the next row. n must be a multiple
// of 4 Lanes, so that the rows end on a step of acc. The sums are added in the order of a row on its own
// (Accumulate4, RowMomentSums), so a row has the same bits in any group.
template <int kRows, class D, typename T, class Acc, class RowDone, class Out>
HWY_INLINE void FusedGroupWalk(D d, const T* HWY_RESTRICT next, int64_t n, Acc acc, const RowDone& row_done,
                               const Out& out) {
  static_assert(kRows % 2 == 0, "the next group's rows take kRows / 2 steps of acc per step of the walk");
  const int64_t L = int64_t(hn::Lanes(d));
  int k = 0;      // the next group's row ...
  int64_t i = 0;  // ... and column
  for (int64_t j = 0; j < n; j += 2 * L) {
    for (int s = 0; s < kRows / 2; ++s) {
      acc.Step4(d, next + k * n + i);
      if ((i += 4 * L) == n) row_done(k++, acc), i = 0;
    }
    out(j);
  }
}

// The f16/bf16 row backwards (LayerNorm's, RMSNorm's) keep pass 1's values of a row as floats for pass 2
// in two buffers of this many floats (12 KiB each), for rows that fit: see LayerNormBackwardRowGroups.
inline constexpr int64_t kBackwardBufferFloats = 3072;
// Whether the backward of T rows of n values keeps them so: f16/bf16 (a float computation type) rows that
// fit.
template <typename T>
HWY_INLINE bool KeepsRowsForPass2(int64_t n) {
  const int64_t L = int64_t(hn::Lanes(hn::ScalableTag<AccT<T>>()));
  return !std::is_same_v<T, AccT<T>> && (n + L - 1) / L * L <= kBackwardBufferFloats;
}

// bf16 rows, for sums over a row: the 2 Lanes(d) values at p as two vectors of floats, the even-indexed
// values (the low halves of the 32-bit lanes) and the odd-indexed ones (the high halves). Not the row's
// order, which a sum does not need (nor which vector is which, so the byte order does not matter either):
// one load and two bit operations for 2 Lanes values, where LoadAs spends two widening shuffles and two
// shifts. Exact. Used by the statistics passes (Accumulate4, ShiftedRowStatistics), never where a value
// meets its own weight.
template <class D>
HWY_INLINE void LoadBf16Pairs(D d, const hwy::bfloat16_t* HWY_RESTRICT p, hn::Vec<D>& lo, hn::Vec<D>& hi) {
  const hn::RebindToUnsigned<D> du;
  const auto w = hn::LoadU(du, reinterpret_cast<const hn::TFromD<decltype(du)>*>(p));
  lo = hn::BitCast(d, hn::ShiftLeft<16>(w));
  hi = hn::BitCast(d, hn::And(w, hn::Set(du, 0xffff0000u)));
}
template <class D, typename T>
constexpr bool UseBf16Pairs() {
  return std::is_same_v<T, hwy::bfloat16_t> && std::is_same_v<hn::TFromD<D>, float>;
}

// The 4 Lanes values at p as four vectors, for sums: bf16 in pairs (LoadBf16Pairs: the values in another
// order), the rest in order.
template <class D, typename T>
HWY_INLINE void LoadFourForSums(D d, const T* HWY_RESTRICT p, hn::Vec<D>& v0, hn::Vec<D>& v1, hn::Vec<D>& v2,
                                hn::Vec<D>& v3) {
  const int64_t L = int64_t(hn::Lanes(d));
  if constexpr (UseBf16Pairs<D, T>()) {
    LoadBf16Pairs(d, p, v0, v1);
    LoadBf16Pairs(d, p + 2 * L, v2, v3);
  } else {
    v0 = LoadAs(d, p), v1 = LoadAs(d, p + L), v2 = LoadAs(d, p + 2 * L), v3 = LoadAs(d, p + 3 * L);
  }
}

// A sum over a row in four accumulators, acc = step(acc, v) for each vector v: four, so that consecutive adds
// do not wait for each other (an add or FMA takes ~4 cycles to finish, but the core can start two per cycle).
// Fed 4 Lanes values at a time (Step4), then the rest of the full vectors one at a time (Finish); the tail
// is the caller's. Accumulate4 runs it over a row; the fused group walks of LayerNorm's and RMSNorm's
// forwards (FusedGroupWalk) feed it between other work, in the same order, so with the same bits.
template <class D, class Step>
struct Sum4 {
  hn::Vec<D> a0, a1, a2, a3;
  Step step;
  Sum4(D d, const Step& s) : a0(hn::Zero(d)), a1(hn::Zero(d)), a2(hn::Zero(d)), a3(hn::Zero(d)), step(s) {}
  template <typename T>
  HWY_INLINE void Step4(D d, const T* HWY_RESTRICT p) {
    hn::Vec<D> v0, v1, v2, v3;
    LoadFourForSums(d, p, v0, v1, v2, v3);
    a0 = step(a0, v0);
    a1 = step(a1, v1);
    a2 = step(a2, v2);
    a3 = step(a3, v3);
  }
  // The full vectors of p[i .. n_main) into a0, then the four accumulators added.
  template <typename T>
  HWY_INLINE hn::Vec<D> Finish(D d, const T* HWY_RESTRICT p, int64_t i, int64_t n_main) {
    for (; i < n_main; i += int64_t(hn::Lanes(d))) a0 = step(a0, LoadAs(d, p + i));
    return hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
  }
};

// The sum of step() over the full vectors of p[0 .. n_main) (n_main a multiple of Lanes). The tail is the
// caller's.
template <class D, typename T, class Step>
HWY_INLINE hn::Vec<D> Accumulate4(D d, const T* HWY_RESTRICT p, int64_t n_main, const Step& step) {
  const int64_t L = int64_t(hn::Lanes(d));
  Sum4<D, Step> sum(d, step);
  int64_t i = 0;
  for (; i + 4 * L <= n_main; i += 4 * L) sum.Step4(d, p + i);
  return sum.Finish(d, p, i, n_main);
}

template <class D>
HWY_INLINE hn::TFromD<D> ReduceSum(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}

// The sums over a row of c = x - K and c^2 (kShift), or of x and x^2 (!kShift: vK unused), in four
// accumulators each, so that consecutive adds do not wait for each other. bf16 rows load in pairs
// (LoadBf16Pairs: the same sums in another order). Fed 4 Lanes values at a time (Step4), then the rest
// (Finish), as Sum4: RowMomentSums runs it over a row, LayerNorm's fused group walk between its output.
template <bool kShift, class D>
struct MomentSums4 {
  hn::Vec<D> vK, s1a, s1b, s1c, s1d, s2a, s2b, s2c, s2d;
  MomentSums4(D d, hn::Vec<D> vK_in) : vK(vK_in) {
    s1a = s1b = s1c = s1d = s2a = s2b = s2c = s2d = hn::Zero(d);
  }
  HWY_INLINE hn::Vec<D> Centre(hn::Vec<D> v) const { return kShift ? hn::Sub(v, vK) : v; }
  // keep (kKeep): where the four vectors go as loaded (for bf16, in pairs), for an output walk that reads
  // them there instead of converting x again (LayerNorm's short bf16 rows).
  template <bool kKeep = false, typename T>
  HWY_INLINE void Step4(D d, const T* HWY_RESTRICT p, hn::TFromD<D>* HWY_RESTRICT keep = nullptr) {
    hn::Vec<D> v0, v1, v2, v3;
    LoadFourForSums(d, p, v0, v1, v2, v3);
    if constexpr (kKeep) {
      const size_t L = hn::Lanes(d);
      hn::Store(v0, d, keep), hn::Store(v1, d, keep + L), hn::Store(v2, d, keep + 2 * L);
      hn::Store(v3, d, keep + 3 * L);
    }
    const auto c0 = Centre(v0), c1 = Centre(v1), c2 = Centre(v2), c3 = Centre(v3);
    s1a = hn::Add(s1a, c0);
    s1b = hn::Add(s1b, c1);
    s1c = hn::Add(s1c, c2);
    s1d = hn::Add(s1d, c3);
    s2a = hn::MulAdd(c0, c0, s2a);
    s2b = hn::MulAdd(c1, c1, s2b);
    s2c = hn::MulAdd(c2, c2, s2c);
    s2d = hn::MulAdd(c3, c3, s2d);
  }
  // The rest of the row of n values at xr from column i (full vectors, then the tail), and the two sums.
  template <typename T>
  HWY_INLINE void Finish(D d, const T* HWY_RESTRICT xr, int64_t i, int64_t n, hn::TFromD<D>& s1_out,
                         hn::TFromD<D>& s2_out) {
    const int64_t L = int64_t(hn::Lanes(d));
    const int64_t n_main = n - n % L;  // full vectors; the rest (< L) is the tail
    const size_t rest = size_t(n - n_main);
    for (; i < n_main; i += L) {
      const auto c = Centre(LoadAs(d, xr + i));
      s1a = hn::Add(s1a, c);
      s2a = hn::MulAdd(c, c, s2a);
    }
    if (rest) {  // zero-padded; the padding minus K is masked back to 0
      const auto c = hn::IfThenElseZero(hn::FirstN(d, rest), Centre(Tail<D, T>(xr + n_main, rest).load(d)));
      s1a = hn::Add(s1a, c);
      s2a = hn::MulAdd(c, c, s2a);
    }
    s1_out = ReduceSum(d, hn::Add(hn::Add(s1a, s1b), hn::Add(s1c, s1d)));
    s2_out = ReduceSum(d, hn::Add(hn::Add(s2a, s2b), hn::Add(s2c, s2d)));
  }
};

// The sums of MomentSums4 over the n values at xr. The pass 1 of ShiftedRowStatistics and
// LayerNormRowStatistics (unshifted).
// keep (non-null only where n is a multiple of 4 Lanes): the row's values as Step4 loads them, for the
// output.
template <bool kShift, class D, typename T>
HWY_INLINE void RowMomentSums(D d, const T* HWY_RESTRICT xr, int64_t n, hn::Vec<D> vK, hn::TFromD<D>& s1_out,
                              hn::TFromD<D>& s2_out, hn::TFromD<D>* HWY_RESTRICT keep = nullptr) {
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;
  MomentSums4<kShift, D> sums(d, vK);
  int64_t i = 0;
  if (keep) {
    for (; i + 4 * L <= n_main; i += 4 * L) sums.template Step4<true>(d, xr + i, keep + i);
  } else {
    for (; i + 4 * L <= n_main; i += 4 * L) sums.Step4(d, xr + i);
  }
  sums.Finish(d, xr, i, n, s1_out, s2_out);
}

// The shift K of the n values at xr: the mean of the first min(n, L) values.
template <class D, typename T>
HWY_INLINE hn::TFromD<D> RowShift(D d, const T* HWY_RESTRICT xr, int64_t n) {
  using A = hn::TFromD<D>;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto first = n >= L ? LoadAs(d, xr) : Tail<D, T>(xr, size_t(n)).load(d);
  return ReduceSum(d, first) / A(std::min<int64_t>(n, L));
}

// The end of ShiftedRowStatistics, from the sums s1 = sum (x - K) and s2 = sum (x - K)^2 of the n values at
// xr: var = s2 / n - d^2, checked, with a centred second pass where K sits far from the mean. Out: d = mean -
// K and rstd.
template <class D, typename T>
HWY_INLINE void ShiftedStatisticsFromSums(D d, const T* HWY_RESTRICT xr, int64_t n, double eps,
                                          hn::TFromD<D> K, hn::TFromD<D> s1, hn::TFromD<D> s2,
                                          hn::TFromD<D>& dmean_out, hn::TFromD<D>& rs_out) {
  using A = hn::TFromD<D>;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t n_main = n - n % L;  // full vectors; the rest (< L) is the tail
  const size_t rest = size_t(n - n_main);
  const A dmean = s1 / A(n);
  const A m2 = s2 / A(n);
  A var = m2 - dmean * dmean;

  // The check: K far from the mean (d^2 > var / 4, i.e. d^2 > m2 / 5) -> centred second pass from cache.
  // Also when the sums overflowed (var inf or NaN): the centred pass then gives what the reference gives.
  if (dmean * dmean * A(5) > m2 || !std::isfinite(var)) {
    const auto vK = hn::Set(d, K), vd = hn::Set(d, dmean);
    auto acc = Accumulate4(d, xr, n_main, [&](hn::Vec<D> a, hn::Vec<D> v) {
      const auto c = hn::Sub(hn::Sub(v, vK), vd);
      return hn::MulAdd(c, c, a);
    });
    if (rest) {
      const auto c = hn::IfThenElseZero(hn::FirstN(d, rest),
                                        hn::Sub(hn::Sub(Tail<D, T>(xr + n_main, rest).load(d), vK), vd));
      acc = hn::MulAdd(c, c, acc);
    }
    var = ReduceSum(d, acc) / A(n);
  }
  dmean_out = dmean;
  rs_out = A(1) / std::sqrt(std::max(var, A(0)) + A(eps));
}

// The statistics of the n contiguous values at xr, as LayerNorm's forward computes them (layer_norm.cpp,
// section 3, says why this is safe): one pass for s1 = sum (x - K) and s2 = sum (x - K)^2, K = the mean of
// the first vector of values, then var = s2 / n - d^2, checked, with a centred second pass where K sits far
// from the mean. Out: the shift K, d = mean - K and rstd. Also GroupNorm's per-row kernel (group_norm.cpp).
template <class D, typename T>
HWY_INLINE void ShiftedRowStatistics(D d, const T* HWY_RESTRICT xr, int64_t n, double eps,
                                     hn::TFromD<D>& K_out, hn::TFromD<D>& dmean_out, hn::TFromD<D>& rs_out,
                                     hn::TFromD<D>* HWY_RESTRICT keep = nullptr) {
  using A = hn::TFromD<D>;
  const A K = RowShift(d, xr, n);
  A s1, s2;
  RowMomentSums<true>(d, xr, n, hn::Set(d, K), s1, s2, keep);  // pass 1
  K_out = K;
  ShiftedStatisticsFromSums(d, xr, n, eps, K, s1, s2, dmean_out, rs_out);
}

// ---- bf16 rows: the statistics from unshifted sums ----
//
// A bf16 row's sums can skip the shift:
//   S1 = sum x,  S2 = sum x^2,  mean = S1 / n,  var = S2 / n - mean^2
// Per 32 values: one load and two bit operations (LoadBf16Pairs), two adds and two FMAs, 6 vector
// operations where ShiftedRowStatistics spends 9, and no horizontal sum for the shift K. (The square of a
// bf16 value, 8 significant bits, is exact in f32, so each FMA rounds once, as an add does.)
//
// The subtraction cancels in proportion to mean^2 / var (norm_math.h). That is ShiftedRowStatistics with
// K = 0, and it takes the same check: a row where mean^2 > var / 4 (5 mean^2 > S2 / n) is not trusted and
// the caller computes it the shifted way, as it does a row whose sums overflowed. Activations entering a
// LayerNorm usually sit within a fraction of a std of 0; for tensors whose rows do not, see UnshiftedGate.
//
// (Stop 26 first summed with AVX512-BF16's vdpbf16ps, 32 values per instruction per sum. On the Intel Xeon
// VM the instruction turned out to hold both vector ports for about two cycles, the price of four FMAs: a
// loop of 4 of them and 8 independent FMAs took 12.2 cycles, the 8 FMAs alone 4.7. These sums measured level
// with it (16384 x 256: 0.423 -> 0.400 ms, 4096 x 1024: 0.360 -> 0.373), and need no inline assembly, no
// check for the instruction's flushed denormals, and no particular CPU.)

// From a row's unshifted sums S1 = sum x and S2 = sum x^2 (RowMomentSums<false>, or LayerNorm's fused walk),
// whether they can be trusted, and if so the mean and rstd.
template <typename A>
HWY_INLINE bool UnshiftedStatisticsFromSums(int64_t n, double eps, A S1, A S2, A& mean_out, A& rs_out) {
  const A mean = S1 / A(n), m2 = S2 / A(n);
  const A var = m2 - mean * mean;
  if (!std::isfinite(var) || mean * mean * A(5) > m2) return false;
  mean_out = mean;
  rs_out = A(1) / std::sqrt(std::max(var, A(0)) + A(eps));
  return true;
}

// Which bf16 rows try the unshifted sums. A tensor whose rows sit far from 0 would pay for a refused attempt
// on every row (measured with the first version, which summed with vdpbf16ps: 20-37% slower than the
// shifted path alone at mean 4, std 1). So a kernel call's rows go in blocks of kUnshiftedGateRows
// (norm_common.h) from its first row: the first row of a block always tries, the others only where the first
// was trusted, and such a tensor pays for one attempt in 16 rows. A call's rows are a run of chunks whose
// size is fixed by the row length, never by the thread count, and a whole number of blocks
// (layer_norm_forward_fast), so each row takes the same path, and gives the same bits, with any number of
// threads.
struct UnshiftedGate {
  int left = 0;       // rows left in the current block
  bool open = false;  // whether the unshifted sums were trusted on the block's first row

  // The next row's step: whether it tries the unshifted sums, and whether it opens a block (its try then
  // decides for the block: Tried). Once per row, in order.
  struct Step {
    bool tries, first;
  };
  Step Next() {
    const bool first = left == 0;
    if (first) left = int(kUnshiftedGateRows);
    --left;
    return {first || open, first};
  }
  // After the row of step st tried: trusted or not, passed through.
  bool Tried(Step st, bool trusted) {
    if (st.first) open = trusted;
    return trusted;
  }
};

// A row's statistics for LayerNorm's forward (K, d = mean - K and rstd, as ShiftedRowStatistics gives them):
// a bf16 row tries the unshifted sums first where the gate lets it (K = 0); other rows, and the rows refused,
// are shifted. The rows of a kernel call must come in order, each once. The row's sums may come already
// taken (LayerNorm's fused walk): unshifted, {S1, S2}, or shifted, {K, s1, s2}; the others are taken here
// from the row, where they are needed. Either way the same bits.
//
// keep (bf16 rows of a multiple of 4 Lanes values, with the sums taken here): the row's values as its first
// pass loads them, in pairs (LoadBf16Pairs), for LayerNormOutputKept.
template <class D, typename T>
HWY_INLINE void LayerNormRowStatistics(D d, const T* HWY_RESTRICT xr, int64_t n, double eps,
                                       UnshiftedGate& gate, hn::TFromD<D>& K_out, hn::TFromD<D>& dmean_out,
                                       hn::TFromD<D>& rs_out, const hn::TFromD<D>* unshifted = nullptr,
                                       const hn::TFromD<D>* shifted = nullptr,
                                       hn::TFromD<D>* HWY_RESTRICT keep = nullptr) {
  if constexpr (UseBf16Pairs<D, T>()) {
    const UnshiftedGate::Step st = gate.Next();
    if (st.tries) {
      hn::TFromD<D> S1, S2;
      if (unshifted) {
        S1 = unshifted[0], S2 = unshifted[1];
      } else {
        RowMomentSums<false>(d, xr, n, hn::Zero(d), S1, S2, keep);
        keep = nullptr;  // kept: a shifted pass below need not keep them again
      }
      if (gate.Tried(st, UnshiftedStatisticsFromSums(n, eps, S1, S2, dmean_out, rs_out))) {
        K_out = 0;
        return;
      }
    }
  } else {
    (void)gate, (void)unshifted;
  }
  if (shifted) {
    K_out = shifted[0];
    ShiftedStatisticsFromSums(d, xr, n, eps, shifted[0], shifted[1], shifted[2], dmean_out, rs_out);
  } else {
    ShiftedRowStatistics(d, xr, n, eps, K_out, dmean_out, rs_out, keep);
  }
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NG_NORM_SIMD_INL_H_
