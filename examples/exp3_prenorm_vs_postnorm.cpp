// Experiment 3: Pre-LN against Post-LN as the model gets deeper.
//
//   Pre-LN  + LayerNorm, lr 1e-3        at 4 and at 8 layers   (--pre-lr)
//   Post-LN + LayerNorm, lr 1e-4        at 4 and at 8 layers   (--post-lr)
//
// The lesson's recipe gives the two positions a 10x different learning rate, so by default this compares
// recipes. `--post-lr 1e-3` runs Post-LN at Pre-LN's rate, which tests the lesson's "Post-LN needs a smaller
// learning rate" directly.
//
// Adam, clip_grad_norm 1.0, batch 16, 1000 steps. Full run: hidden 256, 4 heads, seq 64 (as experiment 2).
// --quick: 200 steps on a SMALLER model and data (hidden 64, 4 heads, seq 32) so that the four runs fit in
// the 2-minute budget on 2 cores; the summary says so.
// Same task choice as experiment 2 (--task shakespeare | copy, examples/common/lm_task.h).
//
// Stability = std of the last 100 losses. A model that does not learn has a flat, "stable" curve, so beside
// it we report how far the loss fell: (mean of the first 10 losses) - (mean of the last 100), two windows
// that never overlap (under 110 steps, the first and the rest: examples/common/report.h, head_tail_means).
//
// --save PATH checkpoints the last run (Post-LN 8L) when it finishes; --resume PATH continues that run from
// the checkpoint to --steps, bit for bit as if it had never stopped, while the other three train again from
// step 1 with the same seed (the same numbers). `--steps 10 --save c` then `--steps 20 --resume c` writes
// the CSV of `--steps 20`, byte for byte: the checkpoint keeps the losses so far
// (TrainerResume.Exp3AcrossProcessesIsBitwise). Both flags are checked before the first run trains, as in
// exp2 (check_checkpoint_flags, examples/common/lm_task.h).
//
// Output in --out: prenorm_vs_postnorm.{png,csv,md,cmd.txt}.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "examples/common/cli.h"
#include "examples/common/finite_range.h"
#include "examples/common/lm_task.h"
#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

struct Run {
  std::string name, position;
  int64_t layers;
  double lr;
  TrainResult result;
  double final_loss = 0, stability = 0, fell = 0;
};

