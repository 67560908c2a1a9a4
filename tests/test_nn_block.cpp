// FFN (MLP, SwiGLU) and Block variants: sizes, DeepNorm constants and init, behaviour, f64 gradchecks of
// each whole block with respect to its input and every parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "normgrad.h"
#include "block_test_util.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;
using ng::testing::small_block;

namespace {

void gradcheck_module(nn::Module& m, const Shape& x_shape, const std::string& what) {
  Generator g(5);
  nn::cast_(m, DType::f64);
  Tensor x = randn(x_shape, g, DType::f64).requires_grad_();
  std::vector<Tensor> inputs = {x};
  int64_t n = x.numel();
  for (auto& [name, p] : m.named_parameters()) inputs.push_back(p), n += p.numel();
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return m(in[0]); }, inputs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message();
  EXPECT_EQ(r.checked, n) << what;
}

}  // namespace

TEST(FFN, HiddenSizes) {
  // The default (issue 4's MiniMind rule): 64 * ceil(C * pi / 64).
  EXPECT_EQ(nn::swiglu_hidden_size(512), 1664);  // 1608.5 -> 26 * 64
  EXPECT_EQ(nn::swiglu_hidden_size(256), 832);   // 804.2 -> 13 * 64
  EXPECT_EQ(nn::swiglu_hidden_size(64), 256);    // 201.1 -> 4 * 64
  EXPECT_EQ(nn::swiglu_hidden_size(8), 64);
  // The older MiniMind rule: 64 * ceil(int(8C/3) / 64).
  EXPECT_EQ(nn::swiglu_hidden_size_8_3(512), 1408);
  EXPECT_EQ(nn::swiglu_hidden_size_8_3(768), 2048);
  EXPECT_EQ(nn::swiglu_hidden_size_8_3(64), 192);
  EXPECT_EQ(nn::swiglu_hidden_size_8_3(8), 64);
  nn::FFNConfig cfg;
  cfg.dim = 256;
  cfg.kind = "swiglu";
  EXPECT_EQ(cfg.sizing, "pi");
  EXPECT_EQ(cfg.hidden_size(), 832);
  cfg.sizing = "8/3";
  EXPECT_EQ(cfg.hidden_size(), 704);  // int(682.67) = 682 -> 11 * 64
  cfg.hidden = 100;
  EXPECT_EQ(cfg.hidden_size(), 100);  // an explicit size wins
  cfg.hidden = 0;
  cfg.sizing = "bogus";
  expect_error([&] { cfg.hidden_size(); }, {"FeedForward: sizing must be \"pi\" or \"8/3\", got \"bogus\""});
  nn::FFNConfig mlp;
  mlp.dim = 10;
  EXPECT_EQ(mlp.hidden_size(), 40);
  nn::FeedForward swiglu(nn::FFNConfig{.dim = 64, .kind = "swiglu"});  // the default: the pi rule
  EXPECT_EQ(swiglu.gate_proj->weight.shape(), (Shape{256, 64}));
  EXPECT_EQ(swiglu.down_proj->weight.shape(), (Shape{64, 256}));
  EXPECT_FALSE(swiglu.gate_proj->bias.defined());
  EXPECT_FALSE(swiglu.up_proj->bias.defined());
  EXPECT_FALSE(swiglu.down_proj->bias.defined());
  EXPECT_EQ(swiglu.num_parameters(), 3 * 256 * 64);
  nn::FeedForward swiglu83(nn::FFNConfig{.dim = 64, .kind = "swiglu", .sizing = "8/3"});
  EXPECT_EQ(swiglu83.num_parameters(), 3 * 192 * 64);
  expect_error([] { nn::FeedForward(nn::FFNConfig{.dim = 4, .kind = "moe"}); },
               {"FeedForward: unknown kind 'moe', expected mlp or swiglu"});
}

TEST(FFN, SwiGLUMatchesFormulaAndGradchecks) {
  Generator g(2);
  nn::FeedForward f(nn::FFNConfig{.dim = 6, .kind = "swiglu", .hidden = 10}, g);
  Tensor x = randn({2, 3, 6}, g);
  Tensor want = F::linear(silu(F::linear(x, f.gate_proj->weight)) * F::linear(x, f.up_proj->weight),
                          f.down_proj->weight);
  EXPECT_EQ(f(x).to_vector<double>(), want.to_vector<double>());
  gradcheck_module(f, {2, 3, 6}, "SwiGLU");
  nn::FeedForward m(nn::FFNConfig{.dim = 6, .hidden = 12, .activation = "gelu"}, g);
  gradcheck_module(m, {2, 3, 6}, "MLP gelu");
}

