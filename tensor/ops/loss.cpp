// cross_entropy: forward and backward side by side. See loss.h for the contract.
//
// Why fused: computing log_softmax (N x V) and then picking one entry per row would write and read a whole
// N x V tensor that the loss never needs. Fused, the forward keeps one number per row (lse_r) for the loss.
//
// When a gradient is wanted, the forward also writes it. The gradient of the mean loss is
//   dx_{r,v} = (1/n) (softmax_{r,v} - [v == t_r]),
// and softmax_{r,v} = exp(x_{r,v} - m_r) / s_r is made of exactly the exps the forward computes anyway
// for lse_r = m_r + log s_r. Writing it there costs one rescaling pass over a row already in L1; doing it
// in the backward instead would read the logits again and compute every exp a second time (that was the
// old design: exp was two thirds of the time). The backward is then the chain rule's dout * dx, which
// for the usual loss.backward() (dout = 1) is dx itself, handed over without a pass.
// Memory: dx (N x V) is held from the forward to the backward in place of the logits, which the old
// design saved for the same span; the peak is the same.
#include "tensor/ops/loss.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/kernels/softmax_simd.h"
#include "tensor/ops/elementwise.h"
#include "tensor/parallel.h"

namespace ng {

// ---- the per-row log-sum-exp: reference and fast ------------------------------------------------
// lse = m + log sum_v exp(x_v - m), m = max_v x_v (subtracting m keeps exp() from overflowing).
template <typename T>
void logsumexp_rows_reference(const T* x, T* lse, int64_t N, int64_t V) {
  parallel_for(N, std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * V;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t v = 0; v < V; ++v) m = std::max(m, xr[v]);
      if (!std::isfinite(m)) {
        // an all -inf row has lse = -inf; a +inf gives +inf; a nan stays nan (std::max skipped it, so add it)
        double acc = 0;
        for (int64_t v = 0; v < V; ++v) acc += xr[v];
        lse[r] = std::isnan(acc) ? T(acc) : m;
        continue;
      }
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(xr[v] - m));
      lse[r] = T(double(m) + std::log(s));
    }
  });
}
template void logsumexp_rows_reference<float>(const float*, float*, int64_t, int64_t);
template void logsumexp_rows_reference<double>(const double*, double*, int64_t, int64_t);

template <typename T>
void logsumexp_rows(const T* x, T* lse, int64_t N, int64_t V) {
  if (V == 0) return;
  parallel_for(N, std::max<int64_t>(1, 4096 / V), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      if (!simd::logsumexp_row(x + r * V, V, lse + r, x + N * V))  // (may prefetch to the end)
        logsumexp_rows_reference(x + r * V, lse + r, 1, V);
    }
  });
}
template void logsumexp_rows<float>(const float*, float*, int64_t, int64_t);
template void logsumexp_rows<double>(const double*, double*, int64_t, int64_t);

// ---- lse and the gradient rows at once: reference and fast -------------------------------------
//   lse_r = log sum_v exp(x_{r,v});   g_{r,v} = scale (exp(x_{r,v} - lse_r) - [v == t_r]),
//   g_{r,.} = 0 for an ignored row (t_r == ignore_index).
template <typename T>
void cross_entropy_rows_reference(const T* x, const int64_t* t, int64_t ignore_index, T scale, T* lse, T* g,
                                  int64_t N, int64_t V) {
  logsumexp_rows_reference(x, lse, N, V);
  parallel_for(N, std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * V;
      T* gr = g + r * V;
      const bool ignored = t[r] == ignore_index;
      for (int64_t v = 0; v < V; ++v) gr[v] = ignored ? T(0) : scale * std::exp(xr[v] - lse[r]);  // term 1
      if (!ignored) gr[t[r]] -= scale;                                                            // term 2
    }
  });
}
template void cross_entropy_rows_reference<float>(const float*, const int64_t*, int64_t, float, float*,
                                                  float*, int64_t, int64_t);
template void cross_entropy_rows_reference<double>(const double*, const int64_t*, int64_t, double, double*,
                                                   double*, int64_t, int64_t);

// Fast: per row, the Highway kernel writes term 1 (scale * softmax) and lse in one go; a row with nan or
// inf (the kernel declines it) goes through the reference, which lets nan through.
template <typename T>
void cross_entropy_rows(const T* x, const int64_t* t, int64_t ignore_index, T scale, T* lse, T* g, int64_t N,
                        int64_t V) {
  if (V == 0) return;
  parallel_for(N, std::max<int64_t>(1, 4096 / V), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * V;
      T* gr = g + r * V;
      if (t[r] == ignore_index) {
        logsumexp_rows(xr, lse + r, 1, V);
        std::fill(gr, gr + V, T(0));
        continue;
      }
      if (!simd::scaled_softmax_row(xr, scale, gr, V, lse + r, x + N * V))  // (may prefetch to the end)
        cross_entropy_rows_reference(xr, t + r, ignore_index, scale, lse + r, gr, 1, V);
      else
        gr[t[r]] -= scale;
    }
  });
}
template void cross_entropy_rows<float>(const float*, const int64_t*, int64_t, float, float*, float*, int64_t,
                                        int64_t);
