// Indexing ops: forward and backward side by side. See index.h.
//
// Layout used by the gather and the scatter: x made contiguous and viewed as (outer, n, inner), where
// n = x.size(dim), outer = the product of the dims before it, inner = the product of the dims after it.
// Selecting K indices along dim gives (outer, K, inner). For embedding: outer = 1, n = V, inner = C.
#include "tensor/ops/index.h"

#include <cstring>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/iter.h"
#include "tensor/parallel.h"

namespace ng {

namespace {

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const Shape& s, int64_t dim) {
  Split p;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (d < dim)
      p.outer *= s[d];
    else if (d == dim)
      p.n = s[d];
    else
      p.inner *= s[d];
  }
  return p;
}

// Check every index against n; `what` names the thing indexed in the message.
void check_indices(const int64_t* idx, int64_t K, int64_t n, const char* op, const std::string& what) {
  for (int64_t j = 0; j < K; ++j)
    NG_CHECK(idx[j] >= 0 && idx[j] < n, op, "index ", idx[j], " at position ", j, " is out of range for ",
             what, " (expected 0 <= index < ", n, ")");
}

// Gather: out[o, j, :] = x[o, idx[j], :]. x contiguous (outer, n, inner); out (outer, K, inner).
// A pure copy, so it works on raw bytes for every dtype.
void gather(const Tensor& x, const Split& p, const int64_t* idx, int64_t K, Tensor& out) {
  const size_t es = dtype_size(x.dtype());
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(out.raw_data());
  const size_t row_bytes = size_t(p.inner) * es;
  parallel_for(
      p.outer * K, std::max<int64_t>(1, 4096 / std::max<int64_t>(p.inner, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t o = r / K, j = r % K;
          std::memcpy(po + size_t(r) * row_bytes, px + size_t(o * p.n + idx[j]) * row_bytes, row_bytes);
        }
      });
}

// Scatter-add, the backward of gather: dx[o, idx[j], :] += dout[o, j, :] for j = 0, 1, ..., K-1 in order.
// Work is split over (o, column chunk): each dx element is owned by one task, which adds its K
// contributions in increasing j. No atomics, and the sum order never depends on the thread count.
template <typename T>
void scatter_add(const T* dout, const Split& p, const int64_t* idx, int64_t K, T* dx) {
  constexpr int64_t kCols = 256;  // column chunk per task
  const int64_t chunks = (p.inner + kCols - 1) / kCols;
  // About 4096 element-adds per task at least, so a small gradient runs without a parallel region.
  const int64_t per_task = K * std::min(p.inner, kCols);
  parallel_for(p.outer * chunks, std::max<int64_t>(1, 4096 / std::max<int64_t>(per_task, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t task = b; task < e; ++task) {
                   const int64_t o = task / chunks, c0 = (task % chunks) * kCols,
                                 c1 = std::min(p.inner, c0 + kCols);
                   for (int64_t j = 0; j < K; ++j) {
                     const T* src = dout + (o * K + j) * p.inner;
                     T* dst = dx + (o * p.n + idx[j]) * p.inner;
                     for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
                   }
                 }
               });
}

// dx (shape in_shape, dtype dt) = scatter_add of dout (outer, K, inner). Half dtypes accumulate in f32.
Tensor scatter_add_backward(const Tensor& dout, const Shape& in_shape, int64_t dim, const Tensor& idx,
                            DType dt, const char* op) {
  const Split p = split_at(in_shape, dim);
  const int64_t K = idx.numel();
  const DType ct = compute_dtype(dt);
  Tensor g = dout.to(ct).contiguous();
  Tensor dx = zeros(in_shape, ct);
  NG_DISPATCH_FLOAT(ct, op, [&]<typename scalar_t>() {
    scatter_add(g.data<scalar_t>(), p, idx.data<int64_t>(), K, dx.data<scalar_t>());
  });
  return dx.to(dt);
}

}  // namespace

