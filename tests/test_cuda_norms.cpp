// The CUDA norms against their CPU twins, gradchecked on the GPU in f64, and checked for determinism.
// Every test skips (GTEST_SKIP) without a CUDA device; without the CUDA backend only the skip marker is
// built.
#include "tests/test_cuda_common.h"

#ifdef NORMGRAD_HAVE_CUDA
#include "nn/norms/layer_norm.h"
#include "nn/norms/rms_norm.h"

using ng::DType;
using ng::Tensor;

namespace {

// Bitwise equality of two CPU tensors (determinism checks).
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// GroupNorm reference composed from core ops: x (N, C, *) -> groups over (C/G, *).
Tensor group_norm_reference(const Tensor& x, int64_t G, const Tensor& w, const Tensor& b, double eps) {
  const int64_t N = x.size(0), C = x.size(1);
  Tensor xg = x.reshape({N, G, -1});
  Tensor mu = ng::mean(xg, {2}, true), var = ng::var(xg, {2}, false, true);
  Tensor y = ng::div(ng::sub(xg, mu), ng::sqrt(ng::add(var, eps))).reshape(x.shape());
  ng::Shape cshape(size_t(x.dim()), 1);
  cshape[1] = C;
  return ng::add(ng::mul(y, w.reshape(cshape)), b.reshape(cshape));
}

// BatchNorm (training) reference: statistics over every dim but the channel dim.
Tensor batch_norm_reference(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor* mean_out,
                            Tensor* var_unbiased_out) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor mu = ng::mean(x, dims, true), var = ng::var(x, dims, false, true);
  if (mean_out) *mean_out = ng::mean(x, dims);
  if (var_unbiased_out) *var_unbiased_out = ng::var(x, dims, true);
  ng::Shape cshape(size_t(x.dim()), 1);
  cshape[1] = x.size(1);
  Tensor y = ng::div(ng::sub(x, mu), ng::sqrt(ng::add(var, eps)));
  return ng::add(ng::mul(y, w.reshape(cshape)), b.reshape(cshape));
}

double tol(DType dt) {
  return dt == DType::f64 ? 1e-10 : (dt == DType::f32 ? 2e-5 : 2e-2);
}

}  // namespace

// ---- LayerNorm / RMSNorm vs the CPU reference halves: every dtype, warp- and block-per-row, odd lengths
// ----
TEST(CudaNorms, LayerNormMatchesCpuForwardAndBackward) {
  NG_REQUIRE_GPU();
  ng::Generator gen(11);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const DType acc = ng::compute_dtype(dt);
    for (int64_t n : {1, 7, 64, 1000, 4096, 4100, 12288}) {
      const int64_t rows = n > 4096 ? 3 : 37;
      Tensor x = ng::randn({rows, n}, gen, dt, 3.0, 2.0);
      Tensor dy = ng::randn({rows, n}, gen, dt);
      Tensor w = ng::randn({n}, gen, acc), b = ng::randn({n}, gen, acc);
      auto cpu = ng::norms::layer_norm_forward(x, n, w, b, 1e-5, ng::norms::Impl::reference);
      auto gpu = ng::cuda::layer_norm_forward(on_gpu(x), n, on_gpu(w), on_gpu(b), 1e-5);
      EXPECT_LT(max_abs_diff(on_cpu(gpu.y), cpu.y), 4 * tol(dt)) << ng::dtype_name(dt) << " n=" << n;
      EXPECT_LT(max_abs_diff(on_cpu(gpu.mean), cpu.mean), tol(dt)) << n;
      EXPECT_LT(max_abs_diff(on_cpu(gpu.rstd), cpu.rstd), tol(dt) * 10) << n;
      auto gcpu = ng::norms::layer_norm_backward(dy, x, cpu.mean, cpu.rstd, w, true, true, true,
                                                 ng::norms::Impl::reference);
      auto ggpu = ng::cuda::layer_norm_backward(on_gpu(dy), on_gpu(x), gpu.mean, gpu.rstd, on_gpu(w), true,
                                                true, true);
      EXPECT_LT(max_abs_diff(on_cpu(ggpu.dx), gcpu.dx), 8 * tol(dt)) << ng::dtype_name(dt) << " n=" << n;
      EXPECT_LT(max_abs_diff(on_cpu(ggpu.dweight), gcpu.dweight), 1e3 * tol(dt)) << n;
      EXPECT_LT(max_abs_diff(on_cpu(ggpu.dbias), gcpu.dbias), 1e3 * tol(dt)) << n;
    }
  }
}

