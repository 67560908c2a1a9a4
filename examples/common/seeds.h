// Does a ranking hold from one seed to the next?
//
// paired.h ranks two runs of one seed against that run's batch-to-batch noise. A seed also draws the initial
// weights and the batches, and another seed can move every curve by more than that noise (exp3 at one
// learning rate: Pre-LN 8L ended 0.010 apart at seeds 42 and 2, about the size of the gap it was compared
// on). With `--seeds 42,2,7` a trainer trains every config once per seed, and each seed s gives its own
// paired difference D_s (paired.h). The n seeds are n independent draws of "the gap one seed shows":
//
//   M  = (1 / n) sum_s D_s                  the mean gap over the seeds
//   S  = sqrt( sum_s (D_s - M)^2 / (n - 1) )   its seed-to-seed standard deviation
//   SE = S / sqrt(n)   (S floored below)
//
// and the gap is called when |M| > t_{n-1} * SE, t_{n-1} the two-sided 95% quantile of Student's t with
// n - 1 degrees of freedom (t975 below). Few seeds ask for a lot: t_1 = 12.71 with two seeds, t_2 = 4.30
// with three, t_4 = 2.78 with five. Beside the call, the summary counts the seeds in which each run was the
// lower one, which needs no assumption at all.
//
// Each D_s already averages the last W steps, so its own within-run error (paired.h's SE_s) is part of S
// and is not added again. But it also bounds S from below: D_s = (the true gap) + (what seed s adds) +
// (its batch noise), so the variance of D_s is at least the batch noise's, SE_s^2. With a handful of seeds
// the sample S can still come out far smaller by chance (three seeds of an exp3 --quick run gave D_s =
// 0.0464, 0.0475, 0.0475 with SE_s of about 0.009: S = 0.0006). The rule therefore uses
//
//   S' = max(S, R),   R = sqrt( (1 / n) sum_s SE_s^2 )   the runs' own noise
//
// and SE = S' / sqrt(n). That makes the call conservative, never bolder than the t test on S alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "examples/common/paired.h"

namespace ng::examples {

// The two-sided 95% quantile of Student's t with `dof` degrees of freedom (dof >= 1; 0 is an ng::Error).
// A table for 1 to 30, then the Cornish-Fisher expansion around the normal's 1.95996 (within 1e-4 of the
// exact value there; tests/test_examples_seeds.cpp integrates the t density to check both).
double t975(size_t dof);

struct SeedSpread {
  std::vector<double> d;  // D_s, one per seed, in the order of --seeds; NaN where paired.h computed none
  size_t n = 0;           // the seeds with a D_s
  double mean = std::numeric_limits<double>::quiet_NaN();    // M
  double sd = std::numeric_limits<double>::quiet_NaN();      // S, the seed-to-seed sd of the D_s
  double noise = std::numeric_limits<double>::quiet_NaN();   // R, the runs' own noise (the SE_s, rms)
  double se = std::numeric_limits<double>::quiet_NaN();      // max(S, R) / sqrt(n)
  double t_crit = std::numeric_limits<double>::quiet_NaN();  // t975(n - 1)
  size_t a_lower = 0, b_lower = 0;                           // seeds where D_s < 0, where D_s > 0

  // At least two seeds gave a D_s, and M, S and R are finite.
  bool computed() const;
  // |M| > t_crit * SE (an S of 0 with M != 0 counts: every seed showed the same gap).
  bool resolved() const;
};

// The spread of one comparison's paired differences, one per seed.
SeedSpread seed_spread(const std::vector<PairedDiff>& per_seed);

// The summary's paragraph on the rule across seeds, ending with adjacent_seeds_note when it has one.
std::string seed_rule_text(const std::vector<uint64_t>& seeds);

// One clause for a summary, e.g.
//   "across 3 seeds, Post-LN 4L ends lower than Pre-LN 4L by 0.018 ± 0.0012 (the mean of the seeds'
//    paired differences, seed-to-seed sd 0.0021: 15 standard errors, beyond the 4.3 of Student's t with 2
//    degrees of freedom); Post-LN 4L lower in 3 of 3 seeds"
// (with "seed-to-seed sd 0.00061, under the runs' own noise 0.0093, which is used instead" when S < R)
// or "across 3 seeds, A and B are not ranked (A minus B = ...: 1.2 standard errors, under the 4.30 ...); A
// lower in 2 of 3 seeds", or why the seeds cannot rank them.
std::string seed_text(const SeedSpread& s, const std::string& a_name, const std::string& b_name);

// "42, 2 and 7"
std::string seed_list_text(const std::vector<uint64_t>& seeds);

// "" or a note on two seeds that differ by 1. A run draws its weights from Generator(seed) and its batches
// from Generator(seed + 1), so seed s + 1's initial weights come from the very generator (and the same raw
// numbers) that drew seed s's batches: the two are not independent draws. The trainers print the note and
// put it in the summary; seeds at least 2 apart (42,2,7) avoid it.
std::string adjacent_seeds_note(const std::vector<uint64_t>& seeds);

// The loss plots of a --seeds run list the first seed's curves in the legend and draw the others dashed in
// the same colours; this key says so: "seeds 2 and 7: dashed" (a legend of every curve, 12 for exp2's three
// seeds, covered half the plot).
std::string other_seeds_key(const std::vector<uint64_t>& seeds);

}  // namespace ng::examples
