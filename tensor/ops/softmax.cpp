// softmax / log_softmax: forward and backward side by side. See softmax.h for the formulas.
//
// Layout: the op moves `dim` to the end (a free permute) and makes that contiguous, so every kernel below
// sees `rows` contiguous rows of length L. For the usual dim = -1 on a contiguous tensor nothing is copied.
#include "tensor/ops/softmax.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/kernels/softmax_simd.h"
#include "tensor/ops/index.h"
#include "tensor/parallel.h"

namespace ng {

// =====================================================================================================
// 1. The reference kernels: one row at a time, plain scalar loops
// =====================================================================================================
// Rows are independent; each row is computed by one thread in a fixed order, so the result does not
// depend on the thread count. f32 rows accumulate their sum in double.
template <typename T>
void softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t L, bool log) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(L, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * L;
      T* yr = y + r * L;
      // m = max_j x_j
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < L; ++j) m = std::max(m, xr[j]);
      if (m == -std::numeric_limits<T>::infinity()) m = 0;  // an all -inf row: avoid (-inf) - (-inf) = nan
      // s = sum_j exp(x_j - m)
      double s = 0;
      for (int64_t j = 0; j < L; ++j) s += std::exp(double(xr[j] - m));
      if (log) {
        // y_i = (x_i - m) - log s
        const T log_s = T(std::log(s));
        for (int64_t j = 0; j < L; ++j) yr[j] = (xr[j] - m) - log_s;
      } else {
        // y_i = exp(x_i - m) / s
        const T inv_s = T(1.0 / s);
        for (int64_t j = 0; j < L; ++j) yr[j] = std::exp(xr[j] - m) * inv_s;
      }
    }
  });
}
template void softmax_rows_reference<float>(const float*, float*, int64_t, int64_t, bool);
template void softmax_rows_reference<double>(const double*, double*, int64_t, int64_t, bool);

// The fast path: the same math with Highway vectors (tensor/kernels/softmax_simd.cpp), rows in parallel.
// A row holding nan or +inf (the SIMD kernel declines it) goes through the reference, which propagates nan.
template <typename T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t L, bool log) {
  if (L == 0) return;
  parallel_for(rows, std::max<int64_t>(1, 4096 / L), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      if (!simd::softmax_row(x + r * L, y + r * L, L, log, x + rows * L))  // (may prefetch to the end)
        softmax_rows_reference(x + r * L, y + r * L, 1, L, log);
    }
  });
}
template void softmax_rows<float>(const float*, float*, int64_t, int64_t, bool);
template void softmax_rows<double>(const double*, double*, int64_t, int64_t, bool);

// Causal rows (see causal_softmax in softmax.h): row r is query t = r % L; its first t + 1 entries get
// the softmax of those entries, the rest 0. Both versions reuse the row kernels above on the prefix.
template <typename T>
void causal_softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t L) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seen = r % L + 1;  // keys s <= t
    softmax_rows_reference(x + r * L, y + r * L, 1, seen, false);
    for (int64_t s = seen; s < L; ++s) y[r * L + s] = T(0);
  }
}
template void causal_softmax_rows_reference<float>(const float*, float*, int64_t, int64_t);
template void causal_softmax_rows_reference<double>(const double*, double*, int64_t, int64_t);

template <typename T>
void causal_softmax_rows(const T* x, T* y, int64_t rows, int64_t L) {
  if (L == 0) return;
  parallel_for(rows, std::max<int64_t>(1, 4096 / L), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t seen = r % L + 1;
      if (!simd::softmax_row(x + r * L, y + r * L, seen, false))
        softmax_rows_reference(x + r * L, y + r * L, 1, seen, false);
      std::fill(y + r * L + seen, y + (r + 1) * L, T(0));
    }
  });
}
template void causal_softmax_rows<float>(const float*, float*, int64_t, int64_t);
template void causal_softmax_rows<double>(const double*, double*, int64_t, int64_t);

// Backward of rows, given y (the forward output) and dy. The reference loops:
//   softmax:      dx_i = y_i (dy_i - sum_j dy_j y_j)
//   log_softmax:  dx_i = dy_i - exp(y_i) sum_j dy_j          (exp(y) is the softmax)
template <typename T>
void softmax_backward_rows_reference(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(L, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* yr = y + r * L;
      const T* gr = dy + r * L;
      T* dr = dx + r * L;
      if (log) {
        double s = 0;  // sum_j dy_j
        for (int64_t j = 0; j < L; ++j) s += double(gr[j]);
        for (int64_t j = 0; j < L; ++j) dr[j] = gr[j] - std::exp(yr[j]) * T(s);
      } else {
        double s = 0;  // sum_j dy_j y_j
        for (int64_t j = 0; j < L; ++j) s += double(gr[j]) * double(yr[j]);
        for (int64_t j = 0; j < L; ++j) dr[j] = yr[j] * (gr[j] - T(s));
      }
    }
  });
}
template void softmax_backward_rows_reference<float>(const float*, const float*, float*, int64_t, int64_t,
                                                     bool);
template void softmax_backward_rows_reference<double>(const double*, const double*, double*, int64_t, int64_t,
                                                      bool);

// The fast path (Highway, tensor/kernels/softmax_simd.cpp); a log_softmax row with nan falls back.
template <typename T>
void softmax_backward_rows(const T* y, const T* dy, T* dx, int64_t rows, int64_t L, bool log) {
  if (L == 0) return;
  parallel_for(rows, std::max<int64_t>(1, 4096 / L), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r)
      if (!simd::softmax_backward_row(y + r * L, dy + r * L, dx + r * L, L, log))
        softmax_backward_rows_reference(y + r * L, dy + r * L, dx + r * L, 1, L, log);
  });
}
template void softmax_backward_rows<float>(const float*, const float*, float*, int64_t, int64_t, bool);
template void softmax_backward_rows<double>(const double*, const double*, double*, int64_t, int64_t, bool);

