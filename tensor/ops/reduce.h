// Reductions: sum, mean, var, max along dims (or over everything), with keepdim.
//
// Determinism: each output element is reduced by one thread in a fixed order, and a reduction over
// everything is cut into fixed-size chunks combined in order, so results do not depend on thread count.
// f32 inputs accumulate in double.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ng {

Tensor sum(const Tensor& x);  // over everything -> 0-d
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Variance over dims; unbiased divides by (n - 1) (Bessel), else by n.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased = true, bool keepdim = false);
// Largest value along `dim`. The gradient flows to the first position holding the max.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
// Index (i64) of the first largest value along `dim`. Not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace ng
