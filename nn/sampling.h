// nn::generate: sample a continuation from a TinyLM, reproducibly.
//
// For each new token: run the model on the context (the last config.max_seq_len tokens, the length it was
// trained on, whatever its positions), take the logits of the last position, and
//
//   temperature = 0:  pick the argmax (greedy; ties go to the lowest id)
//   temperature > 0:  p = softmax(logits / temperature), restricted to the top_k largest logits when
//                     top_k > 0 (ties broken by lower id), then draw one token by inverse CDF with
//                     u ~ U[0, 1) from Generator(seed)
//
// The same model, prompt and seed always give the same tokens, on the model's device (each context is
// copied there; the last logits come back to the host). The model runs in eval mode (no dropout)
// and without autograd; its train/eval flag is restored afterwards. No KV cache: each step recomputes the
// whole context (simple and exact; fine at this size).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/tinylm.h"

namespace ng::nn {

// Returns prompt followed by n_tokens new tokens. The prompt must be non-empty.
std::vector<int64_t> generate(TinyLM& model, const std::vector<int64_t>& prompt, int64_t n_tokens,
                              double temperature = 1.0, int64_t top_k = 0, uint64_t seed = 0);

// The sampling step alone, on one row of logits (exposed for tests).
int64_t sample_from_logits(const std::vector<double>& logits, double temperature, int64_t top_k,
                           Generator& gen);

}  // namespace ng::nn
