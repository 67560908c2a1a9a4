// Softmax, log-softmax and cross-entropy on CUDA, each fused into one kernel per direction.
// CPU twins: tensor/ops/softmax.cpp, tensor/ops/loss.cpp.
//
// One row per warp (rows up to 4096) or per block (longer rows, e.g. a vocabulary), three passes:
//   max_r = max_v x_v;  s_r = sum_v exp(x_v - max_r);  y_v = exp(x_v - max_r) / s_r   (log: x_v - max_r - log
//   s_r)
// Backward, from the saved output y:
//   softmax:      dx_v = y_v * (dy_v - sum_u dy_u y_u)
//   log_softmax:  dx_v = dy_v - exp(y_v) * sum_u dy_u
// Cross-entropy: loss_r = lse_r - x_{r, t_r}, lse_r = max_r + log s_r; the mean over counted rows is taken
// by one block adding the rows in order (deterministic). dlogits_{r,v} = (exp(x_v - lse_r) - [v == t_r]) *
// dloss / count.
#include "autograd/function.h"
#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/elementwise.h"
#include "cuda/ops.h"

namespace ng::cuda {

namespace {

// Row max and log-sum-exp of x over one row, shared by the softmax and cross-entropy kernels.
template <typename T, typename Team>
__device__ void row_max_lse(const T* xr, int64_t L, acc_t<T>* scratch, acc_t<T>& mx, acc_t<T>& lse) {
  using A = acc_t<T>;
  A m = -INFINITY;
  for (int64_t i = Team::rank(); i < L; i += Team::size()) m = fmax(m, to_acc(xr[i]));
  mx = Team::max(m, scratch);
  A s = 0;
  for (int64_t i = Team::rank(); i < L; i += Team::size()) s += exp(to_acc(xr[i]) - mx);
  lse = mx + log(Team::sum(s, scratch));
}

template <typename T, bool kBlock>
__global__ void softmax_forward_kernel(const T* x, T* y, int64_t rows, int64_t L, bool log_out) {
  using A = acc_t<T>;
  using Team = RowTeam<kBlock>;
  __shared__ A scratch[32];
  const int64_t row = Team::row();
  if (row >= rows) return;
  const T* xr = x + row * L;
  A mx, lse;
  row_max_lse<T, Team>(xr, L, scratch, mx, lse);
  for (int64_t i = Team::rank(); i < L; i += Team::size()) {
    const A v = to_acc(xr[i]) - lse;
    y[row * L + i] = from_acc<T>(log_out ? v : exp(v));
  }
}

template <typename T, bool kBlock>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t L,
                                        bool log_out) {
  using A = acc_t<T>;
  using Team = RowTeam<kBlock>;
  __shared__ A scratch[32];
  const int64_t row = Team::row();
  if (row >= rows) return;
  const T* yr = y + row * L;
  const T* dyr = dy + row * L;
  A s = 0;  // softmax: sum dy * y;  log_softmax: sum dy
  for (int64_t i = Team::rank(); i < L; i += Team::size())
    s += log_out ? to_acc(dyr[i]) : to_acc(dyr[i]) * to_acc(yr[i]);
  s = Team::sum(s, scratch);
  for (int64_t i = Team::rank(); i < L; i += Team::size()) {
    const A yv = to_acc(yr[i]), g = to_acc(dyr[i]);
    dx[row * L + i] = from_acc<T>(log_out ? g - exp(yv) * s : yv * (g - s));
  }
}

// Per row: lse, the row's loss (0 when ignored) and whether it counts. A target out of range records the
// smallest offending row in *bad_row (an integer atomicMin: the result does not depend on the order).
template <typename T, bool kBlock>
__global__ void cross_entropy_rows_kernel(const T* x, const int64_t* targets, acc_t<T>* lse_out,
                                          acc_t<T>* row_loss, int64_t* row_counts,
                                          unsigned long long* bad_row, int64_t rows, int64_t V,
                                          int64_t ignore_index) {
  using A = acc_t<T>;
  using Team = RowTeam<kBlock>;
  __shared__ A scratch[32];
  const int64_t row = Team::row();
  if (row >= rows) return;
  const T* xr = x + row * V;
  A mx, lse;
  row_max_lse<T, Team>(xr, V, scratch, mx, lse);
  if (!isfinite(mx)) {
    // The CPU's rule (logsumexp_rows_reference, tensor/ops/loss.cpp): a row of -inf has lse -inf, a row
    // with a +inf has +inf (so its loss is +inf, not NaN), and a NaN anywhere makes it NaN. The sum of
    // exp(x - mx) gave NaN for all three (inf - inf). mx is the team's, so the whole team takes this branch.
    A nan_seen = 0;
    for (int64_t i = Team::rank(); i < V; i += Team::size())
      if (isnan(to_acc(xr[i]))) nan_seen = 1;
    lse = Team::max(nan_seen, scratch) > 0 ? A(NAN) : mx;
  }
  if (Team::rank() != 0) return;
  lse_out[row] = lse;
  const int64_t t = targets[row];
  if (t == ignore_index) {
    row_loss[row] = 0;
    row_counts[row] = 0;
  } else if (t < 0 || t >= V) {
    atomicMin(bad_row, (unsigned long long)row);
    row_loss[row] = 0;
    row_counts[row] = 0;
  } else {
    row_loss[row] = lse - to_acc(xr[t]);
    row_counts[row] = 1;
  }
}

// One block: loss = sum(row_loss) / count (0 when nothing counts), rows added in a fixed order.
template <typename A>
__global__ void cross_entropy_mean_kernel(const A* row_loss, const int64_t* row_counts, A* loss,
                                          int64_t* count, int64_t rows) {
  __shared__ double scratch[32];
  double s = 0, c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    s += double(row_loss[r]);
    c += double(row_counts[r]);
  }
  s = block_sum(s, scratch);
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) {
    *count = int64_t(c);
    *loss = c > 0 ? A(s / c) : A(0);
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(const T* x, const int64_t* targets, const acc_t<T>* lse,
                                              const int64_t* count, const acc_t<T>* dloss, T* dx,
                                              int64_t rows, int64_t V, int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t total = rows * V;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / V, v = i - r * V;
    const int64_t t = targets[r];
    const int64_t n = *count;
    A g = 0;
    if (t != ignore_index && n > 0) {
      const A p = exp(to_acc(x[i]) - lse[r]);
      g = (p - (v == t ? A(1) : A(0))) * (*dloss / A(n));
    }
    dx[i] = from_acc<T>(g);
  }
}

}  // namespace

