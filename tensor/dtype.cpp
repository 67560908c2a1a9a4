// f16 <-> f32 conversion, exact round-to-nearest-even. See dtype.h.
#include "tensor/dtype.h"

#include "tensor/error.h"

namespace ng {

// See dtype.h. Values in [-2^63, 2^63) truncate into i64; NaN fails both comparisons.
void check_has_i64(double v, DType from, const char* op) {
  NG_CHECK(v >= -0x1p63 && v < 0x1p63, op, "cannot convert ", v, " (", dtype_name(from),
           ") to i64: expected a finite value in [-2^63, 2^63)");
}

void check_fits_dtype(double v, DType to, const char* op, const char* what) {
  if (to == DType::i64) return check_has_i64(v, DType::f64, op);
  if (!std::isfinite(v)) return;
  NG_DISPATCH_ALL(to, op, [&]<typename T>() {
    NG_CHECK(std::isfinite(to_double(from_double<T>(v))), op, what, " ", v, " overflows ", dtype_name(to),
             " (it would be inf)");
  });
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i64:
      return "i64";
  }
  return "?";
}

float f16_to_f32(f16 h) {
  uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t man = h.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf or nan (payload kept)
  } else if (exp != 0) {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);  // normal
  } else if (man == 0) {
    u = sign;  // +-0
  } else {
    // Subnormal: value = man * 2^-24. Shift the mantissa up until its leading 1 is the implicit bit.
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    u = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

f16 f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};  // nan
  if (abs >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: inf
  int32_t exp = int32_t(abs >> 23) - 127;
  uint32_t man = abs & 0x7fffffu;
  if (exp >= -14) {
    // Normal f16. Keep 10 mantissa bits, round the 13 dropped bits to nearest even.
    uint32_t half = (uint32_t(exp + 15) << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: fine
    return f16{uint16_t(sign | half)};
  }
  if (exp < -25) return f16{sign};  // below half the smallest subnormal: rounds to 0
  // Subnormal f16: value = m * 2^-24 with m = round(1.man * 2^(exp + 24)).
  man |= 0x800000u;      // implicit leading 1
  int shift = -exp - 1;  // 14 + (-14 - exp) - ... : bits to drop from the 24-bit significand
  uint32_t m = man >> shift;
  uint32_t rest = man & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
  return f16{uint16_t(sign | m)};
}

}  // namespace ng
