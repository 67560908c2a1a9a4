// Every CUDA kernel besides the norms against its CPU twin, on the same inputs. Skips without a device.
#include "tests/test_cuda_common.h"

#ifdef NORMGRAD_HAVE_CUDA
#include <cuda_runtime_api.h>  // CUDART_VERSION

#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "optim/adam.h"
#include "tensor/ops/index.h"
#include "tensor/ops/loss.h"
#include "tensor/ops/softmax.h"
#include "worst_error.h"

using ng::DType;
using ng::Tensor;
using ng::cuda::BinaryOp;
using ng::cuda::UnaryOp;

TEST(CudaOps, BinaryWithBroadcastingMatchesCpu) {
  NG_REQUIRE_GPU();
  ng::Generator gen(21);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = ng::randn({4, 1, 6}, gen, dt), b = ng::rand({5, 1}, gen, dt);
    b = ng::add(b, 0.5);  // keep division away from 0
    const std::pair<BinaryOp, Tensor (*)(const Tensor&, const Tensor&)> ops[] = {
        {BinaryOp::add, ng::add}, {BinaryOp::sub, ng::sub},         {BinaryOp::mul, ng::mul},
        {BinaryOp::div, ng::div}, {BinaryOp::maximum, ng::maximum}, {BinaryOp::minimum, ng::minimum}};
    for (auto& [op, cpu] : ops) {
      Tensor got = on_cpu(ng::cuda::binary(op, on_gpu(a), on_gpu(b)));
      EXPECT_LT(max_abs_diff(got, cpu(a, b)), dt == DType::f64 ? 1e-14 : 1e-6);
    }
    // a non-contiguous operand
    Tensor at = ng::randn({6, 4}, gen, dt);
    EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::binary(BinaryOp::mul, on_gpu(at).t(), on_gpu(at).t())),
                           ng::mul(at.t(), at.t())),
              1e-6);
  }
}

TEST(CudaOps, UnaryAndDerivativesMatchCpu) {
  NG_REQUIRE_GPU();
  ng::Generator gen(22);
  Tensor x = ng::add(ng::rand({3, 7}, gen, DType::f64), 0.1);  // positive, for log / sqrt / rsqrt
  const std::pair<UnaryOp, Tensor (*)(const Tensor&)> ops[] = {
      {UnaryOp::neg, ng::neg},       {UnaryOp::exp, ng::exp},         {UnaryOp::log, ng::log},
      {UnaryOp::sqrt, ng::sqrt},     {UnaryOp::rsqrt, ng::rsqrt},     {UnaryOp::abs, ng::abs},
      {UnaryOp::square, ng::square}, {UnaryOp::relu, ng::relu},       {UnaryOp::gelu, ng::gelu},
      {UnaryOp::silu, ng::silu},     {UnaryOp::sigmoid, ng::sigmoid}, {UnaryOp::tanh, ng::tanh}};
  Tensor dy = ng::randn({3, 7}, gen, DType::f64);
  for (auto& [op, cpu] : ops) {
    Tensor xr = x.detach().requires_grad_();
    Tensor y = cpu(xr);
    ng::sum(ng::mul(y, dy)).backward();
    Tensor yd = ng::cuda::unary(op, on_gpu(x));
    EXPECT_LT(max_abs_diff(on_cpu(yd), y.detach()), 1e-13) << int(op);
    Tensor dx = ng::cuda::unary_backward(op, on_gpu(x), yd, on_gpu(dy));
    EXPECT_LT(max_abs_diff(on_cpu(dx), xr.grad()), 1e-12) << int(op);
  }
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::unary(UnaryOp::pow, on_gpu(x), 2.5)), ng::pow(x, 2.5)), 1e-13);
  EXPECT_LT(
      max_abs_diff(on_cpu(ng::cuda::unary(UnaryOp::clamp, on_gpu(x), 0.3, 0.6)), ng::clamp(x, 0.3, 0.6)),
      0.0 + 1e-15);
}

TEST(CudaOps, CastsRoundLikeTheCpu) {
  NG_REQUIRE_GPU();
  ng::Generator gen(23);
  Tensor x = ng::randn({257}, gen, DType::f32, 0.0, 100.0);
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    Tensor got = on_cpu(ng::cuda::cast(on_gpu(x), dt));
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_EQ(max_abs_diff(got, x.to(dt)), 0.0) << ng::dtype_name(dt);  // round-to-nearest-even on both
  }
}

