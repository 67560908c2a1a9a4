// Module::load_state_dict with a missing, an unexpected or a misshaped entry: an ng::Error that lists every
// problem by name, and the module is left untouched (nothing is copied unless everything matches).
// Also: values a dtype cannot hold, bad module arguments, a TinyLM config with non-integer sizes.
// Checkpoint-level mismatches (optimizer state, RNG, config) are tested in tests/test_checkpoint.cpp
// (Checkpoint.MismatchesAreErrorsThatSayWhat).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "normgrad.h"

using namespace ng;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ng::Error";
  return "";
}
bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Linear(3, 2) then LayerNorm(2): state names fc.weight (2, 3), fc.bias (2), norm.weight (2), norm.bias (2).
std::shared_ptr<nn::Sequential> make_model() {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(3, 2));
  seq->push_back(std::make_shared<nn::LayerNorm>(2));
  return seq;
}
}  // namespace

TEST(ErrorsModules, LoadStateDictNamesMissingUnexpectedAndMisshapedEntries) {
  auto model = make_model();
  nn::NamedTensors good = model->state_dict();
  ASSERT_EQ(good.size(), 4u);
  const std::string w_name = good[0].first;  // the Linear's weight
  const std::vector<double> before = good[0].second.to_vector<double>();

  // Missing: drop the first entry.
  nn::NamedTensors missing(good.begin() + 1, good.end());
  std::string msg = error_of([&] { model->load_state_dict(missing); });
  EXPECT_TRUE(has(msg, "load_state_dict: the state does not match the module.")) << msg;
  EXPECT_TRUE(has(msg, "missing: " + w_name)) << msg;

  // Unexpected: an extra name.
  nn::NamedTensors extra = good;
  extra.emplace_back("not.a.parameter", zeros({2}));
  msg = error_of([&] { model->load_state_dict(extra); });
  EXPECT_TRUE(has(msg, "unexpected: not.a.parameter")) << msg;

  // Misshaped: the weight transposed.
  nn::NamedTensors wrong = good;
  wrong[0].second = zeros({3, 2});
  msg = error_of([&] { model->load_state_dict(wrong); });
  EXPECT_TRUE(has(msg, "wrong shape: " + w_name + ": expected (2, 3), got (3, 2)")) << msg;

  // All three at once are all reported, and strict = false still refuses a wrong shape.
  nn::NamedTensors all(good.begin() + 1, good.end());
  all.emplace_back("bogus", zeros({1}));
  all[0].second = zeros({5});
  msg = error_of([&] { model->load_state_dict(all); });
  EXPECT_TRUE(has(msg, "missing: " + w_name) && has(msg, "unexpected: bogus") && has(msg, "wrong shape: "))
      << msg;
  msg = error_of([&] { model->load_state_dict(all, /*strict=*/false); });
  EXPECT_TRUE(has(msg, "wrong shape: ")) << msg;
  EXPECT_FALSE(has(msg, "missing")) << msg;

  // None of the failed loads changed the module.
  EXPECT_EQ(model->state_dict()[0].second.to_vector<double>(), before);
}

TEST(ErrorsModules, LoadStateDictWithEverythingRightCopiesTheValues) {
  auto a = make_model(), b = make_model();
  nn::NamedTensors sa = a->state_dict();
  for (auto& [name, t] : sa) {
    NoGradGuard g;
    t.fill_(0.25);
  }
  b->load_state_dict(sa);
  for (auto& [name, t] : b->state_dict())
    EXPECT_EQ(t.to_vector<double>(), std::vector<double>(size_t(t.numel()), 0.25)) << name;
}

