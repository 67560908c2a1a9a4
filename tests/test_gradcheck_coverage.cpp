// The gaps an audit of "every differentiable op is checked against central finite differences in float64"
// found, each closed by an f64 gradcheck (autograd/gradcheck.h). What the other test files already check
// (each op on short rows, contiguous and strided, with its main options) is not repeated here; what is:
//
//   - long rows, on every SIMD target: the other gradchecks use rows of at most 18 values, and an f64 vector
//     on AVX-512 holds 8, so the kernels' main loops (2 or 4 vectors a step) never ran under a gradcheck,
//     only their tails (softmax, log_softmax, causal_softmax, cross_entropy, the norms, add + norm, RoPE);
//   - the norms' other paths: wide rows (four at a time), rows past 2 KiB, many rows (the weight gradient
//     summed over chunks), a frozen input (no dx wanted), weight or bias alone, BatchNorm's register blocks
//     of channels, GroupNorm's (N, C) groups of several sizes and groups past its buffers, InstanceNorm's
//     modules; softmax and cross_entropy rows past 4 KiB;
//   - options no gradcheck took: cross_entropy's ignore_index and all rows ignored, the unary ops' strided
//     (scalar-loop) backward for log, sqrt, rsqrt, pow, a gradient wanted for the second operand only,
//     matmul past the GEMM's register tile and k-block and its split-K weight gradient, dropout p = 1,
//     attention and the FFN with dropout in training, the Block's Post-LN and DeepNorm with RMSNorm (the
//     fused add_rms_norm inside a block), casts through f16 and bf16;
//   - the CUDA backend's own backwards (softmax, log_softmax, cross-entropy, embedding, the device copy),
//     checked elsewhere only against the CPU's results: here by finite differences (run where a GPU is).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "block_test_util.h"
#include "normgrad.h"
#include "ops_test_util.h"
#include "simd_targets.h"
#include "test_cuda_common.h"

using namespace ng;
using ng::testing::expect_gradcheck;
using ng::testing::for_each_target;
using ng::testing::leaf;
using ng::testing::noncontig_leaf;
using ng::testing::small_block;

namespace {

// A random f64 leaf with values in [lo, hi) (log, sqrt, rsqrt and pow need positive inputs).
Tensor uniform_leaf(const Shape& shape, double lo, double hi, Generator& g) {
  return uniform(shape, lo, hi, g, DType::f64).requires_grad_();
}

// The same, NOT contiguous: drawn as the reversed shape and permuted back (as ng::testing::noncontig_leaf).
Tensor uniform_noncontig_leaf(const Shape& shape, double lo, double hi, Generator& g) {
  Shape rev(shape.rbegin(), shape.rend());
  std::vector<int64_t> perm;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
  Tensor t = uniform(rev, lo, hi, g, DType::f64).permute(perm).detach();
  EXPECT_FALSE(t.is_contiguous());
  t.requires_grad_();
  return t;
}

// A constant (no grad) f64 tensor.
Tensor constant(const Shape& shape, Generator& g, double mean = 0.0, double std = 1.0) {
  return randn(shape, g, DType::f64, mean, std);
}

// gradcheck, expecting success and exactly `want_checked` elements compared (-1: any number above 0).
void expect_gradcheck_n(const GradcheckFn& f, const std::vector<Tensor>& inputs, int64_t want_checked,
                        const std::string& what, GradcheckOptions o = {}) {
  GradcheckResult r = gradcheck(f, inputs, o);
  EXPECT_TRUE(r.ok) << what << ": " << r.message();
  if (want_checked >= 0)
    EXPECT_EQ(r.checked, want_checked) << what;
  else
    EXPECT_GT(r.checked, 0) << what;
}

int64_t numel_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts)
    if (t.requires_grad()) n += t.numel();
  return n;
}

}  // namespace

// =====================================================================================================
// 1. Elementwise (tensor/ops/elementwise.cpp)
// =====================================================================================================

// The strided backward is the scalar loop (unary_backward_scalar); the other file reaches it for log, sqrt,
// rsqrt and pow only through a contiguous add(square(x), 0.5). Here the input itself is strided, and in the
// second form the gradient arriving at the op is strided too (the op's output is transposed after it).
TEST(ElementwiseCoverage, GradcheckPositiveDomainOpsOnStridedInputs) {
  Generator g(11);
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> ops = {
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }},
      {"pow -1.5", [](const Tensor& x) { return pow(x, -1.5); }},
      {"pow 0", [](const Tensor& x) { return pow(x, 0.0); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"rdiv", [](const Tensor& x) { return rdiv(3.0, x); }},
  };
  for (auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    F f = op;
    expect_gradcheck([f](auto& in) { return f(in[0]); }, {uniform_noncontig_leaf({3, 5}, 0.5, 2.0, g)});
    expect_gradcheck([f](auto& in) { return f(in[0]).t(); }, {uniform_leaf({4, 6}, 0.5, 2.0, g)});
    expect_gradcheck([f](auto& in) { return f(in[0].t()).t(); }, {uniform_leaf({4, 6}, 0.5, 2.0, g)});
  }
}

