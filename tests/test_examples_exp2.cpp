// exp2_norm_comparison end to end: a 2-step copy-task run writes its four files, the CSV has every config's
// loss curve and table row, the summary's conclusions are computed; bad flags exit with status 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("normgrad_test_exp2_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run(const std::string& cmd, std::string& err, const fs::path& dir) {
  fs::path err_file = dir / "stderr.txt";
  int status = std::system((cmd + " >/dev/null 2>" + err_file.string()).c_str());
  err = slurp(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

#ifdef NG_EXP2_NORM_COMPARISON_PATH
TEST(Exp2Program, BadFlagsExitWith2) {
  fs::path dir = temp_dir("badflags");
  std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --out " + (dir / "o").string();
  std::string err;
  EXPECT_EQ(run(exe + " --task bogus", err, dir), 2);
  EXPECT_NE(err.find("--task: expected shakespeare or copy, got 'bogus'"), std::string::npos) << err;
  // An empty --task ran the default task, as if the flag were absent (exp3 registers it the same way).
  std::vector<std::string> programs = {exe};
#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
  programs.push_back(std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + " --out " + (dir / "o3").string());
#endif
  for (const std::string& program : programs) {
    EXPECT_EQ(run(program + " --task '' --steps 1 --threads 1 --quiet", err, dir), 2) << program;
    EXPECT_NE(err.find("--task: expected shakespeare or copy, got ''"), std::string::npos) << err;
    EXPECT_NE(err.find("Usage"), std::string::npos) << err;
  }
  EXPECT_EQ(run(exe + " --steps banana", err, dir), 2);
  EXPECT_NE(err.find("--steps"), std::string::npos) << err;
  // A seed CLI11 alone would wrap (-1 became 2^64 - 1, 2^64 was clamped to it) and empty paths (--save ""
  // wrote no checkpoint and said nothing): usage errors.
  for (const char* seed : {"-1", "18446744073709551616", "12x"}) {
    EXPECT_EQ(run(exe + " --seed " + seed, err, dir), 2) << seed;
    EXPECT_NE(
        err.find("expected a whole number from 0 to 18446744073709551615, got '" + std::string(seed) + "'"),
        std::string::npos)
        << err;
  }
  for (const char* flag : {"--save", "--resume", "--out", "--data"}) {
    const std::string base = std::string(flag) == "--out" ? std::string(NG_EXP2_NORM_COMPARISON_PATH) : exe;
    EXPECT_EQ(run(base + " " + flag + " ''", err, dir), 2) << flag;
    EXPECT_NE(err.find(std::string(flag) + ": expected a path, got an empty one"), std::string::npos) << err;
  }
  // --task shakespeare asked for by name, with no corpus where --data points: no quiet fallback to copy.
  EXPECT_EQ(run("cd " + dir.string() + " && " + exe + " --task shakespeare --steps 1", err, dir), 2);
  EXPECT_NE(err.find("--task shakespeare: cannot read data/tinyshakespeare.txt"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(Exp2Program, DeviceFlag) {
  fs::path dir = temp_dir("device");
  std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --out " + (dir / "o").string();
  std::string err;
  EXPECT_EQ(run(exe + " --device tpu", err, dir), 2);
  EXPECT_NE(err.find("expected cpu, cuda or cuda:N (N a GPU index from 0 to 1023), got 'tpu'"),
            std::string::npos)
      << err;
  // An index too big for an int was std::stoi's std::out_of_range, past guarded_main: an abort (134).
  EXPECT_EQ(run(exe + " --device cuda:99999999999", err, dir), 2);
  EXPECT_NE(err.find("got 'cuda:99999999999'"), std::string::npos) << err;
  // Without the CUDA backend, or without a GPU (this machine): a clear error and status 1, before training.
  // On a machine with a GPU the one-step run succeeds instead.
  int status = run(exe + " --device cuda --steps 1 --task copy --threads 2 --quiet", err, dir);
  if (status != 0) {
    EXPECT_EQ(status, 1) << err;
    EXPECT_NE(err.find("error: --device: cuda cannot be used: "), std::string::npos) << err;
  }
  fs::remove_all(dir);
}

// A scaled learning rate reads as the rate the run used: 2 digits printed --lr-scale 1.234's 0.000617 as
// 0.00062; 0.0005 x 3 (0.0014999999999999998 in binary) still reads 0.0015.
TEST(Exp2Program, ScaledLearningRatesReadAsUsed) {
  fs::path dir = temp_dir("lr_scale");
  std::string err;
  const std::string exe =
      std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 1 --task copy --threads 1 --quiet";
  ASSERT_EQ(run(exe + " --lr-scale 1.234 --out " + (dir / "a").string(), err, dir), 0) << err;
  std::string md = slurp(dir / "a" / "norm_comparison.md");
  EXPECT_NE(md.find("| Pre-LN + RMSNorm | 0.000617 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| NoNorm | 0.0001234 |"), std::string::npos) << md;
  EXPECT_NE(md.find("times --lr-scale 1.234:"), std::string::npos) << md;
  ASSERT_EQ(run(exe + " --lr-scale 3 --out " + (dir / "b").string(), err, dir), 0) << err;
  md = slurp(dir / "b" / "norm_comparison.md");
  EXPECT_NE(md.find("| Pre-LN + RMSNorm | 0.0015 |"), std::string::npos) << md;
  fs::remove_all(dir);
}

TEST(Exp2Program, TwoStepCopyRunWritesItsFiles) {
  fs::path dir = temp_dir("run");
  std::string err;
  ASSERT_EQ(run(std::string(NG_EXP2_NORM_COMPARISON_PATH) +
                    " --steps 2 --task copy --threads 2 --quiet --out " + dir.string(),
                err, dir),
            0)
      << err;
  for (const char* ext : {"png", "csv", "md", "cmd.txt"})
    EXPECT_TRUE(fs::exists(dir / (std::string("norm_comparison.") + ext))) << ext;
  std::string csv = slurp(dir / "norm_comparison.csv");
  EXPECT_EQ(csv.rfind("panel,kind,series,x,y\n", 0), 0u);
  // Two loss points per config.
  for (const char* c : {"NoNorm", "Post-LN + LayerNorm", "Pre-LN + LayerNorm", "Pre-LN + RMSNorm"})
    EXPECT_EQ(count(csv, "Training loss (copy),line," + std::string(c) + ","), 2u) << c;
  // The table panel: 4 rows (the config names the series) x 6 more cells.
  EXPECT_EQ(count(csv, "Measured vs lesson,table,"), 24u) << csv;
  std::string md = slurp(dir / "norm_comparison.md");
  EXPECT_NE(md.find("NoNorm did NOT diverge in 2 steps"), std::string::npos) << md;
  EXPECT_NE(md.find("This run has 2 steps, not the lesson's 1000"), std::string::npos) << md;
  // The copy task's floor without positions is computed and compared with the run: E[-ln((1 + K) / 63)],
  // K ~ Binomial(62, 1/1000), is 4.1007 (exactly by the sum, and 4.1010 by 200000 simulated windows);
  // ln 63 = 4.143 when a window's tokens are all distinct, which it was taken to be until stop 44.
  EXPECT_NE(md.find("no such model can get below 4.1 in expectation"), std::string::npos) << md;
  EXPECT_NE(md.find("ln 63 = 4.14 when they are all distinct"), std::string::npos) << md;
  EXPECT_NE(slurp(dir / "norm_comparison.csv").find("hline,floor without positions: 4.1,,4.10069"),
            std::string::npos);
  EXPECT_NE(md.find("(above the floor)."), std::string::npos) << md;
  // Two steps are too few for any config to converge, and the summary says what that means.
  EXPECT_NE(md.find("No config converged"), std::string::npos) << md;
  EXPECT_NE(md.find("Command: `"), std::string::npos);
  EXPECT_NE(slurp(dir / "norm_comparison.cmd.txt").find("--task copy"), std::string::npos);
  fs::remove_all(dir);
}
#else
TEST(Exp2Program, NotConfigured) {
  GTEST_SKIP() << "NG_EXP2_NORM_COMPARISON_PATH not defined";
}
#endif
