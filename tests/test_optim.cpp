// SGD / Adam / AdamW against values computed by hand for three steps; state_dict; clipping; schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

namespace {
// One parameter, f64, with values v.
Tensor param(std::vector<double> v) {
  return from_vector(v, Shape{int64_t(v.size())}, DType::f64).requires_grad_();
}
void set_grad(Tensor& p, std::vector<double> g) {
  p.set_grad(from_vector(g, p.shape(), DType::f64));
}
void expect_values(const Tensor& p, std::vector<double> want, double tol) {
  auto got = p.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}
}  // namespace

TEST(OptimSGD, MomentumThreeStepsByHand) {
  // p = 1, g = 1 every step, lr 0.1, momentum 0.9:
  //   t=1: buf = 1            p = 1    - 0.1*1    = 0.9
  //   t=2: buf = 0.9 + 1 = 1.9   p = 0.9  - 0.19     = 0.71
  //   t=3: buf = 1.71 + 1 = 2.71 p = 0.71 - 0.271    = 0.439
  Tensor p = param({1.0});
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.9});
  std::vector<double> want = {0.9, 0.71, 0.439};
  for (int t = 0; t < 3; ++t) {
    set_grad(p, {1.0});
    opt.step();
    expect_values(p, {want[t]}, 1e-14);
  }
  EXPECT_EQ(opt.state()[0].step, 3);
  expect_values(opt.state()[0].buffers.at("momentum_buffer"), {2.71}, 1e-14);
}

TEST(OptimSGD, NesterovDampeningWeightDecayThreeStepsByHand) {
  // p = 2, g = 0.5, lr 0.1, momentum 0.5, weight decay 0.1, nesterov:
  //   t=1: g' = 0.5 + 0.2 = 0.7;  buf = 0.7;  d = 0.7 + 0.35 = 1.05;        p = 2 - 0.105 = 1.895
  //   t=2: g' = 0.5 + 0.1895 = 0.6895;  buf = 0.35 + 0.6895 = 1.0395;
  //        d = 0.6895 + 0.51975 = 1.20925;                                    p = 1.895 - 0.120925 = 1.774075
  //   t=3: g' = 0.5 + 0.1774075 = 0.6774075;  buf = 0.51975 + 0.6774075 = 1.1971575;
  //        d = 0.6774075 + 0.59857875 = 1.27598625;                           p = 1.774075 - 0.127598625
  Tensor p = param({2.0});
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1, .nesterov = true});
  std::vector<double> want = {1.895, 1.774075, 1.774075 - 0.127598625};
  for (int t = 0; t < 3; ++t) {
    set_grad(p, {0.5});
    opt.step();
    expect_values(p, {want[t]}, 1e-13);
  }
  // Dampening 0.5 without nesterov: buf = g at t=1, then 0.9 buf + 0.5 g.
  Tensor q = param({0.0});
  optim::SGD d(std::vector<Tensor>{q}, {.lr = 1.0, .momentum = 0.9, .dampening = 0.5});
  std::vector<double> wantq = {-1.0, -1.0 - 1.4, -2.4 - 1.76};  // bufs 1, 1.4, 1.76
  for (int t = 0; t < 3; ++t) {
    set_grad(q, {1.0});
    d.step();
    expect_values(q, {wantq[t]}, 1e-13);
  }
}

// Momentum written into options after a plain step: the buffer does not exist yet, so it starts as the
// gradient, undampened (PyTorch's rule, by the buffer's existence and not the step count). The old rule
// (step count) took the second step for a later one: buffer 0.9 * 0 + 0.5 * 1 = 0.5, p = 0.85.
// PyTorch 2 (torch.optim.SGD, f64, param_groups[0] written between steps): p 0.9, 0.8, 0.66; buffer 1, 1.4.
TEST(OptimSGD, MomentumSwitchedOnLaterStartsTheBufferAsTheGradient) {
  Tensor p = param({1.0});
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  set_grad(p, {1.0});
  opt.step();  // p = 1 - 0.1 * 1 = 0.9; momentum 0: no buffer
  expect_values(p, {0.9}, 1e-15);
  EXPECT_TRUE(opt.state()[0].buffers.empty());

  opt.options.momentum = 0.9;
  opt.options.dampening = 0.5;
  set_grad(p, {1.0});
  opt.step();  // buf = g = 1 (no dampening on the buffer's first step); p = 0.9 - 0.1 * 1 = 0.8
  expect_values(p, {0.8}, 1e-15);
  expect_values(opt.state()[0].buffers.at("momentum_buffer"), {1.0}, 0);

  set_grad(p, {1.0});
  opt.step();  // buf = 0.9 * 1 + 0.5 * 1 = 1.4; p = 0.8 - 0.14 = 0.66
  expect_values(p, {0.66}, 1e-15);
  expect_values(opt.state()[0].buffers.at("momentum_buffer"), {1.4}, 1e-15);
  EXPECT_EQ(opt.state()[0].step, 3);
}

