#include "nn/rope.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "nn/rope_simd.h"
#include "tensor/device_kernels.h"
#include "tensor/parallel.h"

namespace ng {

RopeTables rope_tables(int64_t T, int64_t HS, double theta, DType dtype) {
  NG_CHECK(HS > 0 && HS % 2 == 0, "rope", "expected a positive even head size, got ", HS);
  NG_CHECK(is_floating(dtype), "rope", "expected a floating dtype for the cos/sin tables, got ",
           dtype_name(dtype));
  NG_CHECK(theta > 0 && std::isfinite(theta), "rope", "expected a finite theta > 0, got ", theta);
  const int64_t half = HS / 2;
  NG_CHECK(T >= 0 && T <= std::numeric_limits<int64_t>::max() / half, "rope",
           "expected a table length T >= 0 whose T * HS / 2 entries fit in 64 bits, got T = ", T,
           ", HS = ", HS);
  std::vector<double> c(size_t(T * half)), s(size_t(T * half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double w = std::pow(theta, -2.0 * double(i) / double(HS));  // w_i = theta^(-2i/HS)
      c[size_t(t * half + i)] = std::cos(double(t) * w);
      s[size_t(t * half + i)] = std::sin(double(t) * w);
    }
  return {from_vector(c, Shape{T, half}, dtype), from_vector(s, Shape{T, half}, dtype)};
}

namespace {

void check_args(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_defined("rope", "x", x, "cos", cos, "sin", sin);
  NG_CHECK(x.dim() == 4, "rope", "expected x of shape (B, T, NH, HS), got ", shape_str(x.shape()));
  const int64_t T = x.size(1), HS = x.size(3);
  NG_CHECK(HS % 2 == 0, "rope", "head size must be even, got x ", shape_str(x.shape()));
  NG_CHECK(cos.dim() == 2 && cos.size(0) >= T && cos.size(1) == HS / 2 && sin.shape() == cos.shape(), "rope",
           "tables have shapes ", shape_str(cos.shape()), " and ", shape_str(sin.shape()),
           ", expected (>= ", T, ", ", HS / 2, ") for x ", shape_str(x.shape()));
  NG_CHECK(cos.dtype() == x.dtype() && sin.dtype() == x.dtype(), "rope", "tables have dtype ",
           dtype_name(cos.dtype()), ", expected x's dtype ", dtype_name(x.dtype()));
}

// out = R(sign * angle) x, for contiguous x (B, T, NH, HS) and contiguous tables.
// sign = +1: the forward; sign = -1: the backward (rotate the gradient back).
Tensor rotate(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, double sign) {
  if (on_device({x, cos_t, sin_t}, "rope")) return device_kernels(x, "rope").rope(x, cos_t, sin_t, sign);
  const int64_t B = x.size(0), T = x.size(1), NH = x.size(2), HS = x.size(3), half = HS / 2;
  Tensor out = empty(x.shape(), x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), "rope", [&]<typename scalar_t>() {
    using F = scalar_t;
    const F* px = x.data<F>();
    const F* pc = cos_t.data<F>();
    const F* ps = sin_t.data<F>();
    F* po = out.data<F>();
    const F sg = F(sign);
    // One (b, t) row of NH heads per work item; the rotation itself: nn/rope_simd.h (the plain loop there is
    // the reference the tests hold this to, bit for bit).
    parallel_for(B * T, 16, [&](int64_t begin, int64_t end) {
      for (int64_t bt = begin; bt < end; ++bt) {
        const int64_t t = bt % T;
        simd::rope_rotate_row(px + bt * NH * HS, pc + t * half, ps + t * half, sg, po + bt * NH * HS, NH, HS);
      }
    });
  });
  return out;
}

}  // namespace

Tensor apply_rope_reference(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_args(x, cos, sin);
  NG_CHECK(x.is_contiguous(), "rope", "the reference needs a contiguous x");
  const int64_t B = x.size(0), T = x.size(1), NH = x.size(2), HS = x.size(3), half = HS / 2;
  std::vector<double> xv = x.to_vector<double>(), cv = cos.contiguous().to_vector<double>(),
                      sv = sin.contiguous().to_vector<double>(), out(xv.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const size_t base = size_t(((b * T + t) * NH + h) * HS);
          const double c = cv[size_t(t * half + i)], s = sv[size_t(t * half + i)];
          out[base + i] = xv[base + i] * c - xv[base + half + i] * s;
          out[base + half + i] = xv[base + half + i] * c + xv[base + i] * s;
        }
  return from_vector(out, x.shape(), x.dtype());
}

Tensor apply_rope(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in) {
  check_args(x_in, cos_in, sin_in);
  Tensor x, cos, sin, out;
  {
    NoGradGuard no_grad;  // the forward records nothing; the one node is attached below
    x = x_in.contiguous();
    cos = cos_in.contiguous();
    sin = sin_in.contiguous();
    out = rotate(x, cos, sin, +1.0);
  }
  if (needs_grad({x_in})) {
    // dx = R(-angle) dout: the same kernel with sin negated (a rotation's inverse is its transpose).
    attach(out, "RopeBackward", {x_in}, [cos, sin](const Tensor& dout) -> std::vector<Tensor> {
      return {rotate(dout.contiguous(), cos, sin, -1.0)};
    });
  }
  return out;
}

}  // namespace ng
