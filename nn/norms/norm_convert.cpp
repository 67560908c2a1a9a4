// The norms' conversions between storage and compute types on a whole array: LoadAs (f16 / bf16 -> float)
// and StoreAs (float -> f16 / bf16, rounding to nearest even) from nn/norms/norm_simd-inl.h, which every
// norm kernel reads its input and writes its output with.
//
// They have several implementations: F16C's instructions, our own exact f16 conversions on targets without
// F16C (Highway 1.0.3's emulation there is wrong at the edges), the rounding by hand for bf16, and (on
// AVX-512 CPUs with AVX512-BF16) vcvtneps2bf16 with a fallback for denormals. The norms' tests compare with
// tolerances, which would not see a wrong last bit, a flushed denormal or an f16 inf loaded as 65536; these
// entries let tests/test_norms_convert.cpp check every conversion bit by bit on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nn/norms/norm_convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "nn/norms/norm_simd-inl.h"

#include "nn/norms/norm_convert.h"

HWY_BEFORE_NAMESPACE();
namespace ng::norms::HWY_NAMESPACE {

// out[0 .. n) = in[0 .. n) rounded to T: full vectors through StoreAs, the tail through Tail's buffer.
template <typename T>
void StoreRounded(const float* HWY_RESTRICT in, T* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) StoreAs(d, hn::LoadU(d, in + i), out + i);
  if (i < n) {
    Tail<decltype(d), T> tail(size_t(n - i));
    tail.store(d, LoadTailA(d, in + i, size_t(n - i)), out + i);
  }
}

// out[0 .. n) = in[0 .. n) widened to float: full vectors through LoadAs, the tail through Tail's buffer.
template <typename T>
void LoadWidened(const T* HWY_RESTRICT in, float* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(LoadAs(d, in + i), d, out + i);
  if (i < n) StoreTailA(d, Tail<decltype(d), T>(in + i, size_t(n - i)).load(d), out + i, size_t(n - i));
}

void StoreRoundedF16(const float* in, hwy::float16_t* out, int64_t n) {
  StoreRounded(in, out, n);
}
void StoreRoundedBF16(const float* in, hwy::bfloat16_t* out, int64_t n) {
  StoreRounded(in, out, n);
}
void LoadWidenedF16(const hwy::float16_t* in, float* out, int64_t n) {
  LoadWidened(in, out, n);
}
void LoadWidenedBF16(const hwy::bfloat16_t* in, float* out, int64_t n) {
  LoadWidened(in, out, n);
}

}  // namespace ng::norms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::norms {

HWY_EXPORT(StoreRoundedF16);
HWY_EXPORT(StoreRoundedBF16);
HWY_EXPORT(LoadWidenedF16);
HWY_EXPORT(LoadWidenedBF16);

void store_rounded(const float* in, f16* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(StoreRoundedF16)(in, reinterpret_cast<hwy::float16_t*>(out), n);
}
void store_rounded(const float* in, bf16* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(StoreRoundedBF16)(in, reinterpret_cast<hwy::bfloat16_t*>(out), n);
}
void load_widened(const f16* in, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(LoadWidenedF16)(reinterpret_cast<const hwy::float16_t*>(in), out, n);
}
void load_widened(const bf16* in, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(LoadWidenedBF16)(reinterpret_cast<const hwy::bfloat16_t*>(in), out, n);
}

}  // namespace ng::norms
#endif  // HWY_ONCE
