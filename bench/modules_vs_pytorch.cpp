// modules_vs_pytorch: the normgrad half of a differential check of the optimizers, the learning-rate
// schedules, the norm modules and the safetensors files against PyTorch (bench/modules_vs_pytorch.py, which
// runs this program, does the same with torch.optim, torch.optim.lr_scheduler, torch.nn and the official
// safetensors package, and compares every number). Not a benchmark: kept beside tinylm_vs_pytorch.cpp because
// it needs PyTorch, which the tests do not.
//
//   cmake --build --preset release --target modules_vs_pytorch
//   /tmp/torchenv/bin/python bench/modules_vs_pytorch.py            # runs
//   build/release/bench/modules_vs_pytorch --out DIR [--only SECTION]
//   build/release/bench/modules_vs_pytorch --read FILE --dump OUT.json [--checkpoint]
//
// Everything numeric is f64, so that the two sides can be held to ~1e-9 of each tensor's largest value.
// Random data comes from ng::Generator and is written out; the Python side reads it, it never redraws it.
//
// --out DIR writes, per section (io/safetensors.h for the tensors):
//
//   schedules/    schedules.json   {name: {"kind", "base_lr", "warmup_steps", "total_steps", "min_lr"}}
//                 values.safetensors  name -> (kScheduleSteps,) f64, LRSchedule(s) for s = 0, 1, ...
//   optim/<case>/ config.json      the optimizer ("SGD", "Adam", "AdamW") and its options, the schedule,
//                                  "steps", "clip_max_norm" (null: no clipping), "params" (names in order)
//                 data.safetensors "init.<p>", "step<s>.grad.<p>" (the gradient drawn for step s; absent
//                                  where that parameter gets no gradient that step)
//                 result.safetensors
//                                  "step<s>.lr" (0-d), "step<s>.clip_norm" (0-d, clip_grad_norm_'s return),
//                                  "step<s>.clipped.<p>", "step<s>.param.<p>" (after the step),
//                                  "step<s>.state.<name>" (Optimizer::state_dict() but "lr": "<p>.step",
//                                  "<p>.momentum_buffer", "<p>.exp_avg", "<p>.exp_avg_sq")
//     per step s: opt.lr = schedule(s); set the gradients; clip_grad_norm_ (if any); opt.step().
//   norms/<case>/ config.json      {"module": {the module's kind and constructor arguments}, "steps", "lr"}
//                 data.safetensors "init.<p>", "step<s>.x", "step<s>.dy", "eval.x", "eval.dy"
//                 result.safetensors
//                                  "<when>.y", "<when>.dx", "<when>.grad.<p>", "<when>.buffer.<b>" (after the
//                                  forward), "step<s>.param.<p>" (after SGD(lr).step()); <when> = step<s>,
//                                  eval
//     the module in train() for `steps` steps (y = m(x); y.backward(dy); SGD step), then eval() once.
//   safetensors/  normgrad.safetensors     every dtype normgrad writes (f32, f64, f16, bf16, i64), from known
//                                          doubles: rounding ties, overflow, subnormals, +-0, +-inf, NaN; a
//                                          0-d and empty tensors, a non-contiguous view, metadata
//                 normgrad.json            what that file must hold: metadata, and per tensor its name,
//                                          dtype, shape, raw bytes (hex) and the source values
//                 checkpoint.safetensors   nn::save_checkpoint of a small f32 TinyLM (MiniMind) after 2
//                                          AdamW steps, with a generator, a tokenizer and extra metadata
//                 checkpoint.json          the same description of everything it must hold
// and DIR/index.json: {"schedules": [...], "optim": [...], "norms": [...], "safetensors": [...]}.
//
// --read FILE --dump OUT.json loads FILE with io::load_safetensors and writes {"metadata", "tensors":
// [{"name", "dtype", "shape", "hex", "values"}]} in file order (how the Python side checks files that PyTorch
// wrote). With --checkpoint it instead builds a TinyLM and an AdamW from the file's config, restores them
// with nn::load_checkpoint, and describes their state as checkpoint.json does. A file normgrad refuses is
// exit 1 with the error on stderr.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "normgrad.h"

using namespace ng;
using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kScheduleSteps = 14;  // schedule values at steps 0..13: past every case's total_steps
constexpr int64_t kOptimSteps = 5;
constexpr int64_t kNormSteps = 5;
constexpr double kNormLR = 0.1;  // the SGD that trains the norms' parameters between steps

