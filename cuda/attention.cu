// The two attention pieces TinyLM needs besides matmul and softmax: RoPE and the causal mask's masked_fill.
// CPU twins: ng::apply_rope's rotate() (nn/rope.cpp) and ng::masked_fill (tensor/ops/index.cpp). The core
// ops reach these through the device table (cuda/dispatch.cpp) and keep their own autograd wiring:
// RoPE's backward is this kernel with sign = -1, masked_fill's is this kernel with value 0.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"
#include "cuda/ops.h"
#include "cuda/runtime.h"

namespace ng::cuda {

namespace {

constexpr int kThreads = 256;
int64_t blocks_for(int64_t n) {
  return std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8);
}

// One thread per rotated pair (b, t, h, i), i < half:
//   o1 = x1 c - x2 (sign s),   o2 = x2 c + x1 (sign s)      with c = cos[t, i], s = sin[t, i]
// (the same expression, in the same order, as the CPU's rotate()).
template <typename T>
__global__ void rope_kernel(const T* x, const T* cos_t, const T* sin_t, T* out, int64_t BT, int64_t T_len,
                            int64_t NH, int64_t half, float sign) {
  using A = acc_t<T>;
  const int64_t pairs = BT * NH * half;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < pairs;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k % half;
    const int64_t bth = k / half;  // (b, t, h)
    const int64_t t = (bth / NH) % T_len;
    const int64_t base = bth * 2 * half;
    const A c = to_acc(cos_t[t * half + i]);
    const A s = A(sign) * to_acc(sin_t[t * half + i]);
    const A x1 = to_acc(x[base + i]), x2 = to_acc(x[base + half + i]);
    out[base + i] = from_acc<T>(x1 * c - x2 * s);
    out[base + half + i] = from_acc<T>(x2 * c + x1 * s);
  }
}

// out[k] = mask[k] != 0 ? value : x[k]; nan in the mask counts as nonzero, as on the CPU. The mask is read
// in its own type M (float for f16/bf16/f32 masks, which widen exactly; double; int64): converted to x's
// dtype, a small nonzero f32 value underflowed to 0 in f16 and stopped masking.
template <typename T, typename M>
__global__ void masked_fill_kernel(const T* x, const M* mask, T* out, int64_t n, T value) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x)
    out[k] = !(mask[k] == M(0)) ? value : x[k];
}

}  // namespace

Tensor rope_rotate(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, double sign) {
  const char* op = "cuda::rope";
  check_cuda(x, op, "x");
  NG_CHECK(cos_t.device() == x.device() && sin_t.device() == x.device(), op, "expected the tables on ",
           x.device().str(), ", got ", cos_t.device().str(), " and ", sin_t.device().str());
  NG_CHECK(x.dim() == 4 && x.is_contiguous() && cos_t.is_contiguous() && sin_t.is_contiguous(), op,
           "expected contiguous x (B, T, NH, HS) and tables, got x ", shape_str(x.shape()));
  NG_CHECK(cos_t.dtype() == x.dtype() && sin_t.dtype() == x.dtype(), op, "tables have dtype ",
           dtype_name(cos_t.dtype()), ", expected x's dtype ", dtype_name(x.dtype()));
  // The shapes apply_rope checks (nn/rope.cpp), again here: this entry is public, and short tables would be
  // read past their end; an odd head size would leave out's last value unwritten.
  NG_CHECK(x.size(3) % 2 == 0, op, "head size must be even, got x ", shape_str(x.shape()));
  NG_CHECK(cos_t.dim() == 2 && cos_t.size(0) >= x.size(1) && cos_t.size(1) == x.size(3) / 2 &&
               sin_t.shape() == cos_t.shape(),
           op, "tables have shapes ", shape_str(cos_t.shape()), " and ", shape_str(sin_t.shape()),
           ", expected (>= ", x.size(1), ", ", x.size(3) / 2, ") for x ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), NH = x.size(2), half = x.size(3) / 2;
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  const int64_t pairs = B * T * NH * half;
  if (pairs == 0) return out;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename D>() {
    rope_kernel<D><<<blocks_for(pairs), kThreads>>>(dptr<D>(x), dptr<D>(cos_t), dptr<D>(sin_t), dptr<D>(out),
                                                    B * T, T, NH, half, float(sign));
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  const char* op = "cuda::masked_fill";
  check_cuda(x, op, "x");
  NG_CHECK(mask.device() == x.device(), op, "expected the mask on ", x.device().str(), ", got ",
           mask.device().str());
  NG_CHECK(mask.shape() == x.shape(), op, "expected the mask expanded to x's shape ", shape_str(x.shape()),
           ", got ", shape_str(mask.shape()));
  NG_CHECK(is_floating(x.dtype()) && (is_floating(mask.dtype()) || mask.dtype() == DType::i64), op,
           "expected a floating x and a floating or i64 mask on CUDA, got ", dtype_name(x.dtype()), " and ",
           dtype_name(mask.dtype()));
  // Both made contiguous (the mask is usually a broadcast (T, T) view); a half mask is widened to f32.
  const DType mask_dt = mask.dtype() == DType::f16 || mask.dtype() == DType::bf16 ? DType::f32 : mask.dtype();
  Tensor xc = contiguous(x), mc = mask.dtype() == mask_dt ? contiguous(mask) : cast(mask, mask_dt);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  const int64_t n = x.numel();
  if (n == 0) return out;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename D>() {
    const D v = device_value<D>(value);  // the CPU's rounding: one, from double
    if (mask_dt == DType::f32)
      masked_fill_kernel<D, float>
          <<<blocks_for(n), kThreads>>>(dptr<D>(xc), dptr<float>(mc), dptr<D>(out), n, v);
    else if (mask_dt == DType::f64)
      masked_fill_kernel<D, double>
          <<<blocks_for(n), kThreads>>>(dptr<D>(xc), dptr<double>(mc), dptr<D>(out), n, v);
    else
      masked_fill_kernel<D, int64_t>
          <<<blocks_for(n), kThreads>>>(dptr<D>(xc), dptr<int64_t>(mc), dptr<D>(out), n, v);
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

}  // namespace ng::cuda
