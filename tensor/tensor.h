// Tensor: a strided view of a Storage, plus the autograd fields.
//
//   element (i0, i1, ..., ik) lives at  storage + (offset + i0*stride0 + ... + ik*stridek) * dtype_size
//
// Because shape, strides and offset describe the view, view / permute / narrow / expand are free: they make
// a new Tensor over the same Storage (see tensor/ops/views.cpp). So is reshape where the strides allow it;
// otherwise it copies.
//
// A Tensor is a cheap handle (a shared_ptr to TensorImpl). Copying a Tensor copies the handle, not the
// data: `Tensor b = a;` makes b and a the same tensor. Use clone() for a deep copy.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace ng {

struct Node;  // autograd/node.h

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;     // in elements, may be 0 (broadcast) or anything (views)
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;

  // ---- autograd ----
  bool requires_grad = false;            // leaves: set by the user. non-leaves: set by ops.
  std::shared_ptr<TensorImpl> grad;      // accumulated gradient (leaves, or retain_grad())
  std::shared_ptr<Node> grad_fn;         // the op that made this tensor (null for leaves)
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that adds into .grad, made on demand
  bool retains_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return ng::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  std::string str() const;  // "Tensor(shape=(2, 3), dtype=f32)" plus values when small

  // ---- raw data ----
  // Pointer to element (0, ..., 0). T must match dtype() (checked).
  template <typename T>
  T* data() const {
    NG_CHECK(dtype_of<T>::value == dtype(), "Tensor::data", "requested ", dtype_name(dtype_of<T>::value),
             " pointer, but the tensor holds ", dtype_name(dtype()));
    return static_cast<T*>(impl().storage->data()) + impl().offset;
  }
  void* raw_data() const {
    return static_cast<char*>(impl().storage->data()) + impl().offset * int64_t(dtype_size(dtype()));
  }
  // The one value of a one-element tensor, as double (copied to the host first when on a device).
  double item() const;
  // All values in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- conversion / copies ----
  Tensor to(DType dtype) const;    // differentiable between floating dtypes
  Tensor to(Device device) const;  // CPU <-> CUDA (the CUDA backend registers the copy)
  Tensor contiguous() const;       // self if already contiguous, else a differentiable copy
  Tensor clone() const;            // always a fresh differentiable copy

  // ---- views (tensor/ops/views.cpp); all differentiable ----
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else a copy; one -1 allowed
  Tensor view(const Shape& shape) const;     // like reshape but never copies (error if impossible)
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;          // broadcast view: stride 0 on size-1 dims
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  // Mark a leaf as a parameter/input whose gradient we want. Error on a non-leaf.
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  // Accumulated gradient (undefined Tensor until a backward reaches this tensor).
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g);
  void zero_grad();    // drops .grad (next backward starts from zero)
  void retain_grad();  // non-leaf: keep its .grad too
  // Reverse-mode autodiff from this tensor. See autograd/engine.h for the rules.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  // Same data, cut from the graph.
  Tensor detach() const;

  // Version counter (shared by views). In-place writes bump it; autograd checks it.
  uint64_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- in-place (no autograd: for optimizers, init, and buffers; they bump the version) ----
  // Not recorded by autograd, so while grad mode is on they refuse a tensor that requires grad (self, or
  // copy_'s src): its gradient would silently miss the change. Under NoGradGuard they take any tensor.
  // (check_untracked_in_place below; add_ and mul_ in tensor/ops/elementwise.h follow the same rule.)
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // src is broadcast to self's shape and converted to its dtype

  // What an undefined tensor is, for the error messages that meet one.
  static constexpr const char* kUndefinedWhy =
      "a default-constructed ng::Tensor, with no shape and no data: expected one made by a factory such as "
      "zeros() or from_vector(), or by an op";

  // Every op checks its tensor arguments with check_defined() below, which names the op; this is the last
  // line of defence, for the accessors (shape(), dtype(), ...) that are not ops.
  TensorImpl& impl() const {
    NG_CHECK(impl_ != nullptr, "Tensor", "use of an undefined tensor (", kUndefinedWhy, ")");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---- an op's first check ----
// Each op checks the tensor arguments it needs before it reads one, so that an undefined one is named with
// the op instead of failing inside it as "Tensor: use of an undefined tensor":
//   check_defined("matmul", "a", a, "b", b);  ->  "matmul: b is an undefined tensor (a default-constructed
//   ..."
// An optional argument (a norm's weight, say) is not checked: there, undefined means "none".
inline void check_defined(const char* op, std::string_view name, const Tensor& t) {
  NG_CHECK(t.defined(), op, name, " is an undefined tensor (", Tensor::kUndefinedWhy, ")");
}
template <typename... More>
void check_defined(const char* op, std::string_view name, const Tensor& t, const More&... more) {
  check_defined(op, name, t);
  check_defined(op, more...);
}
// The same for each tensor of a list: "cat: tensors[1] is an undefined tensor (...)".
inline void check_each_defined(const char* op, std::string_view name, const std::vector<Tensor>& ts) {
  for (size_t i = 0; i < ts.size(); ++i)
    NG_CHECK(ts[i].defined(), op, name, "[", i, "] is an undefined tensor (", Tensor::kUndefinedWhy, ")");
}

// ---- factories (tensor/factory.cpp) ----
Tensor empty(const Shape& shape, DType dtype = DType::f32);
Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor scalar_tensor(double value, DType dtype = DType::f32);  // 0-d
// The *_like factories make the tensor on t's device (tensor/device_kernels.h has the others with a device).
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
// [start, end) in steps of `step`.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
Tensor arange(int64_t end, DType dtype = DType::i64);
// Copy values in; values.size() must equal numel(shape). Values are converted to `dtype`.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32);
Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType dtype = DType::f32);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::i64);
// 1-D from a list: tensor({1.0, 2.0, 3.0})
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::f32);
// 2-D from nested lists: tensor({{1, 2}, {3, 4}})
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype = DType::f32);