// ---- small helpers
// ------------------------------------------------------------------------------------------

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  NG_CHECK(bool(f), "modules_vs_pytorch", "cannot write ", path.string());
  f << text << "\n";
}

// A copy cut from the graph (the optimizer, the clipping and the next step change the original in place).
Tensor snapshot(const Tensor& t) {
  NoGradGuard no_grad;
  return t.detach().clone();
}

// 17 significant digits: every double round-trips, and Python's float() reads "nan", "-nan", "inf", "-0".
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The tensor's bytes as safetensors stores them (row-major, little-endian), in hex.
std::string hex_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(c.raw_data());
  const size_t n = size_t(c.numel()) * dtype_size(c.dtype());
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

// {"name", "dtype", "shape", "hex"} and, when asked, "values": the elements in row-major order (as exact
// integers for i64, as 17-digit strings otherwise).
json describe(const std::string& name, const Tensor& t, bool with_values) {
  json shape = json::array();
  for (int64_t d : t.shape()) shape.push_back(d);
  json out = {{"name", name}, {"dtype", dtype_name(t.dtype())}, {"shape", shape}, {"hex", hex_bytes(t)}};
  if (with_values) {
    json values = json::array();
    if (t.dtype() == DType::i64) {
      for (int64_t v : t.to_vector<int64_t>()) values.push_back(v);
    } else {
      for (double v : t.to_vector<double>()) values.push_back(number(v));
    }
    out["values"] = values;
  }
  return out;
}

json schedule_json(const optim::LRSchedule& s) {
  return {{"kind", s.kind},
          {"base_lr", s.base_lr},
          {"warmup_steps", s.warmup_steps},
          {"total_steps", s.total_steps},
          {"min_lr", s.min_lr}};
}

// ---- 1. learning-rate schedules
// -----------------------------------------------------------------------------

std::vector<std::pair<std::string, optim::LRSchedule>> schedule_cases() {
  return {
      {"constant", optim::constant_lr(0.05)},
      {"linear_warmup_4", optim::linear_warmup(0.1, 4)},
      {"linear_warmup_1", optim::linear_warmup(0.1, 1)},
      {"linear_warmup_0", optim::linear_warmup(0.1, 0)},
      {"cosine_3_10", optim::cosine_with_warmup(0.1, 3, 10)},
      {"cosine_2_8_min", optim::cosine_with_warmup(0.1, 2, 8, 0.01)},
      {"cosine_0_5_min", optim::cosine_with_warmup(1.0, 0, 5, 0.1)},
      {"cosine_1_6", optim::cosine_with_warmup(0.3, 1, 6)},
  };
}

json run_schedules(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  json config = json::object(), names = json::array();
  nn::NamedTensors values;
  for (const auto& [name, schedule] : schedule_cases()) {
    std::vector<double> lr;
    for (int64_t s = 0; s < kScheduleSteps; ++s) lr.push_back(schedule(s));
    values.emplace_back(name, from_vector(lr, Shape{kScheduleSteps}, DType::f64));
    config[name] = schedule_json(schedule);
    names.push_back(name);
  }
  io::save_safetensors((dir / "values.safetensors").string(), values);
  write_text(dir / "schedules.json", config.dump(2));
  std::printf("schedules              %zu schedules, steps 0..%lld\n", values.size(),
              (long long)kScheduleSteps - 1);
  return names;
}

// ---- 2. optimizers
// ------------------------------------------------------------------------------------------

struct OptimCase {
  std::string name;
  std::string kind;  // "SGD", "Adam", "AdamW"
  optim::SGDOptions sgd;
  optim::AdamOptions adam;
  optim::LRSchedule schedule;
  double clip_max_norm = 0;  // 0: no clipping
  int64_t skip_step = -1;    // at this step, parameter skip_param gets no gradient (it must not advance)
  std::string skip_param;
  uint64_t seed = 0;
};