TEST(OptimAdam, ThreeStepsByHandConstantGradient) {
  // With a constant gradient g the bias-corrected moments are exactly m_hat = g and v_hat = g^2, so each step
  // moves p by lr * g / (|g| + eps): p = 1 - 0.1 * t * 2 / (2 + 1e-8).
  Tensor p = param({1.0});
  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.1});
  for (int t = 1; t <= 3; ++t) {
    set_grad(p, {2.0});
    opt.step();
    expect_values(p, {1.0 - 0.1 * t * 2.0 / (2.0 + 1e-8)}, 1e-12);
  }
  // m after 3 steps: (1 - 0.9^3) * 2 = 0.542; v: (1 - 0.999^3) * 4 = 0.011988004
  expect_values(opt.state()[0].buffers.at("exp_avg"), {0.542}, 1e-14);
  expect_values(opt.state()[0].buffers.at("exp_avg_sq"), {0.011988004}, 1e-14);
}

TEST(OptimAdam, ThreeStepsByHandVaryingGradientWithL2) {
  // Two elements, gradients change every step, coupled weight decay 0.1. Reference written out in scalars.
  Tensor p = param({0.5, -1.0});
  optim::Adam opt(std::vector<Tensor>{p},
                  {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1});
  const double grads[3][2] = {{1.0, -0.5}, {-2.0, 0.25}, {0.5, 3.0}};
  double ref[2] = {0.5, -1.0}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    set_grad(p, {grads[t - 1][0], grads[t - 1][1]});
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = grads[t - 1][i] + 0.1 * ref[i];
      m[i] = 0.8 * m[i] + 0.2 * g;
      v[i] = 0.9 * v[i] + 0.1 * g * g;
      double mhat = m[i] / (1 - std::pow(0.8, t)), vhat = v[i] / (1 - std::pow(0.9, t));
      ref[i] -= 0.01 * mhat / (std::sqrt(vhat) + 1e-6);
    }
    expect_values(p, {ref[0], ref[1]}, 1e-12);
  }
}

TEST(OptimAdamW, ThreeStepsByHand) {
  // p = 1, g = 2, lr 0.1, wd 0.1: p *= 0.99 then p -= 0.1 * 2 / (2 + 1e-8)  (about 0.1):
  //   0.99 - 0.1 = 0.89;  0.8811 - 0.1 = 0.7811;  0.773289 - 0.1 = 0.673289
  Tensor p = param({1.0});
  optim::AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.1;
  optim::AdamW opt(std::vector<Tensor>{p}, o);
  EXPECT_EQ(opt.type_name(), "AdamW");
  const double step = 0.1 * 2.0 / (2.0 + 1e-8);
  std::vector<double> want = {0.99 - step, (0.99 - step) * 0.99 - step,
                              ((0.99 - step) * 0.99 - step) * 0.99 - step};
  EXPECT_NEAR(want[2], 0.673289, 1e-8);
  for (int t = 0; t < 3; ++t) {
    set_grad(p, {2.0});
    opt.step();
    expect_values(p, {want[t]}, 1e-13);
  }
  EXPECT_EQ(optim::AdamWOptions().weight_decay, 1e-2);  // PyTorch defaults
  EXPECT_EQ(optim::AdamOptions().weight_decay, 0.0);
  EXPECT_EQ(optim::AdamOptions().eps, 1e-8);
}

