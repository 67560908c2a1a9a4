// cross_entropy: forward and backward side by side. See loss.h for the contract.
//
// Why fused: computing log_softmax (N x V) and then picking one entry per row would write and read a whole
// N x V tensor that the loss never needs. Fused, the forward keeps one number per row (lse_r), and the
// backward recomputes the softmax from the logits and lse in one pass.
#include "tensor/ops/loss.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "tensor/kernels/softmax_simd.h"
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
    for (int64_t r = rb; r < re; ++r)
      if (!simd::logsumexp_row(x + r * V, V, lse + r)) logsumexp_rows_reference(x + r * V, lse + r, 1, V);
  });
}
template void logsumexp_rows<float>(const float*, float*, int64_t, int64_t);
template void logsumexp_rows<double>(const double*, double*, int64_t, int64_t);

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
// t_r]. With the upstream scalar dout:   dx_{r,v} = dout / n * (exp(x_{r,v} - lse_r) - [v == t_r]).
//
// Saved for backward: the logits (version-checked) and lse (N numbers). The softmax is recomputed from
// them rather than cached: caching it would keep an N x V tensor alive for the whole backward.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const char* op = "cross_entropy";
  NG_CHECK(is_floating(logits.dtype()), op, "expected floating logits, got ", dtype_name(logits.dtype()));
  NG_CHECK(targets.dtype() == DType::i64, op, "expected i64 targets (class indices), got ",
           dtype_name(targets.dtype()));
  NG_CHECK(logits.device().is_cpu() && targets.device().is_cpu(), op, "expected CPU tensors, got ",
           logits.device().str(), " and ", targets.device().str());
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

  Tensor lse = empty({N}, x.dtype());
  Tensor loss = empty({}, x.dtype());
  NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = x.data<T>();
    T* pl = lse.data<T>();
    logsumexp_rows(px, pl, N, V);
    // Sum the per-row losses serially in row order (deterministic), in double.
    double total = 0;
    for (int64_t r = 0; r < N; ++r)
      if (pt[r] != ignore_index) total += double(pl[r]) - double(px[r * V + pt[r]]);
    loss.data<T>()[0] = n > 0 ? T(total / double(n)) : T(0);
  });

  if (needs_grad({logits})) {
    SavedTensor saved_x(x, op), saved_t(t, op);
    Shape logits_shape = logits.shape();
    attach(
        loss, "CrossEntropyBackward", {logits},
        [saved_x, saved_t, lse, n, N, V, ignore_index, logits_shape,
         op](const Tensor& dout) -> std::vector<Tensor> {
          Tensor xs = saved_x.unpack();
          Tensor dx = empty({N, V}, xs.dtype());
          NG_DISPATCH_FLOAT(xs.dtype(), op, [&]<typename scalar_t>() {
            using T = scalar_t;
            const T* px = xs.data<T>();
            const T* pl = lse.data<T>();
            const int64_t* pt = saved_t.unpack().data<int64_t>();
            T* pd = dx.data<T>();
            const T scale = n > 0 ? T(dout.item() / double(n)) : T(0);
            parallel_for(
                N, std::max<int64_t>(1, 4096 / std::max<int64_t>(V, 1)), [&](int64_t rb, int64_t re) {
                  for (int64_t r = rb; r < re; ++r) {
                    T* dr = pd + r * V;
                    if (pt[r] == ignore_index) {
                      std::fill(dr, dr + V, T(0));  // an ignored row gets no gradient
                      continue;
                    }
                    // term 1: scale * softmax_{r,v} = scale * exp(x_{r,v} - lse_r)
                    if (std::isfinite(pl[r]))
                      simd::scaled_softmax_from_lse_row(px + r * V, pl[r], scale, dr, V);
                    else  // nan or inf in the row: the scalar loop lets nan through (SIMD Exp maps nan to 0)
                      for (int64_t v = 0; v < V; ++v) dr[v] = scale * std::exp(px[r * V + v] - pl[r]);
                    // term 2: - scale at the target
                    dr[pt[r]] -= scale;
                  }
                });
          });
          return {dx.reshape(logits_shape)};
        });
  }
  return loss;
}

}  // namespace ng
