// Shared by tests/test_cuda_*.cpp. These files build with and without the CUDA backend: with it, GPU tests
// run when a device is present and skip (GTEST_SKIP, with the reason) when not; without it, only the
// host-side checks are compiled.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "normgrad.h"
#include "worst_error.h"

#ifdef NORMGRAD_HAVE_CUDA
#include "cuda/backend.h"

// Skip the current test, saying why, when no CUDA device can be used.
#define NG_REQUIRE_GPU()                                                                              \
  do {                                                                                                \
    if (!::ng::cuda::is_available())                                                                  \
      GTEST_SKIP() << "no CUDA device available: the CUDA path is compiled and host-tested, not run"; \
  } while (0)

// Move to the GPU and back.
inline ng::Tensor on_gpu(const ng::Tensor& t) {
  return t.to(ng::Device::cuda(0));
}
inline ng::Tensor on_cpu(const ng::Tensor& t) {
  return t.to(ng::Device::cpu());
}
#endif

// The message of the ng::Error that `fn` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const ng::Error& e) {
    return e.what();
  }
  return "";
}

// Largest |a - b| over all elements (both on the CPU, any dtype), as double.
inline double max_abs_diff(const ng::Tensor& a, const ng::Tensor& b) {
  EXPECT_EQ(ng::shape_str(a.shape()), ng::shape_str(b.shape()));
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i)
    worst = ng::test::worse(worst, std::abs(va[i] - vb[i]));
  return worst;
}