TEST(OptimAdam, F32MatchesF64AndSkipsParamsWithoutGrad) {
  Generator g(4);
  Tensor a64 = randn({100}, g, DType::f64);
  Tensor a32 = a64.to(DType::f32).detach().requires_grad_();
  a64.requires_grad_();
  Tensor idle = zeros({3}).requires_grad_();
  optim::Adam o64(std::vector<Tensor>{a64}, {.lr = 0.01}), o32(std::vector<Tensor>{a32, idle}, {.lr = 0.01});
  for (int t = 0; t < 3; ++t) {
    Tensor grad = randn({100}, g, DType::f64);
    a64.set_grad(grad);
    a32.set_grad(grad.to(DType::f32));
    o64.step();
    o32.step();
  }
  auto x = a64.to_vector<double>(), y = a32.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5);
  EXPECT_EQ(o32.state()[1].step, 0);  // never had a grad
  EXPECT_TRUE(o32.state()[1].buffers.empty());
}

TEST(OptimState, StateDictRoundTripAndErrors) {
  Tensor p = param({1.0, 2.0}), q = param({3.0});
  nn::NamedTensors named = {{"w", p}, {"b", q}};
  optim::Adam opt(named, {.lr = 0.1});
  set_grad(p, {1.0, -1.0});
  set_grad(q, {0.5});
  opt.step();
  nn::NamedTensors sd = opt.state_dict();
  std::vector<std::string> names;
  for (auto& [n, _] : sd) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"lr", "w.step", "w.exp_avg", "w.exp_avg_sq", "b.step",
                                             "b.exp_avg", "b.exp_avg_sq"}));

  Tensor p2 = param({1.0, 2.0}), q2 = param({3.0});
  optim::Adam opt2(nn::NamedTensors{{"w", p2}, {"b", q2}}, {.lr = 0.5});
  opt2.load_state_dict(sd);
  EXPECT_EQ(opt2.lr, 0.1);
  EXPECT_EQ(opt2.state()[0].step, 1);
  EXPECT_EQ(opt2.state()[0].buffers.at("exp_avg").to_vector<double>(),
            opt.state()[0].buffers.at("exp_avg").to_vector<double>());
  EXPECT_FALSE(opt2.state()[0].buffers.at("exp_avg").same(opt.state()[0].buffers.at("exp_avg")));  // copied

  nn::NamedTensors bad = sd;
  bad.erase(bad.begin() + 2);                                                 // drop w.exp_avg
  bad.emplace_back("c.step", from_vector(std::vector<int64_t>{1}, Shape{}));  // unknown parameter
  bad[4].second = zeros({4}, DType::f64);                                     // b.exp_avg has the wrong shape
  try {
    opt2.load_state_dict(bad);
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Adam.load_state_dict"), std::string::npos) << m;
    EXPECT_NE(m.find("missing: w.exp_avg"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected: c.step"), std::string::npos) << m;
    EXPECT_NE(m.find("wrong shape, dtype or value: b.exp_avg: expected f64 (1), got f64 (4)"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(opt2.state()[0].step, 1);  // a failed load changes nothing

  // Values that would break the next step, and a buffer of another dtype (converting it would break exact
  // resume): each refused by name, and nothing changes.
  auto with = [&](const std::string& key, Tensor t) {
    nn::NamedTensors v = sd;
    for (auto& [k, x] : v)
      if (k == key) x = t;
    return v;
  };
  const std::vector<std::pair<nn::NamedTensors, std::string>> cases = {
      {with("w.step", from_vector(std::vector<int64_t>{-1}, Shape{})),
       "w.step: expected a count >= 0, got -1"},
      {with("lr", scalar_tensor(NAN, DType::f64)), "lr: expected a finite value >= 0, got nan"},
      {with("lr", scalar_tensor(-0.5, DType::f64)), "lr: expected a finite value >= 0, got -0.5"},
      {with("w.exp_avg", zeros({2}, DType::f32)), "w.exp_avg: expected f64 (2), got f32 (2)"},
  };
  for (const auto& [state, expected] : cases) {
    try {
      opt2.load_state_dict(state);
      ADD_FAILURE() << "expected ng::Error: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(opt2.state()[0].step, 1);
    EXPECT_EQ(opt2.lr, 0.1);
  }
}

// A step count of INT64_MAX loaded, and the next step() overflowed it (signed overflow: undefined; in
// practice a negative count, a negative bias correction and NaN parameters). And a name given twice: the map
// kept the first of the two without a word. Both refused by name, and nothing changes.
TEST(OptimState, LoadStateDictRefusesAnOverflowingStepAndDuplicatedNames) {
  Tensor p = param({1.0, 2.0});
  optim::Adam opt(nn::NamedTensors{{"w", p}}, {.lr = 0.1});
  set_grad(p, {1.0, 1.0});
  opt.step();
  const nn::NamedTensors sd = opt.state_dict();
  const std::vector<double> exp_avg = opt.state()[0].buffers.at("exp_avg").to_vector<double>();

  nn::NamedTensors huge = sd;
  for (auto& [k, t] : huge)
    if (k == "w.step") t = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, Shape{});
  expect_error(
      [&] { opt.load_state_dict(huge); },
      {"Adam.load_state_dict: the state does not match the optimizer.",
       "w.step: expected a count < 9223372036854775807 (the next step adds 1 and would overflow int64), "
       "got 9223372036854775807"});
  // One below loads, and the next step counts on from it.
  for (auto& [k, t] : huge)
    if (k == "w.step")
      t = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max() - 1}, Shape{});
  optim::Adam other(nn::NamedTensors{{"w", param({1.0, 2.0})}}, {.lr = 0.1});
  other.load_state_dict(huge);
  EXPECT_EQ(other.state()[0].step, std::numeric_limits<int64_t>::max() - 1);

  nn::NamedTensors twice = sd;
  twice.emplace_back("w.exp_avg", full({2}, 7.0, DType::f64));  // a second w.exp_avg, after the first
  twice.emplace_back("lr", scalar_tensor(0.5, DType::f64));
  expect_error([&] { opt.load_state_dict(twice); },
               {"Adam.load_state_dict: the state does not match the optimizer. duplicated: w.exp_avg, lr;"});

  EXPECT_EQ(opt.state()[0].step, 1);
  EXPECT_EQ(opt.lr, 0.1);
  EXPECT_EQ(opt.state()[0].buffers.at("exp_avg").to_vector<double>(), exp_avg);
}

TEST(OptimErrors, BadOptionsAndParams) {
  Tensor p = param({1.0});
  expect_error([&] { optim::SGD(std::vector<Tensor>{p}, {.lr = 0.1, .nesterov = true}); },
               {"SGD: nesterov needs momentum > 0 and dampening = 0, got momentum 0 and dampening 0"});
  expect_error([&] { optim::Adam(std::vector<Tensor>{p}, {.beta1 = 1.0}); },
               {"Adam: expected 0 <= beta1 < 1, got 1"});
  try {
    optim::Adam(std::vector<Tensor>{p, p});
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("same tensor as an earlier one"), std::string::npos) << e.what();
  }
  // An empty list: step() would do nothing, silently (PyTorch refuses it too).
  expect_error([] { optim::SGD(std::vector<Tensor>{}); },
               {"Optimizer: got an empty parameter list, expected at least one tensor"});
  expect_error([] { optim::AdamW(nn::NamedTensors{}); },
               {"Optimizer: got an empty parameter list, expected at least one tensor"});
  Tensor h = zeros({2}, DType::f16).requires_grad_();
  expect_error([&] { optim::SGD(std::vector<Tensor>{h}); },
               {"Optimizer: parameter '0' has dtype f16, expected f32 or f64"});
  // A non-contiguous parameter: the message gives its shape and strides.
  Tensor t = zeros({2, 3}, DType::f64).transpose(0, 1).requires_grad_();
  expect_error([&] { optim::SGD(std::vector<Tensor>{t}); },
               {"Optimizer: parameter '0' must be contiguous, got shape (3, 2) with strides (1, 3)"});

  // Every rate and coefficient must be a finite number in its range: NaN (which fails every comparison)
  // and inf were accepted, and made the parameters NaN at the first step without a word.
  const std::vector<Tensor> ps{p};
  for (double bad : {double(NAN), double(INFINITY), -1.0}) {
    SCOPED_TRACE(bad);
    expect_error([&] { optim::SGD(ps, {.lr = bad}); }, {"Optimizer: expected a finite learning rate >= 0"});
    expect_error([&] { optim::Adam(ps, {.lr = bad}); }, {"Optimizer: expected a finite learning rate >= 0"});
    expect_error([&] { optim::SGD(ps, {.lr = 0.1, .momentum = bad}); },
                 {"SGD: expected a finite momentum >= 0"});
    expect_error([&] { optim::SGD(ps, {.lr = 0.1, .dampening = bad}); },
                 {"SGD: expected 0 <= dampening <= 1"});
    expect_error([&] { optim::SGD(ps, {.lr = 0.1, .weight_decay = bad}); },
                 {"SGD: expected a finite weight_decay >= 0"});
    expect_error([&] { optim::Adam(ps, {.eps = bad}); }, {"Adam: expected a finite eps > 0"});
    expect_error([&] { optim::Adam(ps, {.weight_decay = bad}); },
                 {"Adam: expected a finite weight_decay >= 0"});
    expect_error([&] { optim::constant_lr(bad); }, {"constant_lr: expected a finite base_lr >= 0"});
    expect_error([&] { optim::linear_warmup(bad, 10); }, {"linear_warmup: expected a finite base_lr >= 0"});
    expect_error([&] { optim::cosine_with_warmup(bad, 1, 10); },
                 {"cosine_with_warmup: expected a finite base_lr"});
    expect_error([&] { optim::cosine_with_warmup(1e-3, 1, 10, bad); },
                 {"cosine_with_warmup: expected a finite min_lr >= 0"});
    // lr is a public field that schedules write between steps: step() checks it, before touching anything
    set_grad(p, {1.0});
    optim::Adam adam(ps);
    optim::SGD sgd(ps, {.lr = 0.1});
    adam.lr = bad;
    sgd.lr = bad;
    expect_error([&] { adam.step(); }, {"Adam.step: expected a finite learning rate >= 0"});
    expect_error([&] { sgd.step(); }, {"SGD.step: expected a finite learning rate >= 0"});
    expect_values(p, {1.0}, 0);
  }
}

// eps = 0 is refused (PyTorch takes it): a value whose gradient has been 0 since the start divides 0 by 0.
TEST(OptimErrors, AdamEpsZeroIsRefused) {
  const std::vector<Tensor> ps{param({1.0})};
  expect_error(
      [&] { optim::Adam(ps, {.eps = 0.0}); },
      {"Adam: expected a finite eps > 0 (eps = 0 makes a parameter NaN where its gradient has been 0), "
       "got 0"});
  optim::AdamWOptions w;
  w.eps = 0.0;
  expect_error([&] { optim::AdamW(ps, w); }, {"AdamW: expected a finite eps > 0"});
}

// options is a public member like lr: a value written between steps is checked by step() before anything
// changes. A NaN weight_decay made every parameter NaN (Adam), an inf one every parameter -inf (SGD).
TEST(OptimErrors, OptionsWrittenBetweenStepsAreCheckedByStep) {
  Tensor p = param({1.0, 2.0});
  const std::vector<Tensor> ps{p};
  set_grad(p, {1.0, 1.0});
  optim::Adam adam(ps);
  optim::SGD sgd(ps, {.lr = 0.1});
  adam.options.weight_decay = NAN;
  sgd.options.weight_decay = INFINITY;
  expect_error([&] { adam.step(); }, {"Adam: expected a finite weight_decay >= 0, got nan"});
  expect_error([&] { sgd.step(); }, {"SGD: expected a finite weight_decay >= 0, got inf"});
  adam.options.weight_decay = 0;
  adam.options.beta2 = 1.0;
  expect_error([&] { adam.step(); }, {"Adam: expected 0 <= beta2 < 1, got 1"});
  expect_values(p, {1.0, 2.0}, 0);
  EXPECT_EQ(adam.state()[0].step, 0);
  EXPECT_EQ(sgd.state()[0].step, 0);
}

// A step that fails on one parameter changes none: every gradient and buffer is checked first. Here the
// second module was cast to f64 after the first step, so its f32 moments no longer fit; the first module's
// parameters used to be updated (and every step count advanced) before the error.
TEST(OptimState, AFailedStepChangesNothing) {
  Generator gen(1);
  auto first = std::make_shared<nn::Linear>(3, 2, true, gen);
  auto second = std::make_shared<nn::Linear>(2, 1, true, gen);
  nn::NamedTensors params;
  for (auto& [n, t] : first->named_parameters()) params.emplace_back("first." + n, t);
  for (auto& [n, t] : second->named_parameters()) params.emplace_back("second." + n, t);
  for (const bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled);
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled)
      opt = std::make_unique<optim::AdamW>(params);
    else
      opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    auto grads_of_ones = [&] {
      for (auto& [_, t] : params) t.set_grad(ones(t.shape(), t.dtype()));
    };
    nn::cast_(*second, DType::f32);  // both f32 at the first step
    grads_of_ones();
    opt->step();
    nn::cast_(*second, DType::f64);
    grads_of_ones();
    const std::vector<double> w_before = first->weight.to_vector<double>();
    try {
      opt->step();
      ADD_FAILURE() << "expected ng::Error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(
          m.find(decoupled
                     ? "AdamW.step: parameter 'second.weight' has exp_avg f32 (1, 2), expected f64 (1, 2)"
                     : "SGD.step: parameter 'second.weight' has momentum_buffer f32 (1, 2), expected "
                       "f64 (1, 2)"),
          std::string::npos)
          << m;
    }
    EXPECT_EQ(first->weight.to_vector<double>(), w_before);
    for (const auto& s : opt->state()) EXPECT_EQ(s.step, 1);
    nn::cast_(*second, DType::f32);
  }
}

