// The experiment programs end to end on the paths the other tests do not take: layernorm_vs_rmsnorm's
// measured statistics, exp2 on a text corpus (validation loss and the 200-character sample), the fallback
// to the copy task when the data file is missing, and the notice for a flag that does not apply.
//
// Every run is small (a 4 KB corpus written here, a few steps), so none needs TinyShakespeare.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "examples_test_util.h"

using namespace extest;

#ifdef NG_LAYERNORM_VS_RMSNORM_PATH
// x ~ N(2, 5^2): LayerNorm's output has mean 0 and std 1; RMSNorm keeps the mean, mu / sqrt(mu^2 + sigma^2)
// = 2 / sqrt(29) = 0.371, with std sigma / sqrt(mu^2 + sigma^2) = 0.928. The tolerance covers the sample
// of 512,000 values (the input's own mean is off by about 5 / sqrt(512000) = 0.007 at most a few times).
TEST(LayerNormVsRMSNormProgram, MeasuresTheOutputStatisticsAndSaysDataDoesNotApply) {
  const fs::path dir = temp_dir("lnrms");
  write_file(dir / "text.txt", small_corpus());
  const RunResult r =
      run(std::string(NG_LAYERNORM_VS_RMSNORM_PATH) + " --steps 2 --threads 1 --quiet --data " +
              (dir / "text.txt").string() + " --out " + (dir / "out").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* ext : {"png", "csv", "md", "cmd.txt"})
    EXPECT_TRUE(fs::exists(dir / "out" / (std::string("layernorm_vs_rmsnorm.") + ext))) << ext;
  EXPECT_TRUE(contains(r.err, "note: --data does not apply to this experiment")) << r.err;

  const std::vector<CsvRow> rows = read_csv(dir / "out" / "layernorm_vs_rmsnorm.csv");
  auto value = [&](const std::string& stat, const std::string& norm) {
    for (const CsvRow& row : select(rows, "bar", stat, "Output mean and std (x ~ N(2, 25))"))
      if (row.series == stat && row.x == norm) return std::stod(row.y);
    ADD_FAILURE() << "no " << stat << " of " << norm << " in the CSV";
    return std::nan("");
  };
  const double mu = 2.0, sigma = 5.0, scale = std::sqrt(mu * mu + sigma * sigma);
  EXPECT_NEAR(value("mean", "LayerNorm"), 0.0, 1e-4);
  EXPECT_NEAR(value("std", "LayerNorm"), 1.0, 1e-3);
  EXPECT_NEAR(value("mean", "RMSNorm"), mu / scale, 0.02);
  EXPECT_NEAR(value("std", "RMSNorm"), sigma / scale, 0.02);

  // Parameter counts: LayerNorm has weight and bias (2C), RMSNorm weight only (C), C = 512.
  const std::vector<CsvRow> params = select(rows, "bar", "parameters", "Parameters (C = 512)");
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].x + "=" + params[0].y, "LayerNorm=1024");
  EXPECT_EQ(params[1].x + "=" + params[1].y, "RMSNorm=512");
  // The timings are there too, positive (their values are the machine's business).
  for (const CsvRow& row : select(rows, "bar", "forward", "Time per call (ms, median)"))
    EXPECT_GT(std::stod(row.y), 0.0) << row.x;
  EXPECT_TRUE(contains(slurp(dir / "out" / "layernorm_vs_rmsnorm.md"), "median of 2 calls"));
  fs::remove_all(dir);
}
#endif

