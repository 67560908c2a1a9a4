// Ranking two configs across seeds (examples/common/seeds.h): Student's t quantiles, the spread of the
// seeds' paired differences worked by hand (with the floor at the runs' own noise), how often it calls a gap
// that is not there and one that is, the --seeds flag, and exp3 --seeds end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "examples/common/seeds.h"
#include "tests/examples_test_util.h"
#include "tests/ops_test_util.h"

using namespace ng;
using namespace ng::examples;
using ng::testing::expect_error;

namespace {

// P(0 < T < t) for Student's t with nu degrees of freedom: its density integrated by Simpson's rule.
double t_mass(double nu, double t) {
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * M_PI);
  auto density = [&](double x) { return c * std::pow(1 + x * x / nu, -(nu + 1) / 2); };
  const int n = 40000;
  const double h = t / n;
  double s = density(0) + density(t);
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4 : 2) * density(i * h);
  return s * h / 3;
}

PairedDiff pd(double mean, double se) {
  PairedDiff d;
  d.mean = mean;
  d.se = se;
  d.steps = 100;
  return d;
}

}  // namespace

// Every quantile holds 0.475 of the mass above 0: the table (1..30) and the expansion beyond it.
TEST(ExamplesSeeds, T975IsStudentsQuantile) {
  for (size_t dof : {1, 2, 3, 4, 5, 9, 17, 29, 30, 31, 40, 100, 1000}) {
    EXPECT_NEAR(t_mass(double(dof), t975(dof)), 0.475, 2e-5) << dof;
  }
  EXPECT_DOUBLE_EQ(t975(9), PairedDiff::kT975);  // the paired rule's constant is the same quantile
  EXPECT_GT(t975(1), t975(2));
  EXPECT_GT(t975(30), t975(31));  // the table and the expansion meet in order
  EXPECT_GT(t975(31), t975(1000000));
  EXPECT_NEAR(t975(1000000), 1.959964, 1e-5);
  expect_error([] { t975(0); }, {"t975", "at least 1 degree of freedom", "got 0"});
}

// The loss plots' legend key for the seeds after the first (their curves are dashed and not listed).
TEST(ExamplesSeeds, OtherSeedsKey) {
  EXPECT_EQ(ng::examples::other_seeds_key({42, 2, 7}), "seeds 2 and 7: dashed");
  EXPECT_EQ(ng::examples::other_seeds_key({42, 2}), "seed 2: dashed");
  EXPECT_EQ(ng::examples::other_seeds_key({42}), "");
}

TEST(ExamplesSeeds, SpreadByHand) {
  // D = 0.1, 0.2, 0.3: M 0.2, S 0.1 (above the runs' noise 0.01), SE 0.1 / sqrt 3 = 0.0577, 3.5 SE < 4.30
  const SeedSpread wide = seed_spread({pd(0.1, 0.01), pd(0.2, 0.01), pd(0.3, 0.01)});
  EXPECT_EQ(wide.n, 3u);
  EXPECT_NEAR(wide.mean, 0.2, 1e-15);
  EXPECT_NEAR(wide.sd, 0.1, 1e-15);
  EXPECT_NEAR(wide.noise, 0.01, 1e-15);
  EXPECT_NEAR(wide.se, 0.1 / std::sqrt(3.0), 1e-15);
  EXPECT_EQ(wide.t_crit, 4.3027);
  EXPECT_EQ(wide.b_lower, 3u);
  EXPECT_EQ(wide.a_lower, 0u);
  EXPECT_TRUE(wide.computed());
  EXPECT_FALSE(wide.resolved());
  EXPECT_EQ(seed_text(wide, "A", "B"),
            "across 3 seeds, A and B are not ranked (A minus B = 0.2 ± 0.058, the mean of the seeds' paired "
            "differences, seed-to-seed sd 0.1: 3.5 standard errors, under the 4.3 of Student's t with 2 "
            "degrees of freedom); A lower in 0 of 3 seeds, B lower in 3 of 3 seeds");

  // D = -0.2, -0.21, -0.22: S 0.01, SE 0.00577, 36 SE: A lower
  const SeedSpread tight = seed_spread({pd(-0.2, 0.001), pd(-0.21, 0.001), pd(-0.22, 0.001)});
  EXPECT_TRUE(tight.resolved());
  EXPECT_EQ(
      seed_text(tight, "A", "B"),
      "across 3 seeds, A ends lower than B by 0.21 ± 0.0058 (the mean of the seeds' paired differences, "
      "seed-to-seed sd 0.01: 36 standard errors, beyond the 4.3 of Student's t with 2 degrees of "
      "freedom); A lower in 3 of 3 seeds");

  // Two seeds: t_1 = 12.7
  const SeedSpread two = seed_spread({pd(0.5, 0.01), pd(0.6, 0.01)});
  EXPECT_EQ(two.t_crit, 12.7062);
  EXPECT_NEAR(two.se, std::sqrt(0.005) / std::sqrt(2.0), 1e-15);  // S = 0.0707
  EXPECT_FALSE(two.resolved());                                   // 11 SE < 12.7
  EXPECT_TRUE(extest::contains(seed_text(two, "A", "B"), "under the 12.7 of Student's t with 1 degree of"));
}

