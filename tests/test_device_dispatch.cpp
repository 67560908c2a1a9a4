// The device dispatch point (tensor/device_kernels.h), tested on a machine without a GPU.
//
// A "host device" stands in for CUDA: a DeviceKernels table whose tensors say Device::cuda(0) but live in
// host memory, and whose kernels are the CPU ops run on zero-copy CPU aliases. Its storages hold the host
// pointer plus kPoison (bit 62 set: not a valid address), so a CPU kernel that reads a device tensor without
// going through the dispatch crashes the test instead of quietly working. With it, TinyLM's forward,
// backward and Adam step for each of exp2's four configs run through every dispatch branch they need, and
// are compared with the same model on the CPU.
//
// Also here: the errors (no backend, mixed devices, ops with no device kernel) and Module::to.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "normgrad.h"
#include "optim/adam_kernel.h"
#include "tensor/device_kernels.h"
#include "worst_error.h"

using ng::Device;
using ng::DType;
using ng::Tensor;

namespace {

template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const ng::Error& e) {
    return e.what();
  }
  return "";
}

// ---- the host device ----------------------------------------------------------------------------------
constexpr uintptr_t kPoison = uintptr_t(1) << 62;
const Device kDev = Device::cuda(0);
std::set<std::string> g_used;  // which table entries ran

// A host-device alias of a CPU tensor (same memory, same strides); the CPU storage is kept alive.
Tensor as_dev(const Tensor& c) {
  auto keep = c.impl().storage;
  void* p = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(keep->data()) + kPoison);
  auto impl = std::make_shared<ng::TensorImpl>();
  impl->storage = std::make_shared<ng::Storage>(p, keep->nbytes(), kDev, [keep](void*) {});
  impl->shape = c.shape();
  impl->strides = c.strides();
  impl->offset = c.offset();
  impl->dtype = c.dtype();
  return Tensor(impl);
}

// A CPU alias of a host-device tensor (detached: it has no autograd history).
Tensor as_cpu(const Tensor& d) {
  if (!d.defined()) return d;
  EXPECT_TRUE(d.device() == kDev) << d.str();
  auto keep = d.impl().storage;
  void* p = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(keep->data()) - kPoison);
  auto impl = std::make_shared<ng::TensorImpl>();
  impl->storage = std::make_shared<ng::Storage>(p, keep->nbytes(), Device::cpu(), [keep](void*) {});
  impl->shape = d.shape();
  impl->strides = d.strides();
  impl->offset = d.offset();
  impl->dtype = d.dtype();
  return Tensor(impl);
}

void* host_ptr(const Tensor& t) {
  return t.device().is_cpu() ? t.raw_data() : as_cpu(t).raw_data();
}

Tensor dev_empty(const ng::Shape& s, DType dt, Device) {
  g_used.insert("empty");
  return as_dev(ng::empty(s, dt));
}
void dev_fill(const Tensor& t, double v) {
  g_used.insert("fill");
  as_cpu(t).fill_(v);
}
Tensor dev_copy(const Tensor& src, DType dt) {
  g_used.insert("copy");
  ng::NoGradGuard g;
  Tensor c = as_cpu(src);
  return as_dev(c.dtype() == dt ? c.clone() : c.to(dt));
}
void dev_copy_bytes(const Tensor& dst, const Tensor& src) {
  g_used.insert("copy_bytes");
  EXPECT_TRUE(dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel());
  std::memcpy(host_ptr(dst), host_ptr(src), size_t(dst.numel()) * ng::dtype_size(dst.dtype()));
}
Tensor dev_to_device(const Tensor& src, Device target) {
  g_used.insert("to_device");
  const Device from = src.device();
  Tensor out;
  {
    ng::NoGradGuard g;
    out = target.is_cpu() ? as_cpu(src).clone() : as_dev(src.detach().clone());
  }
  if (ng::is_floating(src.dtype()) && ng::needs_grad({src}))
    ng::attach(out, "ToDeviceBackward", {src},
               [from](const Tensor& dout) -> std::vector<Tensor> { return {dout.to(from)}; });
  return out;
}

Tensor cpu_binary(ng::BinaryKind op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case ng::BinaryKind::add:
      return ng::add(a, b);
    case ng::BinaryKind::sub:
      return ng::sub(a, b);
    case ng::BinaryKind::mul:
      return ng::mul(a, b);
    case ng::BinaryKind::div:
      return ng::div(a, b);
    case ng::BinaryKind::max:
      return ng::maximum(a, b);
    case ng::BinaryKind::min:
      return ng::minimum(a, b);
  }
  return Tensor();
}
Tensor cpu_unary(ng::UnaryKind op, const Tensor& x, double p0, double p1) {
  switch (op) {
    case ng::UnaryKind::neg:
      return ng::neg(x);
    case ng::UnaryKind::exp:
      return ng::exp(x);
    case ng::UnaryKind::log:
      return ng::log(x);
    case ng::UnaryKind::sqrt:
      return ng::sqrt(x);
    case ng::UnaryKind::rsqrt:
      return ng::rsqrt(x);
    case ng::UnaryKind::abs:
      return ng::abs(x);
    case ng::UnaryKind::pow:
      return ng::pow(x, p0);
    case ng::UnaryKind::clamp:
      return ng::clamp(x, p0, p1);
    case ng::UnaryKind::square:
      return ng::square(x);
    case ng::UnaryKind::relu:
      return ng::relu(x);
    case ng::UnaryKind::gelu:
      return ng::gelu(x);
    case ng::UnaryKind::silu:
      return ng::silu(x);
    case ng::UnaryKind::sigmoid:
      return ng::sigmoid(x);
    case ng::UnaryKind::tanh:
      return ng::tanh(x);
  }
  return Tensor();
}

