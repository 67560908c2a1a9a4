// Leaks: a graph that is dropped without backward() must be freed.
//
// Every op's output holds its grad_fn, and the grad_fn holds what backward needs. If a node held its own
// output (an op that saves its output, like exp or softmax), output -> node -> output would be a reference
// cycle, and any forward that never runs backward (an eval loss computed without NoGradGuard, an exception
// midway through a step) would leak the whole graph. SavedTensor keeps a detached alias to break it
// (autograd/node.h). LeakSanitizer (asan preset) and valgrind find such leaks too; this test finds them in
// the ordinary release build, through weak pointers that must expire.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "normgrad.h"

using namespace ng;

namespace {
// Build out = f(x) with x requiring grad, drop everything but weak pointers, and report whether the
// output tensor and its node were freed.
void expect_freed(const std::string& what, const std::function<Tensor(const Tensor&)>& f, bool run_backward) {
  std::weak_ptr<TensorImpl> out_impl;
  std::weak_ptr<Node> node;
  {
    Generator gen(3);
    Tensor x = randn({3, 4}, gen, DType::f64).requires_grad_();
    Tensor out = f(x);
    ASSERT_TRUE(out.requires_grad()) << what;
    out_impl = out.impl_ptr();
    node = out.grad_fn();
    if (run_backward) sum(out).backward();
  }
  EXPECT_TRUE(out_impl.expired()) << what << ": the output tensor was not freed (reference cycle)";
  EXPECT_TRUE(node.expired()) << what << ": the graph node was not freed (reference cycle)";
}

std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops() {
  return {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(abs(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(add(abs(x), 1.0)); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"matmul", [](const Tensor& x) { return matmul(x, x.t()); }},
      {"mul", [](const Tensor& x) { return mul(x, x); }},
      {"var", [](const Tensor& x) { return var(x, {1}); }},
      {"max", [](const Tensor& x) { return max(x, 1); }},
      {"layer_norm", [](const Tensor& x) { return F::layer_norm(x, {4}); }},
      {"rms_norm", [](const Tensor& x) { return F::rms_norm(x); }},
      {"cross_entropy",
       [](const Tensor& x) {
         return cross_entropy(x, from_vector(std::vector<int64_t>{0, 3, 1}, {3}));
       }},
  };
}
}  // namespace

TEST(Leaks, GraphDroppedWithoutBackwardIsFreed) {
  for (const auto& [name, f] : ops()) expect_freed(name, f, /*run_backward=*/false);
}

TEST(Leaks, GraphAfterBackwardIsFreed) {
  for (const auto& [name, f] : ops()) expect_freed(name, f, /*run_backward=*/true);
}

TEST(Leaks, TinyLMLossWithoutBackwardIsFreed) {
  // A whole model: an eval loss computed with grad mode on (a common mistake) must not leak the graph.
  std::weak_ptr<Node> node;
  {
    nn::TinyLMConfig cfg;
    cfg.vocab_size = 8;
    cfg.dim = 16;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    nn::TinyLM model(cfg);
    Tensor tokens = arange(0.0, 8.0, 1.0, DType::i64).reshape({1, 8});
    Tensor loss = model.loss(tokens, tokens);
    node = loss.grad_fn();
    ASSERT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());
}
