// Common flags: registration, parsing, and the checks CLI11 cannot do on its own. See cli.h.
#include "examples/common/cli.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "examples/common/finite_range.h"
#include "examples/common/report.h"
#include "examples/common/seeds.h"
#include "tensor/error.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "autograd/engine.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"

namespace ng::examples {

bool readable_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  return bool(in);
}

namespace {
// CLI11 alone takes "-1" as 2^64 - 1 and clamps 2^64 to the same: only a number that fits.
std::string seed_check(const std::string& v) {
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    return "expected a whole number from 0 to 18446744073709551615, got '" + v + "'";
  return "";
}
}  // namespace

void add_common_flags(CLI::App& app, CommonOptions& o) {
  app.add_option("--out", o.out, "output folder for PNG, CSV, summary and command line")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (same seed and --threads: same numbers)")
      ->capture_default_str()
      ->check(seed_check);
  app.add_option("--threads", o.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, ng::kMaxThreads));
  app.add_option("--steps", o.steps, "training steps (default: the experiment's own)")
      ->check(CLI::Range(int64_t(1), int64_t(100000000)));
  app.add_flag("--quick", o.quick, "short run (under 2 minutes on 2 cores)");
  app.add_option("--data", o.data, "TinyShakespeare text file")->capture_default_str();
  app.add_option("--save", o.save, "write a safetensors checkpoint of the last model trained");
  app.add_option("--resume", o.resume, "start the last model from this checkpoint");
  app.add_flag("--quiet", o.quiet, "no progress bar");
  app.add_flag("--detect-anomaly", o.detect_anomaly,
               "stop at the first op whose forward or backward makes NaN/Inf, naming it (slow)");
}

void add_seeds_flag(CLI::App& app, CommonOptions& o) {
  app.add_option("--seeds", o.seeds,
                 "train every config once per seed, e.g. 42,2,7, and rank them across the seeds too "
                 "(instead of --seed)")
      ->delimiter(',')
      ->check(seed_check)
      ->excludes("--seed")
      ->excludes("--save")
      ->excludes("--resume");
}

namespace {
// N of "cuda:N", or -1 when N is not a whole number from 0 to 1023 (std::stoi threw std::out_of_range,
// past guarded_main, for "cuda:99999999999").
int cuda_index(const std::string& v) {
  int n = -1;
  const char* first = v.data() + 5;
  const char* last = v.data() + v.size();
  const auto [end, ec] = std::from_chars(first, last, n);
  return (first != last && ec == std::errc() && end == last && n >= 0 && n < 1024) ? n : -1;
}
}  // namespace

void add_device_flag(CLI::App& app, std::string& device) {
  app.add_option("--device", device,
                 "where to train: cpu, or cuda / cuda:N (needs the CUDA backend and a GPU)")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "cpu" || v == "cuda") return "";
        if (v.rfind("cuda:", 0) == 0 && cuda_index(v) >= 0) return "";
        return "expected cpu, cuda or cuda:N (N a GPU index from 0 to 1023), got '" + v + "'";
      });
}

void add_warmup_flag(CLI::App& app, int64_t& warmup, const std::string& help) {
  app.add_option("--warmup", warmup, help)
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
}

bool warmup_fits(int64_t warmup, int64_t steps) {
  if (warmup < steps) return true;
  std::cerr << "--warmup: expected fewer warmup steps than the run's " << steps << " (--steps), got "
            << warmup << "\n";
  return false;
}

std::string warmup_description(int64_t warmup) {
  const std::string w = std::to_string(warmup);
  return "a linear warmup over the first " + w + " steps (step s at lr * s / " + w + ")";
}

void add_clip_flag(CLI::App& app, double& clip, const std::string& help) {
  app.add_option("--clip", clip, help)->check(FiniteRange(0.0, 1e12))->capture_default_str();
}

std::string clip_description(double clip) {
  if (clip <= 0) return "no clipping";
  std::string n = num(clip);
  if (n.find_first_of(".e") == std::string::npos) n += ".0";
  return "clip_grad_norm " + n;
}

Device require_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  const int index = name == "cuda" ? 0 : cuda_index(name);
  NG_CHECK(index >= 0, "--device", "expected cpu, cuda or cuda:N, got '", name, "'");
  const Device d = Device::cuda(index);
  try {
    (void)ng::ones({1}).to(d);  // fails here, clearly, when there is no backend or no such GPU
  } catch (const ng::Error& e) {
    fail("--device", name, " cannot be used: ", e.what());
  }
  return d;
}

