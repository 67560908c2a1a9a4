// TinyLM: structure, config JSON, f64 gradcheck of the loss with respect to every parameter, learning a
// repeated text, and reproducible sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

namespace {

nn::TinyLMConfig tiny(int64_t V) {
  nn::TinyLMConfig c;
  c.vocab_size = V;
  c.dim = 8;
  c.n_layers = 1;
  c.n_heads = 2;
  c.ffn_hidden = 12;
  c.rope_theta = 100.0;
  c.seed = 1;
  return c;
}

}  // namespace

TEST(TinyLM, StructureNamesAndTying) {
  auto c = tiny(11);
  c.n_layers = 2;
  nn::TinyLM m(c);
  Tensor logits = m(from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_EQ(logits.shape(), (Shape{2, 3, 11}));
  auto names = m.named_parameters();
  EXPECT_EQ(names.front().first, "tok_emb.weight");
  EXPECT_EQ(names[1].first, "blocks.0.norm1.weight");
  EXPECT_EQ(names.back().first, "lm_head.weight");
  c.tie_weights = true;
  nn::TinyLM tied(c);
  EXPECT_EQ(tied.lm_head, nullptr);
  EXPECT_EQ(tied.num_parameters(), m.num_parameters() - 11 * 8);  // the (V, C) matrix is counted once
  const double bound = 1 / std::sqrt(8.0);                        // tied: Linear's init, as in MiniMind
  for (double v : tied.tok_emb->weight.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  // Same config, same seed: same model.
  nn::TinyLM again(tiny(11));
  nn::TinyLM first(tiny(11));
  EXPECT_EQ(again.tok_emb->weight.to_vector<double>(), first.tok_emb->weight.to_vector<double>());
  // Learned positions add a (max_seq_len, C) table.
  c.position = "learned";
  c.max_seq_len = 4;
  nn::TinyLM learned(c);
  ASSERT_NE(learned.pos_emb, nullptr);
  EXPECT_EQ(learned.pos_emb->weight.shape(), (Shape{4, 8}));
  expect_error(
      [&] {
        learned(zeros({1, 5}, DType::i64));
      },
      {"TinyLM: sequence length 5 exceeds max_seq_len 4 of the learned position table"});
  c.max_seq_len = 0;
  expect_error([&] { nn::TinyLM none(c); }, {"learned positions need max_seq_len > 0, got 0"});
  expect_error([&] { m(zeros({1, 5})); }, {"TinyLM: expected tokens (B, T) of dtype i64, got f32 (1, 5)"});
}

TEST(TinyLM, ConfigJsonRoundTripAndErrors) {
  auto c = nn::TinyLMConfig::minimind(100, 64, 4, 8, 2);
  EXPECT_EQ(nn::TinyLMConfig::from_json(c.to_json()), c);
  EXPECT_TRUE(c.tie_weights && c.qk_norm);
  EXPECT_EQ(c.ffn, "swiglu");
  try {
    nn::TinyLMConfig::from_json(R"({"vocab_size": 3})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing key 'dim'"), std::string::npos) << e.what();
  }
  std::string extra = c.to_json();
  extra.insert(1, R"("colour": "blue", )");
  try {
    nn::TinyLMConfig::from_json(extra);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected key 'colour'"), std::string::npos) << e.what();
  }
  expect_error([] { nn::TinyLMConfig::from_json("{not json"); },
               {"TinyLMConfig::from_json: invalid JSON", "parse error at line 1, column 3"});
  auto bad = tiny(0);
  expect_error([&] { nn::TinyLM{bad}; }, {"TinyLMConfig: vocab_size must be > 0, got 0"});
  // rope_theta: a negative one made every rotation NaN at the first forward, inf none at all
  for (double theta : {-1.0, 0.0, double(INFINITY), double(NAN)}) {
    auto bt = tiny(5);
    bt.position = "rope";
    bt.rope_theta = theta;
    expect_error([&] { nn::TinyLM{bt}; }, {"TinyLMConfig: rope_theta must be finite and > 0"});
  }
}

TEST(TinyLM, GradcheckLossWithRespectToEveryParameter) {
  ng::set_num_threads(1);  // tiny f64 problems: threads add only overhead here
  Generator g(9);
  Tensor tokens = randint(0, 5, {2, 4}, g), targets = randint(0, 5, {2, 4}, g);
  {
    NoGradGuard no_grad;
    targets.narrow(1, 3, 1).fill_(-100);  // ignore_index positions are skipped by the loss
  }
  struct Case {
    const char* name;
    nn::TinyLMConfig cfg;
  };
  auto pre = tiny(5);
  auto post_learned = tiny(5);
  post_learned.norm_position = "post";
  post_learned.position = "learned";
  post_learned.max_seq_len = 4;
  auto mm = nn::TinyLMConfig::minimind(5, 8, 1, 4, 2);
  mm.rope_theta = 100.0;
  for (auto& c : {Case{"pre-LN layernorm rope", pre}, Case{"post-LN learned positions", post_learned},
                  Case{"minimind (tied, GQA, QK-norm, SwiGLU)", mm}}) {
    nn::TinyLM m(c.cfg);
    nn::cast_(m, DType::f64);
    std::vector<Tensor> params = m.parameters();
    int64_t n = 0;
    for (auto& p : params) n += p.numel();
    auto r = gradcheck([&](const std::vector<Tensor>&) { return m.loss(tokens, targets); }, params);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message();
    EXPECT_EQ(r.checked, n) << c.name;
  }
  ng::set_num_threads(0);
}

TEST(TinyLM, LossIsCrossEntropyOfTheLogits) {
  nn::TinyLM m(tiny(7));
  Generator g(2);
  Tensor tokens = randint(0, 7, {2, 3}, g), targets = randint(0, 7, {2, 3}, g);
  auto logits = m(tokens).to_vector<double>();
  auto t = targets.to_vector<int64_t>();
  double want = 0;
  for (int r = 0; r < 6; ++r) {
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < 7; ++v) mx = std::max(mx, logits[size_t(r * 7 + v)]);
    for (int v = 0; v < 7; ++v) z += std::exp(logits[size_t(r * 7 + v)] - mx);
    want += (mx + std::log(z) - logits[size_t(r * 7 + t[size_t(r)])]) / 6;
  }
  EXPECT_NEAR(m.loss(tokens, targets).item(), want, 1e-5);
  expect_error(
      [&] {
        m.loss(tokens, zeros({2, 4}, DType::i64));
      },
      {"TinyLM::loss: targets have shape (2, 4), expected the tokens' shape (2, 3)"});
}