TEST(CudaOps, ReductionsMatchCpu) {
  NG_REQUIRE_GPU();
  ng::Generator gen(24);
  Tensor x = ng::randn({4, 5, 6}, gen, DType::f64);
  Tensor d = on_gpu(x);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::sum(d)), ng::sum(x)), 1e-12);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::sum(d, {1}, true)), ng::sum(x, {1}, true)), 1e-12);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::sum(d, {0, 2})), ng::sum(x, {0, 2})), 1e-12);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::mean(d, {-1})), ng::mean(x, {-1})), 1e-12);
  Tensor big = ng::randn({3, 100000}, gen);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::sum(on_gpu(big), {1})), ng::sum(big, {1})), 1e-3);
}

TEST(CudaOps, SoftmaxAndLogSoftmaxMatchCpu) {
  NG_REQUIRE_GPU();
  ng::Generator gen(25);
  for (int64_t L : {1, 33, 1000, 5000}) {
    Tensor x = ng::randn({7, L}, gen, DType::f64, 0.0, 3.0).requires_grad_();
    Tensor u = ng::randn({7, L}, gen, DType::f64);
    for (bool log_out : {false, true}) {
      x.zero_grad();
      Tensor y = log_out ? ng::log_softmax(x, -1) : ng::softmax(x, -1);
      ng::sum(ng::mul(y, u)).backward();
      Tensor gx = x.grad();
      x.zero_grad();
      Tensor yd = on_cpu(log_out ? ng::cuda::log_softmax(on_gpu(x)) : ng::cuda::softmax(on_gpu(x)));
      EXPECT_LT(max_abs_diff(yd, y.detach()), 1e-12) << L;
      ng::sum(ng::mul(yd, u)).backward();
      EXPECT_LT(max_abs_diff(x.grad(), gx), 1e-12) << L;
    }
  }
  // along dim 0 of a 3-D tensor
  Tensor x = ng::randn({5, 3, 4}, gen, DType::f64);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::softmax(on_gpu(x), 0)), ng::softmax(x, 0)), 1e-12);
}

TEST(CudaOps, CrossEntropyMatchesCpuWithIgnoredRows) {
  NG_REQUIRE_GPU();
  ng::Generator gen(26);
  for (int64_t V : {10, 8000}) {
    Tensor logits = ng::randn({4, 6, V}, gen, DType::f64).requires_grad_();
    Tensor targets = ng::randint(0, V, {4, 6}, gen);
    auto tv = targets.to_vector<int64_t>();
    tv[3] = -100;
    tv[10] = -100;
    targets = ng::from_vector(tv, {4, 6});
    Tensor loss = ng::cross_entropy(logits, targets);
    loss.backward();
    Tensor g = logits.grad();
    logits.zero_grad();
    Tensor loss_d = ng::cuda::cross_entropy(on_gpu(logits), on_gpu(targets));
    EXPECT_NEAR(on_cpu(loss_d).item(), loss.item(), 1e-12) << V;
    on_cpu(loss_d).backward();
    EXPECT_LT(max_abs_diff(logits.grad(), g), 1e-12) << V;
  }
  std::string msg = error_of([] {
    ng::cuda::cross_entropy(on_gpu(ng::zeros({2, 3})),
                            on_gpu(ng::from_vector(std::vector<int64_t>{1, 5}, {2})));
  });
  EXPECT_NE(msg.find("cuda::cross_entropy: target 5 at position 1 is out of range for 3 classes"),
            std::string::npos)
      << msg;
}