TEST(Block, GradcheckEachVariantWhole) {
  ng::set_num_threads(1);  // tiny f64 problems: threads add only overhead here
  for (auto [pos, norm] : {std::pair<std::string, std::string>{"none", "layernorm"},
                           {"post", "layernorm"},
                           {"pre", "layernorm"},
                           {"pre", "rmsnorm"},
                           {"deepnorm", "layernorm"}}) {
    Generator g(7);
    nn::Block b(small_block(pos, norm), g);
    gradcheck_module(b, {2, 3, 8}, pos + " + " + norm);
  }
  Generator g(8);
  nn::Block mm(nn::BlockConfig::minimind(8, 4, 2, 2), g);  // PreLN RMSNorm RoPE GQA QK-norm SwiGLU
  gradcheck_module(mm, {1, 4, 8}, "minimind");
  ng::set_num_threads(0);
}

TEST(Block, MiniMindPreset) {
  auto c = nn::BlockConfig::minimind(64, 8, 2, 8);
  EXPECT_EQ(c.norm_position, "pre");
  EXPECT_EQ(c.norm, "rmsnorm");
  EXPECT_TRUE(c.attn.rope && c.attn.qk_norm && c.attn.causal && !c.attn.bias);
  EXPECT_EQ(c.attn.rope_theta, 1e6);
  EXPECT_EQ(c.ffn.kind, "swiglu");
  nn::Block b(c);
  std::vector<std::string> names;
  for (auto& [n, p] : b.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"norm1.weight", "attn.q_proj.weight", "attn.k_proj.weight",
                                             "attn.v_proj.weight", "attn.o_proj.weight", "attn.q_norm.weight",
                                             "attn.k_norm.weight", "norm2.weight", "ffn.gate_proj.weight",
                                             "ffn.up_proj.weight", "ffn.down_proj.weight"}));
  EXPECT_EQ(b.attn->k_proj->weight.shape(), (Shape{16, 64}));  // 2 kv heads of 8
}

TEST(Block, DeepNormConstantsAndInit) {
  auto c = small_block("deepnorm", "layernorm");
  c.n_layers = 6;
  EXPECT_DOUBLE_EQ(c.deepnorm_alpha(), std::pow(12.0, 0.25));
  EXPECT_DOUBLE_EQ(c.deepnorm_beta(), std::pow(48.0, -0.25));
  // Same generator seed: the DeepNorm block's v/o/FFN weights are the Pre-LN block's times beta, q/k equal.
  auto p = c;
  p.norm_position = "pre";
  Generator g1(3), g2(3);
  nn::Block deep(c, g1), pre(p, g2);
  const double beta = c.deepnorm_beta();
  auto scaled = [&](const Tensor& a, const Tensor& b, double s) {
    auto x = a.to_vector<double>(), y = b.to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i)
      if (std::abs(x[i] - s * y[i]) > 1e-7) return false;
    return true;
  };
  EXPECT_TRUE(scaled(deep.attn->q_proj->weight, pre.attn->q_proj->weight, 1.0));
  EXPECT_TRUE(scaled(deep.attn->k_proj->weight, pre.attn->k_proj->weight, 1.0));
  EXPECT_TRUE(scaled(deep.attn->v_proj->weight, pre.attn->v_proj->weight, beta));
  EXPECT_TRUE(scaled(deep.attn->o_proj->weight, pre.attn->o_proj->weight, beta));
  EXPECT_TRUE(scaled(deep.ffn->fc1->weight, pre.ffn->fc1->weight, beta));
  EXPECT_TRUE(scaled(deep.ffn->fc2->bias, pre.ffn->fc2->bias, beta));
  EXPECT_FALSE(scaled(deep.attn->v_proj->weight, pre.attn->v_proj->weight, 1.0));
}