Tensor dev_binary(ng::BinaryKind op, const Tensor& a, const Tensor& b) {
  g_used.insert("binary");
  ng::NoGradGuard g;
  return as_dev(cpu_binary(op, as_cpu(a), as_cpu(b)));
}
Tensor dev_unary(ng::UnaryKind op, const Tensor& x, double p0, double p1) {
  g_used.insert("unary");
  ng::NoGradGuard g;
  return as_dev(cpu_unary(op, as_cpu(x), p0, p1));
}
// dx = dout * op'(x): the CPU op's own backward, run on the aliases.
Tensor dev_unary_backward(ng::UnaryKind op, const Tensor& x, const Tensor&, const Tensor& dout, double p0,
                          double p1) {
  g_used.insert("unary_backward");
  ng::EnableGradGuard g;
  Tensor xc = as_cpu(x);
  xc.requires_grad_(true);
  cpu_unary(op, xc, p0, p1).backward(as_cpu(dout));
  return as_dev(xc.grad());
}
void dev_add_(const Tensor& self, const Tensor& other, double alpha) {
  g_used.insert("add_");
  Tensor s = as_cpu(self);
  ng::add_(s, as_cpu(other), alpha);
}
void dev_mul_(const Tensor& self, double v) {
  g_used.insert("mul_");
  Tensor s = as_cpu(self);
  ng::mul_(s, v);
}
Tensor dev_sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  g_used.insert("sum");
  ng::NoGradGuard g;
  return as_dev(mean ? ng::mean(as_cpu(x), dims, keepdim) : ng::sum(as_cpu(x), dims, keepdim));
}
// R(-angle) = rotation with the sines negated (exactly: -s is s with its sign bit flipped).
Tensor dev_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, double sign) {
  g_used.insert("rope");
  ng::NoGradGuard g;
  Tensor s = sign > 0 ? as_cpu(sin) : ng::neg(as_cpu(sin));
  return as_dev(ng::apply_rope(as_cpu(x), as_cpu(cos), s));
}
Tensor dev_masked_fill(const Tensor& x, const Tensor& mask, double value) {
  g_used.insert("masked_fill");
  ng::NoGradGuard g;
  return as_dev(ng::masked_fill(as_cpu(x), as_cpu(mask), value));
}

// Whole ops: through differentiable copies to the CPU and back, so autograd records them.
Tensor cpu_of(const Tensor& t) {
  return t.defined() ? t.to(Device::cpu()) : t;
}
Tensor dev_matmul(const Tensor& a, const Tensor& b) {
  g_used.insert("matmul");
  return ng::matmul(cpu_of(a), cpu_of(b)).to(kDev);
}
Tensor dev_softmax(const Tensor& x, int64_t dim, bool log) {
  g_used.insert("softmax");
  return (log ? ng::log_softmax(cpu_of(x), dim) : ng::softmax(cpu_of(x), dim)).to(kDev);
}
Tensor dev_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  g_used.insert("cross_entropy");
  return ng::cross_entropy(cpu_of(logits), cpu_of(targets), ignore_index).to(kDev);
}
Tensor dev_embedding(const Tensor& w, const Tensor& ids) {
  g_used.insert("embedding");
  return ng::embedding(cpu_of(w), cpu_of(ids)).to(kDev);
}
Tensor dev_layer_norm(const Tensor& x, const ng::Shape& ns, const Tensor& w, const Tensor& b, double eps) {
  g_used.insert("layer_norm");
  return ng::F::layer_norm(cpu_of(x), ns, cpu_of(w), cpu_of(b), eps).to(kDev);
}
Tensor dev_rms_norm(const Tensor& x, const Tensor& w, double eps) {
  g_used.insert("rms_norm");
  return ng::F::rms_norm(cpu_of(x), cpu_of(w), eps).to(kDev);
}
// The same scalars optim::Adam::step computes, then the CPU's fused update on the host memory.
void dev_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const ng::AdamHyper& h) {
  g_used.insert("adam_step");
  ng::optim::AdamScalars s;
  s.one_minus_beta1 = 1.0 - h.beta1;
  s.beta2 = h.beta2;
  s.one_minus_beta2 = 1.0 - h.beta2;
  s.eps = h.eps;
  s.step_size = h.lr / (1.0 - std::pow(h.beta1, double(h.step)));
  s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(h.beta2, double(h.step)));
  s.weight_decay = h.weight_decay;
  s.decay = h.decoupled ? 1.0 - h.lr * h.weight_decay : 1.0;
  s.coupled_wd = !h.decoupled && h.weight_decay != 0;
  s.decoupled = h.decoupled;
  ASSERT_EQ(p.dtype(), DType::f32);
  ng::optim::adam_update<float>(as_cpu(p).data<float>(), as_cpu(g).data<float>(), as_cpu(m).data<float>(),
                                as_cpu(v).data<float>(), p.numel(), s);
}

