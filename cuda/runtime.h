// The CUDA runtime, as normgrad sees it: errors, devices, synchronisation.
//
// Every CUDA API call goes through NG_CUDA_CHECK, which turns a failure into an ng::Error naming the call
// and CUDA's own description:
//
//   cuda: cudaGetDeviceCount(&count) failed: no CUDA-capable device is detected (cudaErrorNoDevice)
//
// Kernel launches are checked with NG_CUDA_CHECK_LAUNCH() right after the <<<...>>> line: a bad launch
// configuration is reported at the launch, not at some later unrelated call.
#pragma once

#include <cuda_runtime_api.h>

#include "tensor/device.h"

namespace ng::cuda {

// Throws ng::Error("cuda: <call> failed: <description> (<error name>)") when status is not cudaSuccess.
void check_status(cudaError_t status, const char* call);

// True when the runtime finds at least one device. Never throws (false when there is no driver).
bool is_available();
// Number of devices; throws (naming cudaGetDeviceCount) when the runtime cannot talk to a driver.
int device_count();
// Checks that `device` is a CUDA device that exists, naming `op` in the error, and makes it current.
void set_device(Device device, const char* op);
// Waits for all work queued on the current device.
void synchronize();

}  // namespace ng::cuda

#define NG_CUDA_CHECK(call) ::ng::cuda::check_status((call), #call)
// After a kernel launch: reports a bad launch configuration (grid too large, too much shared memory).
#define NG_CUDA_CHECK_LAUNCH() ::ng::cuda::check_status(cudaGetLastError(), "kernel launch")
