// Error paths of the autograd machinery: requires_grad_, set_grad, backward's seed, a backward returning
// the wrong shape, anomaly mode, saved tensors, sum_to, gradcheck's own checks.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

TEST(AutogradErrors, RequiresGradRules) {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = mul(x, 2.0);
  expect_error(
      [&] { y.requires_grad_(); },
      {"requires_grad_: can only be set on a leaf tensor; this one was made by MulBackward", "detach()"});
  expect_error([] { zeros({2}, DType::i64).requires_grad_(); },
               {"requires_grad_: only floating tensors can require grad, got i64"});
  EXPECT_FALSE(zeros({2}, DType::i64).requires_grad_(false).requires_grad());
}

TEST(AutogradErrors, SetGradShape) {
  Tensor x = ones({2, 2});
  expect_error([&] { x.set_grad(ones({3})); }, {"set_grad: gradient has shape (3), expected (2, 2)"});
  x.set_grad(ones({2, 2}));
  EXPECT_EQ(x.grad().numel(), 4);
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  // An expanded gradient is refused here; it used to fail at the next backward, naming add_.
  Tensor w = ones({3}).requires_grad_();
  expect_error([&] { w.set_grad(ones({1}).expand({3})); },
               {"set_grad: gradient has shape (3) and strides (0): dim 0 has stride 0", "contiguous() copy"});
  w.set_grad(ones({1}).expand({3}).contiguous());
  sum(w).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(AutogradErrors, BackwardSeed) {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  expect_error(
      [&] {
        y.backward(ones({3, 2}));
      },
      {"backward: gradient has shape (3, 2), expected (2, 3) (the output's shape)"});
  expect_error([&] { ones({1}).backward(); },
               {"backward: the tensor does not require grad and has no grad_fn"});
  Tensor z;
  {
    NoGradGuard g;
    z = mul(x, 2.0);
  }
  expect_error([&] { sum(z).backward(); }, {"backward: the tensor does not require grad", "NoGradGuard"});
}

TEST(AutogradErrors, BackwardReturningWrongShapeNamesTheNode) {
  Tensor x = ones({3}, DType::f64).requires_grad_();
  Tensor y;
  {
    NoGradGuard g;
    y = mul(x, 1.0);
  }
  attach(y, "BrokenBackward", {x},
         [](const Tensor&) -> std::vector<Tensor> { return {ones({4}, DType::f64)}; });
  expect_error([&] { sum(y).backward(); },
               {"BrokenBackward: backward returned a gradient of shape (4) for input 0, expected (3)"});
}

TEST(AutogradErrors, AnomalyModeNamesTheNodeThatMadeNan) {
  Tensor x = tensor({0.0, 1.0}, DType::f64).requires_grad_();
  set_anomaly_enabled(true);
  expect_error(
      [&] { sum(sqrt(x)).backward(); },
      {"anomaly: the backward of SqrtBackward produced NaN or Inf in the gradient of input 0 (shape (2))"});
  set_anomaly_enabled(false);
  EXPECT_FALSE(anomaly_enabled());
  sum(sqrt(x)).backward();  // without anomaly mode: inf gradient, no error
  EXPECT_EQ(x.grad().to_vector<double>()[0], INFINITY);
}

TEST(AutogradErrors, SavedTensorModifiedInPlaceNamesTheOp) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor y = softmax(x);  // saves its output
  Tensor loss = sum(mul(y, tensor({1.0, 3.0}, DType::f64)));
  // With grad mode on, mul_ refuses y outright (it requires grad and the change would not be recorded).
  expect_error([&] { mul_(y, 2.0); }, {"mul_: the tensor changed in place requires grad", "NoGradGuard"});
  // Under NoGradGuard it goes through, as an optimizer step does, and the saved-tensor check catches it.
  {
    NoGradGuard no_grad;
    mul_(y, 2.0);
  }
  expect_error([&] { loss.backward(); },
               {"softmax: a tensor saved for backward was modified in place after it was saved", "version"});
  // masked_fill saves the mask: changing it is caught too.
  Tensor m = tensor({1.0, 0.0}, DType::f64);
  Tensor z = masked_fill(x, m, 0.0);
  m.fill_(0.0);
  expect_error([&] { sum(z).backward(); },
               {"masked_fill: a tensor saved for backward was modified in place"});
}

