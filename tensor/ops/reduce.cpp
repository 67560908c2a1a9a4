// Reductions, forward and backward.
//
// Every reduction here is done the same way: move the reduced dims to the end (a free permute), make
// that contiguous, and reduce each row of length L = (product of the reduced sizes). Simple, correct for
// any strides, and each row is reduced in a fixed order.
//
// One exception: an expanded view (a dim of size n > 1 with stride 0) holds each value n times, and its
// contiguous copy would hold them all: x = ones({1, 1}).expand({2^20, 2^20}) is 4 bytes, its copy 4 TiB
// ("Storage: out of memory", from no op the caller named). Such a view is reduced from one copy of its
// values, which narrows every stride-0 dim to size 1 (one_copy). With k = the product of n over the stride-0
// dims in the reduced dims D, and L the number of values each output reduces:
//   sum over D of x    = k * (sum over D of the copy)
//   mean over D of x   = mean over D of the copy
//   var over D of x    = (biased var over D of the copy) * L / (L - c)    c = 1 if unbiased else 0
//                        (each value and its deviation from the mean appear k times: L = k * L_copy)
//   max, argmax over d = those of the copy (the k copies of a value tie; the first, index 0, is the argmax)
// and the result is then broadcast back over the kept stride-0 dims. The backward is the usual one.
#include "tensor/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/kernels/reduce_simd.h"
#include "tensor/ops/elementwise.h"
#include "tensor/parallel.h"

namespace ng {

namespace {

struct Plan {
  std::vector<int64_t> dims;  // sorted, unique, wrapped
  Shape kept_shape;           // output shape with keepdim = true
  Shape out_shape;            // output shape as requested
  int64_t rows = 1, L = 1;
};

Plan make_plan(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, const char* op) {
  Plan p;
  if (dims_in.empty()) {  // empty list: reduce everything
    for (int64_t d = 0; d < x.dim(); ++d) p.dims.push_back(d);
  } else {
    for (int64_t d : dims_in) p.dims.push_back(wrap_dim(d, x.dim(), op));
    std::sort(p.dims.begin(), p.dims.end());
    const auto twice = std::adjacent_find(p.dims.begin(), p.dims.end());
    NG_CHECK(twice == p.dims.end(), op, "a dim appears twice in the list of dims to reduce: dim ",
             twice == p.dims.end() ? 0 : *twice, " in ", shape_str(dims_in), " for a tensor of shape ",
             shape_str(x.shape()), " (expected each dim once)");
    // A 0-d x: dim 0 (or -1) is allowed, as in PyTorch, and names the one value; nothing to permute away.
    if (x.dim() == 0) p.dims.clear();
  }
  // rows * L = numel(x), so both fit in an int64, except for an empty x: an expanded view of shape
  // (0, 2^40, 2^40) has no values, and its L over dims (1, 2) is 2^80. That L wrapped around (undefined
  // behaviour; to 0, and mean refused it as an empty set). It saturates instead (rows is 0: no row is read),
  // and a later zero size still makes it 0.
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool reduced = std::binary_search(p.dims.begin(), p.dims.end(), d);
    p.kept_shape.push_back(reduced ? 1 : x.size(d));
    if (!reduced || keepdim) p.out_shape.push_back(reduced ? 1 : x.size(d));
    int64_t& n = reduced ? p.L : p.rows;
    if (__builtin_mul_overflow(n, x.size(d), &n)) n = std::numeric_limits<int64_t>::max();
  }
  return p;
}

// x permuted so the reduced dims come last, made contiguous: rows x L.
Tensor rows_view(const Tensor& x, const Plan& p) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(p.dims.begin(), p.dims.end(), d)) perm.push_back(d);
  for (int64_t d : p.dims) perm.push_back(d);
  NoGradGuard g;
  return x.detach().permute(perm).contiguous();
}

// True when the reduced dims are exactly the leading dims of a contiguous x: then x is (R, C) with
// R = p.L summed away and C = p.rows kept, and the sum runs down the columns without a transposed copy.
bool leading_dims_reduced(const Tensor& x, const Plan& p) {
  if (!x.is_contiguous() || p.dims.empty() || p.rows < 16) return false;
  for (size_t i = 0; i < p.dims.size(); ++i)
    if (p.dims[i] != int64_t(i)) return false;
  return true;
}

