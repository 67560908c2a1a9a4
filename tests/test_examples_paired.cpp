// The rule the experiments' summaries use to rank two runs (examples/common/paired.h): the paired difference
// over the last steps, its standard error from 10 block means, and the call |D| > 2.2622 SE. Checked on
// hand-computed curves, then on simulated noise: with no gap it calls one about 5% of the time also when
// neighbouring steps are correlated (where the plain sd / sqrt(W) calls one far more often), and a real gap
// of a few standard errors is called.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "tests/examples_test_util.h"
#include "tests/ops_test_util.h"

using namespace ng;
using namespace ng::examples;
using ng::testing::expect_error;

TEST(ExamplesPaired, BlockMeansByHand) {
  // 30 steps, window 20: blocks of 2 steps, whose differences are j/100 and j/100 for block j = 0..9.
  // The first 10 steps lie outside the window: NaN there must not be read.
  std::vector<double> a(30, std::nan("")), b(30, std::nan(""));
  for (size_t k = 0; k < 20; ++k) {
    b[10 + k] = 2.0 + 0.3 * double(k % 3);  // the batch's own difficulty, the same for both
    a[10 + k] = b[10 + k] + double(k / 2) / 100;
  }
  const PairedDiff d = paired_diff(a, b, 20);
  EXPECT_EQ(d.steps, 20u);
  EXPECT_NEAR(d.mean, 0.045, 1e-12);
  // sample sd of 0, 0.01, ..., 0.09 is 0.0302765; over sqrt(10)
  EXPECT_NEAR(d.se, 0.030276503540974917 / std::sqrt(10.0), 1e-12);
  EXPECT_TRUE(d.computed());
  EXPECT_TRUE(d.resolved());  // 0.045 > 2.2622 * 0.00957
  EXPECT_EQ(paired_text(d, "A", "B"),
            "B ends lower than A by 0.045 ± 0.0096 (paired over the last 20 steps: 4.7 standard errors)");
  // The same curves the other way round: the sign flips, SE does not.
  const PairedDiff r = paired_diff(b, a, 20);
  EXPECT_NEAR(r.mean, -0.045, 1e-12);
  EXPECT_NEAR(r.se, d.se, 1e-15);
}

TEST(ExamplesPaired, WindowIsRoundedDownToWholeBlocksAndCutToTheCurve) {
  std::vector<double> a(1000), b(1000);
  for (size_t k = 0; k < 1000; ++k) a[k] = 3.0, b[k] = k < 950 ? 1.0 : 3.5;  // b jumps in the last 50
  EXPECT_EQ(paired_diff(a, b, 57).steps, 50u);
  EXPECT_NEAR(paired_diff(a, b, 57).mean, -0.5, 1e-12);
  EXPECT_EQ(paired_diff(a, b, 100).steps, 100u);
  EXPECT_NEAR(paired_diff(a, b, 100).mean, 0.5 * 2.0 - 0.5 * 0.5, 1e-12);  // half at +2, half at -0.5
  // a window longer than the curves takes all of them
  std::vector<double> s(35, 1.0), t(35, 1.25);
  EXPECT_EQ(paired_diff(s, t, 100).steps, 30u);
}

TEST(ExamplesPaired, ConstantGapAndNoGap) {
  std::vector<double> a(100), b(100);
  // exact in binary, so the differences are exactly 0.5 and SE exactly 0
  for (size_t k = 0; k < 100; ++k) a[k] = 1.0 + 0.25 * double(k % 4), b[k] = a[k] + 0.5;
  const PairedDiff gap = paired_diff(a, b, 100);
  EXPECT_EQ(gap.se, 0.0);
  EXPECT_TRUE(gap.resolved());  // a gap with no noise at all is beyond the noise
  EXPECT_EQ(paired_text(gap, "a", "b"),
            "a ends lower than b by 0.5 ± 0 (paired over the last 100 steps: over 1000 standard errors)");
  const PairedDiff same = paired_diff(a, a, 100);
  EXPECT_EQ(same.mean, 0.0);
  EXPECT_FALSE(same.resolved());
  EXPECT_EQ(paired_text(same, "a", "b"),
            "a and b end within this run's noise (a minus b = 0 ± 0, paired over the last 100 steps: 0.0 "
            "standard errors, under 2.26)");
}

