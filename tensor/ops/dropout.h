// Dropout (inverted): during training, zero each element with probability p and scale the survivors by
// 1 / (1 - p), so the expected value of every element is unchanged and evaluation needs no rescaling.
//
//   training, 0 < p < 1:  out = x * mask,  mask_i = 1/(1-p) with probability 1-p, else 0
//   p == 0 or !training:  out = x (the same tensor, no copy)
//   p == 1:               out = zeros (every element dropped; the gradient is zero too)
//   p outside [0, 1]:     ng::Error
//
// The mask comes from the Philox generator: element i (row-major over x's shape) uses 32 bits of block
// (offset + i / 4), so the same seed gives the same mask at any thread count.
#pragma once

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace ng {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

// The scaled mask alone (values 0 or 1/(1-p), x's compute dtype), advancing gen exactly like dropout().
Tensor dropout_mask(const Shape& shape, double p, DType dtype, Generator& gen);

}  // namespace ng
