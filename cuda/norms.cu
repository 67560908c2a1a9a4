// The norm kernels. Layout of this file:
//   1. row kernels (LayerNorm, RMSNorm, GroupNorm): one row = the values normalized together, contiguous;
//      warp-per-row up to 4096 values, block-per-row beyond; forward and dx side by side;
//   2. the deterministic reductions: column partials (LayerNorm/RMSNorm dweight, dbias), channel partials
//      (BatchNorm statistics, GroupNorm/BatchNorm dweight, dbias), and the second pass that adds partials;
//   3. channel kernels (BatchNorm): per-element apply with per-channel constants;
//   4. the host side: the raw halves declared in norms.h.
//
// The math per value is norm_math.h's (the same functions the CPU reference loops call):
//   forward   xhat = ((x - K) - d) * rstd,  rstd = norm_math::rstd_from_var(var, eps)   (K: the row's shift)
//   backward  dx = norm_math::centered_norm_dx(g, xhat, rstd, mean_g, mean_gx)          (LayerNorm,
//   GroupNorm,
//                                                                                         BatchNorm)
//             dx = norm_math::rms_norm_dx(g, xhat, rstd, mean_gx)                        (RMSNorm)
// What differs from the CPU:
//   - who adds which terms of the row sums: there one thread walks the row, here 32 lanes (or a block) each
//     sum a strided share and then combine in a fixed pattern;
//   - the saved mean is one value in the compute dtype. The backward's xhat = (x - mean) * rstd therefore
//     carries the mean's rounding, where the CPU keeps BatchNorm's mean in f64 (split hi + lo) and
//     recomputes each group's offset: for an f32 channel of mean 1e4 and spread 1e-2 (the mean's ulp, 1e-3,
//     is a tenth of the spread) xhat moves by up to ~0.05 in BatchNorm's dx and dweight and GroupNorm's
//     dweight. Data that far from its mean is already quantized at that scale in f32 itself;
//   - no rescue of an overflowing variance: the CPU recomputes a row whose sum of squares overflows (|x - K|
//     past ~1.8e19 in f32) with a scale (nn/norms/wide_stats.h); here its rstd is 0 and y is the bias.
// (Both found by stop 44's review of this file; docs/cuda.md lists them.)
#include "cuda/common.cuh"
#include "cuda/device_tensor.h"
#include "cuda/norms.h"
#include "nn/norms/norm_math.h"