std::vector<OptimCase> optim_cases() {
  std::vector<OptimCase> cases;
  auto sgd = [&](std::string name, optim::SGDOptions o, optim::LRSchedule s, uint64_t seed) {
    OptimCase c;
    c.name = std::move(name);
    c.kind = "SGD";
    c.sgd = o;
    c.schedule = s;
    c.seed = seed;
    return c;
  };
  auto adam = [&](std::string name, std::string kind, optim::AdamOptions o, optim::LRSchedule s,
                  uint64_t seed) {
    OptimCase c;
    c.name = std::move(name);
    c.kind = std::move(kind);
    c.adam = o;
    c.schedule = s;
    c.seed = seed;
    return c;
  };

  cases.push_back(sgd("sgd_plain", {}, optim::constant_lr(0.1), 21));

  optim::SGDOptions momentum;
  momentum.momentum = 0.9;
  OptimCase c = sgd("sgd_momentum", momentum, optim::linear_warmup(0.1, 3), 22);
  c.skip_step = 0;  // w's momentum buffer starts at its first real step, 1
  c.skip_param = "w";
  cases.push_back(c);

  optim::SGDOptions damp;
  damp.momentum = 0.9;
  damp.dampening = 0.3;
  damp.weight_decay = 0.01;
  cases.push_back(sgd("sgd_dampening_wd", damp, optim::cosine_with_warmup(0.1, 1, 4, 0.01), 23));

  optim::SGDOptions nesterov;
  nesterov.momentum = 0.8;
  nesterov.nesterov = true;
  nesterov.weight_decay = 0.05;
  c = sgd("sgd_nesterov_wd_clip", nesterov, optim::constant_lr(0.05), 24);
  c.clip_max_norm = 4.0;
  cases.push_back(c);

  optim::SGDOptions wd;
  wd.weight_decay = 0.1;
  c = sgd("sgd_weight_decay_skip", wd, optim::constant_lr(0.1), 25);
  c.skip_step = 2;
  c.skip_param = "b";
  cases.push_back(c);

  cases.push_back(adam("adam", "Adam", {}, optim::constant_lr(1e-2), 31));

  optim::AdamOptions adam_wd;
  adam_wd.weight_decay = 0.1;
  c = adam("adam_wd_clip", "Adam", adam_wd, optim::linear_warmup(0.02, 2), 32);
  c.clip_max_norm = 3.0;
  cases.push_back(c);

  optim::AdamOptions betas;
  betas.beta1 = 0.5;
  betas.beta2 = 0.9;
  betas.eps = 1e-6;
  c = adam("adam_betas_cosine_skip", "Adam", betas, optim::cosine_with_warmup(0.05, 2, 5, 0.005), 33);
  c.skip_step = 1;
  c.skip_param = "k";
  cases.push_back(c);

  optim::AdamWOptions adamw;
  adamw.weight_decay = 0.1;
  c = adam("adamw_cosine_clip", "AdamW", adamw, optim::cosine_with_warmup(0.01, 0, 5), 34);
  c.clip_max_norm = 1.0;
  cases.push_back(c);

  cases.push_back(adam("adamw_default_wd", "AdamW", optim::AdamWOptions{}, optim::constant_lr(0.01), 35));
  return cases;
}

json optimizer_json(const OptimCase& c) {
  if (c.kind == "SGD")
    return {{"lr", c.sgd.lr},
            {"momentum", c.sgd.momentum},
            {"dampening", c.sgd.dampening},
            {"weight_decay", c.sgd.weight_decay},
            {"nesterov", c.sgd.nesterov}};
  return {{"lr", c.adam.lr},
          {"beta1", c.adam.beta1},
          {"beta2", c.adam.beta2},
          {"eps", c.adam.eps},
          {"weight_decay", c.adam.weight_decay}};
}

