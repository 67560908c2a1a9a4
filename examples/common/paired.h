// Is one training run's final loss lower than another's, or is the gap this run's noise?
//
// Every run of exp2 and exp3 draws its batches from the same generator seed, so at step k all of them are
// scored on the same text. The per-step difference d_k = a_k - b_k therefore cancels what the batch itself
// adds (a hard batch is hard for both), and what is left varies far less than either curve. In the committed
// exp3 run at one learning rate, the last-100 std of each curve is about 0.06, and the standard error of the
// paired difference about 0.002.
//
// Over the last W steps of both curves (W a multiple of kBlocks):
//
//   D  = (1 / W) sum_k d_k                                   the paired difference
//   SE = sd(m_1 .. m_kBlocks) / sqrt(kBlocks)                 m_j: the mean of d over the j-th block
//
// Neighbouring d_k are not independent (both models change slowly, so a run of steps where a is ahead stays
// ahead for a while). The textbook sd(d) / sqrt(W) assumes they are, and would be too small. Cutting the
// window into kBlocks consecutive blocks and using the spread of the block means ("batch means") absorbs
// correlations shorter than a block. The gap is called when
//
//   |D| > kT975 * SE,   kT975 = 2.2622, the two-sided 95% quantile of Student's t with kBlocks - 1 = 9
//                       degrees of freedom (tests/test_examples_paired.cpp integrates the t density to
//                       check it).
//
// What this does not measure: another seed. Other initial weights and other batches move every curve
// together by more than this (compare stop 44's exp2 rerun with new batches: Pre-LN + RMSNorm went from 1.698
// to 1.693). "Beyond this run's noise" means the gap is not batch-to-batch luck within this run; it does not
// promise that another seed ranks the runs the same way.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace ng::examples {

struct PairedDiff {
  static constexpr size_t kBlocks = 10;
  static constexpr double kT975 = 2.2622;  // Student's t, 9 degrees of freedom, two-sided 95%

  double mean = std::numeric_limits<double>::quiet_NaN();  // D: mean of a_k - b_k over the window
  double se = std::numeric_limits<double>::quiet_NaN();    // SE of D from the block means; NaN: not computed
  size_t steps = 0;                                        // W, the window used

  // D and SE were computed (both curves finite over the window, at least one step per block).
  bool computed() const;
  // The gap is larger than this run's noise: |D| > kT975 * SE.
  bool resolved() const;
};

// The paired difference of a and b over their last `window` steps (rounded down to a multiple of
// kBlocks). a and b are loss curves of the same length, step k of one beside step k of the other; a
// different length is an ng::Error naming both. A window holding a non-finite loss, or shorter than kBlocks
// steps, gives a PairedDiff that is not computed().
PairedDiff paired_diff(const std::vector<double>& a, const std::vector<double>& b, size_t window);

// One curve against a fixed level (exp6: is a run below the context-free loss, or sitting at it?): the
// paired difference of the curve and a flat line at `level`, so the same blocks and the same call.
// D < 0 and resolved(): the curve's last `window` steps are below the level beyond its own noise.
PairedDiff level_diff(const std::vector<double>& curve, double level, size_t window);

// The summary's paragraph on the rule: "<Two runs> are ranked by their paired difference: <all four> see the
// same batches, ... over the last <window> steps ...".
std::string paired_rule_text(const std::string& what, const std::string& who, size_t window);

// One clause for a summary, e.g.
//   "Pre-LN 4L ends lower than Post-LN 4L by 0.215 ± 0.0019 (paired over the last 100 steps: 113 standard
//    errors)"
//   "Pre-LN + LayerNorm and Pre-LN + RMSNorm end within this run's noise (Pre-LN + LayerNorm minus Pre-LN +
//    RMSNorm = 0.0017 ± 0.0024, paired over the last 50 steps: 0.7 standard errors, under 2.26)"
// or why the two are not compared.
// `noise` names whose noise a gap within it is (compare_runs, pairing two runs: "the two runs' noise").
std::string paired_text(const PairedDiff& d, const std::string& a_name, const std::string& b_name,
                        const std::string& noise = "this run's noise");
// The same over a whole run rather than its end (exp4: which run got lower sooner), e.g.
//   "DeepNorm's loss is lower than Post-LN's on average by 0.218 ± 0.034 (paired over 500 steps: 6.3
//    standard errors)"
std::string paired_average_text(const PairedDiff& d, const std::string& a_name, const std::string& b_name);

// How the config ranked first by its final loss stands against the next (d = first minus next), as the
// clause before paired_text: ", ahead of the next beyond this run's noise: " when d is called and negative;
// ", but not clearly ahead of the next: " when not called; ", though paired step by step the next ends
// lower: " when it is called the other way. The final loss is the mean of the last 50 losses and the paired
// difference uses the last multiple of 10 of them, so under 50 steps (or against a resumed run) the two can
// disagree; "ahead" there contradicted the clause after it.
std::string lead_text(const PairedDiff& d);

// ---- two models scored on the same items (exp5: the same validation windows) ----
// The items are independent draws, so, unlike the neighbouring steps of a training curve, their differences
// d_i = a_i - b_i are independent too, and need no blocks:
//
//   D = (1 / n) sum_i d_i        SE = sd(d_1 .. d_n) / sqrt(n)        called when |D| > kZ975 * SE
//
// kZ975 is the normal's two-sided 95% quantile: n is in the thousands, where Student's t is the normal.
// Like paired_diff, this measures the noise of the sample of items only, not what another seed would do.
struct ItemDiff {
  static constexpr double kZ975 = 1.959964;
  double mean = std::numeric_limits<double>::quiet_NaN();
  double se = std::numeric_limits<double>::quiet_NaN();
  bool resolved() const;  // D and SE are finite and |D| > kZ975 * SE
};
// a, b: one score per item, the same items in the same order (a different length is an ng::Error naming
// both). Fewer than 2 items, or a non-finite score, gives an ItemDiff that is not resolved (NaN).
ItemDiff item_diff(const std::vector<double>& a, const std::vector<double>& b);
// "0.918 ± 0.022": D to 3 significant digits, SE to 2.
std::string item_diff_text(const ItemDiff& d);

// How many standard errors |mean| is from 0, as the summaries print it: one decimal below 10, whole below
// 1000, else "over 1000" (an SE of 0, or of rounding error only, makes it infinite or meaningless); "0.0" for
// a mean of exactly 0 (two identical curves). Also used across seeds (seeds.h).
std::string standard_errors_text(double mean, double se);

}  // namespace ng::examples