TEST(Block, DeepNormForwardAppliesAlphaAndInitIsScaledByBeta) {
  // N = 6 layers: alpha = (2N)^(1/4) = 12^(1/4), beta = (8N)^(-1/4) = 48^(-1/4), written out here rather than
  // taken from the config, so a wrong formula there fails.
  const double alpha = std::sqrt(std::sqrt(12.0)), beta = 1.0 / std::sqrt(std::sqrt(48.0));
  nn::BlockConfig c = small_block("deepnorm", "layernorm");
  c.attn.dim = c.ffn.dim = 64;
  c.attn.n_heads = 4;
  c.ffn.hidden = 256;
  c.n_layers = 6;
  Generator g(11);
  nn::Block b(c, g);

  // Init: every Linear is U(-k, k) with k = 1/sqrt(fan_in), times beta for v_proj, o_proj and the FFN. For
  // U(-k, k): mean 0 (standard error k / sqrt(3 n)), variance k^2 / 3, and max |w| just under k.
  auto expect_uniform = [](const Tensor& w, double k, const std::string& what) {
    std::vector<double> v = w.to_vector<double>();
    const double n = double(v.size());
    double sum = 0, sum_sq = 0, max_abs = 0;
    for (double e : v) sum += e, sum_sq += e * e, max_abs = std::max(max_abs, std::abs(e));
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 4 * k / std::sqrt(3 * n)) << what;
    EXPECT_NEAR(var / (k * k / 3), 1.0, 0.06) << what;  // 4096+ draws: the ratio's std is ~0.014
    EXPECT_LE(max_abs, k) << what;
    EXPECT_GT(max_abs, 0.99 * k) << what;
  };
  const double k64 = 1 / std::sqrt(64.0), k256 = 1 / std::sqrt(256.0);
  expect_uniform(b.attn->q_proj->weight, k64, "q_proj (not scaled)");
  expect_uniform(b.attn->k_proj->weight, k64, "k_proj (not scaled)");
  expect_uniform(b.attn->v_proj->weight, beta * k64, "v_proj");
  expect_uniform(b.attn->o_proj->weight, beta * k64, "o_proj");
  expect_uniform(b.ffn->fc1->weight, beta * k64, "ffn fc1");
  expect_uniform(b.ffn->fc2->weight, beta * k256, "ffn fc2");

  // Forward: x -> norm1(alpha x + attn(x)) -> norm2(alpha h + ffn(h)), from the block's own sublayers.
  Tensor x = randn({2, 5, 64}, g);
  Tensor h = b.norm1->forward(x * alpha + b.attn->forward(x));
  Tensor want = b.norm2->forward(h * alpha + b.ffn->forward(h));
  Tensor y = b(x);
  EXPECT_LE(ng::testing::max_abs_diff(y, want), 1e-6);
  // alpha matters: the same sublayers without it give another output.
  Tensor h1 = b.norm1->forward(x + b.attn->forward(x));
  Tensor without = b.norm2->forward(h1 + b.ffn->forward(h1));
  EXPECT_GT(ng::testing::max_abs_diff(y, without), 1e-2);
}

TEST(Block, VariantsComputeWhatTheySay) {
  Generator g(4);
  Tensor x = randn({2, 5, 8}, g);
  // Post-LN with LayerNorm ends in a norm: every row has mean 0 and variance 1 (weight 1, bias 0 at init).
  nn::Block post(small_block("post", "layernorm"), g);
  Tensor y = post(x);
  auto v = y.to_vector<double>();
  for (int r = 0; r < 10; ++r) {
    double m = 0, s = 0;
    for (int i = 0; i < 8; ++i) m += v[size_t(r * 8 + i)] / 8;
    for (int i = 0; i < 8; ++i) s += (v[size_t(r * 8 + i)] - m) * (v[size_t(r * 8 + i)] - m) / 8;
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(s, 1.0, 1e-3);
  }
  // Pre-LN: y = h + ffn(norm2(h)), h = x + attn(norm1(x)), spelled out with the block's own modules.
  nn::Block pre(small_block("pre", "rmsnorm"), g);
  Tensor h = x + pre.attn->forward(pre.norm1->forward(x));
  Tensor want = h + pre.ffn->forward(pre.norm2->forward(h));
  EXPECT_EQ(pre(x).to_vector<double>(), want.to_vector<double>());
  // NoNorm has no norm modules at all.
  nn::Block none(small_block("none", "layernorm"), g);
  EXPECT_EQ(none.norm1, nullptr);
  for (auto& [n, p] : none.named_parameters()) EXPECT_EQ(n.find("norm"), std::string::npos) << n;
  try {
    nn::Block bad(small_block("sandwich", "layernorm"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown norm_position 'sandwich'"), std::string::npos) << e.what();
  }
  expect_error([] { nn::Block(small_block("pre", "batchnorm")); },
               {"make_norm: unknown norm 'batchnorm', expected layernorm or rmsnorm"});
}