namespace ng::cuda {

namespace {

// =====================================================================================================
// 1. Row kernels
// =====================================================================================================

// Where value i of row r takes its weight and bias from. LayerNorm/RMSNorm: channel i (groups = 1, S = 1).
// GroupNorm: a row is one (n, g) group of C/G channels x S positions, so channel = g * (C/G) + i / S.
template <typename A>
struct RowAffine {
  const A* w = nullptr;  // (C) or null
  const A* b = nullptr;  // (C) or null
  int64_t groups = 1;
  int64_t channels_per_group = 0;
  int64_t S = 1;
  __device__ __forceinline__ int64_t channel(int64_t row, int64_t i) const {
    return (row % groups) * channels_per_group + i / S;
  }
  __device__ __forceinline__ A weight(int64_t c) const { return w ? w[c] : A(1); }
  __device__ __forceinline__ A bias(int64_t c) const { return b ? b[c] : A(0); }
};

// Visit this thread's share of a row: V consecutive values at a time (V = 16 bytes when vectorized).
template <typename T, int V, typename Team, typename F>
__device__ __forceinline__ void for_row(const T* row, int64_t L, F&& f) {
  for (int64_t i = int64_t(Team::rank()) * V; i < L; i += int64_t(Team::size()) * V) {
    const Pack<T, V> p = load_pack<T, V>(row + i);
#pragma unroll
    for (int k = 0; k < V; ++k) f(i + k, to_acc(p.v[k]));
  }
}

// Forward of one row. centered: LayerNorm/GroupNorm; else RMSNorm.
//   x, y: (rows, L); mean (centered only), rstd: (rows)
template <typename T, int V, bool kBlock>
__device__ void norm_row_forward(const T* x, T* y, acc_t<T>* mean, acc_t<T>* rstd, RowAffine<acc_t<T>> aff,
                                 int64_t rows, int64_t L, acc_t<T> eps, bool centered) {
  using A = acc_t<T>;
  using Team = RowTeam<kBlock>;
  __shared__ A scratch[32];
  const int64_t row = Team::row();
  if (row >= rows) return;  // warp-per-row: the whole warp leaves together
  const T* xr = x + row * L;
  T* yr = y + row * L;

  A shift = 0, d = 0, rs;
  if (centered) {
    // pass 1: d = mean(x - K), K = x_0      pass 2: var = mean(((x - K) - d)^2) (norm_math::centered_moments)
    shift = to_acc(xr[0]);
    A s = 0;
    for_row<T, V, Team>(xr, L, [&](int64_t, A v) { s += v - shift; });
    d = Team::sum(s, scratch) / A(L);
    A m2 = 0;
    for_row<T, V, Team>(xr, L, [&](int64_t, A v) {
      const A c = (v - shift) - d;
      m2 += c * c;
    });
    rs = norm_math::rstd_from_var(Team::sum(m2, scratch) / A(L), eps);
  } else {
    // mean(x^2)  (norm_math::mean_square)
    A s = 0;
    for_row<T, V, Team>(xr, L, [&](int64_t, A v) { s += v * v; });
    rs = norm_math::rstd_from_var(Team::sum(s, scratch) / A(L), eps);
  }
  if (Team::rank() == 0) {
    if (mean) mean[row] = shift + d;
    rstd[row] = rs;
  }

  // pass 3: y = xhat * w + b, written V values at a time
  for (int64_t i = int64_t(Team::rank()) * V; i < L; i += int64_t(Team::size()) * V) {
    const Pack<T, V> in = load_pack<T, V>(xr + i);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A xhat = ((to_acc(in.v[k]) - shift) - d) * rs;
      const int64_t c = aff.channel(row, i + k);
      out.v[k] = from_acc<T>(xhat * aff.weight(c) + aff.bias(c));
    }
    store_pack<T, V>(yr + i, out);
  }
}

// dx of one row. g = dy * w.
//   centered (LayerNorm, GroupNorm): the saved mean is rounded to A, so it serves as a shift s and the row's
//     offset from it is measured, as on the CPU (nn/norms/layer_norm.cpp, section 4):
//       c = x - s,  d = (1/L) sum c,  xhat = (c - d) * rstd,
//       mean_g = (1/L) sum g,  mean_gx = rstd * ((1/L) sum g c - d * mean_g)
//   RMSNorm: xhat = x * rstd,  mean_gx = (1/L) sum g * xhat
//   dx:    norm_math::centered_norm_dx / norm_math::rms_norm_dx
template <typename T, int V, bool kBlock>
__device__ void norm_row_backward(const T* dy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd, T* dx,
                                  RowAffine<acc_t<T>> aff, int64_t rows, int64_t L, bool centered) {
  using A = acc_t<T>;
  using Team = RowTeam<kBlock>;
  __shared__ A scratch[32];
  const int64_t row = Team::row();
  if (row >= rows) return;
  const T* xr = x + row * L;
  const T* dyr = dy + row * L;
  T* dxr = dx + row * L;
  const A shift = centered ? mean[row] : A(0), rs = rstd[row];

  // pass 1: the row sums (sum_gx: of g * c when centered, of g * xhat for RMSNorm)
  A sum_c = 0, sum_g = 0, sum_gx = 0;
  for (int64_t i = int64_t(Team::rank()) * V; i < L; i += int64_t(Team::size()) * V) {
    const Pack<T, V> xp = load_pack<T, V>(xr + i), dyp = load_pack<T, V>(dyr + i);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A g = to_acc(dyp.v[k]) * aff.weight(aff.channel(row, i + k));
      const A v = to_acc(xp.v[k]);
      sum_g += g;
      if (centered) {
        const A c = v - shift;
        sum_c += c;
        sum_gx += g * c;
      } else {
        sum_gx += g * (v * rs);
      }
    }
  }
  const A d = centered ? Team::sum(sum_c, scratch) / A(L) : A(0);  // (uniform branch: the team sums together)
  const A mean_g = Team::sum(sum_g, scratch) / A(L);
  const A mean_gc = Team::sum(sum_gx, scratch) / A(L);
  const A mean_gx = centered ? rs * (mean_gc - d * mean_g) : mean_gc;

  // pass 2: dx
  for (int64_t i = int64_t(Team::rank()) * V; i < L; i += int64_t(Team::size()) * V) {
    const Pack<T, V> xp = load_pack<T, V>(xr + i), dyp = load_pack<T, V>(dyr + i);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A g = to_acc(dyp.v[k]) * aff.weight(aff.channel(row, i + k));
      const A xhat = ((to_acc(xp.v[k]) - shift) - d) * rs;
      out.v[k] = from_acc<T>(centered ? norm_math::centered_norm_dx(g, xhat, rs, mean_g, mean_gx)
                                      : norm_math::rms_norm_dx(g, xhat, rs, mean_gx));
    }
    store_pack<T, V>(dxr + i, out);
  }
}

