// A small Block for tests (C = 8, 2 heads, an MLP of 16, RoPE theta 100, 4 layers for DeepNorm's
// constants), shared by test_nn_block.cpp and test_gradcheck_coverage.cpp.
#pragma once

#include <string>

#include "normgrad.h"

namespace ng::testing {

inline nn::BlockConfig small_block(const std::string& position, const std::string& norm) {
  nn::BlockConfig b;
  b.attn.dim = 8;
  b.attn.n_heads = 2;
  b.attn.rope_theta = 100.0;
  b.ffn.dim = 8;
  b.ffn.kind = "mlp";
  b.ffn.hidden = 16;
  b.norm_position = position;
  b.norm = norm;
  b.n_layers = 4;
  return b;
}

}  // namespace ng::testing
