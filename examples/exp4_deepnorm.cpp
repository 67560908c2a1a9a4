// Experiment 4: DeepNorm against Post-LN (and Pre-LN) in a deep stack, and what warmup does for each
// position.
//
//   Post-LN   x = LN(x + f(x))                       the 2017 Transformer
//   DeepNorm  x = LN(alpha x + f(x)), alpha = (2N)^(1/4), with the value, output and FFN matrices drawn
//             scaled by beta = (8N)^(-1/4)          (DeepNet, Wang et al. 2022; nn/block.h)
//   Pre-LN    x = x + f(LN(x)), and a final LN       the control: the position exp3 recommends
//
// All at N layers (--layers, default 24), with one learning rate (--lr, default 1e-3: Pre-LN's rate in
// exp3), Adam, clip_grad_norm 1.0 (--clip 0: none), batch 16, hidden 64, 4 heads. Post-LN, DeepNorm and
// Pre-LN start at the full rate; "Post-LN + warmup" and "Pre-LN + warmup" ramp it up linearly over the first
// W steps (--warmup, default a tenth of the steps; 0 leaves these two runs out). Full run: seq 64, 500
// steps (about 8 minutes on 2 cores); --quick: 12 layers, seq 32, 150 steps (under a minute).
// Same task choice as experiments 2 and 3 (--task shakespeare | copy, examples/common/lm_task.h); all runs
// see the same batches.
//
// The lesson claims three things of DeepNorm (it trained a 1000-layer Transformer): it needs no warmup, its
// gradient norm stays stable, and it converges faster than Post-LN. This run tests them at N layers, and
// the summary computes each verdict from the runs:
//   - no warmup: DeepNorm did not diverge, and it ended below the task's context-free loss (what a model
//     that ignores context scores, LMTask::context_free_loss: it learned to use context);
//   - faster than Post-LN: the paired difference of the two loss curves over the whole run (an area
//     between the curves: a run that gets there sooner is lower for longer), and over the last 100 steps
//     (where each ends), both by the rule of examples/common/paired.h;
//   - a stable gradient norm: each run's global gradient norm before clipping, its median over the run and
//     its largest as a multiple of that median, DeepNorm's against Post-LN's. One run, no error bar: the
//     summary says so.
// It claims of warmup that Post-LN needs it to train stably and Pre-LN does not. The summary says whether
// each position trained (ended below the context-free loss) with and without it, what warmup changed at
// the end of each (paired, last 100 steps), and whether it did more for Post-LN than for Pre-LN: the effect
// curves e_k = (with warmup)_k - (without)_k of the two positions paired step by step.
// 1000 layers are out of reach of a CPU; the summary names the depth it ran.
//
// --seeds 42,2,7 trains every run once per seed (each seed its own weights and batches) and adds the calls
// across the seeds (examples/common/seeds.h) on each comparison where the runs end: DeepNorm against Post-LN
// and Pre-LN, each position with warmup against without, and the two warmup effects against each other;
// with counts of the seeds where DeepNorm's gradient norm was the steadier and where each run trained. Each
// seed's own sections follow. One seed writes exactly what it did before the flag existed.
//
// Output in --out: deepnorm.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

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
  Run(std::string name_, std::string position_, int64_t warmup_ = 0)
      : name(std::move(name_)), position(std::move(position_)), warmup(warmup_) {}
  std::string name, position;
  int64_t warmup = 0;  // linear warmup steps (TrainSpec::warmup); 0: the full rate from step 1
  uint64_t seed = 0;   // its weights' seed; its batches' is seed + 1
  TrainResult result;
  double final_loss = 0, fell = 0;
  double grad_median = NAN, grad_max = NAN;  // over the run's finite gradient norms
  int64_t grad_max_step = -1;
};

constexpr size_t kWindow = 100;

// The median of the finite values (NaN when there are none).
double median_finite(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return NAN;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(m), v.end());
  if (v.size() % 2 == 1) return v[m];
  return 0.5 * (v[m] + *std::max_element(v.begin(), v.begin() + std::ptrdiff_t(m)));
}