template void cross_entropy_rows<double>(const double*, const int64_t*, int64_t, double, double*, double*,
                                         int64_t, int64_t);

namespace {

// Check the targets and count the rows that take part. Throws on the first bad target.
int64_t count_targets(const int64_t* t, int64_t N, int64_t V, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (t[r] == ignore_index) continue;
    NG_CHECK(t[r] >= 0 && t[r] < V, "cross_entropy", "target ", t[r], " at position ", r,
             " is out of range: expected 0 <= target < V = ", V, " (or ignore_index = ", ignore_index, ")");
    ++count;
  }
  return count;
}

}  // namespace

// Forward:  loss = (1/n) sum_r (lse_r - x_{r, t_r})  over the rows r with t_r != ignore_index.
//
// Backward: d loss / d x_{r,v} = (1/n) (softmax_{r,v} - [v == t_r])    for a counted row r,
//                                0                                       for an ignored row,
// because d lse_r / d x_{r,v} = exp(x_{r,v} - lse_r) = softmax_{r,v}, and d x_{r,t_r} / d x_{r,v} = [v ==
// t_r]. With the upstream scalar dout:   dx_{r,v} = dout * (1/n) (exp(x_{r,v} - lse_r) - [v == t_r]).
//
// The forward computes dx for dout = 1 (see the top of this file for why); saved for backward: that dx
// and nothing else. The backward multiplies by dout, or hands dx over as it is when dout = 1.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_defined(op, "logits", logits, "targets", targets);
  NG_CHECK(is_floating(logits.dtype()), op, "expected floating logits, got ", dtype_name(logits.dtype()));
  NG_CHECK(targets.dtype() == DType::i64, op, "expected i64 targets (class indices), got ",
           dtype_name(targets.dtype()));
  if (on_device({logits, targets}, op))  // the whole op, fused on the device
    return device_kernels(logits, op).cross_entropy(logits, targets, ignore_index);
  NG_CHECK(logits.dim() >= 1, op, "expected logits of shape (..., V), got a 0-d tensor");
  Shape want_t(logits.shape().begin(), logits.shape().end() - 1);
  NG_CHECK(targets.shape() == want_t, op, "targets have shape ", shape_str(targets.shape()), ", expected ",
           shape_str(want_t), " (logits ", shape_str(logits.shape()), " without the last dim V)");
  if (is_half(logits.dtype()))
    return cross_entropy(logits.to(DType::f32), targets, ignore_index).to(logits.dtype());

  // x: (N, V) contiguous; t: (N)
  const int64_t V = logits.size(-1);
  const int64_t N = numel(want_t);
  NG_CHECK(V > 0 || N == 0, op, "expected at least one class (V >= 1), got logits ",
           shape_str(logits.shape()));
  Tensor x, t;
  {
    NoGradGuard g;
    x = logits.detach().reshape({N, V}).contiguous();
    t = targets.reshape({N}).contiguous();
  }
  const int64_t* pt = t.data<int64_t>();
  const int64_t n = count_targets(pt, N, V, ignore_index);

  const bool want_grad = needs_grad({logits});
  Tensor lse = empty({N}, x.dtype());
  Tensor loss = empty({}, x.dtype());
  Tensor dx;  // (N, V): d loss / d logits for dout = 1, written by the forward when a gradient is wanted
  NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = x.data<T>();
    T* pl = lse.data<T>();
    if (want_grad) {
      dx = empty({N, V}, x.dtype());
      const T scale = n > 0 ? T(1.0 / double(n)) : T(0);
      cross_entropy_rows(px, pt, ignore_index, scale, pl, dx.data<T>(), N, V);
    } else {
      logsumexp_rows(px, pl, N, V);
    }
    // Sum the per-row losses serially in row order (deterministic), in double.
    double total = 0;
    for (int64_t r = 0; r < N; ++r)
      if (pt[r] != ignore_index) total += double(pl[r]) - double(px[r * V + pt[r]]);
    loss.data<T>()[0] = n > 0 ? T(total / double(n)) : T(0);
  });

  if (want_grad) {
    Shape logits_shape = logits.shape();
    attach(loss, "CrossEntropyBackward", {logits},
           [dx, logits_shape](const Tensor& dout) -> std::vector<Tensor> {
             // chain rule: dlogits = dout * dx. dout = 1 (loss.backward()): dx itself, no pass over it (the
             // engine then lets the leaf adopt it without a copy once this node is released).
             const double g = dout.item();
             if (g == 1.0) return {dx.reshape(logits_shape)};
             return {mul(dx, g).reshape(logits_shape)};
           });
  }
  return loss;
}

}  // namespace ng
