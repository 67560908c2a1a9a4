// The norms as autograd ops on CUDA tensors: checks, dtype handling and one backward node each. The math is
// in cuda/norms.cu; these wrappers mirror the CPU's F:: functions in nn/norms/ line for line, so the two
// accept the same arguments and return gradients in the same dtypes.
#include "autograd/function.h"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"
#include "cuda/norms.h"

namespace ng::cuda {

namespace {

// A detached contiguous copy-or-view of t on its device in dtype dt (undefined stays undefined).
Tensor contiguous_as(const Tensor& t, DType dt) {
  return t.defined() ? cast(t.detach(), dt) : t;
}
// A gradient computed in the compute dtype, returned in the dtype and shape of the tensor it belongs to.
// An empty batch has no rows to sum, so the kernels give a gradient of length 0; it is zeros of the
// parameter's shape, as on the CPU (norms::grad_like).
Tensor grad_like(const Tensor& g, DType dt, const Shape& shape) {
  if (!g.defined()) return g;
  if (g.numel() == 0) return zeros(shape, dt, g.device());
  return cast(g.reshape(shape), dt);
}

void check_same_device(const Tensor& t, const Tensor& x, const char* name, const char* op) {
  if (!t.defined()) return;
  NG_CHECK(t.device() == x.device(), op, name, " is on ", t.device().str(), " but x is on ", x.device().str(),
           " (expected both on the same device)");
}

bool wants_grad(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "cuda::layer_norm";
  check_cuda(x, op, "x");
  const int64_t n = norms::check_layer_norm_args(x, normalized_shape, weight, bias, eps, op);
  check_same_device(weight, x, "weight", op);
  check_same_device(bias, x, "bias", op);

  const DType acc = compute_dtype(x.dtype());
  Tensor xc = contiguous(x.detach());
  Tensor wc = contiguous_as(weight, acc), bc = contiguous_as(bias, acc);
  norms::NormStats fwd = layer_norm_forward(xc, n, wc, bc, eps);
  Tensor y = fwd.y;
  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad(), need_dw = wants_grad(weight), need_db = wants_grad(bias);
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc,
                b_dtype = bias.defined() ? bias.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "CudaLayerNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      norms::NormGrads g = layer_norm_backward(cast(dout, x_dtype), sx.unpack(), smean.unpack(),
                                               srstd.unpack(), sw.unpack(), need_dx, need_dw, need_db);
      return {g.dx, grad_like(g.dweight, w_dtype, normalized_shape),
              grad_like(g.dbias, b_dtype, normalized_shape)};
    });
  }
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const char* op = "cuda::rms_norm";
  check_cuda(x, op, "x");
  const int64_t C = norms::check_rms_norm_args(x, weight, eps, op);
  check_same_device(weight, x, "weight", op);

  const DType acc = compute_dtype(x.dtype());
  Tensor xc = contiguous(x.detach());
  Tensor wc = contiguous_as(weight, acc);
  norms::NormStats fwd = rms_norm_forward(xc, C, wc, eps);
  Tensor y = fwd.y;
  if (needs_grad({x, weight})) {
    const bool need_dx = x.requires_grad(), need_dw = wants_grad(weight);
    const DType x_dtype = x.dtype(), w_dtype = weight.defined() ? weight.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), srstd(fwd.rstd, op);
    attach(y, "CudaRMSNormBackward", {x, weight}, [=](const Tensor& dout) -> std::vector<Tensor> {
      norms::NormGrads g =
          rms_norm_backward(cast(dout, x_dtype), sx.unpack(), srstd.unpack(), sw.unpack(), need_dx, need_dw);
      return {g.dx, grad_like(g.dweight, w_dtype, {C})};
    });
  }
  return y;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "cuda::group_norm";
  check_cuda(x, op, "x");
  norms::check_float_input(x, op);
  norms::check_eps(eps, op);
  NG_CHECK(x.dim() >= 2, op, "expected x of shape (N, C, *), got ", shape_str(x.shape()));
  const int64_t C = x.size(1);
  NG_CHECK(num_groups > 0 && C % num_groups == 0, op, "num_groups ", num_groups, " must divide the ", C,
           " channels of x ", shape_str(x.shape()));
  norms::check_affine(weight, "weight", {C}, x, "the channel dimension", op);
  norms::check_affine(bias, "bias", {C}, x, "the channel dimension", op);
  norms::check_affine_dtype(weight, "weight", x, op);
  norms::check_affine_dtype(bias, "bias", x, op);
  check_same_device(weight, x, "weight", op);
  check_same_device(bias, x, "bias", op);

  const DType acc = compute_dtype(x.dtype());
  Tensor xc = contiguous(x.detach());
  Tensor wc = contiguous_as(weight, acc), bc = contiguous_as(bias, acc);
  norms::NormStats fwd = group_norm_forward(xc, num_groups, wc, bc, eps);
  Tensor y = fwd.y;
  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad(), need_dw = wants_grad(weight), need_db = wants_grad(bias);
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc,
                b_dtype = bias.defined() ? bias.dtype() : acc;
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "CudaGroupNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      norms::NormGrads g =
          group_norm_backward(cast(dout, x_dtype), sx.unpack(), smean.unpack(), srstd.unpack(), num_groups,
                              sw.unpack(), need_dx, need_dw, need_db);
      return {g.dx, grad_like(g.dweight, w_dtype, {C}), grad_like(g.dbias, b_dtype, {C})};
    });
  }
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "cuda::batch_norm";
  check_cuda(x, op, "x");
  norms::check_float_input(x, op);
  norms::check_eps(eps, op);
  NG_CHECK(x.dim() >= 2, op, "expected x of shape (N, C) or (N, C, *), got ", shape_str(x.shape()));
  const int64_t C = x.size(1);
  for (auto [t, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"},
                         std::pair{&running_mean, "running_mean"}, std::pair{&running_var, "running_var"}}) {
    norms::check_affine(*t, name, {C}, x, "the channel dimension", op);
    check_same_device(*t, x, name, op);
  }
  norms::check_affine_dtype(weight, "weight", x, op);
  norms::check_affine_dtype(bias, "bias", x, op);
  const DType acc = compute_dtype(x.dtype());
  for (auto [t, name] : {std::pair{&running_mean, "running_mean"}, std::pair{&running_var, "running_var"}})
    NG_CHECK(!t->defined() || (t->dtype() == acc && t->is_contiguous()), op, "expected ", name,
             " to be contiguous ", dtype_name(acc), " (x's compute dtype), got ", dtype_name(t->dtype()));

  Tensor xc = contiguous(x.detach());
  Tensor wc = contiguous_as(weight, acc), bc = contiguous_as(bias, acc);
  norms::NormStats fwd = training
                             ? batch_norm_forward_train(xc, wc, bc, eps, running_mean, running_var, momentum)
                             : batch_norm_forward_eval(xc, wc, bc, eps, running_mean, running_var);
  Tensor y = fwd.y;
  if (needs_grad({x, weight, bias})) {
    const bool need_dx = x.requires_grad(), need_dw = wants_grad(weight), need_db = wants_grad(bias);
    const DType x_dtype = x.dtype();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc,
                b_dtype = bias.defined() ? bias.dtype() : acc;
    // In eval the running statistics are saved as they were used (a later training step may change them).
    SavedTensor sx(xc, op), sw(wc, op), smean(fwd.mean, op), srstd(fwd.rstd, op);
    attach(y, "CudaBatchNormBackward", {x, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      norms::NormGrads g =
          batch_norm_backward(cast(dout, x_dtype), sx.unpack(), smean.unpack(), srstd.unpack(), sw.unpack(),
                              training, need_dx, need_dw, need_db);
      return {g.dx, grad_like(g.dweight, w_dtype, {C}), grad_like(g.dbias, b_dtype, {C})};
    });
  }
  return y;
}

}  // namespace ng::cuda
