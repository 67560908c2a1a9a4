// normgrad's optional CUDA backend: one header for all of it. Built only when NORMGRAD_HAVE_CUDA is defined
// (CMake option NORMGRAD_CUDA, on by default wherever nvcc is found); guard includes with
//
//   #ifdef NORMGRAD_HAVE_CUDA
//   #include "cuda/backend.h"
//   #endif
//
// Reading order: runtime.h (errors, devices) -> allocator.h (device memory) -> device_tensor.h (to(device))
// -> common.cuh (what kernels share) -> elementwise / reduce / softmax / embedding / adam / matmul ->
// norms.h. docs/cuda.md describes the design and what runs on the device.
#pragma once

#include "cuda/allocator.h"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"
#include "cuda/norms.h"
#include "cuda/ops.h"
#include "cuda/runtime.h"
