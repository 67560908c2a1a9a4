// Experiment 2: four ways to normalize (or not) a 2-layer Transformer, trained with the lesson's settings.
//
//   config                 norm position  norm       learning rate
//   NoNorm                 none           -          1e-4
//   Post-LN + LayerNorm    post           LayerNorm  1e-4
//   Pre-LN + LayerNorm     pre            LayerNorm  5e-4
//   Pre-LN + RMSNorm       pre            RMSNorm    5e-4
//
// Model: TinyLM with 2 layers, hidden 256, 4 heads, 4x ReLU FFN with biases (nn/tinylm.h); a final norm only
// for Pre-LN (a Post-LN block already ends in a norm; NoNorm has none). Adam, batch 16, seq 64, 1000 steps
// (--quick: 100), no gradient clipping (--clip X clips at X). Every config starts from the same seed and sees
// the same batches.
//
// --task shakespeare (default when the data file is readable): causal char-level LM with RoPE, 90/10 split,
// validation loss on 8 held-out batches. --task copy: the lesson's synthetic task
// (examples/common/lm_task.h). A NaN/Inf loss or gradient norm stops that config at that step; the step is
// recorded and plotted.
//
// --device cuda (or cuda:N) trains on a GPU through the CUDA backend (docs/cuda.md): the model is moved
// there, each batch is copied over, each loss copied back for logging. Without the backend or a GPU it is an
// error (status 1) before any training. --save/--resume are CPU only.
//
// --lr-scale S multiplies all four learning rates (default 1: the lesson's). It exists to watch a divergence
// on demand: at 1e9 NoNorm (lr 1e5) overflows to Inf/NaN at its second step, and the run shows what a
// divergence looks like (the config stops there, the NaN step is in the table, the CSV and the plot; the
// other configs go on). With --detect-anomaly the report names the first op that made the NaN/Inf.
//
// --warmup N ramps every config's learning rate linearly over its first N steps (default 0: none, the
// lesson's setting). The lesson gives Post-LN a 5x smaller rate than Pre-LN and says it needs a warmup.
//
// --save PATH checkpoints the last config (Pre-LN + RMSNorm) when it finishes; --resume PATH continues that
// config from the checkpoint to --steps, bit for bit as if it had never stopped (its weights, Adam moments,
// data and dropout generators, step count and losses so far are restored), while the other three configs
// train again from step 1 with the same seed, so they too give the same numbers. `--steps 10 --save c` then
// `--steps 20 --resume c` writes the CSV of `--steps 20`, byte for byte
// (TrainerResume.Exp2AcrossProcessesIsBitwise checks it with 2 + 2). Both flags are checked before the first
// config trains: the checkpoint is loaded into a scratch model of the last config and must come from this
// run (the same learning rate, --seed and vocabulary), --save's folder must exist, and --save may not name
// --data, one of the run's own files, or any file already there that is not a checkpoint
// (check_checkpoint_flags, examples/common/lm_task.h). A config that diverged is not saved.
//
// --seeds 42,2,7 trains the four configs once per seed (each seed its own weights and batches). The table
// lists every seed's runs, the figure draws every seed's curve (the first solid, the others dashed), the
// summary reads the first seed's run as a single run would and then ranks the configs across the seeds
// (examples/common/seeds.h). One seed (--seed, or none) writes exactly what it did before --seeds existed.
//
// Output in --out: norm_comparison.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "examples/common/cli.h"
#include "examples/common/finite_range.h"
#include "examples/common/lm_task.h"
#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "examples/common/seeds.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

struct Config {
  std::string name, position, norm;
  double lr;
  std::string lesson;  // the lesson's claimed outcome
};

const std::vector<Config> kConfigs = {
    {"NoNorm", "none", "layernorm", 1e-4, "NaN near step 500"},
    {"Post-LN + LayerNorm", "post", "layernorm", 1e-4, "~3.5"},
    {"Pre-LN + LayerNorm", "pre", "layernorm", 5e-4, "~2.8"},
    {"Pre-LN + RMSNorm", "pre", "rmsnorm", 5e-4, "~2.7"},
};

