// An undefined tensor (a default-constructed ng::Tensor) given to an op is an ng::Error that names the op and
// the argument: "matmul: b is an undefined tensor (a default-constructed ng::Tensor, ...)".
//
// Before each op checked its arguments (check_defined, tensor/tensor.h), every one of them failed inside,
// at its first read of the tensor, with "Tensor: use of an undefined tensor (...)": it named neither the op
// nor which of its arguments was the undefined one. Only matmul and the norms had a check of their own.
// The table below calls each public op once per tensor argument; a missing check shows as that message.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "normgrad.h"
#include "tests/block_test_util.h"
#include "tests/ops_test_util.h"

using namespace ng;
using ng::testing::error_of;
using ng::testing::small_block;

namespace {

struct Case {
  std::string op, arg;  // the message must start "<op>: <arg> is an undefined tensor ("
  std::function<void()> call;
};

void expect_named(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + "(" + c.arg + ")");
    const std::string want =
        c.op + ": " + c.arg +
        " is an undefined tensor (a default-constructed ng::Tensor, with no shape and no "
        "data: expected one made by a factory such as zeros() or from_vector(), or by an "
        "op)";
    EXPECT_EQ(error_of(c.call), want);
  }
}

}  // namespace

TEST(UndefinedTensor, ElementwiseOpsNameTheOpAndTheArgument) {
  const Tensor u, a = ones({2, 3});
  Tensor self = zeros({2, 3}), none;
  expect_named({
      {"add", "a", [&] { add(u, a); }},
      {"add", "b", [&] { add(a, u); }},
      {"sub", "b", [&] { sub(a, u); }},
      {"mul", "a", [&] { mul(u, a); }},
      {"div", "b", [&] { div(a, u); }},
      {"maximum", "a", [&] { maximum(u, a); }},
      {"minimum", "b", [&] { minimum(a, u); }},
      {"add", "a", [&] { add(u, 1.0); }},
      {"sub", "a", [&] { (void)(u - 1.0); }},
      {"mul", "a", [&] { (void)(2.0 * u); }},
      {"div", "a", [&] { div(u, 2.0); }},
      {"rsub", "a", [&] { rsub(1.0, u); }},
      {"rdiv", "a", [&] { rdiv(1.0, u); }},
      {"neg", "x", [&] { (void)(-u); }},
      {"exp", "x", [&] { exp(u); }},
      {"log", "x", [&] { log(u); }},
      {"sqrt", "x", [&] { sqrt(u); }},
      {"rsqrt", "x", [&] { rsqrt(u); }},
      {"abs", "x", [&] { abs(u); }},
      {"pow", "x", [&] { pow(u, 2.0); }},
      {"clamp", "x", [&] { clamp(u, 0.0, 1.0); }},
      {"square", "x", [&] { square(u); }},
      {"relu", "x", [&] { relu(u); }},
      {"gelu", "x", [&] { gelu(u); }},
      {"silu", "x", [&] { silu(u); }},
      {"sigmoid", "x", [&] { sigmoid(u); }},
      {"tanh", "x", [&] { ng::tanh(u); }},
      {"add_", "self", [&] { add_(none, a); }},
      {"add_", "other", [&] { add_(self, u); }},
      {"mul_", "self", [&] { mul_(none, 2.0); }},
  });
}

TEST(UndefinedTensor, ReductionsIndexingAndLossesNameTheOpAndTheArgument) {
  const Tensor u, a = ones({2, 3});
  const Tensor ids = from_vector(std::vector<int64_t>{0, 1}, {2});
  const Tensor mask = zeros({2, 3});
  expect_named({
      {"sum", "x", [&] { sum(u); }},
      {"sum", "x", [&] { sum(u, {0}); }},
      {"mean", "x", [&] { mean(u); }},
      {"mean", "x", [&] { mean(u, {1}, true); }},
      {"var", "x", [&] { var(u, {0}); }},
      {"max", "x", [&] { max(u, 0); }},
      {"argmax", "x", [&] { argmax(u, 0); }},
      {"softmax", "x", [&] { softmax(u); }},
      {"log_softmax", "x", [&] { log_softmax(u); }},
      {"causal_softmax", "x", [&] { causal_softmax(u); }},
      {"matmul", "a", [&] { matmul(u, a); }},
      {"matmul", "b", [&] { matmul(a, u); }},
      {"matmul_naive", "a", [&] { matmul_naive(u, a); }},
      {"matmul_naive", "b", [&] { matmul_naive(a, u); }},
      {"embedding", "weight", [&] { embedding(u, ids); }},
      {"embedding", "ids", [&] { embedding(a, u); }},
      {"index_select", "x", [&] { index_select(u, 0, ids); }},
      {"index_select", "index", [&] { index_select(a, 0, u); }},
      {"masked_fill", "x", [&] { masked_fill(u, mask, 0.0); }},
      {"masked_fill", "mask", [&] { masked_fill(a, u, 0.0); }},
      {"cross_entropy", "logits", [&] { cross_entropy(u, ids); }},
      {"cross_entropy", "targets", [&] { cross_entropy(a, u); }},
      {"dropout", "x", [&] { dropout(u, 0.5, true); }},
      {"dropout", "x", [&] { dropout(u, 0.5, false); }},  // eval returned the undefined x as its result
      {"cat", "tensors[1]",
       [&] {
         cat({a, u}, 0);
       }},
      {"stack", "tensors[0]",
       [&] {
         stack({u, a}, 0);
       }},
  });
}