// Rows of 37 values on every SIMD target: the Highway backward's main loop (the shapes elsewhere have at
// most 24 values, in one call each).
TEST(ElementwiseCoverage, GradcheckUnaryLongRowsEverySimdTarget) {
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> ops = {
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"square", [](const Tensor& x) { return square(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
  };
  const int ran = for_each_target([&] {
    Generator g(12);
    for (auto& [name, op] : ops) {
      SCOPED_TRACE(name);
      F f = op;
      const bool positive =
          std::string(name) == "log" || std::string(name) == "sqrt" || std::string(name) == "rsqrt";
      // (abs and relu: continuous draws do not land within eps of their kink at 0)
      Tensor x = positive ? uniform_leaf({2, 37}, 0.5, 2.0, g) : leaf({2, 37}, g);
      expect_gradcheck_n([f](auto& in) { return f(in[0]); }, {x}, 74, name);
    }
  });
  EXPECT_GE(ran, 1);
}

// A gradient for the second operand only: sub's need_b, mul's and div's need_a = false, the extremum's
// weights for b; with b broadcast.
TEST(ElementwiseCoverage, GradcheckBinarySecondOperandOnly) {
  Generator g(13);
  Tensor c = constant({3, 4}, g);
  expect_gradcheck([c](auto& in) { return sub(c, in[0]); }, {leaf({4}, g)});
  expect_gradcheck([c](auto& in) { return add(c, in[0]); }, {leaf({3, 1}, g)});
  expect_gradcheck([c](auto& in) { return mul(c, in[0]); }, {noncontig_leaf({3, 4}, g)});
  expect_gradcheck([c](auto& in) { return div(c, in[0]); }, {uniform_leaf({4}, 0.5, 2.0, g)});
  expect_gradcheck([c](auto& in) { return maximum(c, in[0]); }, {leaf({3, 4}, g)});
  expect_gradcheck([c](auto& in) { return minimum(c, in[0]); }, {leaf({4}, g)});
  expect_gradcheck([](auto& in) { return rsub(1.5, in[0]); }, {noncontig_leaf({2, 3}, g)});
}

// =====================================================================================================
// 2. Casts (Tensor::to: ToDtypeBackward) through the half types
// =====================================================================================================

// x -> f16 or bf16 -> f64: the backward converts the gradient back to x's dtype. The forward rounds to a step
// function of x, so the differences take a large step (a linear function: no truncation error) and a
// tolerance of the half type's rounding over that step.
TEST(CastCoverage, GradcheckF64ThroughHalfTypes) {
  Generator g(21);
  // f16 (11 significant bits): a step of 0.05; bf16 (8 bits): a step of 0.25. Both forms are linear in the
  // rounded value, so the relative error is the rounding over the step: below 2.5%, checked against 5%.
  GradcheckOptions o;
  o.atol = 1e-3;
  o.rtol = 0.05;
  o.eps = 0.05;
  Tensor x = uniform_leaf({3, 4}, -0.5, 0.5, g);
  expect_gradcheck([](auto& in) { return mul(in[0].to(DType::f16), 2.0).to(DType::f64); }, {x}, o);
  // through an op computed in f32 inside the half path (unary ops on f16: in_f32); tanh' >= 0.78 here
  expect_gradcheck([](auto& in) { return tanh(in[0].to(DType::f16)).to(DType::f64); }, {x}, o);
  o.eps = 0.25;
  expect_gradcheck([](auto& in) { return mul(in[0].to(DType::bf16), 2.0).to(DType::f64); }, {x}, o);
}

// =====================================================================================================
// 3. Matmul (tensor/ops/matmul.cpp)
// =====================================================================================================

// Shapes past the GEMM's register tile (kMR = 6 or 12 rows) and past its widest k-block (kKcMax = 1024):
// the other gradchecks multiply at most 5 x 5. And a gradient for b only (need_a = false), b column-major.
TEST(MatmulCoverage, GradcheckPastTheRegisterTileAndTheKBlock) {
  Generator g(31);
  auto mm = [](auto& in) { return matmul(in[0], in[1]); };
  expect_gradcheck_n(mm, {leaf({13, 9}, g), leaf({9, 17}, g)}, 13 * 9 + 9 * 17, "13 x 9 @ 9 x 17");
  expect_gradcheck_n(mm, {leaf({2, 1030}, g), leaf({1030, 3}, g)}, 2 * 1030 + 1030 * 3, "K = 1030");
  // b alone, column-major (a transposed view of a row-major leaf), broadcast over a's batch
  Tensor a = constant({2, 3, 5}, g);
  expect_gradcheck_n([a](auto& in) { return matmul(a, in[0].t()); }, {leaf({4, 5}, g)}, 20, "b only, b^T");
  expect_gradcheck_n([a](auto& in) { return matmul(a, in[0]); }, {leaf({5, 4}, g)}, 20, "b only");
  // the weight-gradient form with K = 600 rows (from kSplitKMin = 512 on: two k-blocks), b row-major and
  // column-major, and nn::F::linear over 600 rows (its weight enters transposed)
  Tensor rows = constant({600, 5}, g);
  expect_gradcheck_n([rows](auto& in) { return matmul(rows, in[0]); }, {leaf({5, 4}, g)}, 20, "K = 600");
  expect_gradcheck_n([rows](auto& in) { return matmul(rows, in[0].t()); }, {leaf({4, 5}, g)}, 20,
                     "K = 600, b^T");
  expect_gradcheck_n([rows](auto& in) { return F::linear(rows, in[0], in[1]); },
                     {leaf({4, 5}, g), leaf({4}, g)}, 24, "linear, 600 rows");
}

// =====================================================================================================
// 4. Reductions, indexing, dropout
// =====================================================================================================

TEST(ReduceCoverage, GradcheckLongRowsNegativeDimEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(41);
    expect_gradcheck([](auto& in) { return var(in[0], {-1}); }, {leaf({3, 37}, g)});
    expect_gradcheck([](auto& in) { return var(in[0], {0}, false, true); }, {noncontig_leaf({37, 2}, g)});
    expect_gradcheck([](auto& in) { return mean(in[0], {-1}); }, {leaf({2, 37}, g)});
    expect_gradcheck([](auto& in) { return max(in[0], -1, true); }, {leaf({3, 37}, g)});
    expect_gradcheck([](auto& in) { return max(in[0], -2); }, {noncontig_leaf({4, 3, 5}, g)});
  });
  EXPECT_GE(ran, 1);
}

