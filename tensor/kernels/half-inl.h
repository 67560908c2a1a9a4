// f16 and bf16 <-> f32 on SIMD vectors, exact: the same bits as the scalar ng::f16_to_f32, ng::bf16_to_f32,
// ng::f32_to_f16 and ng::f32_to_bf16 (tensor/dtype.h) on every target, with one exception: F16C's load
// (AVX2, AVX-512) quiets a signalling f16 NaN (0x7c01 -> 0x7fc02000, the scalar gives 0x7f802000), as
// convert_simd.h says too. It is a NaN either way. Used by the norm kernels (LoadAs /
// StoreAs in nn/norms/norm_simd-inl.h) and by Tensor::to (tensor/kernels/convert_simd.cpp).
//
//   LoadHalf(d, p):      16-bit values at p -> a vector of floats
//   StoreHalf(d, v, p):  a vector of floats -> 16-bit values at p, rounding to nearest even
//   StoreHalf2(d, lo, hi, p): two vectors the same way (one vcvtne2ps2bf16 for bf16 where the CPU has it)
//   StoreBf16Interleaved(d, even, odd, p): two vectors of floats as bf16, interleaved value by value
//
// Why not Highway's PromoteTo / DemoteTo alone (Highway 1.0.3):
//   - its bf16 DemoteTo truncates;
//   - without F16C (SSE4, the portable EMU128) its f16 conversions are emulated, and the emulation is wrong
//     at the edges: the store truncates, turns overflow into a finite number and a NaN into a non-NaN; the
//     load turns an f16 inf or NaN into a finite number (65536 and up);
//   - its AVX-512 target cannot use AVX512-BF16's vcvtneps2bf16.
// tests/test_tensor_convert.cpp checks all of it bit by bit on every target.
//
// Per-target header (included from inside a foreach_target.h file): the guard toggles per target.
#if defined(NG_KERNELS_HALF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NG_KERNELS_HALF_INL_H_
#undef NG_KERNELS_HALF_INL_H_
#else
#define NG_KERNELS_HALF_INL_H_
#endif

#include <type_traits>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
// bit patterns on AMD Zen 4 (2026-11-25): no other difference. So a vector with a denormal lane (found as
// below) takes the rounding by hand. On Zen 4 this turns the ~10 vector operations of a rounding store into
// 3, the largest cost of every bf16 norm kernel there.
// (GCC and Clang both define __GNUC__; the inline assembly below is in their syntax.)
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
inline const bool kCpuHasAvx512Bf16 = [] {
  __builtin_cpu_init();  // (may run before libgcc's own constructor has filled in the CPU model)
  return __builtin_cpu_supports("avx512bf16") != 0;
}();

// Where to look for such a lane: a subnormal float becomes a bf16 zero of its sign, and every other float a
// bf16 of magnitude > 0 unless it is a zero itself (a normal float keeps its exponent, so it stays at least
// 2^-126). So the instruction's result is right when none of its words is a zero (0x0000 or 0x8000), which
// one vptestnmw on the result tells; only where one is are the inputs looked at (vfpclassps). Until stop 32
// every store looked at its inputs: two vfpclassps, two mask moves and an or for a pair of vectors, against
// one vptestnmw and a mask test. Measured (Xeon model 167, 1 thread, 256 x 1024 bf16 in the L2, four
// alternating runs): LayerNorm's forward 0.122-0.132 -> 0.117-0.118 ns per value, GroupNorm's level; at the
// benchmark's sizes (2 threads, from memory) every bf16 forward level. Same bits (the tests of
// test_tensor_convert.cpp and GroupNorm.Bf16PairsMatchF64 fail when the subnormal check is skipped).
// Whether any 16-bit word of bits has magnitude 0:
HWY_INLINE bool Bf16ZeroWords(__m512i bits) {
  return _mm512_testn_epi16_mask(bits, _mm512_set1_epi16(0x7fff)) != 0;
}
HWY_INLINE bool Bf16ZeroWords(__m256i bits) {
  return _mm256_testn_epi16_mask(bits, _mm256_set1_epi16(0x7fff)) != 0;
}