void run_optim_case(OptimCase c, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  c.sgd.lr = c.adam.lr = c.schedule.base_lr;  // only the first value: the schedule sets lr before each step

  // Parameters of a few shapes: (3, 4), (5), (2, 3, 2).
  const std::vector<std::pair<std::string, Shape>> shapes = {{"w", {3, 4}}, {"b", {5}}, {"k", {2, 3, 2}}};
  Generator gen(c.seed);
  nn::NamedTensors params, data, result;
  std::vector<Tensor> tensors;
  for (const auto& [name, shape] : shapes) {
    Tensor p = randn(shape, gen, DType::f64);
    p.requires_grad_();
    params.emplace_back(name, p);
    tensors.push_back(p);
    data.emplace_back("init." + name, snapshot(p));
  }

  std::unique_ptr<optim::Optimizer> opt;
  if (c.kind == "SGD") {
    opt = std::make_unique<optim::SGD>(params, c.sgd);
  } else if (c.kind == "Adam") {
    opt = std::make_unique<optim::Adam>(params, c.adam);
  } else {
    optim::AdamWOptions o;
    static_cast<optim::AdamOptions&>(o) = c.adam;
    opt = std::make_unique<optim::AdamW>(params, o);
  }

  for (int64_t s = 0; s < kOptimSteps; ++s) {
    const std::string step = "step" + std::to_string(s) + ".";
    opt->lr = c.schedule(s);

    // Gradients of a growing scale, so that clipping leaves the first steps alone and cuts the later ones.
    const double scale = 0.5 + 0.5 * double(s);
    for (auto& [name, p] : params) {
      Tensor g = randn(p.shape(), gen, DType::f64, 0.0, scale);
      if (s == c.skip_step && name == c.skip_param) {
        p.zero_grad();  // no .grad: the optimizer skips p this step
        continue;
      }
      data.emplace_back(step + "grad." + name, snapshot(g));
      p.set_grad(g);
    }
    if (c.clip_max_norm > 0) {
      const double norm = optim::clip_grad_norm_(tensors, c.clip_max_norm);
      result.emplace_back(step + "clip_norm", scalar_tensor(norm, DType::f64));
      for (auto& [name, p] : params)
        if (p.grad().defined()) result.emplace_back(step + "clipped." + name, snapshot(p.grad()));
    }
    opt->step();

    result.emplace_back(step + "lr", scalar_tensor(opt->lr, DType::f64));
    for (auto& [name, p] : params) result.emplace_back(step + "param." + name, snapshot(p));
    for (auto& [name, t] : opt->state_dict())
      if (name != "lr") result.emplace_back(step + "state." + name, snapshot(t));
  }
  io::save_safetensors((dir / "data.safetensors").string(), data);
  io::save_safetensors((dir / "result.safetensors").string(), result);

  json names = json::array();
  for (auto& [name, _] : params) names.push_back(name);
  json config = {{"name", c.name},
                 {"optimizer", c.kind},
                 {"options", optimizer_json(c)},
                 {"schedule", schedule_json(c.schedule)},
                 {"steps", kOptimSteps},
                 {"clip_max_norm", c.clip_max_norm > 0 ? json(c.clip_max_norm) : json(nullptr)},
                 {"params", names}};
  write_text(dir / "config.json", config.dump(2));
  std::printf("%-30s %-5s %d steps, lr %.4g -> %.4g%s%s\n", c.name.c_str(), c.kind.c_str(), int(kOptimSteps),
              c.schedule(0), c.schedule(kOptimSteps - 1), c.clip_max_norm > 0 ? ", clipped" : "",
              c.skip_step >= 0 ? ", one gradient skipped" : "");
}

// ---- 3. norm modules
// ----------------------------------------------------------------------------------------

// A norm module and its arguments, as JSON: the one description both sides build their module from.
json running_norm(const char* module, int64_t C, double eps, std::optional<double> momentum, bool affine,
                  bool track) {
  return {{"module", module}, {"num_features", C},
          {"eps", eps},       {"momentum", momentum ? json(*momentum) : json(nullptr)},
          {"affine", affine}, {"track_running_stats", track}};
}

std::shared_ptr<nn::Module> make_norm(const json& m) {
  const std::string kind = m["module"];
  auto momentum = [&]() -> std::optional<double> {
    if (m["momentum"].is_null()) return std::nullopt;
    return m["momentum"].get<double>();
  };
  if (kind == "BatchNorm1d")
    return std::make_shared<nn::BatchNorm1d>(m["num_features"], m["eps"], momentum(), m["affine"],
                                             m["track_running_stats"]);
  if (kind == "BatchNorm2d")
    return std::make_shared<nn::BatchNorm2d>(m["num_features"], m["eps"], momentum(), m["affine"],
                                             m["track_running_stats"]);
  if (kind == "InstanceNorm1d")
    return std::make_shared<nn::InstanceNorm1d>(m["num_features"], m["eps"], momentum(), m["affine"],
                                                m["track_running_stats"]);
  if (kind == "InstanceNorm2d")
    return std::make_shared<nn::InstanceNorm2d>(m["num_features"], m["eps"], momentum(), m["affine"],
                                                m["track_running_stats"]);
  if (kind == "LayerNorm")
    return std::make_shared<nn::LayerNorm>(m["normalized_shape"].get<Shape>(), m["eps"],
                                           m["elementwise_affine"], m["bias"]);
  if (kind == "RMSNorm")
    return std::make_shared<nn::RMSNorm>(m["dim"].get<int64_t>(), m["eps"], m["elementwise_affine"]);
  if (kind == "GroupNorm")
    return std::make_shared<nn::GroupNorm>(m["num_groups"], m["num_channels"], m["eps"], m["affine"]);
  fail("modules_vs_pytorch", "unknown norm module '", kind, "'");
}

struct NormCase {
  std::string name;
  json module;
  Shape x_shape;
  uint64_t seed;
};

