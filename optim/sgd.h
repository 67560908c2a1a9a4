// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay,
// with PyTorch's torch.optim.SGD update rule. Per parameter p with gradient g, at each step:
//
//   g   = g + weight_decay * p                         (L2 penalty folded into the gradient)
//   buf = g                                  if the parameter has no momentum_buffer yet (no dampening)
//   buf = momentum * buf + (1 - dampening) * g   else
//   d   = g + momentum * buf                 if nesterov
//   d   = buf                                else       (d = g when momentum = 0, and no buffer is made)
//   p   = p - lr * d
//
// "No buffer yet" is the first step with momentum != 0, which is not always step 1: momentum written into
// `options` after some plain steps starts the buffer as that step's gradient, as PyTorch does.
#pragma once

#include "optim/optimizer.h"

namespace ng::optim {

struct SGDOptions {
  double lr = 1e-3;  // PyTorch's default
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(nn::NamedTensors params, const SGDOptions& options = {});
  SGD(const std::vector<Tensor>& params, const SGDOptions& options = {});

  void step() override;
  std::string type_name() const override { return "SGD"; }
  std::map<std::string, double> hyperparameters() const override;

  SGDOptions options;  // options.lr is only the initial value: `lr` is what step() uses

 protected:
  std::vector<std::string> buffer_names() const override;

 private:
  void check_options() const;
};

}  // namespace ng::optim
