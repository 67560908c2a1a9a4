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

// causal_softmax: attention's masked softmax in one op. x: (..., T, T), rows = queries t, columns = keys s;
// query t sees only the keys s <= t:
//   y[..., t, s] = exp(x_ts - m_t) / sum_{s' <= t} exp(x_ts' - m_t)   for s <= t,   m_t = max_{s <= t} x_ts
//   y[..., t, s] = 0                                                 for s > t
// The same as softmax(masked_fill(x, s > t, -inf), -1), without the mask pass (and its backward); the
// entries above the diagonal are never read. The backward is softmax's: y = 0 there makes dx = 0 there.
Tensor causal_softmax(const Tensor& x);

// The per-row kernels, exposed for tests (fast == reference) and for ops that fuse them.
// x, y: `rows` contiguous rows of length L each.
//   softmax_rows_reference: the plain scalar loops below (the reference);
//   softmax_rows:           the fast path (Highway SIMD + OpenMP over rows; tensor/kernels/softmax_simd.cpp).
template <typename T>
void softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t L, bool log);
template <typename T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t L, bool log);
// Causal rows: row r is query t = r % T of a (T x T) block; softmax over its first t + 1 entries, zeros
// after. Reference and fast, as above.
template <typename T>
void causal_softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t L);
template <typename T>
void causal_softmax_rows(const T* x, T* y, int64_t rows, int64_t L);
// The backward of those rows (causal rows included), given y = the forward output and dy; reference and
// fast, as above.
template <typename T>
void softmax_backward_rows_reference(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log);
template <typename T>
void softmax_backward_rows(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log);

}  // namespace ng
