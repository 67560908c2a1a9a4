// Experiment 4 (examples/exp4_deepnorm.cpp) end to end: its summary's verdicts on the lesson's DeepNorm
// and warmup claims are the rules applied to the curves its CSV holds, and its own flags are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "examples/common/seeds.h"
#include "tests/examples_test_util.h"

using namespace ng::examples;

#ifdef NG_EXP4_DEEPNORM_PATH
namespace {

const std::string kExp4 = std::string(NG_EXP4_DEEPNORM_PATH);

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The line series of exactly this name in `panel`. extest::curve_of takes the series whose name starts with
// its argument: "Post-LN" would also take "Post-LN + warmup" and "Post-LN seed 2".
std::vector<double> curve_named(const std::vector<extest::CsvRow>& rows, const std::string& panel,
                                const std::string& name) {
  std::vector<double> values;
  for (const extest::CsvRow& row : extest::select(rows, "line", name, panel))
    if (row.series == name) values.push_back(std::stod(row.y));
  return values;
}

}  // namespace

// Five 2-layer models on the copy task (--quick: hidden 64, seq 32): Post-LN and Pre-LN with and without
// a warmup of 30 steps, and DeepNorm. 120 steps, so that the whole run (120 steps) and its end (the last
// 100) are two windows; under the sanitizers 12 steps with a warmup of 5, enough for the paired rule (10
// blocks of 1 step), where both windows are the last 10.
TEST(Exp4DeepNorm, SummaryIsComputedFromItsOwnCurves) {
  const size_t steps = extest::kSanitized ? 12 : 120, warmup = extest::kSanitized ? 5 : 30;
  const extest::fs::path dir = extest::temp_dir("exp4");
  const extest::RunResult r =
      extest::run(kExp4 + " --task copy --quick --layers 2 --threads 1 --quiet --steps " +
                      std::to_string(steps) + " --warmup " + std::to_string(warmup) +
                      " --save ignored.safetensors --out " + (dir / "run").string(),
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(r.err, "--save does not apply to this experiment")) << r.err;
  EXPECT_FALSE(extest::fs::exists(dir / "ignored.safetensors"));
  for (const char* ext : {".png", ".csv", ".md", ".cmd.txt"})
    EXPECT_TRUE(extest::fs::exists(dir / "run" / (std::string("deepnorm") + ext))) << ext;
  const auto rows = extest::read_csv(dir / "run" / "deepnorm.csv");
  const std::string md = extest::slurp(dir / "run" / "deepnorm.md");

  const std::vector<std::string> names = {"Post-LN", "Post-LN + warmup", "DeepNorm", "Pre-LN",
                                          "Pre-LN + warmup"};
  std::vector<std::vector<double>> loss, grad;
  for (const std::string& name : names) {
    loss.push_back(curve_named(rows, "Training loss", name));
    grad.push_back(curve_named(rows, "Gradient norm before clipping", name));
    ASSERT_EQ(loss.back().size(), steps) << name;
    ASSERT_EQ(grad.back().size(), steps) << name;
    for (double g : grad.back()) EXPECT_TRUE(std::isfinite(g) && g > 0) << name << ": " << g;
  }
  const auto &post = loss[0], &post_w = loss[1], &deep = loss[2], &pre = loss[3], &pre_w = loss[4];
  // The copy task's targets are uniform: the context-free loss is ln 1000.
  const double cf = std::log(1000.0);
  EXPECT_TRUE(extest::contains(md, "The context-free loss, " + num(cf, 4) + ", is what the best model"))
      << md;
  auto ending = [&](const std::vector<double>& l) {
    const double f = mean_last(l, 100);
    return "ended at " + num(f, 4) + (f < cf ? ", below" : ", not below") + " the context-free loss";
  };
  // alpha and beta at N = 2
  EXPECT_TRUE(extest::contains(md, "alpha = (2N)^(1/4) = 1.414 and beta = (8N)^(-1/4) = 0.5 at N = 2")) << md;
  // no warmup: whether DeepNorm trained (ended below the context-free loss), how far its loss fell, beside
  // Post-LN's
  const auto [d0, d1] = head_tail_means(deep, 10, 100);
  const auto [p0, p1] = head_tail_means(post, 10, 100);
  EXPECT_TRUE(extest::contains(
      md, std::string("DeepNorm ") +
              (mean_last(deep, 100) < cf ? "trained without warmup"
                                         : "did not learn beyond the context-free loss") +
              ": its loss fell by " + num(d0 - d1, 3) + " (the first 10 steps against the last 100) and " +
              ending(deep) + "; Post-LN's fell by " + num(p0 - p1, 3) + " and " + ending(post) + ".\n"))
      << md;
  // faster than Post-LN: the whole run and its end
  const PairedDiff run = paired_diff(deep, post, steps), end = paired_diff(deep, post, 100);
  ASSERT_TRUE(run.computed());
  const std::string verdict =
      run.resolved() && run.mean < 0   ? "DeepNorm converged faster, as the lesson says: "
      : run.resolved() && run.mean > 0 ? "DeepNorm converged more slowly, against the lesson: "
                                       : "neither converged faster beyond this run's noise: ";
  EXPECT_TRUE(
      extest::contains(md, "Over the whole run " + verdict + paired_average_text(run, "DeepNorm", "Post-LN") +
                               ". Where they end: " + paired_text(end, "DeepNorm", "Post-LN") + ".\n"))
      << md;
  // gradient norms: medians and largest / median, from the CSV's curves
  auto grad_text = [&](size_t i) {
    const std::vector<double>& g = grad[i];
    const auto at = std::max_element(g.begin(), g.end());
    const double median = median_of(g);
    return names[i] + "'s median " + num(median, 3) + ", largest " + num(*at, 3) + " at step " +
           std::to_string(at - g.begin() + 1) + " (" + num(*at / median, 3) + "x the median)";
  };
  const double ratio_deep = *std::max_element(grad[2].begin(), grad[2].end()) / median_of(grad[2]);
  const double ratio_post = *std::max_element(grad[0].begin(), grad[0].end()) / median_of(grad[0]);
  EXPECT_TRUE(extest::contains(
      md, "over the " + std::to_string(steps) + " steps: " + grad_text(2) + "; " + grad_text(0) + ". " +
              (ratio_deep < ratio_post ? "DeepNorm's is the steadier of the two, as"
                                       : "DeepNorm's is not the steadier of the two, against")))
      << md;
  // against Pre-LN
  EXPECT_TRUE(extest::contains(
      md, "## Against Pre-LN\n\n- " + paired_text(paired_diff(pre, deep, 100), "Pre-LN", "DeepNorm")))
      << md;
  EXPECT_TRUE(extest::contains(md, "The lesson's 1000 layers are not run here: this run has 2.")) << md;
  // warmup: each position with and without, what warmup changed at the end, and the effects paired
  auto change = [](const std::vector<double>& with, const std::string& with_name,
                   const std::vector<double>& without, const std::string& without_name) {
    const PairedDiff d = paired_diff(with, without, 100);
    EXPECT_TRUE(d.computed());
    return std::string(!d.resolved() ? "warmup made no difference beyond this run's noise"
                       : d.mean < 0  ? "warmup helped"
                                     : "warmup hurt") +
           ": " + paired_text(d, with_name, without_name);
  };
  const bool post_ok = mean_last(post, 100) < cf, post_w_ok = mean_last(post_w, 100) < cf;
  EXPECT_TRUE(extest::contains(
      md,
      "- **Post-LN needs warmup** (the lesson). Without warmup Post-LN " + ending(post) +
          "; with warmup it " + ending(post_w) + ". " +
          (post_ok && post_w_ok ? "It trained either way, so it did not need warmup here, against the lesson"
           : !post_ok && post_w_ok ? "It trained only with warmup: it needs it here, as the lesson says"
           : post_ok               ? "It trained only without warmup, against the lesson"
                                   : "It trained neither way") +
          "; " + change(post_w, "Post-LN + warmup", post, "Post-LN") + ".\n"))
      << md;
  EXPECT_TRUE(extest::contains(
      md, "- **Pre-LN does not** (the lesson). Without warmup Pre-LN " + ending(pre) + "; with warmup it " +
              ending(pre_w) + ". " +
              (mean_last(pre, 100) < cf ? "It trained without warmup, as the lesson says"
                                        : "It did not train without warmup, against the lesson") +
              "; " + change(pre_w, "Pre-LN + warmup", pre, "Pre-LN") + ".\n"))
      << md;
  std::vector<double> effect_post, effect_pre;
  for (size_t k = 0; k < steps; ++k) {
    effect_post.push_back(post_w[k] - post[k]);
    effect_pre.push_back(pre_w[k] - pre[k]);
  }
  const PairedDiff e = paired_diff(effect_post, effect_pre, 100);
  ASSERT_TRUE(e.computed());
  EXPECT_TRUE(extest::contains(
      md, "Warmup's effect (with minus without) on Post-LN minus its effect on Pre-LN is " + num(e.mean, 3) +
              " ± " + num(e.se, 2) + " (the effect curves paired over the last " + std::to_string(e.steps) +
              " steps: " + standard_errors_text(e.mean, e.se) + " standard errors): " +
              (!e.resolved() ? "warmup did about as much for each, against the lesson"
               : e.mean < 0  ? "warmup did Post-LN more good (or less harm) than Pre-LN, as the lesson says"
                            : "warmup did Pre-LN more good (or less harm) than Post-LN, against the lesson") +
              ".\n"))
      << md;
  // The two warmup runs' losses differ from those without from step 2 (the ramp is applied), not at step 1
  // (the first loss is before any update).
  EXPECT_EQ(post_w[0], post[0]);
  EXPECT_NE(post_w[1], post[1]);
  EXPECT_NE(pre_w[1], pre[1]);
  extest::fs::remove_all(dir);
}

