#include "examples/common/lm_task.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "examples/common/progress.h"
#include "examples/common/report.h"
#include "io/whole_file.h"

namespace ng::examples {

LMTask LMTask::shakespeare(const std::string& path) {
  return from_text("shakespeare", io::read_whole_file(path, "LMTask::shakespeare"), path);
}

LMTask LMTask::from_text(const std::string& name, const std::string& text, const std::string& source) {
  const std::string op = "LMTask::" + name;
  NG_CHECK(text.size() > 1000, op.c_str(), source, " is too short (", text.size(),
           " bytes), expected more than 1000");
  LMTask t;
  t.name = name;
  t.tokenizer = nn::CharTokenizer::from_corpus(text);
  t.vocab = t.tokenizer.vocab_size();
  // One distinct byte makes every loss 0 from the start (nothing to predict), and the plots' uniform-guess
  // line ln V = 0 has no place on their log axis: refused before any training.
  NG_CHECK(t.vocab >= 2, op.c_str(), source, " has ", t.vocab,
           " distinct byte, expected at least 2 for a language model to predict");
  std::vector<int64_t> ids = t.tokenizer.encode(text);
  size_t split = ids.size() * 9 / 10;
  t.train_ids.assign(ids.begin(), ids.begin() + long(split));
  t.val_ids.assign(ids.begin() + long(split), ids.end());
  return t;
}

LMTask LMTask::copy(int64_t vocab) {
  LMTask t;
  t.name = "copy";
  t.vocab = vocab;
  return t;
}

void LMTask::batch(int64_t B, int64_t T, Generator& gen, Tensor& tokens, Tensor& targets, bool val) const {
  std::vector<int64_t> x(size_t(B * T)), y(size_t(B * T));
  if (name == "copy") {
    std::vector<int64_t> r = randint(0, vocab, {B, T}, gen).to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        x[size_t(b * T + t)] = r[size_t(b * T + t)];
        y[size_t(b * T + t)] = r[size_t(b * T + (t + 1) % T)];
      }
  } else {
    const std::vector<int64_t>& ids = val ? val_ids : train_ids;
    // A window is T + 1 ids, so its start runs over [0, N - T - 1], every one of them: randint's bound is
    // exclusive. (Until stop 44 it was N - T - 1, so the last window was never drawn and the split's last
    // id never a target; and a split of exactly T + 1 ids, one window, was refused.)
    const int64_t N = int64_t(ids.size());
    NG_CHECK(N >= T + 1, "LMTask::batch", "the ", val ? "validation" : "training", " split has ", N,
             " tokens, fewer than seq + 1 = ", T + 1);
    std::vector<int64_t> starts = randint(0, N - T, {B}, gen).to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        x[size_t(b * T + t)] = ids[size_t(starts[size_t(b)] + t)];
        y[size_t(b * T + t)] = ids[size_t(starts[size_t(b)] + t + 1)];
      }
  }
  tokens = from_vector(x, {B, T});
  targets = from_vector(y, {B, T});
}

