// CUDA runtime helpers: see runtime.h.
#include "cuda/runtime.h"

#include "tensor/error.h"

namespace ng::cuda {

void check_status(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  // Clear the sticky "last error" so the next check does not report this one again.
  (void)cudaGetLastError();
  fail("cuda", call, " failed: ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}

bool is_available() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

int device_count() {
  int count = 0;
  NG_CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

void set_device(Device device, const char* op) {
  NG_CHECK(device.is_cuda(), op, "expected a CUDA device, got ", device.str());
  const int count = device_count();
  NG_CHECK(device.index >= 0 && device.index < count, op, "device ", device.str(), " does not exist: ", count,
           " CUDA device(s) found");
  int current = -1;
  NG_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device.index) NG_CUDA_CHECK(cudaSetDevice(device.index));
}

void synchronize() {
  NG_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace ng::cuda
