// The experiments' shared machinery (examples/common) and the programs end to end: CSV and Markdown
// writers, command-line quoting, divergence detection, loss statistics, the progress bar (its text, silent
// off a terminal, drawn on a pseudo-terminal), flag errors (exit status 2 with the usage), and a whole exp1
// run with its four output files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>
#include <sstream>

#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/report.h"
#include "tensor/error.h"

using namespace ng::examples;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& tag) {
  fs::path d =
      fs::temp_directory_path() / ("normgrad_test_examples_" + tag + "_" + std::to_string(::getpid()));
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

// Run a shell command; returns its exit status, with stderr captured into `err`.
int run(const std::string& cmd, std::string& err, const fs::path& dir) {
  fs::path err_file = dir / "stderr.txt";
  int status = std::system((cmd + " >/dev/null 2>" + err_file.string()).c_str());
  err = slurp(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(ExamplesCsv, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("Post-LN, LayerNorm"), "\"Post-LN, LayerNorm\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  Csv csv{{"a", "b"}, {{"1", "x,y"}}};
  EXPECT_EQ(csv.str(), "a,b\n1,\"x,y\"\n");
  Csv bad{{"a", "b"}, {{"1"}}};
  try {
    (void)bad.str();
    FAIL() << "expected ng::Error";
  } catch (const ng::Error& e) {
    EXPECT_STREQ(e.what(), "Csv: row 0 has 1 fields, expected 2");
  }
}

// read_figure_csv reads back what Csv::str wrote, quotes, commas and line breaks inside fields included, and
// refuses a file that is not an experiment's CSV, naming it.
TEST(ExamplesCsv, ReadBackWhatWasWritten) {
  const fs::path dir = temp_dir("csv_read");
  Csv csv{{"panel", "kind", "series", "x", "y"},
          {{"loss, log", "line", "say \"hi\"", "1", "2.5"}, {"two\nlines", "bar", "", "x", "nan"}}};
  std::ofstream((dir / "run.csv").string()) << csv.str();
  const std::vector<CsvRow> rows = read_figure_csv((dir / "run.csv").string(), "test");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].panel, "loss, log");
  EXPECT_EQ(rows[0].series, "say \"hi\"");
  EXPECT_EQ(rows[0].y, "2.5");
  EXPECT_EQ(rows[1].panel, "two\nlines");
  EXPECT_EQ(rows[1].series, "");
  EXPECT_EQ(rows[1].y, "nan");
  const std::string path = (dir / "bad.csv").string();
  for (const auto& [text, message] :
       {std::pair<std::string, std::string>{"a,b\n", "expected an experiment's CSV, whose first line is"},
        {"panel,kind,series,x,y\nloss,line,a,1\n", "row 1 has 4 fields, expected 5"},
        {"panel,kind,series,x,y\n\"loss,line,a,1,2\n", "a quoted field is not closed"}}) {
    std::ofstream(path) << text;
    try {
      read_figure_csv(path, "test");
      ADD_FAILURE() << "expected ng::Error for " << text;
    } catch (const ng::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("test: " + path + ": " + message, 0), 0u) << e.what();
    }
  }
  fs::remove_all(dir);
}

TEST(ExamplesCsv, NumbersRoundTripAndNaNIsSpelledOut) {
  EXPECT_EQ(num(NAN), "nan");
  EXPECT_EQ(num(INFINITY), "inf");
  EXPECT_EQ(num(-INFINITY), "-inf");
  EXPECT_EQ(num(2.5), "2.5");
  EXPECT_EQ(std::stod(num(0.1234567891, 9)), 0.123456789);
}

