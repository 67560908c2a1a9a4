// CausalSelfAttention: against a plain-loop reference (GQA head mapping, RoPE, QK-norm, mask), causality, the
// lesson's unmasked configuration seeing the future, f64 gradchecks of every option, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <tuple>

#include "normgrad.h"
#include "ops_test_util.h"
#include "tensor/sanitizer.h"  // NG_ASAN, NG_TSAN
#include "worst_error.h"

using namespace ng;
using ng::testing::expect_error;

namespace {

nn::AttentionConfig config(int64_t C, int64_t NH, int64_t NKV, bool causal, bool rope, bool qk_norm,
                           bool bias) {
  nn::AttentionConfig c;
  c.dim = C;
  c.n_heads = NH;
  c.n_kv_heads = NKV;
  c.causal = causal;
  c.rope = rope;
  c.rope_theta = 100.0;  // small theta: the rotation angles differ visibly even at tiny T
  c.qk_norm = qk_norm;
  c.bias = bias;
  return c;
}

// Plain loops, in double: y = o_proj(softmax(q k^T / sqrt(HS) + mask) v), query head h reads kv head h / rep.
// With qk_norm, each head vector of q and k is first RMS-normalized and scaled by the learned weights:
// q_i <- q_i / sqrt(mean_i(q_i^2) + eps) * q_norm.weight_i (and k with k_norm), before RoPE.
std::vector<double> reference(nn::CausalSelfAttention& a, const Tensor& x) {
  const auto& c = a.config;
  const int64_t B = x.size(0), T = x.size(1), C = c.dim, NH = c.n_heads, NKV = c.kv_heads(), HS = C / NH;
  const int64_t rep = NH / NKV;
  auto X = x.to_vector<double>();
  auto lin = [&](nn::Linear& l, int64_t out) {  // (B*T, out)
    auto W = l.weight.to_vector<double>();
    std::vector<double> b =
        l.bias.defined() ? l.bias.to_vector<double>() : std::vector<double>(size_t(out), 0.0);
    std::vector<double> y(size_t(B * T * out));
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = b[size_t(o)];
        for (int64_t i = 0; i < C; ++i) s += X[size_t(r * C + i)] * W[size_t(o * C + i)];
        y[size_t(r * out + o)] = s;
      }
    return y;
  };
  auto q = lin(*a.q_proj, NH * HS), k = lin(*a.k_proj, NKV * HS), v = lin(*a.v_proj, NKV * HS);
  if (c.qk_norm) {
    auto rms_heads = [&](std::vector<double>& t, const nn::RMSNorm& norm) {  // t: (B*T*heads, HS)
      const std::vector<double> w = norm.weight.to_vector<double>();
      for (size_t r = 0; r < t.size() / size_t(HS); ++r) {
        double ms = 0;
        for (int64_t i = 0; i < HS; ++i) ms += t[r * HS + i] * t[r * HS + i] / double(HS);
        const double rstd = 1.0 / std::sqrt(ms + c.norm_eps);
        for (int64_t i = 0; i < HS; ++i) t[r * HS + i] = t[r * HS + i] * rstd * w[size_t(i)];
      }
    };
    rms_heads(q, *a.q_norm);
    rms_heads(k, *a.k_norm);
  }
  if (c.rope) {
    auto tab = rope_tables(T, HS, c.rope_theta, DType::f64);
    q = apply_rope_reference(from_vector(q, Shape{B, T, NH, HS}, DType::f64), tab.cos, tab.sin)
            .to_vector<double>();
    k = apply_rope_reference(from_vector(k, Shape{B, T, NKV, HS}, DType::f64), tab.cos, tab.sin)
            .to_vector<double>();
  }
  std::vector<double> merged(size_t(B * T * C), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t kvh = h / rep;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(T));
        double m = -INFINITY;
        for (int64_t u = 0; u < T; ++u) {
          if (c.causal && u > t) continue;
          double d = 0;
          for (int64_t i = 0; i < HS; ++i)
            d += q[size_t(((b * T + t) * NH + h) * HS + i)] * k[size_t(((b * T + u) * NKV + kvh) * HS + i)];
          s[size_t(u)] = d / std::sqrt(double(HS));
          m = std::max(m, s[size_t(u)]);
        }
        double z = 0;
        for (int64_t u = 0; u < T; ++u) z += (c.causal && u > t) ? 0 : std::exp(s[size_t(u)] - m);
        for (int64_t u = 0; u < T; ++u) {
          if (c.causal && u > t) continue;
          const double p = std::exp(s[size_t(u)] - m) / z;
          for (int64_t i = 0; i < HS; ++i)
            merged[size_t((b * T + t) * C + h * HS + i)] += p * v[size_t(((b * T + u) * NKV + kvh) * HS + i)];
        }
      }
    }
  X = merged;  // the output projection reads the merged heads
  return lin(*a.o_proj, C);
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = ng::test::worse(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST(Attention, MatchesPlainLoopReference) {
  // (NKV, causal, rope, bias, qk_norm); NH = 4, so NKV 2 and 1 are GQA and MQA.
  for (auto [NKV, causal, rope, bias, qk_norm] : {std::tuple{4, true, false, false, false},
                                                  {2, true, true, false, false},
                                                  {1, false, true, true, false},
                                                  {4, false, false, true, false},
                                                  {4, true, false, false, true},
                                                  {2, true, true, false, true},
                                                  {1, false, true, true, true},
                                                  {4, false, false, true, true},
                                                  {2, false, false, false, true}}) {
    Generator g(10);
    nn::CausalSelfAttention a(config(16, 4, NKV, causal, rope, qk_norm, bias), g);
    nn::cast_(a, DType::f64);
    if (qk_norm) {  // learned weights, not the ones they start at: the reference must apply them
      NoGradGuard no_grad;
      a.q_norm->weight.copy_(randn({4}, g, DType::f64, 1.0, 0.5));
      a.k_norm->weight.copy_(randn({4}, g, DType::f64, 1.0, 0.5));
    }
    Tensor x = randn({2, 5, 16}, g, DType::f64);
    Tensor y = a(x);
    ASSERT_EQ(y.shape(), (Shape{2, 5, 16}));
    const std::string what = "NKV " + std::to_string(NKV) + " causal " + std::to_string(causal) + " rope " +
                             std::to_string(rope) + " bias " + std::to_string(bias) + " qk_norm " +
                             std::to_string(qk_norm);
    EXPECT_LT(max_diff(y.to_vector<double>(), reference(a, x)), 1e-12) << what;
    if (qk_norm) {  // and the norm is really in the path: without it the output differs
      nn::AttentionConfig plain = a.config;
      plain.qk_norm = false;
      Generator g2(10);
      nn::CausalSelfAttention b(plain, g2);
      nn::cast_(b, DType::f64);
      EXPECT_GT(max_diff(b(x).to_vector<double>(), y.to_vector<double>()), 1e-3) << what;
    }
  }
}

TEST(Attention, CausalIgnoresTheFutureUnmaskedDoesNot) {
  Generator g(1);
  nn::CausalSelfAttention causal(config(8, 2, 0, true, true, false, false), g);
  nn::CausalSelfAttention lesson(nn::AttentionConfig::lesson_original(8, 2), g);
  EXPECT_FALSE(lesson.config.causal);
  EXPECT_FALSE(lesson.config.rope);
  EXPECT_TRUE(lesson.q_proj->bias.defined());
  Tensor x = randn({1, 6, 8}, g);
  Tensor x2 = x.clone();
  {
    NoGradGuard ng_;
    x2.narrow(1, 5, 1).fill_(3.0);  // change only the last position
  }
  auto first5 = [](const Tensor& y) { return y.narrow(1, 0, 5).contiguous().to_vector<double>(); };
  EXPECT_EQ(first5(causal(x)), first5(causal(x2)));                  // positions 0..4 cannot see position 5
  EXPECT_GT(max_diff(first5(lesson(x)), first5(lesson(x2))), 1e-3);  // the unmasked one reads it
}

TEST(Attention, GradcheckF64EveryOption) {
  ng::set_num_threads(1);  // tiny f64 problems: threads add only overhead here
  struct Case {
    const char* name;
    nn::AttentionConfig cfg;
  };
  std::vector<Case> cases = {
      {"causal, RoPE", config(8, 2, 0, true, true, false, false)},
      {"unmasked, biases, no position (lesson)", nn::AttentionConfig::lesson_original(8, 2)},
      {"GQA 4:2, RoPE, QK-norm", config(8, 4, 2, true, true, true, false)},
      {"MQA 4:1, QK-norm, biases, unmasked", config(8, 4, 1, false, false, true, true)},
  };
  for (auto& c : cases) {
    Generator g(3);
    nn::CausalSelfAttention a(c.cfg, g);
    nn::cast_(a, DType::f64);
    Tensor x = randn({2, 3, 8}, g, DType::f64).requires_grad_();
    std::vector<Tensor> inputs = {x};
    for (auto& [n, p] : a.named_parameters()) inputs.push_back(p);
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return a(in[0]); }, inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message();
    EXPECT_GT(r.checked, 200) << c.name;
  }
  ng::set_num_threads(0);
}

