// Experiment 5 (examples/exp5_batch_size.cpp) end to end: BatchNorm refuses batch 1 with the library's
// message, the summary's table is the CSV's numbers, its verdicts follow their rules from the numbers the
// CSV holds, the run does not depend on the thread count, and its own flags are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "tests/examples_test_util.h"

using namespace ng::examples;

#ifdef NG_EXP5_BATCH_SIZE_PATH
namespace {

const std::string kExp5 = std::string(NG_EXP5_BATCH_SIZE_PATH);
const std::vector<std::string> kNorms = {"no norm", "BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm"};

// One line series of exactly this name in `panel`, as (x, y) pairs.
std::map<double, double> points(const std::vector<extest::CsvRow>& rows, const std::string& panel,
                                const std::string& name) {
  std::map<double, double> out;
  for (const extest::CsvRow& r : extest::select(rows, "line", name, panel))
    if (r.series == name) out[std::stod(r.x)] = std::stod(r.y);
  return out;
}

}  // namespace

// The synthetic Markov task, batch sizes 1, 2, 4 and 8 on 256 samples each (under the sanitizers 64 on
// 1, 2 and 8).
TEST(Exp5BatchSize, SummaryIsComputedFromItsOwnRuns) {
  const int samples = extest::kSanitized ? 64 : 256;
  const std::vector<int> batches =
      extest::kSanitized ? std::vector<int>{1, 2, 8} : std::vector<int>{1, 2, 4, 8};
  const std::string batch_flag = extest::kSanitized ? "1,2,8" : "8,4,2,1,2";  // sorted, a repeat dropped
  const extest::fs::path dir = extest::temp_dir("exp5");
  const std::string cmd = kExp5 + " --task markov --quick --quiet --val-windows 256 --samples " +
                          std::to_string(samples) + " --batches " + batch_flag + " --out ";
  const extest::RunResult r = extest::run(cmd + (dir / "run").string() + " --threads 1", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* ext : {".png", ".csv", ".md", ".cmd.txt"})
    EXPECT_TRUE(extest::fs::exists(dir / "run" / (std::string("batch_size") + ext))) << ext;
  const auto rows = extest::read_csv(dir / "run" / "batch_size.csv");
  const std::string md = extest::slurp(dir / "run" / "batch_size.md");

  // The final validation losses: one point per batch size and norm; BatchNorm has none at batch 1.
  const std::string panel = "Validation loss after " + std::to_string(samples) + " samples (eval mode)";
  std::map<std::string, std::map<double, double>> val;
  for (const std::string& n : kNorms) {
    val[n] = points(rows, panel, n);
    ASSERT_EQ(val[n].size(), batches.size()) << n;
    for (int b : batches)
      EXPECT_EQ(std::isfinite(val[n][b]), !(n == "BatchNorm" && b == 1)) << n << " at batch " << b;
  }
  // The table holds those numbers, and each batch size's steps: samples / B.
  for (int b : batches) {
    std::string row = "| " + std::to_string(b) + " | " + std::to_string(samples / b) + " |";
    for (const std::string& n : kNorms)
      row += " " + (std::isfinite(val[n][b]) ? num(val[n][b], 4) : std::string("refused")) + " |";
    EXPECT_TRUE(extest::contains(md, row)) << row << "\n" << md;
  }
  // Batch 1: BatchNorm refused with the library's message; the per-sample norms trained.
  EXPECT_TRUE(extest::contains(
      md,
      "BatchNorm cannot train on one sample, and the library says so before any step: `batch_norm: "
      "expected more than 1 value per channel when training, got input of shape (1, 256)"))
      << md;
  EXPECT_TRUE(
      extest::contains(md, "**held.** At batch 1 every per-sample norm trained (validation LayerNorm " +
                               num(val["LayerNorm"][1], 4) + ", RMSNorm " + num(val["RMSNorm"][1], 4) +
                               " and GroupNorm " + num(val["GroupNorm"][1], 4) + ")"))
      << md;

  // BatchNorm minus the best per-sample norm, and its 95% interval: the best is the lowest of the three at
  // that batch size, and the "with the batch size" verdict lists each size by whether the interval holds 0.
  const std::string gap_panel = "BatchNorm minus the best per-sample norm";
  const auto gap = points(rows, gap_panel, "BatchNorm minus best");
  const auto low = points(rows, gap_panel, "95% interval: low end");
  const auto high = points(rows, gap_panel, "95% interval: high end");
  std::vector<std::string> worse, even, better;
  for (int b : batches) {
    if (b == 1) {
      EXPECT_EQ(gap.count(1), 0u);
      continue;
    }
    const double best = std::min({val["LayerNorm"][b], val["RMSNorm"][b], val["GroupNorm"][b]});
    EXPECT_NEAR(gap.at(b), val["BatchNorm"][b] - best, 1e-6) << b;  // the same windows: means subtract
    EXPECT_NEAR(gap.at(b) - low.at(b), high.at(b) - gap.at(b), 1e-6) << b;
    (low.at(b) > 0 ? worse : high.at(b) < 0 ? better : even).push_back(std::to_string(b));
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
    return s;
  };
  std::string verdict = "against the best per-sample norm at each batch size, BatchNorm ends ", sep;
  if (!worse.empty())
    verdict += sep + "above it beyond noise at batch size" + (worse.size() > 1 ? "s " : " ") + list(worse),
        sep = "; ";
  if (!even.empty()) verdict += sep + "within noise of it at " + list(even), sep = "; ";
  if (!better.empty()) verdict += sep + "below it beyond noise at " + list(better);
  EXPECT_TRUE(extest::contains(md, verdict + ".")) << verdict << "\n" << md;

  // The spread of each norm's result over the batch sizes BatchNorm trained at, and the verdict: held
  // when BatchNorm's is larger than each per-sample norm's.
  std::map<std::string, double> spread;
  for (const std::string& n : kNorms) {
    double lo = INFINITY, hi = -INFINITY;
    for (int b : batches)
      if (b > 1) lo = std::min(lo, val[n][b]), hi = std::max(hi, val[n][b]);
    spread[n] = hi - lo;
  }
  const std::string range = "over batch sizes 2 to " + std::to_string(batches.back()) + " BatchNorm's";
  ASSERT_TRUE(extest::contains(md, range)) << md;
  const std::string spans = md.substr(md.find(range));
  // The spans are printed to 3 significant digits.
  for (const std::string& n : {std::string("BatchNorm"), std::string("LayerNorm"), std::string("RMSNorm"),
                               std::string("GroupNorm")}) {
    const std::string key = n + "'s " + (n == "BatchNorm" ? "validation loss spans " : "");
    ASSERT_TRUE(extest::contains(spans, key)) << key;
    const double printed = std::stod(spans.substr(spans.find(key) + key.size()));
    EXPECT_NEAR(printed, spread[n], 0.006 * spread[n] + 1e-9) << n;
  }
  const bool largest = spread["BatchNorm"] > spread["LayerNorm"] && spread["BatchNorm"] > spread["RMSNorm"] &&
                       spread["BatchNorm"] > spread["GroupNorm"];
  EXPECT_TRUE(extest::contains(md, largest ? "**Held** in that BatchNorm's result moves the most."
                                           : "**Did not hold**: BatchNorm's result does not move the most."))
      << md;

  // BatchNorm scored with batch statistics: one point per size it trained at, beside the eval-mode one.
  const auto own = points(rows, "BatchNorm scored with running averages or batch statistics",
                          "each block of B windows' own statistics");
  for (int b : batches) {
    EXPECT_EQ(std::isfinite(own.at(b)), b > 1) << b;
    if (b > 1) {
      EXPECT_NE(own.at(b), val["BatchNorm"][b]) << b << ": batch statistics scored like eval mode";
    }
  }
  EXPECT_TRUE(extest::contains(md, "at batch 2 it scores " + num(val["BatchNorm"][2], 4) +
                                       " with its running averages (eval mode) and " + num(own.at(2), 4)))
      << md;

  // The thread count changes no number: the CSV of a 2-thread run is the same bytes.
  const extest::RunResult r2 = extest::run(cmd + (dir / "run2").string() + " --threads 2", dir);
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(extest::slurp(dir / "run" / "batch_size.csv"), extest::slurp(dir / "run2" / "batch_size.csv"));
}

