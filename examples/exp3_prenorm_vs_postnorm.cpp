// Experiment 3: Pre-LN against Post-LN as the model gets deeper.
//
//   Pre-LN  + LayerNorm, lr 1e-3        at 4 and at 8 layers   (--pre-lr)
//   Post-LN + LayerNorm, lr 1e-4        at 4 and at 8 layers   (--post-lr)
//
// The lesson's recipe gives the two positions a 10x different learning rate, so by default this compares
// recipes. `--post-lr 1e-3` runs Post-LN at Pre-LN's rate, which tests the lesson's "Post-LN needs a smaller
// learning rate" directly.
//
// Adam, clip_grad_norm 1.0 (--clip; 0: none), batch 16, 1000 steps. Full run: hidden 256, 4 heads, seq 64 (as
// experiment 2).
// --quick: 200 steps on a SMALLER model and data (hidden 64, 4 heads, seq 32) so that the four runs fit in
// the 2-minute budget on 2 cores; the summary says so.
// Same task choice as experiment 2 (--task shakespeare | copy, examples/common/lm_task.h).
//
// --warmup N ramps every run's learning rate linearly over its first N steps (default 0: none). The lesson
// says Post-LN needs a warmup and Pre-LN does not: `--post-lr 1e-3 --warmup 100` against `--post-lr 1e-3`
// asks whether a warmup lets Post-LN train at Pre-LN's rate. (Experiment 4 runs each position with and
// without one, side by side.)
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
// --seeds 42,2,7 trains the four runs once per seed (each seed its own weights and batches) and ranks them
// across the seeds as well (examples/common/seeds.h); the figure draws every seed's curve and adds a panel of
// the per-seed gaps, the summary lists every run. One seed (--seed, or none) writes exactly what it did
// before --seeds existed.
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
#include "examples/common/seeds.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

struct Run {
  std::string name, position;
  int64_t layers;
  double lr;
  uint64_t seed = 0;
  TrainResult result;
  double final_loss = 0, stability = 0, fell = 0;
};

constexpr size_t kWindow = 100;

// Pre-LN against Post-LN at one depth, in one seed's runs: the paired difference (not computed when a run
// diverged or took one step) and what the summary says after "4 layers: ".
struct DepthCall {
  PairedDiff d;
  std::string text;
};
DepthCall compare_positions(const Run& pre, const Run& post) {
  DepthCall c;
  if (pre.result.nan_step >= 0 || post.result.nan_step >= 0) {
    for (const Run* r : {&pre, &post})
      if (r->result.nan_step >= 0)
        c.text += r->name + " diverged (" + r->result.nan_what + ") at step " +
                  std::to_string(r->result.nan_step) + ". ";
    return c;
  }
  if (std::isnan(pre.fell) || std::isnan(post.fell)) {
    // One step: its loss was computed before any update, so both are the untrained models' losses.
    c.text =
        "one step is too few to rank Pre-LN against Post-LN (the loss of step 1 is the untrained model's).";
    return c;
  }
  c.d = paired_diff(pre.result, post.result, kWindow);
  c.text = "Pre-LN final " + num(pre.final_loss, 4) + " (fell " + num(pre.fell, 3) + ", std " +
           num(pre.stability, 3) + "), Post-LN final " + num(post.final_loss, 4) + " (fell " +
           num(post.fell, 3) + ", std " + num(post.stability, 3) + "). " +
           paired_text(c.d, pre.name, post.name) + "." +
           (post.stability < pre.stability && post.final_loss > pre.final_loss
                ? " Post-LN's last-100 std is lower (" + num(post.stability, 3) + " vs " +
                      num(pre.stability, 3) + ") but it sits " + num(post.final_loss - pre.final_loss, 3) +
                      " higher: a flatter curve at a higher loss is not better training" +
                      (post.fell < 0.95 * pre.fell ? ", and its loss fell less." : ".")
                : "");
  return c;
}