// Stores the 16 floats of v as bf16 at p if that can be done with the instruction; false if not.
template <class D>
HWY_INLINE bool StoreBf16Native(D, hn::Vec<D> v, hwy::bfloat16_t* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<hn::TFromD<D>, float> && hn::MaxLanes(D()) == 16) {
    if (!kCpuHasAvx512Bf16) return false;
    __m256i bits;
    asm("vcvtneps2bf16 %1, %0" : "=v"(bits) : "v"(v.raw));
    if (Bf16ZeroWords(bits) && _mm512_fpclass_ps_mask(v.raw, 0x20) != 0) return false;  // 0x20: subnormal
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
    return true;
  } else {
    return false;
  }
}

// The 32 floats of lo (first) and hi as bf16 at p, with vcvtne2ps2bf16 (one instruction and one 64-byte
// store for both); false where StoreBf16Native would say false for either.
template <class D>
HWY_INLINE bool StoreBf16PairNative(D, hn::Vec<D> lo, hn::Vec<D> hi, hwy::bfloat16_t* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<hn::TFromD<D>, float> && hn::MaxLanes(D()) == 16) {
    if (!kCpuHasAvx512Bf16) return false;
    __m512i bits;  // words 0-15 from the second source operand (lo), 16-31 from the first (hi)
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(bits) : "v"(hi.raw), "v"(lo.raw));
    if (Bf16ZeroWords(bits) &&
        (_mm512_fpclass_ps_mask(lo.raw, 0x20) | _mm512_fpclass_ps_mask(hi.raw, 0x20)) != 0)
      return false;
    _mm512_storeu_si512(reinterpret_cast<void*>(p), bits);
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
// tests/test_tensor_convert.cpp, 2026-11-25: until then the f16 norms on CPUs without AVX2 were off in the
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

// v = the floats of the Lanes(d) 16-bit values at p (T: hwy::float16_t or hwy::bfloat16_t), exact.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadHalf(D d, const T* HWY_RESTRICT p) {
  static_assert(std::is_same_v<hn::TFromD<D>, float>);
  if constexpr (std::is_same_v<T, hwy::float16_t> && !NG_F16C_TARGET) {
    return LoadF16Exact(d, p);
  } else {
    const hn::Rebind<T, D> dh;                  // same lane count, 16-bit lanes
    return hn::PromoteTo(d, hn::LoadU(dh, p));  // F16C vcvtph2ps; bf16: the bits moved up by 16 (exact)
  }
}

// The bf16 bits of each float of v, in the low 16 bits of its 32-bit lane (the high 16 are zero). bf16 is
// the top half of the f32 bits. Highway 1.0.3's DemoteTo truncates, so round by hand, as ng::f32_to_bf16
// does: add 0x7fff plus the lowest kept bit, then drop the low 16 bits. NaN stays quiet.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16Bits(D d, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  (void)d;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)));
  const auto quiet_nan = hn::ShiftRight<16>(hn::Or(u, hn::Set(du, 0x00400000u)));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
}

// The Lanes(d) floats of v stored at p as T (hwy::float16_t or hwy::bfloat16_t), rounding to nearest even.
template <class D, typename T>
HWY_INLINE void StoreHalf(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
  static_assert(std::is_same_v<hn::TFromD<D>, float>);
  if constexpr (std::is_same_v<T, hwy::float16_t>) {
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
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> du16;
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, Bf16Bits(d, v))), du16, reinterpret_cast<uint16_t*>(p));
  }
}

// 2 Lanes(d) floats, lo then hi, stored at p as T: StoreHalf twice, or for bf16 on AVX-512 CPUs with
// AVX512-BF16 one vcvtne2ps2bf16 (the same bits: it rounds like vcvtneps2bf16). The bf16 stores were the
// largest cost of the bf16 norm forwards: with their output loops two vectors at a time, RMSNorm's bf16
// forward went 0.263 -> 0.225 ms and LayerNorm's 0.363 -> 0.329 ms at 4096 x 1024 (Zen 4, 2 threads,
// scripts/bench_ab.py, 4 rounds, best; the other shapes 9-14% too). tests/test_tensor_convert.cpp checks the
// bits through Tensor::to, which stores two vectors at a time as well.
template <class D, typename T>
HWY_INLINE void StoreHalf2(D d, hn::Vec<D> lo, hn::Vec<D> hi, T* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    if (StoreBf16PairNative(d, lo, hi, p)) return;
  }
