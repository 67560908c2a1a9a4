// nn::Block: one Transformer layer, attention then FFN, each wrapped in a residual connection, with the
// normalization placed as the config says. This file is where the lesson's comparison lives.
//
//   NoNorm    x = x + attn(x)                 x = x + ffn(x)
//   PostLN    x = norm1(x + attn(x))          x = norm2(x + ffn(x))          (the 2017 Transformer)
//   PreLN     x = x + attn(norm1(x))          x = x + ffn(norm2(x))          (GPT-2, Llama, MiniMind)
//   DeepNorm  x = norm1(a x + attn(x))        x = norm2(a x + ffn(x))        (DeepNet, Wang et al. 2022)
//
// norm = LayerNorm or RMSNorm. Pre-LN leaves an identity path from the output back to the input (the
// residual stream is never normalized), which is why deep Pre-LN stacks train without warmup; Post-LN puts a
// norm on that path in every layer.
//
// DeepNorm (decoder-only constants, N = number of layers): the residual is up-weighted by
//     alpha = (2N)^(1/4)
// and, at init, the projections that write values into the residual stream (v_proj, o_proj and every FFN
// matrix) are scaled by
//     beta = (8N)^(-1/4)
// (q_proj and k_proj keep their init), so each sublayer's update starts small relative to alpha x.
// The base init is nn::Linear's (PyTorch's default, U(+-1/sqrt(fan_in))), scaled by beta, weights and
// biases: what the DeepNet authors' released code does (torchscale divides fc1, fc2, out_proj and v_proj by
// (8N)^(1/4) after their usual init). The paper's pseudocode instead draws xavier_normal_(gain = beta) (gain
// 1 for q/k), whose standard deviations are 1.1-2.2x these at C = 256, N = 4 (fan-in only vs fan-in +
// fan-out). The lesson's sketch scales only the FFN output and out_proj, by 1/alpha.
//
// The MiniMind block is PreLN + RMSNorm + RoPE + GQA + QK-norm + SwiGLU (BlockConfig::minimind).
#pragma once

#include <string>

#include "nn/attention.h"
#include "nn/ffn.h"
#include "nn/module.h"

namespace ng::nn {

struct BlockConfig {
  AttentionConfig attn;
  FFNConfig ffn;
  std::string norm_position = "pre";  // "none", "post", "pre" or "deepnorm"
  std::string norm = "rmsnorm";       // "layernorm" or "rmsnorm"
  double norm_eps = 1e-5;
  int64_t n_layers = 1;  // N, the depth of the whole stack (DeepNorm's alpha and beta depend on it)

  // PreLN + RMSNorm + RoPE (theta 1e6) + GQA + QK-norm + SwiGLU, no biases (MiniMind's layer).
  static BlockConfig minimind(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t n_layers);
  double deepnorm_alpha() const;  // (2N)^(1/4)
  double deepnorm_beta() const;   // (8N)^(-1/4)
};

// A LayerNorm or RMSNorm over the last dim, by name.
std::shared_ptr<Module> make_norm(const std::string& kind, int64_t dim, double eps);

class Block : public Module {
 public:
  explicit Block(const BlockConfig& config, Generator& gen = default_generator(),
                 Generator& dropout_gen = default_generator());

  // x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Block"; }

  BlockConfig config;
  std::shared_ptr<Module> norm1, norm2;  // absent for "none"
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<FeedForward> ffn;
};

}  // namespace ng::nn
