// compare_runs (examples/tools/compare_runs.cpp): two runs' curves paired step by step. Its table against
// paired_diff computed here on the same curves; curves matched by name or by the part before "(...)"; the
// errors; and two exp3 runs, without and with a warmup.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "tests/examples_test_util.h"

using namespace ng::examples;

#ifdef NG_COMPARE_RUNS_PATH
namespace {

const std::string kTool = std::string(NG_COMPARE_RUNS_PATH);

using Curves = std::vector<std::pair<std::string, std::vector<double>>>;

// A run's folder as an experiment leaves it: <stem>.csv with the curves in one panel, "loss" (x = 1, 2, ...),
// and <stem>.cmd.txt.
void write_run(const extest::fs::path& dir, const Curves& curves, const std::string& command) {
  extest::fs::create_directories(dir);
  Csv csv;
  csv.header = {"panel", "kind", "series", "x", "y"};
  for (const auto& [name, y] : curves)
    for (size_t k = 0; k < y.size(); ++k)
      csv.rows.push_back({"loss", "line", name, num(double(k + 1), 9), num(y[k], 9)});
  csv.rows.push_back({"loss", "hline", "uniform guess", "", "4.17"});  // not a curve
  extest::write_file(dir / "run.csv", csv.str());
  extest::write_file(dir / "run.cmd.txt", command + "\n");
}

// The curve as the CSV holds it (9 significant digits), as compare_runs reads it back.
std::vector<double> as_printed(const std::vector<double>& y) {
  std::vector<double> out;
  for (double v : y) out.push_back(std::stod(num(v, 9)));
  return out;
}

std::vector<double> curve(size_t n, double level, double wiggle, double phase) {
  std::vector<double> y;
  for (size_t k = 1; k <= n; ++k) y.push_back(level + wiggle * std::sin(0.7 * double(k) + phase));
  return y;
}

}  // namespace