double LMTask::context_free_loss() const {
  if (name == "copy") return std::log(double(vocab));
  std::vector<double> count(size_t(vocab), 0.0);
  for (int64_t id : train_ids) count[size_t(id)] += 1;
  const double n = double(train_ids.size());
  double h = 0;
  for (double c : count)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

nn::TinyLMConfig LMTask::configure(nn::TinyLMConfig c) const {
  c.vocab_size = vocab;
  if (name == "copy") {
    c.causal = false;
    c.attn_bias = true;
    c.position = "none";
  } else {
    c.causal = true;
    c.position = "rope";
  }
  return c;
}

void add_task_flag(CLI::App& app, std::string& task, const SyntheticTask& synthetic) {
  const std::string name = synthetic.name;
  app.add_option("--task", task, "shakespeare (default when --data is readable) or " + name)
      ->check([name](const std::string& v) -> std::string {
        if (v == "shakespeare" || v == name) return "";
        return "expected shakespeare or " + name + ", got '" + v + "'";
      });
}

bool is_anomaly_error(const std::string& message) {
  return anomaly_enabled() && message.rfind("anomaly:", 0) == 0;
}

bool choose_task(const std::string& flag, const CommonOptions& opt, LMTask& task,
                 const SyntheticTask& synthetic) {
  auto make_synthetic = [&] { return synthetic.make ? synthetic.make(opt) : LMTask::copy(); };
  if (flag == synthetic.name) {
    task = make_synthetic();
    return true;
  }
  if (flag != "" && flag != "shakespeare") {
    std::cerr << "--task: expected shakespeare or " << synthetic.name << ", got '" << flag << "'\n";
    return false;
  }
  if (readable_file(opt.data)) {
    task = LMTask::shakespeare(opt.data);
    return true;
  }
  if (flag == "shakespeare") {  // asked for by name: no quiet fallback to another task
    std::cerr << "--task shakespeare: cannot read " << opt.data
              << ": get it with `bash scripts/get_data.sh` (writes data/tinyshakespeare.txt) or pass --data "
                 "PATH.\n";
    return false;
  }
  std::cerr
      << "No TinyShakespeare at " << opt.data
      << ": get it with `bash scripts/get_data.sh` (writes data/tinyshakespeare.txt) or pass --data PATH.\n"
      << "Falling back to " << synthetic.words << " (--task " << synthetic.name << ").\n";
  task = make_synthetic();
  return true;
}

namespace {

// What a checkpoint saves and restores (nn/checkpoint.h): the model, its Adam state, the data and dropout
// generators, the model's config, and the text task's tokenizer (`tokenizer`: a copy of the task's, which a
// load replaces with the file's; load_resume compares the two). opt, data_gen and tokenizer must outlive the
// state.
nn::TrainState checkpoint_state(nn::TinyLM& model, optim::Adam& opt, Generator& data_gen, const LMTask& task,
                                nn::CharTokenizer& tokenizer) {
  nn::TrainState state;
  state.model = &model;
  state.optimizer = &opt;
  state.generators = {{"data", &data_gen}, {"dropout", &model.dropout_generator()}};
  state.config_json = model.config.to_json();
  if (task.name == "shakespeare") {
    tokenizer = task.tokenizer;
    state.tokenizer = &tokenizer;
  }
  return state;
}

// --save and --resume are CPU only; a resumed checkpoint must leave steps to run.
void check_checkpoint_device(const TrainSpec& spec, const std::string& resume, const std::string& save) {
  NG_CHECK(spec.device.is_cpu() || (resume.empty() && save.empty()), "train_lm",
           "--save and --resume work on the CPU only; drop them or use --device cpu (got --device ",
           spec.device.str(), ")");
}

// The metadata key of the losses of steps 1..step, so that a resumed run's curve and statistics are those of
// the straight run (a JSON array; every value is finite: a run that diverged is not saved).
constexpr const char* kLossesKey = "train.losses";
// The metadata key of the run's warmup steps (a JSON integer >= 0). A checkpoint without it is of a run
// with none: train_lm wrote no such key before it had warmup.
constexpr const char* kWarmupKey = "train.warmup";
// The metadata key of the run's clip_grad_norm max norm (a JSON number >= 0; 0: no clipping). A checkpoint
// without it is from before train_lm wrote it, when exp2 never clipped and exp3 always clipped at 1.0: its
// clipping is not checked.
constexpr const char* kClipKey = "train.clip";

// The run's learning rate at each step: spec.lr, ramped up over the first spec.warmup steps.
// schedule(s) is the rate of step s + 1 (the schedule counts from 0, a step count from 1).
optim::LRSchedule lr_schedule(const TrainSpec& spec) {
  return spec.warmup > 0 ? optim::linear_warmup(spec.lr, spec.warmup) : optim::constant_lr(spec.lr);
}

// The warmup a checkpoint's run had: its kWarmupKey, 0 when absent.
int64_t saved_warmup(const nn::TrainState& state, const std::string& resume) {
  auto it = state.metadata.find(kWarmupKey);
  if (it == state.metadata.end()) return 0;
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(it->second);
  } catch (const std::exception& e) {
    fail("--resume", "the checkpoint ", resume, ": ", kWarmupKey, " is not JSON (", e.what(), ")");
  }
  NG_CHECK(
      saved.is_number_unsigned() && saved.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
      "--resume", "the checkpoint ", resume, ": ", kWarmupKey,
      " is not a whole number of steps from 0 to 2^63 - 1 (got ", it->second, ")");
  return saved.get<int64_t>();
}

// The max norm a checkpoint's run clipped its gradients at (its kClipKey), or nullopt when the key is absent.
std::optional<double> saved_clip(const nn::TrainState& state, const std::string& resume) {
  auto it = state.metadata.find(kClipKey);
  if (it == state.metadata.end()) return std::nullopt;
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(it->second);
  } catch (const std::exception& e) {
    fail("--resume", "the checkpoint ", resume, ": ", kClipKey, " is not JSON (", e.what(), ")");
  }
  NG_CHECK(saved.is_number() && std::isfinite(saved.get<double>()) && saved.get<double>() >= 0, "--resume",
           "the checkpoint ", resume, ": ", kClipKey, " is not a finite max norm >= 0 (got ", it->second,
           ")");
  return saved.get<double>();
}