ng::DeviceKernels host_device_table() {
  ng::DeviceKernels k;
  k.name = "host-device";
  k.empty = &dev_empty;
  k.fill = &dev_fill;
  k.copy = &dev_copy;
  k.copy_bytes = &dev_copy_bytes;
  k.to_device = &dev_to_device;
  k.binary = &dev_binary;
  k.unary = &dev_unary;
  k.unary_backward = &dev_unary_backward;
  k.add_ = &dev_add_;
  k.mul_ = &dev_mul_;
  k.sum = &dev_sum;
  k.rope = &dev_rope;
  k.masked_fill = &dev_masked_fill;
  k.matmul = &dev_matmul;
  k.softmax = &dev_softmax;
  k.cross_entropy = &dev_cross_entropy;
  k.embedding = &dev_embedding;
  k.layer_norm = &dev_layer_norm;
  k.rms_norm = &dev_rms_norm;
  k.adam_step = &dev_adam;
  return k;
}

// Installs a table (or none) for CUDA devices for the scope of a test, then puts the real one back.
class KernelsScope {
 public:
  explicit KernelsScope(const ng::DeviceKernels* k) : previous_(ng::set_device_kernels(k)) {}
  ~KernelsScope() { ng::set_device_kernels(previous_); }

 private:
  const ng::DeviceKernels* previous_;
};

const ng::DeviceKernels& host_device() {
  static const ng::DeviceKernels table = host_device_table();
  return table;
}

// A tensor that says cuda:0 and whose memory is poisoned: only the error paths may touch it.
Tensor poisoned_cuda_tensor(const ng::Shape& shape) {
  return as_dev(ng::zeros(shape));
}

// ---- exp2's four configs, small ---------------------------------------------------------------------------
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

// exp2's model (examples/exp2_norm_comparison.cpp + LMTask::configure), at a test's size.
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
  if (shakespeare) {
    m.causal = true;
    m.position = "rope";
  } else {  // copy task: the lesson's original attention
    m.causal = false;
    m.attn_bias = true;
    m.position = "none";
  }
  return m;
}

struct StepLog {
  std::vector<double> losses, grad_norms;
  std::vector<std::vector<float>> final_params;  // on the host
};

// exp2's inner loop (examples/common/lm_task.cpp train_lm): zero_grad, loss, backward, grad norm, Adam.
StepLog train(const ng::nn::TinyLMConfig& cfg, double lr, Device device, int steps) {
  ng::nn::TinyLM model(cfg);
  model.to(device);
  ng::optim::AdamOptions ao;
  ao.lr = lr;
  ng::optim::Adam opt(model.named_parameters(), ao);
  std::vector<Tensor> params = model.parameters();
  ng::Generator data(11);
  StepLog log;
  for (int s = 0; s < steps; ++s) {
    Tensor tokens = ng::randint(0, cfg.vocab_size, {2, 8}, data);
    Tensor targets = ng::randint(0, cfg.vocab_size, {2, 8}, data);
    opt.zero_grad();
    Tensor loss = model.loss(tokens.to(device), targets.to(device));
    EXPECT_TRUE(loss.device() == device);
    log.losses.push_back(loss.item());
    loss.backward();
    for (const Tensor& p : params) EXPECT_TRUE(p.grad().defined() && p.grad().device() == device);
    log.grad_norms.push_back(ng::optim::grad_norm(params));
    opt.step();
  }
  for (const Tensor& p : params) log.final_params.push_back(p.to(Device::cpu()).to_vector<float>());
  return log;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = ng::test::worse(worst, std::abs(a[i] - b[i]) / std::max(1e-12, std::abs(b[i])));
  return worst;
}

}  // namespace

// ---- the dispatch, through the host device
// ------------------------------------------------------------------
TEST(DeviceDispatch, Exp2ConfigsTrainOnTheDeviceLikeOnTheCpu) {
  KernelsScope scope(&host_device());
  for (bool shakespeare : {true, false})
    for (const Exp2Case& c : kExp2) {
      SCOPED_TRACE(std::string(c.name) + (shakespeare ? " shakespeare" : " copy"));
      g_used.clear();
      const ng::nn::TinyLMConfig cfg = exp2_config(c, shakespeare);
      StepLog cpu = train(cfg, c.lr, Device::cpu(), 3);
      EXPECT_TRUE(g_used.empty()) << "the CPU run went through the device table";
      StepLog dev = train(cfg, c.lr, kDev, 3);
      // The host device runs the CPU kernels on the same numbers in the same order: losses and parameters
      // come out bitwise equal. The gradient norm is summed another way on the device (f64 either way).
      EXPECT_EQ(dev.losses, cpu.losses);
      EXPECT_LT(max_rel_diff(dev.grad_norms, cpu.grad_norms), 1e-12);
      ASSERT_EQ(dev.final_params.size(), cpu.final_params.size());
      double worst = 0;
      for (size_t i = 0; i < cpu.final_params.size(); ++i)
        for (size_t j = 0; j < cpu.final_params[i].size(); ++j)
          worst = ng::test::worse(worst, double(std::abs(dev.final_params[i][j] - cpu.final_params[i][j])));
      EXPECT_EQ(worst, 0.0);
      std::printf("  %-17s %-11s loss rel diff %.2e, grad norm rel diff %.2e, param max diff %.2e\n", c.name,
                  shakespeare ? "shakespeare" : "copy", max_rel_diff(dev.losses, cpu.losses),
                  max_rel_diff(dev.grad_norms, cpu.grad_norms), worst);
      EXPECT_GT(cpu.losses[0], 0.0);
      EXPECT_NE(cpu.losses[0], cpu.losses[2]);  // the steps changed the model

      // The entries this config needs (the walk through nn/ and optim/ in docs/cuda.md).
      std::set<std::string> want = {"empty",         "fill",           "copy",     "to_device", "binary",
                                    "unary",         "unary_backward", "sum",      "matmul",    "softmax",
                                    "cross_entropy", "embedding",      "adam_step"};
      if (std::string(c.position) != "none")
        want.insert(std::string(c.norm) == "rmsnorm" ? "rms_norm" : "layer_norm");
      if (shakespeare) want.insert({"rope", "masked_fill"});
      for (const std::string& w : want) EXPECT_TRUE(g_used.count(w)) << w << " was not dispatched";
    }
}

