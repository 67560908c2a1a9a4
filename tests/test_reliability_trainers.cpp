// The trainers (examples/*) as black boxes: bad input gives a usage message and a non-zero exit, and
// --detect-anomaly is a flag every trainer accepts.
//
// The programs are found beside this test: build/<preset>/tests/<this test> -> build/<preset>/examples/.
// tests/test_examples.cpp (ExamplesPrograms.BadFlagsExitWithUsage) checks exp1's flag errors one by one; this
// file runs the same kind of bad input through EVERY trainer that is built, so a new trainer that forgets
// parse_flags() fails here.
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

fs::path examples_dir() {
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "examples";
}

// Every executable in build/<preset>/examples/. Where the examples are built (their paths are defined, and
// CMake builds them before this test), finding none is a failure, not a skip: a skip let the tests pass
// without testing anything.
std::vector<fs::path> trainers_found() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(examples_dir(), ec)) {
    if (!e.is_regular_file()) continue;
    const auto perms = e.status().permissions();
    if ((perms & fs::perms::owner_exec) == fs::perms::none) continue;
    if (e.path().extension() == ".a") continue;
    out.push_back(e.path());
  }
  return out;
}

// A path for a shell command line, single-quoted (a checkout path with a space split it).
std::string quoted(const fs::path& p) {
  std::string q = "'";  // (appended, not "'" + s + "'": GCC 12 warns about that with a false -Wrestrict)
  q += p.string();
  q += '\'';
  return q;
}

struct Result {
  int status = -1;
  std::string err, out;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result run(const std::string& args, const fs::path& dir) {
  const fs::path out_file = dir / "stdout.txt", err_file = dir / "stderr.txt";
  const std::string cmd = args + " >" + out_file.string() + " 2>" + err_file.string();
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(err_file), slurp(out_file)};
}

// True when some line of `text` holds both `a` and, on it or on the next line (CLI11 wraps a long flag's
// description onto the next line), `b`.
bool contains_line(const std::string& text, const std::string& a, const std::string& b) {
  std::vector<std::string> lines;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(a) != std::string::npos &&
        (lines[i].find(b) != std::string::npos ||
         (i + 1 < lines.size() && lines[i + 1].find(b) != std::string::npos)))
      return true;
  return false;
}

fs::path scratch() {
  fs::path d = fs::temp_directory_path() / ("normgrad_rely_trainers_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(Trainers, EveryTrainerRejectsBadValuesWithUsageAndExitStatus2) {
  const std::vector<fs::path> programs = trainers_found();
#ifdef NG_EXP2_NORM_COMPARISON_PATH
  ASSERT_FALSE(programs.empty()) << "the examples are built, but none is in " << examples_dir();
#else
  if (programs.empty()) GTEST_SKIP() << "no trainers built in " << examples_dir();
#endif
  const fs::path dir = scratch();
  const std::string out = " --out " + (dir / "o").string();
  for (const fs::path& p : programs) {
    const std::string exe = quoted(p);
    // A value of the wrong type, and one out of range.
    Result r = run(exe + out + " --steps banana", dir);
    EXPECT_EQ(r.status, 2) << exe << ": " << r.err;
    EXPECT_NE(r.err.find("--steps"), std::string::npos) << exe << ": " << r.err;
    EXPECT_NE(r.err.find("Usage"), std::string::npos) << exe << ": " << r.err;
    r = run(exe + out + " --seed -x", dir);
    EXPECT_EQ(r.status, 2) << exe << ": " << r.err;
    // An unreadable --data: a folder where a text file is expected. A trainer that reads no data says it
    // ignores the flag (its --help says so too) and goes on.
    const bool reads_data = !contains_line(run(exe + " --help", dir).out, "--data", "does not apply");
    r = run(exe + out + " --data " + dir.string(), dir);
    if (reads_data) {
      EXPECT_EQ(r.status, 2) << exe << ": " << r.err;
      EXPECT_NE(r.err.find("--data: cannot read"), std::string::npos) << exe << ": " << r.err;
      EXPECT_NE(r.err.find("Usage"), std::string::npos) << exe << ": " << r.err;
    } else {
      EXPECT_EQ(r.status, 0) << exe << ": " << r.err;
      EXPECT_NE(r.err.find("note: --data does not apply to this experiment"), std::string::npos)
          << exe << ": " << r.err;
    }
  }
  fs::remove_all(dir);
}

// Every floating-point flag of every trainer (found in its --help as "--flag FLOAT") refuses NaN and inf
// as a usage error. CLI::Range alone let NaN through (a comparison with NaN is false), and `--lr-scale nan`
// then failed in the optimizer, with status 1 (examples/common/finite_range.h).
TEST(Trainers, EveryFloatFlagRefusesNaNAndInfWithUsage) {
  const std::vector<fs::path> programs = trainers_found();
#ifdef NG_EXP2_NORM_COMPARISON_PATH
  ASSERT_FALSE(programs.empty()) << "the examples are built, but none is in " << examples_dir();
#else
  if (programs.empty()) GTEST_SKIP() << "no trainers built in " << examples_dir();
#endif
  const fs::path dir = scratch();
  const std::string out = " --out " + (dir / "o").string();
  int flags = 0;
  for (const fs::path& p : programs) {
    const std::string help = run(quoted(p) + " --help", dir).out;
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string flag, type;
      words >> flag >> type;
      if (flag.rfind("--", 0) != 0 || type.rfind("FLOAT", 0) != 0) continue;
      ++flags;
      for (const char* bad : {"nan", "inf", "-inf"}) {
        Result r = run(quoted(p) + out + " " + flag + " " + bad, dir);
        EXPECT_EQ(r.status, 2) << p << " " << flag << " " << bad << ": " << r.err;
        EXPECT_NE(r.err.find(flag + ": Value " + bad + " is not a finite number"), std::string::npos)
            << p << ": " << r.err;
        EXPECT_NE(r.err.find("Usage"), std::string::npos) << p << ": " << r.err;
      }
    }
  }
  EXPECT_GE(flags, 3) << "exp2's --lr-scale and exp3's --pre-lr and --post-lr at least";
  fs::remove_all(dir);
}

TEST(Trainers, EveryTrainerAcceptsDetectAnomaly) {
  const std::vector<fs::path> programs = trainers_found();
#ifdef NG_EXP2_NORM_COMPARISON_PATH
  ASSERT_FALSE(programs.empty()) << "the examples are built, but none is in " << examples_dir();
#else
  if (programs.empty()) GTEST_SKIP() << "no trainers built in " << examples_dir();
#endif
  const fs::path dir = scratch();
  for (const fs::path& p : programs) {
    // --help lists the flag and exits 0; combined with a bad value, the error is the bad value, not the flag.
    Result r = run(quoted(p) + " --help", dir);
    EXPECT_EQ(r.status, 0) << p;
    r = run(quoted(p) + " --detect-anomaly --out " + (dir / "o").string() + " --steps 0", dir);
    EXPECT_EQ(r.status, 2) << p << ": " << r.err;
    EXPECT_EQ(r.err.find("not expected"), std::string::npos)
        << p << ": --detect-anomaly was refused: " << r.err;
    EXPECT_NE(r.err.find("--steps"), std::string::npos) << p << ": " << r.err;
    EXPECT_NE(r.err.find("--detect-anomaly"), std::string::npos) << p << ": the usage must list the flag";
  }
  fs::remove_all(dir);
}
