// Module::load_state_dict with a missing, an unexpected or a misshaped entry: an ng::Error that lists every
// problem by name, and the module is left untouched (nothing is copied unless everything matches).
// Checkpoint-level mismatches (optimizer state, RNG, config) are tested in tests/test_checkpoint.cpp
// (Checkpoint.MismatchesAreErrorsThatSayWhat).
#include <gtest/gtest.h>

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