// state_dict() is a snapshot: a copy kept in memory (the best state so far) does not move with later steps.
// Its moments were the live buffers, so after one more step it held step 1 beside step 2's moments.
TEST(OptimState, StateDictIsASnapshot) {
  Tensor p = param({1.0, 2.0});
  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.1});
  set_grad(p, {1.0, 1.0});
  opt.step();
  const nn::NamedTensors snap = opt.state_dict();
  opt.step();
  int seen_exp_avg = 0, seen_step = 0;  // both entries must be there: the checks below ran
  for (auto& [name, t] : snap) {
    if (name == "0.exp_avg") {
      ++seen_exp_avg;
      expect_values(t, {0.1, 0.1}, 1e-15);  // (1 - beta1) * g after one step
    }
    if (name == "0.step") {
      ++seen_step;
      EXPECT_EQ(t.to_vector<int64_t>()[0], 1);
    }
  }
  EXPECT_EQ(seen_exp_avg, 1);
  EXPECT_EQ(seen_step, 1);
  expect_values(opt.state()[0].buffers.at("exp_avg"), {0.19, 0.19}, 1e-15);
}

// grad_norm and clip_grad_norm_ take f16 / bf16 gradients on the CPU as on a device (widened exactly); the
// CPU path refused them, with an error naming clip_grad_norm_ even from grad_norm.
TEST(ClipGradNorm, HalfGradientsAreWidened) {
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = zeros({2}, dt).requires_grad_();
    a.set_grad(from_vector(std::vector<double>{3.0, 4.0}, Shape{2}, dt));
    EXPECT_DOUBLE_EQ(optim::grad_norm({a}), 5.0);
    EXPECT_NEAR(optim::clip_grad_norm_({a}, 1.0), 5.0, 0);
    expect_values(a.grad(), {0.6, 0.8}, 4e-3);
  }
}

