// clip_grad_norm_: rescale gradients so that their global L2 norm is at most max_norm (PyTorch's rule).
//
//   total = sqrt( sum over parameters of ||g_p||^2 )      (computed as the norm of the per-parameter norms)
//   coef  = max_norm / (total + 1e-6)
//   if coef < 1:  every g_p *= coef
//
// Returns `total`, the norm BEFORE clipping (log it: spikes in it are the first sign of instability).
// The sums run in double in a fixed order (parameter by parameter; within one, four f64 vector accumulators
// over the elements, simd::sum_sq_dev_row), so the result does not depend on the thread count. Parameters
// without a .grad are skipped.
//
// Two departures from PyTorch (torch.nn.utils.clip_grad_norm_, error_if_nonfinite=False), both deliberate:
//   - a non-finite total (an inf or NaN in some gradient) is returned as is and the gradients are left
//     alone. PyTorch multiplies every gradient by coef = max_norm / (inf + 1e-6) = 0 (or NaN), so grads
//     [3, inf] and [1, 2] with max_norm 1 become [0, nan] and [0, 0]: the finite gradients are wiped out and
//     the step goes ahead. Here the caller sees the inf / NaN it is returned and decides (skip the step).
//   - max_norm must be > 0: an ng::Error for 0 (PyTorch zeroes every gradient, a step that does nothing
//     while looking like training), for a negative value and for NaN.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ng::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

// The global L2 norm of the gradients, without clipping.
double grad_norm(const std::vector<Tensor>& params);

}  // namespace ng::optim
