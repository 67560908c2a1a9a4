// The fast GEMM (first version): pack op(A) and op(B) into row-major panels, then for each row of C
// run C[i, :] += A[i, k] * B[k, :] over k, a loop the compiler vectorises. Rows go to threads; each row
// sums over k in the same order, so results do not depend on the thread count.
// (The performance issue replaces this with a register-blocked Highway micro-kernel.)
#include <cstddef>
#include <vector>

#include "tensor/kernels/gemm.h"
#include "tensor/parallel.h"

namespace ng {

namespace {
template <typename T>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
               T* C, int64_t ldc, bool accumulate) {
  if (M == 0 || N == 0) return;
  // Pack op(B) as K x N row-major, so the inner loop reads it contiguously.
  std::vector<T> Bp;
  const T* Bk = B;
  int64_t ldbk = ldb;
  if (tb) {
    Bp.resize(std::size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) Bp[k * N + j] = B[j * ldb + k];
    Bk = Bp.data();
    ldbk = N;
  }
  parallel_for(M, 4, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T* c = C + i * ldc;
      if (!accumulate)
        for (int64_t j = 0; j < N; ++j) c[j] = T(0);
      for (int64_t k = 0; k < K; ++k) {
        const T a = ta ? A[k * lda + i] : A[i * lda + k];
        const T* b = Bk + k * ldbk;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  });
}
}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  gemm_impl(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double* C, int64_t ldc, bool accumulate) {
  gemm_impl(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace ng
