// Adam and AdamW in one fused kernel: each thread reads g, p, m, v once and writes p, m, v once.
// CPU twin: optim/adam.cpp (the same expressions in the same order, in the parameter's dtype).
//
//   Adam:   g = g + wd * p              AdamW:  p = p * (1 - lr * wd)
//   m = m + (1 - beta1) * (g - m)
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps),   step_size = lr / (1 - beta1^t)
#include <cmath>
#include <utility>

#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/ops.h"

namespace ng::cuda {

namespace {

template <typename T>
struct AdamScalars {
  T one_minus_beta1, beta2, one_minus_beta2, wd, decay, eps, step_size, bc2_sqrt;
  bool coupled_wd, decoupled;
};

template <typename T>
__global__ void adam_kernel(T* p, const T* g_in, T* m, T* v, int64_t n, AdamScalars<T> s) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    T g = g_in[k];
    T pk = p[k];
    if (s.coupled_wd) g = g + s.wd * pk;
    if (s.decoupled) pk = pk * s.decay;
    const T mk = m[k] + s.one_minus_beta1 * (g - m[k]);
    const T vk = s.beta2 * v[k] + s.one_minus_beta2 * g * g;
    const T denom = sqrt(vk) / s.bc2_sqrt + s.eps;
    m[k] = mk;
    v[k] = vk;
    p[k] = pk - s.step_size * mk / denom;
  }
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamStep& st) {
  const char* op = "cuda::adam_step";
  check_cuda(param, op, "param");
  const std::pair<const Tensor*, const char*> others[] = {
      {&grad, "grad"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}};
  for (const auto& [t, name] : others) {
    NG_CHECK(t->defined(), op, name, " is an undefined tensor");
    NG_CHECK(t->device() == param.device(), op, name, " is on ", t->device().str(), ", expected ",
             param.device().str(), " like param");
    NG_CHECK(t->shape() == param.shape() && t->dtype() == param.dtype(), op, "expected ", name, " to be ",
             dtype_name(param.dtype()), " ", shape_str(param.shape()), " like param, got ",
             dtype_name(t->dtype()), " ", shape_str(t->shape()));
    NG_CHECK(t->is_contiguous(), op, "expected a contiguous ", name, ", got strides ",
             shape_str(t->strides()));
  }
  NG_CHECK(param.is_contiguous(), op, "expected a contiguous param");
  NG_CHECK(st.step >= 1, op, "expected step >= 1 (1-based), got ", st.step);
  const int64_t n = param.numel();
  if (n == 0) return;
  // The per-step scalars in double, as on the CPU.
  const double bc1 = 1.0 - std::pow(st.beta1, double(st.step));
  const double bc2 = 1.0 - std::pow(st.beta2, double(st.step));
  const double decay = st.decoupled ? 1.0 - st.lr * st.weight_decay : 1.0;
  NG_DISPATCH_FLOAT(param.dtype(), op, [&]<typename T>() {
    AdamScalars<T> s{T(1.0 - st.beta1),  T(st.beta2),       T(1.0 - st.beta2),
                     T(st.weight_decay), T(decay),          T(st.eps),
                     T(st.lr / bc1),     T(std::sqrt(bc2)), !st.decoupled && st.weight_decay != 0,
                     st.decoupled};
    const int64_t grid = std::clamp<int64_t>(ceil_div(n, 256), 1, 65535 * 8);
    adam_kernel<T>
        <<<unsigned(grid), 256>>>(dptr<T>(param), dptr<T>(grad), dptr<T>(exp_avg), dptr<T>(exp_avg_sq), n, s);
    NG_CUDA_CHECK_LAUNCH();
  });
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

}  // namespace ng::cuda
