// The position-wise feed-forward sublayer, in two kinds.
//
// MLP (the classic Transformer FFN; GPT-2): hidden H = 4 C by default, biases,
//     y = fc2( act( fc1(x) ) )                    act = ReLU (or GELU)
//
// SwiGLU (Shazeer 2020; Llama, MiniMind): no biases,
//     y = down_proj( silu(gate_proj(x)) * up_proj(x) )
//   The gate silu(gate) decides, per hidden unit, how much of up(x) passes. Three matrices instead of two,
//   so the hidden size is smaller than the MLP's 4 C. FFNConfig::sizing picks one of two rules, both
//   rounding UP to a multiple of 64:
//     "pi"  (default; issue 4's rule, MiniMind's current one)   H = 64 * ceil( C * pi / 64 )
//           e.g. C = 512: 1608.5 -> H = 1664
//     "8/3" (MiniMind's older rule, int(C * 8 / 3))             H = 64 * ceil( floor(8 C / 3) / 64 )
//           e.g. C = 512: 1365 -> H = 1408
//   Before the rounding, 8/3 gives the three matrices 3 * (8/3) C^2 = 8 C^2 weights, as many as the two
//   matrices of the 4 C MLP; the rounding adds a little (C = 512: 2.16M weights against 2.10M).
//
// Both are made of differentiable ops (Linear, the activation, mul), so the backward is the chain of theirs.
#pragma once

#include <string>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ng::nn {

struct FFNConfig {
  int64_t dim = 64;                 // C
  std::string kind = "mlp";         // "mlp" or "swiglu"
  int64_t hidden = 0;               // H; 0 means the default of the kind (4 C, or MiniMind's SwiGLU size)
  std::string activation = "relu";  // MLP only: "relu" or "gelu"
  bool bias = true;                 // MLP only (SwiGLU has no biases, as in MiniMind)
  double dropout = 0.0;             // on the output
  std::string sizing = "pi";        // SwiGLU default hidden size: "pi" (the default) or "8/3" (older rule)

  int64_t hidden_size() const;
};

// SwiGLU's default hidden size, sizing = "pi": 64 * ceil(C * pi / 64).
int64_t swiglu_hidden_size(int64_t dim);
// The older MiniMind rule, sizing = "8/3": 64 * ceil(floor(8 C / 3) / 64).
int64_t swiglu_hidden_size_8_3(int64_t dim);

class FeedForward : public Module {
 public:
  explicit FeedForward(const FFNConfig& config, Generator& gen = default_generator(),
                       Generator& dropout_gen = default_generator());

  // x: (..., C) -> (..., C)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return config.kind == "swiglu" ? "SwiGLU" : "MLP"; }

  // The layers that write into the residual stream and the ones that read it (DeepNorm rescales these).
  std::vector<std::shared_ptr<Linear>> linears() const;

  FFNConfig config;
  std::shared_ptr<Linear> fc1, fc2;                       // MLP
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;  // SwiGLU
  std::shared_ptr<Dropout> dropout;
};

}  // namespace ng::nn