TEST(CudaNorms, RMSNormMatchesCpuForwardAndBackward) {
  NG_REQUIRE_GPU();
  ng::Generator gen(12);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const DType acc = ng::compute_dtype(dt);
    for (int64_t n : {1, 5, 256, 4096, 8200}) {
      const int64_t rows = 19;
      Tensor x = ng::randn({rows, n}, gen, dt);
      Tensor dy = ng::randn({rows, n}, gen, dt);
      Tensor w = ng::randn({n}, gen, acc);
      auto cpu = ng::norms::rms_norm_forward(x, n, w, 1e-5, ng::norms::Impl::reference);
      auto gpu = ng::cuda::rms_norm_forward(on_gpu(x), n, on_gpu(w), 1e-5);
      EXPECT_FALSE(gpu.mean.defined());
      EXPECT_LT(max_abs_diff(on_cpu(gpu.y), cpu.y), 4 * tol(dt)) << ng::dtype_name(dt) << " n=" << n;
      auto gcpu = ng::norms::rms_norm_backward(dy, x, cpu.rstd, w, true, true, ng::norms::Impl::reference);
      auto ggpu = ng::cuda::rms_norm_backward(on_gpu(dy), on_gpu(x), gpu.rstd, on_gpu(w), true, true);
      EXPECT_LT(max_abs_diff(on_cpu(ggpu.dx), gcpu.dx), 8 * tol(dt)) << ng::dtype_name(dt) << " n=" << n;
      EXPECT_LT(max_abs_diff(on_cpu(ggpu.dweight), gcpu.dweight), 1e3 * tol(dt)) << n;
    }
  }
}

TEST(CudaNorms, LayerNormLargeMeanSmallStdInF32) {
  NG_REQUIRE_GPU();
  // mean 1e4, std 1e-2: the centred two-pass with a shift must still find the std (E[x^2]-E[x]^2 would not).
  ng::Generator gen(13);
  Tensor x = ng::randn({8, 1024}, gen, DType::f32, 1e4, 1e-2);
  auto cpu = ng::norms::layer_norm_forward(x, 1024, Tensor(), Tensor(), 1e-5, ng::norms::Impl::reference);
  auto gpu = ng::cuda::layer_norm_forward(on_gpu(x), 1024, Tensor(), Tensor(), 1e-5);
  EXPECT_LT(max_abs_diff(on_cpu(gpu.y), cpu.y), 2e-2);
  EXPECT_LT(max_abs_diff(on_cpu(gpu.rstd), cpu.rstd), 1.0);  // rstd ~ 100
}

// ---- the autograd ops: same outputs and gradients as F:: on the CPU, and gradcheck in f64 on the GPU ----
TEST(CudaNorms, AutogradOpsMatchCpuFunctional) {
  NG_REQUIRE_GPU();
  ng::Generator gen(14);
  Tensor x = ng::randn({4, 6, 32}, gen).requires_grad_();
  Tensor w = ng::randn({32}, gen).requires_grad_(), b = ng::randn({32}, gen).requires_grad_();
  Tensor u = ng::randn({4, 6, 32}, gen);
  ng::sum(ng::mul(ng::F::layer_norm(x, {32}, w, b), u)).backward();
  Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
  x.zero_grad();
  w.zero_grad();
  b.zero_grad();
  Tensor y = on_cpu(ng::cuda::layer_norm(on_gpu(x), {32}, on_gpu(w), on_gpu(b)));
  ng::sum(ng::mul(y, u)).backward();
  EXPECT_LT(max_abs_diff(x.grad(), gx), 1e-4);
  EXPECT_LT(max_abs_diff(w.grad(), gw), 1e-3);
  EXPECT_LT(max_abs_diff(b.grad(), gb), 1e-3);
}

