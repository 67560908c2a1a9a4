#include "nn/module.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"

namespace ng::nn {

Tensor Module::forward(const Tensor&) {
  fail(type_name().c_str(), "this module has no single-input forward(x)");
}

void Module::check_name(const std::string& name) const {
  NG_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module", "invalid name '", name,
           "': names must be non-empty and contain no '.'");
  for (const auto& [n, _] : params_) NG_CHECK(n != name, "Module", "name '", name, "' is already registered");
  for (const auto& [n, _] : buffers_)
    NG_CHECK(n != name, "Module", "name '", name, "' is already registered");
  for (const auto& [n, _] : children_)
    NG_CHECK(n != name, "Module", "name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name);
  if (t.defined()) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name);
  buffers_.emplace_back(name, t);
  return t;
}

void Module::replace_tensor(const std::string& name, const Tensor& t) {
  for (auto& [n, v] : params_)
    if (n == name) {
      // A parameter, as register_parameter makes one: without this, the new tensor got no gradient and an
      // optimizer skipped it.
      v = t;
      if (v.defined()) v.requires_grad_(true);
      return;
    }
  for (auto& [n, v] : buffers_)
    if (n == name) return void(v = t);
  fail("Module", "no parameter or buffer named '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (const auto& [n, t] : params_)
      if (t.defined()) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_)
      if (t.defined()) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", params, buffers, out);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  NamedTensors all;
  collect("", true, true, all);
  std::set<TensorImpl*> moved;  // a tied weight is listed twice but moved once
  for (auto& [name, t] : all) {
    if (t.device() == device || !moved.insert(&t.impl()).second) continue;
    // Copy the data over, then swap the storage under the existing TensorImpl, so that every handle to
    // this tensor (the member, the registry, a tied module) sees the moved data.
    Tensor copy = t.detach().to(device);
    TensorImpl& impl = t.impl();
    impl.storage = copy.impl().storage;
    impl.strides = copy.strides();
    impl.offset = copy.offset();
    impl.grad.reset();
  }
}

namespace {
// Each tensor once, under the first name that reaches it (a module registered twice, a weight shared by two
// modules). Listed once per name, a shared parameter was counted twice by num_parameters() and by
// clip_grad_norm_(parameters()), and refused by the optimizers ("is the same tensor as an earlier one").
NamedTensors first_name_of_each(const NamedTensors& all) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : all)
    if (seen.insert(&t.impl()).second) out.emplace_back(name, t);
  return out;
}
}  // namespace

NamedTensors Module::named_parameters() const {
  NamedTensors all;
  collect("", true, false, all);
  return first_name_of_each(all);
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors all;
  collect("", false, true, all);
  return first_name_of_each(all);
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, m] : children_) m->train(on);
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

NamedTensors Module::state_dict() const {
  // Parameters then buffers of each module, depth first: the order named_parameters() gives.
  NamedTensors out;
  collect("", true, true, out);
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  // A name given twice is refused (as the optimizers' load_state_dict refuses it), where the first of the two
  // was kept without a word; so is an undefined tensor, which has no shape to check.
  std::map<std::string, Tensor> given;
  std::vector<std::string> duplicated, undefined;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, t).second &&
        std::find(duplicated.begin(), duplicated.end(), name) == duplicated.end())
      duplicated.push_back(name);
  }
  std::vector<std::string> missing, mismatched, unconvertible;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source), applied only if all is well
  for (auto& [name, dst] : state_dict()) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    if (!it->second.defined()) {
      undefined.push_back(name);
    } else if (it->second.shape() != dst.shape()) {
      mismatched.push_back(name + ": expected " + shape_str(dst.shape()) + ", got " +
                           shape_str(it->second.shape()));
    } else if (it->second.dtype() != dst.dtype()) {
      // Converted here, before anything is copied: a value with no counterpart in dst's dtype (NaN into an
      // i64 buffer) used to fail in the copy loop below, after the entries before it had been overwritten.
      try {
        NoGradGuard no_grad;
        copies.emplace_back(dst, it->second.detach().to(dst.dtype()));
      } catch (const Error& e) {
        unconvertible.push_back(name + " (" + e.what() + ")");
      }
    } else {
      copies.emplace_back(dst, it->second);
    }
    given.erase(it);
  }
  std::vector<std::string> unexpected;
  for (auto& [name, _] : given) unexpected.push_back(name);

  std::ostringstream msg;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    msg << " " << what << ":";
    for (size_t i = 0; i < v.size(); ++i) msg << (i ? ", " : " ") << v[i];
    msg << ";";
  };
  if (strict) list("missing", missing);
  if (strict) list("unexpected", unexpected);
  list("given twice", duplicated);
  list("undefined tensor", undefined);
  list("wrong shape", mismatched);
  list("not convertible to the module's dtype", unconvertible);
  if (!msg.str().empty()) fail("load_state_dict", "the state does not match the module." + msg.str());

  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : layers_) h = m->forward(h);
  return h;
}

}  // namespace ng::nn