// 8 layers against 4 at one position, in one seed's runs: the paired difference, and why not when there is
// none ("" when there is one).
struct DepthChange {
  PairedDiff d;
  std::string why_not;
};
DepthChange compare_depths(const Run& four, const Run& eight) {
  DepthChange c;
  if (four.result.nan_step >= 0 || eight.result.nan_step >= 0)
    c.why_not = "not compared, a run diverged.";
  else if (std::isnan(four.fell) || std::isnan(eight.fell))
    c.why_not = "not compared, one step is too few.";
  else
    c.d = paired_diff(eight.result, four.result, kWindow);
  return c;
}

// The lesson's exp3 claims two things of depth: at 4 layers the two positions are similar, and at 8 Pre-LN
// is clearly ahead. The first is the 4-layer call (`gap4`, Pre-LN minus Post-LN). The second is a change of
// that gap with depth: the gap curves g_k = pre_k - post_k of the two depths are paired step by step (all
// four runs see the same batches) over the last kWindow steps, g(8) minus g(4): negative when Pre-LN gains
// on Post-LN from 4 to 8 layers. `rs` is one seed's runs in configs' order (Pre 4, Post 4, Pre 8, Post 8).
// "" when a run diverged or took one step.
std::string lesson_depth_text(const std::vector<Run>& rs, const PairedDiff& gap4) {
  int64_t first = 1;
  for (const Run& r : rs) {
    if (r.result.nan_step >= 0 || std::isnan(r.fell)) return "";
    first = std::max(first, r.result.first_step);  // a resumed run may hold only its later steps
  }
  auto gap = [first](const Run& pre, const Run& post) {
    // step t is losses[t - first_step] of each run; all four end at the same step
    auto at = [](const Run& r, int64_t t) { return r.result.losses[size_t(t - r.result.first_step)]; };
    const int64_t last = pre.result.first_step + int64_t(pre.result.losses.size()) - 1;
    std::vector<double> g;
    for (int64_t t = first; t <= last; ++t) g.push_back(at(pre, t) - at(post, t));
    return g;
  };
  const PairedDiff change = paired_diff(gap(rs[2], rs[3]), gap(rs[0], rs[1]), kWindow);
  if (!gap4.computed() || !change.computed()) return "";
  return std::string(
             "the lesson has the two positions similar at 4 layers, and Pre-LN clearly ahead at 8. At 4 "
             "layers they are ") +
         (gap4.resolved() ? "not similar here (the gap is beyond this run's noise)"
                          : "similar here (the gap is within this run's noise)") +
         ". From 4 to 8 layers, Pre-LN minus Post-LN moves by " + num(change.mean, 3) + " ± " +
         num(change.se, 2) + " (the gap curves paired over the last " + std::to_string(change.steps) +
         " steps: " + standard_errors_text(change.mean, change.se) + " standard errors): " +
         (!change.resolved() ? "no change beyond the runs' noise"
          : change.mean < 0  ? "Pre-LN gains on Post-LN with depth, as the lesson says"
                             : "Pre-LN loses ground to Post-LN with depth, against the lesson") +
         ".";
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"Experiment 3: Pre-LN (lr 1e-3) vs Post-LN (lr 1e-4) at 4 and 8 layers, clip_grad_norm 1.0."};
  CommonOptions opt;
  add_common_flags(app, opt);
  add_seeds_flag(app, opt);
  std::string task_flag;
  add_task_flag(app, task_flag);
  double pre_lr = 1e-3, post_lr = 1e-4;
  app.add_option("--pre-lr", pre_lr, "Pre-LN learning rate (the lesson's 1e-3)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  app.add_option("--post-lr", post_lr, "Post-LN learning rate (the lesson's 1e-4; 1e-3 tests its failure)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  double clip = 1.0;
  add_clip_flag(app, clip, "clip_grad_norm's max norm of every run (the lesson's 1.0); 0 for none");
  int64_t warmup = 0;
  add_warmup_flag(app, warmup,
                  "linear warmup steps of every run (step s at lr * s / N), fewer than --steps; 0: none");
  app.get_option("--save")->description(
      "at the end, checkpoint the last run (Post-LN 8L): weights, Adam state, data and dropout generators, "
      "step (safetensors); replaces a checkpoint at PATH, never another file");
  app.get_option("--resume")
      ->description(
          "continue the last run from a --save checkpoint up to --steps, bit for bit as if it had never "
          "stopped; the other three runs train again from step 1 (same seed: the same numbers)");
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "prenorm_vs_postnorm", argc, argv);
  const int64_t steps = opt.steps_or(1000, 200);
  if (!warmup_fits(warmup, steps)) return 2;
  const int64_t dim = opt.quick ? 64 : 256, seq = opt.quick ? 32 : 64;

  const std::vector<Run> configs = {{"Pre-LN 4L", "pre", 4, pre_lr, 0, {}},
                                    {"Post-LN 4L", "post", 4, post_lr, 0, {}},
                                    {"Pre-LN 8L", "pre", 8, pre_lr, 0, {}},
                                    {"Post-LN 8L", "post", 8, post_lr, 0, {}}};
  const std::vector<uint64_t>& seeds = opt.seeds;
  const bool many = seeds.size() > 1;
  const std::string seed_words = many ? "seeds " + seed_list_text(seeds) : "seed " + std::to_string(opt.seed);
  // ", warmup 100" in the printed line and the figure's title; "" without one (the output before --warmup).
  // The title names the clipping only where it is not the default's.
  const std::string warmup_words = warmup > 0 ? ", warmup " + std::to_string(warmup) : "";
  std::printf("Task %s (vocab %lld), hidden %lld, seq %lld, batch 16, %lld steps, Adam, %s%s, %s\n",
              task.name.c_str(), (long long)task.vocab, (long long)dim, (long long)seq, (long long)steps,
              clip_description(clip).c_str(), warmup_words.c_str(), seed_words.c_str());
  auto config_of = [&](const Run& r) {
    nn::TinyLMConfig c;
    c.dim = dim;
    c.n_layers = r.layers;
    c.n_heads = 4;
    c.ffn = "mlp";
    c.norm = "layernorm";
    c.norm_position = r.position;
    c.final_norm = r.position == "pre";
    c.seed = r.seed;
    c.max_seq_len = seq;  // the context it trains on
    return task.configure(c);
  };
  auto spec_of = [&](const Run& r) {
    TrainSpec spec;
    spec.label = r.name;
    spec.lr = r.lr;
    spec.steps = steps;
    spec.seq = seq;
    spec.clip = clip;
    spec.warmup = warmup;
    spec.data_seed = r.seed + 1;
    return spec;
  };
  // --resume and --save apply to the last run (--seeds excludes both): check them before the first run trains
  Run last_run = configs.back();
  last_run.seed = seeds.back();
  check_checkpoint_flags(config_of(last_run), task, spec_of(last_run), opt.resume, opt.save,
                         not_save_paths(opt, report));
  // by_seed[s][i]: config i trained with seeds[s]
  std::vector<std::vector<Run>> by_seed(seeds.size(), configs);
  for (size_t s = 0; s < seeds.size(); ++s) {
    if (many) std::printf("seed %llu\n", (unsigned long long)seeds[s]);
    for (size_t i = 0; i < configs.size(); ++i) {
      Run& r = by_seed[s][i];
      r.seed = seeds[s];
      nn::TinyLM model(config_of(r));
      const TrainSpec spec = spec_of(r);
      bool is_last = s + 1 == seeds.size() && i + 1 == configs.size();
      r.result = train_lm(model, task, spec, opt.quiet, is_last ? opt.resume : "", is_last ? opt.save : "");
      const std::vector<double>& l = r.result.losses;
      r.final_loss = mean_last(l, kWindow);
      r.stability = std_last(l, kWindow);
      // how far it fell: the first 10 steps against the last 100, two windows that never overlap
      const auto [first, last] = head_tail_means(l, 10, kWindow);
      r.fell = first - last;
      std::printf(
          "  %-11s lr %-6g %6.1f s  final %.4f  std(last 100) %.4f  fell %.4f%s\n", r.name.c_str(), r.lr,
          r.result.seconds, r.final_loss, r.stability, r.fell,
          r.result.nan_step >= 0 ? ("  NaN at step " + std::to_string(r.result.nan_step)).c_str() : "");
    }
  }
  const std::vector<Run>& runs = by_seed.front();  // with one seed, all there is
  // A per-config figure over the seeds: their mean (the value itself with one seed)
  auto seed_mean = [&](size_t i, double Run::*what) {
    double sum = 0;
    for (const std::vector<Run>& rs : by_seed) sum += rs[i].*what;
    return sum / double(by_seed.size());
  };

  // ---- figure: 4-layer curves, 8-layer curves, final-loss bars, stability bars ----
  auto curves = [&](int64_t layers) {
    plot::LineChart c;
    c.title = std::to_string(layers) + " layers: training loss";
    c.xlabel = "step";
    c.ylabel = "loss (log)";
    c.yscale = plot::Scale::Log;
    for (size_t seed_index = 0; seed_index < by_seed.size(); ++seed_index)
      for (const Run& r : by_seed[seed_index]) {
        if (r.layers != layers) continue;
        // with several seeds: "Pre-LN 4L seed 2", the first seed's curve solid, the others thin and dashed
        const std::string name = many ? r.name + " seed " + std::to_string(r.seed) : r.name;
        plot::Series s;
        // rates at num's 6 digits here and below: 2 printed --pre-lr 0.00125 as 0.0013, a rate no run used
        s.label = name + " (lr " + num(r.lr) + ")";
        s.color = plot::palette(r.position == "pre" ? 0 : 1);
        if (seed_index > 0) s.width = 1.0f, s.dashed = true, s.in_legend = false;  // other_seeds_key says so
        // Every step is a point; the one that diverged is kept as NaN (a gap in the plot, "nan" in the CSV).
        for (size_t k = 0; k < r.result.losses.size(); ++k) {
          const double l = r.result.losses[k];
          s.x.push_back(double(r.result.first_step + int64_t(k)));
          s.y.push_back(std::isfinite(l) && l > 0 ? l : NAN);
        }
        c.series.push_back(s);
        if (r.result.nan_step >= 0)
          c.vlines.push_back(
              {double(r.result.nan_step), name + " NaN at step " + std::to_string(r.result.nan_step)});
      }
    if (warmup > 0) c.vlines.push_back({double(warmup), "warmup ends", plot::colors::gray});
    if (many) c.legend_keys.push_back({other_seeds_key(seeds), plot::colors::gray, true});
    // A uniform guess over the vocabulary scores ln(V). It also keeps the y range defined when both runs
    // diverged at their first step and have no finite loss to plot.
    c.hlines.push_back(
        {std::log(double(task.vocab)),
         "uniform guess: ln " + std::to_string(task.vocab) + " = " + num(std::log(double(task.vocab)), 3),
         plot::colors::gray});
    return c;
  };
  const std::string over_seeds = many ? ", mean of " + std::to_string(seeds.size()) + " seeds" : "";
  const auto final_of = &Run::final_loss, std_of = &Run::stability, fell_of = &Run::fell;
  plot::BarChart finals;
  finals.title = "Final loss (mean of last 100)" + over_seeds;
  finals.categories = {"4 layers", "8 layers"};
  finals.groups = {{"Pre-LN", {seed_mean(0, final_of), seed_mean(2, final_of)}, plot::palette(0)},
                   {"Post-LN", {seed_mean(1, final_of), seed_mean(3, final_of)}, plot::palette(1)}};
  plot::BarChart stab;
  stab.title = "Stability: std of last 100 (and how far loss fell)" + over_seeds;
  stab.categories = {"4 layers", "8 layers"};
  stab.groups = {{"Pre-LN std", {seed_mean(0, std_of), seed_mean(2, std_of)}, plot::palette(0)},
                 {"Post-LN std", {seed_mean(1, std_of), seed_mean(3, std_of)}, plot::palette(1)},
                 {"Pre-LN fell", {seed_mean(0, fell_of), seed_mean(2, fell_of)}, plot::palette(2)},
                 {"Post-LN fell", {seed_mean(1, fell_of), seed_mean(3, fell_of)}, plot::palette(3)}};
  plot::Figure fig;
  fig.title = "Experiment 3: Pre-LN vs Post-LN, " + task.name + ", hidden " + std::to_string(dim) + ", " +
              std::to_string(steps) + " steps" + (clip == 1.0 ? "" : ", " + clip_description(clip)) +
              warmup_words + ", " + seed_words;
  fig.cols = 2;
  fig.panels = {curves(4), curves(8), finals, stab};
  // Pre-LN vs Post-LN at each depth, in each seed's runs
  std::vector<DepthCall> calls[2];  // [depth 4, 8][seed]
  for (size_t d = 0; d < 2; ++d)
    for (const std::vector<Run>& rs : by_seed)
      calls[d].push_back(compare_positions(rs[2 * d], rs[2 * d + 1]));
  if (many) {
    // the gap each seed shows: what the across-seed call is made from
    plot::BarChart gaps;
    gaps.title = "Pre-LN minus Post-LN, paired over the last " + std::to_string(kWindow) + ", per seed";
    gaps.categories = {"4 layers", "8 layers"};
    gaps.value_format = "%.3f";
    for (size_t s = 0; s < seeds.size(); ++s)
      gaps.groups.push_back({"seed " + std::to_string(seeds[s]), {calls[0][s].d.mean, calls[1][s].d.mean}});
    fig.panels.push_back(gaps);
  }
  std::string png = report.add_figure(fig);

  // ---- summary ----
  std::vector<std::vector<std::string>> rows;
  for (const std::vector<Run>& rs : by_seed)
    for (const Run& r : rs) {
      std::vector<std::string> row = {r.name,
                                      num(r.lr),
                                      r.result.nan_step >= 0 ? std::to_string(r.result.nan_step) : "-",
                                      num(r.final_loss, 4),
                                      num(r.stability, 4),
                                      num(r.fell, 4),
                                      num(r.result.seconds, 3)};
      if (many) row.insert(row.begin() + 1, std::to_string(r.seed));
      rows.push_back(row);
    }
  std::vector<std::string> header = {
      "run", "lr", "NaN step", "final loss (last 100)", "std (last 100)", "loss fell by", "seconds"};
  if (many) header.insert(header.begin() + 1, "seed");
  std::string md = "# Experiment 3: Pre-LN vs Post-LN\n\n";
  md += "Task `" + task.name + "`, TinyLM hidden " + std::to_string(dim) +
        ", 4 heads, 4x ReLU FFN, LayerNorm; " + "Adam, batch 16, seq " + std::to_string(seq) + ", " +
        std::to_string(steps) + " steps, " + clip_description(clip) + ", " +
        (warmup > 0 ? warmup_description(warmup) + ", " : "") + seed_words +
        (many ? " (every run once per seed)" : "") + ".\n\n";
  if (opt.quick)
    md +=
        "**--quick**: a smaller model and data than the full run (hidden 64, seq 32 instead of 256 and 64) "
        "so the four runs fit in 2 minutes on 2 cores. Numbers are not comparable with a full run.\n\n";
  md += md_table(header, rows);
  md += "\n" +
        paired_rule_text(many ? "Two runs of one seed" : "Two runs", many ? "all four of a seed" : "all four",
                         kWindow) +
        "\n";
  if (many) md += "\n" + seed_rule_text(seeds) + "\n";
  md += many ? "\n## What the runs show\n\n" : "\n## What the run shows\n\n";
  for (size_t d = 0; d < 2; ++d) {
    const std::string layers = d == 0 ? "4" : "8";
    if (!many) {
      md += "- " + layers + " layers: " + calls[d][0].text + "\n";
      continue;
    }
    std::vector<PairedDiff> per_seed;
    for (const DepthCall& c : calls[d]) per_seed.push_back(c.d);
    md += "- " + layers + " layers, " +
          seed_text(seed_spread(per_seed), configs[2 * d].name, configs[2 * d + 1].name) + ".\n";
    for (size_t s = 0; s < seeds.size(); ++s)
      md += "  - seed " + std::to_string(seeds[s]) + ": " + calls[d][s].text + "\n";
  }
  // Depth is compared per position only where both depths finished.
  for (size_t p = 0; p < 2; ++p) {
    const std::string who = p == 0 ? "Pre-LN" : "Post-LN";
    std::vector<DepthChange> changes;
    for (const std::vector<Run>& rs : by_seed) changes.push_back(compare_depths(rs[p], rs[p + 2]));
    const std::string four = configs[p].name, eight = configs[p + 2].name;
    if (!many) {
      const Run &r4 = runs[p], &r8 = runs[p + 2];
      md += changes[0].why_not.empty() ? "- Going from 4 to 8 layers changed " + who + "'s final loss by " +
                                             num(r8.final_loss - r4.final_loss, 3) + ": " +
                                             paired_text(changes[0].d, eight, four) + ".\n"
                                       : "- " + who + " at 4 and 8 layers: " + changes[0].why_not + "\n";
      continue;
    }
    std::vector<PairedDiff> per_seed;
    for (const DepthChange& c : changes) per_seed.push_back(c.d);
    md += "- " + who + " from 4 to 8 layers, " + seed_text(seed_spread(per_seed), eight, four) + ".\n";
    for (size_t s = 0; s < seeds.size(); ++s) {
      const Run &r4 = by_seed[s][p], &r8 = by_seed[s][p + 2];
      md +=
          "  - seed " + std::to_string(seeds[s]) + ": " +
          (changes[s].why_not.empty() ? "the final loss changed by " + num(r8.final_loss - r4.final_loss, 3) +
                                            ": " + paired_text(changes[s].d, eight, four) + "."
                                      : changes[s].why_not) +
          "\n";
    }
  }
  if (const std::string t = lesson_depth_text(by_seed[0], calls[0][0].d); !t.empty())
    md += "- " + (many ? "In seed " + std::to_string(seeds[0]) + "'s runs, t" : std::string("T")) +
          t.substr(1) + "\n";
  if (pre_lr == post_lr)
    md += "- Both positions run at the same learning rate (" + num(pre_lr) +
          "), so the difference is the norm's position alone.\n";
  else
    md +=
        "- The two positions run at different learning rates (Pre-LN " + num(pre_lr) + ", Post-LN " +
        num(post_lr) + ", " + num(pre_lr / post_lr, 3) + "x)" +
        (pre_lr == 1e-3 && post_lr == 1e-4 ? ", the lesson's recipe" : "") +
        ", so this compares recipes. `--post-lr " + num(pre_lr) +
        "` runs Post-LN at Pre-LN's rate and tests the lesson's \"Post-LN needs a smaller learning rate\".\n";
  if (warmup > 0)
    md +=
        "- Both positions warm up over the same first " + std::to_string(warmup) +
        " steps, so the warmup is no difference between them. The lesson's \"Post-LN needs warmup\" is this "
        "run against one without `--warmup` at the same rates (experiment 4 makes both in one run).\n";
  if (!opt.resume.empty())
    md += "- " + runs.back().name + " " + resumed_note(runs.back().result, opt.resume, steps) + "\n";
  report.write_all(md);
  std::printf("\nWrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