// Sum over each row -> a tensor of shape out_shape, scaled by `scale`.
// The row sums use the Highway kernel simd::sum_row; sum_row_reference (kernels/reduce_simd.h) is the
// scalar loop it replaces, and the reference in tests.
Tensor sum_kernel(const Tensor& x, const Plan& p, double scale, const char* op) {
  Tensor out = empty(p.out_shape, x.dtype());
  if (leading_dims_reduced(x, p)) {
    // Column sums: out_c = sum_r x_{r,c}, columns cut into fixed chunks (one task each, rows in order).
    NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
      using T = scalar_t;
      const T* px = x.data<T>();
      T* po = out.data<T>();
      const int64_t R = p.L, C = p.rows;
      constexpr int64_t kCols = 256;
      parallel_for(C, kCols, [&](int64_t c0, int64_t c1) {
        double acc[kCols] = {};
        simd::add_rows_to(px + c0, R, c1 - c0, C, acc);
        for (int64_t c = c0; c < c1; ++c) po[c] = T(acc[c - c0] * scale);
      });
    });
    return out;
  }
  Tensor rows = rows_view(x, p);
  NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = rows.data<T>();
    T* po = out.data<T>();
    const int64_t L = p.L;
    if (p.rows == 1 && L > (1 << 16)) {
      // One long row: fixed chunks in parallel, partials combined in order (thread-count independent).
      constexpr int64_t kChunk = 1 << 14;
      int64_t chunks = (L + kChunk - 1) / kChunk;
      std::vector<double> part(static_cast<size_t>(chunks), 0.0);
      parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c)
          part[c] = simd::sum_row(px + c * kChunk, std::min(kChunk, L - c * kChunk));
      });
      double s = 0;
      for (double v : part) s += v;
      po[0] = T(s * scale);
      return;
    }
    parallel_for(p.rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) po[r] = T(simd::sum_row(px + r * L, L) * scale);
    });
  });
  return out;
}

template <typename F>
Tensor half_to_f32(const Tensor& x, F&& f) {
  return f(x.to(DType::f32)).to(x.dtype());
}

// x has a dim of size > 1 with stride 0 (an expanded view).
bool has_expanded_dim(const Tensor& x) {
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.stride(d) == 0 && x.size(d) > 1) return true;
  return false;
}

// x detached, with every stride-0 dim of size > 1 narrowed to size 1: one copy of its values (the header).
Tensor one_copy(const Tensor& x) {
  Tensor one = x.detach();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.stride(d) == 0 && x.size(d) > 1) one = one.narrow(d, 0, 1);
  return one;
}

// The sum (is_mean: the mean) of an expanded view x from one copy of its values (the header above), with
// no graph: the caller attaches the usual backward. f16/bf16 sum their copy in f32 and scale it there, as
// half_to_f32 does for any half input, so that the result is rounded to the half type once, at the end
// (rounded after the sum and again after the scaling, (1, 2^-11) in f16 expanded 3 times gave 3 instead of
// the 3.00195 of its contiguous copy).
Tensor sum_of_one_copy(const Tensor& x, const Plan& p, bool is_mean) {
  NoGradGuard no_grad;
  double copies = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.stride(d) == 0 && x.size(d) > 1 && std::binary_search(p.dims.begin(), p.dims.end(), d))
      copies *= double(x.size(d));
  Tensor one = one_copy(x);
  if (is_half(x.dtype())) one = one.to(DType::f32);
  Tensor part = is_mean ? mean(one, p.dims, /*keepdim=*/true) : sum(one, p.dims, /*keepdim=*/true);
  if (!is_mean && copies != 1) part = mul(part, copies);
  return part.expand(p.kept_shape).contiguous().reshape(p.out_shape).to(x.dtype());
}

}  // namespace

// sum: y = sum_i x_i over the reduced dims.   dx_i = dout (broadcast back over the reduced dims).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined("sum", "x", x);
  const bool device = on_device({x}, "sum"), expanded = !device && has_expanded_dim(x);
  if (is_half(x.dtype()) && !expanded)
    return half_to_f32(x, [&](const Tensor& x32) { return sum(x32, dims, keepdim); });
  Plan p = make_plan(x, dims, keepdim, "sum");
  Tensor y = device     ? device_kernels(x, "sum").sum(x, dims, keepdim, false)
             : expanded ? sum_of_one_copy(x, p, /*is_mean=*/false)
                        : sum_kernel(x, p, 1.0, "sum");
  if (needs_grad({x})) {
    Shape in_shape = x.shape(), kept = p.kept_shape;
    attach(y, "SumBackward", {x}, [in_shape, kept](const Tensor& dout) -> std::vector<Tensor> {
      return {dout.reshape(kept).expand(in_shape)};
    });
  }
  return y;
}
Tensor sum(const Tensor& x) {
  return sum(x, {}, false);
}

