// Experiment 4 (examples/exp4_deepnorm.cpp) end to end: its summary's verdicts on the lesson's DeepNorm
// claims are the rules applied to the curves its CSV holds, and its own flags are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "examples/common/paired.h"
#include "examples/common/report.h"
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

}  // namespace

// Three 2-layer models on the copy task (--quick: hidden 64, seq 32). 120 steps, so that the whole run (120
// steps) and its end (the last 100) are two windows; under the sanitizers 12, enough for the paired rule (10
// blocks of 1 step), where both windows are the last 10.
TEST(Exp4DeepNorm, SummaryIsComputedFromItsOwnCurves) {
  const size_t steps = extest::kSanitized ? 12 : 120;
  const extest::fs::path dir = extest::temp_dir("exp4");
  const extest::RunResult r =
      extest::run(kExp4 + " --task copy --quick --layers 2 --threads 1 --quiet --steps " +
                      std::to_string(steps) + " --save ignored.safetensors --out " + (dir / "run").string(),
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(r.err, "--save does not apply to this experiment")) << r.err;
  EXPECT_FALSE(extest::fs::exists(dir / "ignored.safetensors"));
  for (const char* ext : {".png", ".csv", ".md", ".cmd.txt"})
    EXPECT_TRUE(extest::fs::exists(dir / "run" / (std::string("deepnorm") + ext))) << ext;
  const auto rows = extest::read_csv(dir / "run" / "deepnorm.csv");
  const std::string md = extest::slurp(dir / "run" / "deepnorm.md");

  const std::vector<std::string> names = {"Post-LN", "DeepNorm", "Pre-LN"};
  std::vector<std::vector<double>> loss, grad;
  for (const std::string& name : names) {
    loss.push_back(extest::curve_of(rows, "Training loss", name));
    grad.push_back(extest::curve_of(rows, "Gradient norm before clipping", name));
    ASSERT_EQ(loss.back().size(), steps) << name;
    ASSERT_EQ(grad.back().size(), steps) << name;
    for (double g : grad.back()) EXPECT_TRUE(std::isfinite(g) && g > 0) << name << ": " << g;
  }
  const auto &post = loss[0], &deep = loss[1], &pre = loss[2];

  // alpha and beta at N = 2
  EXPECT_TRUE(extest::contains(md, "alpha = (2N)^(1/4) = 1.414 and beta = (8N)^(-1/4) = 0.5 at N = 2")) << md;
  // no warmup: how far DeepNorm's loss fell, beside Post-LN's
  const auto [d0, d1] = head_tail_means(deep, 10, 100);
  const auto [p0, p1] = head_tail_means(post, 10, 100);
  EXPECT_TRUE(extest::contains(
      md, std::string("DeepNorm ") + (d0 - d1 > 0 ? "trained without warmup" : "did not learn") +
              ": its loss fell by " + num(d0 - d1, 3) +
              " (the first 10 steps against the last 100), Post-LN's by " + num(p0 - p1, 3) + ".\n"))
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
  const double ratio_deep = *std::max_element(grad[1].begin(), grad[1].end()) / median_of(grad[1]);
  const double ratio_post = *std::max_element(grad[0].begin(), grad[0].end()) / median_of(grad[0]);
  EXPECT_TRUE(extest::contains(
      md, "over the " + std::to_string(steps) + " steps: " + grad_text(1) + "; " + grad_text(0) + ". " +
              (ratio_deep < ratio_post ? "DeepNorm's is the steadier of the two, as"
                                       : "DeepNorm's is not the steadier of the two, against")))
      << md;
  // against Pre-LN
  EXPECT_TRUE(extest::contains(
      md, "## Against Pre-LN\n\n- " + paired_text(paired_diff(pre, deep, 100), "Pre-LN", "DeepNorm")))
      << md;
  EXPECT_TRUE(extest::contains(md, "The lesson's 1000 layers are not run here: this run has 2.")) << md;
  extest::fs::remove_all(dir);
}

TEST(Exp4DeepNorm, ItsFlagsRefuseValuesOutOfRange) {
  const extest::fs::path dir = extest::temp_dir("exp4_flags");
  const std::string exe = kExp4 + " --task copy --out " + (dir / "out").string();
  for (const std::string flags : {"--layers 0", "--layers 1001", "--layers 2.5", "--clip -1", "--lr 0"}) {
    const extest::RunResult r = extest::run(exe + " " + flags, dir);
    EXPECT_EQ(r.status, 2) << flags << "\n" << r.err;
    EXPECT_TRUE(extest::contains(r.err, flags.substr(0, flags.find(' ')))) << flags << "\n" << r.err;
    EXPECT_FALSE(extest::fs::exists(dir / "out" / "deepnorm.md")) << flags;
  }
  extest::fs::remove_all(dir);
}
#endif
