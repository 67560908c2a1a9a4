// The fused residual add + norm (nn/norms/add_norm.h): bitwise the unfused ops in f32/f64, forward and
// backward; gradchecks; half precision; the fallback for broadcasting; errors; and the blocks that use it.
#include "norms_test_util.h"

using namespace ng;
using namespace normtest;

namespace {

// One forward + backward of norm(alpha * x + a), fused or not, with a fixed random upstream gradient.
struct Pass {
  Tensor y, dx, da, dw, db;
};

Pass run(bool fused, bool layer, const Tensor& x0, const Tensor& a0, double alpha, const Tensor& w0,
         const Tensor& b0, const Tensor& dy) {
  Tensor x = x0.clone().requires_grad_(), a = a0.clone().requires_grad_();
  Tensor w = w0.clone().requires_grad_(), b = b0.defined() ? b0.clone().requires_grad_() : Tensor();
  const int64_t n = x.size(-1);
  Tensor y;
  if (fused)
    y = layer ? F::add_layer_norm(x, a, alpha, {n}, w, b) : F::add_rms_norm(x, a, alpha, w);
  else {
    Tensor h = alpha != 1.0 ? x * alpha + a : x + a;
    y = layer ? F::layer_norm(h, {n}, w, b) : F::rms_norm(h, w);
  }
  y.backward(dy);
  return {y.detach(), x.grad(), a.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

TEST(AddNorm, BitwiseTheUnfusedOpsInF32AndF64) {
  // Rows enough for several parallel chunks and weight-gradient chunks; odd C for the SIMD tails. 3460 x 200:
  // more weight-gradient chunks than groups (norm_common.h), so a group adds two chunks into its partial row.
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t C : {7, 64, 257, 200}) {
      for (double alpha : {1.0, 1.6817928305074290}) {  // 1 (Post-LN) and (2 * 4)^(1/4) (DeepNorm, 4 layers)
        for (bool layer : {true, false}) {
          Generator g(uint64_t(C) * 31 + (layer ? 1 : 2));
          const Shape shape = {C == 200 ? 20 : 3, 173, C};
          Tensor x = randn(shape, g, dt), a = randn(shape, g, dt, 0.5, 2.0), dy = randn(shape, g, dt);
          Tensor w = randn({C}, g, dt, 1.0, 0.3), b = layer ? randn({C}, g, dt) : Tensor();
          const std::string what = std::string(layer ? "layer" : "rms") + " C=" + std::to_string(C) +
                                   " alpha=" + std::to_string(alpha) + " " + dtype_name(dt);
          Pass f = run(true, layer, x, a, alpha, w, b, dy), u = run(false, layer, x, a, alpha, w, b, dy);
          EXPECT_TRUE(bitwise_equal(f.y, u.y)) << what << " y, max diff " << max_abs_diff(f.y, u.y);
          EXPECT_TRUE(bitwise_equal(f.dx, u.dx)) << what << " dx, max diff " << max_abs_diff(f.dx, u.dx);
          EXPECT_TRUE(bitwise_equal(f.da, u.da)) << what << " da, max diff " << max_abs_diff(f.da, u.da);
          EXPECT_TRUE(bitwise_equal(f.dw, u.dw)) << what << " dweight, max diff " << max_abs_diff(f.dw, u.dw);
          if (layer) {
            EXPECT_TRUE(bitwise_equal(f.db, u.db)) << what << " dbias";
          }
        }
      }
    }
  }
}

TEST(AddNorm, TheFusedOpIsOneNodeWithEdgesToAllFourInputs) {
  Tensor x = randn({4, 8}).requires_grad_(), a = randn({4, 8}).requires_grad_();
  Tensor w = ones({8}).requires_grad_(), b = zeros({8}).requires_grad_();
  Tensor y = F::add_layer_norm(x, a, 1.0, {8}, w, b);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "AddLayerNormBackward");
  EXPECT_EQ(y.grad_fn()->next_edges.size(), 4u);
  EXPECT_EQ(F::add_rms_norm(x, a, 2.0, w).grad_fn()->name(), "AddRMSNormBackward");
}

TEST(AddNorm, GradcheckBothNorms) {
  for (double alpha : {1.0, 0.7}) {
    Tensor x = leaf({2, 3, 5}, 1), a = leaf({2, 3, 5}, 2), w = leaf({5}, 3, 1.0, 0.5), b = leaf({5}, 4);
    expect_gradcheck(
        [alpha](const std::vector<Tensor>& in) {
          return F::add_layer_norm(in[0], in[1], alpha, {5}, in[2], in[3]);
        },
        {x, a, w, b}, "add_layer_norm alpha " + std::to_string(alpha));
    expect_gradcheck(
        [alpha](const std::vector<Tensor>& in) { return F::add_rms_norm(in[0], in[1], alpha, in[2]); },
        {x, a, w}, "add_rms_norm alpha " + std::to_string(alpha));
    // Over two trailing dims, and without affine parameters.
    expect_gradcheck(
        [alpha](const std::vector<Tensor>& in) {
          return F::add_layer_norm(in[0], in[1], alpha, {3, 5});
        },
        {x, a}, "add_layer_norm over (3, 5)");
  }
}

