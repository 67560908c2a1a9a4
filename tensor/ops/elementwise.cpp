// Elementwise ops: forward and backward side by side.
//
// Layout of this file:
//   1. the kernels: one strided loop for binary ops and one for unary ops (scalar math in a switch; the
//      contiguous case is a plain loop the compiler vectorises, and tensor/kernels/ has Highway versions
//      of the hot ones);
//   2. the ops: each calls a kernel, then attaches its backward with the derivative written above it.
#include "tensor/ops/elementwise.h"

#include <cmath>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/iter.h"
#include "tensor/kernels/elementwise_simd.h"
#include "tensor/parallel.h"

namespace ng {

void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op) {
  NG_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: got ", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()), " (convert one with .to(dtype))");
  NG_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device().str(),
           " and ", b.device().str());
  check_cpu(a, op);
}

void check_cpu(const Tensor& t, const char* op) {
  NG_CHECK(t.device().is_cpu(), op, "this CPU kernel got a tensor on ", t.device().str(),
           "; move it with .to(Device::cpu()), or use the CUDA kernels in cuda/backend.h");
}

// =====================================================================================================
// 1. Kernels
// =====================================================================================================
namespace {

using Bin = BinaryKind;  // add, sub, mul, div, max, min (tensor/device_kernels.h)

template <typename T>
inline T bin_apply(Bin op, T a, T b) {
  // clang-format off
  switch (op) {
    case Bin::add: return a + b;
    case Bin::sub: return a - b;
    case Bin::mul: return a * b;
    case Bin::div: return a / b;
    case Bin::max: return a > b || std::isnan(a) ? a : b;
    case Bin::min: return a < b || std::isnan(a) ? a : b;
  }
  // clang-format on
  return T(0);
}

// out = a (op) b with broadcasting. a, b: any strides; out: fresh, contiguous, broadcast shape.
Tensor binary_kernel(const Tensor& a, const Tensor& b, Bin op, const char* name) {
  if (on_device({a, b}, name)) return device_kernels(a, name).binary(op, a, b);
  check_same_dtype_device(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, a.dtype());
  Tensor ea = a.detach().expand(shape), eb = b.detach().expand(shape);
  NG_DISPATCH_FLOAT(a.dtype(), name, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* pa = static_cast<const T*>(ea.raw_data());
    const T* pb = static_cast<const T*>(eb.raw_data());
    T* po = out.data<T>();
    for_each_strided<3>(shape, {out.strides(), ea.strides(), eb.strides()},
                        [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
                          T* y = po + o[0];
                          const T* x0 = pa + o[1];
                          const T* x1 = pb + o[2];
                          // Fast paths (Highway kernels): both runs contiguous, or one of them a
                          // broadcast scalar (stride 0: x * 0.5, 1 - x, attention's scaling).
                          if (s[0] == 1 && op <= Bin::div) {
                            if (s[1] == 1 && s[2] == 1) return simd::binary(int(op), x0, x1, y, n);
                            if (s[1] == 0 && s[2] == 1) return simd::binary_scalar_a(int(op), x0, x1, y, n);
                            if (s[1] == 1 && s[2] == 0) return simd::binary_scalar_b(int(op), x0, x1, y, n);
                          }
                          for (int64_t i = 0; i < n; ++i)
                            y[i * s[0]] = bin_apply(op, x0[i * s[1]], x1[i * s[2]]);
                        });
  });
  return out;
}

using Un = UnaryKind;  // neg, exp, ..., tanh (tensor/device_kernels.h)

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluC = 0.044715;

template <typename T>
inline T un_apply(Un op, T x, T p0, T p1) {
  // clang-format off
  switch (op) {
    case Un::neg: return -x;
    case Un::exp: return std::exp(x);
    case Un::log: return std::log(x);
    case Un::sqrt: return std::sqrt(x);
    case Un::rsqrt: return T(1) / std::sqrt(x);
    case Un::abs: return std::abs(x);
    case Un::pow: return std::pow(x, p0);
    case Un::clamp: return x < p0 ? p0 : (x > p1 ? p1 : x);  // nan passes through
    case Un::square: return x * x;
    case Un::relu: return x <= T(0) ? T(0) : x;  // NaN stays NaN, as in PyTorch (x > 0 ? x : 0 gave 0)
    case Un::gelu: return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluC) * x * x * x)));
    case Un::silu: return x / (T(1) + std::exp(-x));
    case Un::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case Un::tanh: return std::tanh(x);
  }
  // clang-format on
  return x;
}

