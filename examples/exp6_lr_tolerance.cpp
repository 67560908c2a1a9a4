// Experiment 6: learning-rate tolerance.
//
// The claim: the lesson's experiment-2 table has a "learning-rate tolerance" column (NoNorm very low,
// Post-LN low, "needs lr < 1e-4", Pre-LN + LayerNorm medium, Pre-LN + RMSNorm high), and its summary says
// that a norm "raises the learning-rate tolerance". Experiment 2 trains each config at one rate, so it
// cannot test that; this experiment sweeps the rate.
//
// Setup: experiment 2's four configs (TinyLM 2 layers x 256, 4 heads, 4x ReLU FFN; char-level
// TinyShakespeare, batch 16, seq 64, Adam, no clipping), each trained at every rate of --lrs (default 1e-4,
// 3e-4, 1e-3, 3e-3, 1e-2, 3e-2) for --steps (default 300). Every run of a config starts from the same
// weights, and every run sees the same batches (from --seed + 1).
//
// What is measured, per config and rate:
//   final loss   the mean of the last 50 training losses
//   trained      no NaN/Inf, and the last 50 losses below the context-free loss (the letters' entropy,
//                3.309 on TinyShakespeare: what a model that ignores its context scores) beyond the run's
//                own noise: paired.h's rule against a flat line at that loss (level_diff: 10 block means,
//                more than 2.26 standard errors). A final loss of 3.306 is that of a model that learned the
//                letters' frequencies and nothing more; "below 3.309" alone counted it as trained.
// A config's tolerance is how many of the swept rates it trained at. The summary sets the lesson's order
// (NoNorm < Post-LN < Pre-LN + LayerNorm < Pre-LN + RMSNorm) against those counts, pair by pair. Where two
// neighbours in that order trained at as many rates, it pairs their runs at the highest rate both trained
// at, step by step over the last 50 steps (paired.h: every run sees the same batches), to say which of the
// two fared better there. It also checks "Post-LN needs lr < 1e-4" against the rates Post-LN trained at.
//
// Output in --out: lr_tolerance.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "examples/common/cli.h"
#include "examples/common/finite_range.h"
#include "examples/common/lm_task.h"
#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

struct Config {
  std::string name, position, norm;
  std::string lesson;  // the lesson's tolerance
};

// In the lesson's order of tolerance, lowest first.
const std::vector<Config> kConfigs = {
    {"NoNorm", "none", "layernorm", "very low"},
    {"Post-LN + LayerNorm", "post", "layernorm", "low (needs lr < 1e-4)"},
    {"Pre-LN + LayerNorm", "pre", "layernorm", "medium"},
    {"Pre-LN + RMSNorm", "pre", "rmsnorm", "high"},
};

constexpr size_t kFinalWindow = 50;

struct Outcome {
  TrainResult result;
  double final_loss = NAN;  // mean of the last kFinalWindow losses; NaN when the run diverged
  PairedDiff below;         // the last kFinalWindow losses minus the context-free loss
  bool trained = false;
};

