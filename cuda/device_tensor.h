// Device tensors: making them, and moving tensors between the CPU and CUDA devices.
//
//   ng::Tensor x = ng::randn({4, 8});
//   ng::Tensor xd = x.to(ng::Device::cuda(0));   // host -> device copy (differentiable)
//   ng::Tensor back = xd.to(ng::Device::cpu());  // device -> host
//
// A CUDA tensor is an ordinary Tensor whose Storage holds device memory (from the caching allocator,
// allocator.h) and says Device::cuda(i). Shapes, strides and views work as on the CPU; element access
// (item(), to_vector()) needs the tensor on the CPU first.
#pragma once

#include "tensor/tensor.h"

namespace ng::cuda {

// Uninitialised / zero-filled contiguous tensors on a CUDA device.
Tensor empty(const Shape& shape, DType dtype, Device device);
Tensor zeros(const Shape& shape, DType dtype, Device device);

// The copy behind Tensor::to(Device) (the to_device entry of the device table, cuda/dispatch.cpp):
// copies src to `target` (CPU <-> CUDA, CUDA <-> CUDA), result contiguous, same dtype. Differentiable:
// the gradient is copied back to src's device.
Tensor device_copy(const Tensor& src, Device target);

// A contiguous copy of a CUDA tensor with any strides (src itself when already contiguous). Not recorded
// by autograd.
Tensor contiguous(const Tensor& src);

// Copies raw bytes between two contiguous tensors of the same dtype and numel, on any devices.
void copy_bytes(const Tensor& dst, const Tensor& src);

// Checks that t is on a CUDA device (naming `op`), and makes that device current.
void check_cuda(const Tensor& t, const char* op, const char* name);

}  // namespace ng::cuda