std::vector<NormCase> norm_cases() {
  const std::optional<double> cumulative = std::nullopt;  // momentum None: the cumulative average
  auto layer_norm = [](Shape shape, double eps, bool affine, bool bias) {
    return json{{"module", "LayerNorm"},
                {"normalized_shape", shape},
                {"eps", eps},
                {"elementwise_affine", affine},
                {"bias", bias}};
  };
  auto rms_norm = [](int64_t dim, double eps, bool affine) {
    return json{{"module", "RMSNorm"}, {"dim", dim}, {"eps", eps}, {"elementwise_affine", affine}};
  };
  auto group_norm = [](int64_t G, int64_t C, double eps, bool affine) {
    return json{
        {"module", "GroupNorm"}, {"num_groups", G}, {"num_channels", C}, {"eps", eps}, {"affine", affine}};
  };
  return {
      {"batchnorm1d_nc", running_norm("BatchNorm1d", 5, 1e-5, 0.1, true, true), {8, 5}, 41},
      {"batchnorm1d_ncl_cumulative",
       running_norm("BatchNorm1d", 3, 1e-5, cumulative, true, true),
       {4, 3, 6},
       42},
      {"batchnorm1d_untracked", running_norm("BatchNorm1d", 4, 1e-5, 0.1, true, false), {6, 4, 3}, 43},
      {"batchnorm2d", running_norm("BatchNorm2d", 4, 1e-3, 0.1, true, true), {3, 4, 3, 5}, 44},
      {"batchnorm2d_cumulative_noaffine",
       running_norm("BatchNorm2d", 3, 1e-5, cumulative, false, true),
       {2, 3, 4, 4},
       45},
      {"layernorm", layer_norm({8}, 1e-5, true, true), {2, 3, 8}, 51},
      {"layernorm_2d_nobias", layer_norm({3, 8}, 1e-6, true, false), {2, 3, 8}, 52},
      {"layernorm_noaffine", layer_norm({6}, 1e-5, false, true), {5, 6}, 53},
      {"rmsnorm", rms_norm(10, 1e-6, true), {4, 6, 10}, 54},
      {"rmsnorm_noaffine", rms_norm(7, 1e-5, false), {3, 7}, 55},
      {"groupnorm", group_norm(3, 6, 1e-5, true), {3, 6, 5}, 61},
      {"groupnorm_2d", group_norm(2, 8, 1e-4, true), {2, 8, 3, 3}, 62},
      {"groupnorm_noaffine_g_eq_c", group_norm(4, 4, 1e-5, false), {3, 4, 5}, 63},
      {"instancenorm1d", running_norm("InstanceNorm1d", 4, 1e-5, 0.1, false, false), {3, 4, 7}, 71},
      {"instancenorm1d_affine_tracked",
       running_norm("InstanceNorm1d", 4, 1e-5, 0.1, true, true),
       {3, 4, 7},
       72},
      {"instancenorm1d_unbatched_tracked",
       running_norm("InstanceNorm1d", 3, 1e-5, 0.2, false, true),
       {3, 9},
       73},
      {"instancenorm2d_affine", running_norm("InstanceNorm2d", 3, 1e-5, 0.1, true, false), {2, 3, 4, 5}, 74},
      // (momentum = nullopt is refused with track_running_stats: PyTorch takes it as 0; see group_norm.h)
      {"instancenorm2d_affine_tracked",
       running_norm("InstanceNorm2d", 3, 1e-5, 0.3, true, true),
       {2, 3, 4, 5},
       75},
  };
}

// One forward and backward: y = m(x), y.backward(dy); records y, dx, every parameter's gradient and every
// buffer as "<when>.*".
void norm_pass(nn::Module& m, const Tensor& x_in, const Tensor& dy, const std::string& when,
               nn::NamedTensors& result) {
  Tensor x = x_in.detach().clone();
  x.requires_grad_();
  m.zero_grad();
  Tensor y = m.forward(x);
  y.backward(dy);
  result.emplace_back(when + ".y", snapshot(y));
  result.emplace_back(when + ".dx", snapshot(x.grad()));
  for (auto& [name, p] : m.named_parameters())
    result.emplace_back(when + ".grad." + name, snapshot(p.grad()));
  for (auto& [name, b] : m.named_buffers()) result.emplace_back(when + ".buffer." + name, snapshot(b));
}

