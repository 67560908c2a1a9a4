// float <-> f16 / bf16 on contiguous arrays (convert_simd.h): full vectors through the exact conversions of
// half-inl.h, the last partial vector through small buffers (tail-inl.h: never touch memory past n).
// The dispatch pattern is explained in elementwise_simd.cpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/convert_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "tensor/kernels/half-inl.h"
#include "tensor/kernels/tail-inl.h"

#include <cstring>

#include "tensor/kernels/convert_simd.h"

HWY_BEFORE_NAMESPACE();
namespace ng::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
void ToHalf(const float* HWY_RESTRICT in, T* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) StoreHalf2(d, hn::LoadU(d, in + i), hn::LoadU(d, in + i + L), out + i);
  for (; i + L <= n; i += L) StoreHalf(d, hn::LoadU(d, in + i), out + i);
  if (i < n) {
    HWY_ALIGN T hbuf[HWY_MAX_BYTES / sizeof(float)];
    StoreHalf(d, LoadTail(d, in + i, size_t(n - i)), hbuf);
    std::memcpy(out + i, hbuf, size_t(n - i) * sizeof(T));
  }
}

template <typename T>
void FromHalf(const T* HWY_RESTRICT in, float* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(LoadHalf(d, in + i), d, out + i);
  if (i < n) {
    HWY_ALIGN T hbuf[HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(hbuf, in + i, size_t(n - i) * sizeof(T));
    StoreTail(LoadHalf(d, hbuf), d, out + i, size_t(n - i));
  }
}

void F32ToF16(const float* in, hwy::float16_t* out, int64_t n) {
  ToHalf(in, out, n);
}
void F32ToBF16(const float* in, hwy::bfloat16_t* out, int64_t n) {
  ToHalf(in, out, n);
}
void F16ToF32(const hwy::float16_t* in, float* out, int64_t n) {
  FromHalf(in, out, n);
}
void BF16ToF32(const hwy::bfloat16_t* in, float* out, int64_t n) {
  FromHalf(in, out, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ng::simd {

HWY_EXPORT(F32ToF16);
HWY_EXPORT(F32ToBF16);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(BF16ToF32);

// ng::f16 / ng::bf16 and Highway's 16-bit types hold the same bits.
void convert(const float* in, f16* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16)(in, reinterpret_cast<hwy::float16_t*>(out), n);
}
void convert(const float* in, bf16* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBF16)(in, reinterpret_cast<hwy::bfloat16_t*>(out), n);
}
void convert(const f16* in, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F16ToF32)(reinterpret_cast<const hwy::float16_t*>(in), out, n);
}
void convert(const bf16* in, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BF16ToF32)(reinterpret_cast<const hwy::bfloat16_t*>(in), out, n);
}

}  // namespace ng::simd
#endif  // HWY_ONCE