TEST(Attention, NamesAndErrors) {
  nn::CausalSelfAttention a(config(8, 4, 2, true, true, true, false));
  std::vector<std::string> names;
  for (auto& [n, p] : a.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                             "o_proj.weight", "q_norm.weight", "k_norm.weight"}));
  EXPECT_EQ(a.k_proj->weight.shape(), (Shape{4, 8}));  // 2 kv heads of size 2
  try {
    nn::CausalSelfAttention bad(config(8, 4, 3, true, false, false, false));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_heads 4 must be a multiple of n_kv_heads 3"), std::string::npos)
        << e.what();
  }
  expect_error([] { nn::CausalSelfAttention(config(10, 4, 0, true, false, false, false)); },
               {"CausalSelfAttention: dim 10 must be a positive multiple of n_heads 4"});
  expect_error([] { nn::CausalSelfAttention(config(12, 4, 0, true, true, false, false)); },
               {"CausalSelfAttention: RoPE needs an even head size, got 3"});
  try {
    a(zeros({2, 3, 6}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected x of shape (B, T, 8), got (2, 3, 6)"), std::string::npos)
        << e.what();
  }
}

// Two threads running one model's forward at once (inference on a shared model): the RoPE tables, which a
// forward grows for a longer T, are built under a lock (nn/attention.h). Without it one thread sliced the
// tables while the other replaced them: "narrow: window [0, 33) is out of range for dim 0 of size 32".
// Each thread's outputs are also those of the model run alone.
TEST(Attention, ThreadsRunningOneModelsForwardAtOnce) {
  ng::testing::ThreadsGuard one(1);  // the threads are the test's
  nn::TinyLMConfig c = nn::TinyLMConfig::minimind(20, 16, 1, 2, 1);
  std::vector<std::vector<double>> alone;  // the logits at each T from one thread
  {
    nn::TinyLM m(c);
    NoGradGuard no_grad;
    for (int64_t T = 1; T <= 64; ++T)
      alone.push_back(m.forward(from_vector(std::vector<int64_t>(size_t(T), 3), {1, T})).to_vector<double>());
  }
  // 300 rounds give the two threads many chances to interleave. ThreadSanitizer needs no lucky timing: it
  // reports two unordered accesses of one round whenever they come, so 20 rounds do there (300 took 34 s
  // under it). AddressSanitizer looks for no race at all.
#if defined(NG_ASAN) || defined(NG_TSAN)
  const int rounds = 20;
#else
  const int rounds = 300;
#endif
  for (int round = 0; round < rounds; ++round) {
    nn::TinyLM m(c);  // fresh tables: both threads grow them
    bool same[2] = {true, true};
    std::string error[2];
    auto work = [&](int id) {
      NoGradGuard no_grad;
      try {
        for (int64_t T = 1; T <= 64; ++T)
          same[id] &=
              m.forward(from_vector(std::vector<int64_t>(size_t(T), 3), {1, T})).to_vector<double>() ==
              alone[size_t(T - 1)];
      } catch (const Error& e) {
        error[id] = e.what();
      }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    ASSERT_EQ(error[0] + error[1], "") << "round " << round;
    ASSERT_TRUE(same[0] && same[1]) << "round " << round;
  }
}