// Parameters that are views of one storage: fine when no element is in two of them (slices of one flat
// buffer, each updated once per step), an ng::Error naming both when they overlap (an element would be
// updated twice, with two sets of moments).
TEST(OptimErrors, ParametersThatShareElements) {
  const Tensor flat = zeros({10}, DType::f64);
  Tensor a = flat.narrow(0, 0, 5).requires_grad_(), b = flat.narrow(0, 5, 5).requires_grad_();
  set_grad(a, {1, 1, 1, 1, 1});
  set_grad(b, {2, 2, 2, 2, 2});
  optim::SGD sgd(nn::NamedTensors{{"a", a}, {"b", b}}, {.lr = 0.5});
  sgd.step();
  expect_values(flat, {-0.5, -0.5, -0.5, -0.5, -0.5, -1, -1, -1, -1, -1}, 0);

  Tensor c = flat.narrow(0, 4, 3).requires_grad_();  // shares element 4 with a and 5, 6 with b
  expect_error(
      [&] {
        optim::Adam(nn::NamedTensors{{"a", a}, {"b", b}, {"c", c}});
      },
      {"Optimizer: parameters 'a' (5) and 'c' (3) share elements (overlapping views of one storage)"});
  expect_error(
      [&] {
        optim::SGD(nn::NamedTensors{{"c", c}, {"b", b}}, {.lr = 0.1});
      },
      {"Optimizer: parameters 'c' (3) and 'b' (5) share elements"});
  // an empty view shares nothing, and other storages never overlap
  Tensor e = flat.narrow(0, 4, 0).requires_grad_();
  optim::SGD ok(nn::NamedTensors{{"a", a}, {"e", e}, {"p", param({1.0})}}, {.lr = 0.1});
}