TEST(AutogradErrors, SecondBackwardThroughNewOpsIsAnError) {
  Tensor x = randn({2, 3}, default_generator(), DType::f64).requires_grad_();
  Tensor loss = cross_entropy(x, from_vector(std::vector<int64_t>{0, 2}, {2}));
  loss.backward();
  expect_error([&] { loss.backward(); }, {"backward: trying to backward through the graph a second time",
                                          "CrossEntropyBackward", "retain_graph"});
}

TEST(AutogradErrors, SumTo) {
  expect_error([] { sum_to(ones({3}), {2, 3}); }, {"sum_to: cannot reduce gradient of shape (3) to (2, 3)"});
  expect_error([] { sum_to(ones({2, 3}), {4}); }, {"sum_to: cannot reduce gradient of shape (2, 3) to (4)"});
  EXPECT_EQ(sum_to(ones({2, 3}), {1, 3}).to_vector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(sum_to(ones({2, 3}), {}).item(), 6.0);
}

TEST(AutogradErrors, GradcheckChecksItsInputs) {
  Tensor x32 = ones({2}).requires_grad_();
  expect_error([&] { gradcheck([](auto& in) { return in[0]; }, {x32}); },
               {"gradcheck: input 0 has dtype f32; finite differences need f64 inputs"});
  Tensor leafx = ones({2}, DType::f64).requires_grad_();
  Tensor nonleaf = mul(leafx, 2.0);
  expect_error([&] { gradcheck([](auto& in) { return in[0]; }, {nonleaf}); },
               {"gradcheck: input 0 must be a leaf tensor"});
  expect_error([&] { gradcheck([](auto& in) { return in[0].to(DType::f32); }, {leafx}); },
               {"gradcheck: the function returned dtype f32, expected f64"});
  // The report names the worst element.
  GradcheckResult r = gradcheck([](auto& in) { return mul(in[0], 2.0); }, {leafx});
  EXPECT_TRUE(r.ok);
  EXPECT_NE(r.message().find("gradcheck passed (2 elements)"), std::string::npos) << r.message();
}

TEST(AutogradErrors, OpsSavingTheirOutputDoNotLeakTheGraph) {
  // exp, sqrt, div, maximum save their output for backward. Dropping the output without backward must
  // free its node (a saved output that pointed back at its own node would be a reference cycle).
  Tensor x = add(abs(randn({3}, default_generator(), DType::f64)), 1.0).detach().requires_grad_();
  std::vector<std::function<Tensor()>> ops = {
      [&] { return exp(x); },        [&] { return sqrt(x); },    [&] { return div(x, add(x, 10.0)); },
      [&] { return maximum(x, x); }, [&] { return sigmoid(x); }, [&] { return log_softmax(x); }};
  for (size_t k = 0; k < ops.size(); ++k) {
    Tensor y = ops[k]();
    std::weak_ptr<Node> node = y.grad_fn();
    ASSERT_FALSE(node.expired());
    y = Tensor();
    EXPECT_TRUE(node.expired()) << "op " << k;
  }
  // And the in-place check still works through the detached alias (same storage, same version counter).
  Tensor y = exp(x);
  Tensor loss = sum(y);
  {
    NoGradGuard no_grad;
    mul_(y, 2.0);
  }
  expect_error([&] { loss.backward(); }, {"exp: a tensor saved for backward was modified in place"});
}

TEST(AutogradErrors, UnrecordedInPlaceOpsRefuseTensorsThatRequireGrad) {
  // fill_, copy_, add_ and mul_ are not recorded by autograd (they serve optimizers, initialisation and
  // buffers). Before 2026-11-28 they took any tensor: add_(h, y) with y requiring grad changed h's values
  // while y's gradient silently missed the change, and copy_ into a parameter went unnoticed. With grad mode
  // on they now refuse a tensor that requires grad, the way PyTorch refuses an in-place change of a leaf.
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor y = tensor({3.0, 4.0}, DType::f64).requires_grad_();
  Tensor plain = tensor({0.0, 0.0}, DType::f64);
  const std::string rule = "autograd does not record this in-place op";
  expect_error([&] { x.fill_(0.0); }, {"fill_: the tensor changed in place requires grad", rule});
  expect_error([&] { x.copy_(plain); }, {"copy_: the tensor changed in place requires grad", rule});
  expect_error([&] { mul_(x, 2.0); }, {"mul_: the tensor changed in place requires grad", rule});
  expect_error([&] { add_(x, plain); }, {"add_: the tensor changed in place requires grad", rule});
  expect_error([&] { add_(plain, y); }, {"add_: its operand requires grad", rule});
  expect_error([&] { plain.copy_(y); }, {"copy_: its operand requires grad", rule});
  Tensor h = mul(x, 2.0);  // a non-leaf: its change would not reach x's or y's gradient either
  expect_error([&] { add_(h, y); }, {"add_: the tensor changed in place requires grad"});
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1.0, 2.0}));  // nothing was changed
  EXPECT_EQ(plain.to_vector<double>(), (std::vector<double>{0.0, 0.0}));

  // Under NoGradGuard (an optimizer step, an initialisation) they take it.
  {
    NoGradGuard no_grad;
    add_(x, y, -0.5);
    mul_(x, 2.0);
    plain.copy_(y);
  }
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{-1.0, 0.0}));
  EXPECT_EQ(plain.to_vector<double>(), (std::vector<double>{3.0, 4.0}));
  // The initialisers set values under their own NoGradGuard, as PyTorch's nn.init does.
  normal_(x, 0.0, 1.0);
  uniform_(y, -1.0, 1.0);
  EXPECT_TRUE(x.requires_grad() && y.requires_grad());
  // Tensors that do not require grad are free to change with grad mode on.
  plain.fill_(1.0);
  add_(plain, tensor({1.0, 1.0}, DType::f64));
  EXPECT_EQ(plain.to_vector<double>(), (std::vector<double>{2.0, 2.0}));
}