TEST(IndexCoverage, GradcheckIdShapesZeroDimIndexAndNegativeDim) {
  Generator g(42);
  // ids of 1 and 3 dims, every row repeated somewhere
  Tensor ids1 = from_vector(std::vector<int64_t>{2, 0, 2, 4, 4}, {5});
  Tensor ids3 = from_vector(std::vector<int64_t>{1, 1, 0, 3, 4, 1, 0, 0}, {2, 2, 2});
  expect_gradcheck([ids1](auto& in) { return embedding(in[0], ids1); }, {leaf({5, 3}, g)});
  expect_gradcheck([ids3](auto& in) { return embedding(in[0], ids3); }, {leaf({5, 3}, g)});
  // the module is the same op on its weight
  nn::Embedding emb(5, 3, g, DType::f64);
  expect_gradcheck_n([&](auto&) { return emb(ids3); }, {emb.weight}, 15, "nn::Embedding");
  // a 0-d index drops the dim (like select); a negative dim
  Tensor i0 = from_vector(std::vector<int64_t>{2}, {1}).reshape({});
  Tensor i1 = from_vector(std::vector<int64_t>{3, 0, 3}, {3});
  expect_gradcheck([i0](auto& in) { return index_select(in[0], 1, i0); }, {leaf({3, 4, 2}, g)});
  expect_gradcheck([i1](auto& in) { return index_select(in[0], -1, i1); }, {noncontig_leaf({2, 3, 4}, g)});
  // masked_fill with a float mask of x's own shape, NaN counting as "fill"
  Tensor m = from_vector(std::vector<double>{0, 1, 0, NAN, 0, 0}, {2, 3}, DType::f64);
  expect_gradcheck([m](auto& in) { return masked_fill(in[0], m, -1.0); }, {leaf({2, 3}, g)});
  // cat where one input needs no gradient
  Tensor c = constant({2, 3}, g);
  expect_gradcheck([c](auto& in) { return cat({c, in[0], c}, 0); }, {leaf({1, 3}, g)});
}

TEST(DropoutCoverage, GradcheckEveryValueDroppedAndLongTensors) {
  Generator g(43);
  // p = 1: everything dropped, the gradient is zero (and the check is that it is exactly that)
  expect_gradcheck(
      [](auto& in) {
        Generator local(5);
        return dropout(in[0], 1.0, true, local);
      },
      {leaf({3, 4}, g)});
  // a tensor of 3 x 37 values: the mask's Philox blocks of four past the first few
  expect_gradcheck(
      [](auto& in) {
        Generator local(6);
        return mul(dropout(in[0], 0.3, true, local), in[0]);
      },
      {noncontig_leaf({3, 37}, g)});
  // the module, in training, with its generator reset before every evaluation
  Generator dgen(7);
  nn::Dropout drop(0.5, dgen);
  ASSERT_TRUE(drop.is_training());
  expect_gradcheck(
      [&](auto& in) {
        dgen.set_state(7, 0);
        return drop(in[0]);
      },
      {leaf({4, 5}, g)});
}

// =====================================================================================================
// 5. Softmax, log_softmax, causal_softmax, cross_entropy (tensor/ops/softmax.cpp, loss.cpp)
// =====================================================================================================

// Rows of 37 and 70: the SIMD row kernels' two-vector main loops (16 doubles a step on AVX-512). The other
// file's rows have at most 6 values, so only the tails ran under a gradcheck. log_softmax's backward uses
// the kernels' fast exp on the f64 path too.
TEST(SoftmaxCoverage, GradcheckLongRowsEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(51);
    for (int64_t L : {37, 70}) {
      SCOPED_TRACE("L = " + std::to_string(L));
      expect_gradcheck_n([](auto& in) { return softmax(in[0]); }, {leaf({2, L}, g)}, 2 * L, "softmax");
      expect_gradcheck_n([](auto& in) { return log_softmax(in[0]); }, {leaf({2, L}, g)}, 2 * L,
                         "log_softmax");
      // along dim 0 of a strided input: rows built by a permute
      expect_gradcheck_n([](auto& in) { return log_softmax(in[0], 0); }, {noncontig_leaf({L, 2}, g)}, 2 * L,
                         "log_softmax dim 0");
    }
    // causal rows of 1 .. 19 keys
    expect_gradcheck_n([](auto& in) { return causal_softmax(in[0]); }, {leaf({1, 19, 19}, g)}, 19 * 19,
                       "causal_softmax T = 19");
  });
  EXPECT_GE(ran, 1);
}

// Rows of 600 doubles (past 4 KiB: the row kernels' prefetch ahead), on the CPU's own target.
TEST(SoftmaxCoverage, GradcheckRowsPastFourKiB) {
  Generator g(55);
  expect_gradcheck_n([](auto& in) { return softmax(in[0]); }, {leaf({2, 600}, g)}, 1200, "softmax");
  expect_gradcheck_n([](auto& in) { return log_softmax(in[0]); }, {leaf({2, 600}, g)}, 1200, "log_softmax");
  Tensor t = from_vector(std::vector<int64_t>{5, 599}, {2});
  expect_gradcheck_n([t](auto& in) { return cross_entropy(in[0], t); }, {leaf({2, 600}, g)}, 1200, "CE");
}

// A 0-d input (reshaped to one row of one value): softmax is the constant 1 and log_softmax 0.
TEST(SoftmaxCoverage, GradcheckZeroDimInput) {
  Generator g(52);
  expect_gradcheck([](auto& in) { return mul(softmax(in[0]), in[0]); },
                   {randn(Shape{}, g, DType::f64).requires_grad_()});
  expect_gradcheck([](auto& in) { return add(log_softmax(in[0], -1), in[0]); },
                   {randn(Shape{}, g, DType::f64).requires_grad_()});
}

