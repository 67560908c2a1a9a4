// optim::Adam and optim::AdamW, with PyTorch's update rules, defaults and bias correction.
//
// Per parameter p with gradient g, at step t (1-based), beta1, beta2, eps, lr, weight decay wd:
//
//   Adam:   g = g + wd * p                     (L2 penalty folded into the gradient: "coupled")
//   AdamW:  p = p * (1 - lr * wd)              (decoupled weight decay, applied to p before the update)
//
//   m = m + (1 - beta1) * (g - m)              (= beta1 m + (1 - beta1) g, written as PyTorch's lerp)
//   v = beta2 * v + (1 - beta2) * g^2
//   bias_correction1 = 1 - beta1^t,  bias_correction2 = 1 - beta2^t
//   step_size = lr / bias_correction1
//   denom     = sqrt(v) / sqrt(bias_correction2) + eps
//   p = p - step_size * m / denom
//
// The moments start at zero, so early m and v are biased toward zero; dividing by (1 - beta^t) undoes it.
// Defaults (PyTorch): lr 1e-3, betas (0.9, 0.999), eps 1e-8; weight decay 0 for Adam, 1e-2 for AdamW.
#pragma once

#include "optim/optimizer.h"

namespace ng::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class Adam : public Optimizer {
 public:
  Adam(nn::NamedTensors params, const AdamOptions& options = {});
  Adam(const std::vector<Tensor>& params, const AdamOptions& options = {});

  void step() override;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::map<std::string, double> hyperparameters() const override;

  AdamOptions options;  // options.lr is only the initial value: `lr` is what step() uses

 protected:
  // AdamW is Adam with decoupled weight decay.
  Adam(nn::NamedTensors params, const AdamOptions& options, bool decoupled);
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  void check_options() const;
  bool decoupled_ = false;
};

// AdamW: like Adam, but weight decay shrinks p directly (p *= 1 - lr * wd) instead of adding wd * p to g.
// PyTorch's default weight decay for AdamW is 1e-2.
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};

class AdamW : public Adam {
 public:
  AdamW(nn::NamedTensors params, const AdamWOptions& options = {});
  AdamW(const std::vector<Tensor>& params, const AdamWOptions& options = {});
};

}  // namespace ng::optim