std::string rate_text(double lr) {
  return num(lr, 3);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return s.empty() ? std::string("none") : s;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{
      "Experiment 6: learning-rate tolerance. Experiment 2's four configs, each trained at every rate of "
      "--lrs."};
  CommonOptions opt;
  add_common_flags(app, opt);
  std::string task_flag;
  add_task_flag(app, task_flag);
  std::vector<double> lrs = {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2};
  app.add_option("--lrs", lrs, "the learning rates, comma-separated (default 1e-4,3e-4,1e-3,3e-3,1e-2,3e-2)")
      ->delimiter(',')
      ->check(FiniteRange(1e-8, 10.0));
  double clip = 0;
  add_clip_flag(app, clip, "clip_grad_norm's max norm of every run; 0 (experiment 2's setting) for none");
  int64_t warmup = 0;
  add_warmup_flag(app, warmup, "linear warmup steps of every run (step s at lr * s / N), fewer than --steps");
  const std::vector<std::string> unused = {"--save", "--resume"};
  const std::string why = "experiment 6 trains many models and keeps no checkpoint";
  mark_flags_unused(app, unused, why);
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  note_unused_flags(app, unused, why);
  const int64_t steps = opt.steps_or(300, 60);
  if (!warmup_fits(warmup, steps)) return 2;
  std::sort(lrs.begin(), lrs.end());
  lrs.erase(std::unique(lrs.begin(), lrs.end()), lrs.end());
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "lr_tolerance", argc, argv);
  const double cf = task.context_free_loss();

  nn::TinyLMConfig base;
  base.dim = 256;
  base.n_layers = 2;
  base.n_heads = 4;
  base.ffn = "mlp";
  base.seed = opt.seed;
  base.max_seq_len = TrainSpec().seq;
  base = task.configure(base);
  std::printf(
      "Task %s (vocab %lld), TinyLM 2 x 256, %lld steps per run, batch 16, seq 64, Adam, %s%s, seed %llu\n",
      task.name.c_str(), (long long)task.vocab, (long long)steps, clip_description(clip).c_str(),
      warmup > 0 ? (", warmup " + std::to_string(warmup)).c_str() : "", (unsigned long long)opt.seed);

  // runs[c][k]: config c at lrs[k]
  std::vector<std::vector<Outcome>> runs(kConfigs.size());
  for (size_t c = 0; c < kConfigs.size(); ++c)
    for (double lr : lrs) {
      nn::TinyLMConfig mc = base;
      mc.norm_position = kConfigs[c].position;
      mc.norm = kConfigs[c].norm;
      mc.final_norm = kConfigs[c].position == "pre";
      nn::TinyLM model(mc);
      TrainSpec spec;
      spec.label = kConfigs[c].name + ", lr " + rate_text(lr);
      spec.lr = lr;
      spec.steps = steps;
      spec.clip = clip;
      spec.warmup = warmup;
      spec.data_seed = opt.seed + 1;
      spec.val_batches = 0;  // the sweep judges the training losses: no validation pass after each run
      Outcome o;
      o.result = train_lm(model, task, spec, opt.quiet);
      if (o.result.nan_step < 0) {
        o.final_loss = mean_last(o.result.losses, kFinalWindow);
        o.below = level_diff(o.result.losses, cf, kFinalWindow);
      }
      o.trained = std::isfinite(o.final_loss) && o.below.resolved() && o.below.mean < 0;
      std::printf("  %-20s lr %-7s %6.1f s  %s\n", kConfigs[c].name.c_str(), rate_text(lr).c_str(),
                  o.result.seconds,
                  o.result.nan_step >= 0
                      ? (o.result.nan_what + " at step " + std::to_string(o.result.nan_step)).c_str()
                      : ("final loss " + num(o.final_loss, 4)).c_str());
      runs[c].push_back(o);
    }
  // ---- the table ----
  auto cell = [&](const Outcome& o) {
    if (o.result.nan_step >= 0) return "NaN at step " + std::to_string(o.result.nan_step);
    return num(o.final_loss, 4) + (o.trained ? "" : " (not trained)");
  };
  std::vector<std::string> header = {"config", "lesson"};
  for (double lr : lrs) header.push_back("lr " + rate_text(lr));
  header.push_back("trained at");
  std::vector<size_t> trained_count(kConfigs.size(), 0);
  std::vector<std::vector<std::string>> rows;
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    std::vector<std::string> row = {kConfigs[c].name, kConfigs[c].lesson};
    for (const Outcome& o : runs[c]) {
      row.push_back(cell(o));
      trained_count[c] += o.trained;
    }
    row.push_back(std::to_string(trained_count[c]) + " of " + std::to_string(lrs.size()));
    rows.push_back(row);
  }

  // ---- figure ----
  plot::LineChart finals;
  finals.title = "Final loss (mean of the last 50 steps); above " + num(1.5 * cf, 3) + ": in the table";
  finals.xlabel = "learning rate (log scale)";
  finals.ylabel = "loss";
  finals.xscale = plot::Scale::Log;
  const plot::Marker markers[4] = {plot::Marker::Circle, plot::Marker::Square, plot::Marker::Triangle,
                                   plot::Marker::Diamond};
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    std::vector<double> y;
    for (const Outcome& o : runs[c]) y.push_back(o.final_loss);  // NaN (diverged): a gap
    finals.series.push_back({kConfigs[c].name, lrs, y, plot::palette(int(c)), markers[c], 1});
  }
  finals.hlines.push_back({cf, "context-free loss " + num(cf, 4)});
  // A run that blew up (NoNorm reaches 1e9) would squash every other point to the floor: the axis stops
  // at 1.5 x the context-free loss, and the table has every value.
  finals.ymax = 1.5 * cf;

  // The curves at the highest rate, where the configs differ most. A curve that blows up leaves the top.
  plot::LineChart curves;
  curves.title = "Training loss at lr " + rate_text(lrs.back()) + " (cut at " + num(2 * cf, 3) + ")";
  curves.xlabel = "step";
  curves.ylabel = "loss";
  curves.ymax = 2 * cf;
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    const TrainResult& r = runs[c].back().result;
    plot::Series s{kConfigs[c].name, {}, {}, plot::palette(int(c))};
    for (size_t k = 0; k < r.losses.size(); ++k) {
      s.x.push_back(double(k + 1));
      s.y.push_back(std::isfinite(r.losses[k]) && r.losses[k] > 0 ? r.losses[k] : NAN);
    }
    curves.series.push_back(s);
    if (r.nan_step >= 0)
      curves.vlines.push_back({double(r.nan_step),
                               kConfigs[c].name + " NaN at step " + std::to_string(r.nan_step),
                               plot::palette(int(c))});
  }
  curves.hlines.push_back({cf, "context-free loss"});

  plot::Table table;
  table.title = "Final loss by config and learning rate";
  table.header = header;
  table.rows = rows;
  for (size_t c = 0; c < kConfigs.size(); ++c) table.row_colors.push_back(plot::palette(int(c)));

  plot::Figure fig;
  fig.title = "Experiment 6: learning-rate tolerance, 2 layers x 256, " + std::to_string(steps) + " steps" +
              (clip > 0 ? ", " + clip_description(clip) : "") +
              (warmup > 0 ? ", warmup " + std::to_string(warmup) : "") + ", " + task.name + ", seed " +
              std::to_string(opt.seed);
  // One column: the table needs the figure's whole width for a column per rate.
  fig.cols = 1;
  fig.panel_width = 1100;
  fig.panel_height = 380;
  fig.panels = {finals, curves, table};
  const std::string png = report.add_figure(fig);

  // ---- summary ----
  std::string md = "# Experiment 6: learning-rate tolerance\n\n";
  md += "Task `" + task.name + "` (vocab " + std::to_string(task.vocab) +
        "), experiment 2's four configs (TinyLM 2 layers, hidden 256, 4 heads, 4x ReLU FFN), Adam, batch 16, "
        "seq 64, " +
        std::to_string(steps) + " steps per run, " + clip_description(clip) + ", " +
        (warmup > 0 ? warmup_description(warmup) + ", " : "") + "seed " + std::to_string(opt.seed) +
        ". Every config trains once at each learning rate, from the same weights, on the same batches.\n\n";
  md += md_table(header, rows);
  md += "\nThe final loss is the mean of the last " + std::to_string(kFinalWindow) +
        " training losses. A run *trained* when it never made a NaN or Inf and its last " +
        std::to_string(kFinalWindow) +
        " losses are below the context-free loss beyond the run's own noise (examples/common/paired.h's rule "
        "against a flat line at that loss: 10 block means, more than 2.26 standard errors). The "
        "context-free loss is " +
        num(cf, 4) +
        (task.name == "copy"
             ? " (ln " + std::to_string(task.vocab) + ": the copy task's targets are uniform)"
             : std::string(" (the letters' entropy: what a model that ignores its context scores)")) +
        ".\n\n";
  md += "## What the run shows\n\n";
  // The lesson's order, pair by pair, by each count: "**held**: Post-LN + LayerNorm more than NoNorm (3
  // against 2); ..."
  auto order_text = [&](const std::vector<size_t>& count) {
    std::string s;
    bool all = true;
    for (size_t c = 0; c + 1 < kConfigs.size(); ++c) {
      const size_t a = count[c], b = count[c + 1];
      all = all && b > a;
      s += std::string(c == 0 ? "" : "; ") + kConfigs[c + 1].name + " " +
           (b > a    ? "more than"
            : b == a ? "as many as"
                     : "fewer than") +
           " " + kConfigs[c].name + " (" + std::to_string(b) + " against " + std::to_string(a) + ")";
    }
    return std::string(all ? "**held**: " : "**did not hold** in full: ") + s;
  };
  md +=
      "- *The lesson's order of tolerance* (NoNorm very low < Post-LN low < Pre-LN + LayerNorm medium < "
      "Pre-LN + RMSNorm high), by the number of rates each config trained at: " +
      order_text(trained_count) + ".\n";
  // Neighbours that trained at as many rates: which fared better at the highest rate both trained at,
  // paired step by step over the last kFinalWindow steps.
  for (size_t c = 0; c + 1 < kConfigs.size(); ++c) {
    if (trained_count[c] != trained_count[c + 1] || trained_count[c] == 0) continue;
    size_t k = lrs.size();
    while (k > 0 && !(runs[c][k - 1].trained && runs[c + 1][k - 1].trained)) --k;
    if (k == 0) continue;
    const PairedDiff d = paired_diff(runs[c + 1][k - 1].result, runs[c][k - 1].result, kFinalWindow);
    md += "- " + kConfigs[c + 1].name + " and " + kConfigs[c].name + " trained at as many rates (" +
          std::to_string(trained_count[c]) + "). At lr " + rate_text(lrs[k - 1]) +
          ", the highest both trained at: " + paired_text(d, kConfigs[c + 1].name, kConfigs[c].name) + ".\n";
  }
  // Post-LN "needs lr < 1e-4"
  {
    std::vector<std::string> at, below;  // rates of 1e-4 or more, and under it, at which Post-LN trained
    for (size_t k = 0; k < lrs.size(); ++k)
      if (runs[1][k].trained) (lrs[k] >= 1e-4 ? at : below).push_back(rate_text(lrs[k]));
    const bool swept = std::any_of(lrs.begin(), lrs.end(), [](double lr) { return lr >= 1e-4; });
    md += std::string("- *Post-LN needs lr < 1e-4*: ") +
          (!swept        ? "not tested (no rate of 1e-4 or more was swept)"
           : !at.empty() ? "**did not hold**: Post-LN trained at " + join(at)
           : !below.empty()
               ? "**held**: Post-LN trained at " + join(below) + " and at no swept rate of 1e-4 or more"
               : std::string("not decided: Post-LN trained at no swept rate at all")) +
          ".\n";
  }
  // Each config's highest rate that trained, and where each diverged.
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    double highest = NAN;
    std::vector<std::string> diverged;
    for (size_t k = 0; k < lrs.size(); ++k) {
      if (runs[c][k].trained) highest = lrs[k];
      if (runs[c][k].result.nan_step >= 0)
        diverged.push_back(rate_text(lrs[k]) + " (step " + std::to_string(runs[c][k].result.nan_step) + ")");
    }
    md += "- " + kConfigs[c].name + ": " +
          (std::isfinite(highest) ? "trained up to lr " + rate_text(highest)
                                  : std::string("trained at no rate")) +
          "; diverged at " + join(diverged) + ".\n";
  }
  md += "\nOne seed, " + std::to_string(steps) +
        " steps per run: a run that trains slowly at a low rate may count as not trained here and would "
        "train in a longer run, and another seed can move a run near a boundary to the other side.\n";
  report.write_all(md);
  std::printf("Wrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