std::string clip_words(double clip) {
  return clip > 0 ? "gradients clipped at " + num(clip) : "no gradient clipping";
}

// Loads `resume` into `state` and checks that the run it holds is this one: steps left to run, the same
// warmup, clipping, learning rate, data seed and vocabulary (each silently replaced by the file's before: a
// resumed run labelled "lr 1e-3" went on at the checkpoint's 1e-4). The optimizer's saved rate is that of the
// last step it took, so during a warmup it is below spec.lr. Returns the saved losses (empty when the file
// has none: a checkpoint not written by train_lm).
std::vector<double> load_resume(const std::string& resume, nn::TrainState& state, const TrainSpec& spec,
                                const LMTask& task, const Generator& data_gen) {
  nn::load_checkpoint(resume, state);
  NG_CHECK(state.step < spec.steps, "--resume", "the checkpoint ", resume, " is at step ", state.step,
           ", expected fewer than the ", spec.steps, " steps of this run (raise --steps)");
  const int64_t warmup = saved_warmup(state, resume);
  NG_CHECK(warmup == spec.warmup, "--resume", "the checkpoint ", resume, " trained ", spec.label,
           " with a warmup of ", warmup, " steps, this run asks for ", spec.warmup,
           ": give the warmup of the run that saved it");
  const std::optional<double> clip = saved_clip(state, resume);
  NG_CHECK(!clip || *clip == spec.clip, "--resume", "the checkpoint ", resume, " trained ", spec.label,
           " with ", clip_words(clip.value_or(0)), ", this run asks for ", clip_words(spec.clip),
           ": give the --clip of the run that saved it");
  const double last_lr = state.step > 0 ? lr_schedule(spec)(state.step - 1) : spec.lr;
  NG_CHECK(state.optimizer->lr == last_lr, "--resume", "the checkpoint ", resume, " trained ", spec.label,
           " at lr ", state.optimizer->lr, ", this run asks for lr ", last_lr,
           state.step > 0 && state.step <= spec.warmup
               ? " at step " + std::to_string(state.step) + " (lr " + num(spec.lr) + " after its warmup)"
               : std::string(),
           ": give the learning-rate flags of the run that saved it");
  NG_CHECK(data_gen.seed() == spec.data_seed, "--resume", "the checkpoint ", resume,
           " drew its batches with data seed ", data_gen.seed(), ", this run's is ", spec.data_seed,
           ": give the --seed of the run that saved it");
  NG_CHECK(!state.tokenizer || *state.tokenizer == task.tokenizer, "--resume", "the checkpoint ", resume,
           " was trained on a text of ", state.tokenizer ? state.tokenizer->vocab_size() : 0,
           " distinct bytes, and --data has another vocabulary (", task.tokenizer.vocab_size(),
           "): its token ids would mean other characters");
  std::vector<double> losses;
  auto it = state.metadata.find(kLossesKey);
  if (it == state.metadata.end()) return losses;
  try {
    const nlohmann::json saved = nlohmann::json::parse(it->second);
    if (!saved.is_array()) throw std::runtime_error("a JSON " + std::string(saved.type_name()));
    for (const auto& v : saved) losses.push_back(v.get<double>());
  } catch (const std::exception& e) {
    fail("--resume", "the checkpoint ", resume, ": ", kLossesKey, " is not a JSON array of numbers (",
         e.what(), ")");
  }
  NG_CHECK(int64_t(losses.size()) == state.step, "--resume", "the checkpoint ", resume, ": ", kLossesKey,
           " holds ", losses.size(), " losses, expected one per step done (", state.step, ")");
  return losses;
}

// Two paths name the same file (through links, "..", or a relative and an absolute spelling).
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace

