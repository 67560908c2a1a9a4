// CSV, Markdown, command line and run statistics shared by the experiments. See report.h.
#include "examples/common/report.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <variant>

#include "io/whole_file.h"
#include "plot/canvas.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace ng::examples {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  q += '"';
  return q;
}

std::string num(double v, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
  return buf;
}

std::string Csv::str() const {
  std::string s;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) s += ',';
      s += csv_field(cells[i]);
    }
    s += "\n";
  };
  line(header);
  for (size_t r = 0; r < rows.size(); ++r) {
    NG_CHECK(rows[r].size() == header.size(), "Csv", "row ", r, " has ", rows[r].size(), " fields, expected ",
             header.size());
    line(rows[r]);
  }
  return s;
}

std::vector<CsvRow> read_figure_csv(const std::string& path, const char* op) {
  const std::string text = io::read_whole_file(path, op);
  // Split into records of fields, quotes undone.
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::vector<std::string>& record = records.back();
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        record.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        record.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.emplace_back();
    } else if (c == '\n') {
      records.emplace_back(1);
    } else if (c != '\r') {
      record.back() += c;
    }
  }
  NG_CHECK(!quoted, op, path, ": a quoted field is not closed at the end of the file");
  if (records.back().size() == 1 && records.back()[0].empty()) records.pop_back();  // after the last newline
  const std::vector<std::string> header = {"panel", "kind", "series", "x", "y"};
  NG_CHECK(!records.empty() && records[0] == header, op, path,
           ": expected an experiment's CSV, whose first line is panel,kind,series,x,y");
  std::vector<CsvRow> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const std::vector<std::string>& f = records[r];
    NG_CHECK(f.size() == 5, op, path, ": row ", r, " has ", f.size(),
             " fields, expected 5 (panel,kind,series,x,y)");
    rows.push_back({f[0], f[1], f[2], f[3], f[4]});
  }
  return rows;
}

Csv figure_csv(const plot::Figure& fig) {
  Csv csv;
  csv.header = {"panel", "kind", "series", "x", "y"};
  auto add = [&](const std::string& panel, const char* kind, const std::string& series, const std::string& x,
                 const std::string& y) {
    csv.rows.push_back({panel, kind, series, x, y});
  };
  for (size_t p = 0; p < fig.panels.size(); ++p) {
    std::visit(
        [&](const auto& panel) {
          using T = std::decay_t<decltype(panel)>;
          std::string title = panel.title.empty() ? "panel " + std::to_string(p) : panel.title;
          if constexpr (std::is_same_v<T, plot::LineChart>) {
            for (const auto& s : panel.series) {
              // render() checks this too, but the CSV may be asked for first
              NG_CHECK(s.x.empty() || s.x.size() == s.y.size(), "figure_csv", "series '", s.label,
                       "' of panel '", title, "' has ", s.x.size(), " x values and ", s.y.size(),
                       " y values, expected as many");
            }
            for (const auto& s : panel.series)
              for (size_t i = 0; i < s.y.size(); ++i)
                add(title, "line", s.label, num(s.x.empty() ? double(i) : s.x[i], 9), num(s.y[i], 9));
            for (const auto& v : panel.vlines) add(title, "vline", v.label, num(v.at, 9), "");
            for (const auto& h : panel.hlines) add(title, "hline", h.label, "", num(h.at, 9));
          } else if constexpr (std::is_same_v<T, plot::BarChart>) {
            for (const auto& g : panel.groups)
              for (size_t i = 0; i < g.values.size(); ++i)
                add(title, "bar", g.label, panel.categories[i], num(g.values[i], 9));
            for (const auto& h : panel.hlines) add(title, "hline", h.label, "", num(h.at, 9));
          } else {
            for (const auto& row : panel.rows)
              for (size_t j = 1; j < row.size() && j < panel.header.size(); ++j)
                add(title, "table", row.empty() ? "" : row[0], panel.header[j], row[j]);
          }
        },
        fig.panels[p]);
  }
  return csv;
}