namespace {
constexpr const char* kUnused = "does not apply to this experiment";

bool flag_unused(const CLI::App& app, const std::string& flag) {
  const CLI::Option* o = app.get_option_no_throw(flag);
  return o != nullptr && o->get_description().rfind(kUnused, 0) == 0;
}

// "" when a new file can be made in `folder`, else why not: a file is created there (mkstemp: O_EXCL under a
// fresh name, so a leftover of an earlier probe never gets in the way) and removed again.
std::string folder_write_error(const std::string& folder) {
  std::string probe = (std::filesystem::path(folder) / ".normgrad_write_probe.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}
}  // namespace

void mark_flags_unused(CLI::App& app, const std::vector<std::string>& flags, const std::string& why) {
  for (const std::string& flag : flags)
    app.get_option(flag)->description(std::string(kUnused) + " (" + why + ")");
}

void note_unused_flags(const CLI::App& app, const std::vector<std::string>& flags, const std::string& why) {
  for (const std::string& flag : flags)
    if (app.count(flag) > 0)
      std::cerr << "note: " << flag << " does not apply to this experiment (" << why << "); ignored\n";
}

namespace {
int usage_error(CLI::App& app, const std::string& message) {
  std::cerr << app.get_name() << ": error: " << message << "\n\n" << app.help() << std::flush;
  return 2;
}
}  // namespace

std::optional<int> parse_flags(CLI::App& app, int argc, char** argv, CommonOptions& o) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what());
  }
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--save", &o.save},
                                    {"--resume", &o.resume},
                                    {"--out", &o.out},
                                    {"--data", &o.data}})
    if (app.count(flag) > 0 && value->empty())  // `--save ""` wrote no checkpoint, and said nothing
      return usage_error(app, std::string(flag) + ": expected a path, got an empty one");
  o.data_given = app.count("--data") > 0;
  // --seeds: only where the experiment registered it (app.count throws for a flag it does not have)
  const CLI::Option* seeds_flag = app.get_option_no_throw("--seeds");
  if (seeds_flag != nullptr && seeds_flag->count() > 0) {
    if (o.seeds.size() > kMaxSeeds)
      return usage_error(app, "--seeds: expected at most " + std::to_string(kMaxSeeds) + " seeds, got " +
                                  std::to_string(o.seeds.size()));
    for (size_t i = 0; i < o.seeds.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (o.seeds[i] == o.seeds[j])
          return usage_error(app, "--seeds: seed " + std::to_string(o.seeds[i]) +
                                      " is given twice (each seed is one run of every config)");
    o.seed = o.seeds.front();
    if (const std::string note = adjacent_seeds_note(o.seeds); !note.empty())
      std::cerr << "note: " << note << "\n";
  } else {
    o.seeds = {o.seed};
  }
  // A flag the experiment ignores (mark_flags_unused) is not checked: --help says it does not apply, and
  // note_unused_flags says it was ignored, so its value must not stop the run.
  if (o.data_given && !flag_unused(app, "--data") && !readable_file(o.data))
    return usage_error(app, "--data: cannot read '" + o.data + "' (get it with scripts/get_data.sh)");
  if (!o.resume.empty() && !flag_unused(app, "--resume") && !readable_file(o.resume))
    return usage_error(app, "--resume: cannot read '" + o.resume + "'");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec || !std::filesystem::is_directory(o.out))
    return usage_error(app, "--out: cannot create folder '" + o.out + "': " + ec.message());
  // A folder that exists but cannot be written to (read-only, another user's, a read-only file system) was
  // found only when the run's files were written, after all the training.
  if (const std::string why = folder_write_error(o.out); !why.empty())
    return usage_error(app, "--out: cannot write in folder '" + o.out + "': " + why);
  if (o.threads > 0) ng::set_num_threads(o.threads);
  if (o.detect_anomaly) ng::set_anomaly_enabled(true);  // for the whole run (autograd/anomaly.h)
  return std::nullopt;
}

int guarded_main(int argc, char** argv, int (*body)(int, char**)) {
  try {
    return body(argc, argv);
  } catch (const ng::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ng::examples
