// cross_entropy: log-softmax and negative log-likelihood fused into one op.
//
//   logits: (..., V)   targets: (...) i64, each in [0, V) or equal to ignore_index
//   loss  = (1 / n) sum_{rows r with t_r != ignore_index} ( lse_r - x_{r, t_r} )
//   lse_r = log sum_v exp(x_{r, v})
//   n     = the number of non-ignored rows
//
// All targets ignored (n = 0): the loss is defined here as 0 and its gradient as 0 (PyTorch returns nan,
// 0/0). A batch made only of padding then contributes nothing instead of poisoning the weights with nan.
//
// A target outside [0, V) that is not ignore_index is an ng::Error naming the value, its position and V.
//
// Derivation of the backward and the design choices: docs/softmax_cross_entropy.md.
#pragma once

#include "tensor/tensor.h"

namespace ng {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// The per-row math, exposed for tests (fast == reference). x: N rows of length V (contiguous).
// Writes lse[r] = log sum_v exp(x_{r,v}) for every row.
template <typename T>
void logsumexp_rows_reference(const T* x, T* lse, int64_t N, int64_t V);
template <typename T>
void logsumexp_rows(const T* x, T* lse, int64_t N, int64_t V);
// The forward with its gradient: lse as above, and g_{r,v} = scale (softmax_{r,v} - [v == t_r]) (0 for
// a row with t_r == ignore_index). cross_entropy calls it with scale = 1/n when a gradient is wanted.
template <typename T>
void cross_entropy_rows_reference(const T* x, const int64_t* t, int64_t ignore_index, T scale, T* lse, T* g,
                                  int64_t N, int64_t V);
template <typename T>
void cross_entropy_rows(const T* x, const int64_t* t, int64_t ignore_index, T scale, T* lse, T* g, int64_t N,
                        int64_t V);

}  // namespace ng
