// All the norms: the functional API in ng::F and the modules in ng::nn.
//
//   F::batch_norm, F::layer_norm, F::rms_norm, F::group_norm; F::add_layer_norm, F::add_rms_norm (residual
//   add fused into the norm: add_norm.h) nn::BatchNorm1d, nn::BatchNorm2d, nn::LayerNorm, nn::RMSNorm,
//   nn::GroupNorm, nn::InstanceNorm1d/2d
//
// Each norm lives in one file, nn/norms/<norm>.cpp, holding in order: the formula, the scalar reference loop,
// the fast Highway + OpenMP kernel, the backward with its derivation, and the module. The per-row math they
// share (and the CUDA backend reuses) is in nn/norms/norm_math.h. Walk-throughs: docs/norms/.
//
// Dtypes. x is f32, f64, f16 or bf16; statistics are computed in f32 (f64 for f64 x) and y has x's dtype.
// weight and bias must have x's dtype, except that f16/bf16 x may (as MiniMind does) keep f32 weight and
// bias. Any other mix (f32 x with an f64 weight, f64 x with an f32 weight, f16 x with a bf16 weight, ...) is
// an ng::Error naming the op, the dtype given and the dtype expected: a norm never rounds a parameter
// silently. The gradients of weight and bias come back in their own dtype. (norm_common.h:
// check_affine_dtype.)
#pragma once

#include "nn/norms/add_norm.h"
#include "nn/norms/layer_norm.h"
#include "nn/norms/rms_norm.h"
#include "nn/norms/batch_norm.h"
#include "nn/norms/group_norm.h"