// The kernels: pick the 128-bit or the scalar row walk once, at the top (the branch is uniform).
template <typename T, bool kBlock>
__global__ void norm_forward_kernel(const T* x, T* y, acc_t<T>* mean, acc_t<T>* rstd, RowAffine<acc_t<T>> aff,
                                    int64_t rows, int64_t L, acc_t<T> eps, bool centered, bool vectorized) {
  if (vectorized)
    norm_row_forward<T, kPack<T>, kBlock>(x, y, mean, rstd, aff, rows, L, eps, centered);
  else
    norm_row_forward<T, 1, kBlock>(x, y, mean, rstd, aff, rows, L, eps, centered);
}
template <typename T, bool kBlock>
__global__ void norm_backward_kernel(const T* dy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                     T* dx, RowAffine<acc_t<T>> aff, int64_t rows, int64_t L, bool centered,
                                     bool vectorized) {
  if (vectorized)
    norm_row_backward<T, kPack<T>, kBlock>(dy, x, mean, rstd, dx, aff, rows, L, centered);
  else
    norm_row_backward<T, 1, kBlock>(dy, x, mean, rstd, dx, aff, rows, L, centered);
}

// =====================================================================================================
// 2. Deterministic reductions
// =====================================================================================================

// Column partials for LayerNorm/RMSNorm: block (j-tile, p) sums rows [p * per_part, (p + 1) * per_part) of
// column j:  dw_part[p][j] = sum dy * xhat,  db_part[p][j] = sum dy. Threads of a warp read consecutive
// columns of a row (coalesced).
// NOTE: xhat here is (x - saved mean) * rstd. Unlike dx (norm_row_backward) and the CPU's dweight, it does
// not measure the row's offset from the rounded mean, so for an f32 row whose |mean| is orders of magnitude
// above its std (1e4 and 1e-2) dweight carries the mean's rounding (a few percent of that row's
// contribution).
template <typename T>
__global__ void column_partials_kernel(const T* dy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                       acc_t<T>* dw_part, acc_t<T>* db_part, int64_t rows, int64_t L,
                                       int64_t per_part) {
  using A = acc_t<T>;
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t p = blockIdx.y;
  if (j >= L) return;
  const int64_t r0 = p * per_part, r1 = min(rows, r0 + per_part);
  A sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const A dyv = to_acc(dy[r * L + j]);
    const A xhat = (to_acc(x[r * L + j]) - (mean ? mean[r] : A(0))) * rstd[r];
    sw += dyv * xhat;
    sb += dyv;
  }
  if (dw_part) dw_part[p * L + j] = sw;
  if (db_part) db_part[p * L + j] = sb;
}

// What a channel-partials block sums over its share of channel c's values x[n, c, s].
enum class ChannelSum {
  shifted,   // v0 = x - K_c                          (BatchNorm statistics, pass 1; K_c = x[0, c, 0])
  centered,  // v0 = ((x - K_c) - d_c)^2, d_c = a[c] / M   (pass 2)
  grads,     // v0 = dy * xhat, v1 = dy; xhat = (x - a[k]) * b[k], k = c (BatchNorm) or (n, group of c)
             // (GroupNorm)
};

// Block (c, p) sums the elements j in [p * per_part, (p + 1) * per_part) of channel c, j = n * S + s, and
// writes part0[p][c] (and part1[p][c]). The block's threads add in a fixed pattern (block_sum).
template <typename T>
__global__ void channel_partials_kernel(ChannelSum what, const T* x, const T* dy, const acc_t<T>* a,
                                        const acc_t<T>* b, acc_t<T>* part0, acc_t<T>* part1, int64_t N,
                                        int64_t C, int64_t S, int64_t G, int64_t per_part) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int64_t c = blockIdx.x, p = blockIdx.y, M = N * S;
  const int64_t j0 = p * per_part, j1 = min(M, j0 + per_part);
  const A shift = what == ChannelSum::grads ? A(0) : to_acc(x[c * S]);
  const A d = what == ChannelSum::centered ? a[c] / A(M) : A(0);
  A v0 = 0, v1 = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t n = j / S, s = j - n * S;
    const int64_t idx = (n * C + c) * S + s;
    const A xv = to_acc(x[idx]);
    if (what == ChannelSum::shifted) {
      v0 += xv - shift;
    } else if (what == ChannelSum::centered) {
      const A t = (xv - shift) - d;
      v0 += t * t;
    } else {
      const int64_t k = G > 0 ? n * G + c / (C / G) : c;
      const A dyv = to_acc(dy[idx]);
      v0 += dyv * ((xv - a[k]) * b[k]);
      v1 += dyv;
    }
  }
  v0 = block_sum(v0, scratch);
  if (part1) v1 = block_sum(v1, scratch);
  if (threadIdx.x == 0) {
    part0[p * C + c] = v0;
    if (part1) part1[p * C + c] = v1;
  }
}

// The second pass: out[j] = part[0][j] + part[1][j] + ... + part[P-1][j], in that order.
template <typename A>
__global__ void sum_partials_kernel(const A* part, A* out, int64_t P, int64_t n) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  A s = 0;
  for (int64_t p = 0; p < P; ++p) s += part[p * n + j];
  out[j] = s;
}

// =====================================================================================================
// 3. BatchNorm channel kernels
// =====================================================================================================

