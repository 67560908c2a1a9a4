// Elementwise ops with NumPy broadcasting, and the activations.
//
// Each op's forward and backward are written side by side in elementwise.cpp. f16/bf16 inputs are
// computed in f32 and rounded back. Both operands of a binary op must have the same dtype and device.
#pragma once

#include "tensor/device_kernels.h"  // UnaryKind
#include "tensor/tensor.h"

namespace ng {

// ---- binary, broadcasting ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor rdiv(double s, const Tensor& a);  // s / a
// Elementwise maximum / minimum (gradient goes to the larger / smaller; ties split evenly; a NaN is passed
// on, and where either input is NaN both get the whole gradient, as in PyTorch).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// ---- unary ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor pow(const Tensor& x, double p);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor square(const Tensor& x);

// ---- activations ----
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Tensor silu(const Tensor& x);  // x * sigmoid(x)
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

// The scalar reference of the unary ops' backward, dx = dout * op'(x) given y = op(x) (any strides, CPU): the
// loop the SIMD kernel (tensor/kernels/elementwise_simd.h) is checked against. Not an autograd op.
Tensor unary_backward_reference(UnaryKind op, const Tensor& x, const Tensor& y, const Tensor& dout,
                                double p0 = 0, double p1 = 0);

// ---- in place, no autograd (optimizers, gradient accumulation); they bump the version ----
// With grad mode on they refuse a self or other that requires grad (check_untracked_in_place, tensor.h).
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);  // self += alpha * other
Tensor& mul_(Tensor& self, double s);                                 // self *= s

// ---- operators ----
// clang-format off
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
// clang-format on

// Shared checks: same dtype, same device. `op` names the caller in the message.
void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op);
// The CPU kernels' guard: a CUDA tensor here is an ng::Error naming `op` and the device, not a crash.
void check_cpu(const Tensor& t, const char* op);

}  // namespace ng
