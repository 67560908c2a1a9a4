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

// Puts the inputs' .grad back when gradcheck returns or throws (fn may throw). Each distinct tensor is
// parked once: the same leaf passed twice used to be parked twice, the second time after the first reset,
// so its .grad was lost and its analytic gradient read after the first one's was put back.
class ParkedGrads {
 public:
  void park(const Tensor& t) {
    for (const auto& [impl, grad] : parked_)
      if (impl == &t.impl()) return;
    parked_.emplace_back(&t.impl(), t.impl().grad);
    t.impl().grad.reset();
  }
  ~ParkedGrads() {
    for (auto& [impl, grad] : parked_) impl->grad = std::move(grad);
  }

 private:
  std::vector<std::pair<TensorImpl*, std::shared_ptr<TensorImpl>>> parked_;
};

// Puts an element nudged by the finite differences back, also when fn throws.
class NudgedElement {
 public:
  explicit NudgedElement(double* p) : p_(p), orig_(*p) {}
  ~NudgedElement() { *p_ = orig_; }
  double orig() const { return orig_; }

 private:
  double* p_;
  double orig_;
};

void check_input(const std::vector<Tensor>& inputs, size_t i) {
  const Tensor& t = inputs[i];
  NG_CHECK(t.dtype() == DType::f64, "gradcheck", "input ", i, " has dtype ", dtype_name(t.dtype()),
           "; finite differences need f64 inputs (convert with .to(DType::f64))");
  NG_CHECK(t.is_leaf(), "gradcheck", "input ", i, " must be a leaf tensor (requires_grad_() on data)");
  NG_CHECK(t.device().is_cpu(), "gradcheck", "input ", i, " is on ", t.device().str(),
           "; finite differences nudge its elements from the host, so it must be on the cpu");
  // Nudging an element must move that element only. In an expanded view (stride 0) it moves the whole
  // dim, and in two leaves over one storage it moves the other input too: the numeric derivative is then
  // of something else, and gradcheck FAILED a correct backward.
  const int64_t d = expanded_dim(t);
  NG_CHECK(d < 0, "gradcheck", "input ", i, " has shape ", shape_str(t.shape()), " and strides ",
           shape_str(t.strides()), ": dim ", d, " has stride 0, so its ", t.size(d),
           " elements are one value in memory; pass a contiguous() copy");
  for (size_t j = 0; j < i; ++j) {
    const Tensor& o = inputs[j];
    if (!o.defined() || !o.requires_grad() || &o.impl() == &t.impl()) continue;
    NG_CHECK(o.impl().storage != t.impl().storage, "gradcheck", "inputs ", j, " and ", i,
             " are different tensors over the same memory, so nudging one moves the other; pass the same "
             "tensor twice, or contiguous() copies");
  }
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  // A negative rtol or atol made the tolerance negative, so every |error| / tolerance was <= 1 and a wrong
  // backward PASSED; eps 0 or NaN gave a NaN numeric derivative.
  NG_CHECK(opt.eps > 0 && std::isfinite(opt.eps), "gradcheck", "expected a finite eps > 0, got ", opt.eps);
  NG_CHECK(opt.atol >= 0 && opt.rtol >= 0 && std::isfinite(opt.atol) && std::isfinite(opt.rtol), "gradcheck",
           "expected finite tolerances atol, rtol >= 0, got atol ", opt.atol, ", rtol ", opt.rtol);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) check_input(inputs, i);

  // 1. Analytic: L = sum(f(x) * u), one backward. Park the inputs' current .grad, and put it back when
  //    gradcheck returns or throws. Every analytic gradient is read before any .grad is put back.
  ParkedGrads parked;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) parked.park(t);
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
      double lp, lm;
      {
        NudgedElement nudged(p);  // puts *p back, also when fn throws
        *p = nudged.orig() + opt.eps;
        lp = weighted_sum(fn(inputs), u);
        *p = nudged.orig() - opt.eps;
        lm = weighted_sum(fn(inputs), u);
      }
      double numeric = (lp - lm) / (2 * opt.eps);
      double abs_err = std::abs(a[k] - numeric);
      double tol = opt.atol + opt.rtol * std::abs(numeric);
      // (an exact match is within any tolerance, 0 included: 0 / 0 would be NaN, a failure that was
      // never recorded as the worst element)
      double ratio = !std::isfinite(abs_err) ? INFINITY : abs_err == 0 ? 0.0 : abs_err / tol;
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