std::string md_table(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const auto& c : cells) s += " " + c + " |";
    return s + "\n";
  };
  std::string s = line(header);
  s += "|";
  for (size_t i = 0; i < header.size(); ++i) s += "---|";
  s += "\n";
  for (const auto& r : rows) {
    NG_CHECK(r.size() == header.size(), "md_table", "row has ", r.size(), " cells, expected ", header.size());
    s += line(r);
  }
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  try {
    io::atomic_write_file(path, text);
  } catch (const Error& e) {
    fail("write_text", "cannot write '", path, "' (", e.what(), ")");
  }
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789-_./=:,+@%") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += '\'';
      a = q;
    }
    if (i) s += ' ';
    s += a;
  }
  return s;
}

Report::Report(const CommonOptions& o, std::string name, int argc, char** argv)
    : out_(o.out),
      name_(std::move(name)),
      command_(command_line(argc, argv)),
      threads_(num_threads()),
      start_(std::chrono::steady_clock::now()) {
  std::filesystem::create_directories(out_);
  // Refused now, before the run trains, rather than in write_all at its end: a folder or a FIFO where one
  // of the four files goes.
  for (const std::string& f : files()) io::check_write_target(f, "Report");
}

std::string Report::path(const std::string& ext) const {
  return (std::filesystem::path(out_) / (name_ + "." + ext)).string();
}

std::vector<std::string> Report::files() const {
  return {path("png"), path("csv"), path("md"), path("cmd.txt")};
}

std::string Report::add_figure(const plot::Figure& figure) {
  const std::string png = path("png");
  pending_.emplace_back(png, plot::encode_png(plot::render(figure)));
  pending_.emplace_back(path("csv"), figure_csv(figure).str());
  return png;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

void Report::write_all(const std::string& summary_markdown) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char cost[160];
  std::snprintf(cost, sizeof(cost),
                "Run: %d thread%s, %.1f s wall, peak RSS %.0f MiB (measured by the run itself).", threads_,
                threads_ == 1 ? "" : "s", seconds, peak_rss_mib());
  pending_.emplace_back(path("cmd.txt"), command_ + "\n");
  pending_.emplace_back(path("md"),
                        summary_markdown + "\n---\n" + cost + "\n\nCommand: `" + command_ + "`\n");
  // As a set: all four are written to temporary files before the first takes its name (io/whole_file.h).
  std::vector<std::pair<std::string, std::string_view>> files(pending_.begin(), pending_.end());
  try {
    io::atomic_write_files(files, "Report");
  } catch (const Error& e) {
    fail("write_all", "cannot write the run's files in '", out_, "' (", e.what(), ")");
  }
  pending_.clear();
}

namespace {
std::vector<double> finite_tail(const std::vector<double>& v, size_t n) {
  std::vector<double> t;
  size_t start = v.size() > n ? v.size() - n : 0;
  for (size_t i = start; i < v.size(); ++i)
    if (std::isfinite(v[i])) t.push_back(v[i]);
  return t;
}
}  // namespace

double mean_last(const std::vector<double>& v, size_t n) {
  std::vector<double> t = finite_tail(v, n);
  if (t.empty()) return NAN;
  double s = 0;
  for (double x : t) s += x;
  return s / double(t.size());
}

double std_last(const std::vector<double>& v, size_t n) {
  std::vector<double> t = finite_tail(v, n);
  if (t.empty()) return NAN;
  double m = mean_last(v, n), s = 0;
  for (double x : t) s += (x - m) * (x - m);
  return std::sqrt(s / double(t.size()));
}

std::pair<double, double> head_tail_means(const std::vector<double>& v, size_t head, size_t tail) {
  if (v.size() < 2) return {NAN, NAN};
  const size_t h = std::min(head, v.size() / 2), t = std::min(tail, v.size() - h);
  const std::vector<double> first(v.begin(), v.begin() + std::ptrdiff_t(h));
  return {mean_last(first, h), mean_last(v, t)};
}

bool DivergenceWatch::ok(int64_t step, double loss, double grad_norm) {
  if (diverged()) return false;
  auto kind = [](double v) { return std::isnan(v) ? "NaN" : "Inf"; };
  if (!std::isfinite(loss)) {
    what_ = std::string("loss is ") + kind(loss);
  } else if (!std::isfinite(grad_norm)) {
    what_ = std::string("gradient norm is ") + kind(grad_norm);
  } else {
    return true;
  }
  step_ = step;
  return false;
}

}  // namespace ng::examples
