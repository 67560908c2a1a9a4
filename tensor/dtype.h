// Element types.
//
//   f32, f64  compute types: every kernel runs in one of these.
//   f16, bf16 storage types: loaded into f32, computed in f32, rounded back (round-to-nearest-even).
//   i64       integers, for token ids and indices.
//
// The f16/bf16 conversions are exact IEEE-754 round-to-nearest-even, handling inf, nan and subnormals,
// from f32 and from f64 alike (f64 goes through f32 rounded to odd, which cannot round twice: see
// f64_to_f32_odd below).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace ng {

enum class DType : uint8_t { f32, f64, f16, bf16, i64 };

// Bytes per element.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i64:
      return 8;
  }
  return 0;
}
const char* dtype_name(DType t);
// A float value on its way to i64 (truncated toward zero) must have one: NaN, inf and values outside
// [-2^63, 2^63) do not, and the C++ conversion is undefined for them (x86 gives -2^63 for all). Throws an
// ng::Error naming `op`, the value and its dtype `from`. Every float -> i64 path calls it (to, copy_,
// to_vector, fill_, from_vector, masked_fill, arange).
void check_has_i64(double v, DType from, const char* op);
// A value written into a tensor of dtype `to` (a fill, a masked fill, a scalar operand) must be one that
// dtype holds: for i64, check_has_i64; for a floating dtype, a finite v must stay finite when rounded to it
// (1e10 is inf in f16). +-inf and NaN pass: they are values of their own (an attention mask's -inf). `what`
// names v in the message: "op: <what> 1e+10 overflows f16 (it would be inf)".
void check_fits_dtype(double v, DType to, const char* op, const char* what = "value");
constexpr bool is_floating(DType t) {
  return t != DType::i64;
}
constexpr bool is_half(DType t) {
  return t == DType::f16 || t == DType::bf16;
}
// The dtype a kernel computes in: f16/bf16 compute in f32.
constexpr DType compute_dtype(DType t) {
  return is_half(t) ? DType::f32 : t;
}

// 16-bit storage types. They hold raw bits; arithmetic happens after converting to float.
struct f16 {
  uint16_t bits = 0;
};
struct bf16 {
  uint16_t bits = 0;
};

// ---- bf16: the top 16 bits of an f32 --------------------------------------------------------------
inline float bf16_to_f32(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // nan: keep it quiet
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return bf16{uint16_t(u >> 16)};
}

// ---- f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ---------------------------------------
float f16_to_f32(f16 h);
f16 f32_to_f16(float f);

// Element type <-> DType at compile time.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<f16> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::i64;
};

// Convert one element of any dtype to/from double/float (used by generic, non-hot paths).
template <typename T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, f16>)
    return f16_to_f32(v);
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16_to_f32(v);
  else
    return static_cast<double>(v);
}
// f64 -> f32 rounded to odd: truncated toward zero, and when that dropped anything the last bit set.
// Rounding f64 to f32 to nearest and then to f16/bf16 rounds twice: 1 + 2^-11 + 2^-40 goes to 1 + 2^-11 in
// f32, a tie in f16 that goes to even, 1; in one step it is above the tie and goes up to 1 + 2^-10 (stop 42;
// bf16 the same at 1 + 2^-8). An odd last bit keeps "something was dropped" visible to the second rounding,
// and with 13 or more bits to spare (f32 keeps 24, f16 11, bf16 8) that rounding is then the one-step one.
inline float f64_to_f32_odd(double v) {
  float f = static_cast<float>(v);  // to nearest
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);  // now truncated
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= 1u;  // inexact: odd (FLT_MAX is odd already, so a value past it stays finite, and f16/bf16 give inf)
  std::memcpy(&f, &u, 4);
  return f;
}
template <typename T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, f16>)
    return f32_to_f16(f64_to_f32_odd(v));
  else if constexpr (std::is_same_v<T, bf16>)
    return f32_to_bf16(f64_to_f32_odd(v));
  else
    return static_cast<T>(v);
}
// Load a storage element as float (f16/bf16/f32), the way every half-precision kernel reads input.
template <typename T>
inline float load_f32(T v) {
  if constexpr (std::is_same_v<T, f16>)
    return f16_to_f32(v);
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16_to_f32(v);
  else
    return static_cast<float>(v);
}
template <typename T>
inline T store_f32(float v) {
  if constexpr (std::is_same_v<T, f16>)
    return f32_to_f16(v);
  else if constexpr (std::is_same_v<T, bf16>)
    return f32_to_bf16(v);
  else
    return static_cast<T>(v);
}

}  // namespace ng

// Call a templated lambda with the C++ type of a runtime dtype:
//
//   NG_DISPATCH_FLOAT(x.dtype(), "my_op", [&]<typename scalar_t>() {
//     scalar_t* p = x.data<scalar_t>(); ...
//   });
//
// The lambda body is a template, so `if constexpr` on scalar_t discards what does not apply.
// NG_DISPATCH_FLOAT covers f32/f64 (the compute types); NG_DISPATCH_ALL covers all five dtypes.
#define NG_DISPATCH_CASE(DT, T, ...)        \
  case DT: {                                \
    (__VA_ARGS__).template operator()<T>(); \
    break;                                  \
  }
#define NG_DISPATCH_FLOAT(dtype, op, ...)                                           \
  do {                                                                              \
    switch (dtype) {                                                                \
      NG_DISPATCH_CASE(::ng::DType::f32, float, __VA_ARGS__)                        \
      NG_DISPATCH_CASE(::ng::DType::f64, double, __VA_ARGS__)                       \
      default:                                                                      \
        ::ng::fail(op, "expected dtype f32 or f64, got ", ::ng::dtype_name(dtype)); \
    }                                                                               \
  } while (0)
#define NG_DISPATCH_ALL(dtype, op, ...)                            \
  do {                                                             \
    switch (dtype) {                                               \
      NG_DISPATCH_CASE(::ng::DType::f32, float, __VA_ARGS__)       \
      NG_DISPATCH_CASE(::ng::DType::f64, double, __VA_ARGS__)      \
      NG_DISPATCH_CASE(::ng::DType::f16, ::ng::f16, __VA_ARGS__)   \
      NG_DISPATCH_CASE(::ng::DType::bf16, ::ng::bf16, __VA_ARGS__) \
      NG_DISPATCH_CASE(::ng::DType::i64, int64_t, __VA_ARGS__)     \
    }                                                              \
  } while (0)
