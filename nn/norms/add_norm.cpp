// Residual add + norm in one op (see add_norm.h for what is fused, why, and the bitwise contract).
//
// Layout: the sum builder, the forward and backward drivers (shared by LayerNorm and RMSNorm), then the two
// autograd ops. The norm math itself is not repeated here: the drivers call the norms' own fast row kernels
// (layer_norm_forward_rows, rms_norm_backward_rows, ...) on rows of h built in a per-thread buffer.
#include "nn/norms/add_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/function.h"
#include "hwy/cache_control.h"
#include "nn/norms/layer_norm.h"
#include "nn/norms/norm_common.h"
#include "nn/norms/norm_dispatch.h"
#include "nn/norms/rms_norm.h"
#include "tensor/ops/elementwise.h"
#include "tensor/parallel.h"

namespace ng {
namespace {

enum class Norm { layer, rms };

// h = alpha * x + a for `count` values, rounded as the unfused ops round it: t = alpha * x in T (alpha
// itself already rounded to T by the caller), then h = t + a in T. With alpha == 1 there is no multiply.
template <typename T, typename A>
void make_sum(const T* __restrict x, const T* __restrict a, bool scale, A alpha, T* __restrict h,
              int64_t count) {
  if constexpr (std::is_same_v<T, A>) {  // f32, f64: plain loops the compiler vectorizes
    if (scale)
      for (int64_t i = 0; i < count; ++i) h[i] = T(x[i] * alpha) + a[i];
    else
      for (int64_t i = 0; i < count; ++i) h[i] = x[i] + a[i];
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const T t = scale ? norms::store_acc<T>(norms::load_acc<A>(x[i]) * alpha) : x[i];
    h[i] = norms::store_acc<T>(norms::load_acc<A>(t) + norms::load_acc<A>(a[i]));
  }
}

// A per-thread buffer for the rows of h: grows to the largest chunk seen, then is reused.
template <typename T>
T* row_buffer(int64_t count) {
  static thread_local std::vector<T> buf;
  if (buf.size() < size_t(count)) buf.resize(size_t(count));
  return buf.data();
}

// How many rows of h to build at a time: one row, or as many as make `bytes` (1 KiB in the forward, 4 KiB
// in the backward) when rows are shorter (so that the call into the row kernel does not dominate short
// rows). h then never leaves L1: the add reads x and a from memory and the norm writes y right after, so
// the reads and writes of neighbouring rows overlap.
//
// NOTE: the block was 32 KiB from 2026-11-24 (before that a thread's whole share of rows, 8 MiB at 4096 x
// 1024), which left the fused op SLOWER than the unfused add then norm on AMD Zen 4. Best of alternating
// runs, f32, 1 thread: 4096 x 1024: 32 KiB 2.76 ms, 8 KiB 3.06, 4 KiB 1.89, 1 KiB (one row) 1.86,
// unfused 2.59; 16384 x 256: 2.64, 2.61, 1.77, 1.68, unfused 2.48. With 2 threads: 1.37 -> 0.79 ms and 0.97
// -> 0.70 ms.
template <typename T>
int64_t sum_block_rows(int64_t n, int64_t bytes) {
  return std::max<int64_t>(1, bytes / std::max<int64_t>(n * int64_t(sizeof(T)), 1));
}

// The forward: rows in parallel, in the same chunks as the plain norm's fast forward. Each thread walks its
// rows in blocks (sum_block_rows): build the block's rows of h in the buffer, then run the norm's row kernel
// on them while they are in L1. mean is unused for RMSNorm.
template <typename T, typename A>
void add_norm_forward(Norm kind, const T* x, const T* a, bool scale, A alpha, const A* w, const A* b, T* y,
                      A* mean, A* rstd, int64_t rows, int64_t n, A eps) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  const int64_t block = sum_block_rows<T>(n, 1024);
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    T* h = row_buffer<T>(std::min(block, r1 - r0) * n);
    for (int64_t q0 = r0; q0 < r1; q0 += block) {
      const int64_t q1 = std::min(r1, q0 + block);
      make_sum<T, A>(x + q0 * n, a + q0 * n, scale, alpha, h, (q1 - q0) * n);
      if (kind == Norm::layer)
        norms::layer_norm_forward_rows<T, A>(h, w, b, y + q0 * n, mean + q0, rstd + q0, q1 - q0, n, eps);
      else
        norms::rms_norm_forward_rows<T, A>(h, w, y + q0 * n, rstd + q0, q1 - q0, n, eps);
    }
  });
}