TEST(ExamplesCsv, FigureCsvHasEveryPlottedNumber) {
  ng::plot::LineChart line;
  line.title = "loss";
  line.series.push_back({"a", {0, 10}, {3.5, NAN}});
  line.vlines.push_back({10, "NaN at step 10"});
  line.hlines.push_back({2.7, "lesson"});
  ng::plot::BarChart bars;
  bars.title = "final";
  bars.categories = {"x", "y"};
  bars.groups = {{"g", {1, 2}}};
  ng::plot::Table table;
  table.title = "t";
  table.header = {"config", "loss"};
  table.rows = {{"Pre-LN", "2.7"}};
  ng::plot::Figure fig;
  fig.panels = {line, bars, table};
  Csv csv = figure_csv(fig);
  ASSERT_EQ(csv.rows.size(), 2u + 1 + 1 + 2 + 1);
  EXPECT_EQ(csv.rows[0], (std::vector<std::string>{"loss", "line", "a", "0", "3.5"}));
  EXPECT_EQ(csv.rows[1], (std::vector<std::string>{"loss", "line", "a", "10", "nan"}));
  EXPECT_EQ(csv.rows[2], (std::vector<std::string>{"loss", "vline", "NaN at step 10", "10", ""}));
  EXPECT_EQ(csv.rows[3], (std::vector<std::string>{"loss", "hline", "lesson", "", "2.7"}));
  EXPECT_EQ(csv.rows[5], (std::vector<std::string>{"final", "bar", "g", "y", "2"}));
  EXPECT_EQ(csv.rows[6], (std::vector<std::string>{"t", "table", "Pre-LN", "loss", "2.7"}));
  // A series with x values, but not one per y: an error (it read past the end of x).
  ng::plot::Figure bad;
  ng::plot::LineChart chart;
  chart.title = "t";
  chart.series.push_back({.label = "s", .x = {1.0}, .y = {1.0, 2.0, 3.0}});
  bad.panels = {chart};
  try {
    figure_csv(bad);
    ADD_FAILURE() << "expected ng::Error";
  } catch (const ng::Error& e) {
    EXPECT_NE(std::string(e.what()).find("figure_csv: series 's' of panel 't' has 1 x values and 3 y values"),
              std::string::npos)
        << e.what();
  }
}

TEST(ExamplesMarkdown, TableAndCommandLine) {
  EXPECT_EQ(md_table({"a", "b"}, {{"1", "2"}}), "| a | b |\n|---|---|\n| 1 | 2 |\n");
  try {
    md_table({"a", "b"}, {{"1"}});
    ADD_FAILURE() << "md_table accepted a row with 1 cell under a 2-column header";
  } catch (const ng::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("md_table"), std::string::npos) << what;
    EXPECT_NE(what.find("row has 1 cells, expected 2"), std::string::npos) << what;
  }
  char a0[] = "exp2", a1[] = "--task", a2[] = "copy", a3[] = "--out", a4[] = "my results", a5[] = "it's";
  char* argv[] = {a0, a1, a2, a3, a4, a5};
  EXPECT_EQ(command_line(6, argv), "exp2 --task copy --out 'my results' 'it'\\''s'");
}

