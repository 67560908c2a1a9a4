// Matrix multiply with autograd.
//
//   a: (..., M, K), b: (..., K, N) -> (..., M, N); the batch dims "..." broadcast (NumPy rules).
//   2-D @ 2-D is the plain case. Both inputs must be at least 2-D.
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