TEST(CudaOps, EmbeddingForwardAndDeterministicBackward) {
  NG_REQUIRE_GPU();
  ng::Generator gen(27);
  Tensor w = ng::randn({50, 16}, gen).requires_grad_();
  Tensor ids = ng::randint(0, 10, {8, 9}, gen);  // many repeats
  Tensor u = ng::randn({8, 9, 16}, gen);
  ng::sum(ng::mul(ng::embedding(w, ids), u)).backward();
  Tensor gw = w.grad();
  w.zero_grad();
  Tensor out = on_cpu(ng::cuda::embedding(on_gpu(w), on_gpu(ids)));
  EXPECT_EQ(max_abs_diff(out, ng::embedding(w.detach(), ids)), 0.0);
  ng::sum(ng::mul(out, u)).backward();
  EXPECT_LT(max_abs_diff(w.grad(), gw), 1e-5);
  // the scatter-add runs in position order: identical bits on every run
  Tensor d1 = on_cpu(ng::cuda::embedding_backward(on_gpu(u).reshape({-1, 16}), on_gpu(ids), 50));
  Tensor d2 = on_cpu(ng::cuda::embedding_backward(on_gpu(u).reshape({-1, 16}), on_gpu(ids), 50));
  EXPECT_EQ(d1.to_vector<double>(), d2.to_vector<double>());
  std::string msg = error_of([&] {
    ng::cuda::embedding(on_gpu(w), on_gpu(ng::from_vector(std::vector<int64_t>{3, 50}, {2})));
  });
  EXPECT_NE(msg.find("cuda::embedding: id 50 at position 1 is out of range for 50 embeddings"),
            std::string::npos)
      << msg;
}

TEST(CudaOps, AdamAndAdamWMatchTheCpuOptimizers) {
  NG_REQUIRE_GPU();
  ng::Generator gen(28);
  for (bool decoupled : {false, true}) {
    Tensor p = ng::randn({37}, gen).requires_grad_();
    Tensor p_gpu = on_gpu(p.detach());
    Tensor m = ng::cuda::zeros({37}, DType::f32, ng::Device::cuda(0)),
           v = ng::cuda::zeros({37}, DType::f32, ng::Device::cuda(0));
    ng::optim::AdamWOptions opt;
    opt.lr = 1e-2;
    opt.weight_decay = 0.1;
    std::unique_ptr<ng::optim::Adam> cpu_opt =
        decoupled ? std::make_unique<ng::optim::AdamW>(std::vector<Tensor>{p}, opt)
                  : std::make_unique<ng::optim::Adam>(std::vector<Tensor>{p}, ng::optim::AdamOptions(opt));
    for (int64_t t = 1; t <= 5; ++t) {
      Tensor g = ng::randn({37}, gen);
      p.set_grad(g);
      cpu_opt->step();
      ng::cuda::AdamStep s;
      s.lr = 1e-2;
      s.weight_decay = 0.1;
      s.decoupled = decoupled;
      s.step = t;
      ng::cuda::adam_step(p_gpu, on_gpu(g), m, v, s);
    }
    EXPECT_LT(max_abs_diff(on_cpu(p_gpu), p.detach()), 1e-6) << (decoupled ? "AdamW" : "Adam");
  }
}

// cuBLAS is loaded on first use, not linked (cuda/matmul.cpp). Loading needs no GPU, so this runs on every
// CUDA build with the toolkit installed: the soname and the three symbols we look up must be right.
TEST(CudaOps, CublasLoadsOnDemand) {
  EXPECT_EQ(ng::cuda::cublas_load_error(), "");
  // A library that is not there: the message names it and says what needs it.
  const std::string bad = ng::cuda::cublas_load_error("libcublas.so.999");
  EXPECT_NE(bad.find("cannot load libcublas.so.999"), std::string::npos) << bad;
  EXPECT_NE(bad.find("the CUDA matmul needs cuBLAS"), std::string::npos) << bad;
  // A library that is there but is not cuBLAS: the missing functions are named.
  const std::string wrong =
      ng::cuda::cublas_load_error("libcudart.so." + std::to_string(CUDART_VERSION / 1000));
  EXPECT_NE(wrong.find("lacks cublasCreate_v2"), std::string::npos) << wrong;
}

