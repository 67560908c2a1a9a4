// nn::CausalSelfAttention: multi-head self-attention, with the options MiniMind and the lesson need.
//
// Letters: B batch, T time, C channels (= dim), NH query heads, NKV key/value heads, HS = C / NH head size.
//
//   q = x Wq^T : (B, T, NH * HS)      k = x Wk^T, v = x Wv^T : (B, T, NKV * HS)
//   [qk_norm]  q, k = RMSNorm_HS(q), RMSNorm_HS(k)          (one RMSNorm over each head vector, as MiniMind)
//   [rope]     q, k = RoPE(q), RoPE(k)                       (nn/rope.h; theta 1e6 in MiniMind)
//   [GQA]      each of the NKV key/value heads serves NH / NKV consecutive query heads
//   att = softmax( q k^T / sqrt(HS)  [+ causal mask: -inf above the diagonal] ) : (B, NH, T, T)
//         (the causal case runs as one op, causal_softmax in tensor/ops/softmax.h)
//   y   = (att v) merged back to (B, T, NH * HS), then Wo : (B, T, C)
//
// Parameters (MiniMind's names): q_proj, k_proj, v_proj, o_proj (Linear, biases optional), and with
// qk_norm, q_norm and k_norm (RMSNorm over HS).
//
// The attention is composed of differentiable ops (matmul, causal_softmax / softmax, ...), so its backward is
// the chain of theirs; the derivation is docs/attention.md.
//
// The lesson's original copy-task model used attention with causal = false, biases and NO position
// encoding. That is expressible (AttentionConfig::lesson_original()), and docs/attention.md explains what
// goes wrong: without the mask, position t attends to position t + 1, whose token is its target. With no
// positions it can only narrow its guess to the tokens in the window; give it positions and it copies.
#pragma once

#include <map>
#include <mutex>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rope.h"

namespace ng::nn {

struct AttentionConfig {
  int64_t dim = 64;         // C
  int64_t n_heads = 4;      // NH
  int64_t n_kv_heads = 0;   // NKV; 0 means NH (plain multi-head attention). NH % NKV must be 0.
  bool causal = true;       // mask out the future (language models); false: every position sees all
  bool bias = false;        // biases on q/k/v/o projections
  bool rope = true;         // rotary position embedding on q and k
  double rope_theta = 1e6;  // MiniMind's base
  bool qk_norm = false;     // RMSNorm over each q and k head vector
  double norm_eps = 1e-5;   // eps of the q/k RMSNorms
  double dropout = 0.0;     // on the attention probabilities and on the output

  // The lesson's copy-task attention: unmasked, with biases, no position encoding.
  static AttentionConfig lesson_original(int64_t dim, int64_t n_heads);
  int64_t kv_heads() const { return n_kv_heads == 0 ? n_heads : n_kv_heads; }
  int64_t head_size() const { return dim / n_heads; }
};

class RMSNorm;

class CausalSelfAttention : public Module {
 public:
  // gen: initializes the projections; dropout_gen: the dropout masks (must outlive the module).
  explicit CausalSelfAttention(const AttentionConfig& config, Generator& gen = default_generator(),
                               Generator& dropout_gen = default_generator());

  // x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CausalSelfAttention"; }

  AttentionConfig config;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RMSNorm> q_norm, k_norm;  // only with qk_norm
  std::shared_ptr<Dropout> attn_dropout, resid_dropout;

 private:
  // RoPE tables (per dtype), derived data rather than state: computed on first use for
  // the longest T seen, and sliced to the T at hand. The only thing a forward writes in the module, so
  // threads that run one model's forward at once (inference on a shared model) take turns here: without
  // the lock, one thread grew the tables while another sliced them ("narrow: window [0, 33) is out of range
  // for dim 0 of size 32", 2026-11-28).
  RopeTables rope_for(int64_t T, DType dtype, Device device);
  std::map<int, RopeTables> rope_cache_;
  std::mutex rope_mutex_;
};

}  // namespace ng::nn