bool diverged(const Run& r) {
  return r.result.nan_step >= 0;
}

// "diverged (loss is NaN) at step 7" for a run that did, "" otherwise.
std::string diverged_text(const Run& r) {
  return !diverged(r)
             ? ""
             : r.name + " diverged (" + r.result.nan_what + ") at step " + std::to_string(r.result.nan_step);
}

// A run trained when it did not diverge and ended (the mean of its last kWindow losses) below the task's
// context-free loss `cf`: it learned to use context, not only the targets' frequencies.
bool trained(const Run& r, double cf) {
  return !diverged(r) && r.final_loss < cf;
}

// "ended at 1.89, below the context-free loss" / "ended at 3.33, not below the context-free loss" /
// "diverged (loss is NaN) at step 7".
std::string ending_text(const Run& r, double cf) {
  if (diverged(r)) return "diverged (" + r.result.nan_what + ") at step " + std::to_string(r.result.nan_step);
  return "ended at " + num(r.final_loss, 4) + (r.final_loss < cf ? ", below" : ", not below") +
         " the context-free loss";
}

// The run named `name` among one seed's runs (every config is there once).
const Run& run_named(const std::vector<Run>& runs, const std::string& name) {
  return *std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.name == name; });
}

// Warmup's effect on Post-LN against its effect on Pre-LN: the effect curves e_k = (with)_k - (without)_k of
// the two positions, paired over the last kWindow steps (negative: warmup did Post-LN the more good). Not
// computed when a run diverged.
PairedDiff warmup_effects_diff(const Run& post, const Run& post_w, const Run& pre, const Run& pre_w) {
  if (diverged(post) || diverged(post_w) || diverged(pre) || diverged(pre_w)) return PairedDiff{};
  std::vector<double> e_post, e_pre;
  for (size_t k = 0; k < post.result.losses.size(); ++k) {
    e_post.push_back(post_w.result.losses[k] - post.result.losses[k]);
    e_pre.push_back(pre_w.result.losses[k] - pre.result.losses[k]);
  }
  return paired_diff(e_post, e_pre, kWindow);
}