TEST(CudaOps, MatmulThroughCublasEveryTransposeAndBatch) {
  NG_REQUIRE_GPU();
  ng::Generator gen(29);
  Tensor a = ng::randn({5, 7}, gen, DType::f64), b = ng::randn({7, 3}, gen, DType::f64);
  Tensor da = on_gpu(a), db = on_gpu(b);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::matmul(da, db)), ng::matmul(a, b)), 1e-12);
  // a^T, b^T as views (CUBLAS_OP_T)
  Tensor at = ng::randn({7, 5}, gen, DType::f64), bt = ng::randn({3, 7}, gen, DType::f64);
  EXPECT_LT(
      max_abs_diff(on_cpu(ng::cuda::matmul(on_gpu(at).t(), on_gpu(bt).t())), ng::matmul(at.t(), bt.t())),
      1e-12);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::matmul(on_gpu(at).t(), db)), ng::matmul(at.t(), b)), 1e-12);
  // strided batches, and a shared 2-D b (the Linear case), with gradients
  Tensor x = ng::randn({2, 4, 6, 7}, gen, DType::f64).requires_grad_();
  Tensor y = ng::randn({2, 4, 7, 3}, gen, DType::f64).requires_grad_();
  Tensor w = ng::randn({3, 7}, gen, DType::f64).requires_grad_();
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::matmul(on_gpu(x), on_gpu(y))), ng::matmul(x, y)), 1e-12);
  auto r = ng::gradcheck(
      [](const std::vector<Tensor>& in) {
        return on_cpu(ng::cuda::matmul(ng::cuda::matmul(on_gpu(in[0]), on_gpu(in[1])), on_gpu(in[2]).t()));
      },
      {x, y, w});
  EXPECT_TRUE(r.ok) << r.message();
  // f32 and bf16 with f32 compute
  Tensor a32 = ng::randn({64, 96}, gen), b32 = ng::randn({96, 80}, gen);
  EXPECT_LT(max_abs_diff(on_cpu(ng::cuda::matmul(on_gpu(a32), on_gpu(b32))), ng::matmul(a32, b32)), 1e-3);
  Tensor got = on_cpu(ng::cuda::matmul(on_gpu(a32.to(DType::bf16)), on_gpu(b32.to(DType::bf16))));
  EXPECT_LT(
      max_abs_diff(got, ng::matmul(a32.to(DType::bf16).to(DType::f32), b32.to(DType::bf16).to(DType::f32))),
      0.5);
  std::string msg = error_of([&] { ng::cuda::matmul(da, on_gpu(ng::randn({5, 3}, gen, DType::f64))); });
  EXPECT_NE(msg.find("cuda::matmul: inner dimensions differ"), std::string::npos) << msg;
}

// ---- stop 40: what a reading of the backend found (the runs of these tests need a GPU; none was lent) ----

// A graph dropped without backward() is freed on the GPU too. cuda::cross_entropy's backward closure held
// its own loss (f.loss is the loss tensor for f32/f64 logits): loss -> grad_fn -> closure -> loss.
TEST(CudaOps, GraphDroppedWithoutBackwardIsFreed) {
  NG_REQUIRE_GPU();
  ng::Generator gen(41);
  const Tensor targets = on_gpu(ng::from_vector(std::vector<int64_t>{0, 3, 1}, {3}));
  const Tensor ids = on_gpu(ng::from_vector(std::vector<int64_t>{0, 2, 2}, {3}));
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"cross_entropy f64", [&](const Tensor& x) { return ng::cuda::cross_entropy(x, targets); }},
      {"cross_entropy bf16",
       [&](const Tensor& x) { return ng::cuda::cross_entropy(x.to(DType::bf16), targets); }},
      {"softmax", [](const Tensor& x) { return ng::cuda::softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return ng::cuda::log_softmax(x, -1); }},
      {"matmul", [](const Tensor& x) { return ng::cuda::matmul(x, x.t()); }},
      {"layer_norm", [](const Tensor& x) { return ng::cuda::layer_norm(x, {4}); }},
      {"rms_norm", [](const Tensor& x) { return ng::cuda::rms_norm(x); }},
      {"embedding", [&](const Tensor& x) { return ng::cuda::embedding(x, ids); }},
  };
  for (const auto& [name, f] : ops) {
    for (bool run_backward : {false, true}) {
      std::weak_ptr<ng::TensorImpl> out_impl;
      std::weak_ptr<ng::Node> node;
      {
        Tensor x = on_gpu(ng::randn({3, 4}, gen, DType::f64)).requires_grad_();
        Tensor out = f(x);
        ASSERT_TRUE(out.requires_grad()) << name;
        out_impl = out.impl_ptr();
        node = out.grad_fn();
        if (run_backward) ng::sum(out).backward();
      }
      EXPECT_TRUE(out_impl.expired()) << name << (run_backward ? " after backward" : "") << ": output kept";
      EXPECT_TRUE(node.expired()) << name << (run_backward ? " after backward" : "") << ": node kept";
    }
  }
}