// Three seeds that agree to the last digit, while each of their runs is noisy: the sample S is 0, but the
// runs' own noise bounds how well a seed can be known, and the rule uses it.
TEST(ExamplesSeeds, SpreadIsFlooredAtTheRunsOwnNoise) {
  const SeedSpread s = seed_spread({pd(0.25, 0.2), pd(0.25, 0.2), pd(0.25, 0.2)});
  EXPECT_EQ(s.sd, 0.0);
  EXPECT_NEAR(s.noise, 0.2, 1e-15);
  EXPECT_NEAR(s.se, 0.2 / std::sqrt(3.0), 1e-15);
  EXPECT_FALSE(s.resolved());  // 0.25 < 4.30 * 0.115 = 0.497; on S alone it would be "infinitely" far
  EXPECT_EQ(seed_text(s, "A", "B"),
            "across 3 seeds, A and B are not ranked (A minus B = 0.25 ± 0.12, the mean of the seeds' paired "
            "differences, seed-to-seed sd 0, under the runs' own noise 0.2, which is used instead: 2.2 "
            "standard errors, under the 4.3 of Student's t with 2 degrees of freedom); A lower in 0 of 3 "
            "seeds, B lower in 3 of 3 seeds");
  // the noise is the rms of the SE_s: sqrt((0.01^2 + 0.03^2) / 2)
  EXPECT_NEAR(seed_spread({pd(1, 0.01), pd(1, 0.03)}).noise, std::sqrt(0.0005), 1e-15);
}

TEST(ExamplesSeeds, SeedsWithoutAPairedDifference) {
  PairedDiff none;  // a seed whose run diverged: paired.h computed nothing
  const SeedSpread two_of_three = seed_spread({pd(-0.3, 0.001), none, pd(-0.31, 0.001)});
  EXPECT_EQ(two_of_three.n, 2u);
  ASSERT_EQ(two_of_three.d.size(), 3u);
  EXPECT_TRUE(std::isnan(two_of_three.d[1]));
  EXPECT_NEAR(two_of_three.mean, -0.305, 1e-15);
  EXPECT_TRUE(two_of_three.resolved());  // S = 0.00707, SE 0.005, 61 SE > 12.7
  EXPECT_EQ(seed_text(two_of_three, "A", "B"),
            "across 3 seeds, A ends lower than B by 0.305 ± 0.005 (the mean of the seeds' paired "
            "differences, seed-to-seed sd 0.0071: 61 standard errors, beyond the 12.7 of Student's t with 1 "
            "degree of freedom); A lower in 2 of 2 seeds that gave one (of 3)");
  const SeedSpread one = seed_spread({none, pd(0.2, 0.01), none});
  EXPECT_FALSE(one.computed());
  EXPECT_FALSE(one.resolved());
  EXPECT_EQ(seed_text(one, "A", "B"),
            "across 3 seeds, A and B are not ranked: 1 seed gives a paired difference, and it takes two");
  EXPECT_EQ(seed_text(seed_spread({none, none}), "A", "B"),
            "across 2 seeds, A and B are not ranked: 0 seeds give a paired difference, and it takes two");
  EXPECT_EQ(seed_list_text({42}), "42");
  EXPECT_EQ(seed_list_text({42, 2}), "42 and 2");
  EXPECT_EQ(seed_list_text({42, 2, 7}), "42, 2 and 7");
}