// Per channel, after the two statistics passes: mean, rstd, the shift and d used by the forward, and the
// running statistics update (unbiased variance, PyTorch's momentum direction).
template <typename T>
__global__ void batch_norm_stats_kernel(const T* x, const acc_t<T>* sum_shifted, const acc_t<T>* sum_sq,
                                        acc_t<T>* shift, acc_t<T>* d_out, acc_t<T>* mean, acc_t<T>* rstd,
                                        acc_t<T>* running_mean, acc_t<T>* running_var, int64_t C, int64_t S,
                                        int64_t M, acc_t<T> eps, acc_t<T> momentum) {
  using A = acc_t<T>;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const A K = to_acc(x[c * S]);
  const A d = sum_shifted[c] / A(M);
  const A var = sum_sq[c] / A(M);
  shift[c] = K;
  d_out[c] = d;
  mean[c] = K + d;
  rstd[c] = norm_math::rstd_from_var(var, eps);
  if (running_mean) running_mean[c] = (A(1) - momentum) * running_mean[c] + momentum * (K + d);
  if (running_var) running_var[c] = (A(1) - momentum) * running_var[c] + momentum * var * A(M) / A(M - 1);
}

// Eval: the running statistics as mean / rstd.
template <typename A>
__global__ void batch_norm_eval_stats_kernel(const A* running_mean, const A* running_var, A* mean, A* rstd,
                                             int64_t C, A eps) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean[c] = running_mean[c];
  rstd[c] = norm_math::rstd_from_var(running_var[c], eps);
}

// y = ((x - K_c) - d_c) * rstd_c * w_c + b_c over every element of (N, C, S).
template <typename T>
__global__ void batch_norm_apply_kernel(const T* x, T* y, const acc_t<T>* shift, const acc_t<T>* d,
                                        const acc_t<T>* rstd, const acc_t<T>* w, const acc_t<T>* b,
                                        int64_t total, int64_t C, int64_t S) {
  using A = acc_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / S) % C;
    const A xhat = ((to_acc(x[i]) - shift[c]) - (d ? d[c] : A(0))) * rstd[c];
    y[i] = from_acc<T>(xhat * (w ? w[c] : A(1)) + (b ? b[c] : A(0)));
  }
}

// dx over every element: norm_math::centered_norm_dx with per-channel mean_g = w * sum(dy) / M and
// mean_gx = w * sum(dy * xhat) / M (training), or both 0 (eval: the statistics are constants).
template <typename T>
__global__ void batch_norm_dx_kernel(const T* dy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                     const acc_t<T>* w, const acc_t<T>* sum_dy, const acc_t<T>* sum_dy_xhat,
                                     T* dx, int64_t total, int64_t C, int64_t S, int64_t M) {
  using A = acc_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / S) % C;
    const A wc = w ? w[c] : A(1);
    const A xhat = (to_acc(x[i]) - mean[c]) * rstd[c];
    const A g = to_acc(dy[i]) * wc;
    const A mean_g = sum_dy ? wc * sum_dy[c] / A(M) : A(0);
    const A mean_gx = sum_dy_xhat ? wc * sum_dy_xhat[c] / A(M) : A(0);
    dx[i] = from_acc<T>(norm_math::centered_norm_dx(g, xhat, rstd[c], mean_g, mean_gx));
  }
}

// =====================================================================================================
// 4. Host side
// =====================================================================================================

DType acc_dtype(DType t) {
  return compute_dtype(t);
}

template <typename A>
const A* opt_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const A*>(t.raw_data()) : nullptr;
}
template <typename A>
A* opt_mut(const Tensor& t) {
  return t.defined() ? static_cast<A*>(t.raw_data()) : nullptr;
}

void check_row_input(const Tensor& x, const char* op, const char* name = "x") {
  check_cuda(x, op, name);
  NG_CHECK(x.is_contiguous(), op, "expected a contiguous ", name, ", got shape ", shape_str(x.shape()),
           " with strides ", shape_str(x.strides()));
  NG_CHECK(is_floating(x.dtype()), op, "expected a floating ", name, ", got ", dtype_name(x.dtype()));
}

void check_param(const Tensor& t, const Tensor& x, int64_t n, const char* name, const char* op) {
  if (!t.defined()) return;
  NG_CHECK(t.device() == x.device(), op, name, " is on ", t.device().str(), ", expected ", x.device().str(),
           " like x");
  NG_CHECK(t.numel() == n && t.is_contiguous() && t.dtype() == acc_dtype(x.dtype()), op, "expected ", name,
           " to be ", n, " contiguous ", dtype_name(acc_dtype(x.dtype())), " values, got ",
           shape_str(t.shape()), " ", dtype_name(t.dtype()));
}

