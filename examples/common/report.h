// What every experiment leaves behind, beside its PNG (all in --out):
//
//   <name>.png      the figure
//   <name>.csv      every number the figure plots, one per row: panel,kind,series,x,y
//                   (kind: line | vline | hline | bar | table; a table cell is one row with its column as x)
//   <name>.md       the Markdown summary: the measured tables and the conclusions, computed from the run
//   <name>.cmd.txt  the exact command line that made them
//
// The four are written together when the run has finished (Report::write_all), as a set
// (io::atomic_write_files): a run that fails, or is stopped, part-way, or whose last file cannot be
// written (a full disk, a folder in its place), leaves the previous run's files in --out as they were, so
// the folder never holds a PNG of one run beside the command line of another.
// The CSV is derived from the plot::Figure itself, so nothing plotted can be missing from it.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "examples/common/cli.h"
#include "plot/chart.h"

namespace ng::examples {

// ---- CSV ----
// RFC 4180 quoting: a field with a comma, quote or newline is quoted, quotes doubled.
std::string csv_field(const std::string& s);
// A number with enough digits to round-trip (%.9g for what came from f32 is plenty); NaN -> "nan".
std::string num(double v, int precision = 6);
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string str() const;  // header line, then one line per row; checks every row's width
};
// Every number in the figure, in the long format above.
Csv figure_csv(const plot::Figure& figure);
// One row of such a CSV, read back.
struct CsvRow {
  std::string panel, kind, series, x, y;
};
// Reads a CSV that figure_csv wrote (RFC 4180: a quoted field may hold commas, doubled quotes and line
// breaks). An unreadable file, another header, an unclosed quote or a row that is not 5 fields is an
// ng::Error that starts with `op` and names the file.
std::vector<CsvRow> read_figure_csv(const std::string& path, const char* op);

// ---- Markdown ----
std::string md_table(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows);

// ---- files ----
// Writes text to a file atomically (throws ng::Error naming the path on failure; any old file stays as it
// was).
void write_text(const std::string& path, const std::string& text);
// argv as one shell line, each argument quoted when it needs to be.
std::string command_line(int argc, char** argv);

class Report {
 public:
  // Writes nothing yet (see write_all); the clock of the run's cost starts here.
  Report(const CommonOptions& options, std::string name, int argc, char** argv);
  std::string path(const std::string& extension) const;  // <out>/<name>.<extension>
  std::vector<std::string> files() const;                // the four paths write_all writes
  // Renders the figure to its PNG and CSV, kept until write_all. Returns the PNG's path.
  std::string add_figure(const plot::Figure& figure);
  // Writes the run's files: the figure's PNG and CSV, the command line, and the summary, with the run's
  // cost (wall time since this Report was made, the process's peak resident memory from getrusage, the
  // thread count) and the command line appended at its end.
  void write_all(const std::string& summary_markdown);
  const std::string& command() const { return command_; }

 private:
  std::string out_, name_, command_;
  int threads_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::pair<std::string, std::string>> pending_;  // (path, bytes) for write_all
};

// Peak resident set size of this process so far, in MiB (getrusage's ru_maxrss).
double peak_rss_mib();

// ---- small statistics over a loss curve (non-finite values are skipped) ----
double mean_last(const std::vector<double>& v, size_t n);
// Population standard deviation of the last n values.
double std_last(const std::vector<double>& v, size_t n);
// The means of a curve's start and end, for "how far did the loss fall": the first min(head, n/2) values
// and the last min(tail, n - that many), two windows that never overlap (a run of 5 steps compared its
// whole curve with itself and "fell by 0" while it blew up). NaN, NaN for fewer than 2 values.
std::pair<double, double> head_tail_means(const std::vector<double>& v, size_t head, size_t tail);

// ---- divergence ----
// Watches a training run: the first step whose loss or gradient norm is NaN or Inf is where the run
// diverged, and the trainer stops that run there.
class DivergenceWatch {
 public:
  // True when this step is finite (keep going). The first non-finite step is recorded and returns false.
  bool ok(int64_t step, double loss, double grad_norm = 0.0);
  bool diverged() const { return step_ >= 0; }
  int64_t step() const { return step_; }             // -1 when it never diverged
  const std::string& what() const { return what_; }  // "loss is NaN" / "gradient norm is Inf"

 private:
  int64_t step_ = -1;
  std::string what_;
};

}  // namespace ng::examples