TEST(CudaNorms, GradcheckAllNormsOnGpuF64) {
  NG_REQUIRE_GPU();
  ng::Generator gen(15);
  auto f64 = [&](const ng::Shape& s) { return ng::randn(s, gen, DType::f64).requires_grad_(); };
  // LayerNorm over the last two dims, from a non-contiguous x.
  {
    Tensor x = f64({5, 3, 4}), w = f64({3, 4}), b = f64({3, 4});
    auto r = ng::gradcheck(
        [](const std::vector<Tensor>& in) {
          return on_cpu(ng::cuda::layer_norm(on_gpu(in[0]).transpose(0, 1).transpose(0, 1), {3, 4},
                                             on_gpu(in[1]), on_gpu(in[2])));
        },
        {x, w, b});
    EXPECT_TRUE(r.ok) << r.message();
  }
  {
    Tensor x = f64({6, 10}), w = f64({10});
    auto r = ng::gradcheck(
        [](const std::vector<Tensor>& in) {
          return on_cpu(ng::cuda::rms_norm(on_gpu(in[0]), on_gpu(in[1])));
        },
        {x, w});
    EXPECT_TRUE(r.ok) << r.message();
  }
  {
    Tensor x = f64({3, 6, 5}), w = f64({6}), b = f64({6});
    auto r = ng::gradcheck(
        [](const std::vector<Tensor>& in) {
          return on_cpu(ng::cuda::group_norm(on_gpu(in[0]), 3, on_gpu(in[1]), on_gpu(in[2])));
        },
        {x, w, b});
    EXPECT_TRUE(r.ok) << r.message();
  }
  for (bool training : {true, false}) {
    Tensor x = f64({4, 3, 5}), w = f64({3}), b = f64({3});
    // Fresh running statistics each call, so the finite-difference passes do not see each other's updates.
    auto r = ng::gradcheck(
        [training](const std::vector<Tensor>& in) {
          Tensor rm = on_gpu(ng::full({3}, 0.5, DType::f64)), rv = on_gpu(ng::full({3}, 2.0, DType::f64));
          return on_cpu(ng::cuda::batch_norm(on_gpu(in[0]), rm, rv, on_gpu(in[1]), on_gpu(in[2]), training));
        },
        {x, w, b});
    EXPECT_TRUE(r.ok) << (training ? "train: " : "eval: ") << r.message();
  }
}

// ---- GroupNorm / BatchNorm vs references composed from core ops ----
TEST(CudaNorms, GroupNormMatchesReference) {
  NG_REQUIRE_GPU();
  ng::Generator gen(16);
  for (int64_t G : {1, 2, 8}) {
    Tensor x = ng::randn({3, 8, 7, 5}, gen, DType::f64), w = ng::randn({8}, gen, DType::f64),
           b = ng::randn({8}, gen, DType::f64);
    Tensor ref = group_norm_reference(x, G, w, b, 1e-5);
    Tensor y = on_cpu(ng::cuda::group_norm(on_gpu(x), G, on_gpu(w), on_gpu(b)));
    EXPECT_LT(max_abs_diff(y, ref), 1e-10) << "G=" << G;
  }
  // f32, a long group (block-per-row) and an odd one (no 128-bit loads).
  for (ng::Shape s : {ng::Shape{2, 4, 3000}, ng::Shape{2, 6, 7}}) {
    Tensor x = ng::randn(s, gen), w = ng::randn({s[1]}, gen), b = ng::randn({s[1]}, gen);
    Tensor y = on_cpu(ng::cuda::group_norm(on_gpu(x), 2, on_gpu(w), on_gpu(b)));
    EXPECT_LT(max_abs_diff(y, group_norm_reference(x, 2, w, b, 1e-5)), 1e-4);
  }
}

