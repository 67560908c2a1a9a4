#include "tensor/ops/matmul.h"

#include <vector>

#include "autograd/function.h"
#include "tensor/device_kernels.h"
#include "tensor/kernels/gemm.h"
#include "tensor/ops/elementwise.h"

namespace ng {

namespace {

// How a GEMM reads a (rows x cols) matrix slice: row-major with leading dim ld, or transposed.
struct MatLayout {
  bool trans = false;
  int64_t ld = 0;
};

// Can the last two dims be read by the GEMM as they are? Yes when one of them has unit stride.
bool direct_layout(const Tensor& t, MatLayout& l) {
  const int64_t r = t.size(-2), c = t.size(-1), sr = t.stride(-2), sc = t.stride(-1);
  // Row-major: element (i, k) at i * ld + k.
  if ((sc == 1 || c == 1) && (r == 1 || sr >= c)) {
    l = {false, r == 1 ? c : sr};
    return true;
  }
  // A transposed view (column-major): element (i, k) at k * ld + i.
  if ((sr == 1 || r == 1) && (c == 1 || sc >= r)) {
    l = {true, c == 1 ? r : sc};
    return true;
  }
  return false;
}

Tensor matmul_impl(const Tensor& a_in, const Tensor& b_in, bool naive) {
  check_same_dtype_device(a_in, b_in, "matmul");
  NG_CHECK(a_in.dim() >= 2 && b_in.dim() >= 2, "matmul", "expected tensors with at least 2 dims, got shapes ",
           shape_str(a_in.shape()), " and ", shape_str(b_in.shape()));
  NG_CHECK(a_in.size(-1) == b_in.size(-2), "matmul", "inner dimensions differ: a is ",
           shape_str(a_in.shape()), ", b is ", shape_str(b_in.shape()), " (a's last dim ", a_in.size(-1),
           " must equal b's second-to-last ", b_in.size(-2), ")");
  if (is_half(a_in.dtype()))
    return matmul_impl(a_in.to(DType::f32), b_in.to(DType::f32), naive).to(a_in.dtype());
  NG_CHECK(is_floating(a_in.dtype()), "matmul", "expected floating tensors, got ", dtype_name(a_in.dtype()));

  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  Shape batch_a(a_in.shape().begin(), a_in.shape().end() - 2);
  Shape batch_b(b_in.shape().begin(), b_in.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  so.insert(so.end(), {M, N});
  Tensor a = a_in.detach().expand(sa), b = b_in.detach().expand(sb);
  MatLayout la, lb;
  if (!direct_layout(a, la)) {
    a = a.contiguous();
    direct_layout(a, la);
  }
  if (!direct_layout(b, lb)) {
    b = b.contiguous();
    direct_layout(b, lb);
  }
  Tensor out = empty(so, a.dtype());
  const int64_t nb = numel(batch);
  NG_DISPATCH_FLOAT(a.dtype(), "matmul", [&]<typename scalar_t>() {
    using T = scalar_t;
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    T* po = out.data<T>();
    // Offset of each batch item in a and b (their batch strides may be 0 where broadcast).
    std::vector<int64_t> offs_a(static_cast<size_t>(nb)), offs_b(static_cast<size_t>(nb));
    for (int64_t bi = 0; bi < nb; ++bi) {
      int64_t oa = 0, ob = 0, rem = bi;
      for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
        int64_t i = rem % batch[d];
        rem /= batch[d];
        oa += i * a.stride(d);
        ob += i * b.stride(d);
      }
      offs_a[size_t(bi)] = oa;
      offs_b[size_t(bi)] = ob;
    }
    if (naive) {
      for (int64_t bi = 0; bi < nb; ++bi)
        gemm_naive<T>(la.trans, lb.trans, M, N, K, pa + offs_a[size_t(bi)], la.ld, pb + offs_b[size_t(bi)],
                      lb.ld, po + bi * M * N, N, false);
    } else {
      // Many small products (attention's per-head ones) run in parallel over the batch.
      gemm_batched(la.trans, lb.trans, nb, M, N, K, pa, offs_a.data(), la.ld, pb, offs_b.data(), lb.ld, po,
                   M * N, N, false);
    }
  });
  return out;
}

}  // namespace

// 1-D operands, as NumPy and PyTorch take them: a vector a (K) is the row (1, K), a vector b (K) the column
// (K, 1), and the dimension added for each is taken out of the product again:
//   (K) @ (K) -> ()    (M, K) @ (K) -> (M)    (K) @ (K, N) -> (N)    (..., M, K) @ (K) -> (..., M)
// The unsqueeze and squeeze are views, so the gradient flows back through them to the vectors' own shapes.
// f: the product of two operands of at least 2 dims (matmul's with autograd, or the naive reference).
template <class F>
static Tensor with_vectors(const Tensor& a, const Tensor& b, F&& f) {
  NG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "expected tensors with at least 1 dim, got shapes ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  if (a.dim() >= 2 && b.dim() >= 2) return f(a, b);
  const int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  NG_CHECK(a.size(-1) == kb, "matmul", "inner dimensions differ: a is ", shape_str(a.shape()), ", b is ",
           shape_str(b.shape()), " (a's last dim ", a.size(-1), " must equal b's ",
           b.dim() == 1 ? "length " : "second-to-last ", kb, ")");
  Tensor out = f(a.dim() == 1 ? a.unsqueeze(0) : a, b.dim() == 1 ? b.unsqueeze(1) : b);  // (..., M, N)
  if (b.dim() == 1) out = out.squeeze(-1);                                               // (..., M)
  if (a.dim() == 1) out = out.squeeze(b.dim() == 1 ? -1 : -2);                           // M = 1 removed
  return out;
}

Tensor matmul_naive(const Tensor& a, const Tensor& b) {
  check_defined("matmul_naive", "a", a, "b", b);
  return with_vectors(a, b, [](const Tensor& a2, const Tensor& b2) { return matmul_impl(a2, b2, true); });
}

// Is t a transposed view of a row-major matrix (column-major in its last two dims)? linear's weight.t() is.
static bool column_major(const Tensor& t) {
  return t.size(-2) > 1 && t.size(-1) > 1 && t.stride(-2) == 1 && t.stride(-1) >= t.size(-2);
}

// C = A @ B.   dA = dC @ B^T (summed over broadcast batch dims),   dB = A^T @ dC (likewise).
// On a device the whole op (forward and backward) is the backend's (cuBLAS for CUDA).
//
// The layout of a gradient follows its input's. The GEMM writes row-major results, and a gradient laid out
// unlike its input costs an element-by-element transposing copy further back: linear's weight enters as
// weight.t(), so A^T @ dC would be (in, out) row-major, and the transpose's backward would copy it into the
// (out, in) weight. For a column-major input the gradient is therefore computed as the transposed product,
// dB = (dC^T @ A)^T, and handed back as a transposed view; the weight then receives it contiguous. Each
// element is the same products added in the same k order, so the bits are the same either way: the GEMM's
// order depends on K and on whether op(A) is transposed (tensor/kernels/gemm.cpp), and for a row-major
// input A (linear's x) both A^T @ dC and dC^T @ A are of that form. (For a column-major A they would not be,
// and from K = 512 their last bits could differ; which one runs depends only on the layouts.)
// Measured (2026-11-25, exp2 step, 2 threads): the transposing copies were 2.6% of perf's samples.
static Tensor matmul_matrices(const Tensor& a, const Tensor& b) {
  if (on_device({a, b}, "matmul")) return device_kernels(a, "matmul").matmul(a, b);
  Tensor out = matmul_impl(a, b, false);
  if (needs_grad({a, b})) {
    bool need_a = a.requires_grad(), need_b = b.requires_grad();
    SavedTensor saved_a(need_b ? a : Tensor(), "matmul"), saved_b(need_a ? b : Tensor(), "matmul");
    Shape shape_a = a.shape(), shape_b = b.shape();
    const bool a_colmajor = column_major(a), b_colmajor = column_major(b);
    attach(out, "MatmulBackward", {a, b}, [=](const Tensor& dout) -> std::vector<Tensor> {
      Tensor da, db;
      if (need_a) {
        const Tensor bb = saved_b.unpack();
        da = a_colmajor ? matmul(bb, dout.transpose(-1, -2)).transpose(-1, -2)
                        : matmul(dout, bb.transpose(-1, -2));
        da = sum_to(da, shape_a);
      }
      if (need_b) {
        const Tensor aa = saved_a.unpack();
        db = b_colmajor ? matmul(dout.transpose(-1, -2), aa).transpose(-1, -2)
                        : matmul(aa.transpose(-1, -2), dout);
        db = sum_to(db, shape_b);
      }
      return {da, db};
    });
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined("matmul", "a", a, "b", b);
  return with_vectors(a, b, matmul_matrices);
}

}  // namespace ng
