// Experiment 4: DeepNorm against Post-LN (and Pre-LN) in a deep stack.
//
//   Post-LN   x = LN(x + f(x))                       the 2017 Transformer
//   DeepNorm  x = LN(alpha x + f(x)), alpha = (2N)^(1/4), with the value, output and FFN matrices drawn
//             scaled by beta = (8N)^(-1/4)          (DeepNet, Wang et al. 2022; nn/block.h)
//   Pre-LN    x = x + f(LN(x)), and a final LN       the control: the position exp3 recommends
//
// All three at N layers (--layers, default 24), with one learning rate (--lr, default 1e-3: Pre-LN's rate in
// exp3), no warmup, Adam, clip_grad_norm 1.0 (--clip 0: none), batch 16, hidden 64, 4 heads. Full run:
// seq 64, 500 steps (about 6 minutes on 2 cores); --quick: 12 layers, seq 32, 150 steps (under half a
// minute).
// Same task choice as experiments 2 and 3 (--task shakespeare | copy, examples/common/lm_task.h); the three
// runs see the same batches.
//
// The lesson claims three things of DeepNorm (it trained a 1000-layer Transformer): it needs no warmup, its
// gradient norm stays stable, and it converges faster than Post-LN. This run tests them at N layers, and
// the summary computes each verdict from the runs:
//   - no warmup: DeepNorm did not diverge, and its loss fell (the first 10 steps against the last 100);
//   - faster than Post-LN: the paired difference of the two loss curves over the whole run (an area
//     between the curves: a run that gets there sooner is lower for longer), and over the last 100 steps
//     (where each ends), both by the rule of examples/common/paired.h;
//   - a stable gradient norm: each run's global gradient norm before clipping, its median over the run and
//     its largest as a multiple of that median, DeepNorm's against Post-LN's. One run, no error bar: the
//     summary says so.
// 1000 layers are out of reach of a CPU; the summary names the depth it ran.
//
// Output in --out: deepnorm.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <cmath>
#include <cstdio>

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

// "diverged (loss is NaN) at step 7" for a run that did, "" otherwise.
std::string diverged_text(const Run& r) {
  return r.result.nan_step < 0
             ? ""
             : r.name + " diverged (" + r.result.nan_what + ") at step " + std::to_string(r.result.nan_step);
}

