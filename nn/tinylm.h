// nn::TinyLM: a small decoder-only language model, built from one config struct.
//
//   tokens (B, T) i64
//     -> tok_emb                                  (B, T, C)     Embedding(V, C)
//     [+ pos_emb(0..T-1)]                         learned absolute positions (position = "learned")
//     -> blocks.0 .. blocks.N-1                   (B, T, C)     nn::Block, see nn/block.h
//     [-> norm]                                   final norm (has_final_norm(): by default for Pre-LN only)
//     -> lm_head                                  (B, T, V)     Linear(C, V, no bias), or tied to tok_emb
//
// With tie_weights the output layer reuses tok_emb.weight (V, C): logits = h tok_emb.weight^T. The shared
// tensor then starts from the Linear init U(+-1/sqrt(C)), as in MiniMind, where the embedding is assigned
// the lm_head's weight; it is listed once, as "tok_emb.weight".
//
// Randomness: parameters are drawn from Generator(config.seed) (or the one passed in), in registration
// order, so a config + seed fixes the initial model. Dropout draws from the model's own generator
// (dropout_generator()), which checkpoints save and restore.
#pragma once

#include <optional>
#include <string>

#include "nn/block.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ng::nn {

struct TinyLMConfig {
  int64_t vocab_size = 0;  // V
  int64_t dim = 64;        // C
  int64_t n_layers = 2;    // N
  int64_t n_heads = 4;     // NH
  int64_t n_kv_heads = 0;  // NKV, 0 = n_heads
  // blocks
  std::string norm_position = "pre";  // "none", "post", "pre", "deepnorm"
  std::string norm = "layernorm";     // "layernorm", "rmsnorm"
  double norm_eps = 1e-5;
  // A norm after the last block. Unset (the default) means: exactly when the blocks are Pre-LN, whose
  // residual stream is never normalized otherwise. Post-LN and DeepNorm blocks already end in a norm, and a
  // "none" model has no norm anywhere. true / false ask for one or none whatever the position.
  std::optional<bool> final_norm = std::nullopt;
  // feed-forward
  std::string ffn = "mlp";  // "mlp" (4C, ReLU, biases) or "swiglu" (64 ceil(C pi / 64), no biases)
  int64_t ffn_hidden = 0;   // 0 = the kind's default
  std::string activation = "relu";
  bool ffn_bias = true;
  // attention
  bool attn_bias = false;
  bool causal = true;
  bool qk_norm = false;
  std::string position = "rope";  // "rope", "learned" or "none"
  double rope_theta = 1e6;
  int64_t max_seq_len = 256;  // the context length: the learned table's size; generate() crops to it (any
                              // positions): set it to the training sequence length
  double dropout = 0.0;
  bool tie_weights = false;
  uint64_t seed = 0;

  // MiniMind's architecture at a given size: PreLN, RMSNorm (eps 1e-5), RoPE theta 1e6, GQA, QK-norm,
  // SwiGLU, no biases, final RMSNorm, tied embeddings.
  static TinyLMConfig minimind(int64_t vocab_size, int64_t dim, int64_t n_layers, int64_t n_heads,
                               int64_t n_kv_heads);

  bool has_final_norm() const { return final_norm.value_or(norm_position == "pre"); }
  BlockConfig block_config() const;
  void validate() const;  // ng::Error naming the first bad field
  std::string to_json() const;
  static TinyLMConfig from_json(const std::string& json);  // unknown or missing keys are errors
  bool operator==(const TinyLMConfig&) const = default;
};

class TinyLM : public Module {
 public:
  explicit TinyLM(const TinyLMConfig& config);
  TinyLM(const TinyLMConfig& config, Generator& init_gen);
  TinyLM(const TinyLM&) = delete;  // the blocks hold a reference to this model's dropout generator
  TinyLM& operator=(const TinyLM&) = delete;

  // tokens: (B, T) i64 -> logits (B, T, V)
  Tensor forward(const Tensor& tokens) override;
  // Mean cross-entropy of the next-token predictions: targets (B, T) i64, ignore_index skipped.
  Tensor loss(const Tensor& tokens, const Tensor& targets, int64_t ignore_index = -100);
  std::string type_name() const override { return "TinyLM"; }

  Generator& dropout_generator() { return dropout_gen_; }

  TinyLMConfig config;
  std::shared_ptr<Embedding> tok_emb, pos_emb;  // pos_emb only with position = "learned"
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<Module> norm;     // final norm, or null
  std::shared_ptr<Linear> lm_head;  // null with tie_weights

 private:
  TinyLM(const TinyLMConfig& config, Generator&& init_gen);  // TinyLM(config) with Generator(config.seed)
  Generator dropout_gen_;
  std::shared_ptr<Sequential> stack_;  // holds the blocks, so they are named blocks.0, blocks.1, ...
};

}  // namespace ng::nn
