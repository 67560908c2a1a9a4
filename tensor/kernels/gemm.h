// GEMM: C = op(A) * op(B) (+ C if accumulate), row-major, op = transpose or not.
//
//   op(A): M x K.  A is stored M x K (lda >= K) when !trans_a, or K x M (lda >= M) when trans_a.
//   op(B): K x N.  B is stored K x N (ldb >= N) when !trans_b, or N x K (ldb >= K) when trans_b.
//   C:     M x N, ldc >= N.
//
// gemm_naive is the textbook triple loop and the reference in tests. gemm is the fast one.
// Both are deterministic: each C element sums over k in a fixed order, whatever the thread count.
#pragma once

#include <cstdint>

namespace ng {

template <typename T>
void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                int64_t ldb, T* C, int64_t ldc, bool accumulate);

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
          const double* B, int64_t ldb, double* C, int64_t ldc, bool accumulate);

}  // namespace ng
