// The reference GEMM: three loops, written for clarity. See gemm.h.
#include "tensor/kernels/gemm.h"

namespace ng {

template <typename T>
void gemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      // C[i, j] = sum_k op(A)[i, k] * op(B)[k, j]
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        T a = trans_a ? A[k * lda + i] : A[i * lda + k];
        T b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += double(a) * double(b);
      }
      C[i * ldc + j] = accumulate ? T(double(C[i * ldc + j]) + acc) : T(acc);
    }
  }
}

template void gemm_naive<float>(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                                int64_t, float*, int64_t, bool);
template void gemm_naive<double>(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t, const double*,
                                 int64_t, double*, int64_t, bool);

}  // namespace ng
