// Loading and storing the last, partial vector of a row (n < Lanes elements), on every SIMD target.
//
// Why not hn::MaskedLoad / hn::BlendedStore: in Highway 1.0.3 on SSE4 (and for 8/16-bit lanes on AVX2),
// MaskedLoad is a full ALIGNED load (x86_128-inl.h: IfThenElseZero(m, Load(d, p))): on an unaligned tail
// that faults (tests/test_tensor_kernels.cpp runs every kernel on every target with unaligned pointers), and
// it reads past the end of the row. BlendedStore is a scalar loop there and vmaskmovps on AVX2/AVX-512,
// which AMD Zen cores run as a slow microcoded sequence.
// Instead we go through a small aligned buffer on the stack: copy n elements in, load; store, copy n out.
//
// Per-target header (included from inside a foreach_target.h file): the guard toggles per target.
#if defined(NG_KERNELS_TAIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NG_KERNELS_TAIL_INL_H_
#undef NG_KERNELS_TAIL_INL_H_
#else
#define NG_KERNELS_TAIL_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The first n (< Lanes(d)) elements of p, the other lanes set to `pad`. Reads exactly n elements.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadTail(D d, const T* HWY_RESTRICT p, size_t n, T pad = T(0)) {
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  for (size_t k = 0; k < HWY_MAX_BYTES / sizeof(T); ++k) buf[k] = pad;
  std::memcpy(buf, p, n * sizeof(T));
  return hn::Load(d, buf);
}

// Write the first n (< Lanes(d)) lanes of v to p. Writes exactly n elements.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void StoreTail(hn::Vec<D> v, D d, T* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(T));
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#endif  // NG_KERNELS_TAIL_INL_H_
