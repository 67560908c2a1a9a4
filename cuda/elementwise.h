// Elementwise ops on CUDA tensors, with NumPy broadcasting. CPU twin: tensor/ops/elementwise.h.
//
// These are kernels, not autograd ops: forward and backward are separate calls. f16/bf16 are computed in
// f32 and rounded back, as on the CPU; f32 and f64 compute in their own type. Outputs are contiguous.
#pragma once

#include "tensor/tensor.h"

namespace ng::cuda {

enum class BinaryOp { add, sub, mul, div, maximum, minimum };
enum class UnaryOp { neg, exp, log, sqrt, rsqrt, abs, square, relu, gelu, silu, sigmoid, tanh, pow, clamp };

// out = a (op) b, shapes broadcast. Both on the same CUDA device, same dtype.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// out = op(x). pow uses p0 as the exponent; clamp uses [p0, p1].
Tensor unary(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0);
// dx = dout * op'(x), given x and y = op(x) (the same derivative table as the CPU's).
Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0 = 0,
                      double p1 = 0);
// A contiguous copy of x converted to `dtype` (any floating dtype; i64 only to i64).
Tensor cast(const Tensor& x, DType dtype);
// x[...] = value, in place on any strides.
void fill_(const Tensor& x, double value);

}  // namespace ng::cuda
