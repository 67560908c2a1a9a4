// tinylm_vs_pytorch: the normgrad half of an end-to-end differential check of nn::TinyLM against an
// independent PyTorch model of the same documented architecture (bench/tinylm_vs_pytorch.py, which runs this
// program, rebuilds each model in PyTorch from docs/model.md and docs/attention.md, loads the parameters
// written here and compares every number). Not a benchmark: kept beside special_values.cpp and view_sweep.cpp
// because it needs PyTorch, which the tests do not.
//
//   cmake --build --preset release --target tinylm_vs_pytorch
//   /tmp/torchenv/bin/python bench/tinylm_vs_pytorch.py              # runs
//   build/release/bench/tinylm_vs_pytorch --out DIR [--only NAME]
//
// For each config in configs() below (tiny: C 32-64, 2-3 layers, V 40, B 3, T 16), in f64 so that the two
// implementations can be held to ~1e-9 of each tensor's largest value, it:
//   1. builds the model from the config's seed and converts it to f64 (nn::cast_);
//   2. draws a (B, T + 1) token sequence from Generator(data_seed): tokens = [:, :T], targets = [:, 1:]
//      (a config may set some targets to the ignore index -100, which the loss must skip);
//   3. computes the logits (B, T, V), and runs 3 training steps on that batch:
//          loss = model.loss(tokens, targets);  zero_grad;  loss.backward();
//          clip_grad_norm_(parameters, 1.0);    AdamW(lr 1e-2, betas (0.9, 0.999), eps 1e-8, wd 0.1).step()
//      keeping the first step's loss and gradients (before clipping), and each step's loss and grad norm.
//
// Written to DIR/<name>/ (safetensors: io/safetensors.h; every float tensor f64, tokens i64):
//   config.json           {"name", "model": TinyLMConfig::to_json(), "batch", "seq_len", "data_seed",
//                          "steps", "clip_max_norm", "adamw": {"lr", "beta1", "beta2", "eps",
//                          "weight_decay"}}
//   init.safetensors      the initial state_dict, by parameter name ("blocks.0.attn.q_proj.weight", ...)
//   data.safetensors      "tokens", "targets": (B, T) i64
//   forward.safetensors   "logits": (B, T, V); "loss": 0-d, the first step's loss
//   grads.safetensors     every parameter's .grad after the first loss.backward(), by parameter name
//   steps.safetensors     "loss", "grad_norm": (steps,), each step's loss and its norm before clipping
//   trained.safetensors   the state_dict after the 3 AdamW steps
// and DIR/index.json: {"configs": [names in order]}.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "normgrad.h"

using namespace ng;
using json = nlohmann::ordered_json;

