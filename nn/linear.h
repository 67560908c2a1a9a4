// nn::Linear: y = x W^T + b, the affine layer, with PyTorch's default initialization.
//
//   x: (..., in) -> y: (..., out);  weight: (out, in), bias: (out)   (PyTorch's layout)
//
// Initialization (PyTorch nn.Linear.reset_parameters): kaiming_uniform_(weight, a = sqrt(5)), which is
//
//   gain  = sqrt(2 / (1 + a^2)) = sqrt(1/3)
//   bound = sqrt(3) * gain / sqrt(fan_in) = 1 / sqrt(fan_in)      ->  weight ~ U(-1/sqrt(in), 1/sqrt(in))
//
// and the bias is drawn from the same U(-1/sqrt(fan_in), 1/sqrt(fan_in)). The weight is drawn first, then
// the bias, from the Generator passed in, so a model built from a seeded Generator is reproducible.
// This exact distribution matters: the vanishing-activation experiment measures how a stack of these layers
// shrinks the signal (each layer multiplies the variance by about in * (1/3) / in = 1/3 before the
// activation).
#pragma once

#include "nn/module.h"
#include "tensor/random.h"

namespace ng::F {

// y = x W^T + b, composed of differentiable ops (matmul and a broadcast add). bias may be undefined.
// A contiguous x of any rank is flattened to one (N, in) matrix, so the whole batch is one GEMM.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace ng::F

namespace ng::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& gen = default_generator(),
         DType dtype = DType::f32);

  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }

  // Redraw weight and bias from U(-1/sqrt(in), 1/sqrt(in)) (what the constructor does).
  void reset_parameters(Generator& gen);

  int64_t in_features, out_features;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out), undefined when built without bias
};

}  // namespace ng::nn
