// Embedding (init, lookup, gradient), Dropout (train/eval, generator), nn::cast_, and the Module base
// (zero_grad and train/eval reach every submodule; a shared layer is one set of parameters).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

TEST(Embedding, InitIsStandardNormalAndLookupIsRows) {
  Generator g(1);
  nn::Embedding e(500, 64, g);
  auto w = e.weight.to_vector<double>();
  double s = 0, s2 = 0;
  for (double v : w) s += v, s2 += v * v;
  const double n = double(w.size()), mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 4 / std::sqrt(n));  // 4 standard errors
  EXPECT_NEAR(var, 1.0, 0.03);
  Tensor ids = from_vector(std::vector<int64_t>{3, 0, 499, 3}, Shape{2, 2});
  Tensor out = e(ids);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 64}));
  auto o = out.to_vector<double>();
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(o[size_t(j)], w[size_t(3 * 64 + j)]);
    EXPECT_EQ(o[size_t(2 * 64 + j)], w[size_t(499 * 64 + j)]);
  }
  expect_error([] { nn::Embedding(0, 4); },
               {"Embedding: expected positive num_embeddings and embedding_dim, got 0 and 4"});
}

TEST(Embedding, GradientScatterAddsRepeatedIds) {
  Generator g(2);
  nn::Embedding e(5, 3, g, DType::f64);
  Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1}, Shape{3});
  auto r = gradcheck([&](const std::vector<Tensor>&) { return e(ids); }, {e.weight});
  EXPECT_TRUE(r.ok) << r.message();
  sum(e(ids)).backward();
  auto gw = e.weight.grad().to_vector<double>();
  EXPECT_EQ(gw[3], 2.0);  // row 1 used twice
  EXPECT_EQ(gw[12], 1.0);
  EXPECT_EQ(gw[0], 0.0);
}