// mean: y = (1/L) sum_i x_i.   dx_i = dout / L.
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined("mean", "x", x);
  const bool device = on_device({x}, "mean"), expanded = !device && has_expanded_dim(x);
  if (is_half(x.dtype()) && !expanded)
    return half_to_f32(x, [&](const Tensor& x32) { return mean(x32, dims, keepdim); });
  Plan p = make_plan(x, dims, keepdim, "mean");
  NG_CHECK(p.L > 0, "mean", "cannot take the mean of an empty set of values (shape ", shape_str(x.shape()),
           ")");
  Tensor y = device     ? device_kernels(x, "mean").sum(x, dims, keepdim, true)
             : expanded ? sum_of_one_copy(x, p, /*is_mean=*/true)
                        : sum_kernel(x, p, 1.0 / double(p.L), "mean");
  if (needs_grad({x})) {
    Shape in_shape = x.shape(), kept = p.kept_shape;
    double inv = 1.0 / double(p.L);
    attach(y, "MeanBackward", {x}, [in_shape, kept, inv](const Tensor& dout) -> std::vector<Tensor> {
      return {mul(dout.reshape(kept), inv).expand(in_shape)};
    });
  }
  return y;
}
Tensor mean(const Tensor& x) {
  return mean(x, {}, false);
}

// The var and mean of each row of x's rows view into y (out_shape) and m (kept_shape).
static void var_rows(const Tensor& x, const Plan& p, double denom, Tensor& y, Tensor& m) {
  Tensor rows = rows_view(x, p);
  NG_DISPATCH_FLOAT(x.dtype(), "var", [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = rows.data<T>();
    T* py = y.data<T>();
    T* pm = m.data<T>();
    const int64_t L = p.L;
    // Grain: about 4096 elements per task, so a small tensor does not pay for a parallel region.
    parallel_for(p.rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* row = px + r * L;
        double mu = simd::sum_row(row, L) / double(L);  // two passes: centred, so no cancellation
        double ss = simd::sum_sq_dev_row(row, L, mu);   // reference: sum_sq_dev_row_reference
        py[r] = T(ss / denom);
        pm[r] = T(mu);
      }
    });
  });
}

// var: m = mean(x), y = sum_i (x_i - m)^2 / (L - c), c = 1 if unbiased else 0.
//   dy/dx_i = 2 (x_i - m) / (L - c)   (the path through m vanishes because sum_i (x_i - m) = 0).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  check_defined("var", "x", x);
  const bool expanded = has_expanded_dim(x);
  if (is_half(x.dtype()) && !expanded)
    return half_to_f32(x, [&](const Tensor& x32) { return var(x32, dims, unbiased, keepdim); });
  Plan p = make_plan(x, dims, keepdim, "var");
  double denom = double(p.L) - (unbiased ? 1.0 : 0.0);
  check_cpu(x, "var");
  NG_CHECK(denom > 0, "var", "needs at least ", unbiased ? 2 : 1, " values per output (unbiased = ", unbiased,
           "), got ", p.L);
  Tensor y, m;
  if (expanded) {
    // From one copy (the header): its biased var and mean in one pass over its rows, in f32 for f16 / bf16
    // as half_to_f32 would, then scaled, broadcast back, and rounded to x's dtype once.
    NoGradGuard no_grad;
    Tensor one = one_copy(x);
    if (is_half(x.dtype())) one = one.to(DType::f32);
    const Plan q = make_plan(one, p.dims, /*keepdim=*/true, "var");
    Tensor biased = empty(q.kept_shape, one.dtype()), mean_one = empty(q.kept_shape, one.dtype());
    var_rows(one, q, double(q.L), biased, mean_one);
    y = mul(biased, double(p.L) / denom).expand(p.kept_shape).contiguous().reshape(p.out_shape).to(x.dtype());
    m = mean_one.expand(p.kept_shape).contiguous().to(x.dtype());
  } else {
    y = empty(p.out_shape, x.dtype());
    m = empty(p.kept_shape, x.dtype());
    var_rows(x, p, denom, y, m);
  }
  if (needs_grad({x})) {
    SavedTensor sx(x, "var");
    Shape kept = p.kept_shape;
    attach(y, "VarBackward", {x}, [sx, m, kept, denom](const Tensor& dout) -> std::vector<Tensor> {
      Tensor centered = sub(sx.unpack(), m);
      return {mul(mul(dout.reshape(kept), centered), 2.0 / denom)};
    });
  }
  return y;
}

