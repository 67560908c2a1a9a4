// Experiment 6 (examples/exp6_lr_tolerance.cpp) end to end: the table's cells are the CSV's final losses
// with the rules' marks, the count of rates each config trained at follows from them, and
// the summary's verdicts (the lesson's order, "Post-LN needs lr < 1e-4") follow from those counts.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "examples/common/lm_task.h"
#include "examples/common/report.h"
#include "tests/examples_test_util.h"

using namespace ng::examples;

#ifdef NG_EXP6_LR_TOLERANCE_PATH
namespace {

const std::string kExp6 = std::string(NG_EXP6_LR_TOLERANCE_PATH);
const std::vector<std::string> kConfigs = {"NoNorm", "Post-LN + LayerNorm", "Pre-LN + LayerNorm",
                                           "Pre-LN + RMSNorm"};

}  // namespace

// A small text, two rates: 1e-3 (trains on this repetitive text) and 10 (where no run trains).
TEST(Exp6LrTolerance, SummaryFollowsItsRules) {
  const int steps = extest::kSanitized ? 10 : 20;  // at least 10: the trained rule's 10 blocks
  const std::vector<double> lrs = {1e-3, 10};
  const extest::fs::path dir = extest::temp_dir("exp6");
  extest::write_file(dir / "corpus.txt", extest::small_corpus());
  const extest::RunResult r =
      extest::run(kExp6 + " --quiet --threads 1 --steps " + std::to_string(steps) +
                      " --lrs 10,1e-3,1e-3 --save x.safetensors --data " + (dir / "corpus.txt").string() +
                      " --out " + (dir / "run").string(),
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(r.err, "--save does not apply to this experiment")) << r.err;
  for (const char* ext : {".png", ".csv", ".md", ".cmd.txt"})
    EXPECT_TRUE(extest::fs::exists(dir / "run" / (std::string("lr_tolerance") + ext))) << ext;
  const auto rows = extest::read_csv(dir / "run" / "lr_tolerance.csv");
  const std::string md = extest::slurp(dir / "run" / "lr_tolerance.md");
  const double cf = LMTask::shakespeare((dir / "corpus.txt").string()).context_free_loss();
  EXPECT_TRUE(extest::contains(md, "The context-free loss is " + num(cf, 4))) << md;

  // The final losses, one per config and rate (sorted, the repeat dropped); NaN where a run diverged.
  const std::string panel = "Final loss (mean of the last 50 steps)";
  std::map<std::string, std::map<double, double>> final_loss;
  for (const std::string& c : kConfigs) {
    for (const extest::CsvRow& row : extest::select(rows, "line", c))
      if (row.series == c && row.panel.rfind(panel, 0) == 0)
        final_loss[c][std::stod(row.x)] = std::stod(row.y);
    ASSERT_EQ(final_loss[c].size(), lrs.size()) << c;
  }
  // Each table row: the cells with their marks, and the count of rates it trained at.
  std::vector<int> trained(kConfigs.size(), 0);
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    ASSERT_TRUE(extest::contains(md, "| " + kConfigs[c] + " |")) << md;
    const std::string line = md.substr(md.find("| " + kConfigs[c] + " |"));
    const std::string row = line.substr(0, line.find('\n'));
    size_t at = 0;
    for (double lr : lrs) {  // the cells in order, each found after the last
      // Trained is decided against the run's own noise (level_diff, tested in ExamplesPaired): a final
      // loss at or above the context-free loss is never trained, one far below it always is, and the cell
      // says which.
      const double f = final_loss[kConfigs[c]].at(lr);
      if (!std::isfinite(f)) {
        const size_t found = row.find(" NaN at step ", at);
        ASSERT_NE(found, std::string::npos) << row;
        at = found + 1;
        continue;
      }
      const std::string value = " " + num(f, 4);
      const size_t found = row.find(value, at);
      ASSERT_NE(found, std::string::npos) << value << " in " << row;
      at = found + value.size();
      const bool t = row.compare(at, 2, " |") == 0;
      if (!t) {
        EXPECT_EQ(row.compare(at, 16, " (not trained) |"), 0) << row;
      }
      if (f >= cf) {
        EXPECT_FALSE(t) << kConfigs[c] << " at " << lr << ": " << f;
      }
      if (f < cf - 0.3) {
        EXPECT_TRUE(t) << kConfigs[c] << " at " << lr << ": " << f;
      }
      trained[c] += t;
    }
    EXPECT_TRUE(extest::contains(row, "| " + std::to_string(trained[c]) + " of 2 |")) << row;
  }
  EXPECT_GT(trained[3], 0) << "Pre-LN + RMSNorm should train at 1e-3 on this text\n" << md;

  // The lesson's order, pair by pair, by the counts; neighbours with the same count are paired at the
  // highest rate both trained at (here 1e-3, the only one any trained at).
  std::string order;
  bool all = true;
  for (size_t c = 0; c + 1 < kConfigs.size(); ++c) {
    const int a = trained[c], b = trained[c + 1];
    all = all && b > a;
    order += std::string(c == 0 ? "" : "; ") + kConfigs[c + 1] + " " +
             (b > a    ? "more than"
              : b == a ? "as many as"
                       : "fewer than") +
             " " + kConfigs[c] + " (" + std::to_string(b) + " against " + std::to_string(a) + ")";
    const std::string tie = "- " + kConfigs[c + 1] + " and " + kConfigs[c] + " trained at as many rates (" +
                            std::to_string(a) + "). At lr 0.001, the highest both trained at: ";
    EXPECT_EQ(extest::contains(md, tie), a == b && a > 0) << tie << "\n" << md;
  }
  EXPECT_TRUE(extest::contains(md, "by the number of rates each config trained at: " +
                                       std::string(all ? "**held**: " : "**did not hold** in full: ") +
                                       order + "."))
      << md;
  // Every swept rate is 1e-4 or more: the claim fails where Post-LN trained at any of them.
  std::vector<std::string> post;
  for (double lr : lrs)
    if (std::isfinite(final_loss[kConfigs[1]].at(lr)) && final_loss[kConfigs[1]].at(lr) < cf)
      post.push_back(num(lr, 3));
  if (post.empty()) {
    EXPECT_TRUE(extest::contains(md, "not decided: Post-LN trained at no swept rate at all")) << md;
  } else {
    std::string list;
    for (size_t i = 0; i < post.size(); ++i)
      list += (i == 0 ? "" : i + 1 == post.size() ? " and " : ", ") + post[i];
    EXPECT_TRUE(extest::contains(md, "**did not hold**: Post-LN trained at " + list + ".")) << md;
  }
}

// Bad values are usage errors, before any training.
TEST(Exp6LrTolerance, FlagsAreChecked) {
  const extest::fs::path dir = extest::temp_dir("exp6_flags");
  const std::string base = kExp6 + " --quiet --task copy --out " + (dir / "o").string();
  extest::RunResult r = extest::run(base + " --lrs 1e-3,0", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--lrs")) << r.err;
  r = extest::run(base + " --steps 20 --warmup 20", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--warmup")) << r.err;
  r = extest::run(base + " --task poetry", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(extest::contains(r.err, "--task")) << r.err;
  EXPECT_FALSE(extest::fs::exists(dir / "o" / "lr_tolerance.md"));
}
#endif