#ifdef NG_EXP2_NORM_COMPARISON_PATH
// --data pointing at a small corpus: the causal char-level task, a validation loss for every config, and
// a 200-character sample from the Pre-LN + RMSNorm model in the summary.
TEST(Exp2Program, TextCorpusGivesValidationLossesAndASample) {
  const fs::path dir = temp_dir("exp2text");
  const std::string corpus = small_corpus();
  write_file(dir / "text.txt", corpus);
  const RunResult r =
      run(std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 1 --threads 1 --quiet --data " +
              (dir / "text.txt").string() + " --out " + (dir / "out").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "No TinyShakespeare")) << r.err;
  const std::string md = slurp(dir / "out" / "norm_comparison.md");
  EXPECT_TRUE(contains(md, "Task `shakespeare`")) << md;

  // The table's last column: a finite validation loss near the uniform guess ln(V) for every config
  // (one step learns little), never "-".
  const std::set<char> chars(corpus.begin(), corpus.end());
  const double uniform = std::log(double(chars.size()));
  const std::vector<CsvRow> rows = read_csv(dir / "out" / "norm_comparison.csv");
  const std::vector<CsvRow> table = select(rows, "table", "", "Measured vs lesson");
  size_t val_losses = 0;
  for (const CsvRow& row : table) {
    if (row.x != "val loss") continue;
    ++val_losses;
    ASSERT_NE(row.y, "-") << row.series;
    const double v = std::stod(row.y);
    EXPECT_TRUE(std::isfinite(v)) << row.series;
    EXPECT_GT(v, 0.5 * uniform) << row.series;
    EXPECT_LT(v, 2.0 * uniform) << row.series;
  }
  EXPECT_EQ(val_losses, 4u);
  // The loss plot's reference line: the uniform guess over this corpus's vocabulary.
  const std::vector<CsvRow> hlines =
      select(rows, "hline", "uniform guess: ln " + std::to_string(chars.size()));
  ASSERT_EQ(hlines.size(), 1u);
  EXPECT_NEAR(std::stod(hlines[0].y), uniform, 1e-6);

  // The sample: exactly 200 characters, all from the corpus's alphabet, also printed on stdout.
  const std::string open = "## Sample (Pre-LN + RMSNorm, temperature 0.8)\n\n```\n";
  const size_t start = md.find(open);
  ASSERT_NE(start, std::string::npos) << md;
  const size_t end = md.find("\n```\n", start + open.size());
  ASSERT_NE(end, std::string::npos) << md;
  const std::string sample = md.substr(start + open.size(), end - start - open.size());
  EXPECT_EQ(sample.size(), 200u) << sample;
  for (char c : sample) EXPECT_TRUE(chars.count(c)) << "character " << int(c) << " is not in the corpus";
  EXPECT_TRUE(contains(r.out, sample));
  fs::remove_all(dir);
}
#endif

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
// No --data and no file at the default path (data/tinyshakespeare.txt, relative to the working folder):
// the trainer says how to get it and runs the synthetic copy task instead. (exp2 and exp3 share this choice,
// examples/common/lm_task.h, choose_task; exp3 --quick is the cheaper of the two to run.)
TEST(TrainerData, MissingDataSaysHowToGetItAndRunsTheCopyTask) {
  const fs::path dir = temp_dir("nodata");  // empty: no data/ folder in it
  const RunResult r = run("cd " + dir.string() + " && " + NG_EXP3_PRENORM_VS_POSTNORM_PATH +
                              " --quick --steps 1 --threads 1 --quiet --out out",
                          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(
      r.err, "No TinyShakespeare at data/tinyshakespeare.txt: get it with `bash scripts/get_data.sh`"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "Falling back to the synthetic copy task (--task copy).")) << r.err;
  EXPECT_TRUE(contains(r.out, "Task copy (vocab 1000)")) << r.out;
  const std::string md = slurp(dir / "out" / "prenorm_vs_postnorm.md");
  EXPECT_TRUE(contains(md, "Task `copy`")) << md;
  const std::vector<CsvRow> rows = read_csv(dir / "out" / "prenorm_vs_postnorm.csv");
  EXPECT_EQ(select(rows, "line", "Post-LN 8L", "8 layers: training loss").size(), 1u);
  // The uniform guess over the copy task's 1000 tokens is the loss plot's reference line.
  EXPECT_EQ(select(rows, "hline", "uniform guess: ln 1000 = 6.91").size(), 2u);
  fs::remove_all(dir);
}
#endif
