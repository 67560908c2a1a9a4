// Views: new shape/strides/offset over the same Storage. No data moves.
//
// The backward of a view maps the gradient back through the inverse view:
//   reshape    <- reshape back          permute <- inverse permutation
//   narrow     <- zeros, then the gradient copied into the narrowed window
//   expand     <- sum over the broadcast dims (sum_to)
//   squeeze/unsqueeze <- reshape back
#include "tensor/ops/views.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "autograd/function.h"
#include "tensor/ops/elementwise.h"

namespace ng {

namespace {
// A Tensor sharing t's storage with a new geometry.
Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  auto v = std::make_shared<TensorImpl>();
  v->storage = t.impl().storage;
  v->shape = std::move(shape);
  v->strides = std::move(strides);
  v->offset = offset;
  v->dtype = t.dtype();
  return Tensor(v);
}

// Resolve one -1 in a requested shape.
Shape infer_shape(const Shape& want, int64_t n, const char* op, const Shape& from) {
  Shape s = want;
  int64_t known = 1, minus = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      NG_CHECK(minus < 0, op, "only one dimension can be -1, got ", shape_str(want));
      minus = int64_t(i);
    } else {
      NG_CHECK(s[i] >= 0, op, "invalid size ", s[i], " in shape ", shape_str(want));
      NG_CHECK(!__builtin_mul_overflow(known, s[i], &known), op, "shape ", shape_str(want),
               " is invalid for a tensor of shape ", shape_str(from), " (its sizes multiply past int64)");
    }
  }
  if (minus >= 0) {
    NG_CHECK(known != 0 && n % known == 0, op, "shape ", shape_str(want),
             " is invalid for a tensor of shape ", shape_str(from), " (", n, " elements)");
    s[minus] = n / known;
  }
  NG_CHECK(numel(s) == n, op, "shape ", shape_str(want), " is invalid for a tensor of shape ",
           shape_str(from), " (", n, " elements)");
  return s;
}

