// Row and column sums for the reductions (ops/reduce.cpp): the scalar reference loops, and Highway (SIMD)
// versions with dynamic dispatch. All accumulate in double, whatever the input type.
//
//   sum_row(x, n)            = sum_j x_j
//   sum_sq_dev_row(x, n, mu) = sum_j (x_j - mu)^2          (var's second pass)
//   add_rows_to(x, R, C, ld, acc): acc_c += sum_r x_{r,c}  (a sum over the leading dims, e.g. a bias grad)
//
// Each function adds in a fixed order that depends only on n (and on the SIMD target), never on the
// thread count. tests/test_tensor_reduce_kernels.cpp checks fast == reference on every compiled target.
#pragma once

#include <cstdint>

namespace ng {

// ---- reference: the plain loops ----------------------------------------------------------------
// 8 running partial sums (so the loop has no serial dependency), combined pairwise at the end.
template <typename T>
double sum_row_reference(const T* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += double(x[i + k]);
  for (; i < n; ++i) acc[i % 8] += double(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
template <typename T>
double sum_sq_dev_row_reference(const T* x, int64_t n, double mu) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (double(x[i]) - mu) * (double(x[i]) - mu);
  return ss;
}
template <typename T>
void add_rows_to_reference(const T* x, int64_t R, int64_t C, int64_t ld, double* acc) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) acc[c] += double(x[r * ld + c]);
}

}  // namespace ng

namespace ng::simd {

// ---- fast: Highway ------------------------------------------------------------------------------
double sum_row(const float* x, int64_t n);
double sum_row(const double* x, int64_t n);
double sum_sq_dev_row(const float* x, int64_t n, double mu);
double sum_sq_dev_row(const double* x, int64_t n, double mu);
// x: R rows of C contiguous values, row r starting at x + r * ld; acc: C doubles, added to (rows in order).
void add_rows_to(const float* x, int64_t R, int64_t C, int64_t ld, double* acc);
void add_rows_to(const double* x, int64_t R, int64_t C, int64_t ld, double* acc);

}  // namespace ng::simd