// d op(x) / dx, given x and y = op(x).
template <typename T>
inline T un_derivative(Un op, T x, T y, T p0, T p1) {
  // clang-format off
  switch (op) {
    case Un::neg: return T(-1);
    case Un::exp: return y;                               // d e^x = e^x
    case Un::log: return T(1) / x;                        // d log x = 1/x
    case Un::sqrt: return T(0.5) / y;                     // d x^(1/2) = 1 / (2 sqrt x)
    case Un::rsqrt: return T(-0.5) * y * y * y;           // d x^(-1/2) = -1/2 x^(-3/2) = -y^3 / 2
    case Un::abs: return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
    case Un::pow: return p0 == T(0) ? T(0) : p0 * std::pow(x, p0 - T(1));  // p x^(p-1); x^0 = 1 (not 0 * inf)
    case Un::clamp: return (x >= p0 && x <= p1) ? T(1) : T(0);
    case Un::square: return T(2) * x;
    case Un::relu: return x <= T(0) ? T(0) : T(1);  // 1 at NaN, as PyTorch (the forward passes it on)
    case Un::gelu: {
      // y = 0.5 x (1 + t), t = tanh(u), u = k (x + c x^3)
      // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
      T u = T(kSqrt2OverPi) * (x + T(kGeluC) * x * x * x);
      T t = std::tanh(u);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kGeluC) * x * x);
    }
    case Un::silu: {
      // y = x s, s = sigmoid(x):  dy/dx = s + x s (1 - s) = s (1 + x (1 - s))
      T s = T(1) / (T(1) + std::exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
    case Un::sigmoid: return y * (T(1) - y);             // s' = s (1 - s)
    case Un::tanh: return T(1) - y * y;                  // tanh' = 1 - tanh^2
  }
  // clang-format on
  return T(0);
}

// out = op(x). x: any strides; out: contiguous.
Tensor unary_kernel(const Tensor& x, Un op, double p0, double p1, const char* name) {
  if (on_device({x}, name)) return device_kernels(x, name).unary(op, x, p0, p1);
  Tensor out = empty(x.shape(), x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), name, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = out.data<T>();
    const T a = T(p0), b = T(p1);
    for_each_strided<2>(x.shape(), {out.strides(), x.strides()},
                        [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
                          T* y = po + o[0];
                          const T* xi = px + o[1];
                          if (s[1] == 1 && simd::unary(int(op), xi, y, n)) return;
                          for (int64_t i = 0; i < n; ++i) y[i] = un_apply(op, xi[i * s[1]], a, b);
                        });
  });
  return out;
}

// dx = dout * op'(x), the scalar loop: x, y, dout of one shape, any strides; dx fresh and contiguous.
// The reference for the SIMD kernel below (ng::unary_backward_reference), and the path for non-contiguous
// inputs and for the ops without a SIMD derivative (pow, clamp).
Tensor unary_backward_scalar(Un op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                             double p1, const char* name) {
  Tensor dx = empty(x.shape(), x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), name, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = static_cast<const T*>(x.raw_data());
    const T* py = static_cast<const T*>(y.raw_data());
    const T* pg = static_cast<const T*>(dout.raw_data());
    T* pd = dx.data<T>();
    const T a = T(p0), b = T(p1);
    for_each_strided<4>(x.shape(), {dx.strides(), x.strides(), y.strides(), dout.strides()},
                        [&](const std::array<int64_t, 4>& o, int64_t n, const std::array<int64_t, 4>& s) {
                          for (int64_t i = 0; i < n; ++i)
                            pd[o[0] + i] = pg[o[3] + i * s[3]] *
                                           un_derivative(op, px[o[1] + i * s[1]], py[o[2] + i * s[2]], a, b);
                        });
  });
  return dx;
}

