// The two training tasks of experiments 2 and 3, and the loop that trains one TinyLM on them.
//
//   shakespeare  causal char-level LM on TinyShakespeare. Vocab = the corpus's distinct bytes (65), first
//                90% of the text for training, last 10% for validation. A batch is B random windows of
//                T + 1 characters: tokens = window[0..T), targets = window[1..T+1).
//   copy         the lesson's synthetic task: tokens ~ U{0..999} of shape (B, T), target = the next token,
//                rolled (target[t] = tokens[(t + 1) mod T]). The lesson trains it with UNMASKED attention
//                and NO position encoding. Unmasked, token t + 1 (the target) is in plain view of position
//                t, but without positions self-attention is permutation-equivariant: position t sees the
//                multiset of the window's tokens and cannot tell which of them sits at t + 1, so no such
//                model gets below about 4.10 = E[-ln((1 + K) / (T - 1))], K the target's other copies in
//                the window (exp2's summary computes this floor, copy_task_floor). With positions,
//                the same unmasked attention could simply look at token t + 1 and copy it. Either way the
//                task is not language modelling (docs/attention.md).
//
// Both draw their batches from their own Generator(seed), so every config sees the same batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/cli.h"
#include "examples/common/paired.h"
#include "normgrad.h"

namespace ng::examples {

struct LMTask {
  std::string name;  // "shakespeare" or "copy"
  int64_t vocab = 0;
  nn::CharTokenizer tokenizer;              // shakespeare only
  std::vector<int64_t> train_ids, val_ids;  // shakespeare only

  // Reads the corpus (shakespeare) or sets up the copy task. Throws ng::Error for an unreadable file.
  static LMTask shakespeare(const std::string& path);
  static LMTask copy(int64_t vocab = 1000);
  // What shakespeare() does with its file's text, for any text (exp5's synthetic fallback): its distinct
  // bytes are the vocabulary, the first 90% trains and the last 10% validates. `name` becomes the task's
  // name; `source` names the text in the errors (too short, a single distinct byte).
  static LMTask from_text(const std::string& name, const std::string& text, const std::string& source);