// generate() on a model that lives on the device: each context is copied there (it was built on the CPU
// and refused by the model's first op). The host device computes what the CPU does: the same tokens.
TEST(DeviceDispatch, GenerateOnTheDeviceGivesTheCpuTokens) {
  KernelsScope scope(&host_device());
  const ng::nn::TinyLMConfig cfg = exp2_config(kExp2[3], true);
  ng::nn::TinyLM cpu(cfg), dev(cfg);
  dev.to(kDev);
  const std::vector<int64_t> prompt = {1, 2, 3};
  for (double temperature : {0.0, 1.0})
    EXPECT_EQ(ng::nn::generate(dev, prompt, 12, temperature, 0, 5),
              ng::nn::generate(cpu, prompt, 12, temperature, 0, 5))
        << temperature;
  EXPECT_TRUE(dev.tok_emb->weight.device() == kDev);
}

TEST(DeviceDispatch, AdamWAndClippingOnTheDevice) {
  KernelsScope scope(&host_device());
  ng::Generator gen(3);
  Tensor w_cpu = ng::randn({4, 5}, gen);
  Tensor g_cpu = ng::randn({4, 5}, gen);
  Tensor w_dev = w_cpu.clone().to(kDev);
  w_cpu.requires_grad_(true);
  w_dev.requires_grad_(true);
  w_cpu.set_grad(g_cpu.clone());
  w_dev.set_grad(g_cpu.to(kDev));
  ng::optim::AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  ng::optim::AdamW a_cpu({w_cpu}, o), a_dev({w_dev}, o);
  const double n_cpu = ng::optim::clip_grad_norm_({w_cpu}, 1.0);
  const double n_dev = ng::optim::clip_grad_norm_({w_dev}, 1.0);
  EXPECT_NEAR(n_dev, n_cpu, 1e-5 * n_cpu);
  ASSERT_GT(n_cpu, 2.0);  // well above max_norm 1: the clip scales every gradient down by more than half
  // The clipped gradients themselves: Adam's first step is about lr * sign(g), the same whether the gradient
  // was clipped or not, so the parameters below would not notice a device clip that did nothing.
  std::vector<float> gd = w_dev.grad().to(Device::cpu()).to_vector<float>(),
                     gc = w_cpu.grad().to_vector<float>(), g0 = g_cpu.to_vector<float>();
  for (size_t i = 0; i < gd.size(); ++i) {
    EXPECT_NEAR(gd[i], gc[i], 1e-6f * std::abs(g0[i]) + 1e-7f) << i;
    EXPECT_NEAR(gc[i], g0[i] / n_cpu, 1e-6 * std::abs(g0[i])) << i;  // the CPU clip did clip
  }
  a_cpu.step();
  a_dev.step();
  // The norm is summed in another order on the device (f64 both ways): equal up to rounding.
  std::vector<float> a = w_dev.to(Device::cpu()).to_vector<float>(), b = w_cpu.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
}

// A loaded optimizer state goes onto the parameters' device: it was made on the CPU, so every step after
// load_state_dict failed on mixed devices (and advanced the step count first).
TEST(DeviceDispatch, AdamStateLoadsOntoTheParametersDevice) {
  KernelsScope scope(&host_device());
  ng::Generator gen(5);
  Tensor w_cpu = ng::randn({3, 4}, gen);
  Tensor g = ng::randn({3, 4}, gen);
  Tensor w_dev = w_cpu.clone().to(kDev);
  w_cpu.requires_grad_(true);
  w_dev.requires_grad_(true);
  ng::optim::Adam a_cpu({w_cpu}, {.lr = 0.1}), a_dev({w_dev}, {.lr = 0.1});
  w_cpu.set_grad(g.clone());
  a_cpu.step();
  a_dev.load_state_dict(a_cpu.state_dict());  // CPU tensors into an optimizer over device parameters
  EXPECT_TRUE(a_dev.state()[0].buffers.at("exp_avg").device() == kDev);
  EXPECT_TRUE(a_dev.state()[0].buffers.at("exp_avg_sq").device() == kDev);
  {
    ng::NoGradGuard no_grad;
    w_dev.copy_(w_cpu.detach());  // the parameters as after the CPU's first step
  }
  w_cpu.set_grad(g.clone());
  w_dev.set_grad(g.to(kDev));
  a_cpu.step();
  a_dev.step();
  EXPECT_EQ(a_dev.state()[0].step, 2);
  EXPECT_EQ(w_dev.to(Device::cpu()).to_vector<float>(), w_cpu.to_vector<float>());
}

