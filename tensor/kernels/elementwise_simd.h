// Highway (SIMD) kernels for contiguous elementwise loops, with dynamic dispatch: the best of SSE4, AVX2
// and AVX-512 is chosen at run time. The scalar loops in ops/elementwise.cpp are the reference.
#pragma once

#include <cstdint>

namespace ng::simd {

// y[i] = a[i] (op) b[i], op: 0 add, 1 sub, 2 mul, 3 div.
void binary(int op, const float* a, const float* b, float* y, int64_t n);
void binary(int op, const double* a, const double* b, double* y, int64_t n);
// The same with one operand a broadcast scalar: y[i] = a[0] (op) b[i], or y[i] = a[i] (op) b[0].
void binary_scalar_a(int op, const float* a, const float* b, float* y, int64_t n);
void binary_scalar_a(int op, const double* a, const double* b, double* y, int64_t n);
void binary_scalar_b(int op, const float* a, const float* b, float* y, int64_t n);
void binary_scalar_b(int op, const double* a, const double* b, double* y, int64_t n);

// y[i] = op(x[i]) for the ops that have a SIMD version; returns false (and does nothing) otherwise.
// op numbering follows ops/elementwise.cpp's Un enum.
bool unary(int op, const float* x, float* y, int64_t n);
bool unary(int op, const double* x, double* y, int64_t n);

// dx[i] = dout[i] * op'(x[i]), given y = op(x) from the forward, for the ops that have a SIMD version
// (all but pow and clamp); returns false (and does nothing) otherwise. The scalar reference is
// ng::unary_backward_reference (ops/elementwise.h). dx must not overlap the inputs.
bool unary_backward(int op, const float* x, const float* y, const float* dout, float* dx, int64_t n);
bool unary_backward(int op, const double* x, const double* y, const double* dout, double* dx, int64_t n);

}  // namespace ng::simd
