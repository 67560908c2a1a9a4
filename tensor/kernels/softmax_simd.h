// Highway (SIMD) kernels for one contiguous row of softmax / log_softmax / cross-entropy, with dynamic
// dispatch (the best of SSE4, AVX2 and AVX-512 at run time). The scalar loops in ops/softmax.cpp and
// ops/loss.cpp are the reference; tests/test_ops_softmax.cpp checks fast == reference.
//
// The exp inside them is FastExp (kernels/fast_exp-inl.h: about 16 vector ops, relative error < FLT_EPSILON
// against std::exp; f64 uses Highway's Exp).
//
// Every function returns false, having written nothing useful, when the row holds a nan or an inf that
// makes x - max undefined (a SIMD exp need not propagate nan): the caller then runs the scalar reference
// for that row, which propagates nan the way std::exp does.
#pragma once

#include <cstdint>

namespace ng::simd {

// y_j = exp(x_j) for n floats: FastExp on its own, for its accuracy test against std::exp.
void fast_exp_row(const float* x, float* y, int64_t n);

// `end` (softmax_row, logsumexp_row, scaled_softmax_row): the end of the caller's rows, which the kernel
// may prefetch up to while it reads this one (rows of 4 KiB and more; see RowMax); nullptr: no prefetch.
// It changes no result.

// y = softmax(x) or log_softmax(x) over one row of length L (L >= 1).
bool softmax_row(const float* x, float* y, int64_t L, bool log, const float* end = nullptr);
bool softmax_row(const double* x, double* y, int64_t L, bool log, const double* end = nullptr);

// Backward of one row, given the forward output y and the upstream gradient dy:
//   softmax:      dx_j = y_j (dy_j - sum_k dy_k y_k)
//   log_softmax:  dx_j = dy_j - exp(y_j) sum_k dy_k
bool softmax_backward_row(const float* y, const float* dy, float* dx, int64_t L, bool log);
bool softmax_backward_row(const double* y, const double* dy, double* dx, int64_t L, bool log);

// lse = log(sum_j exp(x_j)), computed as m + log(sum_j exp(x_j - m)), m = max_j x_j.
bool logsumexp_row(const float* x, int64_t L, float* lse, const float* end = nullptr);
bool logsumexp_row(const double* x, int64_t L, double* lse, const double* end = nullptr);

// y_j = scale * softmax(x)_j and *lse = log(sum_j exp(x_j)) (cross-entropy's forward, which writes its
// gradient: ops/loss.cpp).
bool scaled_softmax_row(const float* x, float scale, float* y, int64_t L, float* lse,
                        const float* end = nullptr);
bool scaled_softmax_row(const double* x, double scale, double* y, int64_t L, double* lse,
                        const double* end = nullptr);

}  // namespace ng::simd