TEST(UndefinedTensor, TensorMethodsNameTheOp) {
  const Tensor u, a = ones({2, 3});
  Tensor none, dest = zeros({2, 3});
  expect_named({
      {"reshape", "self", [&] { u.reshape({6}); }},
      {"view", "self", [&] { u.view({6}); }},
      {"flatten", "self", [&] { u.flatten(); }},
      {"permute", "self",
       [&] {
         u.permute({1, 0});
       }},
      {"transpose", "self", [&] { u.transpose(0, 1); }},
      {"transpose", "self", [&] { u.t(); }},
      {"slice", "self", [&] { u.slice(0, 0, 1); }},
      {"narrow", "self", [&] { u.narrow(0, 0, 1); }},
      {"select", "self", [&] { u.select(0, 0); }},
      {"expand", "self",
       [&] {
         u.expand({2, 3});
       }},
      {"squeeze", "self", [&] { u.squeeze(0); }},
      {"unsqueeze", "self", [&] { u.unsqueeze(0); }},
      {"to", "self", [&] { u.to(DType::f64); }},
      {"to", "self", [&] { u.to(Device::cpu()); }},
      {"contiguous", "self", [&] { u.contiguous(); }},
      {"clone", "self", [&] { u.clone(); }},
      {"detach", "self", [&] { u.detach(); }},
      {"item", "self", [&] { u.item(); }},
      {"to_vector", "self", [&] { u.to_vector<float>(); }},
      {"fill_", "self", [&] { none.fill_(1.0); }},
      {"copy_", "self", [&] { none.copy_(a); }},
      {"copy_", "src", [&] { dest.copy_(u); }},
      {"requires_grad_", "self", [&] { none.requires_grad_(); }},
      {"set_grad", "self", [&] { none.set_grad(a); }},
      {"retain_grad", "self", [&] { none.retain_grad(); }},
      {"backward", "self", [&] { u.backward(); }},
      {"zeros_like", "t", [&] { zeros_like(u); }},
      {"ones_like", "t", [&] { ones_like(u); }},
      {"empty_like", "t", [&] { empty_like(u); }},
      {"uniform_", "t", [&] { uniform_(none, 0.0, 1.0); }},
      {"normal_", "t", [&] { normal_(none, 0.0, 1.0); }},
      {"grad_norm", "params[1]",
       [&] {
         optim::grad_norm({a, u});
       }},
      {"clip_grad_norm_", "params[0]", [&] { optim::clip_grad_norm_({u}, 1.0); }},
      {"save_npy", "t", [&] { save_npy(::testing::TempDir() + "/never_written.npy", u); }},
  });
  // Accessors are not ops: they keep the generic message, which says what an undefined tensor is.
  EXPECT_EQ(
      error_of([&] { u.shape(); }),
      "Tensor: use of an undefined tensor (a default-constructed ng::Tensor, with no shape and no data: "
      "expected one made by a factory such as zeros() or from_vector(), or by an op)");
}

TEST(UndefinedTensor, NormsRopeAndModulesNameTheOpAndTheArgument) {
  const Tensor u, x = randn({2, 4, 8});
  const auto tables = rope_tables(4, 4, 100.0, DType::f32);
  const Tensor heads = randn({2, 4, 2, 4});
  nn::Linear linear(8, 8);
  nn::Dropout drop(0.5);
  drop.eval();
  nn::CausalSelfAttention attn(small_block("pre", "rmsnorm").attn);
  nn::FeedForward ffn(small_block("pre", "rmsnorm").ffn);
  nn::Block block(small_block("pre", "rmsnorm"));
  nn::TinyLMConfig cfg;
  cfg.vocab_size = 5;
  cfg.dim = 8;
  cfg.n_heads = 2;
  nn::TinyLM lm(cfg);
  expect_named({
      {"layer_norm", "x", [&] { F::layer_norm(u, {8}); }},
      {"rms_norm", "x", [&] { F::rms_norm(u); }},
      {"group_norm", "x", [&] { F::group_norm(u, 2); }},
      {"batch_norm", "x", [&] { F::batch_norm(u, Tensor(), Tensor(), Tensor(), Tensor(), true); }},
      {"add_layer_norm", "x", [&] { F::add_layer_norm(u, x, 1.0, {8}); }},
      {"add_layer_norm", "a", [&] { F::add_layer_norm(x, u, 1.0, {8}); }},
      {"add_rms_norm", "x", [&] { F::add_rms_norm(u, x, 1.0); }},
      {"add_rms_norm", "a", [&] { F::add_rms_norm(x, u, 1.0); }},
      {"rope", "x", [&] { apply_rope(u, tables.cos, tables.sin); }},
      {"rope", "cos", [&] { apply_rope(heads, u, tables.sin); }},
      {"rope", "sin", [&] { apply_rope_reference(heads, tables.cos, u); }},
      {"linear", "x", [&] { linear.forward(u); }},
      {"linear", "weight", [&] { F::linear(x, u, Tensor()); }},
      {"Dropout", "x", [&] { drop.forward(u); }},  // in eval it returned the undefined x
      {"CausalSelfAttention", "x", [&] { attn.forward(u); }},
      {"FeedForward", "x", [&] { ffn.forward(u); }},
      {"Block", "x", [&] { block.forward(u); }},
      {"TinyLM", "tokens", [&] { lm.forward(u); }},
      {"embedding", "ids", [&] { lm.tok_emb->forward(u); }},
  });
}