  // tokens, targets: (B, T) i64
  void batch(int64_t B, int64_t T, Generator& gen, Tensor& tokens, Tensor& targets, bool val = false) const;
  // The loss of the best model that ignores context: the entropy of the targets' distribution, in nats.
  //   shakespeare  -sum_c p_c ln p_c, p_c the share of byte c in the training split (about 3.31 for
  //                TinyShakespeare): predicting letter frequencies alone, the same guess at every position.
  //   copy         ln(vocab): the targets are uniform.
  // A final loss below it means the model learned to use its context; at or above it, at best the
  // frequencies.
  double context_free_loss() const;
  // The model config the task needs on top of `base`: shakespeare = causal + RoPE; copy = the lesson's
  // original attention (unmasked, biases, no positions).
  nn::TinyLMConfig configure(nn::TinyLMConfig base) const;
};

// The task a trainer takes without TinyShakespeare, and by its --task name: the copy task for exp2-4,
// a Markov text for exp5 (its MLP has no use for the copy task).
struct SyntheticTask {
  std::string name = "copy";                       // its --task value
  std::string words = "the synthetic copy task";   // how the fallback line names it
  LMTask (*make)(const CommonOptions&) = nullptr;  // nullptr: LMTask::copy()
};

// Registers --task: shakespeare or the synthetic task's name, anything else a usage error. Absent, the
// task is chosen by choose_task; `--task ''` is refused rather than taken as absent (it ran the default
// task).
void add_task_flag(CLI::App& app, std::string& task, const SyntheticTask& synthetic = {});

// Picks the task from --task ("" = shakespeare when the data file is readable, else the synthetic task,
// saying how to get the data). Returns false (after printing why) for a bad --task value, and for --task
// shakespeare without a readable data file.
bool choose_task(const std::string& flag, const CommonOptions& opt, LMTask& task,
                 const SyntheticTask& synthetic = {});

// Under --detect-anomaly the first op whose forward or backward makes a NaN/Inf throws an ng::Error whose
// message starts "anomaly:" (autograd/anomaly.h). True for that error: a training loop takes it as its run's
// divergence; any other error is a real one.
bool is_anomaly_error(const std::string& message);

struct TrainResult {
  std::vector<double> losses;  // one per step done (the step that diverged is the last, non-finite)
  // The global gradient norm of each step this process trained, before clipping (NaN where the loss was not
  // finite, so no backward ran). After --resume it starts at the step after the checkpoint's.
  std::vector<double> grad_norms;
  int64_t first_step = 1;          // step of losses[0]: 1, also after --resume (see train_lm)
  int64_t nan_step = -1;           // 1-based step whose loss or gradient norm was NaN/Inf, -1 if none
  std::string nan_what;            // "loss is NaN", "gradient norm is Inf", or the anomaly report
  int64_t resumed_at = -1;         // --resume: the checkpoint's step; -1 when the run started at step 1
  double val_loss = std::nan("");  // shakespeare only
  double seconds = 0;
};

struct TrainSpec {
  std::string label;
  double lr = 1e-3;
  int64_t steps = 100, batch = 16, seq = 64;
  double clip = 0;  // 0: no gradient clipping
  // Linear warmup (optim::linear_warmup): step s (1-based) trains at lr * s / warmup while s <= warmup, then
  // at lr. 0: lr from the first step. A checkpoint records it, and --resume must give the same.
  int64_t warmup = 0;
  uint64_t data_seed = 0;
  int64_t val_batches = 8;  // after training (shakespeare only); 0: no validation pass, val_loss stays NaN
  // Where the model trains: it must already be there (Module::to); each batch is copied to it and each loss
  // copied back to the host for logging.
  Device device = Device::cpu();
};

// Adam (at spec.lr, or its warmup's rate), one fresh batch per step, stops at the first non-finite loss or
// gradient norm. Under
// --detect-anomaly (anomaly mode on) it also stops at the first op that makes a NaN/Inf, and nan_what is
// the anomaly report naming that op.
// `resume` (a checkpoint path, may be empty) is loaded into model + optimizer before training. `save` (may
// be empty) is written at the end, with the losses so far, unless the run diverged (then it says so on
// stderr and writes nothing).
TrainResult train_lm(nn::TinyLM& model, const LMTask& task, const TrainSpec& spec, bool quiet,
                     const std::string& resume = "", const std::string& save = "");

// The checks train_lm makes of its `resume` and `save` arguments, made before any training: a trainer
// calls it for its last config (the one --resume and --save apply to) before it trains the first, so that a
// corrupt checkpoint, one of another model, one already at --steps, or --save/--resume on a GPU is an
// ng::Error at once rather than after the other configs have trained for minutes. It loads `resume` into a
// scratch model of `config`, exactly as train_lm will.
// It also refuses a --resume whose run is not this one (another learning rate, warmup, data seed or
// vocabulary: each was silently replaced by the file's), a --save that names a file the run reads or writes
// (`not_save_paths`: the corpus, the report's files), and a --save onto a file already there that is not
// a normgrad checkpoint (nn::is_checkpoint_file): an earlier checkpoint is replaced, nothing else.
void check_checkpoint_flags(const nn::TinyLMConfig& config, const LMTask& task, const TrainSpec& spec,
                            const std::string& resume, const std::string& save,
                            const std::vector<std::string>& not_save_paths = {});

// The paired difference (paired.h) of two runs that trained to the same last step, step k of one beside
// step k of the other. A run resumed from a checkpoint that kept no losses holds only the steps after it
// (first_step > 1): both curves are cut to the steps both hold, so the comparison is made over those (the
// curves were compared as they were, and paired_diff's length check stopped the trainer after all its
// training, with no files written). Runs that end at different steps (one diverged) are an ng::Error.
PairedDiff paired_diff(const TrainResult& a, const TrainResult& b, size_t window);

// The summary's line on a resumed run: "was resumed from `PATH` at step k; ..." (what its curve covers).
std::string resumed_note(const TrainResult& r, const std::string& path, int64_t steps);

class Report;
// What a --save path must not be: the corpus (--data) and the report's files.
std::vector<std::string> not_save_paths(const CommonOptions& opt, const Report& report);

}  // namespace ng::examples
