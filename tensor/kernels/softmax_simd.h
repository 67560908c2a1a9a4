// Highway (SIMD) kernels for one contiguous row of softmax / log_softmax / cross-entropy, with dynamic
// dispatch (the best of SSE4, AVX2 and AVX-512 at run time). The scalar loops in ops/softmax.cpp and
// ops/loss.cpp are the reference; tests/test_ops_softmax.cpp checks fast == reference.
//
// Every function returns false, having written nothing useful, when the row holds a nan or an inf that
// makes x - max undefined (Highway's Exp maps nan to 0, which would hide it): the caller then runs the
// scalar reference for that row, which propagates nan the way std::exp does.
#pragma once

#include <cstdint>

namespace ng::simd {

// y = softmax(x) or log_softmax(x) over one row of length L (L >= 1).
bool softmax_row(const float* x, float* y, int64_t L, bool log);
bool softmax_row(const double* x, double* y, int64_t L, bool log);

// Backward of one row, given the forward output y and the upstream gradient dy:
//   softmax:      dx_j = y_j (dy_j - sum_k dy_k y_k)
//   log_softmax:  dx_j = dy_j - exp(y_j) sum_k dy_k
bool softmax_backward_row(const float* y, const float* dy, float* dx, int64_t L, bool log);
bool softmax_backward_row(const double* y, const double* dy, double* dx, int64_t L, bool log);

// lse = log(sum_j exp(x_j)), computed as m + log(sum_j exp(x_j - m)), m = max_j x_j.
bool logsumexp_row(const float* x, int64_t L, float* lse);
bool logsumexp_row(const double* x, int64_t L, double* lse);

// dx_j = scale * exp(x_j - lse): the softmax of the row times `scale` (cross-entropy's backward).
void scaled_softmax_from_lse_row(const float* x, float lse, float scale, float* dx, int64_t L);
void scaled_softmax_from_lse_row(const double* x, double lse, double scale, double* dx, int64_t L);

}  // namespace ng::simd
