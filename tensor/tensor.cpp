// Tensor basics: metadata, element access, conversion and copies. Views live in ops/views.cpp.
#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/iter.h"
#include "tensor/kernels/convert_simd.h"
#include "tensor/parallel.h"

namespace ng {

// (wrap_dim takes dim 0 and -1 of a 0-d tensor, as PyTorch's reductions do; a 0-d tensor has no size to
// read there, so these two refuse it first)
int64_t Tensor::size(int64_t d) const {
  NG_CHECK(dim() > 0, "Tensor::size", "dim ", d, " asked of a 0-d tensor, which has no dims");
  return shape()[wrap_dim(d, dim(), "Tensor::size")];
}
int64_t Tensor::stride(int64_t d) const {
  NG_CHECK(dim() > 0, "Tensor::stride", "dim ", d, " asked of a 0-d tensor, which has no dims");
  return strides()[wrap_dim(d, dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  // No values, nothing to lay out: contiguous whatever its strides (contiguous_strides gives a (4, 0) tensor
  // the strides (1, 1), which the loop below would call a gap).
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

// ---- copying with conversion: the one kernel behind to(), contiguous(), clone() and copy_() --------
// dst and src have the same shape (src may be a broadcast view); each may have any strides and dtype.
//
// Between float and f16 / bf16, a run contiguous on both sides goes to the SIMD kernels (the same bits as
// the scalar loop; tensor/kernels/convert_simd.h), in parallel chunks. Before them, f32 -> f16 of 4M values
// took 14.7 ms on one thread (AMD Zen 4; the scalar rounding branches per value).
template <typename D, typename S>
constexpr bool kSimdConvert = (std::is_same_v<S, float> &&
                               (std::is_same_v<D, f16> || std::is_same_v<D, bf16>)) ||
                              (std::is_same_v<D, float> &&
                               (std::is_same_v<S, f16> || std::is_same_v<S, bf16>));

// `op` names the caller (to, clone, copy_) in the errors.
static void copy_convert(const Tensor& dst, const Tensor& src, const char* op) {
  NG_CHECK(dst.device().is_cpu() && src.device().is_cpu(), op, "expected CPU tensors, got ",
           dst.device().str(), " and ", src.device().str());
  NG_DISPATCH_ALL(dst.dtype(), op, [&]<typename D>() {
    D* pd = static_cast<D*>(dst.raw_data());
    NG_DISPATCH_ALL(src.dtype(), op, [&]<typename S>() {
      const S* ps = static_cast<const S*>(src.raw_data());
      if constexpr (std::is_same_v<D, int64_t> && !std::is_same_v<S, int64_t>) {
        // Float -> i64: every value is checked before anything is written.
        for_each_strided<1>(
            src.shape(), {src.strides()},
            [&](const std::array<int64_t, 1>& o, int64_t n, const std::array<int64_t, 1>& st) {
              for (int64_t i = 0; i < n; ++i) check_has_i64(to_double(ps[o[0] + i * st[0]]), src.dtype(), op);
            });
      }
      for_each_strided<2>(dst.shape(), {dst.strides(), src.strides()},
                          [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
                            if constexpr (std::is_same_v<D, S>) {
                              // Same dtype, contiguous on both sides: the C library's copy (wide
                              // vector moves, or `rep movsb`). The loop below compiles to 16-byte
                              // moves at the baseline ISA, and measured 0.21-0.30 ms for 16 MiB on
                              // 2 threads depending on where the linker put it (the loop crossing a
                              // 64-byte line or not).
                              if (s[0] == 1 && s[1] == 1) {
                                std::memcpy(pd + o[0], ps + o[1], size_t(n) * sizeof(D));
                                return;
                              }
                            }
                            if constexpr (kSimdConvert<D, S>) {
                              if (s[0] == 1 && s[1] == 1) {
                                parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
                                  simd::convert(ps + o[1] + b, pd + o[0] + b, e - b);
                                });
                                return;
                              }
                            }
                            for (int64_t i = 0; i < n; ++i) {
                              const S v = ps[o[1] + i * s[1]];
                              D& out = pd[o[0] + i * s[0]];
                              if constexpr (std::is_same_v<D, S>)
                                out = v;
                              else if constexpr (std::is_same_v<S, int64_t> || std::is_same_v<D, int64_t>)
                                out = from_double<D>(to_double(v));
                              else if constexpr (std::is_same_v<D, double> || std::is_same_v<S, double>)
                                out = from_double<D>(to_double(v));
                              else
                                out = store_f32<D>(load_f32(v));
                            }
                          });
    });
  });
}

double Tensor::item() const {
  check_defined("item", "self", *this);
  NG_CHECK(numel() == 1, "item", "expected a tensor with one element, got shape ", shape_str(shape()));
  if (!device().is_cpu()) return detach().to(Device::cpu()).item();  // one value copied to the host
  double v = 0;
  NG_DISPATCH_ALL(dtype(), "item",
                  [&]<typename scalar_t>() { v = to_double(*static_cast<const scalar_t*>(raw_data())); });
  return v;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector", "self", *this);
  // A tensor on another device is copied to the CPU first (an error when no backend can copy it).
  Tensor c = device().is_cpu() ? contiguous() : to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  NG_DISPATCH_ALL(c.dtype(), "to_vector", [&]<typename scalar_t>() {
    const scalar_t* p = static_cast<const scalar_t*>(c.raw_data());
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, int64_t> && std::is_same_v<scalar_t, int64_t>) {
        out[i] = p[i];
      } else {
        if constexpr (std::is_same_v<T, int64_t>) check_has_i64(to_double(p[i]), c.dtype(), "to_vector");
        out[i] = static_cast<T>(to_double(p[i]));
      }
    }
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

Tensor Tensor::to(DType target) const {
  check_defined("to", "self", *this);
  if (target == dtype()) return *this;
  Tensor out;
  if (device().is_cpu()) {
    out = empty(shape(), target);
    NoGradGuard g;
    copy_convert(out, *this, "to");
  } else {
    out = device_kernels(*this, "to").copy(*this, target);
  }
  if (is_floating(target) && is_floating(dtype()) && needs_grad({*this})) {
    // d(to(x))/dx = identity: the gradient converts back to x's dtype.
    DType src_dtype = dtype();
    attach(out, "ToDtypeBackward", {*this},
           [src_dtype](const Tensor& dout) -> std::vector<Tensor> { return {dout.to(src_dtype)}; });
  }
  return out;
}

// Device copies are provided by the backend's device table (tensor/device_kernels.h), when one is built.
Tensor Tensor::to(Device target) const {
  check_defined("to", "self", *this);
  if (target == device()) return *this;
  const Device other = target.is_cpu() ? device() : target;
  NG_CHECK(!other.is_cuda() || cuda_kernels() != nullptr, "to", "cannot move a tensor from ", device().str(),
           " to ", target.str(),
           ": normgrad was built without the CUDA backend (NORMGRAD_CUDA=OFF or no nvcc)");
  return device_kernels(other, "to").to_device(*this, target);
}

Tensor Tensor::clone() const {
  check_defined("clone", "self", *this);
  Tensor out;
  if (device().is_cpu()) {
    out = empty(shape(), dtype());
    NoGradGuard g;
    copy_convert(out, *this, "clone");
  } else {
    out = device_kernels(*this, "clone").copy(*this, dtype());
  }
  if (needs_grad({*this}))
    attach(out, "CloneBackward", {*this}, [](const Tensor& dout) -> std::vector<Tensor> { return {dout}; });
  return out;
}

Tensor Tensor::contiguous() const {
  check_defined("contiguous", "self", *this);
  return is_contiguous() ? *this : clone();
}

void check_untracked_in_place(const Tensor& self, const Tensor* other, const char* op) {
  if (!grad_enabled()) return;
  const char* fix =
      "; autograd does not record this in-place op, so the gradient would silently miss it. In a "
      "differentiable computation use the out-of-place op (add, mul, ...); for an update of values (an "
      "optimizer step, an initialisation) wrap it in NoGradGuard";
  NG_CHECK(!self.requires_grad(), op, "the tensor changed in place requires grad", fix);
  NG_CHECK(other == nullptr || !other->requires_grad(), op, "its operand requires grad", fix);
}

int64_t expanded_dim(const Tensor& t) {
  if (t.numel() == 0) return -1;  // no element at all
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return d;
  return -1;
}

void check_no_internal_overlap(const Tensor& self, const char* op) {
  const int64_t d = expanded_dim(self);
  NG_CHECK(d < 0, op, "the tensor written in place has shape ", shape_str(self.shape()), " and strides ",
           shape_str(self.strides()), ": dim ", d, " has stride 0 (an expanded view), so ", self.size(d),
           " of its elements are one value in memory, and the op would write it ", self.size(d),
           " times. Write to the tensor before expanding it, or to a contiguous() copy");
}

// The elements' span of memory, in bytes from the storage's start: [lo, hi).
static std::pair<int64_t, int64_t> memory_span(const Tensor& t) {
  const int64_t es = int64_t(dtype_size(t.dtype()));
  int64_t lo = t.impl().offset, hi = t.impl().offset;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo * es, (hi + 1) * es};
}

Tensor source_for_write(const Tensor& self, const Tensor& src, const char* op) {
  if (src.shape() == self.shape()) return source_for_write(self, src);
  bool fits = src.dim() <= self.dim();
  for (int64_t i = 1; fits && i <= src.dim(); ++i) fits = src.size(-i) == 1 || src.size(-i) == self.size(-i);
  // Named here: expand's own message ("expand: cannot expand shape (5) to (3, 4)") named neither the op nor
  // which operand was which.
  NG_CHECK(fits, op, "source of shape ", shape_str(src.shape()),
           " cannot be broadcast to the destination's shape ", shape_str(self.shape()));
  return source_for_write(self, src.detach().expand(self.shape()));
}

Tensor source_for_write(const Tensor& self, const Tensor& src) {
  if (self.numel() == 0 || src.numel() == 0 || self.impl().storage != src.impl().storage) return src;
  const auto [a0, a1] = memory_span(self);
  const auto [b0, b1] = memory_span(src);
  if (a1 <= b0 || b1 <= a0) return src;  // one storage, but apart
  const bool same_elements = self.impl().offset == src.impl().offset && self.dtype() == src.dtype() &&
                             self.strides() == src.strides();  // (the shapes are equal here)
  if (same_elements) return src;  // each element is read, then written, at its own address
  return src.detach().clone();
}

Tensor& Tensor::fill_(double value) {
  check_defined("fill_", "self", *this);
  check_untracked_in_place(*this, nullptr, "fill_");
  check_fits_dtype(value, dtype(), "fill_");  // NaN into i64, 1e10 into f16
  if (!device().is_cpu()) {
    device_kernels(*this, "fill_").fill(*this, value);
    bump_version();
    return *this;
  }
  // An expanded view holds one element of memory at many positions (stride 0): visit it once. Writing it at
  // every position stored the same value, but from several threads at once: a data race (ThreadSanitizer
  // caught it on a (1, 16) row expanded to (100000, 16)), and the same write repeated 100000 times.
  Shape once = shape();
  for (int64_t d = 0; d < dim(); ++d)
    if (strides()[d] == 0) once[d] = std::min<int64_t>(once[d], 1);
  NG_DISPATCH_ALL(dtype(), "fill_", [&]<typename scalar_t>() {
    scalar_t v = from_double<scalar_t>(value);
    scalar_t* p = static_cast<scalar_t*>(raw_data());
    for_each_strided<1>(once, {strides()},
                        [&](const std::array<int64_t, 1>& o, int64_t n, const std::array<int64_t, 1>& s) {
                          for (int64_t i = 0; i < n; ++i) p[o[0] + i * s[0]] = v;
                        });
  });
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_", "self", *this, "src", src);
  check_untracked_in_place(*this, &src, "copy_");
  check_no_internal_overlap(*this, "copy_");
  Tensor s = source_for_write(*this, src, "copy_");  // src broadcast to self's shape (NumPy rules)
  if (!device().is_cpu()) {
    // On a device: convert and make contiguous there, then copy the bytes into self (contiguous).
    const DeviceKernels& k = device_kernels(*this, "copy_");
    NG_CHECK(is_contiguous(), "copy_", "on ", device().str(),
             ", expected a contiguous destination, got strides ", shape_str(strides()));
    Tensor here = s.device() == device() ? s.detach() : s.detach().contiguous().to(device());
    k.copy_bytes(*this, k.copy(here, dtype()));
    bump_version();
    return *this;
  }
  if (!s.device().is_cpu()) s = s.detach().to(Device::cpu());
  copy_convert(*this, s, "copy_");
  bump_version();
  return *this;
}

Tensor& Tensor::requires_grad_(bool on) {
  check_defined("requires_grad_", "self", *this);
  NG_CHECK(is_leaf(), "requires_grad_", "can only be set on a leaf tensor; this one was made by ",
           grad_fn()->name(), " (use detach() to make a leaf)");
  NG_CHECK(!on || is_floating(dtype()), "requires_grad_", "only floating tensors can require grad, got ",
           dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

void Tensor::set_grad(const Tensor& g) {
  check_defined("set_grad", "self", *this);
  if (g.defined()) {
    NG_CHECK(g.shape() == shape(), "set_grad", "gradient has shape ", shape_str(g.shape()), ", expected ",
             shape_str(shape()));
    // The next backward adds into it in place: another dtype or device failed only there, as add_'s error.
    NG_CHECK(g.dtype() == dtype(), "set_grad", "gradient has dtype ", dtype_name(g.dtype()), ", expected ",
             dtype_name(dtype()), " (the tensor's)");
    NG_CHECK(g.device() == device(), "set_grad", "gradient is on ", g.device().str(), ", expected ",
             device().str(), " (the tensor's device)");
    // An expanded gradient failed at the next backward, with add_'s error about a tensor written in place.
    const int64_t d = expanded_dim(g);
    NG_CHECK(d < 0, "set_grad", "gradient has shape ", shape_str(g.shape()), " and strides ",
             shape_str(g.strides()), ": dim ", d,
             " has stride 0 (an expanded view), so backward could not add into it in place; pass a "
             "contiguous() copy");
  }
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() {
  impl().grad.reset();
}

void Tensor::retain_grad() {
  check_defined("retain_grad", "self", *this);
  if (is_leaf()) return;  // leaves keep .grad anyway
  impl().retains_grad = true;
  grad_fn()->retained_output = impl_ptr();
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

Tensor Tensor::detach() const {
  check_defined("detach", "self", *this);
  auto d = std::make_shared<TensorImpl>();
  d->storage = impl().storage;
  d->shape = shape();
  d->strides = strides();
  d->offset = offset();
  d->dtype = dtype();
  return Tensor(d);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device=" << device().str();
  if (device().is_cpu() && numel() <= 16) {
    os << ", values=[";
    auto v = to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  }
  if (requires_grad()) os << ", requires_grad";
  return os.str() + ")";
}

}  // namespace ng