TEST(CrossEntropyCoverage, GradcheckLongRowsEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(53);
    for (int64_t V : {37, 70}) {
      SCOPED_TRACE("V = " + std::to_string(V));
      Tensor t = from_vector(std::vector<int64_t>{0, V - 1, V / 2}, {3});
      expect_gradcheck_n([t](auto& in) { return cross_entropy(in[0], t); }, {leaf({3, V}, g)}, 3 * V, "CE");
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(CrossEntropyCoverage, GradcheckIgnoreIndexAllIgnoredAndOneRow) {
  Generator g(54);
  // ignore_index = 2, a valid class: rows with target 2 are skipped, n = 3 of 5
  Tensor t = from_vector(std::vector<int64_t>{2, 0, 3, 2, 1}, {5});
  expect_gradcheck([t](auto& in) { return cross_entropy(in[0], t, 2); }, {leaf({5, 4}, g)});
  // ignore_index = -1
  Tensor tm = from_vector(std::vector<int64_t>{-1, 3, 1, -1}, {2, 2});
  expect_gradcheck([tm](auto& in) { return cross_entropy(in[0], tm, -1); }, {noncontig_leaf({2, 2, 4}, g)});
  // every row ignored: loss 0, gradient 0
  Tensor all = from_vector(std::vector<int64_t>{-100, -100, -100}, {3});
  Tensor x = leaf({3, 4}, g);
  expect_gradcheck([all](auto& in) { return cross_entropy(in[0], all); }, {x});
  {
    Tensor xx = x.detach().requires_grad_();
    Tensor loss = cross_entropy(xx, all);
    EXPECT_EQ(loss.item(), 0.0);
    loss.backward();
    EXPECT_EQ(ng::testing::max_abs_diff(xx.grad(), zeros({3, 4}, DType::f64)), 0.0);
  }
  // a single row: 1-D logits (V) and a 0-d target
  Tensor t0 = from_vector(std::vector<int64_t>{2}, {1}).reshape({});
  expect_gradcheck([t0](auto& in) { return cross_entropy(in[0], t0); }, {leaf({5}, g)});
}

// =====================================================================================================
// 6. Norms (nn/norms/)
// =====================================================================================================

// Row lengths: 37 (the kernels' 4-vector steps plus a tail), 300 (past 2 KiB of f64: not the pipelined
// short-row path), 1030 (past 16 KiB for w and b: wide rows, four at a time; 5 rows, so one group of four
// and one row alone). The other gradchecks' rows have at most 18 values.
TEST(LayerNormCoverage, GradcheckLongAndWideRowsEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(61);
    for (int64_t n : {37, 300}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      std::vector<Tensor> in = {leaf({3, n}, g), uniform_leaf({n}, 0.5, 1.5, g), leaf({n}, g)};
      expect_gradcheck_n([n](auto& v) { return F::layer_norm(v[0], {n}, v[1], v[2]); }, in, numel_of(in),
                         "layer_norm");
      expect_gradcheck_n([](auto& v) { return F::rms_norm(v[0], v[1]); }, {in[0], in[1]}, 3 * n + n,
                         "rms_norm");
    }
  });
  EXPECT_GE(ran, 1);
  // wide rows on the CPU's own target only (each check is 2 x 7210 forward passes)
  Generator g(62);
  const int64_t n = 1030;
  std::vector<Tensor> in = {leaf({5, n}, g), uniform_leaf({n}, 0.5, 1.5, g), leaf({n}, g)};
  expect_gradcheck_n([n](auto& v) { return F::layer_norm(v[0], {n}, v[1], v[2]); }, in, numel_of(in),
                     "layer_norm wide");
  expect_gradcheck_n([](auto& v) { return F::rms_norm(v[0], v[1]); }, {in[0], in[1]}, 6 * n, "rms_norm wide");
}

// need_dx = false (the input a constant, as a frozen embedding's output): the kernels run without dx. And
// weight or bias alone.
TEST(LayerNormCoverage, GradcheckFrozenInputAndWeightOrBiasAlone) {
  Generator g(63);
  Tensor x = constant({4, 7}, g, 0.3, 2.0);
  Tensor w = uniform_leaf({7}, 0.5, 1.5, g), b = leaf({7}, g);
  expect_gradcheck_n([x](auto& v) { return F::layer_norm(x, {7}, v[0], v[1]); }, {w, b}, 14, "ln frozen x");
  expect_gradcheck_n([x](auto& v) { return F::layer_norm(x, {7}, v[0]); }, {w}, 7, "ln frozen x, w only");
  expect_gradcheck_n([x](auto& v) { return F::rms_norm(x, v[0]); }, {w}, 7, "rms frozen x");
  // bias without weight, and weight without bias, with x
  Tensor xl = leaf({4, 7}, g);
  expect_gradcheck_n([](auto& v) { return F::layer_norm(v[0], {7}, Tensor(), v[1]); }, {xl, b}, 35,
                     "ln bias only");
  expect_gradcheck_n([](auto& v) { return F::layer_norm(v[0], {7}, v[1], Tensor()); }, {xl, w}, 35,
                     "ln weight only");
  // the module without bias (elementwise_affine, bias = false), and without affine parameters
  nn::LayerNorm ln(Shape{7}, 1e-5, true, false);
  nn::cast_(ln, DType::f64);
  {
    NoGradGuard no_grad;
    ln.weight.copy_(randn({7}, g, DType::f64, 1.0, 0.5));
  }
  ASSERT_FALSE(ln.bias.defined());
  expect_gradcheck_n([&](auto& v) { return ln(v[0]); }, {xl, ln.weight}, 35, "nn::LayerNorm bias = false");
  nn::LayerNorm ln0(7, 1e-5, false);
  expect_gradcheck_n([&](auto& v) { return ln0(v[0]); }, {xl}, 28, "nn::LayerNorm no affine");
}