// Index of the first maximum along each row (nan counts as the maximum, as in PyTorch).
static Tensor argmax_rows(const Tensor& x, const Plan& p, const char* op) {
  check_cpu(x, op);
  if (has_expanded_dim(x)) {
    // The copy's indices (the header), one per row of the copy, broadcast back over the kept stride-0 dims.
    NoGradGuard no_grad;
    const Tensor one = is_half(x.dtype()) ? one_copy(x).to(DType::f32) : one_copy(x);
    const Plan q = make_plan(one, p.dims, /*keepdim=*/true, op);
    return argmax_rows(one, q, op).reshape(q.kept_shape).expand(p.kept_shape).contiguous().reshape({p.rows});
  }
  Tensor rows = rows_view(x, p);
  Tensor idx = empty({p.rows}, DType::i64);
  NG_CHECK(p.L > 0, op, "cannot reduce an empty dim (shape ", shape_str(x.shape()), ")");
  NG_DISPATCH_FLOAT(x.dtype(), op, [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* px = rows.data<T>();
    int64_t* pi = idx.data<int64_t>();
    parallel_for(p.rows, std::max<int64_t>(1, 4096 / p.L), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* row = px + r * p.L;
        int64_t best = 0;
        for (int64_t i = 1; i < p.L; ++i) {
          if (std::isnan(row[best])) break;
          if (row[i] > row[best] || std::isnan(row[i])) best = i;
        }
        pi[r] = best;
      }
    });
  });
  return idx;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmax", "x", x);
  // f16 / bf16 compare in f32 (exactly); an expanded view converts one copy only (argmax_rows)
  Tensor xf = is_half(x.dtype()) && !has_expanded_dim(x) ? x.to(DType::f32) : x;
  Plan p = make_plan(xf, {dim}, keepdim, "argmax");
  return argmax_rows(xf, p, "argmax").reshape(p.out_shape);
}

// max: y = x_k with k = argmax.   dx_i = dout if i == k else 0.
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("max", "x", x);
  const bool expanded = has_expanded_dim(x);
  if (is_half(x.dtype()) && !expanded)
    return half_to_f32(x, [&](const Tensor& x32) { return max(x32, dim, keepdim); });
  if (x.dim() == 0) {  // the one value (make_plan checks that dim is 0 or -1)
    make_plan(x, {dim}, keepdim, "max");
    return x.clone();
  }
  Plan p = make_plan(x, {dim}, keepdim, "max");
  // The indices, for the gather below and for the backward. An expanded x takes its maxima from its copy
  // (whose own max finds them again), so it needs them only for the backward.
  const bool grad = needs_grad({x});
  Tensor idx = !expanded || grad ? argmax_rows(x, p, "max") : Tensor();
  Tensor y;
  if (expanded) {
    // The copy's maxima (the header), broadcast back over the kept stride-0 dims.
    NoGradGuard no_grad;
    y = max(one_copy(x), dim, /*keepdim=*/true).expand(p.kept_shape).contiguous().reshape(p.out_shape);
  } else {
    Tensor rows = rows_view(x, p);
    y = empty(p.out_shape, x.dtype());
    NG_DISPATCH_FLOAT(x.dtype(), "max", [&]<typename scalar_t>() {
      using T = scalar_t;
      const int64_t* pi = idx.data<int64_t>();
      for (int64_t r = 0; r < p.rows; ++r) y.data<T>()[r] = rows.data<T>()[r * p.L + pi[r]];
    });
  }
  if (grad) {
    Shape in_shape = x.shape(), kept = p.kept_shape;
    int64_t d = wrap_dim(dim, x.dim(), "max");
    DType dt = x.dtype();
    attach(y, "MaxBackward", {x}, [in_shape, kept, d, idx, dt](const Tensor& dout) -> std::vector<Tensor> {
      // Scatter dout into the argmax positions. Rows of `dx` moved to the end match idx's row order.
      // (An f16 / bf16 x reaches here only as an expanded view: its gradient is scattered in f32.)
      const DType work = is_half(dt) ? DType::f32 : dt;
      Tensor dx = zeros(in_shape, work);
      // Move the reduced dim last, keeping the others in order: the same row order as idx.
      std::vector<int64_t> perm;
      for (int64_t k = 0; k < int64_t(in_shape.size()); ++k)
        if (k != d) perm.push_back(k);
      perm.push_back(d);
      Tensor dmoved = dx.permute(perm);  // a view of dx
      Tensor g = dout.to(work).reshape(kept).permute(perm).contiguous();
      const int64_t* pi = idx.data<int64_t>();
      NG_DISPATCH_FLOAT(work, "max", [&]<typename scalar_t>() {
        using T = scalar_t;
        const T* pg = g.data<T>();
        T* base = static_cast<T*>(dmoved.raw_data());
        // Walk rows of dmoved in row-major order of its leading dims.
        Shape lead(dmoved.shape().begin(), dmoved.shape().end() - 1);
        int64_t rows = numel(lead), sL = dmoved.stride(-1);
        for (int64_t r = 0; r < rows; ++r) {
          int64_t off = 0, rem = r;
          for (int64_t k = int64_t(lead.size()) - 1; k >= 0; --k) {
            off += (rem % lead[k]) * dmoved.stride(k);
            rem /= lead[k];
          }
          base[off + pi[r] * sL] = pg[r];
        }
      });
      return {dx.to(dt)};
    });
  }
  return y;
}

}  // namespace ng
