// Residual add + norm in one op: y = norm(alpha * x + a), for LayerNorm and RMSNorm.
//
// Where the graph allows it. A Post-LN block computes norm(x + attn(x)) and DeepNorm norm(alpha x + attn(x)):
// the sum h = alpha x + a is used only by the norm, so it never has to exist as a tensor. The unfused graph
// writes h to memory and reads it back (add: read x, a, write h; norm: read h, write y); the fused op builds
// h a few rows at a time in a buffer that stays in cache and runs the norm's fast row kernel on it (read x
// and a, write y). The backward rebuilds the same rows from x and a (saved) instead of keeping h.
// (A Pre-LN block, x + attn(norm(x)), also needs the sum itself as its residual stream, so it is not a
// single-output op and is left unfused.)
//
//   x, a: (*, n), same shape and dtype; the norm runs over the last dim (LayerNorm: the trailing
//   normalized_shape dims, flattened into n).
//   Forward:  h = alpha * x + a,  y = norm(h)       (mean and rstd saved, as the plain norm saves them)
//   Backward: dh = norm_backward(dy, h)  ->  da = dh,  dx = alpha * dh,  dweight, dbias as the norm's.
//
// The result is bitwise the one of the unfused ops, norm(x * alpha + a), for f32 and f64: h is rounded
// the same way (alpha * x first, rounded, then + a, rounded; alpha itself in x's dtype), the row kernels are
// the same, and the weight-gradient partials use the same fixed row chunks. tests/test_norms_add_norm.cpp
// checks that, and gradchecks both ops. Anything the fast path does not cover (different shapes that need
// broadcasting, different dtypes, a device tensor) is computed by the unfused ops, so the result is the same.
#pragma once

#include "tensor/tensor.h"

namespace ng::F {

// layer_norm(alpha * x + a, normalized_shape, weight, bias, eps)
Tensor add_layer_norm(const Tensor& x, const Tensor& a, double alpha, const Shape& normalized_shape,
                      const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);

// rms_norm(alpha * x + a, weight, eps)
Tensor add_rms_norm(const Tensor& x, const Tensor& a, double alpha, const Tensor& weight = Tensor(),
                    double eps = 1e-5);

}  // namespace ng::F
