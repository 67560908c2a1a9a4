// The device dispatch point (see device_kernels.h): which table serves CUDA tensors, and the checks every
// dispatching op shares.
#include "tensor/device_kernels.h"

namespace ng {

// The CUDA backend's table (cuda/dispatch.cpp). Referenced from here, by the core, so that the linker
// keeps it (a static initializer in the backend would be dropped with its unreferenced object file).
#ifdef NORMGRAD_HAVE_CUDA
namespace cuda {
const DeviceKernels& dispatch_table();
}
#endif

// The slot, made on first use (so no static-initialization order question arises).
static const DeviceKernels*& cuda_slot() {
#ifdef NORMGRAD_HAVE_CUDA
  static const DeviceKernels* slot = &cuda::dispatch_table();
#else
  static const DeviceKernels* slot = nullptr;
#endif
  return slot;
}

const DeviceKernels* cuda_kernels() {
  return cuda_slot();
}

const DeviceKernels* set_device_kernels(const DeviceKernels* kernels) {
  const DeviceKernels* previous = cuda_slot();
  cuda_slot() = kernels;
  return previous;
}

bool on_device(std::initializer_list<Tensor> ts, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (first == nullptr) {
      first = &t;
      continue;
    }
    if (t.device() != first->device())
      fail(op, "expected ", ts.size() == 2 ? "both" : "all", " tensors on the same device, got ",
           first->device().str(), " and ", t.device().str());
  }
  return first != nullptr && !first->device().is_cpu();
}

const DeviceKernels& device_kernels(Device device, const char* op) {
  NG_CHECK(device.is_cuda(), op, "no device kernels for ", device.str());
  const DeviceKernels* k = cuda_slot();
  NG_CHECK(k != nullptr, op, "got a tensor on ", device.str(),
           ", but normgrad was built without the CUDA backend (NORMGRAD_CUDA=OFF or no nvcc)");
  return *k;
}

const DeviceKernels& device_kernels(const Tensor& t, const char* op) {
  return device_kernels(t.device(), op);
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  if (device.is_cpu()) return empty(shape, dtype);
  return device_kernels(device, "empty").empty(shape, dtype, device);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  if (device.is_cpu()) return full(shape, value, dtype);
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

}  // namespace ng