Tensor softmax_forward(const Tensor& x, bool log_out) {
  const char* op = log_out ? "cuda::log_softmax" : "cuda::softmax";
  check_cuda(x, op, "x");
  NG_CHECK(x.dim() >= 1, op, "expected at least one dim, got a 0-d tensor");
  Tensor xc = contiguous(x.detach());
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  const int64_t L = x.size(-1), rows = L == 0 ? 0 : x.numel() / L;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    launch_rows(
        rows, L,
        [&](dim3 g, dim3 b) {
          softmax_forward_kernel<T, false><<<g, b>>>(dptr<T>(xc), dptr<T>(y), rows, L, log_out);
        },
        [&](dim3 g, dim3 b) {
          softmax_forward_kernel<T, true><<<g, b>>>(dptr<T>(xc), dptr<T>(y), rows, L, log_out);
        },
        op);
  });
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy, bool log_out) {
  const char* op = log_out ? "cuda::log_softmax_backward" : "cuda::softmax_backward";
  check_cuda(y, op, "y");
  check_cuda(dy, op, "dy");
  NG_CHECK(y.shape() == dy.shape() && y.dtype() == dy.dtype(), op,
           "expected y and dy of one shape and dtype, got ", shape_str(y.shape()), " and ",
           shape_str(dy.shape()));
  Tensor yc = contiguous(y), dyc = contiguous(dy);
  Tensor dx = empty(y.shape(), y.dtype(), y.device());
  const int64_t L = y.dim() == 0 ? 1 : y.size(-1), rows = L == 0 ? 0 : y.numel() / L;
  NG_CUDA_DISPATCH_FLOAT(y.dtype(), op, [&]<typename T>() {
    launch_rows(
        rows, L,
        [&](dim3 g, dim3 b) {
          softmax_backward_kernel<T, false>
              <<<g, b>>>(dptr<T>(yc), dptr<T>(dyc), dptr<T>(dx), rows, L, log_out);
        },
        [&](dim3 g, dim3 b) {
          softmax_backward_kernel<T, true>
              <<<g, b>>>(dptr<T>(yc), dptr<T>(dyc), dptr<T>(dx), rows, L, log_out);
        },
        op);
  });
  return dx;
}

