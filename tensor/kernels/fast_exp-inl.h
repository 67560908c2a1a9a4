// FastExp: the f32 exp used by the softmax and cross-entropy kernels (softmax_simd.cpp).
//
// Why not hn::Exp (hwy/contrib/math, Highway 1.0.3): it is accurate, but spends about 25 vector ops per
// call on generality we do not need here (a float->int conversion with overflow fixup, a two-step
// 2^n that also covers subnormal results, sign handling for the rounding). Softmax spends most of its
// time in exp, so we write the same classic method with fewer ops (about 16):
//
//   exp(x) = 2^n * exp(r),   n = round(x / ln 2),   r = x - n ln 2  in [-ln2/2, ln2/2]
//
//   1. n: one FMA, x * log2(e) + S with the "shifter" S = 1.5 * 2^23 + 127. Adding S rounds the product
//      to an integer (the float's mantissa has no room left for fractions), and leaves the bits of
//      n + 127 in the low mantissa bits. n itself is (that sum) - S, exact.
//   2. r: x - n ln 2 in two FMAs (Cody-Waite): ln 2 = LN2_HI + LN2_LO, with LN2_HI having few mantissa
//      bits so that n * LN2_HI is exact for |n| < 2^8.
//   3. exp(r) = 1 + r + r^2 P(r), P the degree-5 polynomial of Cephes' expf (the same coefficients as
//      Highway's ExpImpl<float>::ExpPoly), by Horner: 7 FMAs, 1 mul, 1 add.
//   4. 2^n: shifting the bits of the sum from step 1 left by 23 drops the shifter's bits and puts n + 127
//      into the exponent field: the float 2^n, for n in [-126, 127]. One shift, one multiply.
//
// Range: x is clamped to at most 88.0 so that n stays <= 127; inputs below -87.3 (where exp(x) < 1.2e-38,
// a subnormal float) return exactly 0, which is what masked attention entries (x = -inf) need. A nan input
// returns nan on the x86 targets SSE4, AVX2 and AVX-512 (their Min passes the nan through when it is the
// second operand), but not on the portable EMU128 (fast_exp(nan) = 1.65e38 there): the kernels do not rely
// on it and detect nan rows themselves.
//
// Accuracy (tests/test_tensor_kernels.cpp, Kernels.FastExpMatchesStdExpOnEveryTarget, against std::exp in
// double on 400k points of [-87.3, 88], every target): worst relative error 8.0e-8 there (a denser sweep by
// stop 44's review, every 7th float of the range: 8.23e-8 at x = 59.2750053, 0.69 FLT_EPSILON; the test
// asserts < FLT_EPSILON), and exactly 0 below -87.3. Softmax's own reference (the scalar loop in
// ops/softmax.cpp, summing in double) is within 2e-6 absolute of the fast kernel, and within 4 FLT_EPSILON
// relative on a row of 2^20 values (Softmax.LongRowsStayAccurateOnEveryTarget).
//
// Per-target header (included from inside a foreach_target.h file): the guard toggles per target.
#if defined(NG_KERNELS_FAST_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NG_KERNELS_FAST_EXP_INL_H_
#undef NG_KERNELS_FAST_EXP_INL_H_
#else
#define NG_KERNELS_FAST_EXP_INL_H_
#endif

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for f32 lanes; see the header comment for the method, range and accuracy.
template <class D, hwy::EnableIf<sizeof(hn::TFromD<D>) == 4>* = nullptr>
HWY_INLINE hn::Vec<D> FastExp(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto kLo = hn::Set(d, -87.3f);  // 2^-126 = 1.18e-38 = exp(-87.34): the smallest normal float
  const auto kHi = hn::Set(d, 88.0f);   // exp(88) = 1.65e38 < FLT_MAX
  const auto kLog2e = hn::Set(d, 1.44269504088896341f);
  const auto kShifter = hn::Set(d, 12582912.0f + 127.0f);  // 1.5 * 2^23 + the exponent bias
  const auto kMinusLn2Hi = hn::Set(d, -0.693145751953125f);
  const auto kMinusLn2Lo = hn::Set(d, -1.428606765330187045e-6f);

  // Only the top is clamped. Below kLo the lanes compute garbage (n < -126 does not fit the exponent
  // field; x = -inf even gives nan) that the final IfThenZeroElse replaces by 0, so a lower clamp would be
  // an op spent for nothing. A nan x stays nan through the arithmetic (Min(hi, nan) returns the nan on
  // x86, its second operand).
  const auto xc = hn::Min(kHi, x);

  // 1. n = round(x log2 e); k holds n + 127 in its low mantissa bits.
  const auto k = hn::MulAdd(xc, kLog2e, kShifter);
  const auto n = hn::Sub(k, kShifter);

  // 2. r = x - n ln 2, in two steps.
  auto r = hn::MulAdd(n, kMinusLn2Hi, xc);
  r = hn::MulAdd(n, kMinusLn2Lo, r);

  // 3. exp(r) = 1 + r + r^2 (c0 + c1 r + ... + c5 r^5), Horner.
  auto p = hn::Set(d, 0.000198527617612853646278381f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.00139304355252534151077271f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.00833336077630519866943359f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.0416664853692054748535156f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.166666671633720397949219f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, hn::Mul(r, r), r);
  p = hn::Add(p, hn::Set(d, 1.0f));

  // 4. times 2^n: the bits of n + 127 moved into the exponent field.
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, k)));
  return hn::IfThenZeroElse(hn::Lt(x, kLo), hn::Mul(p, two_n));
}

// f64 lanes: Highway's Exp (f64 softmax is the gradcheck and reference path, not the hot one).
template <class D, hwy::EnableIf<sizeof(hn::TFromD<D>) == 8>* = nullptr>
HWY_INLINE hn::Vec<D> FastExp(D d, hn::Vec<D> x) {
  return hn::Exp(d, x);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#endif  // NG_KERNELS_FAST_EXP_INL_H_