TEST(CudaNorms, BatchNormTrainUpdatesRunningStatsThenEval) {
  NG_REQUIRE_GPU();
  ng::Generator gen(17);
  const double m = 0.1;
  Tensor rm = on_gpu(ng::zeros({4}, DType::f64)), rv = on_gpu(ng::ones({4}, DType::f64));
  std::vector<double> rm_ref(4, 0.0), rv_ref(4, 1.0);
  Tensor w = ng::randn({4}, gen, DType::f64), b = ng::randn({4}, gen, DType::f64);
  for (int step = 0; step < 3; ++step) {
    Tensor x = ng::randn({8, 4, 3}, gen, DType::f64, 1.0 + step, 2.0);
    Tensor mean, var_unbiased;
    Tensor ref = batch_norm_reference(x, w, b, 1e-5, &mean, &var_unbiased);
    Tensor y = on_cpu(ng::cuda::batch_norm(on_gpu(x), rm, rv, on_gpu(w), on_gpu(b), true, m));
    EXPECT_LT(max_abs_diff(y, ref), 1e-10);
    auto mv = mean.to_vector<double>(), vv = var_unbiased.to_vector<double>();
    for (int c = 0; c < 4; ++c) {
      rm_ref[size_t(c)] = (1 - m) * rm_ref[size_t(c)] + m * mv[size_t(c)];
      rv_ref[size_t(c)] = (1 - m) * rv_ref[size_t(c)] + m * vv[size_t(c)];
    }
    EXPECT_LT(max_abs_diff(on_cpu(rm), ng::from_vector(rm_ref, {4}, DType::f64)), 1e-12);
    EXPECT_LT(max_abs_diff(on_cpu(rv), ng::from_vector(rv_ref, {4}, DType::f64)), 1e-12);
  }
  // eval: normalise with the running statistics, leave them untouched.
  Tensor x = ng::randn({5, 4, 3}, gen, DType::f64);
  Tensor y = on_cpu(ng::cuda::batch_norm(on_gpu(x), rm, rv, on_gpu(w), on_gpu(b), false, m));
  ng::Shape cs{1, 4, 1};
  Tensor ref = ng::add(
      ng::mul(ng::div(ng::sub(x, on_cpu(rm).reshape(cs)), ng::sqrt(ng::add(on_cpu(rv).reshape(cs), 1e-5))),
              w.reshape(cs)),
      b.reshape(cs));
  EXPECT_LT(max_abs_diff(y, ref), 1e-12);
  EXPECT_LT(max_abs_diff(on_cpu(rm), ng::from_vector(rm_ref, {4}, DType::f64)), 1e-12);
}

// ---- determinism: dweight/dbias reduced without atomics -> identical bits on every run ----
TEST(CudaNorms, WeightGradientsAreBitwiseDeterministic) {
  NG_REQUIRE_GPU();
  ng::Generator gen(18);
  Tensor x = on_gpu(ng::randn({2048, 768}, gen)), dy = on_gpu(ng::randn({2048, 768}, gen));
  auto st = ng::cuda::layer_norm_forward(x, 768, Tensor(), Tensor(), 1e-5);
  auto g1 = ng::cuda::layer_norm_backward(dy, x, st.mean, st.rstd, Tensor(), true, true, true);
  auto g2 = ng::cuda::layer_norm_backward(dy, x, st.mean, st.rstd, Tensor(), true, true, true);
  EXPECT_TRUE(same_bits(on_cpu(g1.dweight), on_cpu(g2.dweight)));
  EXPECT_TRUE(same_bits(on_cpu(g1.dbias), on_cpu(g2.dbias)));
  EXPECT_TRUE(same_bits(on_cpu(g1.dx), on_cpu(g2.dx)));
  Tensor xb = on_gpu(ng::randn({64, 32, 16, 16}, gen)), dyb = on_gpu(ng::randn({64, 32, 16, 16}, gen));
  auto sb = ng::cuda::batch_norm_forward_train(xb, Tensor(), Tensor(), 1e-5, Tensor(), Tensor(), 0.1);
  auto b1 = ng::cuda::batch_norm_backward(dyb, xb, sb.mean, sb.rstd, Tensor(), true, true, true, true);
  auto b2 = ng::cuda::batch_norm_backward(dyb, xb, sb.mean, sb.rstd, Tensor(), true, true, true, true);
  EXPECT_TRUE(same_bits(on_cpu(b1.dweight), on_cpu(b2.dweight)));
  EXPECT_TRUE(same_bits(on_cpu(b1.dx), on_cpu(b2.dx)));
}