// What every backward reads besides x: dy like x (shape, dtype, device), the saved statistics (`rows`
// values each, in the compute dtype, on x's device) and the weight (`n` values). The kernels index them
// by x's layout, so a shorter or other-typed one was read past its end or as the wrong type.
void check_backward_inputs(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                           int64_t rows, const Tensor& weight, int64_t n, const char* op) {
  check_row_input(x, op);
  check_row_input(dy, op, "dy");
  NG_CHECK(dy.shape() == x.shape() && dy.dtype() == x.dtype() && dy.device() == x.device(), op,
           "expected dy like x: ", shape_str(x.shape()), " ", dtype_name(x.dtype()), " on ", x.device().str(),
           ", got ", shape_str(dy.shape()), " ", dtype_name(dy.dtype()), " on ", dy.device().str());
  NG_CHECK(rstd.defined(), op, "expected the saved rstd, got an undefined tensor");
  check_param(rstd, x, rows, "rstd", op);
  check_param(mean, x, rows, "mean", op);
  check_param(weight, x, n, "weight", op);
}

// 128-bit loads need the row length to be a multiple of the pack and every row pointer 16-byte aligned.
bool can_vectorize(int64_t L, DType dt, std::initializer_list<const Tensor*> tensors) {
  const int64_t pack = 16 / int64_t(dtype_size(dt));
  if (L % pack != 0) return false;
  for (const Tensor* t : tensors)
    if (t->defined() && !is_aligned16(t->raw_data())) return false;
  return true;
}

// Number of partial rows for a reduction over `count` items: fixed by the size alone (deterministic), about
// 64 items per partial, at most 256 partials.
int64_t partial_count(int64_t count) {
  return std::clamp<int64_t>(ceil_div(count, 64), 1, 256);
}

// Row-kernel forward shared by LayerNorm, RMSNorm and GroupNorm.
norms::NormStats row_forward(const Tensor& x, int64_t rows, int64_t L, const Tensor& weight,
                             const Tensor& bias, int64_t groups, int64_t channels_per_group, int64_t S,
                             double eps, bool centered, const char* op) {
  const DType adt = acc_dtype(x.dtype());
  norms::NormStats st;
  st.y = empty(x.shape(), x.dtype(), x.device());
  if (centered) st.mean = empty({rows}, adt, x.device());
  st.rstd = empty({rows}, adt, x.device());
  // Nothing to normalize (a GroupNorm of (N, C, 0) has rows but no values in them): the kernel would read
  // a row's first value as its shift. As on the CPU, the statistics stay unset.
  if (x.numel() == 0) return st;
  const bool vec = can_vectorize(L, x.dtype(), {&x, &st.y});
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    RowAffine<A> aff{opt_ptr<A>(weight), opt_ptr<A>(bias), groups, channels_per_group, S};
    launch_rows(
        rows, L,
        [&](dim3 grid, dim3 block) {
          norm_forward_kernel<T, false><<<grid, block>>>(dptr<T>(x), dptr<T>(st.y), opt_mut<A>(st.mean),
                                                         dptr<A>(st.rstd), aff, rows, L, A(eps), centered,
                                                         vec);
        },
        [&](dim3 grid, dim3 block) {
          norm_forward_kernel<T, true><<<grid, block>>>(dptr<T>(x), dptr<T>(st.y), opt_mut<A>(st.mean),
                                                        dptr<A>(st.rstd), aff, rows, L, A(eps), centered,
                                                        vec);
        },
        op);
  });
  return st;
}

Tensor row_dx(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, int64_t rows,
              int64_t L, const Tensor& weight, int64_t groups, int64_t channels_per_group, int64_t S,
              bool centered, const char* op) {
  Tensor dx = empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return dx;
  const bool vec = can_vectorize(L, x.dtype(), {&x, &dy, &dx});
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    RowAffine<A> aff{opt_ptr<A>(weight), nullptr, groups, channels_per_group, S};
    launch_rows(
        rows, L,
        [&](dim3 grid, dim3 block) {
          norm_backward_kernel<T, false><<<grid, block>>>(dptr<T>(dy), dptr<T>(x), opt_ptr<A>(mean),
                                                          dptr<A>(rstd), dptr<T>(dx), aff, rows, L, centered,
                                                          vec);
        },
        [&](dim3 grid, dim3 block) {
          norm_backward_kernel<T, true><<<grid, block>>>(dptr<T>(dy), dptr<T>(x), opt_ptr<A>(mean),
                                                         dptr<A>(rstd), dptr<T>(dx), aff, rows, L, centered,
                                                         vec);
        },
        op);
  });
  return dx;
}