namespace {
// How often the rule calls a gap over `trials` simulated comparisons of n seeds: D_s = gap + (the seed's
// effect, sd 1) with each run's own SE_s = `noise`.
double call_rate(size_t n, double gap, double noise, int trials) {
  std::mt19937_64 gen(2024);
  std::normal_distribution<double> z(0.0, 1.0);
  int called = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<PairedDiff> seeds;
    for (size_t s = 0; s < n; ++s) seeds.push_back(pd(gap + z(gen), noise));
    called += seed_spread(seeds).resolved();
  }
  return double(called) / trials;
}
}  // namespace

// With no gap, the t test calls one in about 5% of trials at 3 and at 5 seeds (the floor, below the
// seeds' spread here, changes nothing). A gap of 3 seed-to-seed sds over 5 seeds is called nearly always.
// With the runs' noise as large as the seeds' spread, the floor makes it rarer than 5%.
TEST(ExamplesSeeds, NoGapIsCalledAboutFivePercentOfTheTime) {
  const double three = call_rate(3, 0.0, 0.01, 6000), five = call_rate(5, 0.0, 0.01, 6000);
  EXPECT_GT(three, 0.035);
  EXPECT_LT(three, 0.065);
  EXPECT_GT(five, 0.035);
  EXPECT_LT(five, 0.065);
  EXPECT_GT(call_rate(5, 3.0, 0.01, 2000), 0.9);
  EXPECT_LT(call_rate(3, 0.0, 1.0, 6000), 0.035);
}

using extest::curve_of;

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
namespace {
const std::string kExp3 = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + " --quick --task copy --quiet";
}  // namespace