// The summary's three lines on the lesson's DeepNorm claims, from the runs: deep = DeepNorm, post = Post-LN
// (both without warmup), cf = the task's context-free loss.
std::string claims_text(const Run& deep, const Run& post, int64_t layers, int64_t steps, double cf) {
  std::string md;
  const std::string N = std::to_string(layers);
  // 1. no warmup
  md += "- **No warmup** (the lesson: DeepNorm trains 1000 layers without one). At " + N + " layers, ";
  if (diverged(deep))
    md += diverged_text(deep) + ": it did not train without warmup here.\n";
  else if (std::isnan(deep.fell))
    md += "one step is too few to tell whether DeepNorm trains.\n";
  else
    md += std::string("DeepNorm ") +
          (trained(deep, cf) ? "trained without warmup" : "did not learn beyond the context-free loss") +
          ": its loss fell by " + num(deep.fell, 3) + " (the first 10 steps against the last 100) and " +
          ending_text(deep, cf) +
          (diverged(post) ? ", where " + diverged_text(post)
           : std::isnan(post.fell)
               ? ""
               : "; Post-LN's fell by " + num(post.fell, 3) + " and " + ending_text(post, cf)) +
          ".\n";
  // 2. faster than Post-LN
  md += "- **Faster than Post-LN** (the lesson's claim). ";
  if (diverged(deep) || diverged(post)) {
    md += "Not compared: " + (diverged(deep) ? diverged_text(deep) : diverged_text(post)) + ".\n";
  } else {
    const size_t whole = deep.result.losses.size();
    const PairedDiff run = paired_diff(deep.result, post.result, whole);
    const PairedDiff end = paired_diff(deep.result, post.result, kWindow);
    const bool faster = run.resolved() && run.mean < 0, slower = run.resolved() && run.mean > 0;
    md += std::string("Over the whole run ") +
          (faster   ? "DeepNorm converged faster, as the lesson says: "
           : slower ? "DeepNorm converged more slowly, against the lesson: "
                    : "neither converged faster beyond this run's noise: ") +
          paired_average_text(run, deep.name, post.name) +
          ". Where they end: " + paired_text(end, deep.name, post.name) + ".\n";
  }
  // 3. gradient norm. A run that diverged has fewer norms than steps (the last one NaN): each is counted.
  const bool whole_runs = !diverged(deep) && !diverged(post);
  md += "- **A stable gradient norm** (the lesson's claim). Before clipping, over " +
        (whole_runs ? "the " + std::to_string(steps) + " steps" : std::string("the steps each ran")) + ": ";
  auto grad_text = [whole_runs](const Run& r) {
    return r.name + "'s median " + num(r.grad_median, 3) + ", largest " + num(r.grad_max, 3) + " at step " +
           std::to_string(r.grad_max_step) + " (" + num(r.grad_max / r.grad_median, 3) + "x the median" +
           (whole_runs ? std::string() : ", over " + std::to_string(r.result.grad_norms.size()) + " steps") +
           ")";
  };
  if (!std::isfinite(deep.grad_median) || !std::isfinite(post.grad_median)) {
    md += "not compared, a run has no finite gradient norm.\n";
  } else {
    const double rd = deep.grad_max / deep.grad_median, rp = post.grad_max / post.grad_median;
    md += grad_text(deep) + "; " + grad_text(post) + ". " +
          (rd < rp ? "DeepNorm's is the steadier of the two, as the lesson says"
                   : "DeepNorm's is not the steadier of the two, against the lesson") +
          " (one run each: no error bar on these two ratios).\n";
  }
  return md;
}

// The warmup section's lines, from the four runs of the two positions with and without warmup. cf = the
// task's context-free loss. The lesson: Post-LN needs warmup to train stably, Pre-LN does not.
std::string warmup_text(const Run& post, const Run& post_w, const Run& pre, const Run& pre_w, double cf) {
  std::string md;
  // What warmup changed at the end of one position: with minus without, paired over the last kWindow.
  auto change_text = [](const Run& with, const Run& without) {
    const PairedDiff d = paired_diff(with.result, without.result, kWindow);
    return std::string(!d.resolved() ? "warmup made no difference beyond this run's noise"
                       : d.mean < 0  ? "warmup helped"
                                     : "warmup hurt") +
           ": " + paired_text(d, with.name, without.name);
  };
  // 1. Post-LN needs warmup
  md += "- **Post-LN needs warmup** (the lesson). Without warmup Post-LN " + ending_text(post, cf) +
        "; with warmup it " + ending_text(post_w, cf) + ". ";
  const bool post_ok = trained(post, cf), post_w_ok = trained(post_w, cf);
  md += post_ok && post_w_ok    ? "It trained either way, so it did not need warmup here, against the lesson"
        : !post_ok && post_w_ok ? "It trained only with warmup: it needs it here, as the lesson says"
        : post_ok               ? "It trained only without warmup, against the lesson"
                                : "It trained neither way";
  md += diverged(post) || diverged(post_w) ? ".\n" : "; " + change_text(post_w, post) + ".\n";
  // 2. Pre-LN does not
  md += "- **Pre-LN does not** (the lesson). Without warmup Pre-LN " + ending_text(pre, cf) +
        "; with warmup it " + ending_text(pre_w, cf) + ". ";
  md += trained(pre, cf) ? "It trained without warmup, as the lesson says"
                         : "It did not train without warmup, against the lesson";
  md += diverged(pre) || diverged(pre_w) ? ".\n" : "; " + change_text(pre_w, pre) + ".\n";
  // 3. more for Post-LN than for Pre-LN: the effect curves paired
  if (diverged(post) || diverged(post_w) || diverged(pre) || diverged(pre_w)) {
    md += "- Warmup's effect on the two positions is not compared: a run diverged.\n";
    return md;
  }
  const PairedDiff d = warmup_effects_diff(post, post_w, pre, pre_w);
  if (!d.computed()) return md;
  md +=
      "- **Which needs it more.** Warmup's effect (with minus without) on Post-LN minus its effect on "
      "Pre-LN is " +
      num(d.mean, 3) + " ± " + num(d.se, 2) + " (the effect curves paired over the last " +
      std::to_string(d.steps) + " steps: " + standard_errors_text(d.mean, d.se) + " standard errors): " +
      (!d.resolved() ? "warmup did about as much for each, against the lesson"
       : d.mean < 0  ? "warmup did Post-LN more good (or less harm) than Pre-LN, as the lesson says"
                     : "warmup did Pre-LN more good (or less harm) than Post-LN, against the lesson") +
      ".\n";
  return md;
}

