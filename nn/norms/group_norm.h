// GroupNorm: split the channels into G groups and normalize each sample's group over its channels and all
// spatial positions. InstanceNorm is the case G = C (each channel of each sample alone).
//
//   x: (N, C, *) ; groups of C/G channels ; y = (x - mean_ng) / sqrt(var_ng + eps) * weight_c + bias_c
//
// The formula, reference loop, fast kernel, backward with its derivation, and the modules (GroupNorm,
// InstanceNorm1d/2d) are in nn/norms/group_norm.cpp; the walk-through is docs/norms/group_norm.md.
#pragma once

#include <optional>

#include "nn/module.h"
#include "nn/norms/norm_common.h"
#include "tensor/tensor.h"

namespace ng::F {

// x: (N, C, *) with C divisible by num_groups; weight, bias: (C) or undefined.
// One autograd node ("GroupNormBackward"). f16/bf16: f32 statistics and arithmetic, output in x's dtype.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ng::F

namespace ng::norms {

// x: contiguous (N, C, S) flattened; groups of C/G channels. weight, bias: (C) contiguous, compute dtype, or
// undefined. Returns y and mean, rstd: (N * G), compute dtype.
NormStats group_norm_forward(const Tensor& x, int64_t N, int64_t C, int64_t S, int64_t G,
                             const Tensor& weight, const Tensor& bias, double eps, Impl impl = Impl::fast);
NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, int64_t N, int64_t C, int64_t S, int64_t G, bool need_dx,
                              bool need_dweight, bool need_dbias, Impl impl = Impl::fast);

}  // namespace ng::norms

namespace ng::nn {

// PyTorch's nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True). weight ones, bias zeros (f32).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupNorm"; }

  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;  // (C), or undefined without affine
};

// PyTorch's nn.InstanceNorm1d / 2d(num_features, eps=1e-5, momentum=0.1, affine=False,
// track_running_stats=False): every (sample, channel) normalized over its positions, i.e. group_norm with
// G = C. With track_running_stats, training also updates running_mean / running_var (the batch average of
// the per-instance statistics, unbiased variance, PyTorch's momentum), and eval normalizes with them.
// num_batches_tracked is registered and saved but stays 0, and momentum = nullopt is refused there (PyTorch
// would take it as 0: running statistics that never move).
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                    // (C) with affine
  Tensor running_mean, running_var, num_batches_tracked;  // with track_running_stats

 protected:
  InstanceNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
               bool track_running_stats, int64_t spatial_dims, const char* name);
  int64_t spatial_dims_;  // 1 for InstanceNorm1d, 2 for InstanceNorm2d
  const char* name_;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNorm(num_features, eps, momentum, affine, track_running_stats, 1, "InstanceNorm1d") {}
  std::string type_name() const override { return "InstanceNorm1d"; }
};

class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNorm(num_features, eps, momentum, affine, track_running_stats, 2, "InstanceNorm2d") {}
  std::string type_name() const override { return "InstanceNorm2d"; }
};

}  // namespace ng::nn