// --seeds 42,2: every run once per seed, the across-seed calls made from each seed's curves in the CSV (40
// steps, a warmup of 10; under the sanitizers 12 and 5).
TEST(Exp4DeepNorm, SeedsAreRankedAcrossSeeds) {
  const size_t steps = extest::kSanitized ? 12 : 40, warmup = extest::kSanitized ? 5 : 10;
  const extest::fs::path dir = extest::temp_dir("exp4_seeds");
  // The same small runs, with `seed_flag` (--seeds 42,2 or --seed 2), into dir/out.
  auto run_exp4 = [&](const std::string& seed_flag, const std::string& out) {
    return extest::run(kExp4 + " --task copy --quick --layers 2 --threads 1 --quiet --steps " +
                           std::to_string(steps) + " --warmup " + std::to_string(warmup) + " " + seed_flag +
                           " --out " + (dir / out).string(),
                       dir);
  };
  const extest::RunResult r = run_exp4("--seeds 42,2", "run");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = extest::read_csv(dir / "run" / "deepnorm.csv");
  const std::string md = extest::slurp(dir / "run" / "deepnorm.md");
  const std::vector<uint64_t> seeds = {42, 2};
  auto loss = [&](const std::string& name, uint64_t seed) {
    std::vector<double> l = curve_named(rows, "Training loss", name + " seed " + std::to_string(seed));
    EXPECT_EQ(l.size(), steps) << name << " seed " << seed;
    return l;
  };
  // Every run once per seed, in the table and in the CSV.
  for (const char* name : {"Post-LN", "Post-LN + warmup", "DeepNorm", "Pre-LN", "Pre-LN + warmup"})
    for (uint64_t seed : seeds) {
      EXPECT_TRUE(extest::contains(md, std::string("| ") + name + " | " + std::to_string(seed) + " | "))
          << name;
      loss(name, seed);
    }
  auto call = [&](const std::string& a, const std::string& b) {
    std::vector<PairedDiff> per_seed;
    for (uint64_t seed : seeds) per_seed.push_back(paired_diff(loss(a, seed), loss(b, seed), 100));
    return seed_text(seed_spread(per_seed), a, b);
  };
  EXPECT_TRUE(extest::contains(
      md, "- **DeepNorm against Post-LN**, where they end: " + call("DeepNorm", "Post-LN") + ".\n"))
      << md;
  EXPECT_TRUE(extest::contains(
      md, "- **DeepNorm against Pre-LN**, where they end: " + call("DeepNorm", "Pre-LN") + ".\n"))
      << md;
  EXPECT_TRUE(extest::contains(md, "- **Warmup on Post-LN**: " + call("Post-LN + warmup", "Post-LN") + ".\n"))
      << md;
  EXPECT_TRUE(extest::contains(md, "- **Warmup on Pre-LN**: " + call("Pre-LN + warmup", "Pre-LN") + ".\n"))
      << md;
  // the gradient norm: DeepNorm's largest / median against Post-LN's, per seed
  size_t steadier = 0;
  for (uint64_t seed : seeds) {
    auto ratio = [&](const std::string& name) {
      const std::vector<double> g =
          curve_named(rows, "Gradient norm before clipping", name + " seed " + std::to_string(seed));
      std::vector<double> sorted = g;
      std::sort(sorted.begin(), sorted.end());
      const size_t m = sorted.size() / 2;
      const double median = sorted.size() % 2 ? sorted[m] : 0.5 * (sorted[m - 1] + sorted[m]);
      return *std::max_element(g.begin(), g.end()) / median;
    };
    steadier += ratio("DeepNorm") < ratio("Post-LN");
  }
  EXPECT_TRUE(extest::contains(md, "its median) in " + std::to_string(steadier) + " of 2 seeds (DeepNorm "))
      << md;
  // Seed 2's runs are those of a run with --seed 2 alone: the same losses, to the last digit of the CSV.
  const extest::RunResult alone = run_exp4("--seed 2", "alone");
  ASSERT_EQ(alone.status, 0) << alone.err;
  const auto alone_rows = extest::read_csv(dir / "alone" / "deepnorm.csv");
  for (const char* name : {"Post-LN", "DeepNorm", "Pre-LN + warmup"}) {
    std::vector<std::string> a, b;
    for (const extest::CsvRow& row : extest::select(alone_rows, "line", name, "Training loss"))
      if (row.series == name) a.push_back(row.y);
    for (const extest::CsvRow& row : extest::select(rows, "line", name, "Training loss"))
      if (row.series == std::string(name) + " seed 2") b.push_back(row.y);
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(a.size(), steps) << name;
  }
  // then each seed's own sections
  for (uint64_t seed : seeds)
    EXPECT_TRUE(extest::contains(
        md, "\n## Seed " + std::to_string(seed) + "\n\n### The lesson's claims at 2 layers\n"))
        << md;
  extest::fs::remove_all(dir);
}

TEST(Exp4DeepNorm, ItsFlagsRefuseValuesOutOfRange) {
  const extest::fs::path dir = extest::temp_dir("exp4_flags");
  const std::string exe = kExp4 + " --task copy --out " + (dir / "out").string();
  for (const std::string flags :
       {"--layers 0", "--layers 1001", "--layers 2.5", "--clip -1", "--lr 0", "--warmup -1", "--warmup 2.5",
        "--warmup 10 --steps 10", "--seeds 42,2 --seed 7"}) {
    const extest::RunResult r = extest::run(exe + " " + flags, dir);
    EXPECT_EQ(r.status, 2) << flags << "\n" << r.err;
    EXPECT_TRUE(extest::contains(r.err, flags.substr(0, flags.find(' ')))) << flags << "\n" << r.err;
    EXPECT_FALSE(extest::fs::exists(dir / "out" / "deepnorm.md")) << flags;
  }
  extest::fs::remove_all(dir);
}
#endif
