// The training recipe's flags of experiments 2 and 3, --warmup and --clip: each reaches every run, the
// summary says so, and a bad value is a usage error. (Experiment 4's warmup runs: test_examples_deepnorm.cpp.
// The schedule itself, a resume in the middle of it, and a resume with another warmup or clip:
// test_examples_resume.cpp.)
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

// Four steps with each program's default clipping and with --clip 1e-6 (exp2's default is none, exp3's 1.0).
// Step 1's loss is the same; then the runs part. (Adam's first update is nearly the same for any rescaling of
// the gradient, but not at 1e-6, where the gradients fall below Adam's eps, and the later updates mix
// gradients of several steps.) A negative max norm is a usage error.
TEST(ExamplesClip, Exp2AndExp3ClipEveryRun) {
  for (const Program& p : kPrograms) {
    SCOPED_TRACE(p.name);
    const extest::fs::path dir = extest::temp_dir("clip_" + p.name);
    std::string command = p.command;
    command.replace(command.find("--steps 3"), 9, "--steps 4");

    const auto bad = extest::run(command + " --clip -1 --out " + (dir / "bad").string(), dir);
    EXPECT_EQ(bad.status, 2);
    EXPECT_TRUE(extest::contains(bad.err, "--clip")) << bad.err;

    ASSERT_EQ(extest::run(command + " --out " + (dir / "default").string(), dir).status, 0);
    const auto tiny = extest::run(command + " --clip 1e-6 --out " + (dir / "tiny").string(), dir);
    ASSERT_EQ(tiny.status, 0) << tiny.err;
    EXPECT_TRUE(extest::contains(tiny.out, "Adam, clip_grad_norm 1e-06, ")) << tiny.out;

    const auto default_rows = extest::read_csv(dir / "default" / (p.file + ".csv"));
    const auto tiny_rows = extest::read_csv(dir / "tiny" / (p.file + ".csv"));
    for (const std::string& s : p.series) {
      SCOPED_TRACE(s);
      const std::vector<double> a = extest::curve_of(default_rows, p.panel, s);
      const std::vector<double> b = extest::curve_of(tiny_rows, p.panel, s);
      ASSERT_EQ(a.size(), 4u);
      ASSERT_EQ(b.size(), 4u);
      EXPECT_EQ(a[0], b[0]) << "step 1 is before any update";
      EXPECT_NE(a, b) << "--clip did not reach this run";
    }
    const std::string default_md = extest::slurp(dir / "default" / (p.file + ".md"));
    EXPECT_TRUE(extest::contains(default_md,
                                 p.name == "exp2" ? " steps, no clipping, " : " steps, clip_grad_norm 1.0, "))
        << default_md;
    EXPECT_TRUE(
        extest::contains(extest::slurp(dir / "tiny" / (p.file + ".md")), " steps, clip_grad_norm 1e-06, "));
    extest::fs::remove_all(dir);
  }
}
#else
TEST(ExamplesClip, Exp2AndExp3ClipEveryRun) {
  GTEST_SKIP() << "the experiments are not built (NORMGRAD_BUILD_EXAMPLES=OFF)";
}
TEST(ExamplesWarmup, Exp2AndExp3RampEveryRunsRate) {
  GTEST_SKIP() << "the experiments are not built (NORMGRAD_BUILD_EXAMPLES=OFF)";
}
#endif