// A Report writes nothing until write_all, then all four files: a run that stops before the end leaves
// the previous run's files in --out exactly as they were (their command line included).
TEST(ExamplesReport, WritesNothingUntilWriteAllThenAllFourFiles) {
  fs::path dir = temp_dir("report");
  CommonOptions o;
  o.out = dir.string();
  char a0[] = "exp", a1[] = "--seed", a2[] = "1";
  char* argv1[] = {a0, a1, a2};
  ng::plot::Figure fig;
  ng::plot::LineChart line;
  line.title = "loss";
  line.series.push_back({.label = "a", .y = {3.0, 2.0}});
  fig.panels = {line};
  {
    Report first(o, "r", 3, argv1);
    first.add_figure(fig);
    first.write_all("first summary");
  }
  const std::vector<std::string> exts = {"png", "csv", "md", "cmd.txt"};
  std::vector<std::string> before;
  for (const std::string& e : exts) before.push_back(slurp(dir / ("r." + e)));
  EXPECT_EQ(before[3], "exp --seed 1\n");
  EXPECT_EQ(before[2].rfind("first summary\n---\nRun: ", 0), 0u) << before[2];

  char b2[] = "2";
  char* argv2[] = {a0, a1, b2};
  fig.panels[0] = ng::plot::LineChart{.title = "loss", .series = {{.label = "b", .y = {5.0, 1.0}}}};
  {
    Report second(o, "r", 3, argv2);  // a run that fails after its figure: write_all never comes
    second.add_figure(fig);
  }
  for (size_t i = 0; i < exts.size(); ++i) EXPECT_EQ(slurp(dir / ("r." + exts[i])), before[i]) << exts[i];
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) ++files, (void)entry;
  EXPECT_EQ(files, exts.size());  // nothing else: no temporary file

  Report third(o, "r", 3, argv2);
  EXPECT_EQ(third.add_figure(fig), (dir / "r.png").string());
  third.write_all("third summary");
  EXPECT_EQ(slurp(dir / "r.cmd.txt"), "exp --seed 2\n");
  EXPECT_NE(slurp(dir / "r.csv").find("loss,line,b,"), std::string::npos);
  EXPECT_NE(slurp(dir / "r.png"), before[0]);
  EXPECT_EQ(slurp(dir / "r.md").rfind("third summary\n---\nRun: ", 0), 0u);

  // The four go as a set: when the last cannot be written (here a folder stands where the summary goes),
  // the other three keep the previous run's bytes, and no temporary file is left.
  // The folder appears during the run: a Report made before it passed its own check.
  Report fourth(o, "r", 3, argv1);
  fs::remove(dir / "r.md");
  fs::create_directory(dir / "r.md");
  std::vector<std::string> kept;
  for (const std::string e : {"png", "csv", "cmd.txt"}) kept.push_back(slurp(dir / ("r." + e)));
  fig.panels[0] = ng::plot::LineChart{.title = "loss", .series = {{.label = "c", .y = {9.0, 8.0}}}};
  fourth.add_figure(fig);
  try {
    fourth.write_all("fourth summary");
    ADD_FAILURE() << "expected ng::Error";
  } catch (const ng::Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.md': it is a folder"), std::string::npos) << e.what();
  }
  size_t i = 0;
  for (const std::string e : {"png", "csv", "cmd.txt"}) EXPECT_EQ(slurp(dir / ("r." + e)), kept[i++]) << e;
  files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) ++files, (void)entry;
  EXPECT_EQ(files, 4u);
  // A folder already there when the run starts is refused by the Report's constructor, before any training.
  try {
    Report fifth(o, "r", 3, argv1);
    ADD_FAILURE() << "expected ng::Error";
  } catch (const ng::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("Report: cannot write '" + (dir / "r.md").string() + "': it is a folder"),
        std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ExamplesStats, LastNMeanAndStdSkipNonFinite) {
  std::vector<double> v = {100, 1, 2, 3, NAN};
  EXPECT_DOUBLE_EQ(mean_last(v, 4), 2.0);  // the NaN is skipped, 100 is outside the window
  EXPECT_DOUBLE_EQ(std_last(v, 4), std::sqrt(2.0 / 3.0));
  EXPECT_DOUBLE_EQ(mean_last(v, 100), 26.5);
  EXPECT_TRUE(std::isnan(mean_last({NAN, NAN}, 2)));
  EXPECT_TRUE(std::isnan(mean_last({}, 5)));
}

TEST(ExamplesDivergence, StopsAtTheFirstNonFiniteStep) {
  DivergenceWatch w;
  EXPECT_TRUE(w.ok(0, 5.0, 1.0));
  EXPECT_TRUE(w.ok(1, 4.0, 1e30));
  EXPECT_FALSE(w.diverged());
  EXPECT_EQ(w.step(), -1);
  EXPECT_FALSE(w.ok(2, 3.0, INFINITY));  // finite loss, but the gradient blew up: the next step would be NaN
  EXPECT_TRUE(w.diverged());
  EXPECT_EQ(w.step(), 2);
  EXPECT_EQ(w.what(), "gradient norm is Inf");
  EXPECT_FALSE(w.ok(3, NAN, 0.0));  // stays at the first divergence
  EXPECT_EQ(w.step(), 2);
  DivergenceWatch n;
  EXPECT_FALSE(n.ok(7, NAN));
  EXPECT_EQ(n.what(), "loss is NaN");
  EXPECT_EQ(n.step(), 7);
}

TEST(ExamplesProgress, BarText) {
  std::string s = Progress::format("Pre-LN", 50, 100, 2.5, 10.0);
  EXPECT_NE(s.find("[##########----------]"), std::string::npos) << s;
  EXPECT_NE(s.find("50/100"), std::string::npos);
  EXPECT_NE(s.find("loss 2.5000"), std::string::npos);
  EXPECT_NE(s.find("10.0 steps/s"), std::string::npos);
  EXPECT_NE(s.find("ETA 0:05"), std::string::npos);
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(NAN), "?");
}

