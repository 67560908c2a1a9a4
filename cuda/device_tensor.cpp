// Device tensors and host <-> device copies: see device_tensor.h.
#include "cuda/device_tensor.h"

#include "autograd/function.h"
#include "cuda/allocator.h"
#include "cuda/elementwise.h"
#include "cuda/runtime.h"

namespace ng::cuda {

Tensor empty(const Shape& shape, DType dtype, Device device) {
  // The byte count is checked before it is used: a wrapped one got a 512-byte block for a huge shape.
  const int64_t nbytes = storage_bytes(shape, int64_t(dtype_size(dtype)), "cuda::empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = allocate(size_t(nbytes), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) NG_CUDA_CHECK(cudaMemset(t.raw_data(), 0, size_t(t.numel()) * dtype_size(dtype)));
  return t;
}

void check_cuda(const Tensor& t, const char* op, const char* name) {
  NG_CHECK(t.defined(), op, name, " is an undefined tensor");
  NG_CHECK(t.device().is_cuda(), op, "expected ", name, " on a CUDA device, got ", t.device().str(),
           " (move it with .to(Device::cuda()))");
  set_device(t.device(), op);
}

void copy_bytes(const Tensor& dst, const Tensor& src) {
  NG_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(), "cuda::copy_bytes",
           "expected the same dtype and size, got ", dtype_name(dst.dtype()), " ", shape_str(dst.shape()),
           " and ", dtype_name(src.dtype()), " ", shape_str(src.shape()));
  NG_CHECK(dst.is_contiguous() && src.is_contiguous(), "cuda::copy_bytes", "expected contiguous tensors");
  const size_t nbytes = size_t(src.numel()) * dtype_size(src.dtype());
  if (nbytes == 0) return;
  const Device d = dst.device(), s = src.device();
  if (d.is_cuda() && s.is_cuda() && d.index != s.index) {
    NG_CUDA_CHECK(cudaMemcpyPeer(dst.raw_data(), d.index, src.raw_data(), s.index, nbytes));
    return;
  }
  cudaMemcpyKind kind = d.is_cuda() ? (s.is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                    : (s.is_cuda() ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  // cudaMemcpy to or from pageable host memory is synchronous: when it returns, the host side is ready.
  NG_CUDA_CHECK(cudaMemcpy(dst.raw_data(), src.raw_data(), nbytes, kind));
}

Tensor device_copy(const Tensor& src, Device target) {
  const Device from = src.device();
  if (target == from) return src;
  Tensor out;
  if (target.is_cuda()) {
    set_device(target, "to");  // a clear error when there is no such device, before anything else
    // Make the source contiguous where it lives, then move the bytes.
    Tensor c = from.is_cpu() ? src.detach().contiguous() : contiguous(src);
    out = empty(src.shape(), src.dtype(), target);
    copy_bytes(out, c);
  } else {
    NG_CHECK(target.is_cpu(), "to", "unknown target device ", target.str());
    set_device(from, "to");
    Tensor c = contiguous(src);
    out = ng::empty(src.shape(), src.dtype());
    copy_bytes(out, c);
  }
  if (is_floating(src.dtype()) && needs_grad({src})) {
    // d(to(x))/dx = identity: the gradient goes back to x's device.
    attach(out, "ToDeviceBackward", {src},
           [from](const Tensor& dout) -> std::vector<Tensor> { return {dout.to(from)}; });
  }
  return out;
}

}  // namespace ng::cuda