// The rule of the in-place ops that autograd does not record (fill_, copy_, add_, mul_): with grad mode on,
// neither `self` nor `other` (may be null) may require grad. An ng::Error names `op` and what to do instead.
void check_untracked_in_place(const Tensor& self, const Tensor* other, const char* op);

// In-place writes and memory that is shared (tensor.cpp, section "in place"):
// - A destination with two elements at one address (an expanded view: stride 0 on a dim of size > 1) would
//   be written several times, each write reading what the one before left (mul_ by 2 on three elements of
//   one address multiplies it by 8). copy_, add_ and mul_ refuse it with an ng::Error naming the op, the
//   shape and the strides; fill_ takes it, as PyTorch does, and writes each element of memory once.
// - A source that shares memory with the destination (two views of one tensor: x[1:].copy_(x[:-1]), or
//   m.copy_(m.t())) is read in full before anything is written: where their spans of memory meet, and the
//   source is not the very same elements as the destination, the source is copied first. The result is what
//   the op would give on a clone of the source; a loop over the elements in place would read values it had
//   already overwritten. (PyTorch refuses some of these cases and computes others in its own order.)
void check_no_internal_overlap(const Tensor& self, const char* op);
// The first dim of t with stride 0 and more than one element (an expanded view: several of t's elements
// are one value in memory), or -1 where there is none or t is empty. The one test behind
// check_no_internal_overlap, set_grad's and gradcheck's checks.
int64_t expanded_dim(const Tensor& t);
// src (already expanded to self's shape), or a copy of it where it shares memory with self (the rule above)
Tensor source_for_write(const Tensor& self, const Tensor& src);
// The same for a src of any shape that broadcasts to self's (NumPy rules), as copy_ and add_ take it: an
// ng::Error naming `op` where it does not (self is written in place, so only src is broadcast).
Tensor source_for_write(const Tensor& self, const Tensor& src, const char* op);

}  // namespace ng
