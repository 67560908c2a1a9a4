// All the norms: the functional API in ng::F and the modules in ng::nn.
//
//   F::batch_norm, F::layer_norm, F::rms_norm, F::group_norm
//   nn::BatchNorm1d, nn::BatchNorm2d, nn::LayerNorm, nn::RMSNorm, nn::GroupNorm, nn::InstanceNorm1d/2d
//
// Each norm lives in one file, nn/norms/<norm>.cpp, holding in order: the formula, the scalar reference loop,
// the fast Highway + OpenMP kernel, the backward with its derivation, and the module. The per-row math they
// share (and the CUDA backend reuses) is in nn/norms/norm_math.h. Walk-throughs: docs/norms/.
#pragma once

#include "nn/norms/layer_norm.h"
#include "nn/norms/rms_norm.h"
#include "nn/norms/batch_norm.h"
#include "nn/norms/group_norm.h"