// The backward: dh = norm_backward(dy, h) with h rebuilt block by block (as in the forward), in the plain
// norm's fixed row chunks and groups of chunks (norm_common.h: sum_over_chunks), each group with its own
// dweight/dbias partial row, then summed in group order. Within a chunk the blocks run in row order into the
// group's partial row, so the sums are those of one call over the whole chunk, as in the plain norm.
//
// Two things the forward does not need. (1) The block's dy is asked for (a prefetch per line) before the add
// runs: otherwise the add streams x and a from memory, and then the norm's first pass starts the dy stream
// from scratch, alone, on every block. (2) Blocks of 4 KiB, not 1 KiB. Measured on an Intel Xeon VM (stop
// 22; F::add_layer_norm forward + backward through autograd, 2 threads, f32, the kernel timed alone, best /
// median of 5 alternating runs): 4096 x 1024 1.64 / 1.70 -> 1.37-1.44 / 1.43-1.47 ms with the prefetch;
// 16384 x 256 1.63 / 1.71 ms with the prefetch alone, 1.37 / 1.44 ms with 4 KiB blocks too (2 KiB: 1.42 /
// 1.46, 16 KiB: 1.44 / 1.55). Prefetching the next block's x and a as well made it slower (1.53 / 1.66).
// The bits do not change: the rows are the same, in the same order.
template <typename T, typename A>
void add_norm_backward(Norm kind, const T* dy, const T* x, const T* a, bool scale, A alpha, const A* w,
                       const A* mean, const A* rstd, T* dh, A* dw, A* db, int64_t rows, int64_t n) {
  const norms::RowChunks chunks = norms::row_chunks(rows, n);
  const int64_t block = sum_block_rows<T>(n, 4096);
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));  // values per cache line
  norms::sum_over_chunks(chunks, rows, n, dw, db, [&](int64_t r0, int64_t r1, A* dwc, A* dbc) {
    T* h = row_buffer<T>(block * n);
    for (int64_t q0 = r0; q0 < r1; q0 += block) {
      const int64_t q1 = std::min(r1, q0 + block);
      for (int64_t i = q0 * n; i < q1 * n; i += kLine) hwy::Prefetch(dy + i);
      make_sum<T, A>(x + q0 * n, a + q0 * n, scale, alpha, h, (q1 - q0) * n);
      if (kind == Norm::layer)
        norms::layer_norm_backward_rows<T, A>(dy + q0 * n, h, w, mean + q0, rstd + q0, dh + q0 * n, dwc, dbc,
                                              q1 - q0, n);
      else
        norms::rms_norm_backward_rows<T, A>(dy + q0 * n, h, w, rstd + q0, dh + q0 * n, dwc, q1 - q0, n);
    }
  });
}

