// Anomaly mode (autograd/anomaly.h): the first op whose forward or backward produced NaN/Inf is named,
// with its inputs' shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "normgrad.h"

using namespace ng;

namespace {
// Run f, expect an ng::Error, return its message.
template <typename F>
std::string error_of(F&& f) {
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
}  // namespace

TEST(Anomaly, GuardTurnsModeOnAndRestoresIt) {
  EXPECT_FALSE(anomaly_enabled());
  {
    DetectAnomalyGuard outer;
    EXPECT_TRUE(anomaly_enabled());
    {
      DetectAnomalyGuard inner;
      EXPECT_TRUE(anomaly_enabled());
    }
    EXPECT_TRUE(anomaly_enabled());
  }
  EXPECT_FALSE(anomaly_enabled());
}

TEST(Anomaly, ForwardNamesTheFirstOpThatMadeANaN) {
  // x = (1, -1): log(-1) = NaN. The NaN then flows through mul and sum, but log is the one named.
  Tensor x = tensor({{1.0, -1.0}, {2.0, 3.0}}).requires_grad_();
  DetectAnomalyGuard anomaly;
  std::string msg = error_of([&] { sum(mul(log(x), 2.0)); });
  EXPECT_TRUE(has(msg, "anomaly: the forward of Log (node LogBackward) produced NaN or Inf")) << msg;
  EXPECT_TRUE(has(msg, "output of shape (2, 2)")) << msg;
  EXPECT_TRUE(has(msg, "its inputs have shapes (2, 2)")) << msg;
}

TEST(Anomaly, ForwardReportsEveryInputShapeOfABinaryOp) {
  // 1 / 0 = Inf in a broadcasting div: both input shapes are listed.
  Tensor a = ones({3, 4}).requires_grad_();
  Tensor b = tensor({1.0, 2.0, 0.0, 4.0});
  DetectAnomalyGuard anomaly;
  std::string msg = error_of([&] { div(a, b); });
  EXPECT_TRUE(has(msg, "the forward of Div (node DivBackward)")) << msg;
  EXPECT_TRUE(has(msg, "output of shape (3, 4)")) << msg;
  EXPECT_TRUE(has(msg, "its inputs have shapes (3, 4), (4)")) << msg;
}

TEST(Anomaly, ForwardSaysWhenTheNaNCameFromAnInput) {
  // A leaf that holds a NaN: the first recorded op is named, and the message says the NaN was already
  // in its input (it did not make it).
  Tensor x = tensor({1.0, std::numeric_limits<double>::quiet_NaN()}, DType::f64).requires_grad_();
  DetectAnomalyGuard anomaly;
  std::string msg = error_of([&] { mul(x, 3.0); });
  EXPECT_TRUE(has(msg, "the forward of Mul")) << msg;
  EXPECT_TRUE(has(msg, "Input 0 already held NaN or Inf")) << msg;
}

TEST(Anomaly, BackwardNamesTheNodeWhoseGradientIsNotFinite) {
  // sqrt(0) = 0 is finite, but d sqrt(x)/dx = 1 / (2 sqrt x) = Inf at 0: the backward is the culprit.
  Tensor x = tensor({0.0, 4.0}, DType::f64).requires_grad_();
  DetectAnomalyGuard anomaly;
  Tensor loss = sum(mul(sqrt(x), 3.0));
  std::string msg = error_of([&] { loss.backward(); });
  EXPECT_TRUE(
      has(msg, "anomaly: the backward of SqrtBackward produced NaN or Inf in the gradient of input 0"))
      << msg;
  EXPECT_TRUE(has(msg, "its inputs have shapes (2)")) << msg;
  // Mul's backward (run before Sqrt's) was finite, so it is not the one named.
  EXPECT_FALSE(has(msg, "MulBackward")) << msg;
}

TEST(Anomaly, OffByDefaultNaNsFlowSilently) {
  // Without the guard the same computations run: NaN and Inf come out, nothing throws.
  Tensor x = tensor({1.0, -1.0}, DType::f64).requires_grad_();
  Tensor y = sum(log(x));
  EXPECT_TRUE(std::isnan(y.item()));
  Tensor z = tensor({0.0}, DType::f64).requires_grad_();
  sum(sqrt(z)).backward();
  EXPECT_TRUE(std::isinf(z.grad().item()));
}

TEST(Anomaly, FiniteTrainingStepPassesUnderTheGuard) {
  // The checks must not fire on a healthy graph: a small least-squares step gives the exact gradient.
  Tensor w = tensor({{0.5, -0.25}}, DType::f64).requires_grad_();  // (1, 2)
  Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, DType::f64);         // (2, 2)
  DetectAnomalyGuard anomaly;
  Tensor pred = matmul(w, x);                 // (1, 2) = (-0.25, 0)
  Tensor loss = sum(square(sub(pred, 1.0)));  // (-1.25)^2 + (-1)^2
  EXPECT_DOUBLE_EQ(loss.item(), 2.5625);
  loss.backward();
  // dL/dpred = 2 (pred - 1) = (-2.5, -2); dL/dw = dL/dpred @ x^T = (-2.5 - 4, -7.5 - 8) = (-6.5, -15.5)
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{-6.5, -15.5}));
}

TEST(Anomaly, AllFiniteHelper) {
  EXPECT_TRUE(all_finite(tensor({1.0, 2.0})));
  EXPECT_FALSE(all_finite(tensor({1.0, std::numeric_limits<double>::infinity()})));
  EXPECT_FALSE(all_finite(tensor({std::numeric_limits<double>::quiet_NaN()}, DType::bf16)));
  EXPECT_TRUE(all_finite(arange(5)));  // integers are always finite
}