namespace {

// The permutation that moves `dim` to the end, keeping the other dims in order.
std::vector<int64_t> dim_last_perm(int64_t ndim, int64_t dim) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  return perm;
}
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = int64_t(i);
  return inv;
}

// t with `dim` moved last, contiguous, cut from the graph: rows x L.
Tensor rows_of(const Tensor& t, const std::vector<int64_t>& perm) {
  NoGradGuard g;
  return t.detach().permute(perm).contiguous();
}
// The inverse: a (rows x L) buffer in permuted order back to the original dim order, contiguous.
Tensor unrows(const Tensor& rows, const std::vector<int64_t>& perm) {
  NoGradGuard g;
  return rows.permute(inverse_perm(perm)).contiguous();
}

Tensor softmax_impl(const Tensor& x, int64_t dim_in, bool log, bool causal = false) {
  const char* op = causal ? "causal_softmax" : log ? "log_softmax" : "softmax";
  check_defined(op, "x", x);
  NG_CHECK(is_floating(x.dtype()), op, "expected a floating tensor, got ", dtype_name(x.dtype()));
  if (causal)
    NG_CHECK(x.dim() >= 2 && x.size(-1) == x.size(-2), op,
             "expected scores of shape (..., T, T) (queries x keys), got ", shape_str(x.shape()));
  if (on_device({x}, op)) return device_kernels(x, op).softmax(x, dim_in, log);  // the whole op
  if (is_half(x.dtype())) return softmax_impl(x.to(DType::f32), dim_in, log, causal).to(x.dtype());
  if (x.dim() == 0) {
    (void)wrap_dim(dim_in, 0, op);  // -1 and 0 only, as for sum or max (any dim was taken)
    return softmax_impl(x.reshape({1}), 0, log).reshape({});
  }

  // x: (..., L, ...) with L = x.size(dim); viewed as rows x L.
  const int64_t dim = wrap_dim(dim_in, x.dim(), op);
  const int64_t L = x.size(dim);
  const int64_t rows = L == 0 ? 0 : x.numel() / L;
  const std::vector<int64_t> perm = dim_last_perm(x.dim(), dim);

  Tensor xr = rows_of(x, perm);
  Tensor yr = empty(xr.shape(), x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
    if (causal)
      causal_softmax_rows(xr.data<scalar_t>(), yr.data<scalar_t>(), rows, L);
    else
      softmax_rows(xr.data<scalar_t>(), yr.data<scalar_t>(), rows, L, log);
  });
  Tensor y = unrows(yr, perm);

  if (needs_grad({x})) {
    // Save y, not x: both backwards are written in terms of the output (cheaper than recomputing it).
    // Save a detached alias of y (same storage, so the version check still sees in-place writes): saving y
    // itself would make a reference cycle y -> SoftmaxBackward -> y, leaked when no backward runs.
    SavedTensor saved_y(y.detach(), op);
    // (causal_softmax: softmax's backward; y = 0 above the diagonal gives dx = 0 there.)
    attach(y,
           causal ? "CausalSoftmaxBackward"
           : log  ? "LogSoftmaxBackward"
                  : "SoftmaxBackward",
           {x}, [saved_y, perm, rows, L, log, op](const Tensor& dout) -> std::vector<Tensor> {
             Tensor yr = rows_of(saved_y.unpack(), perm);
             Tensor gr = rows_of(dout, perm);
             Tensor dxr = empty(yr.shape(), yr.dtype());
             NG_DISPATCH_FLOAT(yr.dtype(), op, [&]<typename scalar_t>() {
               softmax_backward_rows(yr.data<scalar_t>(), gr.data<scalar_t>(), dxr.data<scalar_t>(), rows, L,
                                     log);
             });
             return {unrows(dxr, perm)};
           });
  }
  return y;
}

}  // namespace

// softmax: y_i = exp(x_i - m) / sum_j exp(x_j - m).
//   dy_i/dx_k = y_i (delta_ik - y_k), so dx_k = sum_i dy_i y_i (delta_ik - y_k)
//                                              = y_k (dy_k - sum_i dy_i y_i).
Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, false);
}

// log_softmax: y_i = x_i - log sum_j exp(x_j).
//   dy_i/dx_k = delta_ik - softmax_k, so dx_k = dy_k - softmax_k sum_i dy_i,   softmax_k = exp(y_k).
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, true);
}

// causal_softmax: softmax over the keys s <= t of each query t; see softmax.h.
Tensor causal_softmax(const Tensor& x) {
  check_defined("causal_softmax", "x", x);
  if (x.defined() && !x.device().is_cpu() && x.dim() >= 2 && x.size(-1) == x.size(-2)) {
    // No fused device kernel: the composition it stands for, with the mask built on x's device.
    const int64_t T = x.size(-1);
    std::vector<double> m(size_t(T * T), 0.0);  // m[t, s] = 1 where s > t
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = t + 1; s < T; ++s) m[size_t(t * T + s)] = 1.0;
    Tensor mask = from_vector(m, Shape{T, T}, DType::f32).to(x.device());
    return softmax(masked_fill(x, mask, -std::numeric_limits<double>::infinity()), -1);
  }
  return softmax_impl(x, -1, false, true);
}

}  // namespace ng