TEST(ExamplesSeeds, SeedsFlagErrors) {
  const extest::fs::path dir = extest::temp_dir("seeds_flag");
  const std::string out = " --steps 1 --threads 1 --out " + (dir / "out").string();
  const struct {
    std::string flags, says;
  } cases[] = {
      {"--seeds 3,5,3", "--seeds: seed 3 is given twice"},
      {"--seeds 1,2 --seed 4", "--seed excludes --seeds"},
      {"--seeds 1,2 --save " + (dir / "c.safetensors").string(), "--save excludes --seeds"},
      {"--seeds 1,2 --resume " + (dir / "c.safetensors").string(), "--resume excludes --seeds"},
      {"--seeds -1,2", "expected a whole number from 0 to 18446744073709551615, got '-1'"},
      {"--seeds 42,abc", "expected a whole number from 0 to 18446744073709551615, got 'abc'"},
  };
  for (const auto& c : cases) {
    const extest::RunResult r = extest::run(kExp3 + out + " " + c.flags, dir);
    EXPECT_EQ(r.status, 2) << c.flags << "\n" << r.err;
    EXPECT_TRUE(extest::contains(r.err, c.says)) << c.flags << "\n" << r.err;
  }
  std::string many = "0";
  for (int s = 1; s <= int(kMaxSeeds); ++s) {
    many += ',';
    many += std::to_string(s);
  }
  const extest::RunResult r = extest::run(kExp3 + out + " --seeds " + many, dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--seeds: expected at most 100 seeds, got 101")) << r.err;
  EXPECT_FALSE(extest::fs::exists(dir / "out" / "prenorm_vs_postnorm.md"));
  extest::fs::remove_all(dir);
}

// Two seeds 1 apart share a generator: seed s + 1's weights come from the one that drew seed s's batches.
// The trainers say so on stderr and in the summary; 42,2,7 says nothing.
TEST(ExamplesSeeds, AdjacentSeedsAreNoted) {
  using ng::examples::adjacent_seeds_note;
  EXPECT_EQ(adjacent_seeds_note({42, 2, 7}), "");
  EXPECT_EQ(adjacent_seeds_note({42}), "");
  EXPECT_EQ(adjacent_seeds_note({UINT64_MAX, 0}), "");  // no wrap-around
  EXPECT_EQ(
      adjacent_seeds_note({43, 7, 42}),
      "Seeds 42 and 43 differ by 1: a run draws its batches with seed + 1, so seed 43's initial weights "
      "come from the generator that drew seed 42's batches, and the two seeds are not independent draws "
      "(seeds at least 2 apart, e.g. 42,2,7, are).");
  const extest::fs::path dir = extest::temp_dir("seeds_adjacent");
  const extest::RunResult r =
      extest::run(kExp3 + " --steps 2 --threads 1 --seeds 5,6 --out " + (dir / "out").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(r.err, "note: Seeds 5 and 6 differ by 1")) << r.err;
  EXPECT_TRUE(
      extest::contains(extest::slurp(dir / "out" / "prenorm_vs_postnorm.md"), adjacent_seeds_note({5, 6})));
#ifdef NG_EXP2_NORM_COMPARISON_PATH
  const extest::RunResult r2 = extest::run(
      std::string(NG_EXP2_NORM_COMPARISON_PATH) +
          " --task copy --quiet --steps 2 --threads 1 --seeds 9,8 --out " + (dir / "out2").string(),
      dir);
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_TRUE(extest::contains(r2.err, "note: Seeds 8 and 9 differ by 1")) << r2.err;
  EXPECT_TRUE(
      extest::contains(extest::slurp(dir / "out2" / "norm_comparison.md"), adjacent_seeds_note({9, 8})));
#endif
  extest::fs::remove_all(dir);
}

// `--seeds 42,2`: seed 42's curves are those of a plain `--seed 42` run, and every across-seed line in the
// summary is the rule applied to the CSV's curves. `--seeds 42` alone writes the `--seed 42` files.
// The trainers run on one thread here, as in the paired tests: under `ctest -j2` on 2 cores, a trainer's two
// OpenMP threads share the cores with another test and wait at every barrier (the exp2 test below took 76 s
// beside the suite with --threads 2, 24 s with --threads 1, 12 s alone).
TEST(ExamplesSeeds, Exp3AcrossSeedsFromItsOwnCurves) {
  const size_t steps = 10;  // the fewest the rule compares (10 blocks of 1 step); 20 before stop 49
  const extest::fs::path dir = extest::temp_dir("seeds_exp3");
  const std::string exe = kExp3 + " --threads 1 --steps " + std::to_string(steps) + " --out ";
  const std::string single = "seed", one = "seeds1", two = "seeds2";
  for (const auto& [folder, flags] : {std::pair<std::string, std::string>{single, "--seed 42"},
                                      {one, "--seeds 42"},
                                      {two, "--seeds 42,2"}}) {
    const extest::RunResult r = extest::run(exe + (dir / folder).string() + " " + flags, dir);
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.err;
  }
  for (const char* ext : {".csv", ".png"}) {
    EXPECT_EQ(extest::slurp(dir / single / ("prenorm_vs_postnorm" + std::string(ext))),
              extest::slurp(dir / one / ("prenorm_vs_postnorm" + std::string(ext))))
        << ext;
  }
  const auto single_rows = extest::read_csv(dir / single / "prenorm_vs_postnorm.csv");
  const auto rows = extest::read_csv(dir / two / "prenorm_vs_postnorm.csv");
  const std::string md = extest::slurp(dir / two / "prenorm_vs_postnorm.md");
  EXPECT_TRUE(extest::contains(md, "seeds 42 and 2 (every run once per seed)")) << md;
  EXPECT_TRUE(extest::contains(md, "| Post-LN 8L | 2 | 0.0001 |")) << md;
  for (int layers : {4, 8}) {
    const std::string panel = std::to_string(layers) + " layers: training loss";
    const std::string L = std::to_string(layers) + "L";
    // seed 42 of the pair is the plain run, step for step
    EXPECT_EQ(curve_of(rows, panel, "Pre-LN " + L + " seed 42 ("),
              curve_of(single_rows, panel, "Pre-LN " + L));
    std::vector<PairedDiff> per_seed;
    for (const std::string seed : {"42", "2"}) {
      const std::vector<double> pre = curve_of(rows, panel, "Pre-LN " + L + " seed " + seed + " (");
      const std::vector<double> post = curve_of(rows, panel, "Post-LN " + L + " seed " + seed + " (");
      ASSERT_EQ(pre.size(), steps);
      per_seed.push_back(paired_diff(pre, post, 100));
      EXPECT_TRUE(extest::contains(md, "  - seed " + seed + ": Pre-LN final ")) << md;
      EXPECT_TRUE(extest::contains(md, paired_text(per_seed.back(), "Pre-LN " + L, "Post-LN " + L))) << md;
    }
    const SeedSpread s = seed_spread(per_seed);
    EXPECT_TRUE(s.computed());
    EXPECT_TRUE(extest::contains(md, "- " + std::to_string(layers) + " layers, " +
                                         seed_text(s, "Pre-LN " + L, "Post-LN " + L) + ".\n"))
        << md;
    // the per-seed panel plots the same gaps
    const auto gaps =
        extest::select(rows, "bar", "seed 42", "Pre-LN minus Post-LN, paired over the last 100, per seed");
    ASSERT_EQ(gaps.size(), 2u);
    EXPECT_NEAR(std::stod(gaps[layers == 4 ? 0 : 1].y), per_seed[0].mean, 1e-6);
  }
  extest::fs::remove_all(dir);
}
#endif

#ifdef NG_EXP2_NORM_COMPARISON_PATH
// exp2 --seeds 42,2 on the copy task: every across-seed line is the rule applied to the CSV's curves, with
// each seed's paired difference under it; the first seed's curves are those of a plain --seed 42 run (that
// run is left out under the sanitizers, where exp2 is 20 to 50 times slower: exp3's test makes the same
// comparison there).
TEST(ExamplesSeeds, Exp2AcrossSeedsFromItsOwnCurves) {
  const size_t steps = 10;  // the fewest the rule compares (10 blocks of 1 step); 20 before stop 49
  const extest::fs::path dir = extest::temp_dir("seeds_exp2");
  const std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) +
                          " --task copy --threads 1 --quiet --steps " + std::to_string(steps) + " --out ";
  extest::RunResult r = extest::run(exe + (dir / "two").string() + " --seeds 42,2", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = extest::read_csv(dir / "two" / "norm_comparison.csv");
  const std::string md = extest::slurp(dir / "two" / "norm_comparison.md");
  const std::string panel = "Training loss (copy)";
  const std::vector<std::string> names = {"NoNorm", "Post-LN + LayerNorm", "Pre-LN + LayerNorm",
                                          "Pre-LN + RMSNorm"};
  EXPECT_TRUE(extest::contains(md, "## What seed 42's run shows")) << md;
  EXPECT_TRUE(extest::contains(md, "## Across the seeds")) << md;
  EXPECT_TRUE(extest::contains(md, "| Pre-LN + RMSNorm | 2 | 0.0005 |")) << md;
  const std::pair<size_t, size_t> pairs[] = {{2, 1}, {3, 1}, {3, 2}};
  for (const auto& [a, b] : pairs) {
    std::vector<PairedDiff> per_seed;
    for (const std::string seed : {"42", "2"}) {
      const std::vector<double> ca = curve_of(rows, panel, names[a] + " seed " + seed);
      const std::vector<double> cb = curve_of(rows, panel, names[b] + " seed " + seed);
      ASSERT_EQ(ca.size(), steps);
      per_seed.push_back(paired_diff(ca, cb, 50));
      EXPECT_TRUE(per_seed.back().computed());
      EXPECT_TRUE(extest::contains(
          md, "  - seed " + seed + ": " + paired_text(per_seed.back(), names[a], names[b]) + ".\n"))
          << md;
    }
    EXPECT_TRUE(extest::contains(md, "- " + names[a] + " against " + names[b] + ", " +
                                         seed_text(seed_spread(per_seed), names[a], names[b]) + ".\n"))
        << md;
  }
  // every config's final losses, one per seed
  for (const std::string& name : names) {
    const double f42 = ng::examples::mean_last(curve_of(rows, panel, name + " seed 42"), 50);
    const double f2 = ng::examples::mean_last(curve_of(rows, panel, name + " seed 2"), 50);
    EXPECT_TRUE(extest::contains(
        md, "- " + name + ": final loss " + num(f42, 4) + ", " + num(f2, 4) + " (every seed finished).\n"))
        << md;
  }
  if (!extest::kSanitized) {
    r = extest::run(exe + (dir / "one").string() + " --seed 42", dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const auto single = extest::read_csv(dir / "one" / "norm_comparison.csv");
    for (const std::string& name : names)
      EXPECT_EQ(curve_of(rows, panel, name + " seed 42"), curve_of(single, panel, name)) << name;
  }
  extest::fs::remove_all(dir);
}
#endif