// ---- index_select -------------------------------------------------------------------------------
// Forward:  out[o, j, i] = x[o, index[j], i].
// Backward: dx[o, k, i] = sum_{j : index[j] = k} dout[o, j, i]   (a scatter-add; zero for unselected k).
Tensor index_select(const Tensor& x, int64_t dim_in, const Tensor& index) {
  const char* op = "index_select";
  check_defined(op, "x", x, "index", index);
  NG_CHECK(index.dtype() == DType::i64, op, "expected an i64 index, got ", dtype_name(index.dtype()));
  NG_CHECK(index.dim() <= 1, op, "expected a 0-d or 1-D index, got shape ", shape_str(index.shape()));
  NG_CHECK(x.device().is_cpu() && index.device().is_cpu(), op, "expected CPU tensors, got ", x.device().str(),
           " and ", index.device().str());
  NG_CHECK(x.dim() >= 1, op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  const int64_t dim = wrap_dim(dim_in, x.dim(), op);
  Tensor idx = index.reshape({index.numel()}).contiguous();
  const int64_t K = idx.numel();
  check_indices(idx.data<int64_t>(), K, x.size(dim), op,
                "dim " + std::to_string(dim) + " of size " + std::to_string(x.size(dim)) + " of x " +
                    shape_str(x.shape()));
  Shape out_shape = x.shape();
  out_shape[dim] = K;
  Tensor out = empty(out_shape, x.dtype());
  {
    NoGradGuard g;
    Tensor xc = x.detach().contiguous();
    gather(xc, split_at(x.shape(), dim), idx.data<int64_t>(), K, out);
  }
  if (needs_grad({x})) {
    Shape in_shape = x.shape();
    DType dt = x.dtype();
    SavedTensor saved_idx(idx, op);
    attach(out, "IndexSelectBackward", {x}, [saved_idx, in_shape, dim, dt, op](const Tensor& dout) {
      return std::vector<Tensor>{scatter_add_backward(dout, in_shape, dim, saved_idx.unpack(), dt, op)};
    });
  }
  if (index.dim() == 0) return out.squeeze(dim);  // a 0-d index removes the dim, like select()
  return out;
}

// ---- embedding ----------------------------------------------------------------------------------
// Forward:  out[..., c] = weight[ids[...], c]          weight: (V, C), ids: (...), out: (..., C)
// Backward: dweight[v, c] = sum over positions p with ids[p] = v of dout[p, c]   (scatter-add over rows)
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_defined(op, "weight", weight, "ids", ids);
  NG_CHECK(weight.dim() == 2, op, "expected weight of shape (V, C), got ", shape_str(weight.shape()));
  NG_CHECK(is_floating(weight.dtype()), op, "expected a floating weight, got ", dtype_name(weight.dtype()));
  NG_CHECK(ids.dtype() == DType::i64, op, "expected i64 ids, got ", dtype_name(ids.dtype()));
  if (on_device({weight, ids}, op)) return device_kernels(weight, op).embedding(weight, ids);  // the whole op
  const int64_t V = weight.size(0), C = weight.size(1);
  Tensor flat = ids.reshape({ids.numel()}).contiguous();
  const int64_t K = flat.numel();
  check_indices(flat.data<int64_t>(), K, V, op,
                "a weight of " + std::to_string(V) + " rows (V = " + std::to_string(V) + ", weight " +
                    shape_str(weight.shape()) + ")");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = empty(out_shape, weight.dtype());
  {
    NoGradGuard g;
    Tensor wc = weight.detach().contiguous();
    gather(wc, split_at(weight.shape(), 0), flat.data<int64_t>(), K, out);
  }
  if (needs_grad({weight})) {
    Shape w_shape = weight.shape();
    DType dt = weight.dtype();
    SavedTensor saved_ids(flat, op);
    attach(out, "EmbeddingBackward", {weight}, [saved_ids, w_shape, dt, K, C, op](const Tensor& dout) {
      return std::vector<Tensor>{
          scatter_add_backward(dout.reshape({K, C}), w_shape, 0, saved_ids.unpack(), dt, op)};
    });
  }
  return out;
}

// ---- masked_fill --------------------------------------------------------------------------------
namespace {
// out = value where mask != 0, x elsewhere. x: any strides/dtype; mask: any dtype, already expanded to x.
Tensor masked_fill_kernel(const Tensor& x, const Tensor& mask, double value) {
  check_fits_dtype(value, x.dtype(), "masked_fill");  // NaN into i64, 1e10 into f16; -inf passes
  if (on_device({x, mask}, "masked_fill"))
    return device_kernels(x, "masked_fill").masked_fill(x, mask, value);
  Tensor out = empty(x.shape(), x.dtype());
  NG_DISPATCH_ALL(x.dtype(), "masked_fill", [&]<typename T>() {
    const T fill = from_double<T>(value);
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = out.data<T>();
    NG_DISPATCH_ALL(mask.dtype(), "masked_fill", [&]<typename M>() {
      const M* pm = static_cast<const M*>(mask.raw_data());
      for_each_strided<3>(x.shape(), {out.strides(), x.strides(), mask.strides()},
                          [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
                            for (int64_t i = 0; i < n; ++i) {
                              const M m = pm[o[2] + i * s[2]];
                              bool on;
                              if constexpr (std::is_same_v<M, int64_t>)
                                on = m != 0;
                              else
                                on = !(to_double(m) == 0.0);  // nan counts as nonzero
                              po[o[0] + i * s[0]] = on ? fill : px[o[1] + i * s[1]];
                            }
                          });
    });
  });
  return out;
}
}  // namespace

// Forward:  out = value where mask != 0, else x.
// Backward: dx = dout where mask == 0, else 0   (the filled positions no longer depend on x),
//           i.e. dx = masked_fill(dout, mask, 0).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  const char* op = "masked_fill";
  check_defined(op, "x", x, "mask", mask);
  NG_CHECK(x.device() == mask.device(), op, "expected x and mask on the same device, got ", x.device().str(),
           " and ", mask.device().str());
  Shape b = broadcast_shapes(x.shape(), mask.shape(), op);
  NG_CHECK(b == x.shape(), op, "mask of shape ", shape_str(mask.shape()),
           " cannot be broadcast to x's shape ", shape_str(x.shape()), " (it would give ", shape_str(b), ")");
  Tensor m = mask.detach().expand(x.shape());
  Tensor out;
  {
    NoGradGuard g;
    out = masked_fill_kernel(x, m, value);
  }
  if (needs_grad({x})) {
    SavedTensor saved_mask(m, op);
    attach(out, "MaskedFillBackward", {x}, [saved_mask](const Tensor& dout) {
      return std::vector<Tensor>{masked_fill_kernel(dout, saved_mask.unpack(), 0.0)};
    });
  }
  return out;
}

}  // namespace ng
