// clip_grad_norm_: rescale gradients so that their global L2 norm is at most max_norm (PyTorch's rule).
//
//   total = sqrt( sum over parameters of ||g_p||^2 )      (computed as the norm of the per-parameter norms)
//   coef  = max_norm / (total + 1e-6)
//   if coef < 1:  every g_p *= coef
//
// Returns `total`, the norm BEFORE clipping (log it: spikes in it are the first sign of instability).
// The sums run in double in a fixed order (parameter by parameter; within one, four f64 vector accumulators
// over the elements, simd::sum_sq_dev_row), so the result does not depend on the thread count. Parameters
// without a .grad are skipped. A non-finite total is returned as is and the gradients are left alone.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ng::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

// The global L2 norm of the gradients, without clipping.
double grad_norm(const std::vector<Tensor>& params);

}  // namespace ng::optim