// dweight / dbias of LayerNorm and RMSNorm: column partials over fixed row chunks, then the ordered sum.
void column_grads(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, int64_t rows,
                  int64_t L, Tensor* dweight, Tensor* dbias, const char* op) {
  const DType adt = acc_dtype(x.dtype());
  const int64_t P = partial_count(rows), per_part = ceil_div(std::max<int64_t>(rows, 1), P);
  Tensor dw_part = dweight ? empty({P, L}, adt, x.device()) : Tensor();
  Tensor db_part = dbias ? empty({P, L}, adt, x.device()) : Tensor();
  if (dweight) *dweight = empty({L}, adt, x.device());
  if (dbias) *dbias = empty({L}, adt, x.device());
  if (L == 0) return;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    const int threads = 256;
    column_partials_kernel<T><<<dim3(unsigned(ceil_div(L, threads)), unsigned(P)), threads>>>(
        dptr<T>(dy), dptr<T>(x), opt_ptr<A>(mean), dptr<A>(rstd), opt_mut<A>(dw_part), opt_mut<A>(db_part),
        rows, L, per_part);
    NG_CUDA_CHECK_LAUNCH();
    if (dweight) {
      sum_partials_kernel<A>
          <<<unsigned(ceil_div(L, threads)), threads>>>(dptr<A>(dw_part), dptr<A>(*dweight), P, L);
      NG_CUDA_CHECK_LAUNCH();
    }
    if (dbias) {
      sum_partials_kernel<A>
          <<<unsigned(ceil_div(L, threads)), threads>>>(dptr<A>(db_part), dptr<A>(*dbias), P, L);
      NG_CUDA_CHECK_LAUNCH();
    }
  });
}

// Per-channel sums over (N, C, S): channel partials, then the ordered sum. out0 (C) and out1 (C) or null.
template <typename T>
void channel_sums(ChannelSum what, const Tensor& x, const Tensor& dy, const Tensor& a, const Tensor& b,
                  int64_t N, int64_t C, int64_t S, int64_t G, Tensor* out0, Tensor* out1) {
  using A = acc_t<T>;
  const DType adt = acc_dtype(x.dtype());
  const int64_t M = N * S;
  const int64_t P = std::clamp<int64_t>(ceil_div(M, 8192), 1, 64),
                per_part = ceil_div(std::max<int64_t>(M, 1), P);
  Tensor part0 = empty({P, C}, adt, x.device());
  Tensor part1 = out1 ? empty({P, C}, adt, x.device()) : Tensor();
  *out0 = empty({C}, adt, x.device());
  if (out1) *out1 = empty({C}, adt, x.device());
  if (C == 0) return;
  channel_partials_kernel<T><<<dim3(unsigned(C), unsigned(P)), 256>>>(
      what, dptr<T>(x), dy.defined() ? dptr<T>(dy) : nullptr, opt_ptr<A>(a), opt_ptr<A>(b), dptr<A>(part0),
      opt_mut<A>(part1), N, C, S, G, per_part);
  NG_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<A><<<unsigned(ceil_div(C, 256)), 256>>>(dptr<A>(part0), dptr<A>(*out0), P, C);
  NG_CUDA_CHECK_LAUNCH();
  if (out1) {
    sum_partials_kernel<A><<<unsigned(ceil_div(C, 256)), 256>>>(dptr<A>(part1), dptr<A>(*out1), P, C);
    NG_CUDA_CHECK_LAUNCH();
  }
}

// x: (N, C, *) -> N, C, S.
void ncs(const Tensor& x, int64_t& N, int64_t& C, int64_t& S, const char* op) {
  NG_CHECK(x.dim() >= 2, op, "expected x of shape (N, C, *), got ", shape_str(x.shape()));
  N = x.size(0);
  C = x.size(1);
  S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
}

int64_t elementwise_grid(int64_t total) {
  return std::clamp<int64_t>(ceil_div(total, 256), 1, 65535 * 8);
}

}  // namespace

// ---- LayerNorm
// ---------------------------------------------------------------------------------------------
norms::NormStats layer_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                                    double eps) {
  const char* op = "cuda::layer_norm_forward";
  check_row_input(x, op);
  NG_CHECK(n > 0 && x.numel() % n == 0, op, "row length ", n, " does not divide x of shape ",
           shape_str(x.shape()));
  check_param(weight, x, n, "weight", op);
  check_param(bias, x, n, "bias", op);
  return row_forward(x, x.numel() / n, n, weight, bias, 1, n, 1, eps, true, op);
}

norms::NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight, bool need_dx,
                                     bool need_dweight, bool need_dbias) {
  const char* op = "cuda::layer_norm_backward";
  NG_CHECK(rstd.defined(), op, "expected the saved rstd, got an undefined tensor");
  const int64_t rows = rstd.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  NG_CHECK(rows == 0 ? x.numel() == 0 : x.numel() % rows == 0, op, "rstd has ", rows,
           " values, which do not divide x of shape ", shape_str(x.shape()), " into rows");
  NG_CHECK(mean.defined(), op, "expected the saved mean, got an undefined tensor");
  // (No rows: nothing reads the weight, whose length x's empty shape does not tell here.)
  check_backward_inputs(dy, x, mean, rstd, rows, weight, rows == 0 && weight.defined() ? weight.numel() : n,
                        op);
  norms::NormGrads gr;
  if (need_dx) gr.dx = row_dx(dy, x, mean, rstd, rows, n, weight, 1, n, 1, true, op);
  if (need_dweight || need_dbias)
    column_grads(dy, x, mean, rstd, rows, n, need_dweight ? &gr.dweight : nullptr,
                 need_dbias ? &gr.dbias : nullptr, op);
  return gr;
}