// ---- errors ----
TEST(CudaNorms, ErrorsNameOpAndDevices) {
  NG_REQUIRE_GPU();
  Tensor x = on_gpu(ng::ones({2, 8}));
  std::string msg = error_of([&] { ng::cuda::layer_norm(x, {8}, ng::ones({8})); });
  EXPECT_NE(msg.find("cuda::layer_norm: weight is on cpu but x is on cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::cuda::layer_norm(ng::ones({2, 8}), {8}); });
  EXPECT_NE(msg.find("cuda::layer_norm: expected x on a CUDA device, got cpu"), std::string::npos) << msg;
  msg = error_of([&] {
    ng::cuda::batch_norm(on_gpu(ng::ones({1, 3})), Tensor(), Tensor(), Tensor(), Tensor(), true);
  });
  EXPECT_NE(msg.find("expected more than 1 value per channel when training"), std::string::npos) << msg;
  msg = error_of([&] { ng::cuda::group_norm(on_gpu(ng::ones({2, 6, 3})), 4); });
  EXPECT_NE(msg.find("cuda::group_norm: num_groups 4 must divide the 6 channels"), std::string::npos) << msg;
}

// The raw backward halves (cuda/norms.h, public) check what they read besides x (stop 44, written without
// a GPU): dy like x, the saved statistics' count and dtype, the weight's length. Before, they checked only
// that dy was a contiguous floating CUDA tensor, and a shorter dy or weight was read past its end.
TEST(CudaNorms, BackwardHalvesCheckWhatTheyRead) {
  NG_REQUIRE_GPU();
  Tensor x = on_gpu(ng::randn({4, 8}, ng::default_generator()));
  const ng::norms::NormStats st = ng::cuda::layer_norm_forward(x, 8, Tensor(), Tensor(), 1e-5);
  auto ln = [&](const Tensor& dy, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
    return error_of([&] { ng::cuda::layer_norm_backward(dy, x, mean, rstd, w, true, true, true); });
  };
  const Tensor dy = on_gpu(ng::ones({4, 8}));
  std::string msg = ln(on_gpu(ng::ones({4, 8}, DType::f64)), st.mean, st.rstd, Tensor());
  EXPECT_NE(msg.find("cuda::layer_norm_backward: expected dy like x: (4, 8) f32 on cuda:0, got (4, 8) f64"),
            std::string::npos)
      << msg;
  msg = ln(on_gpu(ng::ones({4, 7})), st.mean, st.rstd, Tensor());
  EXPECT_NE(msg.find("expected dy like x: (4, 8) f32 on cuda:0, got (4, 7) f32"), std::string::npos) << msg;
  msg = ln(on_gpu(ng::ones({8, 4})).t(), st.mean, st.rstd, Tensor());
  EXPECT_NE(msg.find("expected a contiguous dy, got shape (4, 8) with strides (1, 4)"), std::string::npos)
      << msg;
  msg = ln(dy, st.mean, st.rstd.narrow(0, 0, 3), Tensor());
  EXPECT_NE(msg.find("rstd has 3 values, which do not divide x of shape (4, 8) into rows"), std::string::npos)
      << msg;
  msg = ln(dy, st.mean.to(ng::Device::cpu()), st.rstd, Tensor());
  EXPECT_NE(msg.find("mean is on cpu, expected cuda:0 like x"), std::string::npos) << msg;
  msg = ln(dy, st.mean, st.rstd, on_gpu(ng::ones({4})));
  EXPECT_NE(msg.find("expected weight to be 8 contiguous f32 values, got (4) f32"), std::string::npos) << msg;
  EXPECT_EQ(ln(dy, st.mean, st.rstd, on_gpu(ng::ones({8}))), "");  // the right inputs go through
  // GroupNorm and BatchNorm: statistics of the wrong count.
  Tensor x3 = on_gpu(ng::randn({2, 4, 3}, ng::default_generator()));
  const ng::norms::NormStats gs = ng::cuda::group_norm_forward(x3, 2, Tensor(), Tensor(), 1e-5);
  msg = error_of([&] {
    ng::cuda::group_norm_backward(on_gpu(ng::ones({2, 4, 3})), x3, gs.mean, gs.rstd, 4, Tensor(), true, false,
                                  false);
  });
  EXPECT_NE(msg.find("cuda::group_norm_backward: expected rstd to be 8 contiguous f32 values, got (2, 2)"),
            std::string::npos)
      << msg;
  const ng::norms::NormStats bs =
      ng::cuda::batch_norm_forward_train(x3, Tensor(), Tensor(), 1e-5, Tensor(), Tensor(), 0.1);
  msg = error_of([&] {
    ng::cuda::batch_norm_backward(on_gpu(ng::ones({2, 4, 3})), x3, bs.mean.narrow(0, 0, 2), bs.rstd, Tensor(),
                                  true, true, false, false);
  });
  EXPECT_NE(msg.find("cuda::batch_norm_backward: expected mean to be 4 contiguous f32 values, got (2) f32"),
            std::string::npos)
      << msg;
}

// Empty inputs, as on the CPU (stop 40; needs a GPU, none was lent): LayerNorm/RMSNorm on a batch of no rows
// give weight/bias gradients of zeros in the parameters' shape (the kernels' length-0 sums were reshaped to
// (n) and refused); GroupNorm on (N, C, 0) returns its empty output (the kernel read a first value as the
// shift of each of the N * G rows).
TEST(CudaNorms, EmptyInputsAsOnTheCpu) {
  NG_REQUIRE_GPU();
  Tensor w = on_gpu(ng::ones({8})).requires_grad_(), b = on_gpu(ng::zeros({8})).requires_grad_();
  Tensor x = on_gpu(ng::zeros({0, 8})).requires_grad_();
  ng::sum(ng::cuda::layer_norm(x, {8}, w, b)).backward();
  EXPECT_EQ(on_cpu(w.grad()).to_vector<double>(), std::vector<double>(8, 0.0));
  EXPECT_EQ(on_cpu(b.grad()).to_vector<double>(), std::vector<double>(8, 0.0));
  Tensor w2 = on_gpu(ng::ones({8})).requires_grad_();
  ng::sum(ng::cuda::rms_norm(x, w2)).backward();
  EXPECT_EQ(on_cpu(w2.grad()).to_vector<double>(), std::vector<double>(8, 0.0));
  Tensor g = on_gpu(ng::zeros({2, 4, 0})).requires_grad_();
  Tensor gw = on_gpu(ng::ones({4})).requires_grad_(), gb = on_gpu(ng::zeros({4})).requires_grad_();
  Tensor y = ng::cuda::group_norm(g, 2, gw, gb);
  EXPECT_EQ(ng::shape_str(y.shape()), "(2, 4, 0)");
  ng::sum(y).backward();
  EXPECT_EQ(ng::shape_str(g.grad().shape()), "(2, 4, 0)");
  EXPECT_EQ(on_cpu(gw.grad()).to_vector<double>(), std::vector<double>(4, 0.0));
}
#else
TEST(CudaNorms, SkippedWithoutCudaBackend) {
  GTEST_SKIP() << "normgrad was built without the CUDA backend (NORMGRAD_CUDA=OFF or no nvcc)";
}
#endif
