// The autograd engine: accumulation, retain_graph, errors, deep graphs, version counter.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

TEST(Autograd, SimpleChainRule) {
  Tensor x = tensor({1.0, 2.0, 3.0}, DType::f64).requires_grad_();
  Tensor y = sum(mul(x, x));  // dy/dx = 2x
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = tensor({1.0, -2.0}, DType::f64).requires_grad_();
  sum(mul(x, 3.0)).backward();
  sum(mul(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  x.zero_grad();
  sum(mul(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(Autograd, SharedInputSumsBothPaths) {
  Tensor x = tensor({2.0}, DType::f64).requires_grad_();
  Tensor a = mul(x, 3.0), b = mul(x, x);
  sum(add(a, b)).backward();  // d/dx (3x + x^2) = 3 + 2x = 7
  EXPECT_DOUBLE_EQ(x.grad().item(), 7.0);
}

// A leaf's first gradient is adopted without a copy when nobody else holds it, and copied when it is
// shared: either way .grad must be a private buffer that later backwards add into.
TEST(Autograd, FirstGradientIsPrivateWhetherAdoptedOrCopied) {
  // y = x + x: the add's backward hands the same tensor to both inputs (shared: copied, then +=).
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  sum(add(x, x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
  // The upstream gradient passed to backward() must not become .grad (it stays the caller's).
  Tensor w = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor seed = tensor({5.0, 7.0}, DType::f64);
  mul(w, 1.0).backward(seed);
  mul(w, 1.0).backward(seed);
  EXPECT_EQ(seed.to_vector<double>(), (std::vector<double>{5, 7}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{10, 14}));
  // cross_entropy's fresh dlogits buffer is adopted; a second backward accumulates into it.
  Tensor logits = zeros({2, 2}, DType::f64).requires_grad_();
  Tensor t = from_vector(std::vector<int64_t>{0, 1}, {2});
  cross_entropy(logits, t).backward();
  cross_entropy(logits, t).backward();
  // d/dlogits = (softmax - onehot) / 2 = (+-0.25), twice
  EXPECT_EQ(logits.grad().to_vector<double>(), (std::vector<double>{-0.5, 0.5, 0.5, -0.5}));
}

TEST(Autograd, NonScalarBackwardWithoutGradIsAnError) {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  try {
    y.backward();
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward: a gradient can be created implicitly only for a scalar"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
  y.backward(ones({2, 3}));
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(6, 2.0));
}

TEST(Autograd, SeedAndSetGradMustMatchTheDtypeAndDevice) {
  // An f64 seed on an f32 output was read as floats by the backward formulas: pow's gave x.grad
  // [0, 7.5, 0] for [2, 4, 6], reading past the seed's end (stop 42).
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  expect_error([&] { pow(x, 2.0).backward(ones({3}, DType::f64)); },
               {"backward: gradient has dtype f64, expected f32 (the output's dtype"});
  EXPECT_FALSE(x.grad().defined());
  pow(x, 2.0).backward(ones({3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));
  // set_grad: the next backward adds into it, so another dtype failed only there, as add_'s error.
  expect_error([&] { x.set_grad(zeros({3}, DType::f64)); },
               {"set_grad: gradient has dtype f64, expected f32 (the tensor's)"});
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));  // unchanged
}

TEST(Autograd, SecondBackwardOnFreedGraphIsAnError) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward();
  try {
    y.backward();
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, RetainGraphAllowsSecondBackward) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 8}));
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsAnError) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor w = tensor({3.0, 4.0}, DType::f64);
  Tensor y = sum(mul(x, w));  // saves w
  w.fill_(0.0);               // modified after being saved
  try {
    y.backward();
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y;
  {
    NoGradGuard g;
    y = mul(x, 2.0);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  Tensor z = mul(x, 2.0);
  EXPECT_TRUE(z.requires_grad());
  EXPECT_FALSE(z.detach().requires_grad());
}

TEST(Autograd, BackwardOnTensorWithoutGradIsAnError) {
  Tensor x = ones({1});
  try {
    x.backward();
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("backward: the tensor does not require grad and has no grad_fn"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("requires_grad_()"), std::string::npos) << msg;  // says what was expected
  }
}

TEST(Autograd, DeepChainDoesNotOverflowTheStack) {
  // 100,000 ops in a chain: both the backward walk and the graph's destruction must be iterative.
  Tensor x = tensor({1.0}, DType::f64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = add(y, 1e-6);
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 1.0);
  // And a graph that is dropped without backward.
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = mul(z, 1.0);
  z = Tensor();
  SUCCEED();
}

// A graph that outlives the thread's list of dying nodes (autograd/node.cpp): held by a static Tensor at
// std::exit, or by a thread_local Tensor made before the list. Each pushed onto the destroyed list, a write
// into freed memory that AddressSanitizer reports (the asan build: the child exits non-zero; a release
// build cannot see it). Each child must exit with 0.
namespace {
void keep_graph_past_the_thread(bool on_exit) {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  if (on_exit) {
    static Tensor kept;
    { Tensor dropped = exp(x); }  // the first node to die makes the main thread's list
    kept = exp(mul(x, 2.0));
    std::exit(0);  // thread_locals die first, then statics: kept's graph after the list
  }
  std::thread([&] {
    thread_local Tensor kept;  // made before the list, so it dies after it
    kept = Tensor();
    { Tensor dropped = exp(x); }
    kept = exp(mul(x, 2.0));
  }).join();
  std::exit(0);
}
}  // namespace

TEST(AutogradDeathTest, GraphsHeldPastTheirThreadsEndDieCleanly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(keep_graph_past_the_thread(true), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(keep_graph_past_the_thread(false), ::testing::ExitedWithCode(0), "");
}

TEST(Autograd, RetainGradOnNonLeaf) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  sum(mul(h, h)).backward();  // dL/dh = 2h = (6, 12)
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{6, 12}));
}

TEST(Gradcheck, CatchesAWrongBackward) {
  // Test the tester: an op whose backward is deliberately off by a factor of 2 must fail.
  auto bad_square = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor y;
    {
      NoGradGuard g;
      y = mul(x, x);
    }
    SavedTensor sx(x, "bad_square");
    attach(y, "BadSquareBackward", {x}, [sx](const Tensor& dout) -> std::vector<Tensor> {
      return {mul(dout, sx.unpack())};  // wrong: should be 2 * x * dout
    });
    return y;
  };
  // The wrong input sits second, behind a correct one, so the report must name input 1, not 0. The worst
  // element is where |x| is largest: analytic x * u against numeric 2 x * u, an error of |x * u|.
  Tensor a = tensor({0.5, -0.25}, DType::f64).requires_grad_();
  Tensor x = tensor({0.1, -3.0, 0.2, 0.3, -0.4}, DType::f64).requires_grad_();
  auto two_inputs = [&](const std::vector<Tensor>& in) {
    return add(sum(mul(in[0], in[0])), sum(bad_square({in[1]})));  // scalar out: u is one number
  };
  GradcheckResult r = gradcheck(two_inputs, {a, x});
  EXPECT_FALSE(r.ok) << r.message();
  EXPECT_EQ(r.checked, 7);
  EXPECT_EQ(r.input, 1);
  EXPECT_EQ(r.index, 1);
  // The upstream gradient u is the gradcheck's own draw; recover it from the analytic value x * u.
  const double u = r.analytic / -3.0;
  EXPECT_GT(std::abs(u), 1e-3);
  EXPECT_NEAR(r.numeric, 2 * -3.0 * u, 1e-6 * std::abs(u));
  EXPECT_NEAR(r.abs_err, std::abs(r.analytic - r.numeric), 1e-12);
  EXPECT_NEAR(r.abs_err, 3.0 * std::abs(u), 1e-6 * std::abs(u));
  EXPECT_NEAR(r.rel_err, 0.5, 1e-6);  // |x u - 2 x u| / |2 x u|
  // message() names the same worst element.
  const std::string msg = r.message();
  EXPECT_NE(msg.find("gradcheck FAILED (7 elements)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worst: input 1 index 1"), std::string::npos) << msg;
  std::ostringstream values;
  values << "analytic " << r.analytic << ", numeric " << r.numeric << ", abs err " << r.abs_err
         << ", rel err " << r.rel_err;
  EXPECT_NE(msg.find(values.str()), std::string::npos) << msg << "\nmissing: " << values.str();
  // And the correct op passes.
  GradcheckResult good = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x});
  EXPECT_TRUE(good.ok) << good.message();
}

