// RoPE's rotation of one (b, t) row of heads: the plain loop and its Highway twin (nn/rope_simd.cpp).
//
//   x: NH heads of HS values, head h at x + h * HS; c, s: the row's cos / sin tables (HS / 2 values each)
//   per head, with x1 = the first half, x2 = the second, sn = sign * s:
//     out1 = x1 * c - x2 * sn,   out2 = x2 * c + x1 * sn        (sign = +1 forward, -1 backward)
//
// Both do exactly these operations, each rounded on its own, hence the same bits: tests/test_nn_rope.cpp
// checks that on every target. Both live in nn/rope_simd.cpp, which is built with -ffp-contract=off, so the
// compiler fuses no multiply into an add in either. (The plain loop was an inline template here until
// stop 42: compiled into the test with -march=x86-64-v4, clang fused x1 * c - x2 * sn into an FMA and the
// test failed. GCC fuses too, at -O1 and above.)
#pragma once

#include <cstdint>

namespace ng {
// The plain loop, for float and double.
void rope_rotate_row_reference(const float* x, const float* c, const float* s, float sign, float* out,
                               int64_t NH, int64_t HS);
void rope_rotate_row_reference(const double* x, const double* c, const double* s, double sign, double* out,
                               int64_t NH, int64_t HS);
}  // namespace ng

namespace ng::simd {
void rope_rotate_row(const float* x, const float* c, const float* s, float sign, float* out, int64_t NH,
                     int64_t HS);
void rope_rotate_row(const double* x, const double* c, const double* s, double sign, double* out, int64_t NH,
                     int64_t HS);
}  // namespace ng::simd