#endif
  StoreHalf(d, lo, p);
  StoreHalf(d, hi, p + hn::Lanes(d));
}

#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
// StoreHalf2 to bf16 for a loop that runs only where kCpuHasAvx512Bf16: the instruction, and for a pair it
// cannot store (a subnormal value, rare) the rounding by hand as a call, StoreHalf2Apart, instead of code
// inlined after every store. Inlined, that code (~25 instructions: StoreHalf twice) sat in the loop once per
// store, four times in LayerNorm's four-row dx loop (StoreRowsInPairs, nn/norms/norm_simd-inl.h). Not for
// StoreHalf2 itself: on a CPU without the instruction every store would then be a call, measured 10-28%
// slower (this host with the flag forced off, LayerNorm's and RMSNorm's bf16 entries).
template <class D, typename T>
HWY_NOINLINE void StoreHalf2Apart(D d, hn::Vec<D> lo, hn::Vec<D> hi, T* HWY_RESTRICT p) {
  StoreHalf(d, lo, p);
  StoreHalf(d, hi, p + hn::Lanes(d));
}
template <class D>
HWY_INLINE void StoreBf16PairWithInstruction(D d, hn::Vec<D> lo, hn::Vec<D> hi,
                                             hwy::bfloat16_t* HWY_RESTRICT p) {
  if (HWY_LIKELY(StoreBf16PairNative(d, lo, hi, p))) return;
  StoreHalf2Apart(d, lo, hi, p);
}
#endif

// 2 Lanes(d) bf16 values at p from two vectors of floats, interleaved: p[2i] = even[i], p[2i + 1] = odd[i]
// (rounding to nearest even). The inverse of the pairs load of the norm kernels (LoadBf16Pairs in
// nn/norms/norm_simd-inl.h), for kernels that keep bf16 values in that order from load to store. Each
// 32-bit lane holds its pair: the even value in the low half (byte order: little-endian targets only). On
// AVX-512 CPUs with AVX512-BF16, one vcvtne2ps2bf16 and one word permute (vpermw); elsewhere, and where a
// value is subnormal (which the instruction flushes), the rounding by hand, the same bits.
template <class D>
HWY_INLINE void StoreBf16Interleaved(D d, hn::Vec<D> even, hn::Vec<D> odd, hwy::bfloat16_t* HWY_RESTRICT p) {
  static_assert(std::is_same_v<hn::TFromD<D>, float>);
#if HWY_TARGET == HWY_AVX3 && defined(__GNUC__)
  if constexpr (hn::MaxLanes(D()) == 16) {
    if (kCpuHasAvx512Bf16) {
      __m512i bits;  // words 0-15: even, 16-31: odd
      asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(bits) : "v"(odd.raw), "v"(even.raw));
      if (!Bf16ZeroWords(bits) ||
          (_mm512_fpclass_ps_mask(even.raw, 0x20) | _mm512_fpclass_ps_mask(odd.raw, 0x20)) == 0) {
        // word 2i <- word i, word 2i + 1 <- word 16 + i
        const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23,
                                             7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        _mm512_storeu_si512(reinterpret_cast<void*>(p), _mm512_permutexvar_epi16(idx, bits));
        return;
      }
    }
  }
#endif
  const hn::RebindToUnsigned<D> du;
  const auto pair = hn::Or(Bf16Bits(d, even), hn::ShiftLeft<16>(Bf16Bits(d, odd)));
  hn::StoreU(pair, du, reinterpret_cast<uint32_t*>(p));
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#endif  // NG_KERNELS_HALF_INL_H_
