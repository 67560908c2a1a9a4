#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/norms/rms_norm.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/softmax.h"

namespace ng::nn {

AttentionConfig AttentionConfig::lesson_original(int64_t dim, int64_t n_heads) {
  AttentionConfig c;
  c.dim = dim;
  c.n_heads = n_heads;
  c.causal = false;  // unmasked: every position sees every other, the target included (docs/attention.md)
  c.bias = true;
  c.rope = false;  // no position information at all
  return c;
}

CausalSelfAttention::CausalSelfAttention(const AttentionConfig& cfg, Generator& gen, Generator& dropout_gen)
    : config(cfg) {
  const int64_t C = cfg.dim, NH = cfg.n_heads, NKV = cfg.kv_heads();
  NG_CHECK(C > 0 && NH > 0 && C % NH == 0, "CausalSelfAttention", "dim ", C,
           " must be a positive multiple of ", "n_heads ", NH);
  NG_CHECK(NKV > 0 && NH % NKV == 0, "CausalSelfAttention", "n_heads ", NH,
           " must be a multiple of n_kv_heads ", NKV);
  const int64_t HS = C / NH;
  NG_CHECK(!cfg.rope || HS % 2 == 0, "CausalSelfAttention", "RoPE needs an even head size, got ", HS);

  q_proj = register_module("q_proj", std::make_shared<Linear>(C, NH * HS, cfg.bias, gen));
  k_proj = register_module("k_proj", std::make_shared<Linear>(C, NKV * HS, cfg.bias, gen));
  v_proj = register_module("v_proj", std::make_shared<Linear>(C, NKV * HS, cfg.bias, gen));
  o_proj = register_module("o_proj", std::make_shared<Linear>(NH * HS, C, cfg.bias, gen));
  if (cfg.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<RMSNorm>(HS, cfg.norm_eps));
    k_norm = register_module("k_norm", std::make_shared<RMSNorm>(HS, cfg.norm_eps));
  }
  attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
}

// The RoPE tables are kept for the longest T seen so far (grown by doubling) and sliced to T, so a
// generation loop that grows T one token at a time computes them O(log T) times and keeps one copy.
// On a device, the tables are built on the CPU and copied there once (and again if the model moves to
// another device). (The causal mask is not kept: causal_softmax needs none on the CPU, and builds one per
// call on a device, tensor/ops/softmax.cpp.)
RopeTables CausalSelfAttention::rope_for(int64_t T, DType dtype, Device device) {
  std::lock_guard<std::mutex> lock(rope_mutex_);  // (see attention.h; the slices below keep their storage)
  RopeTables& cached = rope_cache_[int(dtype)];
  if (!cached.cos.defined() || cached.cos.size(0) < T || cached.cos.device() != device) {
    const int64_t rows = std::max(T, cached.cos.defined() ? 2 * cached.cos.size(0) : T);
    cached = rope_tables(rows, config.head_size(), config.rope_theta, dtype);
    if (!device.is_cpu()) cached = {cached.cos.to(device), cached.sin.to(device)};
  }
  return {cached.cos.narrow(0, 0, T), cached.sin.narrow(0, 0, T)};
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  check_defined("CausalSelfAttention", "x", x);
  NG_CHECK(x.dim() == 3 && x.size(2) == config.dim, "CausalSelfAttention", "expected x of shape (B, T, ",
           config.dim, "), got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t NH = config.n_heads, NKV = config.kv_heads(), HS = config.head_size(), rep = NH / NKV;

  // 1. Projections, split into heads: q (B, T, NH, HS); k, v (B, T, NKV, HS).
  Tensor q = q_proj->forward(x).view({B, T, NH, HS});
  Tensor k = k_proj->forward(x).view({B, T, NKV, HS});
  Tensor v = v_proj->forward(x).view({B, T, NKV, HS});

  // 2. QK-norm: RMSNorm over each head vector (the last dim, HS).
  if (config.qk_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }

  // 3. RoPE: rotate q and k by their position (v carries content, it is not rotated).
  if (config.rope) {
    const RopeTables tables = rope_for(T, x.dtype(), x.device());
    q = apply_rope(q, tables.cos, tables.sin);
    k = apply_rope(k, tables.cos, tables.sin);
  }

  // 4. Heads first: q (B, NH, T, HS); k, v (B, NKV, T, HS).
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);

  // 5. GQA: repeat each key/value head for the `rep` query heads it serves, so query head h reads
  //    key/value head h / rep:  (B, NKV, T, HS) -> (B, NKV, rep, T, HS) -> (B, NH, T, HS).
  if (rep > 1) {
    k = k.unsqueeze(2).expand({B, NKV, rep, T, HS}).reshape({B, NH, T, HS});
    v = v.unsqueeze(2).expand({B, NKV, rep, T, HS}).reshape({B, NH, T, HS});
  }

  // 6. Scores: att[b, h, t, s] = q_t . k_s / sqrt(HS) : (B, NH, T, T)
  Tensor att = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(HS)));

  // 7-8. Softmax over s (each query's weights sum to 1). Causal: query t sees only s <= t; the fused
  //      causal_softmax (tensor/ops/softmax.h) equals softmax(masked_fill(att, s > t, -inf)), giving the
  //      future exactly zero weight, without the mask pass. Then dropout on the weights.
  att = config.causal ? causal_softmax(att) : softmax(att, -1);
  att = attn_dropout->forward(att);

  // 9. Weighted sum of values, heads merged back: (B, NH, T, HS) -> (B, T, NH, HS) -> (B, T, C)
  Tensor y = matmul(att, v).transpose(1, 2).reshape({B, T, NH * HS});

  // 10. Output projection.
  return resid_dropout->forward(o_proj->forward(y));
}

}  // namespace ng::nn
