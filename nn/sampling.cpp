#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/grad_mode.h"

namespace ng::nn {

int64_t sample_from_logits(const std::vector<double>& logits, double temperature, int64_t top_k,
                           Generator& gen) {
  const int64_t V = int64_t(logits.size());
  NG_CHECK(V > 0, "generate", "empty logits");
  NG_CHECK(temperature >= 0 && std::isfinite(temperature), "generate",
           "expected a finite temperature >= 0, got ", temperature);
  NG_CHECK(top_k >= 0, "generate", "expected top_k >= 0, got ", top_k);
  // -inf is a token ruled out (a mask); NaN and +inf are an overflow, and a row of -inf leaves nothing to
  // draw. Each would make the p below NaN (inf - inf), and the draw would fall through to the last candidate.
  bool any_finite = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    NG_CHECK(!std::isnan(logits[i]), "generate", "the model produced a NaN logit (token ", i, ")");
    NG_CHECK(logits[i] != INFINITY, "generate", "the model produced a +inf logit (token ", i, ")");
    any_finite = any_finite || std::isfinite(logits[i]);
  }
  NG_CHECK(any_finite, "generate", "every logit is -inf: no token can be drawn");

  // Candidates sorted by logit, largest first; equal logits keep id order (stable sort).
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  if (temperature == 0) return order[0];
  const int64_t k = (top_k == 0 || top_k > V) ? V : top_k;

  // p_i = exp((l_i - l_max) / temperature) / sum over the k candidates.
  const double lmax = logits[size_t(order[0])];
  std::vector<double> p(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i)
    total += p[size_t(i)] = std::exp((logits[size_t(order[size_t(i)])] - lmax) / temperature);

  // Inverse CDF: the first candidate whose cumulative probability exceeds u * total.
  const double u = rand({1}, gen, DType::f64).item() * total;
  double cum = 0;
  for (int64_t i = 0; i < k; ++i) {
    cum += p[size_t(i)];
    if (u < cum) return order[size_t(i)];
  }
  return order[size_t(k - 1)];  // u * total rounded up to the very end
}

std::vector<int64_t> generate(TinyLM& model, const std::vector<int64_t>& prompt, int64_t n_tokens,
                              double temperature, int64_t top_k, uint64_t seed) {
  NG_CHECK(!prompt.empty(), "generate", "the prompt is empty, expected at least one token");
  NG_CHECK(n_tokens >= 0, "generate", "expected n_tokens >= 0, got ", n_tokens);
  const int64_t V = model.config.vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    NG_CHECK(prompt[i] >= 0 && prompt[i] < V, "generate", "prompt token ", prompt[i], " at position ", i,
             " is out of range [0, ", V, ")");

  // The model's train/eval flag comes back however this returns: an error thrown by a forward left the model
  // in eval mode before, so a training loop that caught it went on without dropout.
  struct RestoreMode {
    TinyLM& model;
    bool was_training;
    ~RestoreMode() { model.train(was_training); }
  } restore{model, model.is_training()};
  model.eval();
  NoGradGuard no_grad;
  Generator gen(seed);
  std::vector<int64_t> seq = prompt;
  // The context is the last max_seq_len tokens whatever the positions: a learned table has no row past it,
  // and a RoPE model trained on windows of max_seq_len has never seen a longer one (a model trained on 16
  // tokens scored 1.22 nats per token on its own training text read in full, 0.004 in windows of 16).
  NG_CHECK(model.config.max_seq_len > 0, "generate",
           "expected a model config with max_seq_len > 0 (the context "
           "length), got ",
           model.config.max_seq_len);
  // The tokens go where the model is (a model on a GPU refused the CPU tensor); the logits come back to
  // the host in to_vector.
  const std::vector<Tensor> params = model.parameters();
  const Device device = params.empty() ? Device::cpu() : params[0].device();
  for (int64_t n = 0; n < n_tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, int64_t(seq.size()) - model.config.max_seq_len);
    std::vector<int64_t> ctx(seq.begin() + start, seq.end());
    const int64_t T = int64_t(ctx.size());
    Tensor logits = model.forward(from_vector(ctx, Shape{1, T}).to(device));  // (1, T, V)
    std::vector<double> last = logits.select(1, T - 1).to_vector<double>();
    seq.push_back(sample_from_logits(last, temperature, top_k, gen));
  }
  return seq;
}

}  // namespace ng::nn