// The autograd op for either norm. `n` is the normalized length, weight/bias already checked (bias is
// undefined for RMSNorm). x and a have one shape and one dtype, on the CPU.
Tensor add_norm(Norm kind, const Tensor& x, const Tensor& a, double alpha, int64_t n, const Shape& wshape,
                const Tensor& weight, const Tensor& bias, double eps, const char* op) {
  const DType dt = x.dtype(), acc = compute_dtype(dt);
  const int64_t rows = n > 0 ? x.numel() / n : 0;
  const bool scale = alpha != 1.0;
  // alpha as the unfused x * alpha sees it: rounded to x's dtype (scalar_like in elementwise.cpp).
  const double alpha_t = full({}, alpha, dt).item();

  Tensor xc = x.detach().contiguous(), ac = a.detach().contiguous();
  Tensor wc = norms::contiguous_as(weight, acc), bc = norms::contiguous_as(bias, acc);
  if (!wc.defined()) wc = ones({n}, acc);
  if (kind == Norm::layer && !bc.defined()) bc = zeros({n}, acc);
  Tensor y = empty(x.shape(), dt), mean = empty({rows}, acc), rstd = empty({rows}, acc);
  if (x.numel() > 0)
    norms::dispatch_storage(dt, op, [&]<typename T, typename A>() {
      add_norm_forward<T, A>(kind, static_cast<const T*>(xc.raw_data()), static_cast<const T*>(ac.raw_data()),
                             scale, A(alpha_t), wc.data<A>(), bc.defined() ? bc.data<A>() : nullptr,
                             static_cast<T*>(y.raw_data()), mean.data<A>(), rstd.data<A>(), rows, n, A(eps));
    });

  if (needs_grad({x, a, weight, bias})) {
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    const DType w_dtype = weight.defined() ? weight.dtype() : acc;
    const DType b_dtype = bias.defined() ? bias.dtype() : acc;
    // Saved: x and a (to rebuild h), the weight, and the statistics. Not h: it is rebuilt, a chunk at a time.
    SavedTensor sx(xc, op), sa(ac, op), sw(wc, op), smean(mean, op), srstd(rstd, op);
    const char* node = kind == Norm::layer ? "AddLayerNormBackward" : "AddRMSNormBackward";
    attach(y, node, {x, a, weight, bias}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor dy = dout.to(dt).contiguous();
      const Tensor xs = sx.unpack(), as = sa.unpack(), ws = sw.unpack();
      Tensor dh = empty(xs.shape(), dt);
      Tensor dw = need_dw ? zeros({n}, acc) : Tensor(), db = need_db ? zeros({n}, acc) : Tensor();
      if (xs.numel() > 0)
        norms::dispatch_storage(dt, op, [&]<typename T, typename A>() {
          add_norm_backward<T, A>(
              kind, static_cast<const T*>(dy.raw_data()), static_cast<const T*>(xs.raw_data()),
              static_cast<const T*>(as.raw_data()), scale, A(alpha_t), ws.data<A>(), smean.unpack().data<A>(),
              srstd.unpack().data<A>(), static_cast<T*>(dh.raw_data()), need_dw ? dw.data<A>() : nullptr,
              need_db ? db.data<A>() : nullptr, rows, n);
        });
      // da = dh (the add's gradient); dx = dh * alpha, by the same op the unfused x * alpha's backward runs.
      Tensor dx = scale ? mul(dh, alpha) : dh;
      return {dx, dh, norms::grad_like(dw, w_dtype, wshape), norms::grad_like(db, b_dtype, wshape)};
    });
  }
  return y;
}

// The unfused ops, for what the fast path does not take (broadcasting, mixed dtypes, devices).
bool fusable(const Tensor& x, const Tensor& a) {
  return x.defined() && a.defined() && x.shape() == a.shape() && x.dtype() == a.dtype() &&
         is_floating(x.dtype()) && x.device().is_cpu() && a.device().is_cpu();
}
Tensor unfused_sum(const Tensor& x, const Tensor& a, double alpha) {
  return alpha != 1.0 ? x * alpha + a : x + a;
}

}  // namespace

namespace F {

Tensor add_layer_norm(const Tensor& x, const Tensor& a, double alpha, const Shape& normalized_shape,
                      const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "add_layer_norm";
  check_defined(op, "x", x, "a", a);
  NG_CHECK(std::isfinite(alpha), op, "expected a finite alpha (alpha * x + a), got ", alpha);
  check_fits_dtype(alpha, x.dtype(), op, "alpha");  // alpha * x runs in x's dtype (1e5: inf in f16)
  if (!fusable(x, a)) return layer_norm(unfused_sum(x, a, alpha), normalized_shape, weight, bias, eps);
  const int64_t n =
      norms::check_layer_norm_args(x, normalized_shape, weight, bias, eps, op);  // as F::layer_norm
  return add_norm(Norm::layer, x, a, alpha, n, normalized_shape, weight, bias, eps, op);
}

Tensor add_rms_norm(const Tensor& x, const Tensor& a, double alpha, const Tensor& weight, double eps) {
  const char* op = "add_rms_norm";
  check_defined(op, "x", x, "a", a);
  NG_CHECK(std::isfinite(alpha), op, "expected a finite alpha (alpha * x + a), got ", alpha);
  check_fits_dtype(alpha, x.dtype(), op, "alpha");  // alpha * x runs in x's dtype (1e5: inf in f16)
  if (!fusable(x, a)) return rms_norm(unfused_sum(x, a, alpha), weight, eps);
  const int64_t n = norms::check_rms_norm_args(x, weight, eps, op);  // as F::rms_norm
  return add_norm(Norm::rms, x, a, alpha, n, Shape{n}, weight, Tensor(), eps, op);
}

}  // namespace F
}  // namespace ng
