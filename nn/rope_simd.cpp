// RoPE's rotation with Highway (dynamic dispatch). The formula, the plain loop and why the bits match it:
// nn/rope_simd.h. Measured (2026-11-25, Zen 4): the plain loop compiled to scalar mulss/subss and took 1%
// of an exp2 training run's samples.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/rope_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/tail-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The rotation of values [i, i + count) of one head's halves (count < Lanes: the tail, through a buffer).
template <class D, typename F = hn::TFromD<D>>
HWY_INLINE void RotateSpan(D d, const F* HWY_RESTRICT x1, const F* HWY_RESTRICT x2, const F* HWY_RESTRICT c,
                           const F* HWY_RESTRICT s, hn::Vec<D> sign, F* HWY_RESTRICT o1, F* HWY_RESTRICT o2,
                           size_t count) {
  const bool full = count == hn::Lanes(d);
  const auto a = full ? hn::LoadU(d, x1) : LoadTail(d, x1, count);
  const auto b = full ? hn::LoadU(d, x2) : LoadTail(d, x2, count);
  const auto vc = full ? hn::LoadU(d, c) : LoadTail(d, c, count);
  const auto sn = hn::Mul(sign, full ? hn::LoadU(d, s) : LoadTail(d, s, count));
  const auto r1 = hn::Sub(hn::Mul(a, vc), hn::Mul(b, sn));
  const auto r2 = hn::Add(hn::Mul(b, vc), hn::Mul(a, sn));
  if (full) {
    hn::StoreU(r1, d, o1);
    hn::StoreU(r2, d, o2);
  } else {
    StoreTail(r1, d, o1, count);
    StoreTail(r2, d, o2, count);
  }
}

template <typename F>
void RopeRowT(const F* HWY_RESTRICT x, const F* HWY_RESTRICT c, const F* HWY_RESTRICT s, F sign,
              F* HWY_RESTRICT out, int64_t NH, int64_t HS) {
  const hn::ScalableTag<F> d;
  const int64_t L = int64_t(hn::Lanes(d)), half = HS / 2;
  const auto vsign = hn::Set(d, sign);
  for (int64_t h = 0; h < NH; ++h) {
    const F* x1 = x + h * HS;
    F* o1 = out + h * HS;
    int64_t i = 0;
    for (; i + L <= half; i += L)
      RotateSpan(d, x1 + i, x1 + half + i, c + i, s + i, vsign, o1 + i, o1 + half + i, size_t(L));
    if (i < half)
      RotateSpan(d, x1 + i, x1 + half + i, c + i, s + i, vsign, o1 + i, o1 + half + i, size_t(half - i));
  }
}

void RopeRowF32(const float* x, const float* c, const float* s, float sign, float* out, int64_t NH,
                int64_t HS) {
  RopeRowT(x, c, s, sign, out, NH, HS);
}
void RopeRowF64(const double* x, const double* c, const double* s, double sign, double* out, int64_t NH,
                int64_t HS) {
  RopeRowT(x, c, s, sign, out, NH, HS);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "nn/rope_simd.h"

namespace ng {
namespace {
template <typename F>
void RopeRowReference(const F* x, const F* c, const F* s, F sign, F* out, int64_t NH, int64_t HS) {
  const int64_t half = HS / 2;
  for (int64_t h = 0; h < NH; ++h) {
    const F* x1 = x + h * HS;  // first half of the head
    const F* x2 = x1 + half;   // second half
    F* o1 = out + h * HS;
    F* o2 = o1 + half;
    for (int64_t i = 0; i < half; ++i) {
      const F sn = sign * s[i];
      o1[i] = x1[i] * c[i] - x2[i] * sn;
      o2[i] = x2[i] * c[i] + x1[i] * sn;
    }
  }
}
}  // namespace
void rope_rotate_row_reference(const float* x, const float* c, const float* s, float sign, float* out,
                               int64_t NH, int64_t HS) {
  RopeRowReference(x, c, s, sign, out, NH, HS);
}
void rope_rotate_row_reference(const double* x, const double* c, const double* s, double sign, double* out,
                               int64_t NH, int64_t HS) {
  RopeRowReference(x, c, s, sign, out, NH, HS);
}
}  // namespace ng

namespace ng::simd {
HWY_EXPORT(RopeRowF32);
HWY_EXPORT(RopeRowF64);
void rope_rotate_row(const float* x, const float* c, const float* s, float sign, float* out, int64_t NH,
                     int64_t HS) {
  HWY_DYNAMIC_DISPATCH(RopeRowF32)(x, c, s, sign, out, NH, HS);
}
void rope_rotate_row(const double* x, const double* c, const double* s, double sign, double* out, int64_t NH,
                     int64_t HS) {
  HWY_DYNAMIC_DISPATCH(RopeRowF64)(x, c, s, sign, out, NH, HS);
}
}  // namespace ng::simd
#endif