// A value the module's dtype cannot hold (NaN into an i64 buffer) is found before anything is copied: the
// conversion used to fail inside the copy loop, after the entries before it had been overwritten, with an
// error naming `to` instead of load_state_dict.
namespace {
struct Counter : nn::Module {
  Tensor w, count;
  Counter() {
    w = register_parameter("w", zeros({3}));
    count = register_buffer("count", zeros({1}, DType::i64));
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Counter"; }
};
}  // namespace

TEST(ErrorsModules, LoadStateDictRefusesValuesItsDtypesCannotHoldBeforeCopying) {
  Counter m;
  nn::NamedTensors state = {{"w", full({3}, 7.0)}, {"count", full({1}, NAN)}};
  const std::string msg = error_of([&] { m.load_state_dict(state); });
  EXPECT_TRUE(has(msg,
                  "load_state_dict: the state does not match the module. not convertible to the module's "
                  "dtype: count (to: cannot convert nan (f32) to i64"))
      << msg;
  EXPECT_EQ(m.w.to_vector<double>(), std::vector<double>(3, 0.0));  // w was set to 7 before the error
  // Values that convert are converted, as copy_ does.
  state[1].second = full({1}, 5.0);
  m.load_state_dict(state);
  EXPECT_EQ(m.w.to_vector<double>(), std::vector<double>(3, 7.0));
  EXPECT_EQ(m.count.to_vector<int64_t>(), std::vector<int64_t>{5});
}

// Bad arguments to modules give an ng::Error naming the module, not a std::out_of_range, a std::length_error
// or a segfault at the next parameters().
TEST(ErrorsModules, BadModuleArgumentsAreNamed) {
  auto seq = make_model();
  EXPECT_TRUE(has(error_of([&] { (void)(*seq)[5]; }), "Sequential: index 5 is out of range for 2 layers"));
  EXPECT_TRUE(
      has(error_of([&] { seq->push_back(nullptr); }), "Module: register_module: '2' is a null module"));
  EXPECT_EQ(seq->size(), 2u);
  EXPECT_TRUE(
      has(error_of([&] { rope_tables(-1, 4, 1e4, DType::f32); }),
          "rope: expected a table length T >= 0 whose T * HS / 2 entries fit in 64 bits, got T = -1"));
  nn::FFNConfig ffn;
  ffn.dim = 8;
  ffn.hidden = -5;
  Generator gen(1), drop(2);
  EXPECT_TRUE(has(error_of([&] { nn::FeedForward f(ffn, gen, drop); }),
                  "FeedForward: expected hidden >= 0 (0: sized from dim), got -5"));
  EXPECT_TRUE(has(error_of([&] { nn::Embedding e(4, 3, gen, DType::i64); }),
                  "Embedding: expected a floating dtype, got i64"));
}

// A linear map from 0 features gives zeros, at any rank: the 3-D case reshaped with -1, which is undefined
// for a row of 0 values, and failed.
TEST(ErrorsModules, LinearFromZeroFeatures) {
  Tensor w = zeros({3, 0}).requires_grad_(), b = full({3}, 0.5).requires_grad_();
  Tensor x = zeros({2, 5, 0}).requires_grad_();
  Tensor y = F::linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 3}));
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(30, 0.5));
  sum(y).backward();
  EXPECT_EQ(b.grad().to_vector<double>(), std::vector<double>(3, 10.0));
  EXPECT_EQ(x.grad().shape(), (Shape{2, 5, 0}));
}

// Integer fields of a TinyLM config (as read back from a checkpoint) take JSON integers in range only:
// nlohmann's get_to cast 64.9 to 64, 1e30 into an int64 (undefined) and -1 into a u64 seed.
TEST(ErrorsModules, TinyLMConfigIntegersAreIntegers) {
  const std::string good = nn::TinyLMConfig{}.to_json();
  ASSERT_NO_THROW(nn::TinyLMConfig::from_json(good));
  auto with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"dim", "64.9", "key 'dim' must be an integer, got 64.9"},
      {"vocab_size", "1e30", "key 'vocab_size' must be an integer, got 1e+30"},
      {"seed", "-1", "key 'seed' must be an integer >= 0, got -1"},
      {"n_layers", "9223372036854775808", "key 'n_layers' is out of range: 9223372036854775808"},
  };
  for (const auto& [key, value, expected] : cases) {
    const std::string text = with(key, value);  // (clang 14 cannot capture a structured binding)
    const std::string msg = error_of([&] { nn::TinyLMConfig::from_json(text); });
    EXPECT_TRUE(has(msg, "TinyLMConfig::from_json: " + expected)) << msg;
  }
  EXPECT_EQ(nn::TinyLMConfig::from_json(with("seed", "18446744073709551615")).seed, 18446744073709551615ull);
}