// A custom op (attach) whose backward returns a gradient in another dtype than its input's: named by the
// engine with the node. An f64 gradient for an f32 input used to fail inside Tensor::data, naming no node,
// and an f32 gradient for a bf16 input flowed on into .grad unnoticed.
TEST(AutogradErrors, ACustomBackwardMustReturnItsInputsDtype) {
  auto wrong_dtype_op = [](const Tensor& x, DType grad_dtype) {
    Tensor y;
    {
      NoGradGuard g;
      y = mul(x, 2.0);
    }
    attach(y, "WrongDtypeBackward", {x}, [grad_dtype](const Tensor& dout) -> std::vector<Tensor> {
      return {mul(dout, 2.0).to(grad_dtype)};
    });
    return y;
  };
  Tensor x = ones({3}).requires_grad_();
  expect_error(
      [&] { sum(wrong_dtype_op(x, DType::f64)).backward(); },
      {"WrongDtypeBackward: backward returned a gradient of dtype f64 for input 0, expected f32 (the "
       "input's dtype)"});
  Tensor h = ones({3}, DType::bf16).requires_grad_();
  expect_error([&] { sum(wrong_dtype_op(h, DType::f32)).backward(); },
               {"WrongDtypeBackward: backward returned a gradient of dtype f32 for input 0, expected bf16"});
  EXPECT_FALSE(h.grad().defined());
  // The right dtype goes through.
  sum(wrong_dtype_op(h, DType::bf16)).backward();
  EXPECT_EQ(h.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
}
