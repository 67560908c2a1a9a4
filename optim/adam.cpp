#include "optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "optim/adam_kernel.h"
#include "tensor/device_kernels.h"
#include "tensor/parallel.h"

namespace ng::optim {

namespace {
nn::NamedTensors name_them(const std::vector<Tensor>& params) {
  nn::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}
}  // namespace

Adam::Adam(nn::NamedTensors params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), options(o), decoupled_(decoupled) {
  check_options();
}
Adam::Adam(nn::NamedTensors params, const AdamOptions& o) : Adam(std::move(params), o, false) {}
Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& o) : Adam(name_them(params), o, false) {}

AdamW::AdamW(nn::NamedTensors params, const AdamWOptions& o) : Adam(std::move(params), o, true) {}
AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& o) : Adam(name_them(params), o, true) {}

void Adam::check_options() const {
  const char* op = decoupled_ ? "AdamW" : "Adam";
  NG_CHECK(options.beta1 >= 0 && options.beta1 < 1, op, "expected 0 <= beta1 < 1, got ", options.beta1);
  NG_CHECK(options.beta2 >= 0 && options.beta2 < 1, op, "expected 0 <= beta2 < 1, got ", options.beta2);
  // eps > 0, not >= 0 (PyTorch takes 0): with eps = 0 a value whose gradient has been 0 from the start
  // divides 0 by 0, and its parameter becomes NaN without a word.
  NG_CHECK(options.eps > 0 && std::isfinite(options.eps), op,
           "expected a finite eps > 0 (eps = 0 makes a parameter NaN where its gradient has been 0), got ",
           options.eps);
  NG_CHECK(options.weight_decay >= 0 && std::isfinite(options.weight_decay), op,
           "expected a finite weight_decay >= 0, got ", options.weight_decay);
}

std::map<std::string, double> Adam::hyperparameters() const {
  return {{"lr", lr},
          {"beta1", options.beta1},
          {"beta2", options.beta2},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay}};
}

void Adam::step() {
  NoGradGuard no_grad;
  const std::string op = type_name() + ".step";
  check_lr(op.c_str());
  // options is a public member, checked again: a NaN weight_decay written between steps made every parameter
  // NaN.
  check_options();
  const double beta1 = options.beta1, beta2 = options.beta2, eps = options.eps, wd = options.weight_decay;
  // Every parameter's gradient and state is checked before any parameter changes, so a failed step leaves
  // the parameters, moments and step counts as they were.
  const std::vector<Tensor> grads = checked_grads(op.c_str());
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Tensor& grad = grads[i];
    if (!grad.defined()) continue;
    Tensor m = buffer(i, "exp_avg");
    Tensor v = buffer(i, "exp_avg_sq");
    const int64_t t = ++state_[i].step;

    // The per-step scalars, in double (as PyTorch computes them in Python floats).
    const double bias_correction1 = 1.0 - std::pow(beta1, double(t));
    const double bias_correction2 = 1.0 - std::pow(beta2, double(t));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    const double decay = decoupled_ ? 1.0 - lr * wd : 1.0;  // AdamW's p *= (1 - lr wd)
    const bool coupled_wd = !decoupled_ && wd != 0;

    AdamScalars scalars;
    scalars.one_minus_beta1 = 1.0 - beta1;
    scalars.beta2 = beta2;
    scalars.one_minus_beta2 = 1.0 - beta2;
    scalars.eps = eps;
    scalars.step_size = step_size;
    scalars.bias_correction2_sqrt = bias_correction2_sqrt;
    scalars.weight_decay = wd;
    scalars.decay = decay;
    scalars.coupled_wd = coupled_wd;
    scalars.decoupled = decoupled_;
    if (on_device({p, grad, m, v}, op.c_str())) {
      // The backend's fused kernel (cuda/adam.cu for CUDA): the same update, from the same hyperparameters.
      AdamHyper h;
      h.lr = lr;
      h.beta1 = beta1;
      h.beta2 = beta2;
      h.eps = eps;
      h.weight_decay = wd;
      h.decoupled = decoupled_;
      h.step = t;
      device_kernels(p, op.c_str()).adam_step(p, grad, m, v, h);
      p.bump_version();
      m.bump_version();
      v.bump_version();
      continue;
    }
    // One pass: each element's moments and parameter are updated together (optim/adam_kernel.h; the scalar
    // loop there, adam_update_reference, is the same update written plainly).
    NG_DISPATCH_FLOAT(p.dtype(), op.c_str(), [&]<typename scalar_t>() {
      using T = scalar_t;  // float or double: the update runs in the parameter's dtype
      adam_update<T>(p.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), p.numel(), scalars);
    });
    p.bump_version();
    m.bump_version();
    v.bump_version();
  }
}

}  // namespace ng::optim