// Many rows (rows x n >= 2 x 2^15 values): the weight and bias gradients are summed over several row chunks
// (norm_common.cpp, row_chunks). The input comes from a small matmul so its gradient is checked through 128
// values instead of 70,000.
TEST(LayerNormCoverage, GradcheckManyRowsWeightGradientOverChunks) {
  Generator g(64);
  const int64_t rows = 1100, n = 64;
  Tensor z = constant({rows, 3}, g);
  Tensor W = leaf({3, n}, g), w = uniform_leaf({n}, 0.5, 1.5, g), b = leaf({n}, g);
  expect_gradcheck_n([z, n](auto& v) { return F::layer_norm(matmul(z, v[0]), {n}, v[1], v[2]); }, {W, w, b},
                     3 * n + 2 * n, "layer_norm many rows");
  expect_gradcheck_n([z](auto& v) { return F::rms_norm(matmul(z, v[0]), v[1]); }, {W, w}, 3 * n + n,
                     "rms_norm many rows");
}

// (N, C) inputs (S = 1) with groups of 1, 3, 8, 12 and 40 channels (the (N, C) kernels: pairs, short rows,
// groups wider than a vector), and (N, C, S) with S = 37; every SIMD target.
TEST(GroupNormCoverage, GradcheckGroupSizesAndLongRowsEverySimdTarget) {
  struct Case {
    Shape shape;
    int64_t G;
  };
  const std::vector<Case> cases = {{{3, 6}, 6},  {{3, 6}, 2},     {{2, 16}, 2},   {{2, 24}, 2},
                                   {{2, 80}, 2}, {{2, 4, 37}, 2}, {{2, 3, 37}, 3}};
  const int ran = for_each_target([&] {
    Generator g(71);
    for (const Case& c : cases) {
      SCOPED_TRACE(shape_str(c.shape) + " G = " + std::to_string(c.G));
      const int64_t C = c.shape[1], G = c.G;
      std::vector<Tensor> in = {leaf(c.shape, g), uniform_leaf({C}, 0.5, 1.5, g), leaf({C}, g)};
      expect_gradcheck_n([G](auto& v) { return F::group_norm(v[0], G, v[1], v[2]); }, in, numel_of(in), "gn");
    }
  });
  EXPECT_GE(ran, 1);
}

// Groups past the kernels' buffers, on the CPU's own target: 1200 values (S = 600; kMaxBufferedGroup =
// 1024) and an (N, C) group of 2100 channels (kMaxPairGroup = 2048). And many rows (300 x 30 x 10 = 90,000
// values: the weight and bias gradients summed over two row chunks), the input frozen so that only the 60
// affine values are perturbed.
TEST(GroupNormCoverage, GradcheckLargeGroupsAndManyRows) {
  Generator g(73);
  std::vector<Tensor> in = {leaf({2, 4, 600}, g), uniform_leaf({4}, 0.5, 1.5, g), leaf({4}, g)};
  expect_gradcheck_n([](auto& v) { return F::group_norm(v[0], 2, v[1], v[2]); }, in, numel_of(in),
                     "gn groups of 1200");
  in = {leaf({2, 2100}, g), uniform_leaf({2100}, 0.5, 1.5, g), leaf({2100}, g)};
  expect_gradcheck_n([](auto& v) { return F::group_norm(v[0], 1, v[1], v[2]); }, in, numel_of(in),
                     "gn (N, C) group of 2100");
  Tensor x = constant({300, 30, 10}, g);
  expect_gradcheck_n([x](auto& v) { return F::group_norm(x, 3, v[0], v[1]); },
                     {uniform_leaf({30}, 0.5, 1.5, g), leaf({30}, g)}, 60, "gn many rows");
}

TEST(GroupNormCoverage, GradcheckFrozenInputWeightAloneAndInstanceNorm) {
  Generator g(72);
  Tensor x = constant({3, 4, 5}, g);
  Tensor w = uniform_leaf({4}, 0.5, 1.5, g), b = leaf({4}, g);
  expect_gradcheck_n([x](auto& v) { return F::group_norm(x, 2, v[0], v[1]); }, {w, b}, 8, "gn frozen x");
  Tensor xl = leaf({3, 4, 5}, g);
  expect_gradcheck_n([](auto& v) { return F::group_norm(v[0], 2, v[1]); }, {xl, w}, 64, "gn weight only");
  expect_gradcheck_n([](auto& v) { return F::group_norm(v[0], 2, Tensor(), v[1]); }, {xl, b}, 64,
                     "gn bias only");
  // InstanceNorm1d / 2d with affine parameters (G = C), batched and unbatched
  nn::InstanceNorm1d in1(4, 1e-5, 0.1, /*affine=*/true);
  nn::cast_(in1, DType::f64);
  {
    NoGradGuard no_grad;
    in1.weight.copy_(randn({4}, g, DType::f64, 1.0, 0.5));
    in1.bias.copy_(randn({4}, g, DType::f64));
  }
  expect_gradcheck_n([&](auto& v) { return in1(v[0]); }, {xl, in1.weight, in1.bias}, 68, "InstanceNorm1d");
  Tensor xu = leaf({4, 6}, g);
  expect_gradcheck_n([&](auto& v) { return in1(v[0]); }, {xu, in1.weight, in1.bias}, 32,
                     "InstanceNorm1d unbatched");
  nn::InstanceNorm2d in2(3);
  Tensor x2 = leaf({2, 3, 2, 3}, g);
  expect_gradcheck_n([&](auto& v) { return in2(v[0]); }, {x2}, 36, "InstanceNorm2d");
  // eval with running statistics: BatchNorm's eval path per channel
  nn::InstanceNorm1d tracked(4, 1e-5, 0.1, true, /*track_running_stats=*/true);
  nn::cast_(tracked, DType::f64);
  {
    NoGradGuard no_grad;
    tracked.running_mean.copy_(randn({4}, g, DType::f64));
    tracked.running_var.copy_(uniform({4}, 0.5, 2.0, g, DType::f64));
    tracked.weight.copy_(randn({4}, g, DType::f64, 1.0, 0.5));
    tracked.bias.copy_(randn({4}, g, DType::f64));
  }
  tracked.eval();
  expect_gradcheck_n([&](auto& v) { return tracked(v[0]); }, {xl, tracked.weight, tracked.bias}, 68,
                     "InstanceNorm1d eval, running stats");
}

