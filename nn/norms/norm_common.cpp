#include "nn/norms/norm_common.h"

#include <algorithm>
#include <cmath>

namespace ng::norms {

RowChunks row_chunks(int64_t rows, int64_t row_len) {
  constexpr int64_t kMaxChunks = 64;
  constexpr int64_t kChunkElements = 1 << 15;
  RowChunks c;
  if (rows <= 0) return c;
  const int64_t total = rows * std::max<int64_t>(row_len, 1);
  const int64_t wanted = std::clamp<int64_t>(total / kChunkElements, 1, std::min(kMaxChunks, rows));
  c.grain = (rows + wanted - 1) / wanted;
  c.count = (rows + c.grain - 1) / c.grain;
  return c;
}

ChunkGroups chunk_groups(const RowChunks& chunks) {
  ChunkGroups g;
  g.per = (chunks.count + kChunkGroups - 1) / kChunkGroups;
  g.count = (chunks.count + g.per - 1) / g.per;
  return g;
}

void check_float_input(const Tensor& x, const char* op) {
  check_defined(op, "x", x);
  NG_CHECK(is_floating(x.dtype()), op, "expected a floating input (f32, f64, f16 or bf16), got ",
           dtype_name(x.dtype()));
}

void check_eps(double eps, const char* op) {
  NG_CHECK(eps > 0 && std::isfinite(eps), op, "expected eps > 0 (it keeps 1/sqrt(var + eps) finite), got ",
           eps);
}

void check_eps(double eps, const Tensor& x, const char* op) {
  check_eps(eps, op);
  // f32, f16 and bf16 inputs compute in f32: an eps below f32's smallest subnormal rounds to 0 there, and a
  // constant row's 1/sqrt(0 + 0) became inf, its output NaN.
  NG_CHECK(x.dtype() == DType::f64 || float(eps) > 0, op, "eps ", eps,
           " rounds to 0 in the f32 arithmetic of a ", dtype_name(x.dtype()),
           " input: expected eps >= 1.4e-45 (f32's smallest value)");
}

void check_momentum(std::optional<double> momentum, const char* op) {
  if (momentum)
    NG_CHECK(*momentum >= 0 && *momentum <= 1, op,
             "expected momentum in [0, 1] (the weight of the new batch in the running statistics), got ",
             *momentum);
}

void check_affine(const Tensor& t, const char* name, const Shape& shape, const Tensor& x, const char* what,
                  const char* op) {
  if (!t.defined()) return;
  NG_CHECK(is_floating(t.dtype()), op, name, " must be floating, got ", dtype_name(t.dtype()));
  NG_CHECK(t.shape() == shape, op, name, " has shape ", shape_str(t.shape()), ", expected ", shape_str(shape),
           " to match ", what, " of x ", shape_str(x.shape()));
}

void check_affine_dtype(const Tensor& t, const char* name, const Tensor& x, const char* op) {
  if (!t.defined()) return;
  const DType given = t.dtype(), xd = x.dtype();
  const bool half_x = xd == DType::f16 || xd == DType::bf16;
  if (given == xd || (half_x && given == DType::f32)) return;
  fail(op, name, " has dtype ", dtype_name(given), ", expected ", dtype_name(xd), half_x ? " or f32" : "",
       " to match x (", dtype_name(xd),
       "); mixed float dtypes are not converted silently, convert with .to()");
}

int64_t check_layer_norm_args(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                              const Tensor& bias, double eps, const char* op) {
  check_float_input(x, op);
  check_eps(eps, x, op);
  const int64_t k = int64_t(normalized_shape.size());
  NG_CHECK(k >= 1, op, "normalized_shape must name at least one dim, got ()");
  bool match = x.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) match = x.size(x.dim() - k + i) == normalized_shape[i];
  NG_CHECK(match, op, "normalized_shape ", shape_str(normalized_shape), " does not match the last ", k,
           " dimension(s) of x ", shape_str(x.shape()));
  check_affine(weight, "weight", normalized_shape, x, "the trailing dimensions", op);
  check_affine(bias, "bias", normalized_shape, x, "the trailing dimensions", op);
  check_affine_dtype(weight, "weight", x, op);
  check_affine_dtype(bias, "bias", x, op);
  return numel(normalized_shape);
}

int64_t check_rms_norm_args(const Tensor& x, const Tensor& weight, double eps, const char* op) {
  check_float_input(x, op);
  check_eps(eps, x, op);
  NG_CHECK(x.dim() >= 1, op, "expected x with at least 1 dimension (*, C), got a 0-d tensor");
  const int64_t n = x.size(-1);
  check_affine(weight, "weight", Shape{n}, x, "the last dimension", op);
  check_affine_dtype(weight, "weight", x, op);
  return n;
}

Tensor contiguous_as(const Tensor& t, DType dt) {
  if (!t.defined()) return t;
  return t.detach().to(dt).contiguous();
}

Tensor grad_like(const Tensor& g, DType dt, const Shape& shape) {
  if (!g.defined()) return g;
  // An input of no rows tells the backward nothing of the normalized size (layer_norm_backward sizes its
  // flat gradients x.numel() / rows): its gradients are empty, and the parameter's are zeros.
  if (g.numel() == 0) return zeros(shape, dt);
  return g.reshape(shape).to(dt);
}

}  // namespace ng::norms
