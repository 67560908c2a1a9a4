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
#include "tensor/huge_blocks.h"
#include "tensor/parallel.h"
#include "tensor/random.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/device_kernels.h"
#include "tensor/npy.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/loss.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/views.h"

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"

#include "nn/module.h"
#include "nn/norms/norms.h"

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/block.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/ffn.h"
#include "nn/linear.h"
#include "nn/sampling.h"
#include "nn/tinylm.h"

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

#include "io/whole_file.h"
#include "io/safetensors.h"
#include "nn/cast.h"
#include "nn/checkpoint.h"
#include "nn/rope.h"
#include "nn/tokenizer.h"

#include "plot/plot.h"