// Norm modules (stop 43's reading of nn/norms): an RMSNorm without a weight never compared x with dim; an
// InstanceNorm momentum written after construction (NaN, 2) went into the running statistics; an empty
// batch was called a lack of spatial elements; a BatchNorm batch that was refused still counted.
TEST(ErrorsModules, NormModulesCheckWhatTheirFieldsAndInputsPromise) {
  nn::RMSNorm plain(4, 1e-5, /*elementwise_affine=*/false);
  EXPECT_TRUE(has(error_of([&] {
                    plain.forward(zeros({2, 5}));
                  }),
                  "RMSNorm: expected x of shape (*, 4), got (2, 5)"));

  nn::InstanceNorm1d inst(3, 1e-5, 0.1, false, true);
  inst.train();
  for (double bad : {double(NAN), 2.0}) {
    inst.momentum = bad;
    EXPECT_TRUE(has(error_of([&] {
                      inst.forward(ones({2, 3, 5}));
                    }),
                    "InstanceNorm1d: expected momentum in [0, 1]"));
  }
  EXPECT_EQ(inst.running_mean.to_vector<double>(), std::vector<double>(3, 0.0));
  inst.momentum = 0.1;
  EXPECT_TRUE(
      has(error_of([&] {
            inst.forward(zeros({0, 3, 5}));
          }),
          "InstanceNorm1d: expected at least one sample to update the running statistics when training, "
          "got input of shape (0, 3, 5)"));

  nn::BatchNorm1d bn(3);
  bn.train();
  EXPECT_TRUE(has(error_of([&] {
                    bn.forward(ones({1, 3}));
                  }),
                  "expected more than 1 value per channel when training"));
  EXPECT_EQ(bn.num_batches_tracked.to_vector<int64_t>(), std::vector<int64_t>{0});
  Generator gen(1);
  bn.forward(randn({4, 3}, gen));
  EXPECT_EQ(bn.num_batches_tracked.to_vector<int64_t>(), std::vector<int64_t>{1});
}

// A name given twice was resolved by keeping the first of the two without a word, and an undefined tensor
// failed with "Tensor: use of an undefined tensor", naming neither load_state_dict nor the entry. Both are
// now listed with the other problems, and nothing is copied.
TEST(ErrorsModules, LoadStateDictRefusesANameGivenTwiceAndAnUndefinedTensor) {
  auto model = make_model();
  nn::NamedTensors good = model->state_dict();
  const std::string w_name = good[0].first, b_name = good[1].first;
  const std::vector<double> before = good[0].second.to_vector<double>();

  nn::NamedTensors twice = good;
  twice.emplace_back(w_name, zeros({2, 3}));
  std::string msg = error_of([&] { model->load_state_dict(twice); });
  EXPECT_TRUE(has(msg, "load_state_dict: the state does not match the module. given twice: " + w_name + ";"))
      << msg;
  msg = error_of([&] { model->load_state_dict(twice, /*strict=*/false); });
  EXPECT_TRUE(has(msg, "given twice: " + w_name + ";")) << msg;

  nn::NamedTensors undefined = good;
  undefined[1].second = Tensor();
  msg = error_of([&] { model->load_state_dict(undefined); });
  EXPECT_TRUE(
      has(msg, "load_state_dict: the state does not match the module. undefined tensor: " + b_name + ";"))
      << msg;

  EXPECT_EQ(model->state_dict()[0].second.to_vector<double>(), before);  // nothing was copied
}

// The norm's name is checked whatever the position: with "none" (no norm built) a misspelt one was accepted
// and kept in the config, and in each checkpoint of the model.
TEST(ErrorsModules, BlockChecksTheNormNameAlsoWithoutNorms) {
  nn::BlockConfig c;
  c.attn.dim = c.ffn.dim = 8;
  c.attn.n_heads = 2;
  c.norm = "rmsnrom";
  c.norm_position = "none";
  EXPECT_TRUE(has(error_of([&] { nn::Block b(c); }),
                  "Block: unknown norm 'rmsnrom', expected layernorm or "
                  "rmsnorm (checked also for norm_position none)"));
  c.norm_position = "pre";
  EXPECT_TRUE(has(error_of([&] { nn::Block b(c); }), "make_norm: unknown norm 'rmsnrom'"));
  nn::TinyLMConfig lm;
  lm.vocab_size = 5;
  lm.dim = 8;
  lm.n_heads = 2;
  lm.norm_position = "none";
  lm.norm = "LayerNorm";
  EXPECT_TRUE(has(error_of([&] { nn::TinyLM m(lm); }), "Block: unknown norm 'LayerNorm'"));
}
