// Indexing ops: embedding, index_select, masked_fill.
//
//   embedding(weight (V, C), ids (...) i64)   -> (..., C)          out[..., c] = weight[ids[...], c]
//   index_select(x, dim, index (K) i64)      -> x's shape with size K at dim
//   masked_fill(x, mask, value)               -> x with `value` wherever mask != 0 (mask broadcasts to x)
//
// The backward of a gather (embedding, index_select) is a scatter-add: an id used twice gets the sum of both
// gradients. It runs in a fixed order without atomics, so it is bitwise the same at any thread count.
#pragma once

#include "tensor/tensor.h"

namespace ng {

// weight: (V, C) floating; ids: any shape, i64, each in [0, V).
Tensor embedding(const Tensor& weight, const Tensor& ids);
// index: 0-d or 1-D i64, each in [0, x.size(dim)). x may have any dtype (gradient only when floating).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// mask: any dtype, nonzero (nan included) means "fill"; its shape must broadcast to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace ng
