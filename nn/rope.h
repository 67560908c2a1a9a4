// RoPE, rotary position embedding (Su et al. 2021), as used by Llama and MiniMind.
//
// Each head vector x (HS values, HS even) is cut into two halves, x1 = x[:HS/2] and x2 = x[HS/2:], and
// pair i = (x1[i], x2[i]) is rotated by the angle t * w_i, where t is the token's position and
//
//   w_i = theta^(-2i / HS),   i = 0 .. HS/2 - 1        (theta = 10000 in the paper, 1e6 in MiniMind)
//
//   out1[i] = x1[i] cos(t w_i) - x2[i] sin(t w_i)
//   out2[i] = x2[i] cos(t w_i) + x1[i] sin(t w_i)
//
// (the "rotate_half" layout of Llama/MiniMind, not the interleaved one). Rotating both q and k this way
// makes q_t . k_s depend on t and s only through t - s: the attention score sees relative position.
//
// Backward. A rotation R(a) is orthogonal, so its transpose is R(-a): the gradient is rotated back,
//
//   dx1[i] =  dout1[i] cos(t w_i) + dout2[i] sin(t w_i)
//   dx2[i] = -dout1[i] sin(t w_i) + dout2[i] cos(t w_i)
//
// which is the same kernel with sin negated. Nothing is saved but the tables.
#pragma once

#include "tensor/tensor.h"

namespace ng {

struct RopeTables {
  Tensor cos, sin;  // (T, HS/2), in the requested dtype; computed in double
};

// cos(t w_i) and sin(t w_i) for positions t = 0 .. T-1.
RopeTables rope_tables(int64_t T, int64_t head_size, double theta, DType dtype);

// x: (B, T, NH, HS), any layout (made contiguous); cos, sin: (>= T, HS/2), same dtype as x (f32 or f64).
// Returns the rotated x, same shape; differentiable in x ("RopeBackward").
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin);

// The plain loop of the forward (the reference in tests): no autograd, x contiguous (B, T, NH, HS).
Tensor apply_rope_reference(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace ng
