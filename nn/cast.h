// nn::cast_: convert a module's floating parameters and buffers to another dtype, in place.
//
// Like PyTorch's module.to(dtype): every registered tensor keeps its identity (the module's members and the
// registry share one TensorImpl), only its storage and dtype change. Gradients are dropped. Used to build a
// model in f64 for gradient checks: `nn::cast_(block, DType::f64)`. Do it before creating an optimizer.
#pragma once

#include "nn/module.h"

namespace ng::nn {

void cast_(Module& module, DType dtype);

}  // namespace ng::nn