TEST(ClipGradNorm, ReturnsTotalNormAndClips) {
  Tensor a = param({3.0, 0.0}), b = param({0.0}), c = param({1.0});
  set_grad(a, {3.0, 0.0});
  set_grad(b, {4.0});
  // c has no grad: skipped
  double total = optim::clip_grad_norm_({a, b, c}, 1.0);
  EXPECT_DOUBLE_EQ(total, 5.0);
  expect_values(a.grad(), {3.0 / (5.0 + 1e-6), 0.0}, 1e-15);
  expect_values(b.grad(), {4.0 / (5.0 + 1e-6)}, 1e-15);
  // Below the threshold nothing changes.
  set_grad(a, {0.3, 0.4});
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm_({a}, 1.0), 0.5);
  expect_values(a.grad(), {0.3, 0.4}, 0);
  expect_error([&] { optim::clip_grad_norm_({a}, 0.0); }, {"clip_grad_norm_: expected max_norm > 0, got 0"});
}

// Two deliberate departures from PyTorch (optim/clip.h, docs/model.md). A non-finite total is returned and
// every gradient is left as it was: PyTorch multiplies them all by max_norm / (inf + 1e-6) = 0 (or NaN), so
// [3, inf], [1, 2] with max_norm 1 become [0, nan], [0, 0] there (torch 2, f64). And max_norm 0 is refused
// (PyTorch zeroes every gradient).
TEST(ClipGradNorm, NonFiniteNormLeavesGradientsAndMaxNormZeroIsRefused) {
  Tensor a = param({1.0, 2.0}), b = param({1.0, 2.0});
  for (double bad : {double(INFINITY), double(NAN)}) {
    SCOPED_TRACE(bad);
    set_grad(a, {3.0, bad});
    set_grad(b, {1.0, 2.0});
    const double total = optim::clip_grad_norm_({a, b}, 1.0);
    if (std::isnan(bad))
      EXPECT_TRUE(std::isnan(total)) << total;
    else
      EXPECT_EQ(total, INFINITY);
    const std::vector<double> ga = a.grad().to_vector<double>();
    EXPECT_EQ(ga[0], 3.0);
    EXPECT_TRUE(std::isnan(bad) ? std::isnan(ga[1]) : ga[1] == INFINITY) << ga[1];
    expect_values(b.grad(), {1.0, 2.0}, 0);  // untouched, not zeroed
  }
  set_grad(a, {3.0, 4.0});
  for (double bad : {0.0, -1.0, double(NAN)}) {
    SCOPED_TRACE(bad);
    expect_error([&] { optim::clip_grad_norm_({a}, bad); },
                 {"clip_grad_norm_: expected max_norm > 0, got", "(max_norm 0 would zero every gradient"});
  }
  expect_error([&] { optim::clip_grad_norm_({a}, 0.0); },
               {"clip_grad_norm_: expected max_norm > 0, got 0 ("});
  expect_values(a.grad(), {3.0, 4.0}, 0);
}

