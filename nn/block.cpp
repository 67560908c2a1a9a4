#include "nn/block.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/norms/add_norm.h"
#include "nn/norms/layer_norm.h"
#include "nn/norms/rms_norm.h"
#include "tensor/ops/elementwise.h"

namespace ng::nn {

BlockConfig BlockConfig::minimind(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t n_layers) {
  BlockConfig c;
  c.attn.dim = dim;
  c.attn.n_heads = n_heads;
  c.attn.n_kv_heads = n_kv_heads;
  c.attn.causal = true;
  c.attn.bias = false;
  c.attn.rope = true;
  c.attn.rope_theta = 1e6;
  c.attn.qk_norm = true;
  c.attn.norm_eps = 1e-5;
  c.ffn.dim = dim;
  c.ffn.kind = "swiglu";
  c.ffn.bias = false;
  c.norm_position = "pre";
  c.norm = "rmsnorm";
  c.norm_eps = 1e-5;
  c.n_layers = n_layers;
  return c;
}

double BlockConfig::deepnorm_alpha() const {
  return std::pow(2.0 * double(n_layers), 0.25);
}
double BlockConfig::deepnorm_beta() const {
  return std::pow(8.0 * double(n_layers), -0.25);
}

std::shared_ptr<Module> make_norm(const std::string& kind, int64_t dim, double eps) {
  if (kind == "layernorm") return std::make_shared<LayerNorm>(dim, eps);
  if (kind == "rmsnorm") return std::make_shared<RMSNorm>(dim, eps);
  fail("make_norm", "unknown norm '", kind, "', expected layernorm or rmsnorm");
}

Block::Block(const BlockConfig& cfg, Generator& gen, Generator& dropout_gen) : config(cfg) {
  const std::string& pos = cfg.norm_position;
  NG_CHECK(pos == "none" || pos == "post" || pos == "pre" || pos == "deepnorm", "Block",
           "unknown norm_position '", pos, "', expected none, post, pre or deepnorm");
  NG_CHECK(cfg.attn.dim == cfg.ffn.dim, "Block", "attention dim ", cfg.attn.dim, " and FFN dim ", cfg.ffn.dim,
           " differ");
  NG_CHECK(cfg.n_layers >= 1, "Block", "expected n_layers >= 1, got ", cfg.n_layers);
  // make_norm checks the name where a norm is built; "none" builds none, and a misspelt name was accepted
  // there and kept in the config (and in every checkpoint of the model).
  NG_CHECK(pos != "none" || cfg.norm == "layernorm" || cfg.norm == "rmsnorm", "Block", "unknown norm '",
           cfg.norm, "', expected layernorm or rmsnorm (checked also for norm_position none)");
  const int64_t C = cfg.attn.dim;
  if (pos != "none") norm1 = register_module("norm1", make_norm(cfg.norm, C, cfg.norm_eps));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(cfg.attn, gen, dropout_gen));
  if (pos != "none") norm2 = register_module("norm2", make_norm(cfg.norm, C, cfg.norm_eps));
  ffn = register_module("ffn", std::make_shared<FeedForward>(cfg.ffn, gen, dropout_gen));

  if (pos == "deepnorm") {
    // DeepNet init: scale the value/output projections and the FFN matrices (weights and biases) by beta.
    const double beta = cfg.deepnorm_beta();
    NoGradGuard no_grad;
    std::vector<std::shared_ptr<Linear>> scaled = ffn->linears();
    scaled.push_back(attn->v_proj);
    scaled.push_back(attn->o_proj);
    for (auto& lin : scaled) {
      mul_(lin->weight, beta);
      if (lin->bias.defined()) mul_(lin->bias, beta);
    }
  }
}

// norm(alpha * x + a) for the Post-LN and DeepNorm sublayers: the fused residual add + norm
// (nn/norms/add_norm.h) for LayerNorm and RMSNorm, bitwise what norm->forward(x * alpha + a) gives in
// f32/f64, without writing the sum to memory.
static Tensor norm_of_sum(const std::shared_ptr<Module>& norm, const Tensor& x, double alpha,
                          const Tensor& a) {
  if (auto ln = std::dynamic_pointer_cast<LayerNorm>(norm))
    return F::add_layer_norm(x, a, alpha, ln->normalized_shape, ln->weight, ln->bias, ln->eps);
  if (auto rn = std::dynamic_pointer_cast<RMSNorm>(norm))
    return F::add_rms_norm(x, a, alpha, rn->weight, rn->eps);
  return norm->forward(alpha != 1.0 ? x * alpha + a : x + a);
}

Tensor Block::forward(const Tensor& x) {
  check_defined("Block", "x", x);
  const std::string& pos = config.norm_position;
  Tensor h = x;
  if (pos == "none") {
    h = h + attn->forward(h);
    h = h + ffn->forward(h);
  } else if (pos == "post") {  // norm1(h + attn(h)), norm2(h + ffn(h)), each add fused into its norm
    h = norm_of_sum(norm1, h, 1.0, attn->forward(h));
    h = norm_of_sum(norm2, h, 1.0, ffn->forward(h));
  } else if (pos == "pre") {
    h = h + attn->forward(norm1->forward(h));
    h = h + ffn->forward(norm2->forward(h));
  } else {                                         // deepnorm
    const double alpha = config.deepnorm_alpha();  // norm1(alpha h + attn(h)), norm2(alpha h + ffn(h))
    h = norm_of_sum(norm1, h, alpha, attn->forward(h));
    h = norm_of_sum(norm2, h, alpha, ffn->forward(h));
  }
  return h;
}

}  // namespace ng::nn