// ---- RMSNorm
// -----------------------------------------------------------------------------------------------
norms::NormStats rms_norm_forward(const Tensor& x, int64_t n, const Tensor& weight, double eps) {
  const char* op = "cuda::rms_norm_forward";
  check_row_input(x, op);
  NG_CHECK(n > 0 && x.numel() % n == 0, op, "row length ", n, " does not divide x of shape ",
           shape_str(x.shape()));
  check_param(weight, x, n, "weight", op);
  return row_forward(x, x.numel() / n, n, weight, Tensor(), 1, n, 1, eps, false, op);
}

norms::NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                                   const Tensor& weight, bool need_dx, bool need_dweight) {
  const char* op = "cuda::rms_norm_backward";
  NG_CHECK(rstd.defined(), op, "expected the saved rstd, got an undefined tensor");
  const int64_t rows = rstd.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  NG_CHECK(rows == 0 ? x.numel() == 0 : x.numel() % rows == 0, op, "rstd has ", rows,
           " values, which do not divide x of shape ", shape_str(x.shape()), " into rows");
  check_backward_inputs(dy, x, Tensor(), rstd, rows, weight,
                        rows == 0 && weight.defined() ? weight.numel() : n, op);
  norms::NormGrads gr;
  if (need_dx) gr.dx = row_dx(dy, x, Tensor(), rstd, rows, n, weight, 1, n, 1, false, op);
  if (need_dweight) column_grads(dy, x, Tensor(), rstd, rows, n, &gr.dweight, nullptr, op);
  return gr;
}

// ---- GroupNorm: a row is one (n, g) group of C/G channels x S positions
// ------------------------------------
norms::NormStats group_norm_forward(const Tensor& x, int64_t G, const Tensor& weight, const Tensor& bias,
                                    double eps) {
  const char* op = "cuda::group_norm_forward";
  check_row_input(x, op);
  int64_t N, C, S;
  ncs(x, N, C, S, op);
  NG_CHECK(G > 0 && C % G == 0, op, "num_groups ", G, " must divide the ", C, " channels of x ",
           shape_str(x.shape()));
  check_param(weight, x, C, "weight", op);
  check_param(bias, x, C, "bias", op);
  norms::NormStats st = row_forward(x, N * G, (C / G) * S, weight, bias, G, C / G, S, eps, true, op);
  st.mean = st.mean.reshape({N, G});
  st.rstd = st.rstd.reshape({N, G});
  return st;
}

norms::NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, int64_t G, const Tensor& weight, bool need_dx,
                                     bool need_dweight, bool need_dbias) {
  const char* op = "cuda::group_norm_backward";
  check_row_input(x, op);
  int64_t N, C, S;
  ncs(x, N, C, S, op);
  NG_CHECK(G > 0 && C % G == 0, op, "num_groups ", G, " must divide the ", C, " channels of x ",
           shape_str(x.shape()));
  NG_CHECK(mean.defined(), op, "expected the saved mean, got an undefined tensor");
  check_backward_inputs(dy, x, mean, rstd, N * G, weight, C, op);
  norms::NormGrads gr;
  if (need_dx) gr.dx = row_dx(dy, x, mean, rstd, N * G, (C / G) * S, weight, G, C / G, S, true, op);
  if (need_dweight || need_dbias) {
    NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
      Tensor dw, db;
      channel_sums<T>(ChannelSum::grads, x, dy, mean, rstd, N, C, S, G, &dw, &db);
      if (need_dweight) gr.dweight = dw;
      if (need_dbias) gr.dbias = db;
    });
  }
  return gr;
}