void run_norm_case(const NormCase& c, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::shared_ptr<nn::Module> m = make_norm(c.module);
  nn::cast_(*m, DType::f64);
  Generator gen(c.seed);
  nn::NamedTensors data, result;

  // Parameters away from their ones/zeros init, so that their gradients and updates show.
  for (auto& [name, p] : m->named_parameters()) {
    const bool is_weight = name.size() >= 6 && name.substr(name.size() - 6) == "weight";
    NoGradGuard no_grad;
    p.copy_(randn(p.shape(), gen, DType::f64, is_weight ? 1.0 : 0.0, 0.3));
    data.emplace_back("init." + name, snapshot(p));
  }
  std::unique_ptr<optim::SGD> opt;
  if (!m->named_parameters().empty()) {
    optim::SGDOptions o;
    o.lr = kNormLR;
    opt = std::make_unique<optim::SGD>(m->named_parameters(), o);
  }

  m->train();
  for (int64_t s = 0; s < kNormSteps; ++s) {
    const std::string step = "step" + std::to_string(s);
    // A mean and spread that move from step to step, so that the running statistics have something to track.
    Tensor x = randn(c.x_shape, gen, DType::f64, 0.4 * double(s) - 0.5, 1.0 + 0.25 * double(s));
    Tensor dy = randn(c.x_shape, gen, DType::f64);
    data.emplace_back(step + ".x", x);
    data.emplace_back(step + ".dy", dy);
    norm_pass(*m, x, dy, step, result);
    if (opt) {
      opt->step();
      for (auto& [name, p] : m->named_parameters()) result.emplace_back(step + ".param." + name, snapshot(p));
    }
  }

  m->eval();
  Tensor x = randn(c.x_shape, gen, DType::f64, 0.3, 1.5);
  Tensor dy = randn(c.x_shape, gen, DType::f64);
  data.emplace_back("eval.x", x);
  data.emplace_back("eval.dy", dy);
  norm_pass(*m, x, dy, "eval", result);

  io::save_safetensors((dir / "data.safetensors").string(), data);
  io::save_safetensors((dir / "result.safetensors").string(), result);
  json config = {{"name", c.name}, {"module", c.module}, {"steps", kNormSteps}, {"lr", kNormLR}};
  write_text(dir / "config.json", config.dump(2));
  std::printf("%-34s %-15s x %s, %zu parameters, %zu buffers\n", c.name.c_str(),
              c.module["module"].get<std::string>().c_str(), shape_str(c.x_shape).c_str(),
              m->named_parameters().size(), m->named_buffers().size());
}

// ---- 4. safetensors
// -----------------------------------------------------------------------------------------

