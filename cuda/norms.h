// The four norms on CUDA: LayerNorm, RMSNorm, GroupNorm and BatchNorm, forward and backward.
// CPU twins: nn/norms/ (F::layer_norm, F::rms_norm, ...), whose per-row math in nn/norms/norm_math.h
// (rstd_from_var, centered_norm_dx, rms_norm_dx) is the very code these kernels call on the device.
//
// Two layers, as on the CPU:
//   - raw halves (layer_norm_forward / layer_norm_backward, ...) on contiguous device tensors, returning
//     norms::NormStats / norms::NormGrads exactly like ng::norms:: does, so tests compare them field by
//     field;
//   - autograd ops (layer_norm, rms_norm, group_norm, batch_norm) with PyTorch's signatures, one node each.
//
// Kernels (cuda/norms.cu): warp-per-row for rows up to 4096 elements, block-per-row beyond; 128-bit loads
// when a row's length and pointers allow; statistics in f32 (f64 for f64 inputs); f16/bf16 upcast to f32.
// dweight and dbias are reduced deterministically: per-block partial sums over fixed row (or element)
// chunks, then a second kernel adds the partials in chunk order. No float atomics anywhere.
#pragma once

#include "nn/norms/norm_common.h"
#include "tensor/tensor.h"

namespace ng::cuda {

// ---- raw halves. x, dy: contiguous CUDA tensors; weight, bias: contiguous, compute dtype, or undefined ----
// LayerNorm over rows of n. Returns y, mean (rows), rstd (rows).
norms::NormStats layer_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                                    double eps);
norms::NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight, bool need_dx,
                                     bool need_dweight, bool need_dbias);
// RMSNorm over rows of n. Returns y and rstd (rows); mean undefined.
norms::NormStats rms_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, double eps);
norms::NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                                   const Tensor& weight, bool need_dx, bool need_dweight);
// GroupNorm on x viewed as (N, C, S) with G groups. Returns y, mean (N, G), rstd (N, G).
norms::NormStats group_norm_forward(const Tensor& x, int64_t G, const Tensor& weight, const Tensor& bias,
                                    double eps);
norms::NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, int64_t G, const Tensor& weight, bool need_dx,
                                     bool need_dweight, bool need_dbias);
// BatchNorm in training on x viewed as (N, C, S): batch statistics per channel. Returns y, mean (C), rstd (C)
// (biased variance); running_mean / running_var (C, compute dtype, or undefined) are updated in place with
// PyTorch's rule  new = (1 - momentum) * old + momentum * batch  (running_var gets the unbiased variance).
norms::NormStats batch_norm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          double eps, const Tensor& running_mean, const Tensor& running_var,
                                          double momentum);
// BatchNorm in eval: y = (x - running_mean) * rsqrt(running_var + eps) * weight + bias. Returns y and, as
// mean / rstd, the running statistics used (C).
norms::NormStats batch_norm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         double eps, const Tensor& running_mean, const Tensor& running_var);
// `training` selects the backward: through the batch statistics (train) or with them as constants (eval).
norms::NormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight, bool training, bool need_dx,
                                     bool need_dweight, bool need_dbias);

// ---- autograd ops (x on a CUDA device; weight, bias, running stats on the same device) ----
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

}  // namespace ng::cuda