// ---- BatchNorm
// -----------------------------------------------------------------------------------------------
norms::NormStats batch_norm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          double eps, const Tensor& running_mean, const Tensor& running_var,
                                          double momentum) {
  const char* op = "cuda::batch_norm_forward_train";
  check_row_input(x, op);
  int64_t N, C, S;
  ncs(x, N, C, S, op);
  const int64_t M = N * S;
  NG_CHECK(M > 1, op, "expected more than 1 value per channel when training, got input of shape ",
           shape_str(x.shape()));
  check_param(weight, x, C, "weight", op);
  check_param(bias, x, C, "bias", op);
  check_param(running_mean, x, C, "running_mean", op);
  check_param(running_var, x, C, "running_var", op);
  const DType adt = acc_dtype(x.dtype());
  norms::NormStats st;
  st.y = empty(x.shape(), x.dtype(), x.device());
  st.mean = empty({C}, adt, x.device());
  st.rstd = empty({C}, adt, x.device());
  Tensor shift = empty({C}, adt, x.device()), d = empty({C}, adt, x.device());
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    // pass 1: sum(x - K) per channel; pass 2: sum(((x - K) - d)^2) (norm_math::centered_moments, in parallel)
    Tensor sum_shifted, sum_sq;
    channel_sums<T>(ChannelSum::shifted, x, Tensor(), Tensor(), Tensor(), N, C, S, 0, &sum_shifted, nullptr);
    channel_sums<T>(ChannelSum::centered, x, Tensor(), sum_shifted, Tensor(), N, C, S, 0, &sum_sq, nullptr);
    batch_norm_stats_kernel<T><<<unsigned(ceil_div(C, 256)), 256>>>(
        dptr<T>(x), dptr<A>(sum_shifted), dptr<A>(sum_sq), dptr<A>(shift), dptr<A>(d), dptr<A>(st.mean),
        dptr<A>(st.rstd), opt_mut<A>(running_mean), opt_mut<A>(running_var), C, S, M, A(eps), A(momentum));
    NG_CUDA_CHECK_LAUNCH();
    batch_norm_apply_kernel<T><<<unsigned(elementwise_grid(x.numel())), 256>>>(
        dptr<T>(x), dptr<T>(st.y), dptr<A>(shift), dptr<A>(d), dptr<A>(st.rstd), opt_ptr<A>(weight),
        opt_ptr<A>(bias), x.numel(), C, S);
    NG_CUDA_CHECK_LAUNCH();
  });
  if (running_mean.defined()) running_mean.bump_version();
  if (running_var.defined()) running_var.bump_version();
  return st;
}

norms::NormStats batch_norm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         double eps, const Tensor& running_mean, const Tensor& running_var) {
  const char* op = "cuda::batch_norm_forward_eval";
  check_row_input(x, op);
  int64_t N, C, S;
  ncs(x, N, C, S, op);
  NG_CHECK(running_mean.defined() && running_var.defined(), op,
           "eval mode needs running_mean and running_var (track_running_stats)");
  check_param(weight, x, C, "weight", op);
  check_param(bias, x, C, "bias", op);
  check_param(running_mean, x, C, "running_mean", op);
  check_param(running_var, x, C, "running_var", op);
  const DType adt = acc_dtype(x.dtype());
  norms::NormStats st;
  st.y = empty(x.shape(), x.dtype(), x.device());
  st.mean = empty({C}, adt, x.device());
  st.rstd = empty({C}, adt, x.device());
  if (C == 0) return st;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    batch_norm_eval_stats_kernel<A><<<unsigned(ceil_div(C, 256)), 256>>>(
        dptr<A>(running_mean), dptr<A>(running_var), dptr<A>(st.mean), dptr<A>(st.rstd), C, A(eps));
    NG_CUDA_CHECK_LAUNCH();
    if (x.numel() == 0) return;
    batch_norm_apply_kernel<T><<<unsigned(elementwise_grid(x.numel())), 256>>>(
        dptr<T>(x), dptr<T>(st.y), dptr<A>(st.mean), nullptr, dptr<A>(st.rstd), opt_ptr<A>(weight),
        opt_ptr<A>(bias), x.numel(), C, S);
    NG_CUDA_CHECK_LAUNCH();
  });
  return st;
}

norms::NormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight, bool training, bool need_dx,
                                     bool need_dweight, bool need_dbias) {
  const char* op = "cuda::batch_norm_backward";
  check_row_input(x, op);
  int64_t N, C, S;
  ncs(x, N, C, S, op);
  NG_CHECK(mean.defined(), op, "expected the saved mean, got an undefined tensor");
  check_backward_inputs(dy, x, mean, rstd, C, weight, C, op);
  norms::NormGrads gr;
  NG_CUDA_DISPATCH_FLOAT(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    // sum(dy * xhat) and sum(dy) per channel: dweight and dbias, and the two sums the training dx needs.
    Tensor sum_dy_xhat, sum_dy;
    const bool need_sums = need_dweight || need_dbias || (need_dx && training);
    if (need_sums) channel_sums<T>(ChannelSum::grads, x, dy, mean, rstd, N, C, S, 0, &sum_dy_xhat, &sum_dy);
    if (need_dweight) gr.dweight = sum_dy_xhat;
    if (need_dbias) gr.dbias = sum_dy;
    if (need_dx) {
      gr.dx = empty(x.shape(), x.dtype(), x.device());
      if (x.numel() == 0) return;
      batch_norm_dx_kernel<T><<<unsigned(elementwise_grid(x.numel())), 256>>>(
          dptr<T>(dy), dptr<T>(x), dptr<A>(mean), dptr<A>(rstd), opt_ptr<A>(weight),
          training ? dptr<A>(sum_dy) : nullptr, training ? dptr<A>(sum_dy_xhat) : nullptr, dptr<T>(gr.dx),
          x.numel(), C, S, N * S);
      NG_CUDA_CHECK_LAUNCH();
    }
  });
  return gr;
}

}  // namespace ng::cuda
