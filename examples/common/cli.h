// The flags every experiment shares, parsed with CLI11.
//
//   --out DIR       where the PNG, CSV, Markdown summary and command line go (default results/)
//   --seed N        seed of every random draw (default 42): same seed + same --threads = same numbers
//   --warmup N      (exp2, exp3: add_warmup_flag) linear warmup of every run's learning rate over N steps
//   --clip X        (exp2, exp3, exp4: add_clip_flag) clip_grad_norm's max norm, 0 for none
//   --seeds A,B,..  (exp2, exp3, exp4: add_seeds_flag) train every config once per seed and rank them across
//                   the seeds too (examples/common/seeds.h); instead of --seed, not with --save or --resume
//   --threads N     worker threads (default: all cores)
//   --steps N       training steps (default: the experiment's own; --quick uses a smaller one)
//   --quick         a short run (under 2 minutes on 2 cores)
//   --data PATH     TinyShakespeare (default data/tinyshakespeare.txt); given explicitly, it must be readable
//   --save PATH     write a safetensors checkpoint of the last model trained
//   --resume PATH   start the last model from a checkpoint
//   --quiet         no progress bar (it is off anyway when stderr is not a terminal)
//   --detect-anomaly  anomaly mode for the whole run (autograd/anomaly.h): the first op whose forward or
//                   backward makes a NaN/Inf throws an ng::Error naming it and its inputs' shapes (slow).
//                   The training loop (lm_task.h, train_lm) stops that run there and reports the op.
//
// A bad flag or value prints the error and the usage to stderr and the program exits with status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace ng::examples {

struct CommonOptions {
  std::string out = "results";
  uint64_t seed = 42;
  // The seeds to run: --seeds where the experiment has the flag and it was given, else {seed}. parse_flags
  // fills it (and sets `seed` to its first).
  std::vector<uint64_t> seeds;
  int threads = 0;    // 0: the OpenMP default (all cores)
  int64_t steps = 0;  // 0: the experiment's default
  bool quick = false;
  std::string data = "data/tinyshakespeare.txt";
  bool data_given = false;  // --data was on the command line
  std::string save, resume;
  bool quiet = false;
  bool detect_anomaly = false;  // --detect-anomaly: parse_flags turns anomaly mode on for the whole run

  // --steps if given, else `quick_steps` under --quick, else `full_steps`.
  int64_t steps_or(int64_t full_steps, int64_t quick_steps) const {
    return steps > 0 ? steps : quick ? quick_steps : full_steps;
  }
};

// Register the common flags on `app`.
void add_common_flags(CLI::App& app, CommonOptions& options);
// Register --seeds (after add_common_flags): a comma-separated list of 1 to kMaxSeeds distinct seeds.
// A repeated seed is a usage error: it would count one run twice.
inline constexpr size_t kMaxSeeds = 100;
void add_seeds_flag(CLI::App& app, CommonOptions& options);

// --warmup N (exp2, exp3): every run ramps its learning rate linearly over its first N steps, step s at
// lr * s / N (TrainSpec::warmup, optim::linear_warmup); 0, the default, is none. `help` is the flag's text.
// (exp4 registers its own: there a warmup is given to two extra runs, not to all of them.)
void add_warmup_flag(CLI::App& app, int64_t& warmup, const std::string& help);
// Once --steps is known: a warmup of `steps` or more never reaches the full rate inside the run, so it is a
// usage error. Prints why on stderr and returns false then (the caller exits with status 2).
bool warmup_fits(int64_t warmup, int64_t steps);
// How a summary says it: "a linear warmup over the first 100 steps (step s at lr * s / 100)".
std::string warmup_description(int64_t warmup);

// --clip X (exp2, exp3, exp4): clip_grad_norm's max norm for every run, 0 for none (exp2's default; exp3's
// and exp4's is 1.0). `help` is the flag's text.
void add_clip_flag(CLI::App& app, double& clip, const std::string& help);
// How exp2 and exp3 say it: "clip_grad_norm 1.0" (a whole number keeps its ".0"), or "no clipping".
std::string clip_description(double clip);

// Parse argv. On success: applies --threads, creates --out, and returns nullopt (carry on). On --help:
// prints usage, returns 0. On a bad flag, a bad value, an unreadable --data or --resume (unless the
// experiment marked the flag unused), or an --out that cannot be created or written in: prints the reason
// and the usage to stderr and returns 2. main() does `if (auto rc = ...) return *rc;`
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv, CommonOptions& options);

// Run a trainer's body and turn an escaping ng::Error (a bad file; under --detect-anomaly, an anomaly outside
// train_lm's loop, which stops only its own run) into a clear message on stderr and exit status 1, instead
// of std::terminate.
int guarded_main(int argc, char** argv, int (*body)(int, char**));

// --device cpu|cuda|cuda:N, for the trainers that can run on a GPU (exp2). A value that is none of these is
// a usage error (status 2).
void add_device_flag(CLI::App& app, std::string& device);
// The device --device names, once a probe tensor has been moved there: an ng::Error saying why not
// otherwise ("--device cuda: ... built without the CUDA backend", or CUDA's own "no device" message), which
// guarded_main turns into status 1 before any training starts.
Device require_device(const std::string& name);

// Flags that mean nothing to one experiment (exp1 trains no model, so --steps does nothing there). Call
// after parse_flags: each of `flags` that was on the command line gets one line on stderr,
//   note: --steps does not apply to this experiment (experiment 1 trains no model); ignored
// so that nothing is ignored silently. Their --help text says the same (mark_flags_unused, before parsing).
void mark_flags_unused(CLI::App& app, const std::vector<std::string>& flags, const std::string& why);
void note_unused_flags(const CLI::App& app, const std::vector<std::string>& flags, const std::string& why);

// True when `path` names a regular file we can open for reading.
bool readable_file(const std::string& path);

}  // namespace ng::examples
