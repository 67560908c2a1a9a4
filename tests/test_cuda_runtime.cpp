// The CUDA backend's runtime: device checks, error messages, the allocator, host <-> device copies.
//
// The first group runs everywhere (no GPU, or no CUDA backend at all). The GPU group skips without a device.
#include "tests/test_cuda_common.h"

using ng::Device;
using ng::Tensor;

namespace {

// A tensor that CLAIMS to live on cuda:0 but holds host memory: lets the device checks be tested on a
// machine without a GPU. Its data must never be read (the checks under test must fire first).
Tensor fake_cuda_tensor(const ng::Shape& shape) {
  static float host[64] = {};
  auto impl = std::make_shared<ng::TensorImpl>();
  impl->storage = std::make_shared<ng::Storage>(host, sizeof(host), Device::cuda(0), [](void*) {});
  impl->shape = shape;
  impl->strides = ng::contiguous_strides(shape);
  return Tensor(impl);
}

}  // namespace

// ---- everywhere -------------------------------------------------------------------------------------------
TEST(DeviceChecks, MixedDevicesNameBothDevices) {
  Tensor a = ng::ones({2, 3});
  Tensor b = fake_cuda_tensor({2, 3});
  std::string msg = error_of([&] { ng::add(a, b); });
  EXPECT_NE(msg.find("add: expected both tensors on the same device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::mul(b, a); });
  EXPECT_NE(msg.find("mul: expected both tensors on the same device, got cuda:0 and cpu"), std::string::npos)
      << msg;
}

TEST(DeviceChecks, CpuKernelsRejectCudaTensors) {
  // Ops with no device kernel refuse a CUDA tensor before reading it. (The ops TinyLM needs dispatch to the
  // backend instead: tests/test_device_dispatch.cpp.)
  Tensor b = fake_cuda_tensor({4});
  std::string msg = error_of([&] { ng::var(b, {0}); });
  EXPECT_NE(msg.find("var: this CPU kernel got a tensor on cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::argmax(b, 0); });
  EXPECT_NE(msg.find("argmax: this CPU kernel got a tensor on cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::matmul_naive(b.reshape({2, 2}), b.reshape({2, 2})); });
  EXPECT_NE(msg.find("matmul: this CPU kernel got a tensor on cuda:0"), std::string::npos) << msg;
}

TEST(DeviceChecks, DeviceNames) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_TRUE(Device::cuda().is_cuda());
  EXPECT_FALSE(Device::cuda(0) == Device::cuda(1));
}

#ifndef NORMGRAD_HAVE_CUDA
TEST(CudaBackend, ToCudaIsAnErrorWithoutTheBackend) {
  std::string msg = error_of([] { ng::ones({2}).to(Device::cuda(0)); });
  EXPECT_NE(
      msg.find("to: cannot move a tensor from cpu to cuda:0: normgrad was built without the CUDA backend"),
      std::string::npos)
      << msg;
}
#else
// ---- CUDA backend built; no device needed -----------------------------------------------------------------
TEST(CudaRuntime, ErrorNamesTheCallAndCudaString) {
  std::string msg = error_of([] { NG_CUDA_CHECK(cudaErrorMemoryAllocation); });
  EXPECT_NE(msg.find("cuda: cudaErrorMemoryAllocation failed: out of memory (cudaErrorMemoryAllocation)"),
            std::string::npos)
      << msg;
  msg = error_of([] { ng::cuda::check_status(cudaErrorInvalidValue, "cudaMemcpy(dst, src, n, kind)"); });
  EXPECT_NE(msg.find("cuda: cudaMemcpy(dst, src, n, kind) failed: invalid argument (cudaErrorInvalidValue)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(error_of([] { ng::cuda::check_status(cudaSuccess, "anything"); }), "");
}

TEST(CudaRuntime, MissingDeviceIsAClearError) {
  if (!ng::cuda::is_available()) {
    // No GPU (or no driver) here: asking for one fails at cudaGetDeviceCount, and the error says so.
    std::string msg = error_of([] { ng::ones({2}).to(Device::cuda(0)); });
    EXPECT_NE(msg.find("cuda: cudaGetDeviceCount(&count) failed: "), std::string::npos) << msg;
    msg = error_of([] { ng::cuda::device_count(); });
    EXPECT_NE(msg.find("cuda: cudaGetDeviceCount(&count) failed: "), std::string::npos) << msg;
  } else {
    const int count = ng::cuda::device_count();
    std::string msg = error_of([&] { ng::ones({2}).to(Device::cuda(count)); });
    EXPECT_NE(msg.find("to: device cuda:" + std::to_string(count) + " does not exist"), std::string::npos)
        << msg;
  }
}

TEST(CudaAllocator, RoundsTo512Bytes) {
  EXPECT_EQ(ng::cuda::round_allocation(0), 512u);
  EXPECT_EQ(ng::cuda::round_allocation(1), 512u);
  EXPECT_EQ(ng::cuda::round_allocation(512), 512u);
  EXPECT_EQ(ng::cuda::round_allocation(513), 1024u);
  EXPECT_EQ(ng::cuda::round_allocation(4096 * 4 + 3), 16896u);
}

// The byte count is checked before anything reaches the device, so this runs without a GPU: 2^61 f64 values
// are 2^64 bytes, which wrapped to 0 and got a 512-byte block that every kernel then wrote past.
TEST(CudaAllocator, AByteCountPast64BitsIsAnError) {
  for (auto [shape, dt] : {std::pair{ng::Shape{int64_t(1) << 61}, ng::DType::f64},
                           std::pair{ng::Shape{int64_t(1) << 31, int64_t(1) << 31}, ng::DType::f32},
                           std::pair{ng::Shape{3, int64_t(1) << 62}, ng::DType::bf16}}) {
    const std::string msg = error_of([&] { ng::cuda::empty(shape, dt, Device::cuda(0)); });
    EXPECT_NE(msg.find("cuda::empty: shape " + ng::shape_str(shape) +
                       " has too many elements (the byte size overflows 64 bits)"),
              std::string::npos)
        << msg;
  }
  const std::string msg = error_of([] { ng::cuda::empty({2, -1}, ng::DType::f32, Device::cuda(0)); });
  EXPECT_NE(msg.find("cuda::empty: sizes must be non-negative, got shape (2, -1)"), std::string::npos) << msg;
}

// ---- GPU
// ----------------------------------------------------------------------------------------------------
TEST(CudaCopy, RoundTripEveryDtype) {
  NG_REQUIRE_GPU();
  ng::Generator gen(7);
  for (ng::DType dt : {ng::DType::f32, ng::DType::f64, ng::DType::f16, ng::DType::bf16}) {
    Tensor x = ng::randn({3, 5, 7}, gen, dt);
    Tensor d = on_gpu(x);
    EXPECT_TRUE(d.device().is_cuda());
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_EQ(max_abs_diff(on_cpu(d), x), 0.0) << ng::dtype_name(dt);
  }
  Tensor ids = ng::randint(0, 100, {17}, gen);
  EXPECT_EQ(on_cpu(on_gpu(ids)).to_vector<int64_t>(), ids.to_vector<int64_t>());
}

TEST(CudaCopy, NonContiguousSourcesOnBothSides) {
  NG_REQUIRE_GPU();
  ng::Generator gen(8);
  Tensor x = ng::randn({6, 8}, gen);
  // CPU view -> GPU.
  Tensor t = x.t();
  EXPECT_EQ(max_abs_diff(on_cpu(on_gpu(t)), t), 0.0);
  // GPU view -> CPU (the strided-copy kernel).
  Tensor d = on_gpu(x);
  EXPECT_EQ(max_abs_diff(on_cpu(d.t()), t), 0.0);
  EXPECT_EQ(max_abs_diff(on_cpu(d.slice(1, 1, 7, 2)), x.slice(1, 1, 7, 2)), 0.0);
  EXPECT_EQ(max_abs_diff(on_cpu(ng::cuda::contiguous(d.permute({1, 0}))), x.permute({1, 0})), 0.0);
}

TEST(CudaCopy, GradientFlowsBackThroughTo) {
  NG_REQUIRE_GPU();
  Tensor x = ng::tensor({1.0, -2.0, 3.0}, ng::DType::f64).requires_grad_();
  Tensor y = on_cpu(on_gpu(x));
  ng::Tensor u = ng::tensor({0.5, 1.5, -1.0}, ng::DType::f64);
  ng::sum(ng::mul(y, u)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), u.to_vector<double>());
}

TEST(CudaAllocator, FreedBlocksAreReused) {
  NG_REQUIRE_GPU();
  const Device dev = Device::cuda(0);
  { Tensor a = ng::cuda::empty({1000}, ng::DType::f32, dev); }
  auto before = ng::cuda::allocator_stats(dev);
  { Tensor b = ng::cuda::empty({990}, ng::DType::f32, dev); }  // same rounded size: from the cache
  auto after = ng::cuda::allocator_stats(dev);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.cuda_mallocs, before.cuda_mallocs);
  ng::cuda::empty_cache();
  EXPECT_EQ(ng::cuda::allocator_stats(dev).cached_bytes, 0u);
}

TEST(CudaCopy, ZerosAndFill) {
  NG_REQUIRE_GPU();
  const Device dev = Device::cuda(0);
  Tensor z = ng::cuda::zeros({4, 3}, ng::DType::f32, dev);
  EXPECT_EQ(on_cpu(z).to_vector<double>(), std::vector<double>(12, 0.0));
  for (ng::DType dt : {ng::DType::f32, ng::DType::f64, ng::DType::f16, ng::DType::bf16}) {
    Tensor t = ng::cuda::zeros({5}, dt, dev);
    ng::cuda::fill_(t.slice(0, 1, 5, 2), 1.5);
    EXPECT_EQ(on_cpu(t).to_vector<double>(), (std::vector<double>{0, 1.5, 0, 1.5, 0})) << ng::dtype_name(dt);
  }
}
#endif