// SGD has no device kernel: it read and wrote device pointers on the host (a segfault on a GPU). It refuses,
// naming the parameter and device, before any parameter changes.
TEST(DeviceDispatch, SgdRefusesDeviceParameters) {
  KernelsScope scope(&host_device());
  Tensor p = ng::ones({4}).to(kDev);
  p.requires_grad_(true);
  p.set_grad(ng::ones({4}).to(kDev));
  ng::optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  const std::string msg = error_of([&] { opt.step(); });
  EXPECT_NE(
      msg.find("SGD.step: parameter '0' is on cuda:0: SGD has no device kernel and runs on the CPU only"),
      std::string::npos)
      << msg;
  EXPECT_EQ(opt.state()[0].step, 0);
}

// ---- errors -----------------------------------------------------------------------------------------------
TEST(DeviceDispatch, NoBackendIsAClearErrorNamingTheOp) {
  KernelsScope none(nullptr);
  Tensor d = poisoned_cuda_tensor({2, 3});
  const std::string tail = "got a tensor on cuda:0, but normgrad was built without the CUDA backend";
  EXPECT_NE(error_of([&] { ng::exp(d); }).find("exp: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { ng::add(d, d); }).find("add: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { ng::sum(d); }).find("sum: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { ng::matmul(d, d.t()); }).find("matmul: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { ng::softmax(d, -1); }).find("softmax: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { d.fill_(1.0); }).find("fill_: " + tail), std::string::npos);
  EXPECT_NE(error_of([&] { ng::zeros({2}, DType::f32, kDev); }).find("empty: " + tail), std::string::npos);
  std::string msg = error_of([&] { (void)poisoned_cuda_tensor({1}).item(); });
  EXPECT_NE(
      msg.find("to: cannot move a tensor from cuda:0 to cpu: normgrad was built without the CUDA backend"),
      std::string::npos)
      << msg;
  msg = error_of([] { ng::ones({2}).to(kDev); });
  EXPECT_NE(
      msg.find("to: cannot move a tensor from cpu to cuda:0: normgrad was built without the CUDA backend"),
      std::string::npos)
      << msg;
}

TEST(DeviceDispatch, MixedDevicesNameBothDevices) {
  KernelsScope scope(&host_device());
  Tensor c = ng::ones({2, 4});
  Tensor d = ng::ones({2, 4}).to(kDev);
  std::string msg = error_of([&] { ng::sub(d, c); });
  EXPECT_NE(msg.find("sub: expected both tensors on the same device, got cuda:0 and cpu"), std::string::npos)
      << msg;
  msg = error_of([&] { ng::F::layer_norm(d, {4}, ng::ones({4}), Tensor()); });
  EXPECT_NE(msg.find("layer_norm: expected all tensors on the same device, got cuda:0 and cpu"),
            std::string::npos)
      << msg;
  msg = error_of([&] { ng::embedding(d, ng::zeros({3}, DType::i64)); });
  EXPECT_NE(msg.find("embedding: expected both tensors on the same device, got cuda:0 and cpu"),
            std::string::npos)
      << msg;
  // A backward seed or a .grad on another device than the tensor (stop 42): refused before any read.
  Tensor w = ng::ones({2, 4}).requires_grad_();
  msg = error_of([&] { ng::mul(w, 2.0).backward(d); });
  EXPECT_NE(msg.find("backward: gradient is on cuda:0, expected cpu (the output's device)"),
            std::string::npos)
      << msg;
  msg = error_of([&] { w.set_grad(d); });
  EXPECT_NE(msg.find("set_grad: gradient is on cuda:0, expected cpu (the tensor's device)"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(w.grad().defined());
}

TEST(DeviceDispatch, EveryMultiTensorOpRejectsMixedDevices) {
  // Table-driven: each op that takes several tensors, called with one of them on the device and the others on
  // the CPU (in each position that matters). The error must name the op and both devices, and come before any
  // memory is read (the device tensors' memory is poisoned: a CPU kernel reading it would crash the test).
  KernelsScope scope(&host_device());
  using ng::F::batch_norm;
  using ng::F::group_norm;
  using ng::F::layer_norm;
  using ng::F::rms_norm;
  ng::Generator gen(4);
  const Tensor c24 = ng::randn({2, 4}, gen), d24 = c24.to(kDev);
  const Tensor c43 = ng::randn({4, 3}, gen), d43 = c43.to(kDev);
  const Tensor c4 = ng::ones({4}), d4 = c4.to(kDev);
  const Tensor c3 = ng::zeros({3}), d3 = c3.to(kDev);
  const Tensor ids_c = ng::from_vector(std::vector<int64_t>{0, 1}, {2}), ids_d = ids_c.to(kDev);
  const Tensor mask_c = ng::from_vector(std::vector<int64_t>{0, 1, 0, 1}, {4}), mask_d = mask_c.to(kDev);
  const Tensor c243 = ng::randn({2, 4, 3}, gen), d243 = c243.to(kDev);
  const Tensor rope_x_c = ng::randn({1, 2, 1, 4}, gen), rope_x_d = rope_x_c.to(kDev);
  const ng::RopeTables tab = ng::rope_tables(2, 4, 100.0, DType::f32);

  struct Case {
    const char* op;    // the name the message must start with
    const char* what;  // which argument is on the device
    std::function<void()> call;
  };
  std::vector<Case> cases = {
      {"add", "a", [&] { ng::add(d24, c24); }},
      {"add", "b", [&] { ng::add(c24, d24); }},
      {"sub", "a", [&] { ng::sub(d24, c24); }},
      {"sub", "b", [&] { ng::sub(c24, d24); }},
      {"mul", "a", [&] { ng::mul(d24, c24); }},
      {"mul", "b", [&] { ng::mul(c24, d24); }},
      {"div", "a", [&] { ng::div(d24, c24); }},
      {"div", "b", [&] { ng::div(c24, d24); }},
      {"maximum", "a", [&] { ng::maximum(d24, c24); }},
      {"maximum", "b", [&] { ng::maximum(c24, d24); }},
      {"minimum", "a", [&] { ng::minimum(d24, c24); }},
      {"minimum", "b", [&] { ng::minimum(c24, d24); }},
      {"add_", "self",
       [&] {
         Tensor s = d24.clone();
         ng::add_(s, c24);
       }},
      {"add_", "other",
       [&] {
         Tensor s = c24.clone();
         ng::add_(s, d24);
       }},
      {"matmul", "a", [&] { ng::matmul(d24, c43); }},
      {"matmul", "b", [&] { ng::matmul(c24, d43); }},
      {"linear", "x", [&] { ng::F::linear(d24, c43.t(), c3); }},
      {"linear", "bias", [&] { ng::F::linear(c24, c43.t(), d3); }},
      {"masked_fill", "x", [&] { ng::masked_fill(d24, mask_c, 0.0); }},
      {"masked_fill", "mask", [&] { ng::masked_fill(c24, mask_d, 0.0); }},
      {"cross_entropy", "logits", [&] { ng::cross_entropy(d24, ids_c); }},
      {"cross_entropy", "targets", [&] { ng::cross_entropy(c24, ids_d); }},
      {"embedding", "weight", [&] { ng::embedding(d24, ids_c); }},
      {"embedding", "ids", [&] { ng::embedding(c24, ids_d); }},
      {"index_select", "x", [&] { ng::index_select(d24, 0, ids_c); }},
      {"index_select", "index", [&] { ng::index_select(c24, 0, ids_d); }},
      {"rope", "x", [&] { ng::apply_rope(rope_x_d, tab.cos, tab.sin); }},
      {"layer_norm", "x", [&] { layer_norm(d24, {4}, c4, c4); }},
      {"layer_norm", "weight", [&] { layer_norm(c24, {4}, d4, c4); }},
      {"layer_norm", "bias", [&] { layer_norm(c24, {4}, c4, d4); }},
      {"rms_norm", "x", [&] { rms_norm(d24, c4); }},
      {"rms_norm", "weight", [&] { rms_norm(c24, d4); }},
      {"batch_norm", "x", [&] { batch_norm(d24, c4, c4, c4, c4, true); }},
      {"batch_norm", "running_mean", [&] { batch_norm(c24, d4, c4, c4, c4, true); }},
      {"batch_norm", "running_var", [&] { batch_norm(c24, c4, d4, c4, c4, false); }},
      {"batch_norm", "weight", [&] { batch_norm(c24, Tensor(), Tensor(), d4, c4, true); }},
      {"batch_norm", "bias", [&] { batch_norm(c24, Tensor(), Tensor(), c4, d4, true); }},
      {"group_norm", "x", [&] { group_norm(d243, 2, c4, c4); }},
      {"group_norm", "weight", [&] { group_norm(c243, 2, d4, c4); }},
      {"group_norm", "bias", [&] { group_norm(c243, 2, c4, d4); }},
      {"cat", "tensor 1",
       [&] {
         ng::cat({c24, d24}, 0);
       }},
      {"cat", "tensor 0",
       [&] {
         ng::cat({d24, c24}, 1);
       }},
      {"stack", "tensor 1",
       [&] {
         ng::stack({c24, d24}, 0);
       }},
      {"stack", "tensor 0",
       [&] {
         ng::stack({d24, c24}, 0);
       }},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.call);
    const std::string where = std::string(c.op) + " with " + c.what + " on the device";
    EXPECT_EQ(msg.rfind(std::string(c.op) + ": ", 0), 0u) << where << ": " << msg;
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << where << ": " << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << where << ": " << msg;
    EXPECT_NE(msg.find("expected"), std::string::npos) << where << ": " << msg;
  }
  // And with every tensor on the device, the ops without a device kernel refuse by name (no CPU read).
  EXPECT_NE(error_of([&] {
              batch_norm(d24, Tensor(), Tensor(), d4, d4, true);
            }).find("batch_norm: this CPU kernel got a tensor on cuda:0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              group_norm(d243, 2, d4, d4);
            }).find("group_norm: this CPU kernel got a tensor on cuda:0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ng::cat({d24, d24}, 0);
            }).find("cat: this CPU kernel got a tensor on cuda:0"),
            std::string::npos);
}

TEST(DeviceDispatch, OpsWithoutADeviceKernelRefuseNamingTheDevice) {
  KernelsScope scope(&host_device());
  Tensor d = poisoned_cuda_tensor({3, 4});
  std::string msg = error_of([&] { ng::var(d, {1}); });
  EXPECT_NE(msg.find("var: this CPU kernel got a tensor on cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::argmax(d, 1); });
  EXPECT_NE(msg.find("argmax: this CPU kernel got a tensor on cuda:0"), std::string::npos) << msg;
  msg = error_of([&] { ng::index_select(d, 0, ng::zeros({1}, DType::i64).to(kDev)); });
  EXPECT_NE(msg.find("index_select: expected CPU tensors, got cuda:0 and cuda:0"), std::string::npos) << msg;
}

// maximum and minimum run forward on the device, and their backward (the weights are a CPU loop) brings a
// and b to the host and sends the weights back: the same gradients as on the CPU, on the device. (Until
// stop 44 the backward refused, after a whole forward had run on the device.)
TEST(DeviceDispatch, MaximumAndMinimumBackwardOnTheDevice) {
  KernelsScope scope(&host_device());
  const std::vector<double> av = {1, 5, 2, NAN}, bv = {3, 5, 0, 1}, dv = {1, 2, 3, 4};
  for (bool is_max : {true, false}) {
    Tensor a = ng::from_vector(av, {4}).to(kDev), b = ng::from_vector(bv, {4}).to(kDev);
    a.requires_grad_(true);
    b.requires_grad_(true);
    Tensor y = is_max ? ng::maximum(a, b) : ng::minimum(a, b);
    ng::sum(ng::mul(y, ng::from_vector(dv, {4}).to(kDev))).backward();
    ASSERT_EQ(a.grad().device(), kDev);
    ASSERT_EQ(b.grad().device(), kDev);
    // On the CPU, the same.
    Tensor ca = ng::from_vector(av, {4}).requires_grad_(), cb = ng::from_vector(bv, {4}).requires_grad_();
    ng::sum(ng::mul(is_max ? ng::maximum(ca, cb) : ng::minimum(ca, cb), ng::from_vector(dv, {4}))).backward();
    EXPECT_EQ(a.grad().to(Device::cpu()).to_vector<float>(), ca.grad().to_vector<float>()) << is_max;
    EXPECT_EQ(b.grad().to(Device::cpu()).to_vector<float>(), cb.grad().to_vector<float>()) << is_max;
    // maximum: a gets 0, 1 (half of the tie's 2), 3, 4 (NaN: both); minimum: 1, 1, 0, 4.
    const std::vector<float> want_a =
        is_max ? std::vector<float>{0, 1, 3, 4} : std::vector<float>{1, 1, 0, 4};
    EXPECT_EQ(a.grad().to(Device::cpu()).to_vector<float>(), want_a) << is_max;
  }
}

// slice, narrow and select of a device tensor: the gradient of the window is on the tensor's device (it was
// built on the host, and the engine refused it), zeros outside the window, dout inside.
TEST(DeviceDispatch, SliceBackwardOnTheDevice) {
  KernelsScope scope(&host_device());
  const std::vector<double> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Tensor x = ng::from_vector(xv, {3, 4}).to(kDev);
  x.requires_grad_(true);
  Tensor w = ng::from_vector(std::vector<double>{10, 20, 30}, {3, 1}).to(kDev);
  // columns 1 and 3 (step 2), then row 2 of x itself
  Tensor y = ng::add(ng::sum(ng::mul(x.slice(1, 1, 4, 2), w)), ng::sum(x.select(0, 2)));
  y.backward();
  ASSERT_EQ(x.grad().device(), kDev);
  EXPECT_EQ(x.grad().to(Device::cpu()).to_vector<float>(),
            (std::vector<float>{0, 10, 0, 10, 0, 20, 0, 20, 1, 31, 1, 31}));
}

TEST(DeviceDispatch, CopyIntoADeviceTensor) {
  KernelsScope scope(&host_device());
  Tensor d = ng::zeros({2, 3}, DType::f32, kDev);
  d.copy_(ng::tensor({1.0, 2.0, 3.0}));  // from the CPU, broadcast over rows
  EXPECT_EQ(d.to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  Tensor back = ng::zeros({3, 2});
  back.copy_(d.t());  // from the device into a CPU tensor
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 3, 3}));
  std::string msg = error_of([&] { d.t().copy_(ng::zeros({3, 2})); });
  EXPECT_NE(msg.find("copy_: on cuda:0, expected a contiguous destination"), std::string::npos) << msg;
}

TEST(DeviceDispatch, TableRegistration) {
  const ng::DeviceKernels* built_in = ng::cuda_kernels();
#ifdef NORMGRAD_HAVE_CUDA
  ASSERT_NE(built_in, nullptr);
  EXPECT_STREQ(built_in->name, "cuda");
  // Every slot of the CUDA table is filled.
  for (const void* slot : {(const void*)built_in->empty,       (const void*)built_in->fill,
                           (const void*)built_in->copy,        (const void*)built_in->copy_bytes,
                           (const void*)built_in->to_device,   (const void*)built_in->binary,
                           (const void*)built_in->unary,       (const void*)built_in->unary_backward,
                           (const void*)built_in->add_,        (const void*)built_in->mul_,
                           (const void*)built_in->sum,         (const void*)built_in->rope,
                           (const void*)built_in->masked_fill, (const void*)built_in->matmul,
                           (const void*)built_in->softmax,     (const void*)built_in->cross_entropy,
                           (const void*)built_in->embedding,   (const void*)built_in->layer_norm,
                           (const void*)built_in->rms_norm,    (const void*)built_in->adam_step})
    EXPECT_NE(slot, nullptr);
#else
  EXPECT_EQ(built_in, nullptr);
#endif
  {
    KernelsScope scope(&host_device());
    EXPECT_EQ(ng::cuda_kernels(), &host_device());
    EXPECT_EQ(&ng::device_kernels(kDev, "test"), &host_device());
  }
  EXPECT_EQ(ng::cuda_kernels(), built_in);
  // CPU tensors never dispatch, whatever is registered.
  EXPECT_FALSE(ng::on_device({ng::ones({1}), Tensor(), ng::ones({2})}, "test"));
}

// ---- Module::to -------------------------------------------------------------------------------------------
TEST(ModuleTo, CpuToCpuKeepsEverything) {
  ng::nn::TinyLMConfig cfg = exp2_config(kExp2[3], true);
  cfg.tie_weights = true;
  ng::nn::TinyLM model(cfg);
  Tensor w = model.tok_emb->weight;
  const void* data = w.raw_data();
  const std::vector<float> before = w.to_vector<float>();
  model.to(Device::cpu());
  EXPECT_EQ(model.tok_emb->weight.raw_data(), data);  // not copied
  EXPECT_EQ(model.tok_emb->weight.to_vector<float>(), before);
  EXPECT_TRUE(model.tok_emb->weight.requires_grad());
}

TEST(ModuleTo, ToTheDeviceAndBackInPlace) {
  KernelsScope scope(&host_device());
  ng::nn::TinyLMConfig cfg = exp2_config(kExp2[2], true);
  cfg.tie_weights = true;
  ng::nn::TinyLM model(cfg);
  ng::nn::NamedTensors params = model.named_parameters();
  std::vector<std::vector<float>> before;
  for (auto& [n, p] : params) before.push_back(p.to_vector<float>());
  Tensor handle = model.tok_emb->weight;  // a handle taken before the move sees the moved data
  handle.set_grad(ng::zeros(handle.shape()));
  model.to(kDev);
  EXPECT_TRUE(handle.device() == kDev);
  EXPECT_FALSE(handle.grad().defined());  // dropped: it lived on the old device
  for (auto& [n, p] : model.named_parameters()) {
    EXPECT_TRUE(p.device() == kDev) << n;
    EXPECT_TRUE(p.requires_grad()) << n;
    EXPECT_TRUE(p.is_leaf()) << n;
  }
  model.to(Device::cpu());
  size_t i = 0;
  for (auto& [n, p] : model.named_parameters()) {
    EXPECT_TRUE(p.device().is_cpu()) << n;
    EXPECT_EQ(p.to_vector<float>(), before[i++]) << n;
  }
}

TEST(ModuleTo, WithoutABackendIsAnError) {
  KernelsScope none(nullptr);
  ng::nn::Linear lin(3, 2);
  std::string msg = error_of([&] { lin.to(kDev); });
  EXPECT_NE(
      msg.find("to: cannot move a tensor from cpu to cuda:0: normgrad was built without the CUDA backend"),
      std::string::npos)
      << msg;
  EXPECT_TRUE(lin.weight.device().is_cpu());  // nothing moved
}

// The engine and gradcheck with device tensors (the host-memory device): a custom backward that returns its
// gradient on another device than its input's is named with the node; gradcheck refuses a device input,
// whose elements it would nudge from the host.
TEST(DeviceDispatch, EngineAndGradcheckNameTheDevice) {
  KernelsScope scope(&host_device());
  Tensor x = ng::ones({3}).to(kDev);
  x.requires_grad_(true);
  Tensor y;
  {
    ng::NoGradGuard g;
    y = ng::mul(x, 2.0);
  }
  ng::attach(y, "CpuGradBackward", {x},
             [](const Tensor& dout) -> std::vector<Tensor> { return {dout.to(Device::cpu())}; });
  std::string msg = error_of([&] { ng::sum(y).backward(); });
  EXPECT_NE(msg.find("CpuGradBackward: backward returned a gradient on cpu for input 0, expected cuda:0 (the "
                     "input's device)"),
            std::string::npos)
      << msg;
  Tensor d = ng::ones({2}, DType::f64).to(kDev);
  d.requires_grad_(true);
  msg = error_of([&] { ng::gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {d}); });
  EXPECT_NE(msg.find("gradcheck: input 0 is on cuda:0; finite differences nudge its elements from the host"),
            std::string::npos)
      << msg;
}
