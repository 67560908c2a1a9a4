// View ops and joins: reshape, permute, narrow, expand, squeeze/unsqueeze (Tensor methods, views.cpp),
// and cat / stack, which copy.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ng {

// Join along an existing dim. All other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Join along a new dim inserted at `dim`. All shapes must match.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

}  // namespace ng
