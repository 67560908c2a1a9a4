// exp2's training step as the benchmarks run it (normgrad_bench's train_step entries, step_states): the
// TinyLM of exp2 (2 layers, hidden 256, 4 heads, RoPE, the char vocabulary of 65) and one fixed batch of
// 16 x 64 tokens. The tokens are arbitrary: a step's time does not depend on the text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/tinylm.h"
#include "normgrad.h"

namespace ng_bench {

// norm_position: "none", "post" or "pre"; norm: "layernorm" or "rmsnorm".
inline ng::nn::TinyLMConfig exp2_model(const std::string& norm_position, const std::string& norm) {
  ng::nn::TinyLMConfig m;
  m.vocab_size = 65;
  m.dim = 256;
  m.n_layers = 2;
  m.n_heads = 4;
  m.norm_position = norm_position;
  m.norm = norm;
  m.final_norm = norm_position == "pre";  // as exp2 (until stop 45 Post-LN had one here, and not in exp2)
  m.position = "rope";
  m.max_seq_len = 64;
  m.seed = 1;
  return m;
}

struct Exp2Batch {
  ng::Tensor tokens, targets;  // (16, 64) each; a target is the next token
};

inline Exp2Batch exp2_batch() {
  const int64_t B = 16, T = 64;
  std::vector<int64_t> tok(size_t(B * T)), tgt(size_t(B * T));
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int64_t((i * 2654435761u) % 65);  // any tokens
  for (size_t i = 0; i < tok.size(); ++i) tgt[i] = tok[(i + 1) % tok.size()];
  return {ng::from_vector(tok, {B, T}), ng::from_vector(tgt, {B, T})};
}

}  // namespace ng_bench