void check_checkpoint_flags(const nn::TinyLMConfig& config, const LMTask& task, const TrainSpec& spec,
                            const std::string& resume, const std::string& save,
                            const std::vector<std::string>& not_save_paths) {
  check_checkpoint_device(spec, resume, save);
  if (!save.empty()) {
    // The checkpoint is written when the config has trained: look at its folder now.
    namespace fs = std::filesystem;
    const fs::path path(save), dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    std::error_code ec;
    NG_CHECK(!fs::is_directory(path, ec), "--save", "expected a file path, got the folder ", save);
    io::check_write_target(save, "--save");  // a FIFO or device node: found now, not after the training
    NG_CHECK(fs::is_directory(dir, ec), "--save", "expected an existing folder for ", save, ", but ",
             dir.string(), " is not one");
    NG_CHECK(::access(dir.c_str(), W_OK) == 0, "--save", "cannot write in the folder ", dir.string(), " (",
             std::strerror(errno), ")");
    // The corpus and the run's own files are not a checkpoint's to replace (--resume is: that is how a run
    // goes on in place).
    for (const std::string& other : not_save_paths)
      NG_CHECK(other.empty() || !same_file(save, other), "--save", save, " is ", other,
               ", which this run reads or writes: give the checkpoint a path of its own");
    // A file already there is replaced only when it is a checkpoint: an earlier --save, or the --resume
    // file (that is how a run goes on in place). Anything else (a CSV, someone's notes, a model from
    // elsewhere) is not the trainer's to overwrite.
    NG_CHECK(!fs::exists(path, ec) || nn::is_checkpoint_file(save), "--save", save,
             " exists and is not a normgrad checkpoint: expected a new path or an earlier checkpoint to "
             "replace (remove the file first to reuse its name)");
  }
  if (resume.empty()) return;
  nn::TinyLM model(config);  // a scratch model of the config the checkpoint must match
  optim::AdamOptions ao;
  ao.lr = spec.lr;
  optim::Adam opt(model.named_parameters(), ao);
  Generator data_gen(spec.data_seed);
  nn::CharTokenizer tokenizer;
  nn::TrainState state = checkpoint_state(model, opt, data_gen, task, tokenizer);
  load_resume(resume, state, spec, task, data_gen);
}

PairedDiff paired_diff(const TrainResult& a, const TrainResult& b, size_t window) {
  // Step first_step + k is losses[k]; both runs end at the same step.
  const int64_t a_end = a.first_step + int64_t(a.losses.size()) - 1;
  const int64_t b_end = b.first_step + int64_t(b.losses.size()) - 1;
  NG_CHECK(a_end == b_end, "paired_diff", "the two runs must end at the same step; one ends at step ", a_end,
           ", the other at step ", b_end);
  // The steps both hold: from the later of the two first steps to the end.
  const int64_t first = std::max(a.first_step, b.first_step);
  const std::vector<double> a_common(a.losses.begin() + (first - a.first_step), a.losses.end());
  const std::vector<double> b_common(b.losses.begin() + (first - b.first_step), b.losses.end());
  return paired_diff(a_common, b_common, window);
}

std::string resumed_note(const TrainResult& r, const std::string& path, int64_t steps) {
  const std::string at = "was resumed from `" + path + "` at step " + std::to_string(r.resumed_at);
  if (r.first_step == 1)
    return at + "; the checkpoint kept its losses of steps 1 to " + std::to_string(r.resumed_at) +
           ", so its curve and statistics are those of the whole run, as if it had never stopped.";
  return at + ": the checkpoint has no losses, so its curve and statistics cover steps " +
         std::to_string(r.first_step) + " to " + std::to_string(steps) + " only.";
}

std::vector<std::string> not_save_paths(const CommonOptions& opt, const Report& report) {
  std::vector<std::string> paths = report.files();
  paths.push_back(opt.data);
  return paths;
}