// Non-finite logits give the CPU's log-sum-exp and loss: a +inf logit (not the target) makes the loss +inf,
// not NaN; a row of -inf has lse -inf; a NaN makes both NaN. V = 0 with rows is the CPU's error.
TEST(CudaOps, CrossEntropyOnNonFiniteLogitsIsTheCpus) {
  NG_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (int64_t V : {4, 5000}) {  // warp-per-row and block-per-row
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      std::vector<double> v(size_t(3 * V), 0.5);
      v[1] = inf;                                               // row 0: a +inf, target 0
      for (int64_t i = 0; i < V; ++i) v[size_t(V + i)] = -inf;  // row 1: all -inf (ignored)
      v[size_t(2 * V + 3)] = nan;                               // row 2: a NaN, target 0
      const Tensor logits = ng::from_vector(v, {3, V}).to(dt);
      const Tensor t = ng::from_vector(std::vector<int64_t>{0, -100, 0}, {3});
      const ng::cuda::CrossEntropyForward f =
          ng::cuda::cross_entropy_forward(on_gpu(logits), on_gpu(t), -100);
      const std::vector<double> lse = on_cpu(f.lse).to_vector<double>();
      EXPECT_EQ(lse[0], inf) << V << " " << ng::dtype_name(dt);
      EXPECT_EQ(lse[1], -inf) << V << " " << ng::dtype_name(dt);
      EXPECT_TRUE(std::isnan(lse[2])) << V << " " << ng::dtype_name(dt);
      // rows 0 and 2 count: the loss is (inf + nan) / 2 = nan on both sides; row 0 alone is +inf
      const Tensor t0 = ng::from_vector(std::vector<int64_t>{0, -100, -100}, {3});
      EXPECT_EQ(on_cpu(ng::cuda::cross_entropy(on_gpu(logits), on_gpu(t0))).item(),
                ng::cross_entropy(logits, t0).item());
      EXPECT_EQ(ng::cross_entropy(logits, t0).item(), inf);
    }
  }
  const std::string msg = error_of([] {
    ng::cuda::cross_entropy(on_gpu(ng::zeros({2, 0})),
                            on_gpu(ng::from_vector(std::vector<int64_t>{0, 0}, {2})));
  });
  EXPECT_NE(msg.find("cuda::cross_entropy: expected at least one class (V >= 1), got logits (2, 0)"),
            std::string::npos)
      << msg;
}

// add_ and mul_ compute in the compute dtype with the scalar in it, and round once into self, as on the CPU:
// the scalar used to be rounded to self's dtype first (f16: 1e-7 became 1.19e-7, 19% off; 3e-8 became the
// smallest subnormal, 2x). Not bit for bit: the CPU's mul_ multiplies in f64, and its add_ may fuse.
TEST(CudaOps, InPlaceScalarsAreNotRoundedToHalfFirst) {
  NG_REQUIRE_GPU();
  ng::Generator gen(42);
  // Two units in the last place of each dtype, relative to the value or to the dtype's smallest normal
  // number, whichever is larger (below it the spacing is fixed: f16's results of 1000 x 3e-8 are subnormal).
  struct Case {
    DType dt;
    double tol, smallest_normal;
  };
  const std::vector<Case> dtypes = {
      {DType::f16, 2e-3, 6.1e-5}, {DType::bf16, 1.6e-2, 1.2e-38}, {DType::f32, 2.4e-7, 1.2e-38}};
  auto worst_relative = [](const Tensor& got, const Tensor& want, double min_normal) {
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i)
      worst = ng::test::worse(worst, std::abs(g[i] - w[i]) / std::max(std::abs(w[i]), min_normal));
    return worst;
  };
  for (const auto& [dt, tol, min_normal] : dtypes) {
    for (double s : {1e-7, 3e-8, 0.3, 1.0 / 3.0}) {
      const Tensor a = ng::mul(ng::randn({1000}, gen), 1000.0).to(dt);
      const Tensor b = ng::randn({1000}, gen).to(dt);
      Tensor ca = a.clone(), ga = on_gpu(a);
      ng::mul_(ca, s);
      ng::mul_(ga, s);
      EXPECT_LE(worst_relative(on_cpu(ga), ca, min_normal), tol) << ng::dtype_name(dt) << " mul_ " << s;
      Tensor cb = a.clone(), gb = on_gpu(a);
      ng::add_(cb, b, s);
      ng::add_(gb, on_gpu(b), s);
      EXPECT_LE(worst_relative(on_cpu(gb), cb, min_normal), tol) << ng::dtype_name(dt) << " add_ " << s;
    }
  }
}