// The summary's lines across the seeds (--seeds), from by_seed[s][i] (config i, seeds[s]): the calls of
// examples/common/seeds.h on each comparison's per-seed paired difference at the end (a seed where either run
// diverged gives none), and the counts the rules need no assumption for.
std::string across_seeds_text(const std::vector<std::vector<Run>>& by_seed, double cf, bool warmup_runs) {
  const size_t n = by_seed.size();
  auto find = [&by_seed](size_t si, const std::string& name) -> const Run& {
    return run_named(by_seed[si], name);
  };
  auto end_diff = [&](size_t si, const std::string& a, const std::string& b) {
    const Run &ra = find(si, a), &rb = find(si, b);
    return diverged(ra) || diverged(rb) ? PairedDiff{} : paired_diff(ra.result, rb.result, kWindow);
  };
  auto call = [&](const std::string& a, const std::string& b) {
    std::vector<PairedDiff> per_seed;
    for (size_t si = 0; si < n; ++si) per_seed.push_back(end_diff(si, a, b));
    return seed_text(seed_spread(per_seed), a, b);
  };
  const std::string of_n = " of " + std::to_string(n) + " seeds";
  std::string md;
  md += "- **DeepNorm against Post-LN**, where they end: " + call("DeepNorm", "Post-LN") + ".\n";
  // the gradient norm: in how many seeds DeepNorm's largest is the smaller multiple of its median
  size_t steadier = 0;
  std::string deep_ratios, post_ratios;
  for (size_t si = 0; si < n; ++si) {
    const Run &deep = find(si, "DeepNorm"), &post = find(si, "Post-LN");
    const double rd = deep.grad_max / deep.grad_median, rp = post.grad_max / post.grad_median;
    steadier += rd < rp;
    deep_ratios += (si ? ", " : "") + num(rd, 3) + "x";
    post_ratios += (si ? ", " : "") + num(rp, 3) + "x";
  }
  md +=
      "- **The gradient norm**: DeepNorm's is the steadier of the two (its largest the smaller multiple of "
      "its median) in " +
      std::to_string(steadier) + of_n + " (DeepNorm " + deep_ratios + "; Post-LN " + post_ratios + ").\n";
  md += "- **DeepNorm against Pre-LN**, where they end: " + call("DeepNorm", "Pre-LN") + ".\n";
  // trained: ended below the context-free loss
  auto trained_count = [&](const std::string& name) {
    size_t k = 0;
    for (size_t si = 0; si < n; ++si) k += trained(find(si, name), cf);
    return name + " in " + std::to_string(k) + of_n;
  };
  md += "- **Trained** (ended below the context-free loss): " + trained_count("Post-LN") + ", " +
        trained_count("DeepNorm") + ", " + trained_count("Pre-LN") +
        (warmup_runs ? ", " + trained_count("Post-LN + warmup") + ", " + trained_count("Pre-LN + warmup")
                     : "") +
        ".\n";
  if (!warmup_runs) return md;
  md += "- **Warmup on Post-LN**: " + call("Post-LN + warmup", "Post-LN") + ".\n";
  md += "- **Warmup on Pre-LN**: " + call("Pre-LN + warmup", "Pre-LN") + ".\n";
  // which needs it more: the effect curves (with minus without) of the two positions paired, per seed
  std::vector<PairedDiff> per_seed;
  for (size_t si = 0; si < n; ++si)
    per_seed.push_back(warmup_effects_diff(find(si, "Post-LN"), find(si, "Post-LN + warmup"),
                                           find(si, "Pre-LN"), find(si, "Pre-LN + warmup")));
  md += "- **Which needs warmup more** (each position's end with warmup minus without, the two paired): " +
        seed_text(seed_spread(per_seed), "Post-LN's warmup effect", "Pre-LN's warmup effect") +
        " (lower: warmup did that position more good or less harm).\n";
  return md;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{
      "Experiment 4: DeepNorm vs Post-LN (and Pre-LN) at N layers, one learning rate, clip 1.0; Post-LN and "
      "Pre-LN also with a warmup."};
  CommonOptions opt;
  add_common_flags(app, opt);
  std::string task_flag;
  add_seeds_flag(app, opt);
  add_task_flag(app, task_flag);
  int64_t layers = 0, warmup = -1;
  double lr = 1e-3, clip = 1.0;
  app.add_option("--layers", layers, "depth of every model (default 24; --quick 12)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--lr", lr, "the one learning rate of all the runs (exp3's Pre-LN rate)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  add_clip_flag(app, clip, "clip_grad_norm's max norm; 0 for none");
  app.add_option("--warmup", warmup,
                 "linear warmup steps of the runs \"Post-LN + warmup\" and \"Pre-LN + warmup\", fewer than "
                 "--steps (default a tenth of the steps); 0 leaves those two runs out")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  const std::string no_checkpoint = "experiment 4 keeps no checkpoint; exp2 and exp3 do";
  mark_flags_unused(app, {"--save", "--resume"}, no_checkpoint);
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  note_unused_flags(app, {"--save", "--resume"}, no_checkpoint);
  const int64_t steps = opt.steps_or(500, 150);
  if (warmup < 0) {
    warmup = std::max<int64_t>(steps / 10, 1);
  } else if (!warmup_fits(warmup, steps)) {
    return 2;
  }
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "deepnorm", argc, argv);
  if (layers == 0) layers = opt.quick ? 12 : 24;
  const int64_t dim = 64, seq = opt.quick ? 32 : 64;
  const double cf = task.context_free_loss();

  std::vector<Run> configs = {{"Post-LN", "post"}, {"DeepNorm", "deepnorm"}, {"Pre-LN", "pre"}};
  if (warmup > 0) {
    configs.insert(configs.begin() + 1, Run{"Post-LN + warmup", "post", warmup});
    configs.push_back(Run{"Pre-LN + warmup", "pre", warmup});
  }
  const std::vector<uint64_t>& seeds = opt.seeds;
  const bool many = seeds.size() > 1;
  const std::string seed_words = many ? "seeds " + seed_list_text(seeds) : "seed " + std::to_string(opt.seed);
  const std::string clip_text = clip > 0 ? "clip " + num(clip) : "no clipping";
  std::printf(
      "Task %s (vocab %lld), %lld layers, hidden %lld, seq %lld, batch 16, %lld steps, Adam lr %s, %s, "
      "warmup %lld steps (the + warmup runs), %s\n",
      task.name.c_str(), (long long)task.vocab, (long long)layers, (long long)dim, (long long)seq,
      (long long)steps, num(lr).c_str(), clip_text.c_str(), (long long)warmup, seed_words.c_str());
  // by_seed[s][i]: config i trained with seeds[s] (its weights from seeds[s], its batches from seeds[s] + 1)
  std::vector<std::vector<Run>> by_seed(seeds.size(), configs);
  for (size_t si = 0; si < seeds.size(); ++si) {
    if (many) std::printf("seed %llu\n", (unsigned long long)seeds[si]);
    for (Run& r : by_seed[si]) {
      r.seed = seeds[si];
      nn::TinyLMConfig c;
      c.dim = dim;
      c.n_layers = layers;
      c.n_heads = 4;
      c.ffn = "mlp";
      c.norm = "layernorm";
      c.norm_position = r.position;  // the final norm: Pre-LN only (TinyLMConfig's default)
      c.seed = r.seed;
      c.max_seq_len = seq;
      nn::TinyLM model(task.configure(c));
      TrainSpec spec;
      spec.label = r.name;
      spec.lr = lr;
      spec.warmup = r.warmup;
      spec.steps = steps;
      spec.seq = seq;
      spec.clip = clip;
      spec.data_seed = r.seed + 1;
      r.result = train_lm(model, task, spec, opt.quiet);
      const std::vector<double>& l = r.result.losses;
      r.final_loss = mean_last(l, kWindow);
      const auto [first, last] = head_tail_means(l, 10, kWindow);
      r.fell = first - last;
      const std::vector<double>& g = r.result.grad_norms;
      r.grad_median = median_finite(g);
      for (size_t k = 0; k < g.size(); ++k)
        if (std::isfinite(g[k]) && !(g[k] <= r.grad_max)) r.grad_max = g[k], r.grad_max_step = int64_t(k) + 1;
      std::printf("  %-16s %6.1f s  final %.4f  fell %.4f  grad norm median %.3g max %.3g%s\n",
                  r.name.c_str(), r.result.seconds, r.final_loss, r.fell, r.grad_median, r.grad_max,
                  diverged(r) ? ("  NaN at step " + std::to_string(r.result.nan_step)).c_str() : "");
    }
  }
  // The run of config `name` with seeds[si].
  auto find = [&by_seed](size_t si, const std::string& name) -> const Run& {
    return run_named(by_seed[si], name);
  };
  // A run's name in the figure and the tables: with several seeds, "Post-LN seed 2".
  auto label_of = [many](const Run& r) { return many ? r.name + " seed " + std::to_string(r.seed) : r.name; };

  // ---- figure: loss curves, gradient norms, final losses, gradient-norm summary ----
  // A position's warmup run has its color, dashed; with several seeds the first seed's curves are the
  // legend's, the others thin.
  auto color_of = [](const Run& r) {
    return plot::palette(r.position == "post" ? 0 : r.position == "deepnorm" ? 1 : 2);
  };
  auto curve_panel = [&](const std::string& title, const std::string& ylabel, auto values) {
    plot::LineChart c;
    c.title = title;
    c.xlabel = "step";
    c.ylabel = ylabel;
    c.yscale = plot::Scale::Log;
    for (size_t si = 0; si < seeds.size(); ++si)
      for (const Run& r : by_seed[si]) {
        const std::vector<double>& v = values(r);
        plot::Series s;
        s.label = label_of(r);
        s.color = color_of(r);
        s.dashed = r.warmup > 0;
        if (si > 0) s.width = 1.0f, s.in_legend = false;
        // Every step is a point; the one that diverged is kept as NaN (a gap in the plot, "nan" in the CSV).
        for (size_t k = 0; k < v.size(); ++k) {
          s.x.push_back(double(k + 1));
          s.y.push_back(std::isfinite(v[k]) && v[k] > 0 ? v[k] : NAN);
        }
        c.series.push_back(s);
        if (diverged(r))
          c.vlines.push_back(
              {double(r.result.nan_step), label_of(r) + " NaN at step " + std::to_string(r.result.nan_step)});
      }
    if (many) {
      const std::vector<uint64_t> others(seeds.begin() + 1, seeds.end());
      c.legend_keys.push_back(
          {(others.size() == 1 ? "seed " : "seeds ") + seed_list_text(others) + ": thin lines",
           plot::colors::gray});
    }
    if (warmup > 0) c.vlines.push_back({double(warmup), "warmup ends", plot::colors::gray});
    return c;
  };
  plot::LineChart loss =
      curve_panel("Training loss", "loss (log)",
                  [](const Run& r) -> const std::vector<double>& { return r.result.losses; });
  // A uniform guess over the vocabulary scores ln(V); it also keeps the y range defined when every run
  // diverged at its first step. For the copy task the context-free loss is the same line.
  loss.hlines.push_back(
      {std::log(double(task.vocab)),
       "uniform guess: ln " + std::to_string(task.vocab) + " = " + num(std::log(double(task.vocab)), 3),
       plot::colors::gray});
  if (task.name != "copy") loss.hlines.push_back({cf, "context-free loss " + num(cf, 3), plot::colors::gray});
  plot::LineChart grads =
      curve_panel("Gradient norm before clipping", "global L2 norm (log)",
                  [](const Run& r) -> const std::vector<double>& { return r.result.grad_norms; });
  if (clip > 0) grads.hlines.push_back({clip, "clip at " + num(clip), plot::colors::gray});
  // The bars: each config's figure, the mean over the seeds (the value itself with one seed).
  const std::string over_seeds = many ? ", mean of " + std::to_string(seeds.size()) + " seeds" : "";
  plot::BarChart finals;
  finals.title = "Final loss (mean of last " + std::to_string(kWindow) + ")" + over_seeds;
  plot::BarChart spread;
  spread.title = "Gradient norm: median, and largest / median" + over_seeds;
  std::vector<double> final_values, medians, ratios;
  for (size_t i = 0; i < configs.size(); ++i) {
    double f = 0, m = 0, q = 0;
    for (const std::vector<Run>& rs : by_seed)
      f += rs[i].final_loss, m += rs[i].grad_median, q += rs[i].grad_max / rs[i].grad_median;
    const double n = double(seeds.size());
    finals.categories.push_back(configs[i].name);
    final_values.push_back(f / n);
    medians.push_back(m / n);
    ratios.push_back(q / n);
  }
  finals.groups = {{"final loss", final_values, plot::palette(0)}};
  spread.categories = finals.categories;
  spread.groups = {{"median", medians, plot::palette(0)}, {"largest / median", ratios, plot::palette(1)}};
  plot::Figure fig;
  fig.title = "Experiment 4: DeepNorm vs Post-LN vs Pre-LN, " + std::to_string(layers) + " layers, " +
              task.name + ", hidden " + std::to_string(dim) + ", " + std::to_string(steps) + " steps, lr " +
              num(lr) + ", " + clip_text + (warmup > 0 ? ", warmup " + std::to_string(warmup) : "") + ", " +
              seed_words;
  fig.cols = 2;
  fig.panels = {loss, grads, finals, spread};
  const std::string png = report.add_figure(fig);

  // ---- summary ----
  std::vector<std::vector<std::string>> rows;
  for (const std::vector<Run>& rs : by_seed)
    for (const Run& r : rs) {
      std::vector<std::string> row = {r.name,
                                      r.warmup > 0 ? std::to_string(r.warmup) : "-",
                                      diverged(r) ? std::to_string(r.result.nan_step) : "-",
                                      num(r.final_loss, 4),
                                      num(r.fell, 4),
                                      num(r.grad_median, 4),
                                      num(r.grad_max, 4),
                                      r.grad_max_step > 0 ? std::to_string(r.grad_max_step) : "-",
                                      num(r.result.seconds, 3)};
      if (many) row.insert(row.begin() + 1, std::to_string(r.seed));
      rows.push_back(row);
    }
  std::vector<std::string> header = {
      "run",          "warmup",           "NaN step",          "final loss (last 100)",
      "loss fell by", "grad norm median", "grad norm largest", "at step",
      "seconds"};
  if (many) header.insert(header.begin() + 1, "seed");
  const nn::BlockConfig depth = [&] {
    nn::BlockConfig b;
    b.n_layers = layers;
    return b;
  }();
  const std::string all = configs.size() == 3 ? "all three" : "all five";
  std::string md = "# Experiment 4: DeepNorm vs Post-LN\n\n";
  md += "Task `" + task.name + "`, TinyLM " + std::to_string(layers) + " layers, hidden " +
        std::to_string(dim) + ", 4 heads, 4x ReLU FFN, LayerNorm; Adam lr " + num(lr) + " for " + all +
        ", batch 16, seq " + std::to_string(seq) + ", " + std::to_string(steps) + " steps, " + clip_text +
        ", " + seed_words + (many ? " (every run once per seed)" : "") +
        ". DeepNorm's alpha = (2N)^(1/4) = " + num(depth.deepnorm_alpha(), 4) +
        " and beta = (8N)^(-1/4) = " + num(depth.deepnorm_beta(), 4) + " at N = " + std::to_string(layers) +
        ". " +
        (warmup > 0 ? "The two warmup runs ramp the rate linearly over the first " + std::to_string(warmup) +
                          " steps (step s at lr * s / " + std::to_string(warmup) +
                          "), then hold it; the others start at lr."
                    : std::string("No run has a warmup (--warmup 0).")) +
        "\n\n";
  md += "The context-free loss, " + num(cf, 4) + ", is what the best model that ignores context scores (" +
        (task.name == "copy"
             ? std::string("ln ") + std::to_string(task.vocab) + ": the targets are uniform"
             : std::string("the entropy of the training text's bytes: letter frequencies alone")) +
        "). A run that ends below it has learned to use its context.\n\n";
  if (opt.quick)
    md +=
        "**--quick**: shorter windows than the full run (seq 32 instead of 64) and, unless --layers and "
        "--steps say otherwise, a shallower model and fewer steps (12 layers and 150 steps instead of 24 and "
        "500), so the runs fit in under a minute on 2 cores. Numbers are not comparable with a full run.\n\n";
  md += md_table(header, rows);
  md +=
      "\n" +
      paired_rule_text(many ? "Two runs of one seed" : "Two runs", many ? all + " of a seed" : all, kWindow) +
      "\n";
  if (many) md += "\n" + seed_rule_text(seeds) + "\n";
  // One seed's sections: the lesson's DeepNorm claims, DeepNorm against Pre-LN, warmup. `h`: their heading
  // level ("##" for a single seed's summary, "###" under a seed's own heading).
  auto seed_sections = [&](size_t si, const std::string& h) {
    std::string t = "\n" + h + " The lesson's claims at " + std::to_string(layers) + " layers\n\n";
    t += claims_text(find(si, "DeepNorm"), find(si, "Post-LN"), layers, steps, cf);
    t += "- The lesson's 1000 layers are not run here: this run has " + std::to_string(layers) + ".\n";
    t += "\n" + h + " Against Pre-LN\n\n- ";
    const Run &deep = find(si, "DeepNorm"), &pre = find(si, "Pre-LN");
    if (diverged(deep) || diverged(pre))
      t += "Not compared: " + (diverged(deep) ? diverged_text(deep) : diverged_text(pre)) + ".\n";
    else
      t += paired_text(paired_diff(pre.result, deep.result, kWindow), pre.name, deep.name) + ".\n";
    if (warmup > 0) {
      t += "\n" + h + " Warmup at " + std::to_string(layers) + " layers\n\n";
      t += warmup_text(find(si, "Post-LN"), find(si, "Post-LN + warmup"), pre, find(si, "Pre-LN + warmup"),
                       cf);
    }
    return t;
  };
  if (!many) {
    md += seed_sections(0, "##");
  } else {
    md += "\n## Across the seeds\n\n" + across_seeds_text(by_seed, cf, warmup > 0);
    for (size_t si = 0; si < seeds.size(); ++si)
      md += "\n## Seed " + std::to_string(seeds[si]) + "\n" + seed_sections(si, "###");
  }
  report.write_all(md);
  std::printf("\nWrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
