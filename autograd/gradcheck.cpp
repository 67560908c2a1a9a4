#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/random.h"

namespace ng {

std::string GradcheckResult::message() const {
  std::ostringstream os;
  os << (ok ? "gradcheck passed" : "gradcheck FAILED") << " (" << checked << " elements)";
  if (input >= 0)
    os << "; worst: input " << input << " index " << index << ": analytic " << analytic << ", numeric "
       << numeric << ", abs err " << abs_err << ", rel err " << rel_err;
  return os.str();
}

namespace {
// Address of the element with row-major index `flat` in a strided f64 tensor.
double* element(const Tensor& t, int64_t flat) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (flat % t.size(d)) * t.stride(d);
    flat /= t.size(d);
  }
  return static_cast<double*>(t.raw_data()) + off;
}

double weighted_sum(const Tensor& out, const Tensor& u) {
  double s = 0;
  std::vector<double> o = out.to_vector<double>(), w = u.to_vector<double>();
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    NG_CHECK(t.dtype() == DType::f64, "gradcheck", "input ", i, " has dtype ", dtype_name(t.dtype()),
             "; finite differences need f64 inputs (convert with .to(DType::f64))");
    NG_CHECK(t.is_leaf(), "gradcheck", "input ", i, " must be a leaf tensor (requires_grad_() on data)");
  }

  // 1. Analytic: L = sum(f(x) * u), one backward. Park the inputs' current .grad and restore it after.
  std::vector<Tensor> saved_grads;
  for (const Tensor& t : inputs) {
    saved_grads.push_back(t.defined() ? t.grad() : Tensor());
    if (t.defined() && t.requires_grad()) t.impl().grad.reset();
  }
  Tensor out;
  {
    EnableGradGuard g;
    out = fn(inputs);
  }
  NG_CHECK(out.dtype() == DType::f64, "gradcheck", "the function returned dtype ", dtype_name(out.dtype()),
           ", expected f64");
  Generator gen(opt.seed);
  Tensor u = randn(out.shape(), gen, DType::f64);
  std::vector<Tensor> analytic(inputs.size());
  if (out.requires_grad()) {
    EnableGradGuard g;
    sum(mul(out, u)).backward();
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    analytic[i] = t.grad().defined() ? t.grad() : zeros(t.shape(), DType::f64);
    t.impl().grad = saved_grads[i].impl_ptr();
  }
  out = Tensor();

  // 2. Numeric, element by element, with the worst element kept.
  GradcheckResult res;
  double worst_ratio = -1;
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    std::vector<double> a = analytic[i].to_vector<double>();
    for (int64_t k = 0; k < t.numel(); ++k) {
      double* p = element(t, k);
      const double orig = *p;
      *p = orig + opt.eps;
      double lp = weighted_sum(fn(inputs), u);
      *p = orig - opt.eps;
      double lm = weighted_sum(fn(inputs), u);
      *p = orig;
      double numeric = (lp - lm) / (2 * opt.eps);
      double abs_err = std::abs(a[k] - numeric);
      double tol = opt.atol + opt.rtol * std::abs(numeric);
      double ratio = std::isfinite(abs_err) ? abs_err / tol : INFINITY;
      ++res.checked;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        res.input = int(i);
        res.index = k;
        res.analytic = a[k];
        res.numeric = numeric;
        res.abs_err = abs_err;
        res.rel_err = abs_err / std::max(std::abs(numeric), 1e-300);
      }
      if (!(ratio <= 1.0)) res.ok = false;
    }
  }
  return res;
}

}  // namespace ng