TEST(Dropout, TrainDropsAndScalesEvalIsIdentity) {
  Generator g(3);
  nn::Dropout d(0.25, g);
  Tensor x = ones({4000});
  auto y = d(x).to_vector<double>();
  int zeros_n = 0;
  for (double v : y) {
    if (v == 0)
      ++zeros_n;
    else
      EXPECT_NEAR(v, 1 / 0.75, 1e-6);
  }
  EXPECT_NEAR(zeros_n, 1000, 4 * std::sqrt(4000 * 0.25 * 0.75));
  EXPECT_GT(g.offset(), 0u);  // it drew from the generator it was given
  d.eval();
  const uint64_t before = g.offset();
  EXPECT_EQ(d(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(g.offset(), before);  // eval draws nothing
  // Same generator state, same mask.
  Generator g1(9), g2(9);
  nn::Dropout a(0.5, g1), b(0.5, g2);
  EXPECT_EQ(a(x).to_vector<double>(), b(x).to_vector<double>());
  // p = 1 zeroes every element and its gradient, as ng::dropout does; past 1, below 0 or NaN is refused.
  Tensor leaf = randn({3, 5}, g);
  leaf.requires_grad_();
  nn::Dropout all(1.0, g);
  Tensor zeroed = all(leaf);
  for (double v : zeroed.to_vector<double>()) EXPECT_EQ(v, 0.0);
  sum(zeroed).backward();
  for (double v : leaf.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
  expect_error([] { nn::Dropout(1.5); }, {"Dropout: expected 0 <= p <= 1, got 1.5"});
  expect_error([] { nn::Dropout(-0.1); }, {"Dropout: expected 0 <= p <= 1, got -0.1"});
  expect_error([] { nn::Dropout(std::nan("")); }, {"Dropout: expected 0 <= p <= 1, got nan"});
}

TEST(Cast, ConvertsInPlaceKeepingIdentity) {
  Generator g(4);
  nn::Linear lin(3, 2, true, g);
  Tensor w_handle = lin.weight;  // another handle to the same parameter
  auto before = lin.weight.to_vector<double>();
  nn::cast_(lin, DType::f64);
  EXPECT_EQ(lin.weight.dtype(), DType::f64);
  EXPECT_EQ(w_handle.dtype(), DType::f64);  // every handle sees it
  EXPECT_EQ(lin.named_parameters()[0].second.dtype(), DType::f64);
  EXPECT_EQ(lin.weight.to_vector<double>(), before);  // f32 -> f64 is exact
  EXPECT_TRUE(lin.weight.requires_grad());
  Tensor y = lin(randn({2, 3}, g, DType::f64));
  EXPECT_EQ(y.dtype(), DType::f64);
  expect_error([&] { nn::cast_(lin, DType::i64); }, {"cast_: expected a floating dtype, got i64"});
}

namespace {

// Every module of a tree, depth first, with its dotted path ("" for the root).
void walk(const nn::Module& m, const std::string& path,
          std::vector<std::pair<std::string, const nn::Module*>>& out) {
  out.emplace_back(path, &m);
  for (const auto& [name, child] : m.named_children())
    walk(*child, path.empty() ? name : path + "." + name, out);
}

}  // namespace

TEST(Module, ZeroGradDropsEveryParametersGradRecursively) {
  // A TinyLM: parameters sit three levels down (blocks.0.attn.q_proj.weight).
  nn::TinyLMConfig c;
  c.vocab_size = 7;
  c.dim = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.norm_position = "pre";
  nn::TinyLM model(c);
  Tensor tokens = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, Shape{1, 6});
  model.loss(tokens, tokens).backward();
  const nn::NamedTensors params = model.named_parameters();
  ASSERT_GT(params.size(), 10u);
  int deep = 0;
  for (const auto& [name, p] : params) {
    ASSERT_TRUE(p.grad().defined()) << name << " got no gradient";
    deep += std::count(name.begin(), name.end(), '.') >= 3;
  }
  EXPECT_GT(deep, 0);  // some parameters live in sub-sub-modules
  model.zero_grad();
  for (const auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
  // The next backward starts from zero, not from the old gradient: it equals a fresh model's first one.
  model.loss(tokens, tokens).backward();
  std::vector<Tensor> first;
  for (const auto& [name, p] : params) first.push_back(p.grad().clone());
  model.zero_grad();
  model.loss(tokens, tokens).backward();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].second.grad().to_vector<double>(), first[i].to_vector<double>()) << params[i].first;
}

TEST(Module, TrainAndEvalRecurseIntoSubmodules) {
  // Sequential(Linear, BatchNorm1d, Sequential(Dropout, Linear)): the flags and the behaviour of the inner
  // Dropout and BatchNorm follow the root's train()/eval().
  Generator g(6);
  auto bn = std::make_shared<nn::BatchNorm1d>(4);
  auto drop = std::make_shared<nn::Dropout>(0.5, g);
  auto inner = std::make_shared<nn::Sequential>();
  inner->push_back(drop);
  inner->push_back(std::make_shared<nn::Linear>(4, 3, true, g));
  nn::Sequential root;
  root.push_back(std::make_shared<nn::Linear>(5, 4, true, g));
  root.push_back(bn);
  root.push_back(inner);
  std::vector<std::pair<std::string, const nn::Module*>> all;
  walk(root, "", all);
  ASSERT_EQ(all.size(), 6u);  // root, 0, 1, 2, 2.0, 2.1
  for (const auto& [path, m] : all) EXPECT_TRUE(m->is_training()) << path;

  Tensor x = randn({8, 5}, g);
  Tensor a = root(x), b = root(x);
  EXPECT_NE(a.to_vector<double>(), b.to_vector<double>());  // training: a fresh dropout mask each call
  EXPECT_EQ(bn->num_batches_tracked.item(), 2.0);           // and BatchNorm updates its running stats

  root.eval();
  for (const auto& [path, m] : all) EXPECT_FALSE(m->is_training()) << path;
  const std::vector<double> running = bn->running_mean.to_vector<double>();
  Tensor e1 = root(x), e2 = root(x);
  EXPECT_EQ(e1.to_vector<double>(), e2.to_vector<double>());  // no dropout in eval
  EXPECT_EQ(bn->running_mean.to_vector<double>(), running);   // running stats left alone
  EXPECT_EQ(bn->num_batches_tracked.item(), 2.0);
  Tensor h = (*root[0])(x);  // eval BatchNorm = the running-stats affine
  EXPECT_EQ(
      (*root[1])(h).to_vector<double>(),
      F::batch_norm(h, bn->running_mean, bn->running_var, bn->weight, bn->bias, false).to_vector<double>());

  root.train();
  for (const auto& [path, m] : all) EXPECT_TRUE(m->is_training()) << path;
  // eval() on a child alone reaches its own children and nothing above it.
  inner->eval();
  EXPECT_TRUE(root.is_training());
  EXPECT_TRUE(bn->is_training());
  EXPECT_FALSE(drop->is_training());
}

// One layer used at two places (a module registered twice, as weight-shared layers are) is one set of
// parameters: listed once, under its first name, as PyTorch's named_parameters() does. Listed once per name,
// num_parameters() counted it twice, clip_grad_norm_(parameters()) summed its gradient twice into the norm
// (sqrt(2) too large here), and AdamW refused the list ("'1.weight' is the same tensor as an earlier one").
// state_dict() still has every name.
TEST(Module, ASharedLayerIsListedOnce) {
  Generator g(3);
  auto layer = std::make_shared<nn::Linear>(3, 3, true, g);
  auto bn = std::make_shared<nn::BatchNorm1d>(3);
  nn::Sequential model;
  model.push_back(layer);
  model.push_back(bn);
  model.push_back(layer);
  model.push_back(bn);

  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(model.parameters().size(), 4u);
  EXPECT_EQ(model.num_parameters(), 3 * 3 + 3 + 3 + 3);
  std::vector<std::string> buffers;
  for (const auto& [name, b] : model.named_buffers()) buffers.push_back(name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"}));
  EXPECT_EQ(model.state_dict().size(), 2u * (4 + 3));  // every name

  // The gradient norm counts each parameter once: sqrt(sum of its squared gradients).
  sum(model(randn({4, 3}, g))).backward();
  double sq = 0;
  for (const Tensor& p : {layer->weight, layer->bias, bn->weight, bn->bias})
    for (double v : p.grad().to_vector<double>()) sq += v * v;
  EXPECT_NEAR(optim::clip_grad_norm_(model.parameters(), 1e9), std::sqrt(sq), 1e-6 * std::sqrt(sq));

  // An optimizer takes the list, and a step moves the shared weight once.
  optim::SGDOptions sgd;
  sgd.lr = 0.1;
  optim::SGD opt(model.named_parameters(), sgd);
  const std::vector<double> before = layer->weight.to_vector<double>(),
                            grad = layer->weight.grad().to_vector<double>();
  opt.step();
  const std::vector<double> after = layer->weight.to_vector<double>();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.1 * grad[i], 1e-6);
}

// replace_tensor on a parameter makes the new tensor a parameter as register_parameter does (requires_grad):
// it stayed a plain tensor, so a backward gave it no gradient and an optimizer skipped it.
TEST(Module, ReplacedParameterRequiresGrad) {
  struct Scale : nn::Module {
    Tensor weight;
    Tensor stats;
    Scale() {
      weight = register_parameter("weight", ones({2}));
      stats = register_buffer("stats", zeros({2}));
    }
    void resize(int64_t n) {
      weight = zeros({n});
      replace_tensor("weight", weight);
      stats = zeros({n});
      replace_tensor("stats", stats);
    }
    void replace(const std::string& name, const Tensor& t) { replace_tensor(name, t); }
    Tensor forward(const Tensor& x) override { return x * weight; }
  };
  Scale m;
  m.resize(3);
  const nn::NamedTensors params = m.named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].second.shape(), (Shape{3}));
  EXPECT_TRUE(params[0].second.requires_grad());
  EXPECT_FALSE(m.named_buffers()[0].second.requires_grad());  // a buffer stays a buffer
  sum(m(ones({3}))).backward();
  ASSERT_TRUE(m.weight.grad().defined());
  EXPECT_EQ(m.weight.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
  expect_error([&] { m.replace("bias", zeros({3})); }, {"Module: no parameter or buffer named 'bias'"});
}
