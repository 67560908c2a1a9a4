// Activations as modules, so a Sequential can hold them. Each one calls the elementwise op of the same name
// (tensor/ops/elementwise.h), where the forward and its derivative are written side by side:
//
//   ReLU     max(0, x)                                   d/dx = [x > 0]
//   GELU     0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (the tanh approximation, PyTorch's
//            nn.GELU(approximate="tanh"); PyTorch's default is the exact erf form, which differs by < 1e-3)
//   SiLU     x * sigmoid(x)                              d/dx = s (1 + x (1 - s)),  s = sigmoid(x)
//   Tanh     tanh(x)                                     d/dx = 1 - tanh(x)^2
//   Sigmoid  1 / (1 + exp(-x))                           d/dx = s (1 - s)
#pragma once

#include "nn/module.h"
#include "tensor/ops/elementwise.h"

namespace ng::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string type_name() const override { return "ReLU"; }
};

class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return gelu(x); }
  std::string type_name() const override { return "GELU"; }
};

class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return silu(x); }
  std::string type_name() const override { return "SiLU"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return ng::tanh(x); }
  std::string type_name() const override { return "Tanh"; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string type_name() const override { return "Sigmoid"; }
};

}  // namespace ng::nn