// The vectorized sum of squares against a plain serial sum in long double, for f32 and f64 gradients of
// sizes around the vector widths (tails) and one big one, and for a transposed (non-contiguous) gradient.
TEST(ClipGradNorm, GradNormMatchesASerialSum) {
  Generator gen(7);
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<Tensor> params;
    long double want = 0;
    for (int64_t n : {1, 3, 7, 8, 15, 16, 17, 31, 33, 100003}) {
      Tensor p = zeros({n}, dt).requires_grad_();
      Tensor g = randn({n}, gen, dt);
      p.set_grad(g);
      for (double v : g.to_vector<double>()) want += (long double)v * v;
      params.push_back(p);
    }
    Tensor q = zeros({5, 9}, dt).requires_grad_();
    Tensor gt = randn({9, 5}, gen, dt).transpose(0, 1);  // a (5, 9) view, not contiguous
    ASSERT_FALSE(gt.is_contiguous());
    q.set_grad(gt);
    for (double v : gt.to_vector<double>()) want += (long double)v * v;
    params.push_back(q);
    const double total = optim::grad_norm(params);
    EXPECT_NEAR(total, double(std::sqrt(want)), 1e-13 * double(std::sqrt(want))) << dtype_name(dt);
    EXPECT_GT(total, 300.0);  // ~sqrt(100k): the big gradient was counted
  }
}

