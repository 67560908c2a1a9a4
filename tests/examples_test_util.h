// Small helpers shared by the tests that run the experiment programs end to end
// (tests/test_examples_runs.cpp, tests/test_examples_reliability.cpp): a scratch folder, reading a file,
// running a program with its stdout and stderr captured, and reading the long-format CSV every experiment
// writes (examples/common/report.h: panel,kind,series,x,y).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "examples/common/report.h"
#include "tensor/sanitizer.h"  // NG_ASAN

namespace extest {

namespace fs = std::filesystem;

// Under AddressSanitizer (the asan preset) a trainer step is 20 to 50 times slower. The end-to-end runs
// there use fewer steps: the sanitizers need the code paths, not the length of the run.
#if defined(NG_ASAN)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// A fresh, empty folder under the system temp folder, unique to this process and `tag`.
inline fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("normgrad_extest_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

struct RunResult {
  int status = -1;  // the exit status, -1 if the program did not exit normally (a crash)
  std::string out, err;
};

// Run a shell command line with stdout and stderr captured to files in `dir`.
inline RunResult run(const std::string& cmd, const fs::path& dir) {
  const fs::path out_file = dir / "stdout.txt", err_file = dir / "stderr.txt";
  const int raw = std::system((cmd + " >" + out_file.string() + " 2>" + err_file.string()).c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  return r;
}

inline size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

inline bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// One row of an experiment's CSV, and the CSV read back (examples/common/report.h: RFC 4180 quoting; a
// missing or malformed file is an ng::Error, which fails the test that reads it).
using CsvRow = ng::examples::CsvRow;
inline std::vector<CsvRow> read_csv(const fs::path& p) {
  return ng::examples::read_figure_csv(p.string(), "read_csv");
}

// The rows of one kind ("line", "bar", ...) whose series name starts with `series` (empty: any series).
inline std::vector<CsvRow> select(const std::vector<CsvRow>& rows, const std::string& kind,
                                  const std::string& series = "", const std::string& panel = "") {
  std::vector<CsvRow> out;
  for (const CsvRow& r : rows)
    if (r.kind == kind && r.series.rfind(series, 0) == 0 && (panel.empty() || r.panel == panel))
      out.push_back(r);
  return out;
}

// One line series' values (a loss curve) from an experiment's CSV rows: the series whose name starts with
// `series` in `panel`.
inline std::vector<double> curve_of(const std::vector<CsvRow>& rows, const std::string& panel,
                                    const std::string& series) {
  std::vector<double> values;
  for (const CsvRow& r : select(rows, "line", series, panel)) values.push_back(std::stod(r.y));
  return values;
}

// A small text corpus (about 4 KB, 30-odd distinct characters) for runs that need --data: the trainers
// need more than 1000 bytes and a validation tenth longer than seq + 1 = 65 characters.
inline std::string small_corpus() {
  const std::string verse =
      "Shall I compare thee to a summer's day?\n"
      "Thou art more lovely and more temperate:\n"
      "Rough winds do shake the darling buds of May,\n"
      "And summer's lease hath all too short a date;\n"
      "Sometime too hot the eye of heaven shines,\n"
      "And often is his gold complexion dimm'd;\n";
  std::string text;
  while (text.size() < 4000) text += verse;
  return text;
}

}  // namespace extest