// dx = dout * op'(x). x, y, dout: same shape, any strides.
//
// Contiguous inputs go to the Highway kernel (tensor/kernels/elementwise_simd.cpp), in chunks over the
// threads. NOTE: until 2026-11-24 the contiguous case was the scalar loop above, hoping the compiler would
// vectorize it; it did not (four pointers it could not prove apart), and ReLU's derivative compiled to a
// compare and a branch per element, mispredicted half the time on random signs. The backward of a
// 1024 x 1024 f32 ReLU on 1 thread (AMD Zen 4): scalar loop 6.2 ms, SIMD kernel 0.18 ms.
Tensor unary_backward_kernel(Un op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                             double p1, const char* name) {
  if (on_device({x, y, dout}, name)) return device_kernels(x, name).unary_backward(op, x, y, dout, p0, p1);
  const bool contiguous = x.is_contiguous() && y.is_contiguous() && dout.is_contiguous();
  if (!contiguous || op == Un::pow || op == Un::clamp)
    return unary_backward_scalar(op, x, y, dout, p0, p1, name);
  Tensor dx = empty(x.shape(), x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), name, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      simd::unary_backward(int(op), px + b, py + b, pg + b, pd + b, e - b);
    });
  });
  return dx;
}

// f16/bf16 compute in f32: convert in, compute, convert back. Autograd flows through the conversions.
template <typename F>
Tensor in_f32(const Tensor& x, F&& f) {
  return f(x.to(DType::f32)).to(x.dtype());
}

// ---- the op builders ----

Tensor unary(const Tensor& x, Un op, const char* name, const char* node, double p0 = 0, double p1 = 0) {
  check_defined(name, "x", x);
  NG_CHECK(is_floating(x.dtype()), name, "expected a floating tensor, got ", dtype_name(x.dtype()));
  if (is_half(x.dtype()))
    return in_f32(x, [&](const Tensor& x32) { return unary(x32, op, name, node, p0, p1); });
  Tensor y = unary_kernel(x, op, p0, p1, name);
  if (needs_grad({x})) {
    // dx = dout * op'(x); the derivative per op is in un_derivative above.
    // y is saved as a detached alias (same storage and version counter): saving y itself would make the cycle
    // y -> node -> y, leaked whenever no backward runs.
    SavedTensor sx(x, name), sy(y.detach(), name);
    attach(y, node, {x}, [=](const Tensor& dout) -> std::vector<Tensor> {
      return {unary_backward_kernel(op, sx.unpack(), sy.unpack(), dout, p0, p1, name)};
    });
  }
  return y;
}

}  // namespace

Tensor unary_backward_reference(UnaryKind op, const Tensor& x, const Tensor& y, const Tensor& dout, double p0,
                                double p1) {
  check_cpu(x, "unary_backward_reference");
  return unary_backward_scalar(op, x, y, dout, p0, p1, "unary_backward_reference");
}

// =====================================================================================================
// 2. Binary ops
// =====================================================================================================

// add: y = a + b.   da = dout, db = dout (each summed back over its broadcast dims).
Tensor add(const Tensor& a, const Tensor& b) {
  check_defined("add", "a", a, "b", b);
  if (is_half(a.dtype()) && a.dtype() == b.dtype())
    return add(a.to(DType::f32), b.to(DType::f32)).to(a.dtype());
  Tensor y = binary_kernel(a, b, Bin::add, "add");
  if (needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    attach(y, "AddBackward", {a, b}, [sa, sb](const Tensor& dout) -> std::vector<Tensor> {
      return {sum_to(dout, sa), sum_to(dout, sb)};
    });
  }
  return y;
}

