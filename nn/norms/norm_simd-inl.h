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

#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "tensor/kernels/half-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// Software prefetch one page ahead, for the pass that first reads a row from memory.
//
// Why: a row kernel reads the row once from L3/DRAM (pass 1) and then works on it in L1 (passes 2, 3), so the
// memory stream stops and restarts on every row, and the hardware prefetcher, which does not run across a
// 4 KiB page, restarts with it. perf showed ~70% of LayerNorm backward's samples (1024 x 4096) on pass 1's
// loads of x and dy; asking for the line 4 KiB ahead cut its time by 10-20% (A/B, 1 thread, 4096 x 1024 and
// 1024 x 4096). The same in LayerNorm's forward and in RMSNorm's passes measured no gain (RMSNorm backward at
// 16384 x 256 got slower), so only LayerNorm's backward uses it, and (since a run on AMD Zen 4, where it
// slowed short rows by up to 40%) only for rows of 8 KiB and more; see LayerNormBackwardRows. `end` bounds
// the prefetches to memory the caller owns (the end of its chunk of rows).
template <typename T>
inline constexpr int64_t kPrefetchAhead = 4096 / int64_t(sizeof(T));
template <typename T>
HWY_INLINE void PrefetchAhead(const T* p, const T* end) {
  if (end - p > kPrefetchAhead<T>) hwy::Prefetch(p + kPrefetchAhead<T>);  // (no pointer past the end)
}

// The sum of step() over the full vectors of p[0 .. n_main) (n_main a multiple of Lanes): acc = step(acc, v)
// for each vector v. Four independent accumulators, so that consecutive adds do not wait for each other: an
// add or FMA takes ~4 cycles to finish, but the core can start two per cycle. The tail is the caller's.
template <class D, typename T, class Step>
HWY_INLINE hn::Vec<D> Accumulate4(D d, const T* HWY_RESTRICT p, int64_t n_main, const Step& step) {
  const int64_t L = int64_t(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * L <= n_main; i += 4 * L) {
    a0 = step(a0, LoadAs(d, p + i));
    a1 = step(a1, LoadAs(d, p + i + L));
    a2 = step(a2, LoadAs(d, p + i + 2 * L));
    a3 = step(a3, LoadAs(d, p + i + 3 * L));
  }
  for (; i < n_main; i += L) a0 = step(a0, LoadAs(d, p + i));
  return hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
}

template <class D>
HWY_INLINE hn::TFromD<D> ReduceSum(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NG_NORM_SIMD_INL_H_