// exp4's clause on a whole run: the same rule, worded as an average over the steps rather than where the
// runs end.
TEST(ExamplesPaired, AverageTextWordsTheWholeRun) {
  std::vector<double> a(100), b(100);
  for (size_t k = 0; k < 100; ++k) a[k] = 1.0 + 0.25 * double(k % 4), b[k] = a[k] + 0.5;
  EXPECT_EQ(
      paired_average_text(paired_diff(a, b, 100), "a", "b"),
      "a's loss is lower than b's on average by 0.5 ± 0 (paired over 100 steps: over 1000 standard errors)");
  EXPECT_EQ(
      paired_average_text(paired_diff(b, a, 100), "b", "a"),
      "a's loss is lower than b's on average by 0.5 ± 0 (paired over 100 steps: over 1000 standard errors)");
  EXPECT_EQ(paired_average_text(paired_diff(a, a, 100), "a", "b"),
            "a and b are within this run's noise on average (a minus b = 0 ± 0, paired over 100 steps: 0.0 "
            "standard errors, under 2.26)");
  EXPECT_EQ(paired_average_text(paired_diff(std::vector<double>(9, 1.0), std::vector<double>(9, 2.0), 100),
                                "a", "b"),
            "a and b are not compared: fewer steps than the rule's 10 blocks");
}

// exp2's "Lowest final loss" clause: the first place by the mean of the last 50 losses, and the paired
// difference over the last multiple of 10 of them. Under 50 steps they can disagree: 49 steps where a's
// first 9 are far lower make a first, while over the last 40 b is lower at every step. "Ahead ... beyond
// this run's noise" then contradicted the clause after it.
TEST(ExamplesPaired, LeadTextFollowsTheSign) {
  std::vector<double> a(49, 1.0), b(49, 0.875);
  for (size_t k = 0; k < 9; ++k) a[k] = 0.0, b[k] = 2.0;
  ASSERT_LT(ng::examples::mean_last(a, 50), ng::examples::mean_last(b, 50));  // a ranked first
  const PairedDiff d = paired_diff(a, b, 50);
  ASSERT_EQ(d.steps, 40u);
  ASSERT_TRUE(d.resolved());
  EXPECT_EQ(
      lead_text(d) + paired_text(d, "a", "b"),
      ", though paired step by step the next ends lower: b ends lower than a by 0.125 ± 0 (paired over the "
      "last 40 steps: over 1000 standard errors)");
  EXPECT_EQ(lead_text(paired_diff(b, a, 50)), ", ahead of the next beyond this run's noise: ");
  EXPECT_EQ(lead_text(paired_diff(a, a, 50)), ", but not clearly ahead of the next: ");
}

TEST(ExamplesPaired, NotComputedAndErrors) {
  std::vector<double> a(9, 1.0), b(9, 2.0);
  const PairedDiff short_run = paired_diff(a, b, 100);
  EXPECT_FALSE(short_run.computed());
  EXPECT_FALSE(short_run.resolved());
  EXPECT_EQ(paired_text(short_run, "a", "b"),
            "a and b are not compared: fewer steps than the rule's 10 blocks");

  std::vector<double> c(50, 1.0), e(50, 2.0);
  c[45] = INFINITY;
  const PairedDiff inf = paired_diff(c, e, 20);
  EXPECT_FALSE(inf.computed());
  EXPECT_EQ(paired_text(inf, "a", "b"),
            "a and b are not compared: a loss in their last 20 steps is not finite");
  c[45] = 1.0, c[10] = NAN;  // outside the window: fine
  EXPECT_TRUE(paired_diff(c, e, 20).resolved());

  expect_error([&] { paired_diff(a, c, 10); }, {"paired_diff", "the same number", "got 9 and 50"});
}

// The rule's constant is the 97.5% quantile of Student's t with 9 degrees of freedom: the t density,
// integrated from 0 to 2.2622 by Simpson's rule, holds 0.475 of the mass.
TEST(ExamplesPaired, ConstantIsStudentsT975WithNineDegreesOfFreedom) {
  const double nu = double(PairedDiff::kBlocks - 1);
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * M_PI);
  auto density = [&](double t) { return c * std::pow(1 + t * t / nu, -(nu + 1) / 2); };
  const int n = 20000;
  const double h = PairedDiff::kT975 / n;
  double s = density(0) + density(PairedDiff::kT975);
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4 : 2) * density(i * h);
  EXPECT_NEAR(s * h / 3, 0.475, 2e-5);
}

