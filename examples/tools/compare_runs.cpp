// compare_runs: two runs of one experiment, their loss curves paired step by step.
//
//   compare_runs BASE OTHER [--window 100] [--out FILE]
//
// BASE and OTHER are two runs' --out folders (or the CSV files in them): say exp3 without and with
// --warmup 100. Every curve (a line series) that both CSVs hold, in the same panel under the same name, is
// paired step by step over the last --window steps the two share, as the experiments pair their own runs
// (examples/common/paired.h): OTHER minus BASE, its standard error from 10 block means, and a gap called
// only beyond 2.26 of them. A curve whose name differs only in its parenthesised end ("Post-LN 4L (lr
// 0.0001)" in one run, "Post-LN 4L (lr 0.001)" in the other) is matched by the part before it, when that
// part names one curve of the panel in each run.
//
// Pairing cancels what each batch adds only when the two runs drew the same batches: the same --seed,
// --task and --data, the same batch and sequence length. compare_runs cannot see the flags, so it prints
// both runs' command lines (the .cmd.txt beside each CSV) for the reader to check.
//
// The result, a Markdown table, goes to stdout; --out also writes it to FILE (atomically; FILE may not be
// one of the two CSVs). A path that holds no experiment's CSV, or two runs with no curve in common, is an
// error (status 1); a bad flag a usage error (status 2).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "examples/common/cli.h"
#include "examples/common/paired.h"
#include "examples/common/report.h"
#include "io/whole_file.h"
#include "tensor/error.h"

using namespace ng;
using namespace ng::examples;
namespace fs = std::filesystem;

namespace {

constexpr const char* kOp = "compare_runs";
constexpr const char* kNoise = "the two runs' noise";  // what a gap under 2.26 standard errors is within

// One run: its CSV, its command line ("" when no .cmd.txt is beside the CSV), and its curves.
struct Curve {
  std::string panel, name;
  std::vector<double> x, y;
};
struct RunFiles {
  std::string csv, command;
  std::vector<Curve> curves;  // in the CSV's order
};

// The CSV a path names: the file itself, or the one experiment CSV in a folder.
std::string csv_of(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".csv") found.push_back(e.path().string());
  NG_CHECK(found.size() == 1, kOp, "expected one experiment CSV in the folder ", path, ", found ",
           found.size(), found.empty() ? " (is it a run's --out folder?)" : ": name the file");
  return found[0];
}

RunFiles read_run(const std::string& path) {
  RunFiles run;
  run.csv = csv_of(path);
  const fs::path cmd = fs::path(run.csv).replace_extension(".cmd.txt");
  std::error_code ec;
  if (fs::is_regular_file(cmd, ec)) {
    run.command = io::read_whole_file(cmd.string(), kOp);
    while (!run.command.empty() && (run.command.back() == '\n' || run.command.back() == '\r'))
      run.command.pop_back();
  }
  std::map<std::pair<std::string, std::string>, size_t> index;  // (panel, name) -> curves[i]
  for (const CsvRow& row : read_figure_csv(run.csv, kOp)) {
    if (row.kind != "line") continue;
    auto [it, added] = index.try_emplace({row.panel, row.series}, run.curves.size());
    if (added) run.curves.push_back({row.panel, row.series, {}, {}});
    Curve& c = run.curves[it->second];
    try {
      c.x.push_back(std::stod(row.x));
      c.y.push_back(std::stod(row.y));  // "nan" (a diverged step) reads as NaN
    } catch (const std::exception&) {
      fail(kOp, run.csv, ": curve '", row.series, "' has a point that is not a number: x '", row.x, "', y '",
           row.y, "'");
    }
  }
  return run;
}

// "Post-LN 4L (lr 0.001)" -> "Post-LN 4L"; a name without a parenthesised end is itself.
std::string stem(const std::string& name) {
  const size_t open = name.rfind(" (");
  return open != std::string::npos && name.back() == ')' ? name.substr(0, open) : name;
}

// The curve of `run` in `panel` that matches `name`: the same name, else the one curve whose stem is
// name's stem (when exactly one curve of the panel has it, in `run` and in `own`, the run `name` is from).
const Curve* match(const RunFiles& run, const RunFiles& own, const std::string& panel,
                   const std::string& name) {
  const Curve* by_stem = nullptr;
  int stems = 0, own_stems = 0;
  for (const Curve& c : run.curves) {
    if (c.panel != panel) continue;
    if (c.name == name) return &c;
    if (stem(c.name) == stem(name)) by_stem = &c, ++stems;
  }
  for (const Curve& c : own.curves)
    if (c.panel == panel && stem(c.name) == stem(name)) ++own_stems;
  return stems == 1 && own_stems == 1 ? by_stem : nullptr;
}