constexpr size_t kFinalWindow = 50;

// The copy task's floor for a model without positions (see the summary): the least expected loss of a model
// that sees token t and the multiset of the window's T tokens, but not which of them sits at t + 1. Its best
// guess for the target gives each value its share of the other T - 1 tokens, so the target, which is one of
// them, gets (1 + K) / (T - 1), where K is how many of the remaining T - 2 tokens equal it: K ~ Binomial(T -
// 2, 1 / V) for tokens drawn uniformly from V values. The floor is E[-ln((1 + K) / (T - 1))]. With V = 1000
// and T = 64 it is 4.100, a little under ln 63 = 4.143, the value when every window's tokens are distinct
// (13% of windows are; until stop 44 the summary used ln 63).
double copy_task_floor(int64_t T, int64_t V) {
  const int64_t n = T - 2;
  const double p = 1.0 / double(V);
  double floor = 0;
  for (int64_t k = 0; k <= n; ++k) {
    const double log_pk = std::lgamma(double(n + 1)) - std::lgamma(double(k + 1)) -
                          std::lgamma(double(n - k + 1)) + double(k) * std::log(p) +
                          double(n - k) * std::log1p(-p);
    floor += std::exp(log_pk) * -std::log(double(1 + k) / double(T - 1));
  }
  return floor;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"Experiment 2: NoNorm vs Post-LN vs Pre-LN (LayerNorm, RMSNorm) on a 2-layer Transformer."};
  CommonOptions opt;
  add_common_flags(app, opt);
  add_seeds_flag(app, opt);
  std::string task_flag, device_flag = "cpu";
  add_task_flag(app, task_flag);
  add_device_flag(app, device_flag);
  double lr_scale = 1.0;
  const std::string lr_scale_help =
      "multiply the four learning rates by this (1: the lesson's; 1e9 makes NoNorm diverge at step 2, to "
      "see the NaN handling)";
  app.add_option("--lr-scale", lr_scale, lr_scale_help)
      ->check(FiniteRange(1e-6, 1e12))
      ->capture_default_str();
  double clip = 0;
  add_clip_flag(app, clip, "clip_grad_norm's max norm of every config; 0 (the lesson's setting) for none");
  int64_t warmup = 0;
  add_warmup_flag(app, warmup,
                  "linear warmup steps of every config (step s at lr * s / N), fewer than --steps; 0: none");
  app.get_option("--save")->description(
      "at the end, checkpoint the last config (Pre-LN + RMSNorm): weights, Adam state, data and dropout "
      "generators, step (safetensors); replaces a checkpoint at PATH, never another file");
  app.get_option("--resume")
      ->description(
          "continue the last config from a --save checkpoint up to --steps, bit for bit as if it had never "
          "stopped; the other three configs train again from step 1 (same seed: the same numbers)");
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  const Device device = require_device(device_flag);
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "norm_comparison", argc, argv);
  const int64_t steps = opt.steps_or(1000, 100);
  if (!warmup_fits(warmup, steps)) return 2;

  nn::TinyLMConfig base;
  base.dim = 256;
  base.n_layers = 2;
  base.n_heads = 4;
  base.ffn = "mlp";
  base.seed = opt.seed;                // and each seed of --seeds in turn
  base.max_seq_len = TrainSpec().seq;  // the context it trains on: generate() crops the sample's to it
  base = task.configure(base);

  const std::vector<uint64_t>& seeds = opt.seeds;
  const bool many = seeds.size() > 1;
  const std::string seed_words = many ? "seeds " + seed_list_text(seeds) : "seed " + std::to_string(opt.seed);
  // ", warmup 100" in the printed line and the figure's title; "" without one (the output before --warmup).
  // The title names the clipping only where it is not the default's.
  const std::string warmup_words = warmup > 0 ? ", warmup " + std::to_string(warmup) : "";
  std::printf("Task %s (vocab %lld), %lld steps, batch 16, seq 64, Adam, %s%s, %s, device %s\n",
              task.name.c_str(), (long long)task.vocab, (long long)steps, clip_description(clip).c_str(),
              warmup_words.c_str(), seed_words.c_str(), device.str().c_str());
  uint64_t seed = opt.seed;  // the seed being trained
  auto config_of = [&](const Config& c) {
    nn::TinyLMConfig mc = base;
    mc.seed = seed;
    mc.norm_position = c.position;
    mc.norm = c.norm;
    mc.final_norm = c.position == "pre";
    return mc;
  };
  auto spec_of = [&](const Config& c) {
    TrainSpec spec;
    spec.device = device;
    spec.label = c.name;
    spec.lr = c.lr * lr_scale;
    spec.steps = steps;
    spec.warmup = warmup;
    spec.clip = clip;
    spec.data_seed = seed + 1;
    return spec;
  };
  // --resume and --save apply to the last config (--seeds excludes both): check them before the first config
  // trains
  check_checkpoint_flags(config_of(kConfigs.back()), task, spec_of(kConfigs.back()), opt.resume, opt.save,
                         not_save_paths(opt, report));
  // by_seed[s][i]: config i trained with seeds[s]. The first seed's run is `results`, the one the table's
  // narrative and the sample come from.
  std::vector<std::vector<TrainResult>> by_seed(seeds.size());
  std::unique_ptr<nn::TinyLM> last;
  for (size_t s = 0; s < seeds.size(); ++s) {
    seed = seeds[s];
    if (many) std::printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      const Config& c = kConfigs[i];
      // initialised on the CPU: the same weights on any device
      auto model = std::make_unique<nn::TinyLM>(config_of(c));
      model->to(device);
      const TrainSpec spec = spec_of(c);
      bool is_last = i + 1 == kConfigs.size();
      TrainResult r =
          train_lm(*model, task, spec, opt.quiet, is_last ? opt.resume : "", is_last ? opt.save : "");
      std::printf("  %-20s lr %-7g %5.1f s  final loss %.4f%s\n", c.name.c_str(), spec.lr, r.seconds,
                  mean_last(r.losses, kFinalWindow),
                  r.nan_step >= 0
                      ? ("  (" + r.nan_what + " at step " + std::to_string(r.nan_step) + ")").c_str()
                      : "");
      by_seed[s].push_back(r);
      if (is_last && s == 0) last = std::move(model);
    }
  }
  const std::vector<TrainResult>& results = by_seed.front();

  std::string sample;
  if (task.name == "shakespeare" && results.back().nan_step < 0) {
    last->to(Device::cpu());  // sampling runs on the CPU
    // A newline starts the sample, as a new line of the play; a corpus without one starts from its first
    // validation character instead (encoding "\n" failed there, after all four configs had trained).
    const bool has_newline = task.tokenizer.vocab().find('\n') != std::string::npos;
    std::vector<int64_t> prompt =
        has_newline ? task.tokenizer.encode("\n") : std::vector<int64_t>{task.val_ids.front()};
    std::vector<int64_t> out = nn::generate(*last, prompt, 200, 0.8, 0, opt.seed);
    sample = task.tokenizer.decode(std::vector<int64_t>(out.end() - 200, out.end()));
    std::printf("\nSample from Pre-LN + RMSNorm (200 chars, temperature 0.8):\n%s\n", sample.c_str());
  }

  // ---- table: measured beside the lesson ----
  // converged: never diverged, and the mean of the last 50 losses is at least 20% below the mean of the
  // first 10 (in a run shorter than 60 steps, two windows that do not overlap: head_tail_means; "-" for a
  // run of one step, which cannot tell).
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> converged;  // the first seed's
  std::vector<std::string> grew;       // finished configs whose loss ended 20% or more above where it started
  for (size_t s = 0; s < seeds.size(); ++s)
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      const TrainResult& r = by_seed[s][i];
      const auto [first, last] = head_tail_means(r.losses, 10, kFinalWindow);
      const std::string conv = r.nan_step >= 0      ? "no"
                               : std::isnan(first)  ? "-"
                               : last < 0.8 * first ? "yes"
                                                    : "no";
      if (s == 0) {
        if (r.nan_step < 0 && last >= 1.2 * first)
          grew.push_back(kConfigs[i].name + " (" + num(first, 4) + " -> " + num(last, 4) + ")");
        converged.push_back(conv);
      }
      const double fin = mean_last(r.losses, kFinalWindow);
      // rates at num's 6 digits: 2 printed --lr-scale 1.234's 0.000617 as 0.00062, a rate no run used
      rows.push_back({kConfigs[i].name, num(kConfigs[i].lr * lr_scale), kConfigs[i].lesson, conv,
                      r.nan_step >= 0 ? std::to_string(r.nan_step) : "-", num(fin, 4),
                      std::isfinite(r.val_loss) ? num(r.val_loss, 4) : "-"});
      if (many) rows.back().insert(rows.back().begin() + 1, std::to_string(seeds[s]));
    }
  std::vector<std::string> header = {
      "config", "lr", "lesson", "converged", "NaN step", "final loss (last 50)", "val loss"};
  if (many) header.insert(header.begin() + 1, "seed");
  // the console table (with several seeds, a seed column after the config)
  auto print_row = [&](const std::vector<std::string>& row) {
    size_t c = 0;
    std::printf("%-20s ", row[c++].c_str());
    if (many) std::printf("%-6s ", row[c++].c_str());
    std::printf("%-6s %-18s %-9s %-8s %-20s %s\n", row[c].c_str(), row[c + 1].c_str(), row[c + 2].c_str(),
                row[c + 3].c_str(), row[c + 4].c_str(), row[c + 5].c_str());
  };
  std::printf("\n");
  print_row(header);
  for (const auto& row : rows) print_row(row);

  // ---- figure ----
  plot::LineChart curves;
  curves.title = "Training loss (" + task.name + ")";
  curves.xlabel = "step";
  curves.ylabel = "loss (log)";
  curves.yscale = plot::Scale::Log;
  for (size_t seed_index = 0; seed_index < seeds.size(); ++seed_index)
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      const TrainResult& r = by_seed[seed_index][i];
      // with several seeds: "Pre-LN + RMSNorm seed 2", the first seed's curve solid, the others thin and
      // dashed
      const std::string name =
          many ? kConfigs[i].name + " seed " + std::to_string(seeds[seed_index]) : kConfigs[i].name;
      plot::Series s;
      s.label = name;
      s.color = plot::palette(int(i));
      if (seed_index > 0) s.width = 1.0f, s.dashed = true, s.in_legend = false;  // other_seeds_key says so
      // Every step is a point; the one that diverged is kept as NaN (a gap in the plot, "nan" in the CSV), so
      // a config that diverged at its first step still has its series.
      for (size_t k = 0; k < r.losses.size(); ++k) {
        double l = r.losses[k];
        s.x.push_back(double(r.first_step + int64_t(k)));
        s.y.push_back(std::isfinite(l) && l > 0 ? l : NAN);
      }
      curves.series.push_back(s);
      if (r.nan_step >= 0)
        curves.vlines.push_back(
            {double(r.nan_step), name + " NaN at step " + std::to_string(r.nan_step), plot::palette(int(i))});
    }
  if (warmup > 0) curves.vlines.push_back({double(warmup), "warmup ends", plot::colors::gray});
  if (many) curves.legend_keys.push_back({other_seeds_key(seeds), plot::colors::gray, true});
  // Reference levels: a uniform guess over the vocabulary scores ln(V); on the copy task, no model without
  // positions gets below copy_task_floor (see the summary below).
  curves.hlines.push_back(
      {std::log(double(task.vocab)),
       "uniform guess: ln " + std::to_string(task.vocab) + " = " + num(std::log(double(task.vocab)), 3),
       plot::colors::gray});
  if (task.name == "copy") {
    const int64_t T = TrainSpec().seq;
    const double floor = copy_task_floor(T, task.vocab);
    curves.hlines.push_back({floor, "floor without positions: " + num(floor, 3), plot::colors::brown});
  }
  plot::Table table;
  table.title = "Measured vs lesson";
  table.header = header;
  table.rows = rows;
  for (size_t k = 0; k < rows.size(); ++k)
    table.row_colors.push_back(plot::palette(int(k % kConfigs.size())));
  plot::Figure fig;
  fig.title = "Experiment 2: norm comparison, 2 layers x 256, " + std::to_string(steps) + " steps" +
              (clip > 0 ? ", " + clip_description(clip) : "") + warmup_words + ", " + task.name + ", " +
              seed_words;
  fig.cols = 2;
  fig.panel_width = 700;
  fig.panels = {curves, table};
  std::string png = report.add_figure(fig);

  // ---- summary with computed conclusions ----
  std::string md = "# Experiment 2: norm comparison\n\n";
  md += "Task `" + task.name + "` (vocab " + std::to_string(task.vocab) + "), TinyLM 2 layers, hidden 256, " +
        "4 heads, 4x ReLU FFN; Adam, batch 16, seq 64, " + std::to_string(steps) + " steps, " +
        clip_description(clip) + ", " + (warmup > 0 ? warmup_description(warmup) + ", " : "") + seed_words +
        (many ? " (every config once per seed; \"What seed " + std::to_string(seeds[0]) +
                    "'s run shows\" reads the first seed alone, \"Across the seeds\" all of them)"
              : "") +
        ".\n\n";
  md += md_table(header, rows);
  md +=
      "\nConverged = no NaN/Inf and the final loss (mean of the last 50 steps) at least 20% below the mean "
      "of the first 10 (under 60 steps: of the first and last parts, which never overlap).\n\n" +
      paired_rule_text(many ? "Two configs of one seed" : "Two configs",
                       many ? "all four of a seed" : "all four configs", kFinalWindow) +
      "\n\n" +
      (many ? seed_rule_text(seeds) + "\n\n## What seed " + std::to_string(seeds[0]) + "'s run shows\n\n"
            : std::string("## What the run shows\n\n"));
  // The configs that finished, lowest final loss first.
  std::vector<size_t> ranked;
  for (size_t i = 0; i < kConfigs.size(); ++i)
    if (results[i].nan_step < 0) ranked.push_back(i);
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t i, size_t j) {
    return mean_last(results[i].losses, kFinalWindow) < mean_last(results[j].losses, kFinalWindow);
  });
  const int best = ranked.empty() ? -1 : int(ranked[0]);
  if (best >= 0) {
    md += "- Lowest final loss: " + kConfigs[ranked[0]].name + " (" +
          num(mean_last(results[ranked[0]].losses, kFinalWindow), 4) + ")";
    // against the next lowest: is the first place beyond this run's noise?
    if (ranked.size() > 1) {
      const PairedDiff d = paired_diff(results[ranked[0]], results[ranked[1]], kFinalWindow);
      md += lead_text(d) + paired_text(d, kConfigs[ranked[0]].name, kConfigs[ranked[1]].name);
    }
    md += ".\n";
  }
  if (best < 0)
    md += "- Every config diverged: none has a final loss to rank.\n";
  else if (std::count(converged.begin(), converged.end(), "-") == std::ptrdiff_t(kConfigs.size()))
    md += "- One step is too few to tell whether any config converged.\n";
  else if (std::count(converged.begin(), converged.end(), "yes") == 0 && !grew.empty()) {
    // Losses that blew up without reaching NaN (a learning rate far too high) did not "barely move".
    md += "- No config converged, and the loss grew by 20% or more in ";
    for (size_t k = 0; k < grew.size(); ++k) md += (k ? ", " : "") + grew[k];
    md +=
        " (mean of the first steps -> mean of the last): the comparisons below rank runs that went the wrong "
        "way, not the norms.\n";
  } else if (std::count(converged.begin(), converged.end(), "yes") == 0) {
    md +=
        "- No config converged (none got 20% below its starting loss), so the comparisons below rank "
        "losses that barely moved: read them as \"nothing learned\", not as a ranking of the norms.\n";
  }
  if (results[0].nan_step >= 0)
    md += "- NoNorm diverged at step " + std::to_string(results[0].nan_step) + " (" + results[0].nan_what +
          "); the lesson says near step 500.\n";
  else
    md += "- NoNorm did NOT diverge in " + std::to_string(results[0].losses.size()) + " steps at lr " +
          num(kConfigs[0].lr * lr_scale) +
          ", the one rate this run tried (the lesson claims NaN near step 500" +
          (steps < 500 ? std::string(", which this run is too short to reach") : std::string("")) + ").\n";
  // Final losses are compared only between configs that finished: a diverged config's last-50 mean is
  // made of the steps before its blow-up, which says nothing about where it would have ended.
  double post = mean_last(results[1].losses, kFinalWindow),
         preln = mean_last(results[2].losses, kFinalWindow),
         prerms = mean_last(results[3].losses, kFinalWindow);
  auto diverged = [&](size_t i) {
    return kConfigs[i].name + " diverged at step " + std::to_string(results[i].nan_step);
  };
  auto finished = [&](size_t i) { return results[i].nan_step < 0; };
  auto ended = [&](size_t i, double loss) {
    return finished(i) ? num(loss, 4)
                       : "no final loss (diverged at step " + std::to_string(results[i].nan_step) + ")";
  };
  md += "- Post-LN ended at " + ended(1, post) + " (lesson ~3.5), Pre-LN + LayerNorm at " + ended(2, preln) +
        " (lesson ~2.8), Pre-LN + RMSNorm at " + ended(3, prerms) + " (lesson ~2.7). ";
  if (!finished(1) || !finished(2) || !finished(3)) {
    md += "Not compared: ";
    std::string sep;
    for (size_t i = 1; i < 4; ++i)
      if (!finished(i)) md += sep + diverged(i), sep = ", ";
    md += ".\n";
  } else {
    // Each Pre-LN config against Post-LN, paired step by step (examples/common/paired.h).
    const PairedDiff ln_vs_post = paired_diff(results[2], results[1], kFinalWindow);
    const PairedDiff rms_vs_post = paired_diff(results[3], results[1], kFinalWindow);
    auto lower = [](const PairedDiff& d) { return d.resolved() && d.mean < 0; };
    auto higher = [](const PairedDiff& d) { return d.resolved() && d.mean > 0; };
    md += std::string(!ln_vs_post.computed() || !rms_vs_post.computed() ? "Pre-LN against Post-LN"
                      : lower(ln_vs_post) && lower(rms_vs_post) ? "Pre-LN beat Post-LN, as the lesson says"
                      : higher(ln_vs_post) && higher(rms_vs_post)
                          ? "Pre-LN did NOT beat Post-LN here"
                          : "Pre-LN did not clearly beat Post-LN here") +
          ": " + paired_text(ln_vs_post, kConfigs[2].name, kConfigs[1].name) + "; " +
          paired_text(rms_vs_post, kConfigs[3].name, kConfigs[1].name) +
          ". Pre-LN also has a 5x larger learning rate, so this compares recipes, not positions alone.\n";
  }
  if (finished(2) && finished(3)) {
    // The lesson's ~2.7 against ~2.8 puts RMSNorm 0.1 lower.
    const PairedDiff rms_vs_ln = paired_diff(results[3], results[2], kFinalWindow);
    md += "- RMSNorm vs LayerNorm (both Pre-LN; the lesson has RMSNorm 0.1 lower): " +
          paired_text(rms_vs_ln, kConfigs[3].name, kConfigs[2].name) + ".\n";
  } else
    md += "- RMSNorm vs LayerNorm: not compared, " + (finished(2) ? diverged(3) : diverged(2)) + ".\n";
  if (finished(0) && finished(1)) {
    // The lesson has NoNorm far behind (NaN near step 500, the lowest learning-rate tolerance). A NoNorm
    // that finished is ranked against Post-LN, which trains at the same learning rate.
    const PairedDiff none_vs_post = paired_diff(results[0], results[1], kFinalWindow);
    md += "- NoNorm vs Post-LN (the same learning rate; the lesson has NoNorm diverging): " +
          paired_text(none_vs_post, kConfigs[0].name, kConfigs[1].name) + ".\n";
  }
  if (task.name == "copy") {
    // Without any position information, self-attention is permutation-equivariant: the output at t is a
    // function of token t and of the multiset of the sequence's tokens, so it cannot tell which token sits
    // at t + 1. The best it can do is spread its guess over the other T - 1 tokens: copy_task_floor.
    const int64_t T = TrainSpec().seq;
    const double loss_floor = copy_task_floor(T, task.vocab);
    // the lowest final loss over the configs that finished (ranked above)
    const double best_final = ranked.empty() ? NAN : mean_last(results[ranked[0]].losses, kFinalWindow);
    md +=
        "- The copy task uses the lesson's unmasked attention with no position encoding. With positions, "
        "position t could simply attend to token t + 1 (the target). Without them the model cannot tell "
        "which token is at t + 1: no such model can get below " +
        num(loss_floor, 3) + " in expectation (its best guess spreads over the other " +
        std::to_string(T - 1) + " tokens of the window; ln " + std::to_string(T - 1) + " = " +
        num(std::log(double(T - 1)), 3) +
        " when they are all distinct). The lesson's table (2.7 to 3.5) lies below that floor, so it cannot "
        "come from this task; the lesson's text names TinyShakespeare as its data. " +
        (std::isnan(best_final)
             ? std::string("No config finished, so this run has no final loss to hold against the floor.")
             : "Best final loss here: " + num(best_final, 4) +
                   (best_final > loss_floor ? " (above the floor)."
                                            : " (below the floor: the task leaks positions!).")) +
        "\n";
  }
  if (lr_scale != 1.0)
    md += "- Every learning rate is the lesson's times --lr-scale " + num(lr_scale) +
          ": this run does not use the lesson's recipe.\n";
  if (steps != 1000)
    md += "- This run has " + std::to_string(steps) +
          " steps, not the lesson's 1000: the absolute numbers are not comparable with its table.\n";
  if (!opt.resume.empty())
    md += "- " + kConfigs.back().name + " " + resumed_note(results.back(), opt.resume, steps) + "\n";
  if (many) {
    // ---- across the seeds ----
    md += "\n## Across the seeds\n\n";
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      std::vector<double> finals;
      size_t diverged_in = 0;
      for (const std::vector<TrainResult>& rs : by_seed) {
        if (rs[i].nan_step >= 0)
          ++diverged_in;
        else
          finals.push_back(mean_last(rs[i].losses, kFinalWindow));
      }
      md += "- " + kConfigs[i].name + ": final loss ";
      for (size_t k = 0; k < finals.size(); ++k) md += (k ? ", " : "") + num(finals[k], 4);
      if (finals.empty()) md += "none";
      md += diverged_in == 0 ? std::string(" (every seed finished)")
                             : " (diverged in " + std::to_string(diverged_in) + " of " +
                                   std::to_string(seeds.size()) + " seeds)";
      md += ".\n";
    }
    // each comparison: per seed as paired.h ranks it, then across the seeds
    const std::pair<size_t, size_t> pairs[] = {{2, 1}, {3, 1}, {3, 2}};
    for (const auto& [a, b] : pairs) {
      std::vector<PairedDiff> per_seed;
      std::string lines;
      for (size_t s = 0; s < seeds.size(); ++s) {
        const std::vector<TrainResult>& rs = by_seed[s];
        const bool both = rs[a].nan_step < 0 && rs[b].nan_step < 0;
        per_seed.push_back(both ? paired_diff(rs[a], rs[b], kFinalWindow) : PairedDiff{});
        lines += "  - seed " + std::to_string(seeds[s]) + ": " +
                 (both ? paired_text(per_seed.back(), kConfigs[a].name, kConfigs[b].name)
                       : std::string("not compared, a config diverged")) +
                 ".\n";
      }
      md += "- " + kConfigs[a].name + " against " + kConfigs[b].name + ", " +
            seed_text(seed_spread(per_seed), kConfigs[a].name, kConfigs[b].name) + ".\n" + lines;
    }
  }
  if (!sample.empty()) md += "\n## Sample (Pre-LN + RMSNorm, temperature 0.8)\n\n```\n" + sample + "\n```\n";
  report.write_all(md);
  std::printf("\nWrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