// Options that make the check unable to fail, or meaningless: a negative rtol made the tolerance negative, so
// the wrong backward of CatchesAWrongBackward PASSED; eps 0 gave NaN numeric derivatives.
TEST(Gradcheck, RefusesOptionsThatCannotFail) {
  Tensor x = tensor({0.1, -3.0}, DType::f64).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  GradcheckOptions o;
  o.rtol = -1e-3;
  expect_error([&] { gradcheck(f, {x}, o); },
               {"gradcheck: expected finite tolerances atol, rtol >= 0, got atol 1e-05, rtol -0.001"});
  o = GradcheckOptions();
  o.atol = NAN;
  expect_error([&] { gradcheck(f, {x}, o); }, {"gradcheck: expected finite tolerances", "atol nan"});
  for (double eps : {0.0, -1e-6, double(NAN), double(INFINITY)}) {
    o = GradcheckOptions();
    o.eps = eps;
    expect_error([&] { gradcheck(f, {x}, o); }, {"gradcheck: expected a finite eps > 0, got "});
  }
  o = GradcheckOptions();
  o.atol = 0;
  o.rtol = 0;  // allowed: only an exact match passes. d(x*x)/dx at x = 0 is 0 both ways, exactly.
  Tensor zero = tensor({0.0}, DType::f64).requires_grad_();
  const GradcheckResult exact = gradcheck(f, {zero}, o);
  EXPECT_TRUE(exact.ok) << exact.message();  // 0 / 0 made it a failure, unrecorded
  EXPECT_EQ(exact.checked, 1);
  EXPECT_FALSE(gradcheck(f, {x}, o).ok);  // x = 0.1, -3: the central difference is not exact
}