// A file of every dtype normgrad writes, each tensor made from known doubles by from_vector (so the Python
// side can convert the same doubles with PyTorch and compare the bits).
void write_dtype_file(const std::filesystem::path& dir) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // Values where the rounding to f16 / bf16 shows: halfway ties (to even), overflow, subnormals, signed zero.
  const std::vector<double> specials = {0.0,
                                        -0.0,
                                        1.0,
                                        -2.5,
                                        0.1,
                                        -1.0 / 3.0,
                                        1.0 + std::ldexp(1.0, -8),
                                        1.0 + 3 * std::ldexp(1.0, -8),  // bf16 ties: to 1, to 1 + 2^-6
                                        1.0 + std::ldexp(1.0, -11),
                                        1.0 + 3 * std::ldexp(1.0, -11),  // f16 ties: to 1, to 1 + 2^-9
                                        65504.0,
                                        65519.0,
                                        65520.0,
                                        70000.0,  // f16 max, below/at the overflow tie, past it
                                        std::ldexp(1.0, -24),
                                        std::ldexp(1.0, -25),
                                        1e-7,  // f16 subnormals, the smallest's half-tie
                                        3.4028234663852886e38,
                                        1e-40,
                                        -1e-45,  // f32 max (bf16 overflows), f32 subnormals
                                        inf,
                                        -inf,
                                        nan};
  std::vector<double> ramp;
  for (int k = 0; k < 12; ++k) ramp.push_back((k - 5.5) * 0.37);
  Generator gen(91);

  struct Entry {
    std::string name;
    Tensor t;
    json source;  // the values it was made from, row-major
  };
  std::vector<Entry> entries;
  auto from = [&](const std::string& name, const std::vector<double>& v, const Shape& shape, DType dt) {
    json source = json::array();
    for (double x : v) source.push_back(number(x));
    entries.push_back({name, from_vector(v, shape, dt), source});
  };
  const int64_t n = int64_t(specials.size());
  from("f32.specials", specials, {n}, DType::f32);
  from("f64.specials", specials, {n}, DType::f64);
  from("f16.specials", specials, {n}, DType::f16);
  from("bf16.specials", specials, {n}, DType::bf16);
  from("f32.matrix", ramp, {3, 4}, DType::f32);
  from("f64.cube", randn({2, 3, 4}, gen, DType::f64).to_vector<double>(), {2, 3, 4}, DType::f64);
  from("f16.matrix", randn({2, 6}, gen, DType::f64).to_vector<double>(), {2, 6}, DType::f16);
  from("bf16.matrix", randn({4, 5}, gen, DType::f64).to_vector<double>(), {4, 5}, DType::bf16);
  from("f64.scalar", {-3.25}, {}, DType::f64);
  from("f32.empty", {}, {0, 3}, DType::f32);
  from("bf16.empty", {}, {2, 0}, DType::bf16);
  // A transposed view: written as its row-major copy.
  Tensor base = from_vector(ramp, Shape{3, 4}, DType::f32);
  json transposed = json::array();
  for (double x : base.t().to_vector<double>()) transposed.push_back(number(x));
  entries.push_back({"f32.transposed", base.t(), transposed});
  const std::vector<int64_t> ints = {0,
                                     -1,
                                     1,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min(),
                                     (int64_t(1) << 53) + 1,
                                     -123456789012345};
  entries.push_back({"i64.values", from_vector(ints, Shape{7}), ints});
  entries.push_back({"i64.scalar", from_vector(std::vector<int64_t>{42}, Shape{}), json::array({42})});
  entries.push_back({"i64.empty", from_vector(std::vector<int64_t>{}, Shape{0}), json::array()});

  const std::map<std::string, std::string> metadata = {{"writer", "normgrad"},
                                                       {"note", "modules_vs_pytorch"}};
  nn::NamedTensors tensors;
  json expected = {{"file", "normgrad.safetensors"}, {"metadata", metadata}, {"tensors", json::array()}};
  for (const Entry& e : entries) {
    tensors.emplace_back(e.name, e.t);
    json d = describe(e.name, e.t, false);
    d["source"] = e.source;
    expected["tensors"].push_back(d);
  }
  io::save_safetensors((dir / "normgrad.safetensors").string(), tensors, metadata);
  write_text(dir / "normgrad.json", expected.dump(1));
  std::printf(
      "safetensors/normgrad    %zu tensors (f32, f64, f16, bf16, i64; 0-d, empty, a transposed view)\n",
      entries.size());
}

// What a checkpoint of (model, optimizer, step, generator "data", tokenizer) must hold, described tensor by
// tensor with the names nn/checkpoint.h gives them (built here from the objects, not read from the file).
json describe_train_state(nn::TinyLM& model, optim::Optimizer& opt, int64_t step, const Generator& data_gen,
                          const nn::CharTokenizer& tok, const std::map<std::string, std::string>& metadata) {
  json tensors = json::array();
  for (auto& [name, t] : model.state_dict()) tensors.push_back(describe("model." + name, t, false));
  for (auto& [name, t] : opt.state_dict()) tensors.push_back(describe("optim." + name, t, false));
  tensors.push_back(describe(
      "rng.data",
      from_vector(std::vector<int64_t>{int64_t(data_gen.seed()), int64_t(data_gen.offset())}, Shape{2}),
      true));
  tensors.push_back(describe("train.step", from_vector(std::vector<int64_t>{step}, Shape{}), true));
  tensors.push_back(
      describe("tokenizer.vocab", from_vector(tok.vocab_bytes(), Shape{tok.vocab_size()}), true));
  json hp = json::object();
  for (auto& [k, v] : opt.hyperparameters()) hp[k] = v;
  return {
      {"metadata", metadata}, {"optimizer", opt.type_name()}, {"hyperparameters", hp}, {"tensors", tensors}};
}

