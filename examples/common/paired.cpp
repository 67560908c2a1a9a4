// Paired differences of two loss curves (the rule is derived in paired.h).
#include "examples/common/paired.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "examples/common/report.h"
#include "tensor/error.h"

namespace ng::examples {

bool PairedDiff::computed() const {
  return std::isfinite(mean) && std::isfinite(se);
}

bool PairedDiff::resolved() const {
  return computed() && std::abs(mean) > kT975 * se;
}

PairedDiff paired_diff(const std::vector<double>& a, const std::vector<double>& b, size_t window) {
  NG_CHECK(a.size() == b.size(), "paired_diff",
           "the two loss curves must have one loss per step each, the same number; got ", a.size(), " and ",
           b.size());
  PairedDiff d;
  const size_t per_block = std::min(window, a.size()) / PairedDiff::kBlocks;
  d.steps = per_block * PairedDiff::kBlocks;
  if (per_block == 0) return d;  // fewer steps than blocks: nothing to compute

  // d_k over the window, the last `steps` steps of both curves
  const size_t first = a.size() - d.steps;
  std::vector<double> block_mean(PairedDiff::kBlocks, 0.0);  // sums first, then means
  for (size_t k = 0; k < d.steps; ++k) {
    const double dk = a[first + k] - b[first + k];
    if (!std::isfinite(dk)) return d;  // a non-finite loss: not computed
    block_mean[k / per_block] += dk;
  }
  for (double& m : block_mean) m /= double(per_block);

  // D: the mean of the block means (every block has the same length)
  double sum = 0;
  for (double m : block_mean) sum += m;
  d.mean = sum / double(PairedDiff::kBlocks);

  // SE: the sample standard deviation of the block means, over sqrt(kBlocks)
  double ss = 0;
  for (double m : block_mean) ss += (m - d.mean) * (m - d.mean);
  const double sd = std::sqrt(ss / double(PairedDiff::kBlocks - 1));
  d.se = sd / std::sqrt(double(PairedDiff::kBlocks));
  return d;
}

bool ItemDiff::resolved() const {
  return std::isfinite(mean) && std::isfinite(se) && std::abs(mean) > kZ975 * se;
}

ItemDiff item_diff(const std::vector<double>& a, const std::vector<double>& b) {
  NG_CHECK(a.size() == b.size(), "item_diff",
           "the two models must be scored on the same items, one score each; got ", a.size(), " and ",
           b.size(), " scores");
  ItemDiff d;
  const size_t n = a.size();
  if (n < 2) return d;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += a[i] - b[i];
  const double mean = sum / double(n);
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
  if (!std::isfinite(mean) || !std::isfinite(ss)) return d;
  d.mean = mean;
  d.se = std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
  return d;
}

std::string item_diff_text(const ItemDiff& d) {
  return num(d.mean, 3) + " ± " + num(d.se, 2);
}

PairedDiff level_diff(const std::vector<double>& curve, double level, size_t window) {
  return paired_diff(curve, std::vector<double>(curve.size(), level), window);
}

std::string paired_rule_text(const std::string& what, const std::string& who, size_t window) {
  return what + " are ranked by their paired difference: " + who +
         " see the same batches, so the difference of their losses step by step, over the last " +
         std::to_string(window) + " steps, cancels what each batch adds. Its standard error comes from " +
         std::to_string(PairedDiff::kBlocks) + " block means, and a gap counts only beyond " +
         num(PairedDiff::kT975, 3) +
         " standard errors (examples/common/paired.h). That is this run's batch-to-batch noise; another seed "
         "can move all the curves by more.";
}

std::string standard_errors_text(double mean, double se) {
  const double z = mean == 0 ? 0.0 : std::abs(mean) / se;
  char text[32];
  if (z < 1000)
    std::snprintf(text, sizeof(text), z < 10 ? "%.1f" : "%.0f", z);
  else
    std::snprintf(text, sizeof(text), "over 1000");
  return text;
}

namespace {
// paired_text and paired_average_text: where the two runs end, or how they compare over a whole run.
std::string paired_clause(const PairedDiff& d, const std::string& a_name, const std::string& b_name,
                          bool average, const std::string& noise = "this run's noise") {
  if (!d.computed())
    return a_name + " and " + b_name + " are not compared: " +
           (d.steps == 0
                ? "fewer steps than the rule's " + std::to_string(PairedDiff::kBlocks) + " blocks"
                : std::string("a loss in their last ") + std::to_string(d.steps) + " steps is not finite");
  const std::string paired = std::string(average ? ", paired over " : ", paired over the last ") +
                             std::to_string(d.steps) + " steps: " + standard_errors_text(d.mean, d.se) +
                             " standard errors";
  if (!d.resolved())
    return a_name + " and " + b_name +
           (average ? " are within " + noise + " on average (" : " end within " + noise + " (") + a_name +
           " minus " + b_name + " = " + num(d.mean, 2) + " ± " + num(d.se, 2) + paired + ", under " +
           num(PairedDiff::kT975, 3) + ")";
  const bool a_lower = d.mean < 0;
  const std::string& lower = a_lower ? a_name : b_name;
  const std::string& higher = a_lower ? b_name : a_name;
  return (average ? lower + "'s loss is lower than " + higher + "'s on average by "
                  : lower + " ends lower than " + higher + " by ") +
         num(std::abs(d.mean), 3) + " ± " + num(d.se, 2) + " (" + paired.substr(2) + ")";
}
}  // namespace

std::string paired_text(const PairedDiff& d, const std::string& a_name, const std::string& b_name,
                        const std::string& noise) {
  return paired_clause(d, a_name, b_name, false, noise);
}

std::string paired_average_text(const PairedDiff& d, const std::string& a_name, const std::string& b_name) {
  return paired_clause(d, a_name, b_name, true);
}

std::string lead_text(const PairedDiff& d) {
  if (!d.resolved()) return ", but not clearly ahead of the next: ";
  return d.mean < 0 ? ", ahead of the next beyond this run's noise: "
                    : ", though paired step by step the next ends lower: ";
}

}  // namespace ng::examples