// masked_fill reads the mask in its own dtype: a tiny nonzero f32 mask value still masks an f16 x (it
// underflowed to 0 when the mask was converted to x's dtype), and an i64 mask is accepted, as on the CPU.
TEST(CudaOps, MaskedFillReadsTheMaskInItsOwnDtype) {
  NG_REQUIRE_GPU();
  const Tensor x = ng::from_vector(std::vector<double>{1, 2, 3, 4}, {4}).to(DType::f16);
  const Tensor mf = ng::from_vector(std::vector<double>{0, 1e-30, 0, std::nan("")}, {4});
  const Tensor mi = ng::from_vector(std::vector<int64_t>{0, 7, 0, -1}, {4});
  for (const Tensor& m : {mf, mf.to(DType::f64), mi}) {
    const Tensor want = ng::masked_fill(x, m, -5.0);
    EXPECT_EQ(want.to_vector<double>(), (std::vector<double>{1, -5, 3, -5}));
    EXPECT_EQ(on_cpu(ng::cuda::masked_fill(on_gpu(x), on_gpu(m), -5.0)).to_vector<double>(),
              want.to_vector<double>())
        << ng::dtype_name(m.dtype());
  }
}

// Entries of the backend that callers may use directly check what the core's ops check before them.
TEST(CudaOps, RawEntriesCheckTheirArguments) {
  NG_REQUIRE_GPU();
  ng::Generator gen(43);
  std::string msg = error_of([&] {
    ng::cuda::embedding_backward(on_gpu(ng::randn({2, 3}, gen)),
                                 on_gpu(ng::from_vector(std::vector<int64_t>{1, 9}, {2})), 5);
  });
  EXPECT_NE(msg.find("cuda::embedding_backward: id 9 at position 1 is out of range for 5 embeddings"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    ng::cuda::embedding_backward(on_gpu(ng::randn({3, 3}, gen)),
                                 on_gpu(ng::from_vector(std::vector<int64_t>{1, 2}, {2})), 5);
  });
  EXPECT_NE(msg.find("cuda::embedding_backward: expected dout of shape (2, C) for 2 ids, got (3, 3)"),
            std::string::npos)
      << msg;
  const Tensor x = on_gpu(ng::randn({1, 8, 2, 4}, gen));
  msg = error_of([&] {
    ng::cuda::rope_rotate(x, on_gpu(ng::ones({4, 2})), on_gpu(ng::ones({4, 2})), 1.0);  // 4 < T = 8
  });
  EXPECT_NE(msg.find("cuda::rope: tables have shapes (4, 2) and (4, 2), expected (>= 8, 2)"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    ng::cuda::rope_rotate(on_gpu(ng::randn({1, 2, 1, 3}, gen)), on_gpu(ng::ones({2, 1})),
                          on_gpu(ng::ones({2, 1})), 1.0);
  });
  EXPECT_NE(msg.find("cuda::rope: head size must be even"), std::string::npos) << msg;
}

// An embedding table of width 0 has a gradient of width 0 (the backward's reshape({-1, 0}) refused it).
TEST(CudaOps, EmbeddingOfWidthZero) {
  NG_REQUIRE_GPU();
  Tensor w = on_gpu(ng::zeros({5, 0})).requires_grad_();
  Tensor out = ng::cuda::embedding(w, on_gpu(ng::from_vector(std::vector<int64_t>{1, 4}, {2})));
  EXPECT_EQ(ng::shape_str(out.shape()), "(2, 0)");
  ng::sum(out).backward();
  EXPECT_EQ(ng::shape_str(w.grad().shape()), "(5, 0)");
}
#else
TEST(CudaOps, SkippedWithoutCudaBackend) {
  GTEST_SKIP() << "normgrad was built without the CUDA backend (NORMGRAD_CUDA=OFF or no nvcc)";
}
#endif