namespace {

// One model to check, and the batch it sees.
struct Case {
  std::string name;
  nn::TinyLMConfig model;
  int64_t batch = 3;       // B
  int64_t seq_len = 16;    // T
  uint64_t data_seed = 0;  // the tokens' generator
  int64_t n_ignored = 0;   // the first n_ignored targets of row 0 are set to -100 (ignore_index)
};

// The norm positions, norms, FFNs, attention options and heads of docs/model.md, each in at least one case.
std::vector<Case> configs() {
  const int64_t V = 40;
  std::vector<Case> cases;

  // MiniMind: Pre-LN + RMSNorm + RoPE (theta 1e6) + GQA (4 query heads, 2 kv heads) + QK-norm + SwiGLU,
  // no biases, final RMSNorm, tied embeddings.
  Case minimind{"minimind", nn::TinyLMConfig::minimind(V, 32, 2, 4, 2)};
  minimind.model.seed = 1;
  minimind.data_seed = 101;
  cases.push_back(minimind);

  // Post-LN with LayerNorm (the 2017 Transformer): MLP (4C, ReLU, biases), RoPE, untied head.
  nn::TinyLMConfig post;
  post.vocab_size = V;
  post.dim = 32;
  post.n_layers = 2;
  post.n_heads = 4;
  post.norm_position = "post";
  post.norm = "layernorm";
  post.seed = 2;
  cases.push_back({"postln_layernorm", post, 3, 16, 102});

  // No normalization anywhere: norm_position = "none", whose default is no final norm either (stated here).
  nn::TinyLMConfig none = post;
  none.norm_position = "none";
  none.final_norm = false;
  none.seed = 3;
  cases.push_back({"nonorm", none, 3, 16, 103});

  // DeepNorm (alpha = (2N)^(1/4) on the residual, beta-scaled init) with LayerNorm, 3 layers so that alpha is
  // not the 2-layer value, GQA.
  nn::TinyLMConfig deep = post;
  deep.dim = 64;
  deep.n_layers = 3;
  deep.n_kv_heads = 2;
  deep.norm_position = "deepnorm";
  deep.seed = 4;
  cases.push_back({"deepnorm_layernorm", deep, 3, 16, 104});

  // Pre-LN + LayerNorm, MLP with GELU (tanh approximation) and biases, attention biases, plain multi-head
  // attention, untied head.
  nn::TinyLMConfig gelu = post;
  gelu.norm_position = "pre";
  gelu.activation = "gelu";
  gelu.attn_bias = true;
  gelu.seed = 5;
  cases.push_back({"preln_mlp_gelu", gelu, 3, 16, 105});

  // The other options: learned absolute positions, unmasked attention (the lesson's), MQA (1 kv head),
  // QK-norm without RoPE, Post-LN with RMSNorm, SwiGLU with a chosen hidden size, tied embeddings, and a
  // few ignored targets.
  nn::TinyLMConfig rest;
  rest.vocab_size = V;
  rest.dim = 32;
  rest.n_layers = 2;
  rest.n_heads = 4;
  rest.n_kv_heads = 1;
  rest.norm_position = "post";
  rest.norm = "rmsnorm";
  rest.ffn = "swiglu";
  rest.ffn_hidden = 48;
  rest.ffn_bias = false;
  rest.attn_bias = true;
  rest.causal = false;
  rest.qk_norm = true;
  rest.position = "learned";
  rest.max_seq_len = 24;
  rest.tie_weights = true;
  rest.seed = 6;
  cases.push_back({"learned_unmasked_mqa", rest, 3, 16, 106, 3});

  return cases;
}

// A .grad or a parameter, detached and copied (the optimizer and the clipping change them in place later).
nn::NamedTensors snapshot(const nn::NamedTensors& named, bool grads) {
  NoGradGuard no_grad;
  nn::NamedTensors out;
  for (const auto& [name, t] : named) {
    Tensor v = grads ? t.grad() : t;
    NG_CHECK(v.defined(), "tinylm_vs_pytorch", "parameter '", name, "' has no gradient");
    out.emplace_back(name, v.detach().clone());
  }
  return out;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  NG_CHECK(bool(f), "tinylm_vs_pytorch", "cannot write ", path.string());
  f << text << "\n";
}

void run_case(const Case& c, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const int64_t B = c.batch, T = c.seq_len, V = c.model.vocab_size, steps = 3;
  optim::AdamWOptions adamw;
  adamw.lr = 1e-2;
  adamw.weight_decay = 0.1;
  const double clip_max_norm = 1.0;

  // 1. The model, from its seed, in f64.
  nn::TinyLM model(c.model);
  nn::cast_(model, DType::f64);
  io::save_safetensors((dir / "init.safetensors").string(), model.state_dict());

  // 2. The batch: a (B, T + 1) sequence, tokens (B, T) and the next tokens as targets (B, T).
  Generator data_gen(c.data_seed);
  Tensor seq = randint(0, V, {B, T + 1}, data_gen);
  Tensor tokens = seq.narrow(1, 0, T).contiguous();
  std::vector<int64_t> target_values = seq.narrow(1, 1, T).contiguous().to_vector<int64_t>();
  for (int64_t i = 0; i < c.n_ignored; ++i) target_values[size_t(i)] = -100;
  Tensor targets = from_vector(target_values, Shape{B, T});
  io::save_safetensors((dir / "data.safetensors").string(), {{"tokens", tokens}, {"targets", targets}});

  // 3. The logits, then the training steps on the same batch.
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = model.forward(tokens);  // (B, T, V)
  }
  optim::AdamW opt(model.named_parameters(), adamw);
  std::vector<double> losses, grad_norms;
  for (int64_t step = 0; step < steps; ++step) {
    Tensor loss = model.loss(tokens, targets);
    opt.zero_grad();
    loss.backward();
    if (step == 0) {
      io::save_safetensors((dir / "forward.safetensors").string(),
                           {{"logits", logits}, {"loss", loss.detach()}});
      io::save_safetensors((dir / "grads.safetensors").string(), snapshot(model.named_parameters(), true));
    }
    losses.push_back(loss.item());
    grad_norms.push_back(optim::clip_grad_norm_(model.parameters(), clip_max_norm));
    opt.step();
  }
  io::save_safetensors((dir / "steps.safetensors").string(),
                       {{"loss", from_vector(losses, Shape{steps}, DType::f64)},
                        {"grad_norm", from_vector(grad_norms, Shape{steps}, DType::f64)}});
  io::save_safetensors((dir / "trained.safetensors").string(), snapshot(model.named_parameters(), false));

  json config;
  config["name"] = c.name;
  config["model"] = json::parse(c.model.to_json());
  config["batch"] = B;
  config["seq_len"] = T;
  config["data_seed"] = c.data_seed;
  config["steps"] = steps;
  config["clip_max_norm"] = clip_max_norm;
  config["adamw"] = {{"lr", adamw.lr},
                     {"beta1", adamw.beta1},
                     {"beta2", adamw.beta2},
                     {"eps", adamw.eps},
                     {"weight_decay", adamw.weight_decay}};
  write_text(dir / "config.json", config.dump(2));

  std::printf("%-22s %7lld parameters  loss %.6f -> %.6f  grad norm %.4f\n", c.name.c_str(),
              (long long)model.num_parameters(), losses.front(), losses.back(), grad_norms.front());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tinylm_vs_pytorch: TinyLM configs, their logits, loss, gradients and 3 AdamW steps, written "
      "for bench/tinylm_vs_pytorch.py"};
  std::string out;
  std::string only;
  app.add_option("--out", out, "output folder (created)")->required();
  app.add_option("--only", only, "run only the config of this name");
  CLI11_PARSE(app, argc, argv);

  try {
    json index;
    index["configs"] = json::array();
    for (const Case& c : configs()) {
      if (!only.empty() && c.name != only) continue;
      run_case(c, std::filesystem::path(out) / c.name);
      index["configs"].push_back(c.name);
    }
    if (index["configs"].empty()) {
      std::fprintf(stderr, "tinylm_vs_pytorch: --only '%s' matched no config\n", only.c_str());
      return 1;
    }
    write_text(std::filesystem::path(out) / "index.json", index.dump(2));
  } catch (const std::exception& e) {  // ng::Error, and std::filesystem's (--out names a file)
    std::fprintf(stderr, "tinylm_vs_pytorch: %s\n", e.what());
    return 1;
  }
  return 0;
}