TEST(AddNorm, HalfPrecisionMatchesTheUnfusedOps) {
  // bf16/f16 x with f32 weights (MiniMind's layout). The sum is rounded to the half type exactly as the
  // unfused add rounds it; the results agree to the half type's precision.
  for (DType dt : {DType::bf16, DType::f16}) {
    Generator g(7);
    Tensor x = randn({16, 96}, g).to(dt), a = randn({16, 96}, g).to(dt), dy = randn({16, 96}, g).to(dt);
    Tensor w = randn({96}, g, DType::f32, 1.0, 0.2), b = randn({96}, g);
    for (bool layer : {true, false}) {
      Pass f = run(true, layer, x, a, 1.3, w, layer ? b : Tensor(), dy);
      Pass u = run(false, layer, x, a, 1.3, w, layer ? b : Tensor(), dy);
      // y, dx and da (the half type): one unit in its last place plus a little; dw and db (f32) relative
      // to 1 + their largest value. (Until stop 44: absolute 0.12 on y and da and 0.48 on dw in bf16, and
      // dx and db were not compared.)
      const double rtol = half_rtol(dt), tol = dt == DType::bf16 ? 1e-3 : 1e-4;
      const std::string what = std::string(dtype_name(dt)) + (layer ? " layer" : " rms");
      EXPECT_LE(max_diff_beyond(f.y, u.y, rtol), tol) << what;
      EXPECT_LE(max_diff_beyond(f.dx, u.dx, rtol), tol) << what;
      EXPECT_LE(max_diff_beyond(f.da, u.da, rtol), tol) << what;
      EXPECT_LE(max_diff_scaled(f.dw, u.dw), 1e-5) << what;
      if (layer) {
        EXPECT_LE(max_diff_scaled(f.db, u.db), 1e-5) << what;
      }
    }
  }
}

TEST(AddNorm, BroadcastingFallsBackToTheUnfusedOps) {
  Generator g(9);
  Tensor x = randn({4, 6}, g), a = randn({6}, g), w = randn({6}, g);
  EXPECT_TRUE(bitwise_equal(F::add_layer_norm(x, a, 2.0, {6}, w), F::layer_norm(x * 2.0 + a, {6}, w)));
  EXPECT_TRUE(bitwise_equal(F::add_rms_norm(x, a, 1.0, w), F::rms_norm(x + a, w)));
}

TEST(AddNorm, ErrorsNameTheFusedOp) {
  Tensor x = randn({2, 8}), a = randn({2, 8});
  expect_error([&] { F::add_layer_norm(x, a, 1.0, {8}, ones({4})); },
               {"add_layer_norm: weight has shape (4)"});
  expect_error([&] { F::add_layer_norm(x, a, 1.0, {7}); },
               {"add_layer_norm: normalized_shape (7) does not match"});
  expect_error([&] { F::add_rms_norm(x, a, 1.0, ones({8}, DType::f64)); },
               {"add_rms_norm: weight has dtype f64, expected f32"});
  expect_error([&] { F::add_rms_norm(x, a, 1.0, Tensor(), 0.0); }, {"add_rms_norm", "eps"});
  // A non-finite alpha made every output NaN, silently (the unfused ops give the same NaN).
  expect_error([&] { F::add_layer_norm(x, a, NAN, {8}); },
               {"add_layer_norm: expected a finite alpha (alpha * x + a), got nan"});
  expect_error([&] { F::add_rms_norm(x, a, INFINITY); },
               {"add_rms_norm: expected a finite alpha (alpha * x + a), got inf"});
  Tensor h = randn({2, 8}).to(DType::f16);
  expect_error([&] { F::add_rms_norm(h, h, 1e5); },
               {"add_rms_norm: alpha 100000 overflows f16 (it would be inf)"});
}

TEST(AddNorm, PostLNAndDeepNormBlocksUseItAndMatchTheUnfusedFormula) {
  // The block's forward equals norm(alpha x + sublayer(x)) written out with the unfused ops, bitwise, and
  // its output node is the fused op.
  for (const char* pos : {"post", "deepnorm"}) {
    for (const char* norm : {"layernorm", "rmsnorm"}) {
      nn::BlockConfig cfg;
      cfg.attn.dim = 32;
      cfg.attn.n_heads = 4;
      cfg.ffn.dim = 32;
      cfg.norm_position = pos;
      cfg.norm = norm;
      cfg.n_layers = 6;
      Generator gen(3), dgen(4);
      nn::Block block(cfg, gen, dgen);
      Generator xg(5);
      Tensor x = randn({2, 9, 32}, xg);
      Tensor y = block.forward(x);
      const double alpha = std::string(pos) == "deepnorm" ? cfg.deepnorm_alpha() : 1.0;
      auto unfused = [&](nn::Module& m, const Tensor& h, const Tensor& s) {
        return m.forward(alpha != 1.0 ? h * alpha + s : h + s);
      };
      Tensor h = unfused(*block.norm1, x, block.attn->forward(x));
      h = unfused(*block.norm2, h, block.ffn->forward(h));
      EXPECT_TRUE(bitwise_equal(y, h)) << pos << " " << norm << ": max diff " << max_abs_diff(y, h);
      ASSERT_TRUE(y.grad_fn() != nullptr);
      EXPECT_EQ(y.grad_fn()->name(),
                std::string(norm) == "layernorm" ? "AddLayerNormBackward" : "AddRMSNormBackward");
    }
  }
}
