#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/device_kernels.h"

namespace ng::optim {

namespace {
nn::NamedTensors name_them(const std::vector<Tensor>& params) {
  nn::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}
}  // namespace

Optimizer::Optimizer(nn::NamedTensors params, double lr_) : lr(lr_), params_(std::move(params)) {
  check_lr("Optimizer");
  // As in PyTorch: an empty list is almost always a mistake (parameters() of the wrong module, or a model
  // built after the optimizer), and step() would then silently do nothing.
  NG_CHECK(!params_.empty(), "Optimizer", "got an empty parameter list, expected at least one tensor");
  std::set<std::string> seen;
  std::set<const TensorImpl*> seen_tensors;
  for (auto& [name, p] : params_) {
    NG_CHECK(p.defined(), "Optimizer", "parameter '", name, "' is an undefined tensor");
    NG_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, "Optimizer", "parameter '", name,
             "' has dtype ", dtype_name(p.dtype()), ", expected f32 or f64");
    NG_CHECK(p.is_contiguous(), "Optimizer", "parameter '", name, "' must be contiguous, got shape ",
             shape_str(p.shape()), " with strides ", shape_str(p.strides()),
             " (a view: pass its .contiguous() copy, or the tensor it views)");
    NG_CHECK(seen.insert(name).second, "Optimizer", "parameter name '", name, "' appears twice");
    NG_CHECK(seen_tensors.insert(p.impl_ptr().get()).second, "Optimizer", "parameter '", name,
             "' is the same tensor as an earlier one (a tied weight must be listed once)");
  }
  check_no_shared_elements();
  state_.resize(params_.size());
}

Optimizer::Optimizer(const std::vector<Tensor>& params, double lr_) : Optimizer(name_them(params), lr_) {}

// Two parameters that are views of one storage (slices of one flat buffer) are fine as long as no element
// belongs to both: a shared element would be updated twice per step, with two sets of moments. The same
// tensor listed twice is caught above; this catches distinct views that overlap. Parameters are contiguous,
// so each one is the byte range [data, data + numel * itemsize) of its storage.
void Optimizer::check_no_shared_elements() const {
  struct Span {
    const void* storage;
    uintptr_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    if (p.numel() == 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(p.raw_data());
    spans.push_back(
        {p.impl_ptr()->storage.get(), begin, begin + uintptr_t(p.numel()) * dtype_size(p.dtype()), i});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.storage != b.storage ? std::less<const void*>()(a.storage, b.storage) : a.begin < b.begin;
  });
  for (size_t k = 1; k < spans.size(); ++k) {
    const Span &a = spans[k - 1], &b = spans[k];
    if (a.storage != b.storage || b.begin >= a.end) continue;
    const size_t first = std::min(a.index, b.index), second = std::max(a.index, b.index);
    fail(
        "Optimizer", "parameters '", params_[first].first, "' ", shape_str(params_[first].second.shape()),
        " and '", params_[second].first, "' ", shape_str(params_[second].second.shape()),
        " share elements (overlapping views of one storage); each element must belong to one parameter, or a "
        "step would update it twice");
  }
}

void Optimizer::check_lr(const char* op) const {
  NG_CHECK(lr >= 0 && std::isfinite(lr), op, "expected a finite learning rate >= 0, got ", lr);
}

std::vector<Tensor> Optimizer::checked_grads(const char* op) const {
  std::vector<Tensor> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    Tensor grad = p.grad();
    if (!grad.defined()) continue;
    // The parameter itself may have changed since construction (nn::cast_ to another dtype).
    NG_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, op, "parameter '", name, "' has dtype ",
             dtype_name(p.dtype()), ", expected f32 or f64");
    NG_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype(), op, "parameter '", name, "' has grad ",
             dtype_name(grad.dtype()), " ", shape_str(grad.shape()), ", expected ", dtype_name(p.dtype()),
             " ", shape_str(p.shape()));
    on_device({p, grad}, op);  // an ng::Error when the two are on different devices
    for (auto& [b, t] : state_[i].buffers) {
      NG_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype(), op, "parameter '", name, "' has ", b, " ",
               dtype_name(t.dtype()), " ", shape_str(t.shape()), ", expected ", dtype_name(p.dtype()), " ",
               shape_str(p.shape()), " (the parameter changed dtype or shape after its state was made)");
      on_device({p, t}, op);
    }
    out[i] = grad.is_contiguous() ? grad : grad.contiguous();
  }
  return out;
}

void Optimizer::zero_grad() {
  for (auto& [_, p] : params_) p.zero_grad();
}