// BatchNorm on (N, C) with 40 and 70 channels: the register blocks of 4 vectors of channels (32 doubles on
// AVX-512, 8 on SSE4) plus leftover channels; the other gradchecks have at most 6 channels. And (N, C, S)
// with S = 37. Training (batch statistics in the gradient) and eval.
TEST(BatchNormCoverage, GradcheckManyChannelsAndLongRowsEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(81);
    for (Shape s : std::vector<Shape>{{5, 40}, {3, 70}, {2, 3, 37}}) {
      SCOPED_TRACE(shape_str(s));
      const int64_t C = s[1];
      std::vector<Tensor> in = {leaf(s, g), uniform_leaf({C}, 0.5, 1.5, g), leaf({C}, g)};
      expect_gradcheck_n(
          [](auto& v) { return F::batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], /*training=*/true); }, in,
          numel_of(in), "batch_norm training");
      Tensor rm = constant({C}, g), rv = uniform({C}, 0.5, 2.0, g, DType::f64);
      expect_gradcheck_n([rm, rv](auto& v) { return F::batch_norm(v[0], rm, rv, v[1], v[2], false); }, in,
                         numel_of(in), "batch_norm eval");
    }
  });
  EXPECT_GE(ran, 1);
}

// (N, C, S) with S = 600, and many rows (300 x 240 = 72,000 values: the affine gradients over two row
// chunks; the input frozen), on the CPU's own target.
TEST(BatchNormCoverage, GradcheckLongRowsAndManyRows) {
  Generator g(83);
  std::vector<Tensor> in = {leaf({3, 3, 600}, g), uniform_leaf({3}, 0.5, 1.5, g), leaf({3}, g)};
  expect_gradcheck_n([](auto& v) { return F::batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); }, in,
                     numel_of(in), "bn S = 600");
  Tensor x = constant({300, 240}, g);
  expect_gradcheck_n([x](auto& v) { return F::batch_norm(x, Tensor(), Tensor(), v[0], v[1], true); },
                     {uniform_leaf({240}, 0.5, 1.5, g), leaf({240}, g)}, 480, "bn many rows");
}

TEST(BatchNormCoverage, GradcheckFrozenInputWeightAloneEvalWithoutAffine) {
  Generator g(82);
  Tensor x = constant({4, 3, 2}, g);
  Tensor w = uniform_leaf({3}, 0.5, 1.5, g), b = leaf({3}, g);
  expect_gradcheck_n([x](auto& v) { return F::batch_norm(x, Tensor(), Tensor(), v[0], v[1], true); }, {w, b},
                     6, "bn training frozen x");
  Tensor xl = leaf({4, 3, 2}, g);
  expect_gradcheck_n([](auto& v) { return F::batch_norm(v[0], Tensor(), Tensor(), v[1], Tensor(), true); },
                     {xl, w}, 27, "bn training weight only");
  expect_gradcheck_n([](auto& v) { return F::batch_norm(v[0], Tensor(), Tensor(), Tensor(), v[1], true); },
                     {xl, b}, 27, "bn training bias only");
  Tensor rm = constant({3}, g), rv = uniform({3}, 0.5, 2.0, g, DType::f64);
  expect_gradcheck_n([rm, rv](auto& v) { return F::batch_norm(v[0], rm, rv, Tensor(), Tensor(), false); },
                     {xl}, 24, "bn eval no affine");
  // BatchNorm2d, training without running statistics (no state changes across the passes)
  nn::BatchNorm2d bn(3, 1e-5, 0.1, true, /*track_running_stats=*/false);
  nn::cast_(bn, DType::f64);
  {
    NoGradGuard no_grad;
    bn.weight.copy_(randn({3}, g, DType::f64, 1.0, 0.5));
    bn.bias.copy_(randn({3}, g, DType::f64));
  }
  Tensor x4 = leaf({2, 3, 2, 2}, g);
  expect_gradcheck_n([&](auto& v) { return bn(v[0]); }, {x4, bn.weight, bn.bias}, 30, "BatchNorm2d");
}