TrainResult train_lm(nn::TinyLM& model, const LMTask& task, const TrainSpec& spec, bool quiet,
                     const std::string& resume, const std::string& save) {
  TrainResult r;
  check_checkpoint_device(spec, resume, save);
  for (const Tensor& p : model.parameters())
    NG_CHECK(p.device() == spec.device, "train_lm", "the model's parameters are on ", p.device().str(),
             " but training runs on ", spec.device.str(), " (move the model with model.to(device) first)");
  model.train();
  optim::AdamOptions ao;
  ao.lr = spec.lr;
  optim::Adam opt(model.named_parameters(), ao);
  const optim::LRSchedule schedule = lr_schedule(spec);
  std::vector<Tensor> params = model.parameters();
  Generator data_gen(spec.data_seed);
  nn::CharTokenizer tokenizer;
  nn::TrainState state = checkpoint_state(model, opt, data_gen, task, tokenizer);
  // --resume continues the run the checkpoint came from: its weights, Adam moments, data and dropout
  // generators, step count and losses so far are restored, and training goes on to the same total of
  // spec.steps. So "train 100 steps" and "train 50, --save, then --resume to 100" give the same bits, and
  // the same result: the same curve, statistics and summary (Examples.ResumeContinuesTheRunBitwise).
  if (!resume.empty()) {
    r.losses = load_resume(resume, state, spec, task, data_gen);
    r.resumed_at = state.step;
    std::cerr << spec.label << ": resumed from " << resume << " at step " << state.step << "\n";
  }
  // Steps 1..state.step are in r.losses when the checkpoint kept them; otherwise the result starts after it.
  r.first_step = r.losses.empty() ? state.step + 1 : 1;
  const int64_t start = state.step + 1;
  DivergenceWatch watch;
  Progress bar(spec.label, spec.steps, quiet, start);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = start; step <= spec.steps; ++step) {
    Tensor tokens, targets;
    task.batch(spec.batch, spec.seq, data_gen, tokens, targets);
    tokens = tokens.to(spec.device);  // no-ops on the CPU
    targets = targets.to(spec.device);
    opt.zero_grad();
    double l = NAN, gn = 0;
    try {
      Tensor loss = model.loss(tokens, targets);
      l = loss.item();  // on a device: the one value copied to the host
      if (std::isfinite(l)) {
        loss.backward();
        gn = spec.clip > 0 ? optim::clip_grad_norm_(params, spec.clip) : optim::grad_norm(params);
      }
    } catch (const Error& e) {
      // Under --detect-anomaly the first op whose forward or backward makes a NaN/Inf throws, naming itself
      // (autograd/anomaly.h). That is this run's divergence: stop it here like any other, with the op's
      // name as the reason, so the experiment still finishes and writes its files. Any other error is a
      // real one and goes on up.
      const std::string message = e.what();
      if (!is_anomaly_error(message)) throw;
      std::cerr << spec.label << ": step " << step << ": " << message << "\n";
      r.losses.push_back(l);  // NaN if the forward was the culprit, the finite loss if the backward was
      r.grad_norms.push_back(NAN);
      r.nan_step = step;
      r.nan_what = message;
      break;
    }
    r.losses.push_back(l);
    r.grad_norms.push_back(std::isfinite(l) ? gn : NAN);
    if (!watch.ok(step, l, gn)) {
      r.nan_step = step;
      r.nan_what = watch.what();
      break;
    }
    opt.lr = schedule(state.step);  // state.step: the steps done before this one
    opt.step();
    state.step += 1;
    bar.update(step, l);
  }
  bar.finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (task.name == "shakespeare" && r.nan_step < 0 && spec.val_batches > 0) {
    NoGradGuard no_grad;
    model.eval();
    Generator val_gen(spec.data_seed + 7777);
    double sum = 0;
    for (int64_t i = 0; i < spec.val_batches; ++i) {
      Tensor tokens, targets;
      task.batch(spec.batch, spec.seq, val_gen, tokens, targets, true);
      sum += model.loss(tokens.to(spec.device), targets.to(spec.device)).item();
    }
    r.val_loss = sum / double(spec.val_batches);
    model.train();
  }
  if (!save.empty() && r.nan_step >= 0) {
    // Its generators have drawn the failed step's batch while its step count has not moved: a checkpoint of
    // it would not resume the run. The reason goes with the trainer's summary (nan_what).
    std::cerr << spec.label << ": not saved to " << save << ": the run diverged at step " << r.nan_step
              << "\n";
  } else if (!save.empty()) {
    if (r.first_step == 1) {  // the whole history (not after resuming a checkpoint that had none)
      nlohmann::json losses = nlohmann::json::array();
      for (double l : r.losses) losses.push_back(l);
      state.metadata[kLossesKey] = losses.dump();
    }
    state.metadata[kWarmupKey] = std::to_string(spec.warmup);
    state.metadata[kClipKey] = nlohmann::json(spec.clip).dump();
    nn::save_checkpoint(save, state);
    std::cerr << spec.label << ": saved checkpoint to " << save << "\n";
  }
  return r;
}

}  // namespace ng::examples
