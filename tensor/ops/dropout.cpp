// Dropout: forward and backward side by side. See dropout.h.
#include "tensor/ops/dropout.h"

#include <cmath>

#include "autograd/function.h"
#include "tensor/ops/elementwise.h"
#include "tensor/parallel.h"

namespace ng {

// mask_i = keep_i / (1 - p), keep_i = [u_i >= p], u_i = (32 random bits) / 2^32 uniform in [0, 1).
// Comparing the raw bits with threshold = p * 2^32 is the same test without a float conversion.
Tensor dropout_mask(const Shape& shape, double p, DType dtype, Generator& gen) {
  NG_CHECK(p >= 0.0 && p <= 1.0, "dropout", "p must be in [0, 1], got ", p);
  NG_CHECK(is_floating(dtype), "dropout", "expected a floating dtype, got ", dtype_name(dtype));
  const DType ct = compute_dtype(dtype);
  Tensor mask = empty(shape, ct);
  const int64_t n = mask.numel();
  const uint64_t first = gen.advance(uint64_t((n + 3) / 4));  // 4 x 32 bits per Philox block
  const double threshold = p * 4294967296.0;                  // p * 2^32
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  NG_DISPATCH_FLOAT(ct, "dropout", [&]<typename scalar_t>() {
    using T = scalar_t;
    T* pm = mask.data<T>();
    const T keep_value = T(scale);
    parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const std::array<uint32_t, 4> r = gen.block(first + uint64_t(i / 4));
        pm[i] = double(r[i % 4]) >= threshold ? keep_value : T(0);
      }
    });
  });
  return mask;
}

// Forward:  out = x * mask.
// Backward: dx = dout * mask   (mask is a constant: it was drawn, not computed from x).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_defined("dropout", "x", x);
  NG_CHECK(p >= 0.0 && p <= 1.0, "dropout", "p must be in [0, 1], got ", p);
  NG_CHECK(is_floating(x.dtype()), "dropout", "expected a floating tensor, got ", dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
  if (is_half(x.dtype())) return dropout(x.to(DType::f32), p, training, gen).to(x.dtype());

  Tensor mask = dropout_mask(x.shape(), p, x.dtype(), gen);
  Tensor out;
  {
    NoGradGuard g;
    out = mul(x, mask);
  }
  if (needs_grad({x})) {
    // mask is private to this op, never modified: no version check needed.
    attach(out, "DropoutBackward", {x},
           [mask](const Tensor& dout) -> std::vector<Tensor> { return {mul(dout, mask)}; });
  }
  return out;
}

}  // namespace ng