constexpr size_t kWindow = 100;

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"Experiment 3: Pre-LN (lr 1e-3) vs Post-LN (lr 1e-4) at 4 and 8 layers, clip_grad_norm 1.0."};
  CommonOptions opt;
  add_common_flags(app, opt);
  std::string task_flag;
  app.add_option("--task", task_flag, "shakespeare (default when --data is readable) or copy");
  double pre_lr = 1e-3, post_lr = 1e-4;
  app.add_option("--pre-lr", pre_lr, "Pre-LN learning rate (the lesson's 1e-3)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  app.add_option("--post-lr", post_lr, "Post-LN learning rate (the lesson's 1e-4; 1e-3 tests its failure)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  app.get_option("--save")->description(
      "at the end, checkpoint the last run (Post-LN 8L): weights, Adam state, data and dropout generators, "
      "step (safetensors)");
  app.get_option("--resume")
      ->description(
          "continue the last run from a --save checkpoint up to --steps, bit for bit as if it had never "
          "stopped; the other three runs train again from step 1 (same seed: the same numbers)");
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "prenorm_vs_postnorm", argc, argv);
  const int64_t steps = opt.steps_or(1000, 200);
  const int64_t dim = opt.quick ? 64 : 256, seq = opt.quick ? 32 : 64;

  std::vector<Run> runs = {{"Pre-LN 4L", "pre", 4, pre_lr, {}},
                           {"Post-LN 4L", "post", 4, post_lr, {}},
                           {"Pre-LN 8L", "pre", 8, pre_lr, {}},
                           {"Post-LN 8L", "post", 8, post_lr, {}}};
  std::printf(
      "Task %s (vocab %lld), hidden %lld, seq %lld, batch 16, %lld steps, Adam, clip 1.0, seed %llu\n",
      task.name.c_str(), (long long)task.vocab, (long long)dim, (long long)seq, (long long)steps,
      (unsigned long long)opt.seed);
  auto config_of = [&](const Run& r) {
    nn::TinyLMConfig c;
    c.dim = dim;
    c.n_layers = r.layers;
    c.n_heads = 4;
    c.ffn = "mlp";
    c.norm = "layernorm";
    c.norm_position = r.position;
    c.final_norm = r.position == "pre";
    c.seed = opt.seed;
    c.max_seq_len = seq;  // the context it trains on
    return task.configure(c);
  };
  auto spec_of = [&](const Run& r) {
    TrainSpec spec;
    spec.label = r.name;
    spec.lr = r.lr;
    spec.steps = steps;
    spec.seq = seq;
    spec.clip = 1.0;
    spec.data_seed = opt.seed + 1;
    return spec;
  };
  // --resume and --save apply to the last run: check them before the first run trains
  check_checkpoint_flags(config_of(runs.back()), task, spec_of(runs.back()), opt.resume, opt.save,
                         not_save_paths(opt, report));
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    nn::TinyLM model(config_of(r));
    const TrainSpec spec = spec_of(r);
    bool is_last = i + 1 == runs.size();
    r.result = train_lm(model, task, spec, opt.quiet, is_last ? opt.resume : "", is_last ? opt.save : "");
    const std::vector<double>& l = r.result.losses;
    r.final_loss = mean_last(l, kWindow);
    r.stability = std_last(l, kWindow);
    // how far it fell: the first 10 steps against the last 100, two windows that never overlap
    const auto [first, last] = head_tail_means(l, 10, kWindow);
    r.fell = first - last;
    std::printf("  %-11s lr %-6g %6.1f s  final %.4f  std(last 100) %.4f  fell %.4f%s\n", r.name.c_str(),
                r.lr, r.result.seconds, r.final_loss, r.stability, r.fell,
                r.result.nan_step >= 0 ? ("  NaN at step " + std::to_string(r.result.nan_step)).c_str() : "");
  }

  // ---- figure: 4-layer curves, 8-layer curves, final-loss bars, stability bars ----
  auto curves = [&](int64_t layers) {
    plot::LineChart c;
    c.title = std::to_string(layers) + " layers: training loss";
    c.xlabel = "step";
    c.ylabel = "loss (log)";
    c.yscale = plot::Scale::Log;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].layers != layers) continue;
      plot::Series s;
      s.label = runs[i].name + " (lr " + num(runs[i].lr, 2) + ")";
      s.color = plot::palette(runs[i].position == "pre" ? 0 : 1);
      // Every step is a point; the one that diverged is kept as NaN (a gap in the plot, "nan" in the CSV).
      for (size_t k = 0; k < runs[i].result.losses.size(); ++k) {
        const double l = runs[i].result.losses[k];
        s.x.push_back(double(runs[i].result.first_step + int64_t(k)));
        s.y.push_back(std::isfinite(l) && l > 0 ? l : NAN);
      }
      c.series.push_back(s);
      if (runs[i].result.nan_step >= 0)
        c.vlines.push_back({double(runs[i].result.nan_step),
                            runs[i].name + " NaN at step " + std::to_string(runs[i].result.nan_step)});
    }
    // A uniform guess over the vocabulary scores ln(V). It also keeps the y range defined when both runs
    // diverged at their first step and have no finite loss to plot.
    c.hlines.push_back(
        {std::log(double(task.vocab)),
         "uniform guess: ln " + std::to_string(task.vocab) + " = " + num(std::log(double(task.vocab)), 3),
         plot::colors::gray});
    return c;
  };
  plot::BarChart finals;
  finals.title = "Final loss (mean of last 100)";
  finals.categories = {"4 layers", "8 layers"};
  finals.groups = {{"Pre-LN", {runs[0].final_loss, runs[2].final_loss}, plot::palette(0)},
                   {"Post-LN", {runs[1].final_loss, runs[3].final_loss}, plot::palette(1)}};
  plot::BarChart stab;
  stab.title = "Stability: std of last 100 (and how far loss fell)";
  stab.categories = {"4 layers", "8 layers"};
  stab.groups = {{"Pre-LN std", {runs[0].stability, runs[2].stability}, plot::palette(0)},
                 {"Post-LN std", {runs[1].stability, runs[3].stability}, plot::palette(1)},
                 {"Pre-LN fell", {runs[0].fell, runs[2].fell}, plot::palette(2)},
                 {"Post-LN fell", {runs[1].fell, runs[3].fell}, plot::palette(3)}};
  plot::Figure fig;
  fig.title = "Experiment 3: Pre-LN vs Post-LN, " + task.name + ", hidden " + std::to_string(dim) + ", " +
              std::to_string(steps) + " steps, seed " + std::to_string(opt.seed);
  fig.cols = 2;
  fig.panels = {curves(4), curves(8), finals, stab};
  std::string png = report.add_figure(fig);

  // ---- summary ----
  std::vector<std::vector<std::string>> rows;
  for (const Run& r : runs)
    rows.push_back({r.name, num(r.lr, 2), r.result.nan_step >= 0 ? std::to_string(r.result.nan_step) : "-",
                    num(r.final_loss, 4), num(r.stability, 4), num(r.fell, 4), num(r.result.seconds, 3)});
  std::string md = "# Experiment 3: Pre-LN vs Post-LN\n\n";
  md += "Task `" + task.name + "`, TinyLM hidden " + std::to_string(dim) +
        ", 4 heads, 4x ReLU FFN, LayerNorm; " + "Adam, batch 16, seq " + std::to_string(seq) + ", " +
        std::to_string(steps) + " steps, clip_grad_norm 1.0, seed " + std::to_string(opt.seed) + ".\n\n";
  if (opt.quick)
    md +=
        "**--quick**: a smaller model and data than the full run (hidden 64, seq 32 instead of 256 and 64) "
        "so the four runs fit in 2 minutes on 2 cores. Numbers are not comparable with a full run.\n\n";
  md += md_table(
      {"run", "lr", "NaN step", "final loss (last 100)", "std (last 100)", "loss fell by", "seconds"}, rows);
  md += "\n" + paired_rule_text("Two runs", "all four", kWindow) + "\n";
  md += "\n## What the run shows\n\n";
  for (int64_t layers : {4, 8}) {
    const Run& pre = runs[layers == 4 ? 0 : 2];
    const Run& post = runs[layers == 4 ? 1 : 3];
    if (pre.result.nan_step >= 0 || post.result.nan_step >= 0) {
      md += "- " + std::to_string(layers) + " layers: ";
      for (const Run* r : {&pre, &post})
        if (r->result.nan_step >= 0)
          md += r->name + " diverged (" + r->result.nan_what + ") at step " +
                std::to_string(r->result.nan_step) + ". ";
      md += "\n";
      continue;
    }
    if (std::isnan(pre.fell) || std::isnan(post.fell)) {
      // One step: its loss was computed before any update, so both are the untrained models' losses.
      md += "- " + std::to_string(layers) +
            " layers: one step is too few to rank Pre-LN against Post-LN (the "
            "loss of step 1 is the untrained model's).\n";
      continue;
    }
    md +=
        "- " + std::to_string(layers) + " layers: Pre-LN final " + num(pre.final_loss, 4) + " (fell " +
        num(pre.fell, 3) + ", std " + num(pre.stability, 3) + "), Post-LN final " + num(post.final_loss, 4) +
        " (fell " + num(post.fell, 3) + ", std " + num(post.stability, 3) + "). " +
        paired_text(paired_diff(pre.result.losses, post.result.losses, kWindow), pre.name, post.name) + "." +
        (post.stability < pre.stability && post.final_loss > pre.final_loss
             ? " Post-LN's last-100 std is lower (" + num(post.stability, 3) + " vs " +
                   num(pre.stability, 3) + ") but it sits " + num(post.final_loss - pre.final_loss, 3) +
                   " higher: a flatter curve at a higher loss is not better training" +
                   (post.fell < 0.95 * pre.fell ? ", and its loss fell less." : ".")
             : "") +
        "\n";
  }
  // Depth is compared per position only where both depths finished.
  for (size_t p = 0; p < 2; ++p) {
    const Run& four = runs[p];
    const Run& eight = runs[p + 2];
    const std::string who = p == 0 ? "Pre-LN" : "Post-LN";
    if (four.result.nan_step >= 0 || eight.result.nan_step >= 0)
      md += "- " + who + " at 4 and 8 layers: not compared, a run diverged.\n";
    else if (std::isnan(four.fell) || std::isnan(eight.fell))
      md += "- " + who + " at 4 and 8 layers: not compared, one step is too few.\n";
    else
      md +=
          "- Going from 4 to 8 layers changed " + who + "'s final loss by " +
          num(eight.final_loss - four.final_loss, 3) + ": " +
          paired_text(paired_diff(eight.result.losses, four.result.losses, kWindow), eight.name, four.name) +
          ".\n";
  }
  if (pre_lr == post_lr)
    md += "- Both positions run at the same learning rate (" + num(pre_lr, 2) +
          "), so the difference is the norm's position alone.\n";
  else
    md +=
        "- The two positions run at different learning rates (Pre-LN " + num(pre_lr, 2) + ", Post-LN " +
        num(post_lr, 2) + ", " + num(pre_lr / post_lr, 3) + "x)" +
        (pre_lr == 1e-3 && post_lr == 1e-4 ? ", the lesson's recipe" : "") +
        ", so this compares recipes. `--post-lr " + num(pre_lr, 2) +
        "` runs Post-LN at Pre-LN's rate and tests the lesson's \"Post-LN needs a smaller learning rate\".\n";
  if (!opt.resume.empty())
    md += "- " + runs.back().name + " " + resumed_note(runs.back().result, opt.resume, steps) + "\n";
  report.write_all(md);
  std::printf("\nWrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
