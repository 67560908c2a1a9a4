// Highway helpers shared by the norm kernels: load any storage type as a vector of the compute type, store
// it back (with round-to-nearest-even for f16/bf16), and handle the tail of a row.
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

HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
using AccT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Whether Highway's f16 <-> f32 conversions are F16C's instructions on this target. Elsewhere (SSE4, the
// portable EMU128) Highway 1.0.3 emulates them, and its emulation is wrong at the edges: f16 inf and NaN
// load as finite numbers, and the store truncates (see StoreF16Rounded). So there we use our own.
#undef NG_F16C_TARGET  // (this header is compiled once per target)
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && \
    !defined(HWY_DISABLE_F16C)
#define NG_F16C_TARGET 1
#else
#define NG_F16C_TARGET 0
#endif

// f16 -> f32 without F16C, exact like ng::f16_to_f32: normal values move their exponent (+112 << 23),
// subnormals (m * 2^-24) are converted by the float unit, exponent 31 (inf, NaN) becomes 255 with the
// payload kept.
template <class D>
HWY_INLINE hn::Vec<D> LoadF16Exact(D d, const hwy::float16_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> du16;
  const auto h = hn::BitCast(
      di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p))));
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
  const auto exp = hn::And(h, hn::Set(di, 0x7c00));
  const auto man = hn::And(h, hn::Set(di, 0x3ff));
  const auto normal = hn::ShiftLeft<13>(hn::Add(hn::And(h, hn::Set(di, 0x7fff)), hn::Set(di, 112 << 10)));
  const auto special = hn::Or(hn::Set(di, 0x7f800000), hn::ShiftLeft<13>(man));  // inf, NaN
  const auto subnormal = hn::BitCast(di, hn::Mul(hn::ConvertTo(d, man), hn::Set(d, 0x1p-24f)));
  auto bits = hn::IfThenElse(hn::Eq(exp, hn::Zero(di)), subnormal, normal);
  bits = hn::IfThenElse(hn::Eq(exp, hn::Set(di, 0x7c00)), special, bits);
  return hn::BitCast(d, hn::Or(bits, sign));
}

// v = x[0 .. Lanes) converted to A.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadAs(D d, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<T, hwy::float16_t> && !NG_F16C_TARGET) {
    return LoadF16Exact(d, p);
  } else {
    const hn::Rebind<T, D> dh;  // same lane count, 16-bit lanes
    return hn::PromoteTo(d, hn::LoadU(dh, p));
  }
}

// ---- bf16 stores with the CPU's own instruction, where it has one ----
//
// AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake and Sapphire Rapids and later) has vcvtneps2bf16: 16
// floats to 16 bf16 in one instruction, rounding to nearest even. Highway 1.0.3 does not use it (its
// DemoteTo to bf16 truncates), and its AVX-512 target is compiled for CPUs without it, so the intrinsic
// cannot be inlined there. The AVX-512 kernels therefore ask the CPU once, at start-up, and emit the
// instruction with inline assembly when it is there.
//
// Same bits as the rounding by hand below, with one exception: the instruction flushes denormal inputs
// (|v| < 2^-126) to a signed zero, where we round them like any other value. Checked on all 2^32 float
// bit patterns on AMD Zen 4 (2026-11-25): no other difference. So a vector with a denormal lane (found by
// vfpclassps, one instruction) takes the rounding by hand. On Zen 4 this turns the ~10 vector operations
// of a rounding store into 3, the largest cost of every bf16 norm kernel there.
// (GCC and Clang both define __GNUC__; the inline assembly below is in their syntax.)
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
inline const bool kCpuHasAvx512Bf16 = [] {
  __builtin_cpu_init();  // (may run before libgcc's own constructor has filled in the CPU model)
  return __builtin_cpu_supports("avx512bf16") != 0;
}();

