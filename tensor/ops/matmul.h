// Matrix multiply with autograd.
//
//   a: (..., M, K), b: (..., K, N) -> (..., M, N); the batch dims "..." broadcast (NumPy rules).
//   2-D @ 2-D is the plain case. A 1-D operand is a vector, as in NumPy and PyTorch: a (K) acts as (1, K)
//   and b (K) as (K, 1), and that dim is dropped from the result: (K) @ (K) -> a 0-d dot product,
//   (M, K) @ (K) -> (M), (K) @ (K, N) -> (N), (B, M, K) @ (K) -> (B, M). 0-d operands are an error.
//
// Backward (for each batch):   dA = dC @ B^T,   dB = A^T @ dC
// The transposes are views: the GEMM reads them as transposed operands, nothing is copied.
#pragma once

#include "tensor/tensor.h"

namespace ng {

Tensor matmul(const Tensor& a, const Tensor& b);
// Same contract, computed with gemm_naive (the reference in tests). Not differentiable.
Tensor matmul_naive(const Tensor& a, const Tensor& b);

}  // namespace ng