namespace {

// Simulated pair of loss curves: b = a + gap + e_k, with e an AR(1) process of lag-1 correlation rho and
// unit marginal variance (neighbouring steps move together, as a slowly changing pair of models does).
// Returns how often, over `trials`, the rule (and the plain i.i.d. rule, sd(d) / sqrt(W)) calls a gap.
struct CallRates {
  double blocks, iid;
};
CallRates call_rates(double rho, double gap, int trials, size_t window) {
  std::mt19937_64 gen(12345);
  std::normal_distribution<double> z(0.0, 1.0);
  int blocks = 0, iid = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> a(window), b(window);
    double e = z(gen);
    for (size_t k = 0; k < window; ++k) {
      e = rho * e + std::sqrt(1 - rho * rho) * z(gen);
      a[k] = 2.0 + 0.1 * z(gen);  // the batch: shared by both, cancels in the difference
      b[k] = a[k] + gap + e;
    }
    const PairedDiff d = paired_diff(a, b, window);
    blocks += d.resolved();
    double ss = 0;
    for (size_t k = 0; k < window; ++k) ss += (a[k] - b[k] - d.mean) * (a[k] - b[k] - d.mean);
    const double se_iid = std::sqrt(ss / double(window - 1) / double(window));
    iid += std::abs(d.mean) > 1.96 * se_iid;
  }
  return {double(blocks) / trials, double(iid) / trials};
}

}  // namespace

TEST(ExamplesPaired, NoGapIsCalledAboutFivePercentOfTheTime) {
  // Independent steps: both rules near 5%. (4000 trials: a binomial sd of 0.35 percentage points.)
  const CallRates independent = call_rates(0.0, 0.0, 4000, 100);
  std::printf("no gap, independent steps: called %.4f (blocks), %.4f (i.i.d.)\n", independent.blocks,
              independent.iid);
  EXPECT_NEAR(independent.blocks, 0.05, 0.015);
  EXPECT_NEAR(independent.iid, 0.05, 0.015);
  // Correlated steps (rho = 0.5, blocks of 10): the block means still hold the rate near 5%, while the
  // i.i.d. standard error is too small by about sqrt(3) and calls a gap a quarter of the time.
  const CallRates correlated = call_rates(0.5, 0.0, 4000, 100);
  std::printf("no gap, rho 0.5: called %.4f (blocks), %.4f (i.i.d.)\n", correlated.blocks, correlated.iid);
  EXPECT_NEAR(correlated.blocks, 0.05, 0.025);
  EXPECT_GT(correlated.iid, 0.18);
}

TEST(ExamplesPaired, ARealGapIsCalled) {
  // Independent steps, W = 100: SE of D is 0.1, so a gap of 0.5 is 5 standard errors.
  EXPECT_GT(call_rates(0.0, 0.5, 1000, 100).blocks, 0.95);
  // and one of 0.1 (one standard error) mostly is not
  EXPECT_LT(call_rates(0.0, 0.1, 1000, 100).blocks, 0.35);
}

// ---- the trainers' summaries use the rule on their own curves ----

using extest::curve_of;  // a run's loss curve, read back from its CSV (9 digits: the f32 losses exactly)