// The fused residual add + norm (nn/norms/add_norm.cpp): rows of 37 and 300 on every target; 250 rows of 5
// (the backward rebuilds h in blocks of 102 rows: three blocks); a gradient for one operand only; RMSNorm
// without weight and LayerNorm with weight or bias alone; a broadcast residual (the unfused fallback).
TEST(AddNormCoverage, GradcheckLongRowsEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(91);
    for (int64_t n : {37, 300}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      std::vector<Tensor> in = {leaf({2, n}, g), leaf({2, n}, g), uniform_leaf({n}, 0.5, 1.5, g),
                                leaf({n}, g)};
      expect_gradcheck_n([n](auto& v) { return F::add_layer_norm(v[0], v[1], 0.7, {n}, v[2], v[3]); }, in,
                         numel_of(in), "add_layer_norm");
      expect_gradcheck_n([](auto& v) { return F::add_rms_norm(v[0], v[1], 1.3, v[2]); },
                         {in[0], in[1], in[2]}, 5 * n, "add_rms_norm");
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(AddNormCoverage, GradcheckManyRowsOneOperandAndPartialAffine) {
  Generator g(92);
  // 250 rows of 5: the backward's blocks of rows (sum_block_rows: 4096 bytes / (5 x 8) = 102 rows)
  std::vector<Tensor> in = {leaf({250, 5}, g), leaf({250, 5}, g), uniform_leaf({5}, 0.5, 1.5, g),
                            leaf({5}, g)};
  expect_gradcheck_n([](auto& v) { return F::add_layer_norm(v[0], v[1], 1.0, {5}, v[2], v[3]); }, in,
                     numel_of(in), "add_layer_norm 250 rows");
  expect_gradcheck_n([](auto& v) { return F::add_rms_norm(v[0], v[1], 0.5, v[2]); }, {in[0], in[1], in[2]},
                     2505, "add_rms_norm 250 rows");
  // one operand requires grad (x or a), the other is a constant
  Tensor c = constant({3, 6}, g);
  Tensor w = uniform_leaf({6}, 0.5, 1.5, g), b = leaf({6}, g);
  expect_gradcheck_n([c](auto& v) { return F::add_layer_norm(v[0], c, 2.0, {6}, v[1], v[2]); },
                     {leaf({3, 6}, g), w, b}, 30, "add_layer_norm x only");
  expect_gradcheck_n([c](auto& v) { return F::add_layer_norm(c, v[0], 2.0, {6}, v[1], v[2]); },
                     {leaf({3, 6}, g), w, b}, 30, "add_layer_norm a only");
  expect_gradcheck_n([c](auto& v) { return F::add_rms_norm(c, v[0], 0.5, v[1]); }, {leaf({3, 6}, g), w}, 24,
                     "add_rms_norm a only");
  // frozen x and a: only the affine parameters
  expect_gradcheck_n([c](auto& v) { return F::add_layer_norm(c, c, 0.5, {6}, v[0], v[1]); }, {w, b}, 12,
                     "add_layer_norm frozen inputs");
  // without weight; weight alone; bias alone
  Tensor x = leaf({3, 6}, g), a = leaf({3, 6}, g);
  expect_gradcheck_n([](auto& v) { return F::add_rms_norm(v[0], v[1], 0.5); }, {x, a}, 36,
                     "add_rms_norm no weight");
  expect_gradcheck_n([](auto& v) { return F::add_layer_norm(v[0], v[1], 0.5, {6}, v[2]); }, {x, a, w}, 42,
                     "add_layer_norm weight only");
  expect_gradcheck_n([](auto& v) { return F::add_layer_norm(v[0], v[1], 0.5, {6}, Tensor(), v[2]); },
                     {x, a, b}, 42, "add_layer_norm bias only");
  // a strided x and a broadcast a (the unfused fallback)
  expect_gradcheck_n([](auto& v) { return F::add_rms_norm(v[0], v[1], 0.5, v[2]); },
                     {noncontig_leaf({3, 6}, g), leaf({6}, g), w}, 30, "add_rms_norm broadcast a");
}

// =====================================================================================================
// 7. RoPE, Linear, attention, FFN, Block (nn/)
// =====================================================================================================

// Head size 40 (20 pairs: the SIMD rotation's full vectors, not only its tail), a contiguous input, and
// tables longer than T (sliced by the op).
TEST(RopeCoverage, GradcheckLongHeadsAndLongerTablesEverySimdTarget) {
  const int ran = for_each_target([] {
    Generator g(101);
    auto tables = rope_tables(6, 40, 1e4, DType::f64);
    expect_gradcheck_n([&](auto& in) { return apply_rope(in[0], tables.cos, tables.sin); },
                       {leaf({1, 3, 2, 40}, g)}, 240, "HS = 40");
    expect_gradcheck_n([&](auto& in) { return apply_rope(in[0].transpose(1, 2), tables.cos, tables.sin); },
                       {leaf({2, 2, 4, 40}, g)}, 640, "HS = 40, transposed");
  });
  EXPECT_GE(ran, 1);
}

TEST(LinearCoverage, GradcheckWithoutBias) {
  Generator g(102);
  nn::Linear lin(5, 3, /*bias=*/false, g, DType::f64);
  ASSERT_FALSE(lin.bias.defined());
  Tensor x = leaf({2, 4, 5}, g);
  expect_gradcheck_n([&](auto& in) { return lin(in[0]); }, {x, lin.weight}, 40 + 15, "Linear no bias");
  expect_gradcheck_n([&](auto& in) { return F::linear(in[0], in[1]); }, {leaf({5}, g), lin.weight}, 20,
                     "F::linear of a vector");
}

namespace {

// Gradcheck a module with respect to its input and every parameter; `before` runs ahead of every
// evaluation (resets a dropout generator).
void gradcheck_module(nn::Module& m, const Tensor& x, const std::function<void()>& before,
                      const std::string& what) {
  std::vector<Tensor> inputs = {x};
  for (auto& [name, p] : m.named_parameters()) inputs.push_back(p);
  expect_gradcheck_n(
      [&](const std::vector<Tensor>& in) {
        before();
        return m(in[0]);
      },
      inputs, numel_of(inputs), what);
}

}  // namespace

// Dropout on the attention weights and on the output, in training: the masks drawn again, the same, at
// every evaluation (the generator reset). The attention gradcheck elsewhere runs with dropout = 0 only.
TEST(AttentionCoverage, GradcheckDropoutInTrainingAndCausalWithoutRope) {
  ng::testing::ThreadsGuard threads(1);
  {
    nn::AttentionConfig cfg;
    cfg.dim = 8;
    cfg.n_heads = 2;
    cfg.rope_theta = 100.0;
    cfg.dropout = 0.3;
    Generator g(111), dgen(112);
    nn::CausalSelfAttention a(cfg, g, dgen);
    nn::cast_(a, DType::f64);
    ASSERT_TRUE(a.is_training());
    gradcheck_module(
        a, randn({2, 4, 8}, g, DType::f64).requires_grad_(), [&] { dgen.set_state(112, 0); },
        "attention dropout 0.3");
  }
  {
    nn::AttentionConfig cfg;  // causal, no RoPE, GQA 4:2, T = 5
    cfg.dim = 8;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 2;
    cfg.rope = false;
    Generator g(113);
    nn::CausalSelfAttention a(cfg, g);
    nn::cast_(a, DType::f64);
    gradcheck_module(
        a, randn({1, 5, 8}, g, DType::f64).requires_grad_(), [] {}, "attention causal, no RoPE");
  }
}

// Post-LN and DeepNorm with RMSNorm (the fused add_rms_norm inside a block: the other file runs both with
// LayerNorm only); an MLP with GELU and no biases; dropout in the FFN and the attention, in training.
TEST(BlockCoverage, GradcheckPostAndDeepNormWithRMSNormGeluAndDropout) {
  ng::testing::ThreadsGuard threads(1);
  for (const std::string& pos : {std::string("post"), std::string("deepnorm")}) {
    Generator g(121);
    nn::Block b(small_block(pos, "rmsnorm"), g);
    nn::cast_(b, DType::f64);
    gradcheck_module(
        b, randn({2, 3, 8}, g, DType::f64).requires_grad_(), [] {}, pos + " + rmsnorm");
  }
  {
    nn::BlockConfig cfg = small_block("pre", "layernorm");
    cfg.ffn.activation = "gelu";
    cfg.ffn.bias = false;
    cfg.ffn.dropout = 0.25;
    cfg.attn.dropout = 0.2;
    Generator g(122), dgen(123);
    nn::Block b(cfg, g, dgen);
    nn::cast_(b, DType::f64);
    gradcheck_module(
        b, randn({1, 4, 8}, g, DType::f64).requires_grad_(), [&] { dgen.set_state(123, 0); },
        "pre + layernorm, gelu MLP without bias, dropout");
  }
  {
    nn::FFNConfig cfg;  // SwiGLU on its own, with dropout
    cfg.dim = 8;
    cfg.kind = "swiglu";
    cfg.hidden = 12;
    cfg.dropout = 0.3;
    Generator g(124), dgen(125);
    nn::FeedForward f(cfg, g, dgen);
    nn::cast_(f, DType::f64);
    gradcheck_module(
        f, randn({2, 3, 8}, g, DType::f64).requires_grad_(), [&] { dgen.set_state(125, 0); },
        "SwiGLU dropout");
  }
}

// =====================================================================================================
// 8. The CUDA backend's own backwards (cuda/): by finite differences on the GPU, in f64. The leaves stay on
// the CPU (gradcheck's contract); the device copy's backward (ToDeviceBackward) takes the gradient back.
// Compiled with the backend; skipped where no GPU can be used.
// =====================================================================================================
#ifdef NORMGRAD_HAVE_CUDA
TEST(CudaGradcheckCoverage, SoftmaxLogSoftmaxCausalSoftmaxF64) {
  NG_REQUIRE_GPU();
  Generator g(131);
  for (int64_t L : {5, 37, 300}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    expect_gradcheck([](auto& in) { return on_cpu(softmax(on_gpu(in[0]), -1)); }, {leaf({3, L}, g)});
    expect_gradcheck([](auto& in) { return on_cpu(log_softmax(on_gpu(in[0]), -1)); }, {leaf({3, L}, g)});
  }
  expect_gradcheck([](auto& in) { return on_cpu(softmax(on_gpu(in[0]), 0)); }, {leaf({4, 3, 2}, g)});
  expect_gradcheck([](auto& in) { return on_cpu(causal_softmax(on_gpu(in[0]))); }, {leaf({2, 5, 5}, g)});
}

TEST(CudaGradcheckCoverage, CrossEntropyAndEmbeddingF64) {
  NG_REQUIRE_GPU();
  Generator g(132);
  for (int64_t V : {7, 300}) {
    SCOPED_TRACE("V = " + std::to_string(V));
    Tensor t = from_vector(std::vector<int64_t>{0, -100, V - 1, 3}, {2, 2});
    expect_gradcheck([t](auto& in) { return on_cpu(cross_entropy(on_gpu(in[0]), on_gpu(t))); },
                     {leaf({2, 2, V}, g)});
  }
  Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1, 0, 4, 4}, {2, 3});
  expect_gradcheck([ids](auto& in) { return on_cpu(embedding(on_gpu(in[0]), on_gpu(ids))); },
                   {leaf({6, 5}, g)});
}

TEST(CudaGradcheckCoverage, ElementwiseReductionsAndMaskF64) {
  NG_REQUIRE_GPU();
  Generator g(133);
  expect_gradcheck([](auto& in) { return on_cpu(gelu(mul(on_gpu(in[0]), on_gpu(in[1])))); },
                   {leaf({3, 4}, g), leaf({4}, g)});
  expect_gradcheck([](auto& in) { return on_cpu(div(on_gpu(in[0]), exp(on_gpu(in[1])))); },
                   {leaf({2, 3}, g), leaf({2, 1}, g)});
  expect_gradcheck([](auto& in) { return on_cpu(tanh(sum(on_gpu(in[0]), {1}))); }, {leaf({3, 5, 2}, g)});
  expect_gradcheck([](auto& in) { return on_cpu(mean(on_gpu(in[0]), {0}, true)); }, {leaf({4, 3}, g)});
  Tensor m = from_vector(std::vector<double>{1, 0, 0, 1}, {4}, DType::f64);
  expect_gradcheck([m](auto& in) { return on_cpu(masked_fill(on_gpu(in[0]), on_gpu(m), 0.0)); },
                   {leaf({3, 4}, g)});
}
#endif
