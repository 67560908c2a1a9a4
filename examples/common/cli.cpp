// Common flags: registration, parsing, and the checks CLI11 cannot do on its own. See cli.h.
#include "examples/common/cli.h"

#include <cstdio>

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

void add_common_flags(CLI::App& app, CommonOptions& o) {
  app.add_option("--out", o.out, "output folder for PNG, CSV, summary and command line")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (same seed and --threads: same numbers)")
      ->capture_default_str();
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

void add_device_flag(CLI::App& app, std::string& device) {
  app.add_option("--device", device,
                 "where to train: cpu, or cuda / cuda:N (needs the CUDA backend and a GPU)")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "cpu" || v == "cuda") return "";
        if (v.rfind("cuda:", 0) == 0 && v.size() > 5 &&
            v.find_first_not_of("0123456789", 5) == std::string::npos)
          return "";
        return "expected cpu, cuda or cuda:N, got '" + v + "'";
      });
}

Device require_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  const Device d = Device::cuda(name == "cuda" ? 0 : std::stoi(name.substr(5)));
  try {
    (void)ng::ones({1}).to(d);  // fails here, clearly, when there is no backend or no such GPU
  } catch (const ng::Error& e) {
    fail("--device", name, " cannot be used: ", e.what());
  }
  return d;
}

void mark_flags_unused(CLI::App& app, const std::vector<std::string>& flags, const std::string& why) {
  for (const std::string& flag : flags)
    app.get_option(flag)->description("does not apply to this experiment (" + why + ")");
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
  o.data_given = app.count("--data") > 0;
  if (o.data_given && !readable_file(o.data))
    return usage_error(app, "--data: cannot read '" + o.data + "' (get it with scripts/get_data.sh)");
  if (!o.resume.empty() && !readable_file(o.resume))
    return usage_error(app, "--resume: cannot read '" + o.resume + "'");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec || !std::filesystem::is_directory(o.out))
    return usage_error(app, "--out: cannot create folder '" + o.out + "': " + ec.message());
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
