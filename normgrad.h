// normgrad: one header for everything.
//
//   #include "normgrad.h"
//   ng::Tensor x = ng::randn({4, 8}).requires_grad_();
//
// Reading order for learners: tensor/tensor.h -> autograd/engine.h -> tensor/ops/* -> autograd/gradcheck.h
// -> nn/ (the norms) -> the transformer block -> examples/.
#pragma once

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
#include "tensor/random.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/views.h"

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"

#include "nn/module.h"
