// Glue between the norms' tensor-level code and their Highway kernels (used in HWY_ONCE sections only).
//
//   dispatch_storage(x.dtype(), "op", [&]<typename T, typename A>() { ... });
// calls the lambda with T = the storage type of x (float, double, ng::f16, ng::bf16) and A = its compute
// type (double for double, float otherwise).
//
//   NG_NORM_SIMD_CALL(T, LayerNormForward, args...)
// calls the best SIMD version of LayerNormForwardF32 / F64 / F16 / BF16 for T. hwy_ptr() turns ng::f16* and
// ng::bf16* into Highway's 16-bit types (the same bits).
#pragma once

#include <type_traits>

#include "hwy/highway.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

namespace ng::norms {

template <typename T>
struct HwyStorage {
  using type = T;
};
template <>
struct HwyStorage<f16> {
  using type = hwy::float16_t;
};
template <>
struct HwyStorage<bf16> {
  using type = hwy::bfloat16_t;
};

template <typename T>
inline auto hwy_ptr(T* p) {
  if constexpr (std::is_const_v<T>)
    return reinterpret_cast<const typename HwyStorage<std::remove_const_t<T>>::type*>(p);
  else
    return reinterpret_cast<typename HwyStorage<T>::type*>(p);
}

template <typename Fn>
void dispatch_storage(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::f32:
      fn.template operator()<float, float>();
      break;
    case DType::f64:
      fn.template operator()<double, double>();
      break;
    case DType::f16:
      fn.template operator()<f16, float>();
      break;
    case DType::bf16:
      fn.template operator()<bf16, float>();
      break;
    default:
      fail(op, "expected a floating dtype (f32, f64, f16, bf16), got ", dtype_name(dt));
  }
}

}  // namespace ng::norms

#define NG_NORM_SIMD_CALL(T, NAME, ...)              \
  do {                                               \
    if constexpr (std::is_same_v<T, float>)          \
      HWY_DYNAMIC_DISPATCH(NAME##F32)(__VA_ARGS__);  \
    else if constexpr (std::is_same_v<T, double>)    \
      HWY_DYNAMIC_DISPATCH(NAME##F64)(__VA_ARGS__);  \
    else if constexpr (std::is_same_v<T, ::ng::f16>) \
      HWY_DYNAMIC_DISPATCH(NAME##F16)(__VA_ARGS__);  \
    else                                             \
      HWY_DYNAMIC_DISPATCH(NAME##BF16)(__VA_ARGS__); \
  } while (0)

// Like NG_NORM_SIMD_CALL, for a kernel that returns a value: OUT = NAME##F32(args...) etc.
#define NG_NORM_SIMD_CALL_RET(OUT, T, NAME, ...)           \
  do {                                                     \
    if constexpr (std::is_same_v<T, float>)                \
      OUT = HWY_DYNAMIC_DISPATCH(NAME##F32)(__VA_ARGS__);  \
    else if constexpr (std::is_same_v<T, double>)          \
      OUT = HWY_DYNAMIC_DISPATCH(NAME##F64)(__VA_ARGS__);  \
    else if constexpr (std::is_same_v<T, ::ng::f16>)       \
      OUT = HWY_DYNAMIC_DISPATCH(NAME##F16)(__VA_ARGS__);  \
    else                                                   \
      OUT = HWY_DYNAMIC_DISPATCH(NAME##BF16)(__VA_ARGS__); \
  } while (0)