TEST(Gradcheck, RejectsF32Inputs) {
  Tensor x = ones({2}).requires_grad_();
  expect_error([&] { gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {x}); },
               {"gradcheck: input 0 has dtype f32; finite differences need f64 inputs"});
}

// The same leaf passed twice: each entry's analytic gradient is the leaf's whole gradient, and nudging it
// moves both uses, so the two agree. It used to FAIL (analytic 5 = the parked .grad, numeric 1.12) and
// leave the leaf's .grad undefined.
TEST(Gradcheck, TheSameLeafTwiceAndItsGradKept) {
  Tensor x = tensor({0.3, -1.2}, DType::f64).requires_grad_();
  x.set_grad(tensor({5.0, 5.0}, DType::f64));
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }, {x, x});
  EXPECT_TRUE(r.ok) << r.message();
  EXPECT_EQ(r.checked, 4);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 5}));
}

// fn throwing, in the analytic pass or in the middle of the finite differences, leaves the inputs' .grad
// and values as they were.
TEST(Gradcheck, AThrowingFunctionLeavesGradAndValues) {
  Tensor x = tensor({0.5, 2.0}, DType::f64).requires_grad_();
  x.set_grad(tensor({7.0, 8.0}, DType::f64));
  int calls = 0;
  auto fails_at = [&](int n) {
    return [&calls, n](const std::vector<Tensor>& in) {
      if (++calls == n) throw Error("boom");
      return mul(in[0], in[0]);
    };
  };
  for (int n : {1, 3}) {  // 1: the analytic pass; 3: with element 0 nudged to 0.5 - eps
    calls = 0;
    expect_error([&] { gradcheck(fails_at(n), {x}); }, {"boom"});
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{7, 8})) << "failing call " << n;
    EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0.5, 2.0})) << "failing call " << n;
  }
}

// Inputs whose elements are not their own are refused: nudging one element of an expanded view moves all
// of them (gradcheck FAILED x * x: analytic 2.24, numeric -7.31), and two leaves over one storage move
// each other.
TEST(Gradcheck, RefusesInputsThatShareElements) {
  auto square = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  Tensor expanded = tensor({2.0}, DType::f64).expand({3}).detach().requires_grad_();
  expect_error([&] { gradcheck(square, {expanded}); },
               {"gradcheck: input 0 has shape (3) and strides (0): dim 0 has stride 0", "contiguous() copy"});
  Tensor base = tensor({1.0, 2.0, 3.0, 4.0}, DType::f64);
  Tensor a = base.narrow(0, 0, 2).detach().requires_grad_();
  Tensor b = base.narrow(0, 1, 2).detach().requires_grad_();
  auto product = [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); };
  expect_error(
      [&] {
        gradcheck(product, {a, b});
      },
      {"gradcheck: inputs 0 and 1 are different tensors over the same memory"});
  // A stride-0 dim of size 1 is still one element each.
  Tensor one = tensor({2.0}, DType::f64).reshape({1, 1}).expand({1, 1}).detach().requires_grad_();
  EXPECT_TRUE(gradcheck(square, {one}).ok);
}

// Two threads that run backward() into the same leaf (a shared parameter) at once: every gradient arrives,
// and nothing breaks. The leaf's AccumulateGrad and .grad are guarded by one mutex (autograd/node.cpp);
// without it this aborted with "pure virtual method called" (a node freed while in use).
TEST(Autograd, ThreadsRunningBackwardIntoOneLeaf) {
  ng::testing::ThreadsGuard one(1);  // the threads are the test's; no OpenMP team inside them
  Tensor w = ones({64}, DType::f64).requires_grad_();
  Tensor m = ones({8, 8}, DType::f64).requires_grad_();
  constexpr int kSteps = 20000;
  auto work = [&] {
    for (int i = 0; i < kSteps; ++i) {
      Tensor loss = sum(mul(w, 2.0)) + sum(matmul(m, m.t()));
      loss.backward();
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  // d/dw sum(2 w) = 2; d/dm sum(m m^T) = 2 * (row sums of m, broadcast) = 16 at m = ones
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(64, 2.0 * 2 * kSteps));
  EXPECT_EQ(m.grad().to_vector<double>(), std::vector<double>(64, 16.0 * 2 * kSteps));
}
