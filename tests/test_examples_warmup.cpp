// --warmup in experiments 2 and 3: it reaches every run's learning rate, the summary and the figure say so,
// and a warmup as long as the run is a usage error. (Experiment 4's warmup runs: test_examples_deepnorm.cpp.
// The schedule itself, and a resume in the middle of it: test_examples_resume.cpp.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/examples_test_util.h"

#if defined(NG_EXP2_NORM_COMPARISON_PATH) && defined(NG_EXP3_PRENORM_VS_POSTNORM_PATH)
namespace {

struct Program {
  std::string name, command, file, panel;  // panel: the CSV panel of the loss curves
  std::vector<std::string> series;         // the curves that panel must hold
};

const std::vector<Program> kPrograms = {
    {"exp2",
     std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 3 --task copy --threads 2 --quiet",
     "norm_comparison",
     "Training loss (copy)",
     {"NoNorm", "Post-LN + LayerNorm", "Pre-LN + LayerNorm", "Pre-LN + RMSNorm"}},
    {"exp3",
     std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + " --quick --steps 3 --task copy --threads 2 --quiet",
     "prenorm_vs_postnorm",
     "4 layers: training loss",
     {"Pre-LN 4L", "Post-LN 4L"}},
};

}  // namespace

// Three steps with and without a warmup of 2. Step 1's loss is the untrained model's, the same in both runs;
// with the warmup the first update is taken at half the rate, so step 2's loss differs in every run of the
// program. Without --warmup nothing mentions one (the output from before the flag).
TEST(ExamplesWarmup, Exp2AndExp3RampEveryRunsRate) {
  for (const Program& p : kPrograms) {
    SCOPED_TRACE(p.name);
    const extest::fs::path dir = extest::temp_dir("warmup_" + p.name);

    const auto too_long = extest::run(p.command + " --warmup 3 --out " + (dir / "bad").string(), dir);
    EXPECT_EQ(too_long.status, 2);
    EXPECT_TRUE(extest::contains(too_long.err,
                                 "--warmup: expected fewer warmup steps than the run's 3 (--steps), got 3"))
        << too_long.err;
    EXPECT_FALSE(extest::fs::exists(dir / "bad" / (p.file + ".csv")));

    ASSERT_EQ(extest::run(p.command + " --out " + (dir / "none").string(), dir).status, 0);
    const auto warm = extest::run(p.command + " --warmup 2 --out " + (dir / "warm").string(), dir);
    ASSERT_EQ(warm.status, 0) << warm.err;
    EXPECT_TRUE(extest::contains(warm.out, ", warmup 2, ")) << warm.out;

    const auto none_rows = extest::read_csv(dir / "none" / (p.file + ".csv"));
    const auto warm_rows = extest::read_csv(dir / "warm" / (p.file + ".csv"));
    for (const std::string& s : p.series) {
      SCOPED_TRACE(s);
      const std::vector<double> a = extest::curve_of(none_rows, p.panel, s);
      const std::vector<double> b = extest::curve_of(warm_rows, p.panel, s);
      ASSERT_EQ(a.size(), 3u);
      ASSERT_EQ(b.size(), 3u);
      EXPECT_EQ(a[0], b[0]) << "step 1 is before any update";
      EXPECT_NE(a[1], b[1]) << "the warmup did not reach this run's first update";
    }

    const std::string none_md = extest::slurp(dir / "none" / (p.file + ".md"));
    const std::string warm_md = extest::slurp(dir / "warm" / (p.file + ".md"));
    EXPECT_FALSE(extest::contains(none_md, "linear warmup")) << none_md;
    EXPECT_TRUE(extest::contains(warm_md, "a linear warmup over the first 2 steps (step s at lr * s / 2)"))
        << warm_md;
    extest::fs::remove_all(dir);
  }
}
#else
TEST(ExamplesWarmup, Exp2AndExp3RampEveryRunsRate) {
  GTEST_SKIP() << "the experiments are not built (NORMGRAD_BUILD_EXAMPLES=OFF)";
}
#endif
