// The device dispatch point: how a core op (ng::add, ng::sum, ng::matmul, F::layer_norm, ...) runs on a
// tensor that is not on the CPU.
//
// Every core op was written for the CPU. Rather than a second copy of each op, a non-CPU device supplies
// one table of function pointers, DeviceKernels, and each op asks, at its top:
//
//   if (on_device({a, b}, "add")) return device_kernels(a, "add").binary(BinaryKind::add, a, b);
//
// on_device() is false for CPU tensors (one compare; the CPU path is otherwise untouched) and checks
// that all the op's tensors share one device when it is true (an error naming both devices otherwise).
//
// Two kinds of entries, and why:
//   - kernels (empty, fill, copy, binary, unary, sum, rope, masked_fill, adam_step, ...): compute only.
//     The core op keeps its autograd wiring, and its backward calls core ops, which dispatch again. So
//     add's backward (sum_to -> ng::sum) runs on the device with no extra code.
//   - whole ops (matmul, softmax, cross_entropy, embedding, layer_norm, rms_norm): the backend already has
//     an autograd op with one node (ng::cuda::matmul, ...), so the core op hands the whole call over.
//
// Who fills the table: the CUDA backend (cuda/dispatch.cpp), when normgrad is built with it. The core
// points at that table itself (device_kernels.cpp, under NORMGRAD_HAVE_CUDA), not through a static
// initializer in the backend: the linker drops unreferenced objects of a static library, initializers
// included. set_device_kernels() replaces the table; tests use it to install a host-memory "device"
// (tests/test_device_dispatch.cpp) so that the dispatch of every op TinyLM uses runs without a GPU.
//
// An op with no entry here refuses a device tensor with an ng::Error naming itself and the device
// (check_cpu in elementwise.h).
#pragma once

#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace ng {

// The binary and unary ops of tensor/ops/elementwise.cpp, in the order its kernels use.
enum class BinaryKind { add, sub, mul, div, max, min };
enum class UnaryKind { neg, exp, log, sqrt, rsqrt, abs, pow, clamp, square, relu, gelu, silu, sigmoid, tanh };

// The per-step scalars of one Adam/AdamW update (optim/adam.cpp computes them).
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW
  int64_t step = 1;        // 1-based, already incremented
};

struct DeviceKernels {
  const char* name = "";  // "cuda": used in error messages

  // ---- memory ----
  Tensor (*empty)(const Shape& shape, DType dtype, Device device) = nullptr;  // contiguous, uninitialised
  void (*fill)(const Tensor& t, double value) = nullptr;                      // in place, any strides
  // A fresh contiguous copy of src (any strides, broadcast views included) converted to `dtype`, on src's
  // device. Not recorded by autograd.
  Tensor (*copy)(const Tensor& src, DType dtype) = nullptr;
  // dst <- src, both contiguous, same dtype and numel, any devices (CPU <-> device included).
  void (*copy_bytes)(const Tensor& dst, const Tensor& src) = nullptr;
  // Tensor::to(Device): contiguous copy on `target`, differentiable (the gradient goes back to src's device).
  Tensor (*to_device)(const Tensor& src, Device target) = nullptr;

  // ---- elementwise kernels (outputs contiguous; inputs any strides, same dtype) ----
  Tensor (*binary)(BinaryKind op, const Tensor& a, const Tensor& b) = nullptr;  // broadcasting
  Tensor (*unary)(UnaryKind op, const Tensor& x, double p0, double p1) = nullptr;
  // dx = dout * op'(x), given x and y = op(x).
  Tensor (*unary_backward)(UnaryKind op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                           double p1) = nullptr;
  void (*add_)(const Tensor& self, const Tensor& other, double alpha) = nullptr;  // self += alpha other
  void (*mul_)(const Tensor& self, double s) = nullptr;                           // self *= s

  // ---- reductions: sum (or mean) over `dims` ({} = all), output shaped as ng::sum's ----
  Tensor (*sum)(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) = nullptr;

  // ---- attention pieces (kernels) ----
  // RoPE: out = R(sign * angle) x. x (B, T, NH, HS), cos/sin (>= T, HS/2): all contiguous.
  Tensor (*rope)(const Tensor& x, const Tensor& cos, const Tensor& sin, double sign) = nullptr;
  // out = value where mask != 0, else x. mask already expanded to x's shape (may be a broadcast view).
  Tensor (*masked_fill)(const Tensor& x, const Tensor& mask, double value) = nullptr;

  // ---- whole autograd ops ----
  Tensor (*matmul)(const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*softmax)(const Tensor& x, int64_t dim, bool log) = nullptr;
  Tensor (*cross_entropy)(const Tensor& logits, const Tensor& targets, int64_t ignore_index) = nullptr;
  Tensor (*embedding)(const Tensor& weight, const Tensor& ids) = nullptr;
  Tensor (*layer_norm)(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                       const Tensor& bias, double eps) = nullptr;
  Tensor (*rms_norm)(const Tensor& x, const Tensor& weight, double eps) = nullptr;

  // ---- optimizer: one fused in-place update of param, exp_avg, exp_avg_sq (all contiguous) ----
  void (*adam_step)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const AdamHyper& h) = nullptr;
};

// True when the op must run on a device: some defined tensor in `ts` is not on the CPU. Then all defined
// tensors must be on that one device (else an ng::Error naming `op` and both devices).
bool on_device(std::initializer_list<Tensor> ts, const char* op);

// The table for t's device. An ng::Error naming `op` and the device when no backend is registered for it.
const DeviceKernels& device_kernels(const Tensor& t, const char* op);
const DeviceKernels& device_kernels(Device device, const char* op);

// The table now used for CUDA devices (nullptr when normgrad was built without the backend).
const DeviceKernels* cuda_kernels();
// Replace it (nullptr: none); returns the previous one. For tests and for other backends.
const DeviceKernels* set_device_kernels(const DeviceKernels* kernels);

// Factories on a given device (the CPU ones when device is the CPU).
Tensor empty(const Shape& shape, DType dtype, Device device);
Tensor zeros(const Shape& shape, DType dtype, Device device);
Tensor full(const Shape& shape, double value, DType dtype, Device device);

}  // namespace ng