// Strides for viewing `t` as `shape` without copying, if possible (same algorithm as NumPy/PyTorch:
// walk both shapes in chunks whose elements are evenly spaced in memory).
bool view_strides(const Tensor& t, const Shape& shape, Strides& out) {
  const Shape& old_shape = t.shape();
  const Strides& old_st = t.strides();
  out.assign(shape.size(), 0);
  if (t.numel() == 0 || old_shape.empty()) {
    out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = old_st.empty() ? 1 : old_st.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    // A chunk ends where the next (outer) dim is not contiguous with this one.
    if (d == 0 || (old_shape[d - 1] != 1 && old_st[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_st[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor Tensor::view(const Shape& want) const {
  check_defined("view", "self", *this);
  Shape s = infer_shape(want, numel(), "view", shape());
  Strides st;
  NG_CHECK(view_strides(*this, s, st), "view", "cannot view a tensor of shape ", shape_str(shape()),
           " with strides ", shape_str(strides()), " as ", shape_str(s),
           " without copying; use reshape() (or contiguous() first)");
  Tensor out = make_view(*this, s, st, offset());
  if (needs_grad({*this})) {
    Shape in_shape = shape();
    // d view(x) / dx: the same elements, so the gradient is dout viewed back.
    attach(out, "ViewBackward", {*this},
           [in_shape](const Tensor& dout) -> std::vector<Tensor> { return {dout.reshape(in_shape)}; });
  }
  return out;
}

Tensor Tensor::reshape(const Shape& want) const {
  check_defined("reshape", "self", *this);
  Shape s = infer_shape(want, numel(), "reshape", shape());
  Strides st;
  if (view_strides(*this, s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  check_defined("flatten", "self", *this);
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  NG_CHECK(start <= end, "flatten", "start dim ", start, " must not come after end dim ", end);
  Shape s(shape().begin(), shape().begin() + start);
  // The sizes of an empty tensor need not multiply to an int64 (an expanded (0, 2^40, 2^40) has 0 values):
  // flattening two of them must be an error, not a size that wrapped around (undefined behaviour).
  int64_t mid = 1;
  for (int64_t d = start; d <= end; ++d)
    NG_CHECK(!__builtin_mul_overflow(mid, shape()[d], &mid), "flatten", "dims ", start, " to ", end,
             " of shape ", shape_str(shape()), " multiply past int64 (expected a flattened size below 2^63)");
  s.push_back(mid);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  check_defined("permute", "self", *this);
  NG_CHECK(int64_t(dims.size()) == dim(), "permute", "expected ", dim(), " dims for a tensor of shape ",
           shape_str(shape()), ", got ", dims.size());
  std::vector<int64_t> p(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape s(dims.size());
  Strides st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    p[i] = wrap_dim(dims[i], dim(), "permute");
    NG_CHECK(!seen[p[i]], "permute", "dim ", p[i], " appears twice in the permutation ", shape_str(dims),
             " (negative dims counted from the end): expected each of 0..", dim() - 1, " once");
    seen[p[i]] = true;
    s[i] = shape()[p[i]];
    st[i] = strides()[p[i]];
  }
  Tensor out = make_view(*this, s, st, offset());
  if (needs_grad({*this})) {
    // out dim i is input dim p[i], so the inverse sends dout's dim i back to position p[i].
    std::vector<int64_t> inv(p.size());
    for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = int64_t(i);
    attach(out, "PermuteBackward", {*this},
           [inv](const Tensor& dout) -> std::vector<Tensor> { return {dout.permute(inv)}; });
  }
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined("transpose", "self", *this);
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() < 2) return *this;  // 0-d (dims 0 and -1 both name "the" dim) and 1-D: nothing to swap
  std::vector<int64_t> p(static_cast<size_t>(dim()));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[d0], p[d1]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_defined("slice", "self", *this);
  NG_CHECK(dim() > 0, "slice", "expected a tensor with at least 1 dim, got a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  NG_CHECK(step >= 1, "slice", "step must be positive, got ", step);
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape();
  Strides st = strides();
  // ceil((end - start) / step), without end - start + step - 1, which overflowed for a step near 2^63
  // (a slice of 10 values with step INT64_MAX had 0 values instead of 1)
  s[d] = end > start ? (end - start - 1) / step + 1 : 0;
  // with 2 or more values step <= n, so the product fits; with 0 or 1 the stride is never used
  st[d] = s[d] > 1 ? strides()[d] * step : strides()[d];
  Tensor out = make_view(*this, s, st, offset() + start * strides()[d]);
  if (needs_grad({*this})) {
    Shape in_shape = shape();
    DType dt = dtype();
    // The gradient of a window: zeros everywhere, dout inside the window. It is built on the host (copy_
    // brings a device dout there) and goes back to dout's device: the device copy_ writes only contiguous
    // destinations, and a host gradient for a device tensor is refused by the engine.
    attach(out, "SliceBackward", {*this}, [in_shape, dt, d, start, end, step](const Tensor& dout) {
      Tensor dx = zeros(in_shape, dt);
      dx.slice(d, start, end, step).copy_(dout);
      return std::vector<Tensor>{dout.device().is_cpu() ? dx : dx.to(dout.device())};
    });
  }
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_defined("narrow", "self", *this);
  NG_CHECK(dim() > 0, "narrow", "expected a tensor with at least 1 dim, got a 0-d tensor");
  d = wrap_dim(d, dim(), "narrow");
  // length <= size - start, not start + length <= size: that sum overflowed for a length near 2^63
  if (!(start >= 0 && length >= 0 && start <= shape()[d] && length <= shape()[d] - start)) {
    const bool fits = length <= 0 || start <= std::numeric_limits<int64_t>::max() - length;
    fail("narrow", "window [", start, ", ",
         fits ? std::to_string(start + length) : std::string("2^63 or past"), ") is out of range for dim ", d,
         " of size ", shape()[d]);
  }
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_defined("select", "self", *this);
  NG_CHECK(dim() > 0, "select", "expected a tensor with at least 1 dim, got a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape()[d];
  NG_CHECK(index >= -n && index < n, "select", "index ", index, " is out of range for dim ", d, " of size ",
           n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& want) const {
  check_defined("expand", "self", *this);
  NG_CHECK(int64_t(want.size()) >= dim(), "expand", "cannot expand shape ", shape_str(shape()), " to ",
           shape_str(want), " (fewer dims)");
  size_t lead = want.size() - shape().size();
  Shape s(want.size());
  Strides st(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (i < lead) {
      NG_CHECK(want[i] >= 0, "expand", "cannot expand shape ", shape_str(shape()), " to ", shape_str(want),
               ": size ", want[i], " at new leading dim ", i,
               " is negative (expected a size >= 0; -1 keeps a size, and a new dim has none to keep)");
      s[i] = want[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    NG_CHECK(want[i] >= -1, "expand", "cannot expand shape ", shape_str(shape()), " to ", shape_str(want),
             ": size ", want[i], " at dim ", i, " is negative (-1 keeps the size)");
    int64_t w = want[i] == -1 ? have : want[i];
    NG_CHECK(have == w || have == 1, "expand", "cannot expand shape ", shape_str(shape()), " to ",
             shape_str(want), ": dim ", i, " has size ", have, ", which is neither ", w, " nor 1");
    s[i] = w;
    st[i] = have == w ? strides()[i - lead] : 0;
  }
  // Every tensor's sizes multiply to an int64 (numel, and the loops of every op, rely on it). A view of
  // (1) as (2^62, 4) was taken here, and the first op on it overflowed: sum's plan wrapped to 0 elements.
  // (A zero size makes 0 elements whatever the others are, as numel() counts them.)
  const bool no_values = std::find(s.begin(), s.end(), int64_t(0)) != s.end();
  int64_t n = 1;
  for (size_t i = 0; i < s.size() && !no_values; ++i)
    NG_CHECK(!__builtin_mul_overflow(n, s[i], &n), "expand", "cannot expand shape ", shape_str(shape()),
             " to ", shape_str(want), ": the sizes multiply past int64 (expected fewer than 2^63 elements)");
  if (s == shape()) return *this;
  Tensor out = make_view(*this, s, st, offset());
  if (needs_grad({*this})) {
    Shape in_shape = shape();
    // Broadcasting reads one element many times, so its gradient is the sum of those uses.
    attach(out, "ExpandBackward", {*this},
           [in_shape](const Tensor& dout) -> std::vector<Tensor> { return {sum_to(dout, in_shape)}; });
  }
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  check_defined("squeeze", "self", *this);
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_defined("unsqueeze", "self", *this);
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return reshape(s);
}

// ---- cat / stack -----------------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& ts, int64_t d) {
  NG_CHECK(!ts.empty(), "cat", "expected at least one tensor");
  check_each_defined("cat", "tensors", ts);
  const Tensor& first = ts[0];
  for (size_t i = 0; i < ts.size(); ++i)
    NG_CHECK(ts[i].dim() > 0, "cat", "tensor ", i,
             " is 0-d, and 0-d tensors have no dim to join along (use stack)");
  d = wrap_dim(d, first.dim(), "cat");
  Shape s = first.shape();
  s[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    NG_CHECK(t.dtype() == first.dtype(), "cat", "tensor ", i, " has dtype ", dtype_name(t.dtype()),
             ", expected ", dtype_name(first.dtype()));
    NG_CHECK(t.device() == first.device(), "cat", "expected all tensors on the same device, got ",
             first.device().str(), " (tensor 0) and ", t.device().str(), " (tensor ", i, ")");
    NG_CHECK(t.dim() == first.dim(), "cat", "tensor ", i, " has shape ", shape_str(t.shape()), ", expected ",
             first.dim(), " dims like ", shape_str(first.shape()));
    for (int64_t k = 0; k < t.dim(); ++k)
      NG_CHECK(k == d || t.size(k) == first.size(k), "cat", "tensor ", i, " has shape ", shape_str(t.shape()),
               ", which differs from ", shape_str(first.shape()), " outside dim ", d);
    // (sizes of expanded views can be near 2^63: their sum must not wrap around)
    NG_CHECK(!__builtin_add_overflow(s[d], t.size(d), &s[d]), "cat", "the sizes along dim ", d,
             " add up past int64 at tensor ", i, " (shape ", shape_str(t.shape()), ")");
  }
  check_cpu(first, "cat");  // no device kernel: refuse rather than return a CPU tensor
  Tensor out = empty(s, first.dtype());
  std::vector<int64_t> starts;
  int64_t at = 0;
  {
    NoGradGuard g;
    for (const Tensor& t : ts) {
      starts.push_back(at);
      out.narrow(d, at, t.size(d)).copy_(t);
      at += t.size(d);
    }
  }
  if (needs_grad(ts)) {
    std::vector<int64_t> lens;
    for (const Tensor& t : ts) lens.push_back(t.size(d));
    // Each input's gradient is its window of dout.
    attach(out, "CatBackward", ts, [d, starts, lens](const Tensor& dout) {
      std::vector<Tensor> g;
      for (size_t i = 0; i < starts.size(); ++i) g.push_back(dout.narrow(d, starts[i], lens[i]));
      return g;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t d) {
  NG_CHECK(!ts.empty(), "stack", "expected at least one tensor");
  check_each_defined("stack", "tensors", ts);
  d = wrap_dim(d, ts[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < ts.size(); ++i) {
    NG_CHECK(ts[i].device() == ts[0].device(), "stack", "expected all tensors on the same device, got ",
             ts[0].device().str(), " (tensor 0) and ", ts[i].device().str(), " (tensor ", i, ")");
    NG_CHECK(ts[i].shape() == ts[0].shape(), "stack", "tensor ", i, " has shape ", shape_str(ts[i].shape()),
             ", expected ", shape_str(ts[0].shape()), " like tensor 0");
    NG_CHECK(ts[i].dtype() == ts[0].dtype(), "stack", "tensor ", i, " has dtype ", dtype_name(ts[i].dtype()),
             ", expected ", dtype_name(ts[0].dtype()), " like tensor 0");
    us.push_back(ts[i].unsqueeze(d));
  }
  return cat(us, d);
}

}  // namespace ng
