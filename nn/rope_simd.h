// RoPE's rotation of one (b, t) row of heads: the plain loop and its Highway twin (nn/rope_simd.cpp).
//
//   x: NH heads of HS values, head h at x + h * HS; c, s: the row's cos / sin tables (HS / 2 values each)
//   per head, with x1 = the first half, x2 = the second, sn = sign * s:
//     out1 = x1 * c - x2 * sn,   out2 = x2 * c + x1 * sn        (sign = +1 forward, -1 backward)
//
// Both do exactly these operations, each rounded on its own (the SIMD file is built with
// -ffp-contract=off, so the compiler fuses no multiply into an add), hence the same bits:
// tests/test_nn_rope.cpp checks that on every target.
#pragma once

#include <cstdint>

namespace ng {

template <typename F>
void rope_rotate_row_reference(const F* x, const F* c, const F* s, F sign, F* out, int64_t NH, int64_t HS) {
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

}  // namespace ng

namespace ng::simd {
void rope_rotate_row(const float* x, const float* c, const float* s, float sign, float* out, int64_t NH,
                     int64_t HS);
void rope_rotate_row(const double* x, const double* c, const double* s, double sign, double* out, int64_t NH,
                     int64_t HS);
}  // namespace ng::simd
