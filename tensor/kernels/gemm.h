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
void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate);

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
          const double* B, int64_t ldb, double* C, int64_t ldc, bool accumulate);

// A batch of independent GEMMs of one shape: C_b = op(A_b) op(B_b) (+ C_b), b in [0, batch), with
// A_b = A + a_offsets[b], B_b = B + b_offsets[b], C_b = C + b * c_stride. Small GEMMs (attention's
// per-head T x T products) run one per thread, in parallel over b; large ones run one after the other,
// each on all threads. Either way every C_b is computed exactly as gemm() computes it alone.
void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                  const int64_t* a_offsets, int64_t lda, const float* B, const int64_t* b_offsets,
                  int64_t ldb, float* C, int64_t c_stride, int64_t ldc, bool accumulate);
void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
                  const int64_t* a_offsets, int64_t lda, const double* B, const int64_t* b_offsets,
                  int64_t ldb, double* C, int64_t c_stride, int64_t ldc, bool accumulate);

}  // namespace ng