#ifdef NG_EXP2_NORM_COMPARISON_PATH
// 20 copy-task steps (window 50, so all 20: blocks of 2; under the sanitizers, 20 to 50 times slower, 10
// steps in blocks of 1). Each comparison in the summary is the rule applied to the curves the CSV holds;
// 2 steps are fewer than the 10 blocks, and the summary says it compares nothing.
TEST(ExamplesPaired, Exp2SummaryRanksByThePairedDifferenceOfItsCurves) {
  const size_t steps = extest::kSanitized ? 10 : 20;
  const extest::fs::path dir = extest::temp_dir("paired_exp2");
  const std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --task copy --threads 1 --quiet";
  extest::RunResult r =
      extest::run(exe + " --steps " + std::to_string(steps) + " --out " + (dir / "run").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = extest::slurp(dir / "run" / "norm_comparison.md");
  const auto rows = extest::read_csv(dir / "run" / "norm_comparison.csv");
  const std::string panel = "Training loss (copy)";
  const std::vector<std::string> names = {"NoNorm", "Post-LN + LayerNorm", "Pre-LN + LayerNorm",
                                          "Pre-LN + RMSNorm"};
  std::vector<std::vector<double>> curves;
  for (const std::string& name : names) curves.push_back(curve_of(rows, panel, name));
  const auto &post = curves[1], &ln = curves[2], &rms = curves[3];
  ASSERT_EQ(post.size(), steps);
  const PairedDiff rms_ln = paired_diff(rms, ln, 50);
  EXPECT_EQ(rms_ln.steps, steps);
  EXPECT_TRUE(
      extest::contains(md, "- RMSNorm vs LayerNorm (both Pre-LN; the lesson has RMSNorm 0.1 lower): " +
                               paired_text(rms_ln, "Pre-LN + RMSNorm", "Pre-LN + LayerNorm") + ".\n"))
      << md;
  const PairedDiff ln_post = paired_diff(ln, post, 50), rms_post = paired_diff(rms, post, 50);
  ASSERT_TRUE(ln_post.computed() && rms_post.computed());
  const std::string verdict =
      ln_post.resolved() && rms_post.resolved() && ln_post.mean < 0 && rms_post.mean < 0
          ? "Pre-LN beat Post-LN, as the lesson says: "
      : ln_post.resolved() && rms_post.resolved() && ln_post.mean > 0 && rms_post.mean > 0
          ? "Pre-LN did NOT beat Post-LN here: "
          : "Pre-LN did not clearly beat Post-LN here: ";
  EXPECT_TRUE(
      extest::contains(md, verdict + paired_text(ln_post, "Pre-LN + LayerNorm", "Post-LN + LayerNorm") +
                               "; " + paired_text(rms_post, "Pre-LN + RMSNorm", "Post-LN + LayerNorm")))
      << md;
  // NoNorm against Post-LN, the config at its learning rate (README quoted this gap before the summary had
  // it).
  const PairedDiff none_post = paired_diff(curves[0], post, 50);
  EXPECT_TRUE(
      extest::contains(md, "- NoNorm vs Post-LN (the same learning rate; the lesson has NoNorm diverging): " +
                               paired_text(none_post, "NoNorm", "Post-LN + LayerNorm") + ".\n"))
      << md;
  EXPECT_TRUE(extest::contains(md, "a gap counts only beyond 2.26 standard errors")) << md;
  // (stop 46's shared paragraph said "every config see the same batches")
  EXPECT_TRUE(
      extest::contains(md, "ranked by their paired difference: all four configs see the same batches"))
      << md;
  // The lowest final loss against the next lowest, as the rule calls it.
  std::vector<size_t> order = {0, 1, 2, 3};
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  std::sort(order.begin(), order.end(),
            [&](size_t i, size_t j) { return mean(curves[i]) < mean(curves[j]); });
  const PairedDiff first = paired_diff(curves[order[0]], curves[order[1]], 50);
  EXPECT_TRUE(extest::contains(md, "- Lowest final loss: " + names[order[0]] + " (")) << md;
  EXPECT_TRUE(
      extest::contains(md, std::string(first.resolved() ? ", ahead of the next beyond this run's noise: "
                                                        : ", but not clearly ahead of the next: ") +
                               paired_text(first, names[order[0]], names[order[1]]) + ".\n"))
      << md;

  r = extest::run(exe + " --steps 2 --out " + (dir / "2").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md2 = extest::slurp(dir / "2" / "norm_comparison.md");
  EXPECT_TRUE(extest::contains(md2,
                               "Pre-LN + RMSNorm and Pre-LN + LayerNorm are not compared: fewer steps than "
                               "the rule's 10 blocks."))
      << md2;
  EXPECT_TRUE(extest::contains(md2,
                               "Pre-LN against Post-LN: Pre-LN + LayerNorm and Post-LN + LayerNorm are not "
                               "compared: fewer steps than the rule's 10 blocks"))
      << md2;
  EXPECT_FALSE(extest::contains(md2, "beat Post-LN")) << md2;
  extest::fs::remove_all(dir);
}
#endif

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
// exp3 --quick with 30 steps (window 100, so all 30: blocks of 3; 10 under the sanitizers): Pre-LN against
// Post-LN at each depth, and 4 against 8 layers at each position, as the rule gives them from the CSV's
// curves.
TEST(ExamplesPaired, Exp3SummaryRanksByThePairedDifferenceOfItsCurves) {
  const size_t steps = extest::kSanitized ? 10 : 30;
  const extest::fs::path dir = extest::temp_dir("paired_exp3");
  const extest::RunResult r = extest::run(
      std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + " --quick --steps " + std::to_string(steps) +
          " --task copy --threads 1 --quiet --out " + (dir / "out").string(),
      dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = extest::slurp(dir / "out" / "prenorm_vs_postnorm.md");
  const auto rows = extest::read_csv(dir / "out" / "prenorm_vs_postnorm.csv");
  for (int layers : {4, 8}) {
    const std::string panel = std::to_string(layers) + " layers: training loss";
    const std::string pre = "Pre-LN " + std::to_string(layers) + "L",
                      post = "Post-LN " + std::to_string(layers) + "L";
    const PairedDiff d = paired_diff(curve_of(rows, panel, pre), curve_of(rows, panel, post), 100);
    EXPECT_EQ(d.steps, steps);
    EXPECT_TRUE(extest::contains(md, "). " + paired_text(d, pre, post) + ".")) << layers << "\n" << md;
  }
  for (const std::string who : {"Pre-LN", "Post-LN"}) {
    const PairedDiff d = paired_diff(curve_of(rows, "8 layers: training loss", who + " 8L"),
                                     curve_of(rows, "4 layers: training loss", who + " 4L"), 100);
    EXPECT_TRUE(extest::contains(md, "'s final loss by " + ng::examples::num(d.mean, 3) + ": " +
                                         paired_text(d, who + " 8L", who + " 4L") + ".\n"))
        << who << "\n"
        << md;
  }
  // The lesson's claims on depth: the 4-layer gap, and how the gap moves from 4 to 8 layers (the two gap
  // curves paired step by step).
  auto gap = [&](int layers) {
    const std::string panel = std::to_string(layers) + " layers: training loss",
                      L = std::to_string(layers) + "L";
    const std::vector<double> pre = curve_of(rows, panel, "Pre-LN " + L),
                              post = curve_of(rows, panel, "Post-LN " + L);
    std::vector<double> g;
    for (size_t k = 0; k < pre.size(); ++k) g.push_back(pre[k] - post[k]);
    return g;
  };
  const PairedDiff gap4 = paired_diff(curve_of(rows, "4 layers: training loss", "Pre-LN 4L"),
                                      curve_of(rows, "4 layers: training loss", "Post-LN 4L"), 100);
  const PairedDiff change = paired_diff(gap(8), gap(4), 100);
  ASSERT_TRUE(change.computed());
  EXPECT_TRUE(extest::contains(
      md, std::string("At 4 layers they are ") + (gap4.resolved() ? "not similar" : "similar") + " here"))
      << md;
  EXPECT_TRUE(
      extest::contains(md, "From 4 to 8 layers, Pre-LN minus Post-LN moves by " +
                               ng::examples::num(change.mean, 3) + " ± " + ng::examples::num(change.se, 2) +
                               " (the gap curves paired over the last " + std::to_string(steps) + " steps: "))
      << md;
  EXPECT_TRUE(extest::contains(md, !change.resolved() ? "no change beyond the runs' noise"
                                   : change.mean < 0
                                       ? "Pre-LN gains on Post-LN with depth, as the lesson says"
                                       : "Pre-LN loses ground to Post-LN with depth, against the lesson"))
      << md;
  extest::fs::remove_all(dir);
}
#endif

// ---- two models scored on the same items (exp5's validation windows): item_diff ----

TEST(ExamplesPaired, ItemDiffByHand) {
  // d = 0.5, 0, 1, -0.5: D = 0.25; deviations 0.25, -0.25, 0.75, -0.75, sum of squares 1.25, sample sd
  // sqrt(1.25 / 3); SE = sd / sqrt(4).
  const ItemDiff d = item_diff({1, 2, 3, 4}, {0.5, 2, 2, 4.5});
  EXPECT_NEAR(d.mean, 0.25, 1e-15);
  EXPECT_NEAR(d.se, std::sqrt(1.25 / 3) / 2, 1e-15);
  EXPECT_FALSE(d.resolved());  // 0.25 < 1.96 * 0.32
  EXPECT_EQ(item_diff_text(d), "0.25 ± 0.32");
  // A constant shift with a little spread is called, either way round.
  const ItemDiff up = item_diff({1.1, 2.1, 3.1, 4.12}, {1, 2, 3, 4});
  EXPECT_TRUE(up.resolved()) << up.mean << " " << up.se;
  const ItemDiff down = item_diff({1, 2, 3, 4}, {1.1, 2.1, 3.1, 4.12});
  EXPECT_NEAR(down.mean, -up.mean, 1e-15);
  EXPECT_TRUE(down.resolved());
}

TEST(ExamplesPaired, ItemDiffNotComputedAndErrors) {
  EXPECT_TRUE(std::isnan(item_diff({1}, {2}).mean));  // one item: no spread to measure
  EXPECT_TRUE(std::isnan(item_diff({}, {}).se));
  const ItemDiff nan = item_diff({1, NAN, 3}, {1, 2, 3});
  EXPECT_TRUE(std::isnan(nan.mean) && std::isnan(nan.se));
  EXPECT_FALSE(nan.resolved());
  EXPECT_FALSE(item_diff({1, INFINITY}, {1, 2}).resolved());
  expect_error([] { item_diff({1, 2, 3}, {1, 2}); }, {"item_diff", "the same items", "got 3 and 2 scores"});
}

// kZ975 is the normal's 97.5% quantile, and with independent items the rule calls a gap that is not there
// about 5% of the time, and one of 5 standard errors nearly always.
TEST(ExamplesPaired, ItemDiffCallsAboutFivePercentWithoutAGap) {
  EXPECT_NEAR(0.5 * std::erfc(-ItemDiff::kZ975 / std::sqrt(2.0)), 0.975, 1e-7);
  std::mt19937_64 gen(7);
  std::normal_distribution<double> z(0.0, 1.0);
  auto rate = [&](double gap, int trials) {
    int called = 0;
    for (int t = 0; t < trials; ++t) {
      std::vector<double> a(400), b(400);
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = 2.0 + z(gen);         // the item's own difficulty, shared
        b[i] = a[i] + gap + z(gen);  // SE of D: 1 / sqrt(400) = 0.05
      }
      called += item_diff(a, b).resolved();
    }
    return double(called) / trials;
  };
  const double none = rate(0.0, 4000);
  std::printf("no gap: called %.4f\n", none);
  EXPECT_NEAR(none, 0.05, 0.015);
  EXPECT_GT(rate(0.25, 500), 0.95);  // 5 standard errors
}

// level_diff: a curve against a flat level, by the same rule. A loss curve sitting at the level (a model at
// the context-free loss) is not called below it however its mean falls; one clearly below is.
TEST(ExamplesPaired, LevelDiffCallsOnlyACurveClearlyBelowTheLevel) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> noise(0.0, 0.06);  // a 16 x 64 batch's scatter of the loss
  std::vector<double> at_level(300), below(300);
  for (size_t k = 0; k < 300; ++k) {
    at_level[k] = 3.309 - 0.003 + noise(gen);  // 3.306: the letters' frequencies and nothing more
    below[k] = 2.9 + noise(gen);
  }
  const PairedDiff a = level_diff(at_level, 3.309, 50);
  EXPECT_EQ(a.steps, 50u);
  EXPECT_FALSE(a.resolved()) << a.mean << " ± " << a.se;
  const PairedDiff b = level_diff(below, 3.309, 50);
  EXPECT_TRUE(b.resolved() && b.mean < 0) << b.mean << " ± " << b.se;
  EXPECT_NEAR(b.mean, paired_diff(below, std::vector<double>(300, 3.309), 50).mean, 1e-15);
  // Fewer steps than the 10 blocks: not computed, so never called.
  EXPECT_FALSE(level_diff({1.0, 1.0, 1.0}, 3.0, 50).computed());
}
