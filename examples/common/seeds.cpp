// A comparison across seeds (the rule is derived in seeds.h).
#include "examples/common/seeds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "examples/common/report.h"
#include "tensor/error.h"

namespace ng::examples {

double t975(size_t dof) {
  NG_CHECK(dof >= 1, "t975", "expected at least 1 degree of freedom, got 0");
  // Student's t, 97.5% quantile, 1 to 30 degrees of freedom (to 4 decimals)
  static constexpr double kTable[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                        2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                        2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                        2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (dof <= 30) return kTable[dof - 1];

  // Cornish-Fisher: t = z + g1(z)/nu + g2(z)/nu^2 + g3(z)/nu^3 + g4(z)/nu^4, z the normal's 97.5% quantile
  const double z = 1.959963984540054, nu = double(dof);
  const double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
  const double g1 = (z3 + z) / 4;
  const double g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
  const double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
  const double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
  return z + g1 / nu + g2 / (nu * nu) + g3 / (nu * nu * nu) + g4 / (nu * nu * nu * nu);
}

bool SeedSpread::computed() const {
  return n >= 2 && std::isfinite(mean) && std::isfinite(sd) && std::isfinite(noise);
}

bool SeedSpread::resolved() const {
  return computed() && std::abs(mean) > t_crit * se;
}

SeedSpread seed_spread(const std::vector<PairedDiff>& per_seed) {
  SeedSpread s;
  double sum = 0, noise_ss = 0;
  for (const PairedDiff& p : per_seed) {
    s.d.push_back(p.computed() ? p.mean : std::nan(""));
    if (!p.computed()) continue;
    ++s.n;
    sum += p.mean;
    noise_ss += p.se * p.se;
    s.a_lower += p.mean < 0;
    s.b_lower += p.mean > 0;
  }
  if (s.n < 2) return s;

  // M, then S from the deviations (two passes: no cancellation)
  s.mean = sum / double(s.n);
  double ss = 0;
  for (double d : s.d)
    if (std::isfinite(d)) ss += (d - s.mean) * (d - s.mean);
  s.sd = std::sqrt(ss / double(s.n - 1));
  // no seed-to-seed sd below the runs' own noise (seeds.h)
  s.noise = std::sqrt(noise_ss / double(s.n));
  s.se = std::max(s.sd, s.noise) / std::sqrt(double(s.n));
  s.t_crit = t975(s.n - 1);
  return s;
}

std::string seed_rule_text(const std::vector<uint64_t>& seed_list) {
  const size_t seeds = seed_list.size();
  const std::string adjacent = adjacent_seeds_note(seed_list);
  return "Across the " + std::to_string(seeds) +
         " seeds, each seed's paired difference counts as one draw of the gap a seed shows. A gap counts "
         "when their mean is beyond " +
         num(t975(seeds > 1 ? seeds - 1 : 1), 3) +
         " standard errors (Student's t with one degree of freedom fewer than the seeds; a comparison in "
         "which some seeds diverged has fewer, and its line gives its own larger t), the standard error "
         "coming from their seed-to-seed spread, or from the runs' own noise where that is larger. The "
         "summary also counts the seeds in which each run ended lower (examples/common/seeds.h)." +
         (adjacent.empty() ? "" : " " + adjacent);
}

std::string seed_text(const SeedSpread& s, const std::string& a_name, const std::string& b_name) {
  const std::string across = "across " + std::to_string(s.d.size()) + " seeds, ";
  if (!s.computed())
    return across + a_name + " and " + b_name + " are not ranked: " + std::to_string(s.n) +
           (s.n == 1 ? " seed gives" : " seeds give") + " a paired difference, and it takes two";
  const std::string of_seeds = s.n == s.d.size() ? std::to_string(s.n) + " seeds"
                                                 : std::to_string(s.n) + " seeds that gave one (of " +
                                                       std::to_string(s.d.size()) + ")";
  const std::string t_text = num(s.t_crit, 3) + " of Student's t with " + std::to_string(s.n - 1) +
                             (s.n == 2 ? " degree" : " degrees") + " of freedom";
  const std::string spread =
      "the mean of the seeds' paired differences, seed-to-seed sd " + num(s.sd, 2) +
      (s.sd < s.noise ? ", under the runs' own noise " + num(s.noise, 2) + ", which is used instead" : "") +
      ": " + standard_errors_text(s.mean, s.se) + " standard errors";
  const std::string count_a = a_name + " lower in " + std::to_string(s.a_lower) + " of " + of_seeds;
  const std::string count_b = b_name + " lower in " + std::to_string(s.b_lower) + " of " + of_seeds;
  if (!s.resolved())
    return across + a_name + " and " + b_name + " are not ranked (" + a_name + " minus " + b_name + " = " +
           num(s.mean, 2) + " ± " + num(s.se, 2) + ", " + spread + ", under the " + t_text + "); " + count_a +
           ", " + count_b;
  const bool a_lower = s.mean < 0;
  return across + (a_lower ? a_name : b_name) + " ends lower than " + (a_lower ? b_name : a_name) + " by " +
         num(std::abs(s.mean), 3) + " ± " + num(s.se, 2) + " (" + spread + ", beyond the " + t_text + "); " +
         (a_lower ? count_a : count_b);
}

std::string seed_list_text(const std::vector<uint64_t>& seeds) {
  std::string text;
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (i > 0) text += i + 1 == seeds.size() ? " and " : ", ";
    text += std::to_string(seeds[i]);
  }
  return text;
}

std::string adjacent_seeds_note(const std::vector<uint64_t>& seeds) {
  for (size_t i = 0; i < seeds.size(); ++i)
    for (size_t j = 0; j < seeds.size(); ++j)
      if (seeds[i] != UINT64_MAX && seeds[j] == seeds[i] + 1) {
        const std::string a = std::to_string(seeds[i]), b = std::to_string(seeds[j]);
        return "Seeds " + a + " and " + b + " differ by 1: a run draws its batches with seed + 1, so seed " +
               b + "'s initial weights come from the generator that drew seed " + a +
               "'s batches, and the two seeds are not independent draws (seeds at least 2 apart, e.g. "
               "42,2,7, are).";
      }
  return "";
}

std::string other_seeds_key(const std::vector<uint64_t>& seeds) {
  if (seeds.size() < 2) return "";
  const std::vector<uint64_t> others(seeds.begin() + 1, seeds.end());
  return (others.size() == 1 ? "seed " : "seeds ") + seed_list_text(others) + ": dashed";
}

}  // namespace ng::examples