// Drive a bar through a whole run: every step, then finish().
static void run_bar(Progress& bar, int64_t total) {
  for (int64_t step = 1; step <= total; ++step) bar.update(step, 2.5);
  bar.finish();
}

// What a CI log or `2> file` gets: nothing at all, even when not quiet.
TEST(ExamplesProgress, SilentWhenNotATerminal) {
  // A regular file.
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  Progress to_file("x", 10, /*quiet=*/false, 1, file);
  EXPECT_FALSE(to_file.active());
  run_bar(to_file, 10);
  EXPECT_EQ(std::ftell(file), 0L) << "the bar wrote to a file";
  std::fclose(file);

  // A pipe: whatever the bar wrote would be readable at the other end.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::FILE* pipe_end = ::fdopen(fds[1], "w");
  ASSERT_NE(pipe_end, nullptr);
  {
    Progress to_pipe("x", 10, /*quiet=*/false, 1, pipe_end);
    EXPECT_FALSE(to_pipe.active());
    run_bar(to_pipe, 10);
  }
  std::fclose(pipe_end);  // closes fds[1]: the read below sees end-of-file after whatever was written
  char buf[256];
  EXPECT_EQ(::read(fds[0], buf, sizeof(buf)), 0) << "the bar wrote to a pipe";
  ::close(fds[0]);
}