// The summary's three lines on the lesson's claims, from the runs: deep = DeepNorm, post = Post-LN.
std::string claims_text(const Run& deep, const Run& post, int64_t layers, int64_t steps) {
  std::string md;
  const std::string N = std::to_string(layers);
  // 1. no warmup
  md += "- **No warmup** (the lesson: DeepNorm trains 1000 layers without one). At " + N + " layers, ";
  if (deep.result.nan_step >= 0)
    md += diverged_text(deep) + ": it did not train without warmup here.\n";
  else if (std::isnan(deep.fell))
    md += "one step is too few to tell whether DeepNorm trains.\n";
  else
    md += std::string("DeepNorm ") + (deep.fell > 0 ? "trained without warmup" : "did not learn") +
          ": its loss fell by " + num(deep.fell, 3) + " (the first 10 steps against the last 100)" +
          (post.result.nan_step >= 0 ? ", where " + diverged_text(post)
           : std::isnan(post.fell)   ? ""
                                     : ", Post-LN's by " + num(post.fell, 3)) +
          ".\n";
  // 2. faster than Post-LN
  md += "- **Faster than Post-LN** (the lesson's claim). ";
  if (deep.result.nan_step >= 0 || post.result.nan_step >= 0) {
    md += "Not compared: " + (deep.result.nan_step >= 0 ? diverged_text(deep) : diverged_text(post)) + ".\n";
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
  // 3. gradient norm
  md += "- **A stable gradient norm** (the lesson's claim). Before clipping, over the " +
        std::to_string(steps) + " steps: ";
  auto grad_text = [](const Run& r) {
    return r.name + "'s median " + num(r.grad_median, 3) + ", largest " + num(r.grad_max, 3) + " at step " +
           std::to_string(r.grad_max_step) + " (" + num(r.grad_max / r.grad_median, 3) + "x the median)";
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

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{
      "Experiment 4: DeepNorm vs Post-LN (and Pre-LN) at N layers, one learning rate, no warmup, clip 1.0."};
  CommonOptions opt;
  add_common_flags(app, opt);
  std::string task_flag;
  add_task_flag(app, task_flag);
  int64_t layers = 0;
  double lr = 1e-3, clip = 1.0;
  app.add_option("--layers", layers, "depth of every model (default 24; --quick 12)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--lr", lr, "the one learning rate of all three runs (exp3's Pre-LN rate)")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  app.add_option("--clip", clip, "clip_grad_norm's max norm; 0 for none")
      ->check(FiniteRange(0.0, 1e12))
      ->capture_default_str();
  const std::string no_checkpoint = "experiment 4 keeps no checkpoint; exp2 and exp3 do";
  mark_flags_unused(app, {"--save", "--resume"}, no_checkpoint);
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  note_unused_flags(app, {"--save", "--resume"}, no_checkpoint);
  LMTask task;
  if (!choose_task(task_flag, opt, task)) return 2;
  Report report(opt, "deepnorm", argc, argv);
  const int64_t steps = opt.steps_or(500, 150);
  if (layers == 0) layers = opt.quick ? 12 : 24;
  const int64_t dim = 64, seq = opt.quick ? 32 : 64;

  std::vector<Run> runs = {{"Post-LN", "post", {}}, {"DeepNorm", "deepnorm", {}}, {"Pre-LN", "pre", {}}};
  const std::string clip_text = clip > 0 ? "clip " + num(clip) : "no clipping";
  std::printf(
      "Task %s (vocab %lld), %lld layers, hidden %lld, seq %lld, batch 16, %lld steps, Adam lr %s, %s, "
      "seed %llu\n",
      task.name.c_str(), (long long)task.vocab, (long long)layers, (long long)dim, (long long)seq,
      (long long)steps, num(lr).c_str(), clip_text.c_str(), (unsigned long long)opt.seed);
  for (Run& r : runs) {
    nn::TinyLMConfig c;
    c.dim = dim;
    c.n_layers = layers;
    c.n_heads = 4;
    c.ffn = "mlp";
    c.norm = "layernorm";
    c.norm_position = r.position;  // the final norm: Pre-LN only (TinyLMConfig's default)
    c.seed = opt.seed;
    c.max_seq_len = seq;
    nn::TinyLM model(task.configure(c));
    TrainSpec spec;
    spec.label = r.name;
    spec.lr = lr;
    spec.steps = steps;
    spec.seq = seq;
    spec.clip = clip;
    spec.data_seed = opt.seed + 1;
    r.result = train_lm(model, task, spec, opt.quiet);
    const std::vector<double>& l = r.result.losses;
    r.final_loss = mean_last(l, kWindow);
    const auto [first, last] = head_tail_means(l, 10, kWindow);
    r.fell = first - last;
    const std::vector<double>& g = r.result.grad_norms;
    r.grad_median = median_finite(g);
    for (size_t k = 0; k < g.size(); ++k)
      if (std::isfinite(g[k]) && !(g[k] <= r.grad_max)) r.grad_max = g[k], r.grad_max_step = int64_t(k) + 1;
    std::printf("  %-8s %6.1f s  final %.4f  fell %.4f  grad norm median %.3g max %.3g%s\n", r.name.c_str(),
                r.result.seconds, r.final_loss, r.fell, r.grad_median, r.grad_max,
                r.result.nan_step >= 0 ? ("  NaN at step " + std::to_string(r.result.nan_step)).c_str() : "");
  }

  // ---- figure: loss curves, gradient norms, final losses, gradient-norm summary ----
  auto curve_panel = [&](const std::string& title, const std::string& ylabel, auto values) {
    plot::LineChart c;
    c.title = title;
    c.xlabel = "step";
    c.ylabel = ylabel;
    c.yscale = plot::Scale::Log;
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      const std::vector<double>& v = values(r);
      plot::Series s;
      s.label = r.name;
      s.color = plot::palette(int(i));
      // Every step is a point; the one that diverged is kept as NaN (a gap in the plot, "nan" in the CSV).
      for (size_t k = 0; k < v.size(); ++k) {
        s.x.push_back(double(k + 1));
        s.y.push_back(std::isfinite(v[k]) && v[k] > 0 ? v[k] : NAN);
      }
      c.series.push_back(s);
      if (r.result.nan_step >= 0)
        c.vlines.push_back(
            {double(r.result.nan_step), r.name + " NaN at step " + std::to_string(r.result.nan_step)});
    }
    return c;
  };
  plot::LineChart loss =
      curve_panel("Training loss", "loss (log)",
                  [](const Run& r) -> const std::vector<double>& { return r.result.losses; });
  // A uniform guess over the vocabulary scores ln(V); it also keeps the y range defined when every run
  // diverged at its first step.
  loss.hlines.push_back(
      {std::log(double(task.vocab)),
       "uniform guess: ln " + std::to_string(task.vocab) + " = " + num(std::log(double(task.vocab)), 3),
       plot::colors::gray});
  plot::LineChart grads =
      curve_panel("Gradient norm before clipping", "global L2 norm (log)",
                  [](const Run& r) -> const std::vector<double>& { return r.result.grad_norms; });
  if (clip > 0) grads.hlines.push_back({clip, "clip at " + num(clip), plot::colors::gray});
  plot::BarChart finals;
  finals.title = "Final loss (mean of last " + std::to_string(kWindow) + ")";
  finals.categories = {"Post-LN", "DeepNorm", "Pre-LN"};
  finals.groups = {
      {"final loss", {runs[0].final_loss, runs[1].final_loss, runs[2].final_loss}, plot::palette(0)}};
  plot::BarChart spread;
  spread.title = "Gradient norm: median, and largest / median";
  spread.categories = finals.categories;
  spread.groups = {
      {"median", {runs[0].grad_median, runs[1].grad_median, runs[2].grad_median}, plot::palette(0)},
      {"largest / median",
       {runs[0].grad_max / runs[0].grad_median, runs[1].grad_max / runs[1].grad_median,
        runs[2].grad_max / runs[2].grad_median},
       plot::palette(1)}};
  plot::Figure fig;
  fig.title = "Experiment 4: DeepNorm vs Post-LN vs Pre-LN, " + std::to_string(layers) + " layers, " +
              task.name + ", hidden " + std::to_string(dim) + ", " + std::to_string(steps) + " steps, lr " +
              num(lr) + ", " + clip_text + ", seed " + std::to_string(opt.seed);
  fig.cols = 2;
  fig.panels = {loss, grads, finals, spread};
  const std::string png = report.add_figure(fig);

  // ---- summary ----
  std::vector<std::vector<std::string>> rows;
  for (const Run& r : runs)
    rows.push_back({r.name, r.result.nan_step >= 0 ? std::to_string(r.result.nan_step) : "-",
                    num(r.final_loss, 4), num(r.fell, 4), num(r.grad_median, 4), num(r.grad_max, 4),
                    r.grad_max_step > 0 ? std::to_string(r.grad_max_step) : "-", num(r.result.seconds, 3)});
  const nn::BlockConfig depth = [&] {
    nn::BlockConfig b;
    b.n_layers = layers;
    return b;
  }();
  std::string md = "# Experiment 4: DeepNorm vs Post-LN\n\n";
  md += "Task `" + task.name + "`, TinyLM " + std::to_string(layers) + " layers, hidden " +
        std::to_string(dim) + ", 4 heads, 4x ReLU FFN, LayerNorm; Adam lr " + num(lr) +
        " for all three, no warmup, batch 16, seq " + std::to_string(seq) + ", " + std::to_string(steps) +
        " steps, " + clip_text + ", seed " + std::to_string(opt.seed) +
        ". DeepNorm's alpha = (2N)^(1/4) = " + num(depth.deepnorm_alpha(), 4) +
        " and beta = (8N)^(-1/4) = " + num(depth.deepnorm_beta(), 4) + " at N = " + std::to_string(layers) +
        ".\n\n";
  if (opt.quick)
    md +=
        "**--quick**: a shallower model on shorter windows than the full run (12 layers and seq 32 instead "
        "of 24 and 64), and 150 steps, so the three runs fit in half a minute on 2 cores. Numbers are not "
        "comparable with a full run.\n\n";
  md += md_table({"run", "NaN step", "final loss (last 100)", "loss fell by", "grad norm median",
                  "grad norm largest", "at step", "seconds"},
                 rows);
  md += "\n" + paired_rule_text("Two runs", "all three", kWindow) + "\n";
  md += "\n## The lesson's claims at " + std::to_string(layers) + " layers\n\n";
  md += claims_text(runs[1], runs[0], layers, steps);
  md += "- The lesson's 1000 layers are not run here: this run has " + std::to_string(layers) + ".\n";
  md += "\n## Against Pre-LN\n\n- ";
  if (runs[1].result.nan_step >= 0 || runs[2].result.nan_step >= 0)
    md +=
        "Not compared: " + (runs[1].result.nan_step >= 0 ? diverged_text(runs[1]) : diverged_text(runs[2])) +
        ".\n";
  else
    md +=
        paired_text(paired_diff(runs[2].result, runs[1].result, kWindow), runs[2].name, runs[1].name) + ".\n";
  report.write_all(md);
  std::printf("\nWrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