// Stores the 16 floats of v as bf16 at p if that can be done with the instruction; false if not.
template <class D>
HWY_INLINE bool StoreBf16Native(D, hn::Vec<D> v, hwy::bfloat16_t* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<hn::TFromD<D>, float> && hn::MaxLanes(D()) == 16) {
    if (!kCpuHasAvx512Bf16 || _mm512_fpclass_ps_mask(v.raw, 0x20) != 0) return false;  // 0x20: denormal
    __m256i bits;
    asm("vcvtneps2bf16 %1, %0" : "=v"(bits) : "v"(v.raw));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
    return true;
  } else {
    return false;
  }
}
#endif

// ---- f16 stores on targets without F16C ----
//
// On SSE4 and the portable EMU128 target, Highway 1.0.3 emulates the f32 -> f16 DemoteTo with bit
// operations that truncate the mantissa, turn overflow into a finite number and NaN into a non-NaN (found by
// tests/test_norms_store.cpp, 2026-11-25: until then the f16 norms on CPUs without AVX2 were off in the
// last bit). This rounds to nearest even like ng::f32_to_f16, with the float adder doing the subnormal case:
//   |v| >= 65520          -> inf (0x7c00); NaN keeps its top payload bits, made quiet (0x7e00 | ...)
//   normal f16 range      -> rebias the exponent (-112 << 23), add 0xfff + the lowest kept bit,
//                            keep bits 13 and up
//                            (a carry out of the mantissa moves into the exponent, as it should)
//   |v| < 2^-14 (subnormal or zero in f16) -> |v| + 0.5: the adder rounds |v| to a multiple of 2^-24 (to
//                            nearest even) and the low bits of the sum are that multiple
template <class D>
HWY_INLINE void StoreF16Rounded(D d, hn::Vec<D> v, hwy::float16_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const auto u = hn::BitCast(di, v);
  const auto abs = hn::And(u, hn::Set(di, 0x7fffffff));
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(di, 0x8000));
  // normal: exponent rebiased from 127 to 15, round to nearest even on the 13 dropped bits
  const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 1));
  const auto normal =
      hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(di, int32_t(0xc8000fff))), odd));  // -112<<23 + 0xfff
  // subnormal or zero: 0.5 = 2^-1 has ulp 2^-24, the spacing of f16's subnormals
  const auto half = hn::Set(d, 0.5f);
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(d, abs), half)), hn::BitCast(di, half));
  auto bits = hn::IfThenElse(hn::Lt(abs, hn::Set(di, 0x38800000)), sub, normal);           // 2^-14
  bits = hn::IfThenElse(hn::Lt(abs, hn::Set(di, 0x477ff000)), bits, hn::Set(di, 0x7c00));  // 65520: inf
  const auto nan = hn::Or(hn::Set(di, 0x7e00), hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 0x3ff)));
  bits = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7f800000)), nan, bits);
  const hn::Rebind<uint16_t, D> du16;
  hn::StoreU(hn::DemoteTo(du16, hn::Or(bits, sign)), du16, reinterpret_cast<uint16_t*>(p));
}

// x[0 .. Lanes) = v converted to T, rounding to nearest even.
template <class D, typename T>
HWY_INLINE void StoreAs(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    hn::StoreU(v, d, p);
  } else if constexpr (std::is_same_v<T, hwy::float16_t>) {
#if NG_F16C_TARGET
    const hn::Rebind<hwy::float16_t, D> dh;
    hn::StoreU(hn::DemoteTo(dh, v), dh, p);  // F16C vcvtps2ph: round to nearest even
#else
    StoreF16Rounded(d, v, p);  // (Highway 1.0.3's DemoteTo truncates without F16C: see StoreF16Rounded)
#endif
  } else {
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
    if (StoreBf16Native(d, v, p)) return;
#endif
    // bf16 = the top half of the f32 bits. Highway 1.0.3's DemoteTo truncates, so round by hand, as
    // ng::f32_to_bf16 does: add 0x7fff plus the lowest kept bit, then drop the low 16 bits. NaN stays quiet.
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)));
    const auto quiet_nan = hn::ShiftRight<16>(hn::Or(u, hn::Set(du, 0x00400000u)));
    const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
    const hn::Rebind<uint16_t, D> du16;
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16, reinterpret_cast<uint16_t*>(p));
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