// The same bar on a real terminal (a pseudo-terminal) draws its line, and --quiet silences it there too.
TEST(ExamplesProgress, DrawsOnATerminalUnlessQuiet) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0)
    GTEST_SKIP() << "no pseudo-terminals here (posix_openpt failed)";
  int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  std::FILE* tty = ::fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  // Everything the terminal received so far, without blocking.
  auto drain = [&] {
    std::string got;
    char buf[1024];
    pollfd p{master, POLLIN, 0};
    while (::poll(&p, 1, 100) > 0 && (p.revents & POLLIN)) {
      ssize_t n = ::read(master, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
    return got;
  };

  Progress quiet("Pre-LN", 10, /*quiet=*/true, 1, tty);
  EXPECT_FALSE(quiet.active());
  run_bar(quiet, 10);
  EXPECT_EQ(drain(), "");

  Progress bar("Pre-LN", 10, /*quiet=*/false, 1, tty);
  EXPECT_TRUE(bar.active());
  run_bar(bar, 10);
  std::string got = drain();
  EXPECT_NE(got.find("Pre-LN"), std::string::npos) << got;
  EXPECT_NE(got.find("10/10"), std::string::npos) << got;  // the last step is always drawn
  EXPECT_NE(got.find("loss 2.5000"), std::string::npos) << got;
  EXPECT_EQ(got.back(), '\n') << "finish() ends the line";
  std::fclose(tty);
  ::close(master);
}

TEST(ExamplesFlags, ParsesCommonFlags) {
  CLI::App app{"test"};
  CommonOptions o;
  add_common_flags(app, o);
  fs::path dir = temp_dir("flags");
  std::string out = (dir / "out").string();
  std::vector<std::string> args = {"prog",      "--out", out,       "--seed", "7",
                                   "--threads", "1",     "--quick", "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_FALSE(parse_flags(app, int(argv.size()), argv.data(), o).has_value());
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.threads, 1);
  EXPECT_TRUE(o.quick && o.quiet);
  EXPECT_FALSE(o.data_given);
  EXPECT_TRUE(fs::is_directory(out));
  EXPECT_EQ(o.steps_or(1000, 100), 100);
  o.steps = 5;
  EXPECT_EQ(o.steps_or(1000, 100), 5);
  fs::remove_all(dir);
}

#ifdef NG_EXP1_GRADIENT_VANISHING_PATH
TEST(ExamplesPrograms, BadFlagsExitWithUsage) {
  fs::path dir = temp_dir("badflags");
  std::string exe = NG_EXP1_GRADIENT_VANISHING_PATH;
  std::string out = " --out " + (dir / "o").string();
  std::string err;
  EXPECT_EQ(run(exe + out + " --threads 0", err, dir), 2);
  EXPECT_NE(err.find("--threads"), std::string::npos) << err;
  EXPECT_NE(err.find("Usage"), std::string::npos) << err;
  EXPECT_EQ(run(exe + out + " --steps banana", err, dir), 2);
  EXPECT_NE(err.find("--steps"), std::string::npos) << err;
  EXPECT_EQ(run(exe + out + " --no-such-flag", err, dir), 2);
  EXPECT_NE(err.find("--no-such-flag"), std::string::npos) << err;
  // A folder that exists but cannot be written in (sysfs takes no new files, even from root): a usage error
  // now, where it used to be found when the run's files were written, after the whole run.
  EXPECT_EQ(run(exe + " --out /sys", err, dir), 2);
  EXPECT_NE(err.find("--out: cannot write in folder '/sys': "), std::string::npos) << err;
#ifdef NG_EXP2_NORM_COMPARISON_PATH
  // exp2 reads --data: an unreadable one is a usage error (exp1 ignores it: Exp1SaysWhichFlagsDoNotApply).
  EXPECT_EQ(run(std::string(NG_EXP2_NORM_COMPARISON_PATH) + out + " --data " + (dir / "missing.txt").string(),
                err, dir),
            2);
  EXPECT_NE(err.find("--data: cannot read"), std::string::npos) << err;
#endif
  fs::remove_all(dir);
}

TEST(ExamplesPrograms, Exp1WritesItsFourFiles) {
  fs::path dir = temp_dir("exp1");
  std::string err;
  ASSERT_EQ(
      run(std::string(NG_EXP1_GRADIENT_VANISHING_PATH) + " --threads 2 --out " + dir.string(), err, dir), 0)
      << err;
  for (const char* ext : {"png", "csv", "md", "cmd.txt"})
    EXPECT_TRUE(fs::exists(dir / (std::string("gradient_vanishing.") + ext))) << ext;
  std::string md = slurp(dir / "gradient_vanishing.md");
  EXPECT_NE(md.find("the lesson claims 0.016"), std::string::npos);
  // The conclusions are the run's measurements held against their predictions (each sentence has a
  // negative form the summary would print instead).
  EXPECT_NE(md.find("- The decay stops at a floor set by the biases"), std::string::npos) << md;
  EXPECT_NE(md.find("(all within 25% of it)"), std::string::npos) << md;
  EXPECT_NE(md.find("This init predicts 0.337 (Var(z) = 1/3 + 1/(3n) for unit inputs): the measured value is "
                    "within 5%"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("is below the std after it at 10 of 10 layers: every layer still shrinks its input"),
            std::string::npos)
      << md;
  // layer 1's weight gradient over layer 10's, for each of the three stacks (README quoted LayerNorm's
  // before the summary computed it)
  EXPECT_NE(md.find("weight gradient of layer 1 is 0.0151 times that of layer 10; with RMSNorm the ratio is "
                    "1.07, with LayerNorm 5.81."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Command: `"), std::string::npos);
  std::string csv = slurp(dir / "gradient_vanishing.csv");
  EXPECT_EQ(csv.rfind("panel,kind,series,x,y\n", 0), 0u);
  // Ten layers of "no norm" activation std, each a positive number.
  size_t count = 0;
  for (size_t p = csv.find("Activation std per layer,line,no norm,"); p != std::string::npos;
       p = csv.find("Activation std per layer,line,no norm,", p + 1))
    ++count;
  EXPECT_EQ(count, 10u);
  // The reference line at std 1 that LayerNorm's output sits on by construction.
  EXPECT_NE(csv.find("Activation std per layer,hline,std 1: LayerNorm's output (by construction),,1\n"),
            std::string::npos)
      << csv;
  fs::remove_all(dir);
}

// exp1 trains nothing: --steps, --quick, --data, --save and --resume each get a one-line notice on stderr
// (and the run goes on), instead of being ignored silently. Its --help says so too.
TEST(ExamplesPrograms, Exp1SaysWhichFlagsDoNotApply) {
  fs::path dir = temp_dir("exp1flags");
  { std::ofstream(dir / "text.txt") << std::string(2000, 'a'); }
  const std::string exe = NG_EXP1_GRADIENT_VANISHING_PATH;
  std::string err;
  ASSERT_EQ(run(exe + " --threads 2 --steps 3 --quick --data " + (dir / "text.txt").string() + " --out " +
                    (dir / "out").string(),
                err, dir),
            0)
      << err;
  for (const char* flag : {"--steps", "--quick", "--data"})
    EXPECT_NE(err.find(std::string("note: ") + flag +
                       " does not apply to this experiment (experiment 1 trains no model"),
              std::string::npos)
        << flag << ": " << err;
  EXPECT_EQ(err.find("note: --save"), std::string::npos) << "--save was not given: " << err;
  EXPECT_TRUE(fs::exists(dir / "out" / "gradient_vanishing.png"));
  // An ignored flag's value is not checked either: a --data or --resume that does not exist stopped the run
  // with a usage error, while --help said the flags do not apply.
  ASSERT_EQ(run(exe + " --threads 2 --data " + (dir / "missing.txt").string() + " --resume " +
                    (dir / "missing.safetensors").string() + " --out " + (dir / "out2").string(),
                err, dir),
            0)
      << err;
  for (const char* flag : {"--data", "--resume"})
    EXPECT_NE(err.find(std::string("note: ") + flag + " does not apply to this experiment"),
              std::string::npos)
        << flag << ": " << err;
  const int status = std::system((exe + " --help > " + (dir / "help.txt").string()).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string help = slurp(dir / "help.txt");
  EXPECT_EQ(count_of(help, "does not apply to this experiment"), 5u) << help;
  fs::remove_all(dir);
}
#endif

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH
// exp3 end to end on the copy task for 3 steps: its files, its learning-rate flags, and a summary whose
// learning-rate note follows the flags (the lesson's 10x recipe by default, "position alone" when equal).
TEST(ExamplesPrograms, Exp3LearningRateFlagsReachTheRunsAndTheSummary) {
  fs::path dir = temp_dir("exp3");
  const std::string exe = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) +
                          " --quick --steps 1 --task copy --threads 2 --quiet --out ";
  std::string err;
  EXPECT_EQ(run(exe + (dir / "bad").string() + " --post-lr 0", err, dir), 2);
  EXPECT_NE(err.find("--post-lr"), std::string::npos) << err;

  ASSERT_EQ(run(exe + (dir / "default").string(), err, dir), 0) << err;
  for (const char* ext : {"png", "csv", "md", "cmd.txt"})
    EXPECT_TRUE(fs::exists(dir / "default" / (std::string("prenorm_vs_postnorm.") + ext))) << ext;
  std::string md = slurp(dir / "default" / "prenorm_vs_postnorm.md");
  EXPECT_NE(md.find("| Post-LN 8L | 0.0001 |"), std::string::npos) << md;
  EXPECT_NE(md.find("(Pre-LN 0.001, Post-LN 0.0001, 10x), the lesson's recipe"), std::string::npos) << md;
  // One step ranks nothing: its loss is the untrained model's (the summary used to say which position "ends
  // lower" from it).
  EXPECT_NE(md.find("- 4 layers: one step is too few to rank Pre-LN against Post-LN"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- Pre-LN at 4 and 8 layers: not compared, one step is too few."), std::string::npos)
      << md;
  EXPECT_EQ(md.find("ends lower"), std::string::npos) << md;

  ASSERT_EQ(run(exe + (dir / "same").string() + " --post-lr 1e-3", err, dir), 0) << err;
  md = slurp(dir / "same" / "prenorm_vs_postnorm.md");
  EXPECT_NE(md.find("| Post-LN 8L | 0.001 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Both positions run at the same learning rate (0.001)"), std::string::npos) << md;

  // A rate of three significant digits is printed as given: the table and the suggested flag showed 0.0013
  // for 0.00125 (two digits), a rate no run used.
  ASSERT_EQ(run(exe + (dir / "digits").string() + " --pre-lr 0.00125", err, dir), 0) << err;
  md = slurp(dir / "digits" / "prenorm_vs_postnorm.md");
  EXPECT_NE(md.find("| Pre-LN 8L | 0.00125 |"), std::string::npos) << md;
  EXPECT_NE(md.find("(Pre-LN 0.00125, Post-LN 0.0001, 12.5x)"), std::string::npos) << md;
  EXPECT_NE(md.find("`--post-lr 0.00125` runs Post-LN at Pre-LN's rate"), std::string::npos) << md;
  fs::remove_all(dir);
}
#endif
