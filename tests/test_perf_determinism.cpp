// The whole training step is bitwise deterministic across thread counts: every kernel splits its work
// in a way that does not depend on the number of threads (tensor/parallel.h, tensor/kernels/gemm.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nn/tinylm.h"
#include "normgrad.h"

using namespace ng;

namespace {

// Three Adam steps of a small Pre-LN + RMSNorm TinyLM; returns the last loss and all parameters.
std::vector<double> train_three_steps(int threads) {
  set_num_threads(threads);
  nn::TinyLMConfig cfg;
  cfg.vocab_size = 65;
  cfg.dim = 64;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.norm_position = "pre";
  cfg.norm = "rmsnorm";
  cfg.max_seq_len = 32;
  cfg.seed = 7;
  nn::TinyLM model(cfg);
  optim::Adam adam(model.named_parameters(), {.lr = 1e-3});
  std::vector<int64_t> tok(4 * 32), tgt(4 * 32);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int64_t((i * 2654435761u) % 65);
  for (size_t i = 0; i < tok.size(); ++i) tgt[i] = tok[(i + 1) % tok.size()];
  const Tensor tokens = from_vector(tok, {4, 32}), targets = from_vector(tgt, {4, 32});
  double last_loss = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor loss = model.loss(tokens, targets);
    loss.backward();
    adam.step();
    model.zero_grad();
    last_loss = loss.item();
  }
  std::vector<double> out = {last_loss};
  for (const auto& [name, p] : model.named_parameters()) {
    auto v = p.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST(PerfDeterminism, TrainingStepsAreBitwiseEqualAtOneAndTwoThreads) {
  const int before = num_threads();
  const std::vector<double> one = train_three_steps(1), two = train_three_steps(2);
  set_num_threads(before);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_GT(one.size(), size_t(10000));  // the parameters really are in there
  EXPECT_EQ(one[0], two[0]) << "loss after three steps";
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(double)));
}
