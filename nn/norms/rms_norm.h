// RMSNorm: scale each sample by the root mean square of its features; no mean is removed, no bias added.
//
//   y = x / sqrt(mean(x^2) + eps) * weight                 mean over the last dim, per sample
//
// The formula, reference loop, fast kernel, backward with its derivation, and the module are all in
// nn/norms/rms_norm.cpp; the walk-through is docs/norms/rms_norm.md.
#pragma once

#include "nn/module.h"
#include "nn/norms/norm_common.h"
#include "tensor/tensor.h"

namespace ng::F {

// x: (*, C); weight: (C) or undefined. Normalizes over the last dim. One autograd node ("RMSNormBackward").
// f16/bf16 x: upcast to f32, compute everything (including the weight multiply) in f32, round the result
// back to x's dtype once; the backward also runs in f32. MiniMind's earlier
// `weight * norm(x.float()).type_as(x)` rounds twice (the normalized x, then the product; its current code
// rounds once, as here): rms_norm.cpp says how the two differ.
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), double eps = 1e-5);

}  // namespace ng::F

namespace ng::norms {

// x: contiguous, viewed as (rows, n); weight: n contiguous values in the compute dtype, or undefined.
// Returns y and rstd: (rows), compute dtype (mean stays undefined).
NormStats rms_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, double eps,
                           Impl impl = Impl::fast);
NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd, const Tensor& weight,
                            bool need_dx, bool need_dweight, Impl impl = Impl::fast);

// The fast kernels on a range of rows, on the calling thread (see layer_norm_forward_rows).
template <typename T, typename A>
void rms_norm_forward_rows(const T* x, const A* w, T* y, A* rstd, int64_t rows, int64_t n, A eps);
template <typename T, typename A>
void rms_norm_backward_rows(const T* dy, const T* x, const A* w, const A* rstd, T* dx, A* dw, int64_t rows,
                            int64_t n);

}  // namespace ng::norms

namespace ng::nn {

// RMSNorm(dim, eps = 1e-5, elementwise_affine = true), as in MiniMind / LLaMA. weight starts at ones (f32).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RMSNorm"; }

  int64_t dim;
  double eps;
  Tensor weight;  // (dim), or undefined without elementwise_affine
};

}  // namespace ng::nn
