// BatchNorm: normalize every channel over the batch (and the spatial positions), with running statistics
// for inference.
//
//   x: (N, C) or (N, C, *) ; per channel c: y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
//   training: mean_c, var_c of this batch (biased); running stats updated with the UNBIASED var
//   eval:     mean_c, var_c = running_mean_c, running_var_c
//
// The formula, reference loop, fast kernel, backward with its derivation, and the modules are in
// nn/norms/batch_norm.cpp; the walk-through is docs/norms/batch_norm.md.
#pragma once

#include <optional>

#include "nn/module.h"
#include "nn/norms/norm_common.h"
#include "tensor/tensor.h"

namespace ng::F {

// x: (N, C) or (N, C, *). running_mean, running_var: (C) or undefined. weight, bias: (C) or undefined.
//
// training = true: normalize with the batch statistics (biased variance). If the running stats are given,
// update them in place (no autograd):
//     running_mean = (1 - momentum) * running_mean + momentum * batch_mean
//     running_var  = (1 - momentum) * running_var  + momentum * batch_var * n / (n - 1)      n = N * prod(*)
// momentum = std::nullopt means a cumulative average: the factor is 1 / num_batches_tracked, where
// num_batches_tracked (an i64 scalar tensor, required then) already counts this batch.
// Training with one value per channel (n = 1) is an error.
// training = false: normalize with running_mean / running_var (required).
//
// One autograd node ("BatchNormBackward") for x, weight, bias; exact in both modes (in training the gradient
// includes the paths through the batch mean and variance).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  std::optional<double> momentum = 0.1, double eps = 1e-5,
                  const Tensor& num_batches_tracked = Tensor());

}  // namespace ng::F

namespace ng::norms {

// x: contiguous (N, C, S). weight, bias: (C) contiguous compute dtype, or undefined.
// mean_in, var_in: (C) f64 statistics to use (eval), or undefined to compute the batch statistics.
// Returns y; mean (C, f64); rstd (C, compute dtype); var (C, f64, biased).
NormStats batch_norm_forward(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                             const Tensor& bias, const Tensor& mean_in, const Tensor& var_in, double eps,
                             Impl impl = Impl::fast);
// batch_stats: whether the forward used the batch's own statistics (then dx has the mean and variance terms).
NormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, int64_t N, int64_t C, int64_t S, bool batch_stats,
                              bool need_dx, bool need_dweight, bool need_dbias, Impl impl = Impl::fast);

// InstanceNorm's running statistics (track_running_stats): x (N, C, *); running_mean/var (C) updated in place
// with the batch average of the per-instance mean and unbiased variance.
void update_running_stats_per_instance(const Tensor& x, Tensor& running_mean, Tensor& running_var,
                                       double factor, const char* op);

}  // namespace ng::norms

namespace ng::nn {

// PyTorch's nn.BatchNorm1d/2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True).
// Buffers: running_mean (zeros), running_var (ones), num_batches_tracked (i64 scalar, 0).
// train(): batch statistics, running stats updated. eval(): running statistics. Without
// track_running_stats, batch statistics are used in both modes.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;  // nullopt: cumulative average
  bool affine, track_running_stats;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;

 protected:
  BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
            bool track_running_stats, const char* name);
  virtual void check_input(const Tensor& x) const = 0;
  const char* name_;
};

class BatchNorm1d : public BatchNorm {  // x: (N, C) or (N, C, L)
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats, "BatchNorm1d") {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

class BatchNorm2d : public BatchNorm {  // x: (N, C, H, W)
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats, "BatchNorm2d") {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

}  // namespace ng::nn
