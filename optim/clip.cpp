#include "optim/clip.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/kernels/reduce_simd.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace ng::optim {

namespace {
// ||g||_2 of one gradient, the squares summed in double (exact products) in a fixed order that depends only
// on g's size: simd::sum_sq_dev_row (tensor/kernels/reduce_simd.h), four f64 vector accumulators.
// Until 2026-11-25 this was a scalar loop with one running sum, each add waiting for the last: 2.9% of an
// exp2 training run's samples (perf, 2 threads), with the second thread idle meanwhile.
double l2_norm(const Tensor& g, const char* op) {
  // On a device: sum of squares there, in f64, and one number copied back.
  if (!g.device().is_cpu()) return std::sqrt(sum(square(g.to(DType::f64))).item());
  // f16 / bf16 gradients are widened to f32 first (exactly), as the device path widens them to f64.
  const Tensor c = is_half(g.dtype()) ? g.to(DType::f32) : g.contiguous();
  double s = 0;
  NG_DISPATCH_FLOAT(c.dtype(), op, [&]<typename scalar_t>() {
    s = simd::sum_sq_dev_row(c.data<scalar_t>(), c.numel(), 0.0);
  });
  return std::sqrt(s);
}

double grad_norm_of(const std::vector<Tensor>& params, const char* op) {
  NoGradGuard no_grad;
  double sum_sq = 0;
  check_each_defined(op, "params", params);
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    double n = l2_norm(g, op);
    sum_sq += n * n;
  }
  return std::sqrt(sum_sq);
}
}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  return grad_norm_of(params, "grad_norm");
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  // Departures from PyTorch (optim/clip.h): max_norm 0 is refused rather than zeroing every gradient, and a
  // non-finite total leaves the gradients as they are rather than multiplying them by 0 or NaN.
  NG_CHECK(max_norm > 0, "clip_grad_norm_", "expected max_norm > 0, got ", max_norm,
           " (max_norm 0 would zero every gradient, as PyTorch does; to skip a step, do not call step())");
  const double total = grad_norm_of(params, "clip_grad_norm_");
  if (!std::isfinite(total)) return total;  // returned for the caller to see; no gradient changes
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) mul_(g, coef);
    }
  }
  return total;
}

}  // namespace ng::optim