void write_checkpoint(const std::filesystem::path& dir) {
  nn::CharTokenizer tok = nn::CharTokenizer::from_corpus("normgrad reads and writes safetensors.");
  nn::TinyLMConfig cfg = nn::TinyLMConfig::minimind(tok.vocab_size(), 32, 2, 4, 2);
  cfg.seed = 7;
  nn::TinyLM model(cfg);
  optim::AdamWOptions o;
  o.lr = 1e-2;
  optim::AdamW opt(model.named_parameters(), o);
  Generator data_gen(42);
  const int64_t steps = 2, B = 2, T = 8;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor seq = randint(0, tok.vocab_size(), {B, T + 1}, data_gen);
    Tensor tokens = seq.narrow(1, 0, T).contiguous(), targets = seq.narrow(1, 1, T).contiguous();
    Tensor loss = model.loss(tokens, targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  nn::TrainState state;
  state.model = &model;
  state.optimizer = &opt;
  state.step = steps;
  state.generators = {{"data", &data_gen}};
  state.config_json = cfg.to_json();
  state.tokenizer = &tok;
  state.metadata = {{"run", "modules_vs_pytorch"}};
  nn::save_checkpoint((dir / "checkpoint.safetensors").string(), state);

  std::map<std::string, std::string> metadata = state.metadata;
  metadata["format"] = "normgrad-checkpoint-v1";
  metadata["config"] = cfg.to_json();
  json expected = describe_train_state(model, opt, steps, data_gen, tok, metadata);
  expected["file"] = "checkpoint.safetensors";
  write_text(dir / "checkpoint.json", expected.dump(1));
  std::printf(
      "safetensors/checkpoint  TinyLM (MiniMind, V %lld, C 32, 2 layers) f32, %lld parameters, after %lld "
      "AdamW steps\n",
      (long long)tok.vocab_size(), (long long)model.num_parameters(), (long long)steps);
}

json run_safetensors(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  write_dtype_file(dir);
  write_checkpoint(dir);
  return json::array({"normgrad", "checkpoint"});
}

// --read: describe what normgrad loaded from a file someone else wrote.
void read_file(const std::string& path, const std::string& dump, bool checkpoint) {
  json out;
  if (!checkpoint) {
    io::SafetensorsData data = io::load_safetensors(path);
    out = {{"metadata", data.metadata}, {"tensors", json::array()}};
    for (auto& [name, t] : data.tensors) out["tensors"].push_back(describe(name, t, true));
  } else {
    const std::string config = nn::read_checkpoint_config(path);
    nn::TinyLM model(nn::TinyLMConfig::from_json(config));
    optim::AdamW opt(model.named_parameters());
    Generator data_gen(0);
    nn::CharTokenizer tok;
    nn::TrainState state;
    state.model = &model;
    state.optimizer = &opt;
    state.generators = {{"data", &data_gen}};
    state.config_json = config;
    state.tokenizer = &tok;
    nn::load_checkpoint(path, state);
    out = describe_train_state(model, opt, state.step, data_gen, tok, state.metadata);
  }
  write_text(dump, out.dump(1));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "modules_vs_pytorch: optimizers, LR schedules, norm modules and safetensors files, written for "
      "bench/modules_vs_pytorch.py"};
  std::string out, only, read, dump;
  bool checkpoint = false;
  app.add_option("--out", out, "output folder (created)");
  app.add_option("--only", only, "run only this section")
      ->check(CLI::IsMember(std::vector<std::string>{"schedules", "optim", "norms", "safetensors"}));
  app.add_option("--read", read, "load this safetensors file and describe it (needs --dump)");
  app.add_option("--dump", dump, "where --read writes its description (JSON)");
  app.add_flag("--checkpoint", checkpoint, "--read: restore the file as a TinyLM + AdamW checkpoint");
  CLI11_PARSE(app, argc, argv);
  if (read.empty() == out.empty() || read.empty() != dump.empty()) {
    std::fprintf(stderr, "modules_vs_pytorch: expected either --out DIR, or --read FILE --dump OUT.json\n");
    return 2;
  }

  try {
    if (!read.empty()) {
      read_file(read, dump, checkpoint);
      return 0;
    }
    const std::filesystem::path root(out);
    json index = json::object();
    if (only.empty() || only == "schedules") index["schedules"] = run_schedules(root / "schedules");
    if (only.empty() || only == "optim") {
      index["optim"] = json::array();
      for (const OptimCase& c : optim_cases()) {
        run_optim_case(c, root / "optim" / c.name);
        index["optim"].push_back(c.name);
      }
    }
    if (only.empty() || only == "norms") {
      index["norms"] = json::array();
      for (const NormCase& c : norm_cases()) {
        run_norm_case(c, root / "norms" / c.name);
        index["norms"].push_back(c.name);
      }
    }
    if (only.empty() || only == "safetensors") index["safetensors"] = run_safetensors(root / "safetensors");
    write_text(root / "index.json", index.dump(2));
  } catch (const std::exception& e) {  // ng::Error, and std::filesystem's (--out names a file)
    std::fprintf(stderr, "modules_vs_pytorch: %s\n", e.what());
    return 1;
  }
  return 0;
}
