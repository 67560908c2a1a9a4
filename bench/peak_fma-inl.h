// The machine's FMA roofline, measured: a loop of fused multiply-adds on registers only, no memory.
// Compiled once per SIMD target by bench/normgrad_bench.cpp (Highway's foreach_target.h re-includes this
// file), so the figure is for the same instruction set that the GEMM's dynamic dispatch picks.
//
// NACC independent accumulators hide the FMA latency (4 cycles on Skylake-X, two FMA ports: at least 8 in
// flight are needed); each iteration is NACC FMAs of Lanes(d) lanes, i.e. 2 * NACC * Lanes(d) flops.

// Per-target include guard (Highway's pattern for -inl.h files).
#if defined(NG_BENCH_PEAK_FMA_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NG_BENCH_PEAK_FMA_INL_H_
#undef NG_BENCH_PEAK_FMA_INL_H_
#else
#define NG_BENCH_PEAK_FMA_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ng_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs `iters` iterations; returns the flops done. `seed` is opaque to the compiler, `sink` keeps the
// result alive, so neither the loop nor the FMAs can be folded away.
HWY_NOINLINE double PeakFmaF32(int64_t iters, float seed, float* sink) {
  const hn::ScalableTag<float> d;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  constexpr int kAcc = 16;  // of 32 registers
#else
  constexpr int kAcc = 12;  // of 16 registers
#endif
  using V = hn::Vec<decltype(d)>;
  V acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = hn::Set(d, seed + float(i));
  const V mul = hn::Set(d, 1.0f - 1e-7f * seed);
  const V add = hn::Set(d, 1e-7f * seed);
  for (int64_t it = 0; it < iters; ++it) {
    HWY_UNROLL(kAcc)
    for (int i = 0; i < kAcc; ++i) acc[i] = hn::MulAdd(acc[i], mul, add);
  }
  V total = acc[0];
  for (int i = 1; i < kAcc; ++i) total = hn::Add(total, acc[i]);
  *sink = hn::GetLane(hn::SumOfLanes(d, total));
  return 2.0 * double(iters) * kAcc * double(hn::Lanes(d));
}

}  // namespace HWY_NAMESPACE
}  // namespace ng_bench
HWY_AFTER_NAMESPACE();

#endif  // NG_BENCH_PEAK_FMA_INL_H_