// Its own flags: a sample count that some batch size does not divide, an unknown task, a task whose data
// is missing, a batch size of 0; with no data at all it says so and trains on the Markov text; --steps is
// noted as not applying.
TEST(Exp5BatchSize, FlagsAreCheckedAndTheFallbackIsSaid) {
  const extest::fs::path dir = extest::temp_dir("exp5_flags");
  const std::string out = " --quiet --out " + (dir / "o").string();
  // Run inside the temporary folder, where the default data/tinyshakespeare.txt is not.
  const std::string exp5 = "cd '" + dir.string() + "' && " + kExp5;
  extest::RunResult r = extest::run(exp5 + out + " --samples 100 --batches 1,8", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(
      r.err, "--samples 100 is not a multiple of batch size 8: every batch size must see the same number"))
      << r.err;
  r = extest::run(exp5 + out + " --val-windows 100 --batches 2,8", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--val-windows 100 is not a multiple of batch size 8")) << r.err;
  r = extest::run(exp5 + out + " --task copy", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--task: expected shakespeare or markov, got 'copy'")) << r.err;
  r = extest::run(exp5 + out + " --task shakespeare", dir);  // no data/ in the temporary folder
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--task shakespeare: cannot read data/tinyshakespeare.txt")) << r.err;
  r = extest::run(exp5 + out + " --batches 0", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--batches")) << r.err;
  EXPECT_FALSE(extest::fs::exists(dir / "o" / "batch_size.md"));

  r = extest::run(exp5 + out + " --quick --val-windows 64 --samples 16 --batches 4,8 --steps 3 --threads 1",
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(r.err, "Falling back to a synthetic order-2 Markov text (--task markov)"))
      << r.err;
  EXPECT_TRUE(extest::contains(r.err, "note: --steps does not apply to this experiment")) << r.err;
  EXPECT_TRUE(extest::contains(extest::slurp(dir / "o" / "batch_size.md"), "Task: markov (vocabulary 16)"));

  // A readable --data is the character-level task of that text.
  extest::write_file(dir / "corpus.txt", extest::small_corpus());
  r = extest::run(exp5 + out + " --quick --val-windows 64 --samples 16 --batches 4,8 --threads 1 --data " +
                      (dir / "corpus.txt").string(),
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(extest::contains(r.err, "Falling back")) << r.err;
  EXPECT_TRUE(extest::contains(extest::slurp(dir / "o" / "batch_size.md"), "Task: shakespeare"));
}
#endif