// Autograd: move `dim` last (a view), run the kernel over rows, move it back.
static Tensor softmax_op(const Tensor& x, int64_t dim, bool log_out) {
  const char* op = log_out ? "cuda::log_softmax" : "cuda::softmax";
  check_cuda(x, op, "x");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  const bool moved = x.dim() > 0 && d != x.dim() - 1;
  Tensor xt = moved ? x.detach().transpose(d, x.dim() - 1) : x.detach();
  Tensor yt = softmax_forward(x.dim() == 0 ? xt.reshape({1}) : xt, log_out).reshape(xt.shape());
  Tensor y = moved ? contiguous(yt.transpose(d, x.dim() - 1)) : yt;
  if (needs_grad({x})) {
    SavedTensor sy(yt, op);
    const int64_t last = x.dim() - 1;
    attach(y, log_out ? "CudaLogSoftmaxBackward" : "CudaSoftmaxBackward", {x},
           [=](const Tensor& dout) -> std::vector<Tensor> {
             Tensor yv = sy.unpack();
             Tensor dt = moved ? dout.transpose(d, last) : dout;
             Tensor dx =
                 softmax_backward(yv.dim() == 0 ? yv.reshape({1}) : yv,
                                  contiguous(dt).reshape(yv.dim() == 0 ? Shape{1} : yv.shape()), log_out)
                     .reshape(yv.shape());
             return {moved ? contiguous(dx.transpose(d, last)) : dx};
           });
  }
  return y;
}
Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_op(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_op(x, dim, true);
}

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const char* op = "cuda::cross_entropy";
  check_cuda(logits, op, "logits");
  check_cuda(targets, op, "targets");
  NG_CHECK(logits.device() == targets.device(), op, "expected logits and targets on the same device, got ",
           logits.device().str(), " and ", targets.device().str());
  NG_CHECK(targets.dtype() == DType::i64, op, "expected i64 targets, got ", dtype_name(targets.dtype()));
  NG_CHECK(logits.dim() >= 1, op, "expected logits (..., V), got a 0-d tensor");
  const int64_t V = logits.size(-1), rows = V == 0 ? 0 : logits.numel() / V;
  Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  NG_CHECK(targets.shape() == lead, op, "targets have shape ", shape_str(targets.shape()), ", expected ",
           shape_str(lead), " (logits ", shape_str(logits.shape()), " without the last dim)");
  NG_CHECK(V > 0 || numel(lead) == 0, op, "expected at least one class (V >= 1), got logits ",
           shape_str(logits.shape()));
  const DType acc = compute_dtype(logits.dtype());
  Tensor xc = contiguous(logits.detach()), tc = contiguous(targets);
  CrossEntropyForward f;
  f.lse = empty({rows}, acc, logits.device());
  f.loss = empty({}, acc, logits.device());
  f.count = empty({}, DType::i64, logits.device());
  Tensor row_loss = empty({rows}, acc, logits.device()),
         row_counts = empty({rows}, DType::i64, logits.device());
  Tensor bad = empty({1}, DType::i64, logits.device());
  fill_(bad, double(rows));  // "no bad row" (every real row index is smaller)
  NG_CUDA_DISPATCH_FLOAT(logits.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    auto* bad_ptr = static_cast<unsigned long long*>(bad.raw_data());
    launch_rows(
        rows, V,
        [&](dim3 g, dim3 b) {
          cross_entropy_rows_kernel<T, false><<<g, b>>>(dptr<T>(xc), dptr<int64_t>(tc), dptr<A>(f.lse),
                                                        dptr<A>(row_loss), dptr<int64_t>(row_counts), bad_ptr,
                                                        rows, V, ignore_index);
        },
        [&](dim3 g, dim3 b) {
          cross_entropy_rows_kernel<T, true><<<g, b>>>(dptr<T>(xc), dptr<int64_t>(tc), dptr<A>(f.lse),
                                                       dptr<A>(row_loss), dptr<int64_t>(row_counts), bad_ptr,
                                                       rows, V, ignore_index);
        },
        op);
    cross_entropy_mean_kernel<A><<<1, 1024>>>(dptr<A>(row_loss), dptr<int64_t>(row_counts), dptr<A>(f.loss),
                                              dptr<int64_t>(f.count), rows);
    NG_CUDA_CHECK_LAUNCH();
  });
  // A target out of range is an error, as on the CPU: one small copy tells whether any row had one.
  const int64_t bad_row = bad.to(Device::cpu()).to_vector<int64_t>()[0];
  if (bad_row < rows) {
    const int64_t t = targets.to(Device::cpu()).reshape({rows}).to_vector<int64_t>()[size_t(bad_row)];
    fail(op, "target ", t, " at position ", bad_row, " is out of range for ", V,
         " classes (expected 0 <= target < ", V, " or ignore_index = ", ignore_index, ")");
  }
  return f;
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const CrossEntropyForward& fwd,
                              const Tensor& dloss, int64_t ignore_index) {
  const char* op = "cuda::cross_entropy_backward";
  check_cuda(logits, op, "logits");
  const int64_t V = logits.size(-1), rows = V == 0 ? 0 : logits.numel() / V;
  const DType acc = compute_dtype(logits.dtype());
  Tensor xc = contiguous(logits.detach()), tc = contiguous(targets), g = cast(dloss, acc);
  Tensor dx = empty(logits.shape(), logits.dtype(), logits.device());
  if (rows * V == 0) return dx;
  NG_CUDA_DISPATCH_FLOAT(logits.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    const int64_t grid = std::clamp<int64_t>(ceil_div(rows * V, 256), 1, 65535 * 8);
    cross_entropy_backward_kernel<T><<<unsigned(grid), 256>>>(dptr<T>(xc), dptr<int64_t>(tc),
                                                              dptr<A>(fwd.lse), dptr<int64_t>(fwd.count),
                                                              dptr<A>(g), dptr<T>(dx), rows, V, ignore_index);
    NG_CUDA_CHECK_LAUNCH();
  });
  return dx;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  CrossEntropyForward f = cross_entropy_forward(logits, targets, ignore_index);
  Tensor loss = f.loss;
  if (logits.dtype() != loss.dtype()) loss = cast(loss, logits.dtype());
  if (needs_grad({logits})) {
    SavedTensor sx(logits.detach(), "cuda::cross_entropy"), st(targets, "cuda::cross_entropy");
    // The backward keeps lse and count only. Capturing all of f kept f.loss, which IS `loss` for f32/f64
    // logits: loss -> grad_fn -> this closure -> loss, a cycle that leaked the loss, lse and saved logits
    // of every call not followed by backward() (an evaluation with grad mode on, retain_graph, an error).
    const Tensor lse = f.lse, count = f.count;
    attach(loss, "CudaCrossEntropyBackward", {logits},
           [sx, st, lse, count, ignore_index](const Tensor& dout) -> std::vector<Tensor> {
             CrossEntropyForward saved;
             saved.lse = lse;
             saved.count = count;
             return {cross_entropy_backward(sx.unpack(), st.unpack(), saved, dout, ignore_index)};
           });
  }
  return loss;
}

}  // namespace ng::cuda
