#include "nn/ffn.h"

#include <cmath>

#include "tensor/ops/elementwise.h"

namespace ng::nn {

int64_t swiglu_hidden_size(int64_t dim) {
  return 64 * int64_t(std::ceil(double(dim) * M_PI / 64.0));
}

int64_t swiglu_hidden_size_8_3(int64_t dim) {
  const int64_t h = dim * 8 / 3;  // int(C * 8 / 3)
  return 64 * ((h + 64 - 1) / 64);
}

int64_t FFNConfig::hidden_size() const {
  NG_CHECK(hidden >= 0, "FeedForward", "expected hidden >= 0 (0: sized from dim), got ", hidden);
  if (hidden > 0) return hidden;
  NG_CHECK(sizing == "pi" || sizing == "8/3", "FeedForward", "sizing must be \"pi\" or \"8/3\", got \"",
           sizing, "\"");
  if (kind != "swiglu") return 4 * dim;
  return sizing == "8/3" ? swiglu_hidden_size_8_3(dim) : swiglu_hidden_size(dim);
}

FeedForward::FeedForward(const FFNConfig& cfg, Generator& gen, Generator& dropout_gen) : config(cfg) {
  NG_CHECK(cfg.dim > 0, "FeedForward", "expected dim > 0, got ", cfg.dim);
  const int64_t C = cfg.dim, H = cfg.hidden_size();
  if (cfg.kind == "mlp") {
    NG_CHECK(cfg.activation == "relu" || cfg.activation == "gelu", "FeedForward", "unknown activation '",
             cfg.activation, "', expected relu or gelu");
    fc1 = register_module("fc1", std::make_shared<Linear>(C, H, cfg.bias, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(H, C, cfg.bias, gen));
  } else if (cfg.kind == "swiglu") {
    gate_proj = register_module("gate_proj", std::make_shared<Linear>(C, H, false, gen));
    up_proj = register_module("up_proj", std::make_shared<Linear>(C, H, false, gen));
    down_proj = register_module("down_proj", std::make_shared<Linear>(H, C, false, gen));
  } else {
    fail("FeedForward", "unknown kind '", cfg.kind, "', expected mlp or swiglu");
  }
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
}

std::vector<std::shared_ptr<Linear>> FeedForward::linears() const {
  if (config.kind == "mlp") return {fc1, fc2};
  return {gate_proj, up_proj, down_proj};
}

Tensor FeedForward::forward(const Tensor& x) {
  check_defined("FeedForward", "x", x);
  Tensor y;
  if (config.kind == "mlp") {
    // h = act(x W1^T + b1) : (..., H);  y = h W2^T + b2 : (..., C)
    Tensor h = fc1->forward(x);
    h = config.activation == "gelu" ? gelu(h) : relu(h);
    y = fc2->forward(h);
  } else {
    // gate, up: (..., H);  y = (silu(gate) * up) W_down^T : (..., C)
    Tensor gate = silu(gate_proj->forward(x));
    Tensor up = up_proj->forward(x);
    y = down_proj->forward(gate * up);
  }
  return dropout->forward(y);
}

}  // namespace ng::nn
