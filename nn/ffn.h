// The position-wise feed-forward sublayer, in two kinds.
//
// MLP (the classic Transformer FFN; GPT-2): hidden H = 4 C by default, biases,
//     y = fc2( act( fc1(x) ) )                    act = ReLU (or GELU)
//
// SwiGLU (Shazeer 2020; Llama, MiniMind): no biases,
//     y = down_proj( silu(gate_proj(x)) * up_proj(x) )
//   The gate silu(gate) decides, per hidden unit, how much of up(x) passes. Three matrices instead of two,
//   so MiniMind shrinks the hidden size to keep the parameter count near the 4C MLP:
//     H = 64 * ceil( floor(C * 8 / 3) / 64 )        (8/3 C, rounded UP to a multiple of 64)
//   e.g. C = 512 -> floor(1365.33) = 1365 -> H = 1408.
//   Issue 4 states the rule as H = 64 * ceil(C * pi / 64) (C = 512 -> 1664). MiniMind's own code uses 8/3,
//   which is the default here; set FFNConfig::sizing = "pi" for the pi rule.
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
  std::string sizing = "8/3";       // SwiGLU default hidden size: "8/3" (MiniMind's code) or "pi"

  int64_t hidden_size() const;
};

// MiniMind's SwiGLU hidden size: 64 * ceil(floor(8 C / 3) / 64).
int64_t swiglu_hidden_size(int64_t dim);
// The statement of the rule: 64 * ceil(C * pi / 64).
int64_t swiglu_hidden_size_pi(int64_t dim);

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
