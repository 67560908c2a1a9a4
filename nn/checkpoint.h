// Checkpoints: a whole training state in one safetensors file (io/safetensors.h), so that Python can read
// it and so that resuming is EXACT: train 10 steps, save, load into fresh objects, train 10 more, and the
// losses are bitwise those of 20 straight steps (tests/test_checkpoint.cpp checks it).
//
// What the file holds:
//   model.<name>                 every parameter and buffer (Module::state_dict), in its own dtype
//   optim.lr, optim.<param>.step, optim.<param>.<buffer>     the optimizer (Optimizer::state_dict)
//   rng.<name>                   I64 [seed, offset] of each named Generator (model dropout, data sampler...)
//   train.step                   I64, the number of optimizer steps done
//   tokenizer.vocab              I64, the tokenizer's byte values in token order (when there is one)
//   __metadata__: format = "normgrad-checkpoint-v1", config = the model config JSON,
//                 optimizer = "AdamW" etc., optimizer_hyperparameters = JSON, plus any extra strings.
//
// Saving is atomic (temp file, fsync, rename): a failed save leaves the previous checkpoint intact.
// Loading checks everything before changing anything: the format, the config (when the state has one, it
// must equal the file's, except for "seed", which only picks initial values), every name, shape and dtype;
// errors name the file and list each problem. It also refuses a state the run could not go on from as it
// would have: an optimizer of another kind or with other settings than the file's (all but lr, which the
// file restores; Adam and AdamW keep the same buffers), a negative step, a tokenizer vocabulary that
// CharTokenizer refuses or whose size is not the config's vocab_size. A failed load leaves the model,
// optimizer, generators, step and tokenizer as they were. A save with an empty tokenizer is refused.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/tokenizer.h"
#include "optim/optimizer.h"
#include "tensor/random.h"

namespace ng::nn {

// The pieces of a training run, by pointer (null = not part of this checkpoint).
struct TrainState {
  Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  int64_t step = 0;
  std::vector<std::pair<std::string, Generator*>> generators;  // e.g. {"dropout", &model.dropout_generator()}
  std::string config_json;                      // the model config (TinyLMConfig::to_json()); checked on load
  CharTokenizer* tokenizer = nullptr;           // saved; on load, replaced by the file's
  std::map<std::string, std::string> metadata;  // extra strings to save; on load, filled from the file
  // On load: false (a resume) asks every tensor in the file to be claimed by a piece of this state, so a
  // checkpoint of more than the state holds is an error. true reads past the pieces this state leaves out
  // (a null model, optimizer or tokenizer, generators it does not list; a name of none of these is still an
  // error): how a program that samples from or
  // evaluates a trained model loads only the model (and the tokenizer, if it points to one). What it does
  // load is checked as strictly (every model name, shape and dtype).
  bool partial = false;
};

void save_checkpoint(const std::string& path, const TrainState& state);

// Restores into the objects `state` points to (they must have the checkpoint's structure: build the model
// from read_checkpoint_config(path) first), and sets state.step, state.metadata, *state.tokenizer.
void load_checkpoint(const std::string& path, TrainState& state);

// The model config JSON a checkpoint was saved with (to build the model before load_checkpoint). It reads
// the file's header only (io::read_safetensors_header).
std::string read_checkpoint_config(const std::string& path);

// Whether `path` is a normgrad checkpoint: a regular file whose safetensors header has the metadata
// format "normgrad-checkpoint-v1" and passes load_safetensors' checks (io::read_safetensors_header: the
// 8-byte length and the header only, never the tensors; of a file that is not safetensors, 9 bytes). False,
// never an error, for a missing file, a folder, another kind of file, or a corrupt or truncated one. The
// trainers ask it before a --save may replace a file that is already there.
bool is_checkpoint_file(const std::string& path);

}  // namespace ng::nn
