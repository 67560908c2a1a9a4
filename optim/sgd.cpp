#include "optim/sgd.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/device_kernels.h"
#include "tensor/parallel.h"

namespace ng::optim {

SGD::SGD(nn::NamedTensors params, const SGDOptions& o) : Optimizer(std::move(params), o.lr), options(o) {
  check_options();
}
SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& o) : Optimizer(params, o.lr), options(o) {
  check_options();
}

void SGD::check_options() const {
  // finite, and NaN refused (every comparison with NaN is false): a NaN one made every parameter NaN
  NG_CHECK(options.momentum >= 0 && std::isfinite(options.momentum), "SGD",
           "expected a finite momentum >= 0, got ", options.momentum);
  NG_CHECK(options.dampening >= 0 && options.dampening <= 1, "SGD", "expected 0 <= dampening <= 1, got ",
           options.dampening);
  NG_CHECK(options.weight_decay >= 0 && std::isfinite(options.weight_decay), "SGD",
           "expected a finite weight_decay >= 0, got ", options.weight_decay);
  NG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
           "nesterov needs momentum > 0 and dampening = 0, got momentum ", options.momentum,
           " and dampening ", options.dampening);
}

std::map<std::string, double> SGD::hyperparameters() const {
  return {{"lr", lr},
          {"momentum", options.momentum},
          {"dampening", options.dampening},
          {"weight_decay", options.weight_decay},
          {"nesterov", options.nesterov ? 1.0 : 0.0}};
}

std::vector<std::string> SGD::buffer_names() const {
  if (options.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  check_lr("SGD.step");
  // options is a public member, checked again: an inf weight_decay written between steps made every
  // parameter -inf.
  check_options();
  NoGradGuard no_grad;
  const double momentum = options.momentum, dampening = options.dampening, wd = options.weight_decay;
  const bool nesterov = options.nesterov;
  // Checked before any parameter changes (a failed step changes nothing).
  const std::vector<Tensor> grads = checked_grads("SGD.step");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& p = params_[i].second;
    if (on_device({p}, "SGD.step"))
      fail("SGD.step", "parameter '", params_[i].first, "' is on ", p.device().str(),
           ": SGD has no device kernel and runs on the CPU only (Adam and AdamW run on CUDA)");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Tensor& grad = grads[i];
    if (!grad.defined()) continue;
    state_[i].step += 1;
    // PyTorch's rule: the buffer starts as the gradient when it does not exist yet, whatever the step count
    // (momentum switched on after some plain steps starts it then, undampened).
    auto& bufs = state_[i].buffers;
    const bool first = momentum != 0 && bufs.find("momentum_buffer") == bufs.end();
    Tensor buf = momentum != 0 ? buffer(i, "momentum_buffer") : Tensor();

    NG_DISPATCH_FLOAT(p.dtype(), "SGD.step", [&]<typename scalar_t>() {
      using T = scalar_t;  // float or double: the update runs in the parameter's dtype
      {
        T* pp = p.data<T>();
        const T* pg = grad.data<T>();
        T* pb = buf.defined() ? buf.data<T>() : nullptr;
        const T lr_t = T(lr), mom = T(momentum), damp = T(1.0 - dampening), wd_t = T(wd);
        // One pass: each element's whole update at once.
        parallel_for(p.numel(), 1 << 14, [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            T g = pg[k];
            if (wd != 0) g = g + wd_t * pp[k];
            T d = g;
            if (pb) {
              pb[k] = first ? g : mom * pb[k] + damp * g;
              d = nesterov ? g + mom * pb[k] : pb[k];
            }
            pp[k] = pp[k] - lr_t * d;
          }
        });
      }
    });
    p.bump_version();
    if (buf.defined()) buf.bump_version();
  }
}

}  // namespace ng::optim
