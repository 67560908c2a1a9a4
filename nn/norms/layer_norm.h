// LayerNorm: normalize each sample over its trailing dims (the ones named by normalized_shape).
//
//   y = (x - mean) / sqrt(var + eps) * weight + bias       mean, var over the trailing dims, per sample
//
// The formula, reference loop, fast kernel, backward with its derivation, and the module are all in
// nn/norms/layer_norm.cpp; the walk-through is docs/norms/layer_norm.md.
#pragma once

#include "nn/module.h"
#include "nn/norms/norm_common.h"
#include "tensor/tensor.h"

namespace ng::F {

// x: (*, normalized_shape); weight, bias: normalized_shape, or undefined (no affine / no bias).
// One autograd node ("LayerNormBackward") with a hand-written backward for x, weight and bias.
// f16/bf16 x: statistics and arithmetic in f32, the output rounded back to x's dtype. x may be
// non-contiguous. weight/bias have x's dtype, or f32 for an f16/bf16 x (anything else is an ng::Error:
// mixed dtypes are not converted silently); their gradients come back in that dtype.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ng::F

namespace ng::norms {

// The two halves of LayerNorm on raw tensors, exposed for tests and benchmarks (llm.c style).
// x: contiguous, viewed as (rows, n); weight, bias: n contiguous values in x's compute dtype, or undefined.
// Returns y (x's shape and dtype) and the saved statistics mean, rstd: (rows), compute dtype.
NormStats layer_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias, double eps,
                             Impl impl = Impl::fast);
// dy: like x (contiguous). Returns dx (x's dtype) and dweight, dbias (n, compute dtype) where asked for.
NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, bool need_dx, bool need_dweight, bool need_dbias,
                              Impl impl = Impl::fast);

// The fast kernels on a range of rows, on the calling thread, for ops that build their input rows on the fly
// (nn/norms/add_norm.cpp). Pointers point at the range's first row (mean, rstd: its first entry); w and b are
// never null; dw, db (null: not wanted) are this range's partial rows, added to. T: float, double, f16, bf16.
template <typename T, typename A>
void layer_norm_forward_rows(const T* x, const A* w, const A* b, T* y, A* mean, A* rstd, int64_t rows,
                             int64_t n, A eps);
template <typename T, typename A>
void layer_norm_backward_rows(const T* dy, const T* x, const A* w, const A* mean, const A* rstd, T* dx, A* dw,
                              A* db, int64_t rows, int64_t n);

}  // namespace ng::norms

namespace ng::nn {

// PyTorch's nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True).
// weight starts at ones, bias at zeros (both f32).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  explicit LayerNorm(int64_t C, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(Shape{C}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }

  Shape normalized_shape;
  double eps;
  Tensor weight;  // normalized_shape, or undefined without elementwise_affine
  Tensor bias;    // normalized_shape, or undefined
};

}  // namespace ng::nn
