// The Adam element update: the scalar reference and the Highway kernel. See adam_kernel.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "optim/adam_kernel.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>

#include "hwy/highway.h"
#include "optim/adam_kernel.h"
#include "tensor/kernels/tail-inl.h"
#include "tensor/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace ng::optim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using ng::simd::HWY_NAMESPACE::LoadTail;
using ng::simd::HWY_NAMESPACE::StoreTail;

// Elements [b, e) of the update, in the reference's order of operations.
template <typename T>
void AdamRangeT(T* HWY_RESTRICT p, const T* HWY_RESTRICT g, T* HWY_RESTRICT m, T* HWY_RESTRICT v, int64_t b,
                int64_t e, const AdamScalars& s) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t L = int64_t(hn::Lanes(d));
  const V one_minus_beta1 = hn::Set(d, T(s.one_minus_beta1)), beta2 = hn::Set(d, T(s.beta2));
  const V one_minus_beta2 = hn::Set(d, T(s.one_minus_beta2)), eps = hn::Set(d, T(s.eps));
  const V step_size = hn::Set(d, T(s.step_size)), bc2_sqrt = hn::Set(d, T(s.bias_correction2_sqrt));
  const V wd = hn::Set(d, T(s.weight_decay)), decay = hn::Set(d, T(s.decay));

  // One vector of the update: the new p, m, v from the old ones and g.
  auto update = [&](V& pk, V gk, V& mk, V& vk) HWY_ATTR {
    if (s.coupled_wd) gk = hn::Add(gk, hn::Mul(wd, pk));
    if (s.decoupled) pk = hn::Mul(pk, decay);
    mk = hn::Add(mk, hn::Mul(one_minus_beta1, hn::Sub(gk, mk)));                  // m + (1 - b1)(g - m)
    vk = hn::Add(hn::Mul(beta2, vk), hn::Mul(hn::Mul(one_minus_beta2, gk), gk));  // b2 v + (1 - b2) g g
    const V denom = hn::Add(hn::Div(hn::Sqrt(vk), bc2_sqrt), eps);                // sqrt(v) / sqrt(bc2) + eps
    pk = hn::Sub(pk, hn::Div(hn::Mul(step_size, mk), denom));                     // p - step m / denom
  };

  // Full vectors with plain loads and stores. (Until 2026-11-24 every vector went through MaskedLoad /
  // BlendedStore with an all-true mask. On AVX2 those are vmaskmovps, and AMD Zen executes the masked
  // store as a slow microcoded sequence: three of them per vector made the step 3-4x slower, 2.8-3.5x
  // slower than PyTorch's fused Adam on a Zen 3.)
  int64_t k = b;
  for (; k + L <= e; k += L) {
    V pk = hn::LoadU(d, p + k), mk = hn::LoadU(d, m + k), vk = hn::LoadU(d, v + k);
    update(pk, hn::LoadU(d, g + k), mk, vk);
    hn::StoreU(pk, d, p + k);
    hn::StoreU(mk, d, m + k);
    hn::StoreU(vk, d, v + k);
  }
  // The tail (< L elements) through a stack buffer (tail-inl.h). Not MaskedLoad: in Highway 1.0.3 on SSE4
  // that is a full aligned load, which faults on an unaligned address and reads past the end.
  if (k < e) {
    const size_t n = size_t(e - k);
    V pk = LoadTail(d, p + k, n), mk = LoadTail(d, m + k, n), vk = LoadTail(d, v + k, n);
    update(pk, LoadTail(d, g + k, n), mk, vk);
    StoreTail(pk, d, p + k, n);
    StoreTail(mk, d, m + k, n);
    StoreTail(vk, d, v + k, n);
  }
}

void AdamRangeF32(float* p, const float* g, float* m, float* v, int64_t b, int64_t e, const AdamScalars& s) {
  AdamRangeT(p, g, m, v, b, e, s);
}
void AdamRangeF64(double* p, const double* g, double* m, double* v, int64_t b, int64_t e,
                  const AdamScalars& s) {
  AdamRangeT(p, g, m, v, b, e, s);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::optim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::optim {
HWY_EXPORT(AdamRangeF32);
HWY_EXPORT(AdamRangeF64);

template <typename T>
void adam_update_reference(T* p, const T* g, T* m, T* v, int64_t n, const AdamScalars& s) {
  const T one_minus_beta1 = T(s.one_minus_beta1), beta2 = T(s.beta2), one_minus_beta2 = T(s.one_minus_beta2);
  const T wd = T(s.weight_decay), decay = T(s.decay), eps = T(s.eps), step_size = T(s.step_size);
  const T bc2_sqrt = T(s.bias_correction2_sqrt);
  for (int64_t k = 0; k < n; ++k) {
    T gk = g[k];
    if (s.coupled_wd) gk = gk + wd * p[k];
    if (s.decoupled) p[k] = p[k] * decay;
    m[k] = m[k] + one_minus_beta1 * (gk - m[k]);
    v[k] = beta2 * v[k] + one_minus_beta2 * gk * gk;
    const T denom = std::sqrt(v[k]) / bc2_sqrt + eps;
    p[k] = p[k] - step_size * m[k] / denom;
  }
}

template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamScalars& s) {
  // Chunks of 16 K elements (64 KiB of each of the 4 arrays in f32); each element is independent, so the
  // split cannot change a result.
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    if constexpr (sizeof(T) == 4)
      HWY_DYNAMIC_DISPATCH(AdamRangeF32)(p, g, m, v, b, e, s);
    else
      HWY_DYNAMIC_DISPATCH(AdamRangeF64)(p, g, m, v, b, e, s);
  });
}

template void adam_update_reference<float>(float*, const float*, float*, float*, int64_t, const AdamScalars&);
template void adam_update_reference<double>(double*, const double*, double*, double*, int64_t,
                                            const AdamScalars&);
template void adam_update<float>(float*, const float*, float*, float*, int64_t, const AdamScalars&);
template void adam_update<double>(double*, const double*, double*, double*, int64_t, const AdamScalars&);

}  // namespace ng::optim
#endif