// sub: y = a - b.   da = dout, db = -dout.
Tensor sub(const Tensor& a, const Tensor& b) {
  check_defined("sub", "a", a, "b", b);
  if (is_half(a.dtype()) && a.dtype() == b.dtype())
    return sub(a.to(DType::f32), b.to(DType::f32)).to(a.dtype());
  Tensor y = binary_kernel(a, b, Bin::sub, "sub");
  if (needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    bool need_b = b.requires_grad();
    attach(y, "SubBackward", {a, b}, [sa, sb, need_b](const Tensor& dout) -> std::vector<Tensor> {
      return {sum_to(dout, sa), need_b ? sum_to(neg(dout), sb) : Tensor()};
    });
  }
  return y;
}

// mul: y = a * b.   da = dout * b, db = dout * a.
Tensor mul(const Tensor& a, const Tensor& b) {
  check_defined("mul", "a", a, "b", b);
  if (is_half(a.dtype()) && a.dtype() == b.dtype())
    return mul(a.to(DType::f32), b.to(DType::f32)).to(a.dtype());
  Tensor y = binary_kernel(a, b, Bin::mul, "mul");
  if (needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    bool need_a = a.requires_grad(), need_b = b.requires_grad();
    // Save only what each gradient needs: da needs b, db needs a.
    SavedTensor saved_a(need_b ? a : Tensor(), "mul"), saved_b(need_a ? b : Tensor(), "mul");
    attach(y, "MulBackward", {a, b}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor da = need_a ? sum_to(mul(dout, saved_b.unpack()), sa) : Tensor();
      Tensor db = need_b ? sum_to(mul(dout, saved_a.unpack()), sb) : Tensor();
      return {da, db};
    });
  }
  return y;
}

// div: y = a / b.   da = dout / b,   db = -dout * a / b^2 = -dout * y / b.
Tensor div(const Tensor& a, const Tensor& b) {
  check_defined("div", "a", a, "b", b);
  if (is_half(a.dtype()) && a.dtype() == b.dtype())
    return div(a.to(DType::f32), b.to(DType::f32)).to(a.dtype());
  Tensor y = binary_kernel(a, b, Bin::div, "div");
  if (needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    bool need_a = a.requires_grad(), need_b = b.requires_grad();
    SavedTensor saved_b(b, "div"), saved_y(need_b ? y.detach() : Tensor(), "div");  // detached: no cycle
    attach(y, "DivBackward", {a, b}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor bb = saved_b.unpack();
      Tensor da = need_a ? sum_to(div(dout, bb), sa) : Tensor();
      Tensor db = need_b ? sum_to(neg(div(mul(dout, saved_y.unpack()), bb)), sb) : Tensor();
      return {da, db};
    });
  }
  return y;
}

