// Reductions on CUDA: sum and mean over any dims. CPU twin: tensor/ops/reduce.cpp.
//
// The reduced dims are moved last and made contiguous, so the work is always "reduce each row of a
// (rows, L) matrix". One block per row; each thread sums a strided share in double, then the block adds its
// warps in a fixed order (block_sum): deterministic, like the CPU's fixed-chunk reduction.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/ops.h"

namespace ng::cuda {

namespace {

template <typename T>
__global__ void row_sum_kernel(const T* x, T* out, int64_t rows, int64_t L, double scale) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  if (row >= rows) return;
  double s = 0;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) s += double(to_acc(x[row * L + i]));
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[row] = from_acc<T>(acc_t<T>(s * scale));
}

Tensor reduce(const Tensor& x, std::vector<int64_t> dims, bool keepdim, bool take_mean, const char* op) {
  check_cuda(x, op, "x");
  const int64_t nd = x.dim();
  for (auto& d : dims) d = wrap_dim(d, nd, op);
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  std::vector<bool> reduced(size_t(nd), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  // permutation: kept dims first, reduced dims last
  std::vector<int64_t> perm;
  Shape out_shape, kept_shape;
  int64_t L = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[size_t(d)]) {
      perm.push_back(d);
      kept_shape.push_back(x.size(d));
    }
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[size_t(d)]) {
      perm.push_back(d);
      L *= x.size(d);
    }
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[size_t(d)])
      out_shape.push_back(x.size(d));
    else if (keepdim)
      out_shape.push_back(1);
  }
  Tensor xc = nd == 0 ? x : contiguous(x.detach().permute(perm));
  const int64_t rows = numel(kept_shape);
  Tensor out = empty(out_shape, x.dtype(), x.device());
  if (rows == 0) return out;
  const double scale = take_mean ? 1.0 / double(L) : 1.0;  // mean of nothing: NaN (ng::mean refuses it first)
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    row_sum_kernel<T>
        <<<grid_x(rows, op), 256>>>(dptr<T>(xc), dptr<T>(out), rows, L, L == 0 && take_mean ? NAN : scale);
    NG_CUDA_CHECK_LAUNCH();
  });
  return out;
}

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  return d;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, false, "cuda::sum");
}
Tensor sum(const Tensor& x) {
  return reduce(x, all_dims(x), false, false, "cuda::sum");
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(x, dims, keepdim, true, "cuda::mean");
}

}  // namespace ng::cuda