Tensor& Optimizer::buffer(size_t i, const std::string& name) {
  auto& bufs = state_[i].buffers;
  auto it = bufs.find(name);
  if (it == bufs.end())
    it = bufs.emplace(name, zeros_like(params_[i].second.detach())).first;  // on the parameter's device
  return it->second;
}

nn::NamedTensors Optimizer::state_dict() const {
  nn::NamedTensors out;
  out.emplace_back("lr", scalar_tensor(lr, DType::f64));
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    out.emplace_back(name + ".step", from_vector(std::vector<int64_t>{state_[i].step}, Shape{}));
    // A copy: the live buffer would change at the next step() while the step count beside it stayed.
    for (auto& [b, t] : state_[i].buffers) out.emplace_back(name + "." + b, t.detach().clone());
  }
  return out;
}

void Optimizer::load_state_dict(const nn::NamedTensors& given_list) {
  // By name. A name given twice is refused rather than one of the two kept without a word.
  std::map<std::string, Tensor> given;
  std::vector<std::string> duplicated;
  for (const auto& [key, t] : given_list)
    if (!given.emplace(key, t).second &&
        std::find(duplicated.begin(), duplicated.end(), key) == duplicated.end())
      duplicated.push_back(key);
  std::vector<std::string> missing, mismatched;
  std::vector<ParamState> loaded(params_.size());
  double new_lr = lr;

  auto take = [&](const std::string& key) -> Tensor {
    auto it = given.find(key);
    if (it == given.end()) return Tensor();
    Tensor t = it->second;
    given.erase(it);
    return t;
  };

  if (Tensor t = take("lr"); t.defined()) {
    if (t.numel() != 1)
      mismatched.push_back("lr: expected one value, got shape " + shape_str(t.shape()));
    else if (!(t.item() >= 0 && std::isfinite(t.item())))
      mismatched.push_back("lr: expected a finite value >= 0, got " +
                           (std::ostringstream() << t.item()).str());
    else
      new_lr = t.item();
  } else {
    missing.push_back("lr");
  }

  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    Tensor step = take(name + ".step");
    if (!step.defined()) {
      missing.push_back(name + ".step");
    } else if (step.dtype() != DType::i64 || step.numel() != 1) {
      mismatched.push_back(name + ".step: expected one i64 value, got " +
                           std::string(dtype_name(step.dtype())) + " " + shape_str(step.shape()));
    } else if (int64_t k = step.to_vector<int64_t>()[0]; k < 0) {
      // A negative count would make Adam's bias correction 1 - beta^k zero or negative at the next step,
      // and every parameter NaN.
      mismatched.push_back(name + ".step: expected a count >= 0, got " + std::to_string(k));
    } else if (k == std::numeric_limits<int64_t>::max()) {
      // The next step() adds 1: signed overflow (undefined behaviour; in practice a negative count and NaN
      // parameters). No run gets there (2^63 steps), so such a count is a corrupt state.
      mismatched.push_back(name + ".step: expected a count < " + std::to_string(k) +
                           " (the next step adds 1 and would overflow int64), got " + std::to_string(k));
    } else {
      loaded[i].step = k;
    }
    // Buffers exist once the parameter has been stepped (for the optimizers that keep any).
    for (const std::string& b : buffer_names()) {
      Tensor t = take(name + "." + b);
      if (!t.defined()) {
        if (loaded[i].step > 0) missing.push_back(name + "." + b);
        continue;
      }
      if (t.shape() != p.shape() || t.dtype() != p.dtype()) {
        // The dtype too: converting (an f64 state into f32 parameters) would break exact resume, as the
        // model's part of a checkpoint already refuses.
        mismatched.push_back(name + "." + b + ": expected " + dtype_name(p.dtype()) + " " +
                             shape_str(p.shape()) + ", got " + dtype_name(t.dtype()) + " " +
                             shape_str(t.shape()));
        continue;
      }
      Tensor copy = empty_like(p.detach());  // on the parameter's device, as buffer() makes them
      NoGradGuard no_grad;
      copy.copy_(t);
      loaded[i].buffers.emplace(b, copy);
    }
  }

  std::ostringstream msg;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    msg << " " << what << ":";
    for (size_t i = 0; i < v.size(); ++i) msg << (i ? ", " : " ") << v[i];
    msg << ";";
  };
  std::vector<std::string> unexpected;
  for (auto& [k, _] : given) unexpected.push_back(k);
  list("duplicated", duplicated);
  list("missing", missing);
  list("unexpected", unexpected);
  list("wrong shape, dtype or value", mismatched);
  if (!msg.str().empty())
    fail((type_name() + ".load_state_dict").c_str(), "the state does not match the optimizer." + msg.str());

  lr = new_lr;
  state_ = std::move(loaded);
}

}  // namespace ng::optim