// maximum / minimum: the gradient goes to whichever input was selected; on a tie, half to each.
static Tensor extremum(const Tensor& a, const Tensor& b, bool is_max) {
  const char* name = is_max ? "maximum" : "minimum";
  check_defined(name, "a", a, "b", b);
  if (is_half(a.dtype()) && a.dtype() == b.dtype())
    return extremum(a.to(DType::f32), b.to(DType::f32), is_max).to(a.dtype());
  Tensor y = binary_kernel(a, b, is_max ? Bin::max : Bin::min, name);
  if (needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    SavedTensor saved_a(a, name), saved_b(b, name), saved_y(y.detach(), name);  // detached: no cycle
    attach(y, is_max ? "MaximumBackward" : "MinimumBackward", {a, b}, [=](const Tensor& dout) {
      // weight_a = 1 where a won, 0 where b won, 1/2 on ties; weight_b the same for b. Where either input
      // is NaN (the forward passes it on) both inputs get the whole gradient, as in PyTorch, whose rule
      // zeroes a weight only where the comparison says the other input won, and no comparison with NaN
      // does. (Until stop 42 weight_b was 1 - weight_a, which sent a NaN a's gradient to b; stop 42 gave it
      // to the NaN input only, which the PyTorch comparison in bench/special_values showed is not its rule.)
      Tensor av = saved_a.unpack(), bv = saved_b.unpack(), yv = saved_y.unpack();
      // The weights are a CPU loop (no device kernel): a CUDA run brings a and b over and sends the weights
      // back. (Until stop 44 it refused here, so a model with maximum trained forward on the GPU and failed
      // only in backward.)
      const Device device = yv.device();
      if (!device.is_cpu()) {
        av = av.detach().to(Device::cpu());
        bv = bv.detach().to(Device::cpu());
      }
      Tensor wa = empty(yv.shape(), yv.dtype()), wb = empty(yv.shape(), yv.dtype());
      NG_DISPATCH_FLOAT(yv.dtype(), name, [&]<typename scalar_t>() {
        using T = scalar_t;
        Tensor ea = av.expand(yv.shape()).contiguous(), eb = bv.expand(yv.shape()).contiguous();
        const T* pa = ea.data<T>();
        const T* pb = eb.data<T>();
        T *pwa = wa.data<T>(), *pwb = wb.data<T>();
        for (int64_t i = 0; i < yv.numel(); ++i) {
          const bool nan = std::isnan(pa[i]) || std::isnan(pb[i]);
          const bool a_wins = (is_max ? pa[i] > pb[i] : pa[i] < pb[i]) || nan;
          const bool b_wins = (is_max ? pb[i] > pa[i] : pb[i] < pa[i]) || nan;
          pwa[i] = pa[i] == pb[i] ? T(0.5) : T(a_wins);
          pwb[i] = pa[i] == pb[i] ? T(0.5) : T(b_wins);
        }
      });
      if (!device.is_cpu()) {
        wa = wa.to(device);
        wb = wb.to(device);
      }
      return std::vector<Tensor>{sum_to(mul(dout, wa), sa), sum_to(mul(dout, wb), sb)};
    });
  }
  return y;
}
// clang-format off
Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false); }
// clang-format on

// Scalar forms: the scalar becomes a 0-d tensor of a's dtype (broadcast, never requires grad), so the op
// runs in a's dtype: a scalar that dtype cannot hold is an error naming the op (1e10 is inf in f16, and
// x * inf would be inf whatever x; NaN or 2.5 has no i64).
// On a device the 0-d scalar is made there (one tiny fill).
static Tensor scalar_like(double s, const Tensor& a, const char* op) {
  check_defined(op, "a", a);
  check_fits_dtype(s, a.dtype(), op, "the scalar");
  return a.device().is_cpu() ? scalar_tensor(s, a.dtype()) : full({}, s, a.dtype(), a.device());
}
// clang-format off
Tensor add(const Tensor& a, double s) { return add(a, scalar_like(s, a, "add")); }
Tensor sub(const Tensor& a, double s) { return sub(a, scalar_like(s, a, "sub")); }
Tensor mul(const Tensor& a, double s) { return mul(a, scalar_like(s, a, "mul")); }
Tensor div(const Tensor& a, double s) { return div(a, scalar_like(s, a, "div")); }
Tensor rsub(double s, const Tensor& a) { return sub(scalar_like(s, a, "rsub"), a); }
Tensor rdiv(double s, const Tensor& a) { return div(scalar_like(s, a, "rdiv"), a); }
// clang-format on