// Two curves in common (one matched by its name before "(lr ...)"), one only in each run. Each row holds the
// two runs' means of the last 50 steps and paired_text of paired_diff(other, base, 50), as computed here.
TEST(CompareRuns, PairsTheCurvesBothRunsHold) {
  const extest::fs::path dir = extest::temp_dir("compare_pairs");
  const std::vector<double> a = curve(120, 2.0, 0.3, 0.0), b = curve(120, 3.0, 0.2, 1.0);
  std::vector<double> a2 = a, b2 = b;
  for (size_t k = 0; k < a2.size(); ++k) {
    a2[k] += 0.05 + 0.01 * std::sin(3.0 * double(k));  // 0.05 higher, beyond the noise
    b2[k] += 0.002 * std::cos(2.0 * double(k));        // the same but for noise
  }
  write_run(dir / "base", {{"A (lr 0.1)", a}, {"B", b}, {"Gone", a}}, "exp --lr 0.1");
  write_run(dir / "other", {{"A (lr 0.2)", a2}, {"B", b2}, {"New", b}}, "exp --lr 0.2");

  const auto r =
      extest::run(kTool + " " + (dir / "base").string() + " " + (dir / "other" / "run.csv").string() +
                      " --window 50 --out " + (dir / "table.md").string(),
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  auto row = [](const std::string& name, const std::vector<double>& base, const std::vector<double>& other) {
    const PairedDiff d = paired_diff(as_printed(other), as_printed(base), 50);
    return "| loss | " + name + " | " + num(mean_last(as_printed(base), 50), 4) + " | " +
           num(mean_last(as_printed(other), 50), 4) + " | " +
           paired_text(d, "other", "base", "the two runs' noise") + " |";
  };
  const std::string row_a = row("A (lr 0.1) / A (lr 0.2)", a, a2), row_b = row("B", b, b2);
  EXPECT_TRUE(extest::contains(r.out, row_a)) << row_a << "\n" << r.out;
  EXPECT_TRUE(extest::contains(r.out, row_b)) << row_b << "\n" << r.out;
  EXPECT_TRUE(extest::contains(row_a, "base ends lower than other by 0.04")) << row_a;
  EXPECT_TRUE(extest::contains(row_b, "other and base end within the two runs' noise")) << row_b;
  EXPECT_TRUE(extest::contains(r.out, "Only in the base run: loss: Gone.")) << r.out;
  EXPECT_TRUE(extest::contains(r.out, "Only in the other run: loss: New.")) << r.out;
  EXPECT_TRUE(extest::contains(r.out, ", made by `exp --lr 0.1`")) << r.out;
  EXPECT_FALSE(extest::contains(r.out, "uniform guess")) << r.out;
  EXPECT_EQ(extest::slurp(dir / "table.md"), r.out);
  extest::fs::remove_all(dir);
}

TEST(CompareRuns, ErrorsNameTheFileOrTheFlag) {
  const extest::fs::path dir = extest::temp_dir("compare_errors");
  write_run(dir / "base", {{"A", curve(120, 2.0, 0.3, 0.0)}}, "exp");
  write_run(dir / "short", {{"A", curve(100, 2.0, 0.3, 0.0)}}, "exp --steps 100");
  write_run(dir / "unrelated", {{"Z", curve(120, 2.0, 0.3, 0.0)}}, "exp");
  extest::write_file(dir / "other.csv", "a,b\n1,2\n");
  extest::fs::create_directories(dir / "garbled");
  extest::write_file(dir / "garbled" / "run.csv", "panel,kind,series,x,y\nloss,line,A,1,two\n");
  extest::fs::create_directories(dir / "empty");
  const std::string base = " " + (dir / "base").string();
  const struct {
    std::string args;
    int status;
    std::string message;
  } cases[] = {
      {base + " " + (dir / "missing").string(), 1, "error: compare_runs: " + (dir / "missing").string()},
      {base + " " + (dir / "empty").string(), 1, "compare_runs: expected one experiment CSV in the folder"},
      {base + " " + (dir / "other.csv").string(), 1, "other.csv: expected an experiment's CSV"},
      {base + " " + (dir / "unrelated").string(), 1, "compare_runs: the two runs share no curve"},
      {base + " " + (dir / "garbled").string(), 1,
       "run.csv: curve 'A' has a point that is not a number: x '1', y 'two'"},
      {base + base + " --out " + (dir / "base" / "run.csv").string(), 1, "is one of the two runs' CSVs"},
      {base + base + " --window 5", 2, "--window"},
      {base, 2, "other is required"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const auto r = extest::run(kTool + c.args, dir);
    EXPECT_EQ(r.status, c.status) << r.err;
    EXPECT_TRUE(extest::contains(r.err, c.message)) << r.err;
  }
  // Runs that end at other steps are listed, not paired.
  const auto r = extest::run(kTool + base + " " + (dir / "short").string(), dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(extest::contains(
      r.out, "| loss | A | - | - | not compared: the base run ends at step 120, the other at step 100 |"))
      << r.out;
  extest::fs::remove_all(dir);
}

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
// exp3's quick run of 10 steps without and with a warmup of 5: every curve of both panels is paired,
// and the table names both commands.
TEST(CompareRuns, Exp3WithAndWithoutAWarmup) {
  const extest::fs::path dir = extest::temp_dir("compare_exp3");
  const std::string exp3 = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) +
                           " --quick --steps 10 --task copy --threads 2 --quiet --out ";
  ASSERT_EQ(extest::run(exp3 + (dir / "none").string(), dir).status, 0);
  ASSERT_EQ(extest::run(exp3 + (dir / "warm").string() + " --warmup 5", dir).status, 0);
  const auto r = extest::run(kTool + " " + (dir / "none").string() + " " + (dir / "warm").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* c : {"| 4 layers: training loss | Pre-LN 4L (lr 0.001) |",
                        "| 4 layers: training loss | Post-LN 4L (lr 0.0001) |",
                        "| 8 layers: training loss | Pre-LN 8L (lr 0.001) |",
                        "| 8 layers: training loss | Post-LN 8L (lr 0.0001) |"})
    EXPECT_TRUE(extest::contains(r.out, c)) << c << "\n" << r.out;
  EXPECT_EQ(extest::count(r.out, "paired over the last 10 steps"), 4u) << r.out;
  EXPECT_TRUE(extest::contains(r.out, "--warmup 5`")) << r.out;
  EXPECT_FALSE(extest::contains(r.out, "Only in")) << r.out;
  extest::fs::remove_all(dir);
}
#endif
#else
TEST(CompareRuns, PairsTheCurvesBothRunsHold) {
  GTEST_SKIP() << "the experiments are not built (NORMGRAD_BUILD_EXAMPLES=OFF)";
}
#endif