TEST(TinyLM, LearnsARepeatedTextAndSamplesIt) {
  // "hello world! " repeated: after 150 AdamW steps on random windows the loss is far below the uniform
  // ln(9) = 2.2, and greedy sampling continues the text.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "hello world! ";
  ng::set_num_threads(1);  // tiny model: threads add only overhead (results are thread-count independent)
  auto tok = nn::CharTokenizer::from_corpus(text);
  std::vector<int64_t> ids = tok.encode(text);
  nn::TinyLMConfig c;
  c.vocab_size = tok.vocab_size();
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.norm = "rmsnorm";
  c.seed = 3;
  nn::TinyLM m(c);
  optim::AdamW opt(m.named_parameters(), [] {
    optim::AdamWOptions o;
    o.lr = 1e-2;
    o.weight_decay = 0.0;
    return o;
  }());
  Generator data(4);
  const int64_t B = 8, T = 16;
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    std::vector<int64_t> x, y;
    std::vector<int64_t> starts = randint(0, int64_t(ids.size()) - T - 1, {B}, data).to_vector<int64_t>();
    for (int64_t s : starts)
      for (int64_t t = 0; t < T; ++t) x.push_back(ids[size_t(s + t)]), y.push_back(ids[size_t(s + t + 1)]);
    Tensor loss = m.loss(from_vector(x, Shape{B, T}), from_vector(y, Shape{B, T}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  std::printf("repeated text: loss %.4f at step 0, %.4f at step 149\n", first, last);
  EXPECT_GT(first, 2.0);
  EXPECT_LT(last, 0.1) << "first loss " << first;
  std::vector<int64_t> out = nn::generate(m, tok.encode("hel"), 15, 0.0);
  EXPECT_EQ(tok.decode(out), "hello world! hello");
  ng::set_num_threads(0);
}

TEST(Sampling, ReproducibleForASeed) {
  nn::TinyLM m(tiny(9));
  std::vector<int64_t> prompt = {1, 2, 3};
  auto a = nn::generate(m, prompt, 20, 1.0, 0, 42);
  auto b = nn::generate(m, prompt, 20, 1.0, 0, 42);
  auto c = nn::generate(m, prompt, 20, 1.0, 0, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 23u);
  EXPECT_EQ(std::vector<int64_t>(a.begin(), a.begin() + 3), prompt);
  EXPECT_TRUE(m.is_training());  // restored
  // top_k = 1 is greedy whatever the temperature and seed.
  EXPECT_EQ(nn::generate(m, prompt, 10, 5.0, 1, 7), nn::generate(m, prompt, 10, 0.0, 0, 8));
  // Learned positions: the context is cropped to max_seq_len, so generation can run past it.
  auto lc = tiny(9);
  lc.position = "learned";
  lc.max_seq_len = 4;
  nn::TinyLM learned(lc);
  EXPECT_EQ(nn::generate(learned, prompt, 10, 1.0, 3, 1).size(), 13u);
  // RoPE and no positions too: each token comes from the last max_seq_len tokens (the training length; a
  // RoPE model reading its whole growing output sees lengths it never trained on). Greedy steps by hand
  // on the cropped context give the same tokens.
  for (const char* position : {"rope", "none"}) {
    auto rc = tiny(9);
    rc.position = position;
    rc.max_seq_len = 4;
    nn::TinyLM model(rc);
    model.eval();
    {
      // Larger weights make sharp attention, so that what lies outside the last 4 tokens changes the argmax
      // (at the init scale an untrained model's greedy tokens barely depend on the context).
      NoGradGuard no_grad;
      for (Tensor& p : model.parameters()) mul_(p, 6.0);
    }
    std::vector<int64_t> expected = prompt;
    Generator unused(0);  // greedy draws nothing
    for (int n = 0; n < 12; ++n) {
      std::vector<int64_t> ctx(expected.end() - std::min<std::ptrdiff_t>(4, std::ptrdiff_t(expected.size())),
                               expected.end());
      NoGradGuard no_grad;
      Tensor logits = model.forward(from_vector(ctx, Shape{1, int64_t(ctx.size())}));
      expected.push_back(nn::sample_from_logits(logits.select(1, int64_t(ctx.size()) - 1).to_vector<double>(),
                                                0.0, 0, unused));
    }
    EXPECT_EQ(nn::generate(model, prompt, 12, 0.0), expected) << position;
  }
  auto zero = tiny(9);
  zero.max_seq_len = 0;  // allowed for RoPE (no table), but it leaves generate no context
  nn::TinyLM no_context(zero);
  expect_error([&] { nn::generate(no_context, prompt, 3); },
               {"generate: expected a model config with max_seq_len > 0 (the context length), got 0"});
  expect_error([&] { nn::generate(m, {}, 3); },
               {"generate: the prompt is empty, expected at least one token"});
  expect_error([&] { nn::generate(m, {9}, 3); },
               {"generate: prompt token 9 at position 0 is out of range [0, 9)"});
}

// generate() runs the model in eval mode and gives back the mode it found, also when it throws: a bad
// temperature is found by the first draw, after the switch, and it left a training model in eval mode
// (no dropout for the rest of a training loop that caught the error).
TEST(Sampling, ModeComesBackWhenGenerateThrows) {
  nn::TinyLM m(tiny(9));
  for (bool training : {true, false}) {
    m.train(training);
    // (the temperature is checked by the first sampling, after the switch to eval mode: so the mode must
    // come back from an error raised inside the loop)
    expect_error(
        [&] {
          nn::generate(m, {1, 2}, 3, -1.0);
        },
        {"generate: expected a finite temperature >= 0, got -1"});
    EXPECT_EQ(m.is_training(), training);
    nn::generate(m, {1, 2}, 3, 1.0);
    EXPECT_EQ(m.is_training(), training);
  }
}

TEST(Sampling, FromLogitsFollowsTheDistribution) {
  // p = softmax([0, ln 3]) = (1/4, 3/4): 4000 draws land within 4 sigma of 3000 on token 1.
  Generator g(1);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += nn::sample_from_logits({0.0, std::log(3.0)}, 1.0, 0, g) == 1;
  EXPECT_NEAR(ones, 3000, 4 * std::sqrt(4000 * 0.75 * 0.25));
  // top_k = 2 never picks the third-best; temperature 0 is the argmax (ties: lowest id).
  for (int i = 0; i < 200; ++i) EXPECT_NE(nn::sample_from_logits({1.0, 0.0, 1.0}, 10.0, 2, g), 1);
  EXPECT_EQ(nn::sample_from_logits({1.0, 3.0, 3.0}, 0.0, 0, g), 1);
  // -inf rules a token out; the others are drawn as before.
  for (int i = 0; i < 200; ++i)
    EXPECT_NE(nn::sample_from_logits({-INFINITY, 0.0, 1.0, -INFINITY}, 1.0, 0, g) % 3, 0);
  // What cannot be sampled is an error, not the last candidate (which inf - inf = NaN used to give).
  expect_error(
      [&] {
        nn::sample_from_logits({0.0, NAN}, 1.0, 0, g);
      },
      {"generate: the model produced a NaN logit (token 1)"});
  expect_error(
      [&] {
        nn::sample_from_logits({0.0, INFINITY, 1.0}, 1.0, 0, g);
      },
      {"generate: the model produced a +inf logit (token 1)"});
  expect_error(
      [&] {
        nn::sample_from_logits({-INFINITY, -INFINITY}, 1.0, 0, g);
      },
      {"generate: every logit is -inf: no token can be drawn"});
  expect_error(
      [&] {
        nn::sample_from_logits({0.0, -INFINITY}, INFINITY, 0, g);
      },
      {"generate: expected a finite temperature >= 0, got inf"});
}

TEST(TinyLM, LessonOriginalUnmaskedAttentionSeesTheTarget) {
  // Random tokens (V = 16): the next token is unpredictable, so an honest (causal) model cannot beat
  // ln 16 = 2.77. The lesson's configuration (unmasked attention, biases, no positions) sees the window,
  // targets included: it gets well below that. Add positions (RoPE) and it can copy the target outright.
  // docs/attention.md explains; the numbers printed here are quoted there.
  ng::set_num_threads(1);  // tiny model: threads add only overhead (results are thread-count independent)
  auto train = [](bool causal, const std::string& position) {
    nn::TinyLMConfig c;
    c.vocab_size = 16;
    c.dim = 32;
    c.n_layers = 1;
    c.n_heads = 4;
    c.norm_position = "post";
    c.attn_bias = true;
    c.causal = causal;
    c.position = position;
    c.seed = 1;
    nn::TinyLM m(c);
    optim::Adam opt(m.named_parameters(), {.lr = 1e-2});
    Generator data(2);
    const int64_t B = 16, T = 8;
    double avg = 0;
    for (int step = 0; step < 200; ++step) {
      Tensor seq = randint(0, 16, {B, T + 1}, data);
      Tensor loss = m.loss(seq.narrow(1, 0, T).contiguous(), seq.narrow(1, 1, T).contiguous());
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (step >= 180) avg += loss.item() / 20;  // mean of the last 20 steps
    }
    return avg;
  };
  const double causal = train(true, "none"), lesson = train(false, "none"),
               lesson_rope = train(false, "rope");
  std::printf(
      "random tokens, V=16 (ln 16 = %.3f): causal %.3f, unmasked no-position %.3f, unmasked + RoPE %.3f\n",
      std::log(16.0), causal, lesson, lesson_rope);
  EXPECT_GT(causal, std::log(16.0) - 0.1);  // honest: nothing to learn
  EXPECT_LT(lesson, std::log(16.0) - 0.5);  // leaks: it sees which tokens are in the window
  EXPECT_LT(lesson_rope, lesson);           // with positions it can find the exact target
  ng::set_num_threads(0);
}

// docs/attention.md writes the lesson's configuration as a designated initializer; it must compile (its
// fields were out of declaration order until stop 44) and mean what the doc says.
TEST(TinyLM, LessonOriginalConfigAsTheDocsWriteIt) {
  const nn::TinyLMConfig c{.attn_bias = true, .causal = false, .position = "none"};
  EXPECT_TRUE(c.attn_bias);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.position, "none");
}

// final_norm, unset: a norm after the last block exactly for Pre-LN. A "none" model used to get one by
// default (final_norm was a bool defaulting to true), so a model meant to have no norm at all had one;
// Post-LN and DeepNorm blocks, which already end in a norm, got a second. true / false still ask for one or
// none.
TEST(TinyLM, FinalNormByDefaultOnlyForPreLN) {
  auto has_norm = [](const nn::TinyLMConfig& c) {
    nn::TinyLM m(c);
    bool found = false;
    for (const auto& [name, p] : m.named_parameters()) found = found || name.rfind("norm.", 0) == 0;
    EXPECT_EQ(found, m.norm != nullptr);
    return found;
  };
  for (const char* position : {"pre", "post", "deepnorm", "none"}) {
    auto c = tiny(5);
    c.norm_position = position;
    EXPECT_FALSE(c.final_norm.has_value());
    EXPECT_EQ(has_norm(c), std::string(position) == "pre") << position;
    EXPECT_EQ(c.has_final_norm(), std::string(position) == "pre") << position;
    c.final_norm = true;
    EXPECT_TRUE(has_norm(c)) << position;
    c.final_norm = false;
    EXPECT_FALSE(has_norm(c)) << position;
  }
  EXPECT_TRUE(nn::TinyLMConfig::minimind(10, 8, 1, 2, 1).has_final_norm());
}

// In JSON (a checkpoint's config) an unset final_norm is null, and true / false are themselves; a config
// written before it could be unset (true or false) reads back as that. Anything else is refused by name.
TEST(TinyLM, FinalNormJson) {
  auto c = tiny(5);
  c.norm_position = "none";
  const nlohmann::json unset = nlohmann::json::parse(c.to_json());
  EXPECT_TRUE(unset.at("final_norm").is_null()) << c.to_json();
  EXPECT_EQ(nn::TinyLMConfig::from_json(c.to_json()), c);
  for (bool v : {true, false}) {
    c.final_norm = v;
    EXPECT_EQ(nlohmann::json::parse(c.to_json()).at("final_norm"), v);
    const auto back = nn::TinyLMConfig::from_json(c.to_json());
    EXPECT_EQ(back, c);
    EXPECT_EQ(back.has_final_norm(), v);
  }
  nlohmann::json bad = unset;
  bad["final_norm"] = "yes";
  expect_error([&] { nn::TinyLMConfig::from_json(bad.dump()); },
               {"TinyLMConfig::from_json: key 'final_norm' must be true, false or null, got \"yes\""});
}

// A config's JSON cannot hold inf or NaN (to_json writes null, from_json refuses it): a float field the model
// does not use (rope_theta without RoPE, norm_eps without norms) was not checked, and the checkpoint of such
// a model could not be read back ("key 'rope_theta' has the wrong type: ... type must be number, but is
// null"). The config is refused when the model is built.
TEST(TinyLM, ConfigFloatsAreFiniteSoTheJsonReadsBack) {
  auto c = tiny(5);
  c.position = "none";
  c.norm_position = "none";
  EXPECT_EQ(nn::TinyLMConfig::from_json(c.to_json()), c);
  for (double bad : {double(NAN), double(INFINITY)}) {
    auto theta = c;
    theta.rope_theta = bad;
    expect_error([&] { nn::TinyLM{theta}; }, {"TinyLMConfig: rope_theta must be finite (the config's JSON "
                                              "cannot hold inf or NaN), got "});
    auto eps = c;
    eps.norm_eps = bad;
    expect_error([&] { nn::TinyLM{eps}; }, {"TinyLMConfig: norm_eps must be finite (the config's JSON cannot "
                                            "hold inf or NaN), got "});
  }
}
