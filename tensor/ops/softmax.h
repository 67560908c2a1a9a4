// softmax and log_softmax along one dim.
//
//   softmax(x)_i     = exp(x_i - m) / sum_j exp(x_j - m)          m = max_j x_j
//   log_softmax(x)_i = (x_i - m) - log(sum_j exp(x_j - m))
//
// Subtracting the row maximum m changes nothing mathematically (it cancels) but keeps every exp() in
// (0, 1], so large logits cannot overflow to inf. f16/bf16 inputs are computed in f32 and rounded back.
//
// Derivations of both backwards: docs/softmax_cross_entropy.md.
#pragma once

#include "tensor/tensor.h"

namespace ng {

// x: any shape; the normalisation runs along `dim` (default: the last). Output: x's shape and dtype.
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// The per-row kernels, exposed for tests (fast == reference) and for ops that fuse them.
// x, y: `rows` contiguous rows of length L each.
//   softmax_rows_reference: the plain scalar loops below (the reference);
//   softmax_rows:           the fast path (Highway SIMD + OpenMP over rows; tensor/kernels/softmax_simd.cpp).
template <typename T>
void softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t L, bool log);
template <typename T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t L, bool log);
// The backward of those rows, given y = the forward output and dy; reference and fast, as above.
template <typename T>
void softmax_backward_rows_reference(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log);
template <typename T>
void softmax_backward_rows(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log);

}  // namespace ng
