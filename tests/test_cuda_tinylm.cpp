// TinyLM on a CUDA device: exp2's four configs (small), forward + backward + Adam for a few steps on the GPU,
// compared with the same model on the CPU (same init, same batches). Skips without a GPU, like every GPU test
// (tests/test_cuda_common.h). The same loop runs on a host-memory stand-in for the device in
// tests/test_device_dispatch.cpp, which is what checks the dispatch on machines without a GPU.
#include "tests/test_cuda_common.h"

#include <cmath>

#ifdef NORMGRAD_HAVE_CUDA
using ng::Device;
using ng::Tensor;

namespace {

struct Exp2Case {
  const char* name;
  const char* position;
  const char* norm;
  double lr;
};
const Exp2Case kExp2[] = {{"NoNorm", "none", "layernorm", 1e-4},
                          {"PostLN_LayerNorm", "post", "layernorm", 1e-4},
                          {"PreLN_LayerNorm", "pre", "layernorm", 5e-4},
                          {"PreLN_RMSNorm", "pre", "rmsnorm", 5e-4}};

// exp2's model (examples/exp2_norm_comparison.cpp + LMTask::configure) at a test's size.
ng::nn::TinyLMConfig exp2_config(const Exp2Case& c, bool shakespeare) {
  ng::nn::TinyLMConfig m;
  m.vocab_size = 29;
  m.dim = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.ffn = "mlp";
  m.seed = 5;
  m.norm_position = c.position;
  m.norm = c.norm;
  m.final_norm = std::string(c.position) == "pre";
  m.causal = shakespeare;
  m.attn_bias = !shakespeare;
  m.position = shakespeare ? "rope" : "none";
  return m;
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<Tensor> first_grads;  // after the first backward, on the CPU
  std::vector<Tensor> final_params;
};

TrainRun train(const ng::nn::TinyLMConfig& cfg, double lr, Device device, int steps) {
  ng::nn::TinyLM model(cfg);
  model.to(device);
  ng::optim::AdamOptions ao;
  ao.lr = lr;
  ng::optim::Adam opt(model.named_parameters(), ao);
  std::vector<Tensor> params = model.parameters();
  ng::Generator data(11);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    Tensor tokens = ng::randint(0, cfg.vocab_size, {2, 8}, data);
    Tensor targets = ng::randint(0, cfg.vocab_size, {2, 8}, data);
    opt.zero_grad();
    Tensor loss = model.loss(tokens.to(device), targets.to(device));
    r.losses.push_back(loss.item());
    loss.backward();
    if (s == 0)
      for (const Tensor& p : params) r.first_grads.push_back(p.grad().to(Device::cpu()));
    opt.step();
  }
  for (const Tensor& p : params) r.final_params.push_back(p.detach().to(Device::cpu()));
  return r;
}

}  // namespace

TEST(CudaTinyLM, Exp2ConfigsMatchTheCpu) {
  NG_REQUIRE_GPU();
  const int steps = 3;
  for (bool shakespeare : {true, false})
    for (const Exp2Case& c : kExp2) {
      SCOPED_TRACE(std::string(c.name) + (shakespeare ? " shakespeare" : " copy"));
      const ng::nn::TinyLMConfig cfg = exp2_config(c, shakespeare);
      TrainRun cpu = train(cfg, c.lr, Device::cpu(), steps);
      TrainRun gpu = train(cfg, c.lr, Device::cuda(0), steps);
      for (int s = 0; s < steps; ++s) EXPECT_NEAR(gpu.losses[s], cpu.losses[s], 1e-4 * cpu.losses[s]) << s;
      ASSERT_EQ(gpu.first_grads.size(), cpu.first_grads.size());
      for (size_t i = 0; i < cpu.first_grads.size(); ++i) {
        double scale = 0;
        for (double v : cpu.first_grads[i].to_vector<double>()) scale = std::max(scale, std::abs(v));
        EXPECT_LE(max_abs_diff(gpu.first_grads[i], cpu.first_grads[i]), 1e-4 * scale + 1e-7) << "param " << i;
      }
      // Adam moves each weight by at most ~lr per step; near-zero gradients may flip its direction.
      for (size_t i = 0; i < cpu.final_params.size(); ++i)
        EXPECT_LE(max_abs_diff(gpu.final_params[i], cpu.final_params[i]), 2.0 * steps * c.lr)
            << "param " << i;
    }
}
#else
TEST(CudaTinyLM, Exp2ConfigsMatchTheCpu) {
  GTEST_SKIP() << "built without the CUDA backend";
}
#endif