// =====================================================================================================
// 3. Unary ops and activations. Each derivative is in un_derivative() above.
// =====================================================================================================
// clang-format off
Tensor neg(const Tensor& x) { return unary(x, Un::neg, "neg", "NegBackward"); }
Tensor exp(const Tensor& x) { return unary(x, Un::exp, "exp", "ExpBackward"); }
Tensor log(const Tensor& x) { return unary(x, Un::log, "log", "LogBackward"); }
Tensor sqrt(const Tensor& x) { return unary(x, Un::sqrt, "sqrt", "SqrtBackward"); }
Tensor rsqrt(const Tensor& x) { return unary(x, Un::rsqrt, "rsqrt", "RsqrtBackward"); }
Tensor abs(const Tensor& x) { return unary(x, Un::abs, "abs", "AbsBackward"); }
Tensor square(const Tensor& x) { return unary(x, Un::square, "square", "SquareBackward"); }
Tensor pow(const Tensor& x, double p) { return unary(x, Un::pow, "pow", "PowBackward", p); }
// clang-format on
Tensor clamp(const Tensor& x, double lo, double hi) {
  NG_CHECK(!std::isnan(lo) && !std::isnan(hi), "clamp", "expected bounds that are numbers, got lo = ", lo,
           " and hi = ", hi);
  NG_CHECK(!(lo > hi), "clamp", "expected lo <= hi, got lo = ", lo, " and hi = ", hi);
  return unary(x, Un::clamp, "clamp", "ClampBackward", lo, hi);
}
// clang-format off
Tensor relu(const Tensor& x) { return unary(x, Un::relu, "relu", "ReluBackward"); }
Tensor gelu(const Tensor& x) { return unary(x, Un::gelu, "gelu", "GeluBackward"); }
Tensor silu(const Tensor& x) { return unary(x, Un::silu, "silu", "SiluBackward"); }
Tensor sigmoid(const Tensor& x) { return unary(x, Un::sigmoid, "sigmoid", "SigmoidBackward"); }
Tensor tanh(const Tensor& x) { return unary(x, Un::tanh, "tanh", "TanhBackward"); }
// clang-format on

// =====================================================================================================
// 4. In place
// =====================================================================================================
Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  check_defined("add_", "self", self, "other", other);
  check_untracked_in_place(self, &other, "add_");
  check_no_internal_overlap(self, "add_");
  if (on_device({self, other}, "add_")) {
    NG_CHECK(self.dtype() == other.dtype(), "add_", "dtype mismatch: got ", dtype_name(self.dtype()), " and ",
             dtype_name(other.dtype()));
    Tensor o = source_for_write(self, other, "add_");
    device_kernels(self, "add_").add_(self, o, alpha);
    self.bump_version();
    return self;
  }
  check_same_dtype_device(self, other, "add_");
  // other may be another view of self's memory: read in full first (source_for_write, tensor.h)
  Tensor o = source_for_write(self, other, "add_");
  NG_DISPATCH_ALL(self.dtype(), "add_", [&]<typename scalar_t>() {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, int64_t>) {
      fail("add_", "expected a floating tensor, got i64");
    } else {
      T* ps = static_cast<T*>(self.raw_data());
      const T* po = static_cast<const T*>(o.raw_data());
      const float a = float(alpha);
      for_each_strided<2>(self.shape(), {self.strides(), o.strides()},
                          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& s) {
                            for (int64_t i = 0; i < n; ++i) {
                              T& d = ps[off[0] + i * s[0]];
                              if constexpr (std::is_same_v<T, double>)
                                d += alpha * po[off[1] + i * s[1]];
                              else
                                d = store_f32<T>(load_f32(d) + a * load_f32(po[off[1] + i * s[1]]));
                            }
                          });
    }
  });
  self.bump_version();
  return self;
}

Tensor& mul_(Tensor& self, double s) {
  check_defined("mul_", "self", self);
  // As add_: a float scale of integers would round through double (2^53 + 1 lost its last bit) and NaN or
  // 1e30 had no i64 (an undefined conversion, INT64_MIN on x86).
  NG_CHECK(self.dtype() != DType::i64, "mul_", "expected a floating tensor, got i64");
  check_untracked_in_place(self, nullptr, "mul_");
  check_no_internal_overlap(self, "mul_");
  if (on_device({self}, "mul_")) {
    device_kernels(self, "mul_").mul_(self, s);
    self.bump_version();
    return self;
  }
  NG_DISPATCH_ALL(self.dtype(), "mul_", [&]<typename scalar_t>() {
    using T = scalar_t;
    T* p = static_cast<T*>(self.raw_data());
    for_each_strided<1>(self.shape(), {self.strides()},
                        [&](const std::array<int64_t, 1>& o, int64_t n, const std::array<int64_t, 1>& st) {
                          for (int64_t i = 0; i < n; ++i) {
                            T& d = p[o[0] + i * st[0]];
                            d = from_double<T>(to_double(d) * s);
                          }
                        });
  });
  self.bump_version();
  return self;
}

}  // namespace ng
