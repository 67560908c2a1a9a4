// The CUDA kernels besides the norms, each with its CPU twin (which the GPU tests compare against):
//
//   CUDA                            CPU twin
//   sum / mean                      ng::sum / ng::mean              tensor/ops/reduce.h
//   softmax / log_softmax           ng::softmax / ng::log_softmax   tensor/ops/softmax.h
//   cross_entropy                   ng::cross_entropy               tensor/ops/loss.h
//   embedding                       ng::embedding                   tensor/ops/index.h
//   adam_step                       optim::Adam / AdamW::step       optim/adam.h
//   matmul (cuBLAS)                 ng::matmul                      tensor/ops/matmul.h
//   rope_rotate                     ng::apply_rope (rotate)         nn/rope.h
//   masked_fill                     ng::masked_fill                 tensor/ops/index.h
//
// The *_forward / *_backward functions are kernels on CUDA tensors; softmax, log_softmax, cross_entropy,
// embedding and matmul are also autograd ops (one node each, the backward calling the backward kernel).
// Elementwise kernels are in elementwise.h, the norms in norms.h.
#pragma once

#include <string>

#include <vector>

#include "tensor/tensor.h"

namespace ng::cuda {

// ---- reductions (cuda/reduce.cu): deterministic, accumulate in double, output x's dtype ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum(const Tensor& x);  // over everything -> 0-d
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// ---- softmax family (cuda/softmax.cu), over the last dim; x any floating dtype ----
Tensor softmax_forward(const Tensor& x, bool log);                     // y = softmax(x) or log_softmax(x)
Tensor softmax_backward(const Tensor& y, const Tensor& dy, bool log);  // dx from the saved output y
Tensor softmax(const Tensor& x, int64_t dim = -1);                     // autograd ops
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// cross_entropy, fused: logits (..., V), targets (...) i64; mean over rows whose target != ignore_index.
struct CrossEntropyForward {
  Tensor loss;   // 0-d, logits' compute dtype
  Tensor lse;    // (N) log-sum-exp per row, saved for backward
  Tensor count;  // 0-d i64: rows that count
};
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index);
// dlogits = (softmax(logits) - onehot(target)) * dloss / count, zero on ignored rows. dloss: 0-d.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const CrossEntropyForward& fwd,
                              const Tensor& dloss, int64_t ignore_index);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// ---- embedding (cuda/embedding.cu): weight (V, C), ids any shape i64 -> (*ids, C) ----
Tensor embedding_forward(const Tensor& weight, const Tensor& ids);
// dweight (V, C): dout rows added into their id's row in a fixed order (ids sorted, ties by position): no
// atomics, the same bits every run.
Tensor embedding_backward(const Tensor& dout, const Tensor& ids, int64_t V);
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ---- Adam / AdamW (cuda/adam.cu): one fused in-place update of p, m, v (f32 or f64, contiguous) ----
struct AdamStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // false: Adam (g += wd p); true: AdamW (p *= 1 - lr wd)
  int64_t step = 1;        // t, 1-based, after incrementing
};
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamStep& s);

// ---- GEMM through cuBLAS (cuda/matmul.cpp) ----
// a: (..., M, K), b: (..., K, N) -> (..., M, N). Batch dims equal, or b 2-D (shared by every batch). Each
// operand may be contiguous or have its last two dims transposed (a view): it is then passed to cuBLAS as a
// transposed operand, nothing is copied. f32, f64 (exact-precision compute), f16/bf16 (f32 compute).
Tensor matmul_forward(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);  // autograd: dA = dC B^T, dB = A^T dC
// cuBLAS is dlopen'ed on the first GPU matmul. This loads it now (no GPU needed) and returns "" on success,
// otherwise why it could not be loaded (the same message the first matmul would throw). A `soname` other
// than the toolkit's libcublas.so.<major> is only opened and checked, never used (the tests pass a bad one).
std::string cublas_load_error(const std::string& soname = "");

// ---- attention pieces (cuda/attention.cu): kernels, not autograd ops ----
// RoPE: out = R(sign * angle) x; x (B, T, NH, HS), cos/sin (>= T, HS/2), all contiguous, x's dtype.
Tensor rope_rotate(const Tensor& x, const Tensor& cos, const Tensor& sin, double sign);
// out = value where mask != 0 (nan counts as nonzero), else x. mask: x's shape (a broadcast view is fine),
// floating.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace ng::cuda