// One table row: base's and other's curves over the steps both hold, up to the last step of each (which
// must be the same step).
std::vector<std::string> compare(const Curve& base, const Curve& other, size_t window) {
  std::map<double, double> at;  // other's loss at each step
  for (size_t i = 0; i < other.x.size(); ++i) at[other.x[i]] = other.y[i];
  std::vector<double> a, b;  // other, base
  for (size_t i = 0; i < base.x.size(); ++i)
    if (auto it = at.find(base.x[i]); it != at.end()) a.push_back(it->second), b.push_back(base.y[i]);
  std::vector<std::string> row = {base.panel,
                                  base.name == other.name ? base.name : base.name + " / " + other.name};
  if (base.x.empty() || other.x.empty() || base.x.back() != other.x.back()) {
    row.insert(row.end(),
               {"-", "-",
                "not compared: the base run ends at step " + num(base.x.empty() ? NAN : base.x.back()) +
                    ", the other at step " + num(other.x.empty() ? NAN : other.x.back())});
    return row;
  }
  const PairedDiff d = paired_diff(a, b, window);
  row.push_back(num(mean_last(b, window), 4));
  row.push_back(num(mean_last(a, window), 4));
  row.push_back(paired_text(d, "other", "base", kNoise));
  return row;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"Pair the loss curves of two runs of one experiment step by step (OTHER minus BASE)."};
  std::string base_path, other_path, out;
  size_t window = 100;
  app.add_option("base", base_path, "the base run: its --out folder, or the CSV in it")->required();
  app.add_option("other", other_path, "the other run, the same way")->required();
  app.add_option("--window", window,
                 "pair the last N steps the two runs share (rounded down to a multiple of 10)")
      ->check(CLI::Range(size_t(10), size_t(1) << 40))
      ->capture_default_str();
  app.add_option("--out", out, "also write the table to this Markdown file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << e.what() << "\n\n" << app.help();
    return 2;
  }
  const RunFiles base = read_run(base_path), other = read_run(other_path);
  for (const std::string& csv : {base.csv, other.csv})
    NG_CHECK(out.empty() || !fs::exists(out) || !fs::equivalent(out, csv), kOp, "--out ", out,
             " is one of the two runs' CSVs: give the table a path of its own");

  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> only_base, only_other;
  std::vector<const Curve*> matched;
  for (const Curve& c : base.curves) {
    if (const Curve* o = match(other, base, c.panel, c.name)) {
      rows.push_back(compare(c, *o, window));
      matched.push_back(o);
    } else {
      only_base.push_back(c.panel + ": " + c.name);
    }
  }
  for (const Curve& c : other.curves)
    if (std::find(matched.begin(), matched.end(), &c) == matched.end())
      only_other.push_back(c.panel + ": " + c.name);
  NG_CHECK(!rows.empty(), kOp, "the two runs share no curve (", base.csv, " and ", other.csv,
           "): compare two runs of the same experiment");

  std::string md = "# Two runs paired step by step\n\n";
  md +=
      "- base: `" + base.csv + "`" + (base.command.empty() ? "" : ", made by `" + base.command + "`") + "\n";
  md += "- other: `" + other.csv + "`" + (other.command.empty() ? "" : ", made by `" + other.command + "`") +
        "\n\n";
  md +=
      "Each curve of the other run is paired with the same curve of the base run step by step, over the "
      "last " +
      std::to_string(window - window % PairedDiff::kBlocks) +
      " steps they share (fewer where they share fewer): the mean of other minus base, its standard error "
      "from 10 block means, and a gap called only beyond 2.26 of them (examples/common/paired.h). That "
      "cancels what each batch adds only when both runs drew the same batches: the same --seed, --task "
      "and --data, batch and sequence length. Check the two commands above.\n\n";
  const std::string last = "mean of the last " + std::to_string(window);
  md +=
      md_table({"panel", "curve", "base (" + last + ")", "other (" + last + ")", "other against base"}, rows);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "; " : "") + v[i];
    return s;
  };
  if (!only_base.empty()) md += "\nOnly in the base run: " + list(only_base) + ".\n";
  if (!only_other.empty()) md += "\nOnly in the other run: " + list(only_other) + ".\n";
  std::cout << md;
  if (!out.empty()) write_text(out, md);
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