TEST(LRSchedule, ConstantWarmupCosine) {
  auto c = optim::constant_lr(0.1);
  EXPECT_EQ(c(0), 0.1);
  EXPECT_EQ(c(1000), 0.1);
  auto w = optim::linear_warmup(1.0, 4);
  EXPECT_DOUBLE_EQ(w(0), 0.25);
  EXPECT_DOUBLE_EQ(w(3), 1.0);
  EXPECT_DOUBLE_EQ(w(10), 1.0);
  auto cos = optim::cosine_with_warmup(1.0, 2, 12, 0.1);
  EXPECT_DOUBLE_EQ(cos(0), 0.5);
  EXPECT_DOUBLE_EQ(cos(2), 1.0);                // end of warmup: the peak
  EXPECT_NEAR(cos(7), 0.1 + 0.5 * 0.9, 1e-15);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(cos(12), 0.1, 1e-15);             // the floor
  EXPECT_NEAR(cos(100), 0.1, 1e-15);
  expect_error([] { optim::cosine_with_warmup(1.0, 5, 5); },
               {"cosine_with_warmup: expected 0 <= warmup_steps < total_steps",
                "got warmup_steps 5 and total_steps 5"});
  // min_lr above base_lr would turn the decay into a rise; equal is a constant rate after warmup.
  expect_error(
      [] { optim::cosine_with_warmup(1e-3, 0, 10, 2e-3); },
      {"cosine_with_warmup: expected min_lr <= base_lr for cosine (the rate falls to it), got min_lr "
       "0.002 and base_lr 0.001"});
  EXPECT_DOUBLE_EQ(optim::cosine_with_warmup(1e-3, 0, 10, 1e-3)(5), 1e-3);
}

// LRSchedule is a public aggregate: one built by hand skipped the factories' checks, and gave NaN (cosine
// with total_steps == warmup_steps: 0 / 0 at step 5) or a negative lr. operator() checks the fields.
TEST(LRSchedule, HandBuiltScheduleIsChecked) {
  using S = optim::LRSchedule;
  const std::vector<std::pair<S, std::string>> cases = {
      {S{"cosine", 1.0, 5, 5, 0.0},
       "LRSchedule: expected 0 <= warmup_steps < total_steps for cosine, got warmup_steps 5 and total_steps "
       "5"},
      {S{"cosine", 1.0, 0, 10, -0.5}, "LRSchedule: expected a finite min_lr >= 0, got -0.5"},
      {S{"cosine", 1.0, -2, 10, 0.0}, "LRSchedule: expected warmup_steps >= 0 for cosine, got -2"},
      {S{"cosine", 1e-3, 0, 10, 1e-2},
       "LRSchedule: expected min_lr <= base_lr for cosine (the rate falls to it), got min_lr 0.01 and "
       "base_lr "
       "0.001"},
      {S{"constant", -1.0, 0, 0, 0.0}, "LRSchedule: expected a finite base_lr >= 0, got -1"},
      {S{"constant", double(NAN), 0, 0, 0.0}, "LRSchedule: expected a finite base_lr >= 0, got nan"},
      {S{"linear_warmup", 1.0, -1, 0, 0.0},
       "LRSchedule: expected warmup_steps >= 0 for linear_warmup, got -1"},
      {S{"linear_warmup", double(INFINITY), 3, 0, 0.0},
       "LRSchedule: expected a finite base_lr >= 0, got inf"},
      {S{"step", 1.0, 0, 0, 0.0},
       "LRSchedule: unknown schedule kind 'step', expected constant, linear_warmup or cosine"},
  };
  for (const auto& c : cases) {  // (clang 14 cannot capture a structured binding in a lambda)
    const S& s = c.first;
    SCOPED_TRACE(c.second);
    for (int64_t step : {0, 5, 6}) expect_error([&] { (void)s(step); }, {c.second});
  }
  // Fields the kind does not use are not checked (a constant schedule's total_steps stays 0).
  EXPECT_EQ((S{"constant", 0.5, -3, -3, -1.0}(7)), 0.5);
  EXPECT_DOUBLE_EQ((S{"linear_warmup", 1.0, 4, 0, -1.0}(1)), 0.5);
  EXPECT_NEAR((S{"cosine", 1.0, 0, 2, 0.0}(1)), 0.5, 1e-15);
}
