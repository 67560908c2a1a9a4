// Experiment 5: BatchNorm with small batches.
//
// The claims (the lesson's BatchNorm chapter, its table of norms and its GroupNorm section): BatchNorm
// normalizes each feature with the mean and variance of the current batch, so it depends on the batch
// size. With a small batch (the lesson names 4; detection models train at 2 to 4) those statistics are poor
// estimates and training suffers. LayerNorm, RMSNorm and GroupNorm normalize each sample on its own, so
// they do not depend on the batch size, and they work on a single sample. This experiment trains one model
// with each norm at batch sizes 1 to 64 and measures what happens.
//
// The model: a character-level MLP language model (Bengio et al. 2003, the model of Karpathy's "makemore"
// lectures, one of which adds BatchNorm to it):
//
//   ids (B, K) -> embedding (B, K, E) -> (B, K * E) -> 3 x [Linear(-> H) -> norm -> ReLU] -> Linear(H -> V)
//
// K = 8 characters of context, E = 16, H = 256; the logits (B, V) score the character after the K.
// Every norm sees a (B, H) activation:
//   BatchNorm1d(H)      each feature over the batch: its statistics are that feature's B values
//   LayerNorm(H)        each sample over its H features
//   RMSNorm(H)          each sample over its H features, without the mean
//   GroupNorm(8, H)     each sample over each of its 8 groups of 32 features
//   none                Linear -> ReLU
// Why an MLP and not the transformer of experiments 2 to 4: there BatchNorm would pool statistics over the
// batch and the time steps, which the lesson itself calls meaningless for sequences. The MLP has one
// (B, H) activation per layer, the setting BatchNorm was made for.
//
// The protocol:
// - Every run sees the same number of training windows (--samples, 65536), so batch B takes samples / B
//   steps. Adam runs at one learning rate (--lr, 1e-3) for every batch size. A batch size's best rate
//   differs, so the results compare the norms at each batch size, not the batch sizes with each other.
// - The runs of one batch size draw the same windows in the same order (from --seed + 1), and every run
//   starts from the same weights (from --seed; the norms' own parameters start at 1 and 0).
// - At the end, every model is scored in eval mode (BatchNorm normalizes with its running averages,
//   momentum 0.1) on the same validation windows (--val-windows, 8192, from --seed + 2). Two norms are ranked
//   by their paired difference over those windows (item_diff, examples/common/paired.h).
// - BatchNorm is also scored the way it trains: each block of B validation windows normalized with its own
//   statistics. That separates the two ways a small batch can hurt it: noisy statistics during training,
//   and running averages that do not match at evaluation.
//
// Output in --out: batch_size.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "examples/common/cli.h"
#include "examples/common/finite_range.h"
#include "examples/common/lm_task.h"
#include "examples/common/paired.h"
#include "examples/common/progress.h"
#include "examples/common/report.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

constexpr int64_t kContext = 8;   // K: characters the model sees
constexpr int64_t kEmbed = 16;    // E
constexpr int64_t kHidden = 256;  // H
constexpr int64_t kLayers = 3;
constexpr int64_t kGroups = 8;       // GroupNorm's groups of kHidden / kGroups features
constexpr size_t kCurvePoints = 32;  // the training curves: the mean loss of each 32nd of a run
constexpr size_t kValPoints = 8;     // validation scored 8 times along a run

enum class Norm { None, Batch, Layer, RMS, Group };
const std::vector<Norm> kNorms = {Norm::None, Norm::Batch, Norm::Layer, Norm::RMS, Norm::Group};

std::string norm_name(Norm n) {
  switch (n) {
    case Norm::None:
      return "no norm";
    case Norm::Batch:
      return "BatchNorm";
    case Norm::Layer:
      return "LayerNorm";
    case Norm::RMS:
      return "RMSNorm";
    case Norm::Group:
      return "GroupNorm";
  }
  return "?";
}

// ---- the model ----

// ids: (B, K) i64 -> logits: (B, V)
class MlpLM : public nn::Module {
 public:
  MlpLM(int64_t vocab, Norm norm, Generator& gen) {
    // The same draws in the same order for every norm: the norms draw nothing.
    embed_ = register_module("embed", std::make_shared<nn::Embedding>(vocab, kEmbed, gen));
    int64_t in = kContext * kEmbed;
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string i = std::to_string(l);
      linears_.push_back(register_module("linear" + i, std::make_shared<nn::Linear>(in, kHidden, true, gen)));
      std::shared_ptr<nn::Module> n;
      if (norm == Norm::Batch) n = std::make_shared<nn::BatchNorm1d>(kHidden);
      if (norm == Norm::Layer) n = std::make_shared<nn::LayerNorm>(kHidden);
      if (norm == Norm::RMS) n = std::make_shared<nn::RMSNorm>(kHidden);
      if (norm == Norm::Group) n = std::make_shared<nn::GroupNorm>(kGroups, kHidden);
      norms_.push_back(n ? register_module("norm" + i, n) : nullptr);
      in = kHidden;
    }
    head_ = register_module("head", std::make_shared<nn::Linear>(kHidden, vocab, true, gen));
  }

  Tensor forward(const Tensor& ids) override {
    const int64_t B = ids.shape()[0];
    Tensor h = embed_->forward(ids).reshape({B, kContext * kEmbed});  // (B, K * E)
    for (size_t l = 0; l < linears_.size(); ++l) {
      h = linears_[l]->forward(h);               // (B, H)
      if (norms_[l]) h = norms_[l]->forward(h);  // (B, H)
      h = relu(h);
    }
    return head_->forward(h);  // (B, V)
  }

 private:
  std::shared_ptr<nn::Embedding> embed_;
  std::vector<std::shared_ptr<nn::Linear>> linears_;
  std::vector<std::shared_ptr<nn::Module>> norms_;  // nullptr: no norm
  std::shared_ptr<nn::Linear> head_;
};

// ---- the data ----

// n windows of K + 1 characters from the training or validation split, at random starts.
// ids: (n, K) i64, targets: (n) i64, the character after each window's K.
struct Windows {
  Tensor ids, targets;
};

Windows draw_windows(const LMTask& task, int64_t n, Generator& gen, bool val) {
  const std::vector<int64_t>& split = val ? task.val_ids : task.train_ids;
  // LMTask::from_text refuses a text of 1000 bytes or less, so even the validation tenth holds over 100
  // characters, far more than a window of K + 1.
  const int64_t N = int64_t(split.size());
  std::vector<int64_t> starts = randint(0, N - kContext, {n}, gen).to_vector<int64_t>();
  std::vector<int64_t> ids(size_t(n * kContext)), targets(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < kContext; ++k)
      ids[size_t(b * kContext + k)] = split[size_t(starts[size_t(b)] + k)];
    targets[size_t(b)] = split[size_t(starts[size_t(b)] + kContext)];
  }
  return {from_vector(ids, {n, kContext}), from_vector(targets, {n})};
}

// Without TinyShakespeare: text from a random order-2 Markov chain over 16 letters. Each pair of letters is
// followed by one of 3 letters (drawn once, with drawn weights), so a model that reads its context can get
// far below the letters' entropy, and one that ignores it cannot.
std::string markov_text(uint64_t seed, size_t length) {
  constexpr int kLetters = 16, kNext = 3;
  Generator gen(seed + 3);
  const std::vector<int64_t> next =
      randint(0, kLetters, {kLetters * kLetters * kNext}, gen).to_vector<int64_t>();
  const std::vector<double> weight = rand({kLetters * kLetters * kNext}, gen, DType::f64).to_vector<double>();
  const std::vector<double> u = rand({int64_t(length)}, gen, DType::f64).to_vector<double>();
  std::string text = "ab";
  for (size_t i = 2; i < length; ++i) {
    const int context = (text[i - 2] - 'a') * kLetters + (text[i - 1] - 'a');
    double total = 0;
    for (int j = 0; j < kNext; ++j) total += 0.1 + weight[size_t(context * kNext + j)];
    double pick = u[i] * total;
    int j = 0;
    while (j < kNext - 1 && pick >= 0.1 + weight[size_t(context * kNext + j)])
      pick -= 0.1 + weight[size_t(context * kNext + j)], ++j;
    text += char('a' + next[size_t(context * kNext + j)]);
  }
  return text;
}

// exp5's synthetic task (--task markov, and the fallback without TinyShakespeare).
const SyntheticTask kMarkovTask{"markov", "a synthetic order-2 Markov text", [](const CommonOptions& opt) {
                                  return LMTask::from_text("markov", markov_text(opt.seed, 300000),
                                                           "the Markov text");
                                }};

// ---- scoring ----

// The cross-entropy of every window, in nats, from the model as it is (the caller sets train or eval
// mode). block: how many windows go through one forward. In eval mode any block gives the same numbers;
// in train mode BatchNorm normalizes each block with that block's own statistics.
std::vector<double> window_losses(MlpLM& model, const Windows& w, int64_t block) {
  NoGradGuard no_grad;
  const int64_t n = w.targets.shape()[0];
  const std::vector<int64_t> targets = w.targets.to_vector<int64_t>();
  std::vector<double> losses;
  losses.reserve(size_t(n));
  for (int64_t start = 0; start < n; start += block) {
    const int64_t len = std::min(block, n - start);
    const std::vector<double> logits = model.forward(w.ids.slice(0, start, start + len)).to_vector<double>();
    const int64_t V = int64_t(logits.size()) / len;
    for (int64_t b = 0; b < len; ++b) {
      // -log softmax(logits)[target] = logsumexp(logits) - logits[target]
      const double* row = logits.data() + b * V;
      const double top = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - top);
      losses.push_back(top + std::log(sum) - row[targets[size_t(start + b)]]);
    }
  }
  return losses;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

// ---- one run ----

struct Run {
  Norm norm = Norm::None;
  int64_t batch = 0, steps = 0;
  std::string refused;                    // BatchNorm at batch 1: the library's error, and no training
  int64_t nan_step = -1;                  // the first step whose loss was not finite, -1 if none
  std::string nan_what;                   // "loss is NaN", or under --detect-anomaly the op's report
  std::vector<double> curve_x, curve;     // samples seen, mean training loss of that stretch
  std::vector<double> val_x, val;         // samples seen, validation loss (eval mode)
  std::vector<double> final_losses;       // per validation window, eval mode, at the end
  std::vector<double> batch_stat_losses;  // BatchNorm only: per window, each block of B with its statistics
  double seconds = 0;

  bool trained() const { return refused.empty() && nan_step < 0; }
  double val_loss() const { return trained() ? mean_of(final_losses) : NAN; }
};

Run train_run(Norm norm, int64_t batch, int64_t samples, double lr, uint64_t seed, const LMTask& task,
              const Windows& val, bool quiet) {
  Run r;
  r.norm = norm;
  r.batch = batch;
  r.steps = samples / batch;
  Generator weights_gen(seed), data_gen(seed + 1);
  MlpLM model(task.vocab, norm, weights_gen);
  model.train();
  optim::AdamOptions ao;
  ao.lr = lr;
  optim::Adam opt(model.named_parameters(), ao);

  const int64_t per_point = std::max<int64_t>(1, r.steps / int64_t(kCurvePoints));
  const int64_t val_every = std::max<int64_t>(1, r.steps / int64_t(kValPoints));
  double sum = 0;
  int64_t in_sum = 0;
  DivergenceWatch watch;
  Progress bar(norm_name(norm) + ", batch " + std::to_string(batch), r.steps, quiet);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= r.steps; ++step) {
    const Windows w = draw_windows(task, batch, data_gen, false);
    opt.zero_grad();
    double l = NAN;
    try {
      const Tensor logits = model.forward(w.ids);  // (B, V)
      Tensor loss = cross_entropy(logits, w.targets);
      l = loss.item();
      if (std::isfinite(l)) loss.backward();
    } catch (const Error& e) {
      const std::string message = e.what();
      // Under --detect-anomaly the first op whose forward or backward makes a NaN/Inf throws, naming itself
      // (autograd/anomaly.h): that is this run's divergence, as in train_lm.
      if (is_anomaly_error(message)) {
        std::cerr << norm_name(norm) << ", batch " << batch << ": step " << step << ": " << message << "\n";
        r.nan_step = step;
        r.nan_what = message;
        break;
      }
      // BatchNorm cannot train on one value per feature (its batch variance is 0 and every output would be
      // 0): the library refuses, and the run records why. Any other error is a real one.
      if (step != 1 || norm != Norm::Batch || batch != 1) throw;
      r.refused = message;
      return r;
    }
    if (!watch.ok(step, l)) {
      r.nan_step = step;
      r.nan_what = watch.what();
      break;
    }
    opt.step();
    bar.update(step, l);
    sum += l;
    in_sum += 1;
    if (step % per_point == 0 || step == r.steps) {
      r.curve_x.push_back(double(step * batch));
      r.curve.push_back(sum / double(in_sum));
      sum = 0;
      in_sum = 0;
    }
    if (step % val_every == 0 || step == r.steps) {
      model.eval();
      r.val_x.push_back(double(step * batch));
      r.val.push_back(mean_of(window_losses(model, val, 1024)));
      model.train();
    }
  }
  bar.finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.trained()) return r;
  model.eval();
  r.final_losses = window_losses(model, val, 1024);
  if (norm == Norm::Batch) {
    // Last, because a forward in train mode also moves the running averages.
    model.train();
    r.batch_stat_losses = window_losses(model, val, batch);
  }
  return r;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{
      "Experiment 5: BatchNorm with small batches. A character-level MLP language model with no norm, "
      "BatchNorm, LayerNorm, RMSNorm or GroupNorm, trained at batch sizes 1 to 64 on the same number of "
      "samples."};
  CommonOptions opt;
  add_common_flags(app, opt);
  int64_t samples = 0;
  std::vector<int64_t> batches = {1, 2, 4, 8, 16, 32, 64};
  double lr = 1e-3;
  std::string task_flag;
  int64_t n_val = 0;
  app.add_option("--val-windows", n_val,
                 "validation windows every model is scored on (default 8192; --quick 2048)")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 24));
  app.add_option("--samples", samples,
                 "training windows every run sees (default 65536; --quick 8192); a multiple of every batch "
                 "size")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--batches", batches, "the batch sizes, comma-separated (default 1,2,4,8,16,32,64)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option("--lr", lr, "Adam's learning rate, the same for every batch size")
      ->check(FiniteRange(1e-8, 10.0))
      ->capture_default_str();
  add_task_flag(app, task_flag, kMarkovTask);
  const std::vector<std::string> unused = {"--steps", "--save", "--resume"};
  const std::string why =
      "experiment 5 gives every batch size the same --samples (so its own number of steps) and keeps no "
      "checkpoint";
  mark_flags_unused(app, unused, why);
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  note_unused_flags(app, unused, why);
  if (samples == 0) samples = opt.quick ? 8192 : 65536;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  if (n_val == 0) n_val = opt.quick ? 2048 : 8192;
  for (int64_t b : batches) {
    if (samples % b != 0) {
      std::cerr << "--samples " << samples << " is not a multiple of batch size " << b
                << ": every batch size must see the same number of samples\n";
      return 2;
    }
    // BatchNorm is also scored in blocks of b windows normalized with their own statistics: a last, shorter
    // block would be another batch size (and a block of 1 cannot be normalized at all).
    if (n_val % b != 0) {
      std::cerr << "--val-windows " << n_val << " is not a multiple of batch size " << b
                << ": BatchNorm is also scored in blocks of each batch size\n";
      return 2;
    }
  }

  LMTask task;
  if (!choose_task(task_flag, opt, task, kMarkovTask)) return 2;
  Report report(opt, "batch_size", argc, argv);
  Generator val_gen(opt.seed + 2);
  const Windows val = draw_windows(task, n_val, val_gen, true);
  std::printf(
      "Task %s (vocab %lld), MLP LM: context %lld, embed %lld, %lld x hidden %lld; %lld samples per run, "
      "Adam lr %s, seed %llu, %lld validation windows\n",
      task.name.c_str(), (long long)task.vocab, (long long)kContext, (long long)kEmbed, (long long)kLayers,
      (long long)kHidden, (long long)samples, num(lr).c_str(), (unsigned long long)opt.seed,
      (long long)n_val);

  std::vector<std::vector<Run>> runs;  // runs[b][n]: batches[b], kNorms[n]
  for (int64_t b : batches) {
    runs.emplace_back();
    for (Norm n : kNorms) {
      runs.back().push_back(train_run(n, b, samples, lr, opt.seed, task, val, opt.quiet));
      const Run& r = runs.back().back();
      if (!r.refused.empty())
        std::printf("batch %3lld  %-10s refused: %s\n", (long long)b, norm_name(n).c_str(),
                    r.refused.c_str());
      else if (r.nan_step >= 0)
        std::printf("batch %3lld  %-10s diverged at step %lld: %s\n", (long long)b, norm_name(n).c_str(),
                    (long long)r.nan_step, r.nan_what.c_str());
      else
        std::printf("batch %3lld  %-10s val %.4f  (%lld steps, %.1f s)\n", (long long)b, norm_name(n).c_str(),
                    r.val_loss(), (long long)r.steps, r.seconds);
    }
  }

  // ---- what the runs show ----
  const size_t nb = batches.size();
  const size_t kBatch = 1;                           // kNorms[1]
  const std::vector<size_t> per_sample = {2, 3, 4};  // LayerNorm, RMSNorm, GroupNorm: each sample alone
  auto at = [&](size_t b, size_t n) -> const Run& { return runs[b][n]; };
  // The per-sample norm with the lowest validation loss at batches[b] (of those that trained), or npos.
  auto best_per_sample = [&](size_t b) {
    size_t best = std::string::npos;
    for (size_t n : per_sample)
      if (at(b, n).trained() && (best == std::string::npos || at(b, n).val_loss() < at(b, best).val_loss()))
        best = n;
    return best;
  };
  auto diff = [&](size_t b, size_t n, size_t m) {  // run n minus run m at batches[b], same windows
    return at(b, n).trained() && at(b, m).trained() ? item_diff(at(b, n).final_losses, at(b, m).final_losses)
                                                    : ItemDiff{};
  };
  std::vector<ItemDiff> gap(nb);   // BatchNorm minus the best per-sample norm
  std::vector<size_t> bn_trained;  // indices into batches where BatchNorm trained
  for (size_t b = 0; b < nb; ++b) {
    const size_t best = best_per_sample(b);
    if (best != std::string::npos) gap[b] = diff(b, kBatch, best);
    if (at(b, kBatch).trained()) bn_trained.push_back(b);
  }
  const std::string samples_text = std::to_string(samples);

  // ---- figure ----
  std::vector<double> bx;
  for (int64_t b : batches) bx.push_back(double(b));
  const plot::Marker markers[5] = {plot::Marker::Circle, plot::Marker::Square, plot::Marker::Triangle,
                                   plot::Marker::Diamond, plot::Marker::Circle};
  plot::LineChart final_chart;
  final_chart.title = "Validation loss after " + samples_text + " samples (eval mode)";
  final_chart.xlabel = "batch size (log scale)";
  final_chart.ylabel = "loss (nats per character)";
  final_chart.xscale = plot::Scale::Log;
  for (size_t n = 0; n < kNorms.size(); ++n) {
    std::vector<double> y;
    for (size_t b = 0; b < nb; ++b) y.push_back(at(b, n).val_loss());
    final_chart.series.push_back(
        {norm_name(kNorms[n]), bx, y, plot::palette(int(n)), markers[n], 1, n == 0 ? 1.5f : 2.0f, n == 0});
  }

  plot::LineChart gap_chart;
  gap_chart.title = "BatchNorm minus the best per-sample norm";
  gap_chart.xlabel = "batch size (log scale)";
  gap_chart.ylabel = "validation loss difference";
  gap_chart.xscale = plot::Scale::Log;
  {
    std::vector<double> x, y, lo, hi;
    for (size_t b : bn_trained)
      if (std::isfinite(gap[b].mean)) {
        x.push_back(bx[b]);
        y.push_back(gap[b].mean);
        lo.push_back(gap[b].mean - ItemDiff::kZ975 * gap[b].se);
        hi.push_back(gap[b].mean + ItemDiff::kZ975 * gap[b].se);
      }
    if (x.empty()) x = {bx.front()}, y = lo = hi = {NAN};
    gap_chart.series.push_back({"BatchNorm minus best", x, y, plot::palette(1), plot::Marker::Square});
    gap_chart.series.push_back(
        {"95% interval: low end", x, lo, plot::colors::gray, plot::Marker::None, 0, 1.0f, true, false});
    gap_chart.series.push_back(
        {"95% interval: high end", x, hi, plot::colors::gray, plot::Marker::None, 0, 1.0f, true, false});
    gap_chart.legend_keys.push_back({"95% interval (1.96 standard errors)", plot::colors::gray, true});
    gap_chart.hlines.push_back({0.0, "no difference"});
  }

  plot::LineChart stats_chart;
  stats_chart.title = "BatchNorm scored with running averages or batch statistics";
  stats_chart.xlabel = "batch size (log scale)";
  stats_chart.ylabel = "validation loss";
  stats_chart.xscale = plot::Scale::Log;
  {
    std::vector<double> running, own, layer;
    for (size_t b = 0; b < nb; ++b) {
      running.push_back(at(b, kBatch).val_loss());
      own.push_back(at(b, kBatch).trained() ? mean_of(at(b, kBatch).batch_stat_losses) : NAN);
      layer.push_back(at(b, 2).val_loss());
    }
    stats_chart.series.push_back(
        {"running averages (eval mode)", bx, running, plot::palette(1), plot::Marker::Square});
    stats_chart.series.push_back({"each block of B windows' own statistics", bx, own, plot::palette(1),
                                  plot::Marker::Triangle, 1, 2.0f, true});
    stats_chart.series.push_back(
        {"LayerNorm (for scale)", bx, layer, plot::palette(2), plot::Marker::None, 1, 1.5f});
  }

  // The curves at the smallest batch BatchNorm trained on, and at the largest batch.
  const size_t small = bn_trained.empty() ? 0 : bn_trained.front(), large = nb - 1;
  auto curves = [&](size_t b, bool validation) {
    plot::LineChart c;
    c.title = std::string(validation ? "Validation loss (eval mode)" : "Training loss") + ", batch " +
              std::to_string(batches[b]);
    c.xlabel = "training samples seen";
    c.ylabel = "loss";
    for (size_t n = 0; n < kNorms.size(); ++n) {
      const Run& r = at(b, n);
      std::vector<double> x = validation ? r.val_x : r.curve_x, y = validation ? r.val : r.curve;
      if (y.empty()) x = {0}, y = {NAN};  // refused: a series with no points drawn, still in the CSV
      c.series.push_back({norm_name(kNorms[n]), x, y, plot::palette(int(n)), plot::Marker::None, 0,
                          n == 0 ? 1.5f : 2.0f, n == 0});
    }
    c.hlines.push_back({task.context_free_loss(), "context-free loss"});
    return c;
  };

  plot::Figure fig;
  fig.title = "Experiment 5: BatchNorm with small batches (MLP LM, " + task.name + ", " + samples_text +
              " samples per run, seed " + std::to_string(opt.seed) + ")";
  fig.cols = 2;
  fig.panels = {final_chart,         gap_chart,   curves(small, false),
                curves(small, true), stats_chart, curves(large, false)};
  const std::string png = report.add_figure(fig);

  // ---- summary ----
  const double cf = task.context_free_loss();
  std::string md = "# Experiment 5: BatchNorm with small batches\n\n";
  md += "Task: " + task.name + " (vocabulary " + std::to_string(task.vocab) +
        "). Model: a character-level MLP language model: the last " + std::to_string(kContext) +
        " characters, each embedded in " + std::to_string(kEmbed) + " numbers, then " +
        std::to_string(kLayers) + " x [Linear(-> " + std::to_string(kHidden) +
        ") -> norm -> ReLU] and a linear head. The norms: BatchNorm1d (each feature over the batch, momentum "
        "0.1), LayerNorm and RMSNorm (each sample over its " +
        std::to_string(kHidden) + " features), GroupNorm (each sample over " + std::to_string(kGroups) +
        " groups of " + std::to_string(kHidden / kGroups) + " features), and none.\n\n";
  md += "Every run sees " + samples_text + " training windows, so batch B takes " + samples_text +
        " / B steps, with Adam at one learning rate, " + num(lr) +
        ", for every batch size. The runs of one batch size see the same windows in the same order and start "
        "from the same weights (seed " +
        std::to_string(opt.seed) + "). Every model is scored in eval mode on the same " +
        std::to_string(n_val) +
        " validation windows. The context-free loss (the letters' entropy, what a model that ignores its "
        "context scores) is " +
        num(cf, 4) + ".\n\n";
  md += "## Validation loss after " + samples_text + " samples\n\n";
  std::vector<std::vector<std::string>> rows;
  for (size_t b = 0; b < nb; ++b) {
    std::vector<std::string> row = {std::to_string(batches[b]), std::to_string(at(b, 0).steps)};
    for (size_t n = 0; n < kNorms.size(); ++n) {
      const Run& r = at(b, n);
      row.push_back(!r.refused.empty() ? "refused"
                    : r.nan_step >= 0  ? "NaN at step " + std::to_string(r.nan_step)
                                       : num(r.val_loss(), 4));
    }
    const size_t best = best_per_sample(b);
    row.push_back(std::isfinite(gap[b].mean) ? item_diff_text(gap[b]) + " (" + norm_name(kNorms[best]) + ")"
                                             : "-");
    row.push_back(at(b, kBatch).trained() ? num(mean_of(at(b, kBatch).batch_stat_losses), 4) : "-");
    rows.push_back(row);
  }
  md += md_table({"batch", "steps", "no norm", "BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm",
                  "BatchNorm minus the best per-sample norm", "BatchNorm with batch statistics"},
                 rows);
  md +=
      "\n\"BatchNorm with batch statistics\": the validation windows in blocks of B, each block normalized "
      "with its own statistics, as in training (the other columns use the running averages).\n";

  md += "\n## What the run shows\n\n";
  // 1. small batches
  {
    std::vector<size_t> smalls;
    for (size_t b : bn_trained)
      if (batches[b] <= 4) smalls.push_back(b);
    if (smalls.empty()) {
      md +=
          "- *BatchNorm at small batches* (the lesson: at a batch of 4 its statistics are unreliable and "
          "training suffers): not tested, since BatchNorm trained at no batch size from 2 to 4 here.\n";
    } else {
      bool held = true;
      std::string detail;
      for (size_t b : smalls) {
        const double v = at(b, kBatch).val_loss();
        detail += " At batch " + std::to_string(batches[b]) + " BatchNorm's validation loss is " + num(v, 4) +
                  (v < cf ? "" : ", not below the context-free loss (it did not learn to use its context)") +
                  "; minus";
        for (size_t k = 0; k < per_sample.size(); ++k) {
          const size_t n = per_sample[k];
          const ItemDiff d = diff(b, kBatch, n);
          held = held && d.resolved() && d.mean > 0;
          detail += std::string(k == 0                       ? " "
                                : k + 1 == per_sample.size() ? " and "
                                                             : ", ") +
                    norm_name(kNorms[n]) + "'s: " + item_diff_text(d);
        }
        detail += ".";
      }
      md += std::string(
                "- *BatchNorm at small batches* (the lesson: at a batch of 4 its statistics are "
                "unreliable and training suffers): ") +
            (held ? "**held.** At every batch size from 2 to 4 BatchNorm ends above all three per-sample "
                    "norms, beyond the validation sample's noise."
                  : "**did not hold** in full: at some batch size from 2 to 4 BatchNorm is not above every "
                    "per-sample norm beyond the validation sample's noise.") +
            detail + "\n";
    }
  }
  // 2. where BatchNorm catches up
  if (!bn_trained.empty()) {
    std::vector<std::string> worse, even, better;
    for (size_t b : bn_trained) {
      if (!std::isfinite(gap[b].mean)) continue;
      const std::string size = std::to_string(batches[b]);
      (gap[b].resolved() ? (gap[b].mean > 0 ? worse : better) : even).push_back(size);
    }
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
      return s;
    };
    // "above it beyond noise at batch sizes 2, 4 and 8; within noise at 16; below it at 32 and 64"
    std::vector<std::string> parts;
    if (!worse.empty())
      parts.push_back(std::string("above it beyond noise at batch size") + (worse.size() > 1 ? "s " : " ") +
                      list(worse));
    if (!even.empty()) parts.push_back("within noise of it at " + list(even));
    if (!better.empty()) parts.push_back("below it beyond noise at " + list(better));
    md += "- *With the batch size*: against the best per-sample norm at each batch size, BatchNorm ends ";
    for (size_t i = 0; i < parts.size(); ++i) md += (i == 0 ? "" : "; ") + parts[i];
    md += ".";
    const size_t first = bn_trained.front(), last = bn_trained.back();
    if (first != last && at(first, best_per_sample(first)).trained() &&
        at(last, best_per_sample(last)).trained()) {
      // (BN - best) at the smallest batch minus the same at the largest, window by window.
      std::vector<double> a, c;
      const Run &bs = at(first, kBatch), &ps = at(first, best_per_sample(first));
      const Run &bl = at(last, kBatch), &pl = at(last, best_per_sample(last));
      for (size_t i = 0; i < bs.final_losses.size(); ++i) {
        a.push_back(bs.final_losses[i] - ps.final_losses[i]);
        c.push_back(bl.final_losses[i] - pl.final_losses[i]);
      }
      const ItemDiff dd = item_diff(a, c);
      md += " Its gap is " + item_diff_text(gap[first]) + " at batch " + std::to_string(batches[first]) +
            " and " + item_diff_text(gap[last]) + " at batch " + std::to_string(batches[last]) + ": " +
            (dd.resolved() && dd.mean > 0
                 ? "it shrinks as the batch grows, by " + item_diff_text(dd) + ", beyond noise"
             : dd.resolved() ? "it grows as the batch grows, by " + item_diff_text(ItemDiff{-dd.mean, dd.se})
                             : "the two are within noise of each other (" + item_diff_text(dd) + ")") +
            ".";
    }
    md += "\n";
  }
  // 3. how much each norm's result depends on the batch size
  if (bn_trained.size() >= 2) {
    std::vector<double> spread(kNorms.size(), NAN);
    for (size_t n = 0; n < kNorms.size(); ++n) {
      double lo = INFINITY, hi = -INFINITY;
      bool all = true;
      for (size_t b : bn_trained) {
        all = all && at(b, n).trained();
        lo = std::min(lo, at(b, n).val_loss());
        hi = std::max(hi, at(b, n).val_loss());
      }
      if (all) spread[n] = hi - lo;
    }
    bool largest = std::isfinite(spread[kBatch]);
    for (size_t n : per_sample) largest = largest && std::isfinite(spread[n]) && spread[kBatch] > spread[n];
    const std::string range =
        std::to_string(batches[bn_trained.front()]) + " to " + std::to_string(batches[bn_trained.back()]);
    md +=
        "- *Dependence on the batch size* (the lesson: BatchNorm depends on it, LayerNorm, RMSNorm and "
        "GroupNorm do not): over batch sizes " +
        range + " BatchNorm's validation loss spans " + num(spread[kBatch], 3) +
        " (highest minus lowest), "
        "LayerNorm's " +
        num(spread[2], 3) + ", RMSNorm's " + num(spread[3], 3) + ", GroupNorm's " + num(spread[4], 3) +
        ", no norm's " + num(spread[0], 3) + ". " +
        (largest ? "**Held** in that BatchNorm's result moves the most. "
                 : "**Did not hold**: BatchNorm's result does not move the most. ") +
        "No norm's result is independent of the batch size: the per-sample norms' own arithmetic is, but "
        "their training is not (a small batch takes more, noisier steps at the same learning rate).\n";
  }
  // 4. one sample
  {
    size_t one = std::string::npos;
    for (size_t b = 0; b < nb; ++b)
      if (batches[b] == 1) one = b;
    if (one == std::string::npos) {
      md +=
          "- *A single sample* (the lesson: LayerNorm works on one sample): not tested (batch size 1 is "
          "not in --batches).\n";
    } else {
      bool all = true;
      std::string values;
      for (size_t k = 0; k < per_sample.size(); ++k) {
        const Run& r = at(one, per_sample[k]);
        all = all && r.trained();
        values += std::string(k == 0                       ? ""
                              : k + 1 == per_sample.size() ? " and "
                                                           : ", ") +
                  norm_name(kNorms[per_sample[k]]) + " " +
                  (r.trained() ? num(r.val_loss(), 4) : std::string("(did not train)"));
      }
      const Run& bn = at(one, kBatch);
      md += std::string("- *A single sample* (the lesson: LayerNorm works on one sample): ") +
            (all ? "**held.** At batch 1 every per-sample norm trained"
                 : "at batch 1 not every per-sample norm trained") +
            " (validation " + values + "). " +
            (!bn.refused.empty()
                 ? "BatchNorm cannot train on one sample, and the library says so before any step: `" +
                       bn.refused + "`."
                 : "BatchNorm " + std::string(bn.trained() ? "trained" : "did not train") + " at batch 1.") +
            "\n";
    }
  }
  // 5. running averages or batch statistics: how much of BatchNorm's gap at its smallest batch is the switch
  // to eval mode, and how much is still there when it is scored with batch statistics, as it trained
  if (!bn_trained.empty() && best_per_sample(small) != std::string::npos) {
    const Run& bn = at(small, kBatch);
    const size_t best = best_per_sample(small);
    const ItemDiff mode = item_diff(bn.batch_stat_losses, bn.final_losses);
    const ItemDiff still = item_diff(bn.batch_stat_losses, at(small, best).final_losses);
    const std::string b = std::to_string(batches[small]);
    md += "- *Where a small batch hurts BatchNorm*: at batch " + b + " it scores " + num(bn.val_loss(), 4) +
          " with its running averages (eval mode) and " + num(mean_of(bn.batch_stat_losses), 4) +
          " when each block of " + b +
          " validation windows is normalized with its own statistics, as it "
          "trained: the running averages " +
          (mode.resolved() ? (mode.mean < 0 ? "cost it " : "gained it ") +
                                 item_diff_text(ItemDiff{std::abs(mode.mean), mode.se})
                           : "are within noise of that (" + item_diff_text(mode) + ")") +
          ". Scored with batch statistics it is " +
          (still.resolved() && still.mean > 0 ? "still above "
           : still.resolved()                 ? "below "
                                              : "within noise of ") +
          norm_name(kNorms[best]) + " by " + item_diff_text(ItemDiff{std::abs(still.mean), still.se}) + ": " +
          (still.resolved() && still.mean > 0 && still.mean > std::abs(mode.mean)
               ? "most of the damage is done in training, where every step normalized each feature with the "
                 "statistics of " +
                     b + " samples"
           : still.resolved() && still.mean > 0
               ? "the damage is shared between training and the switch to the running averages"
               : "the switch to the running averages is what sets it back") +
          ".";
    if (batches[small] == 2)
      md +=
          " (With 2 samples a feature's two normalized values are always about +1 and -1: (x1 - x2) / 2 "
          "divided by |x1 - x2| / 2. What reaches the next layer is which of the two samples was larger, "
          "not by how much.)";
    if (large != small) {
      const Run& bl = at(large, kBatch);
      const ItemDiff ml = item_diff(bl.batch_stat_losses, bl.final_losses);
      md += " At batch " + std::to_string(batches[large]) + " the two scores are " +
            num(mean_of(bl.batch_stat_losses), 4) + " (batch statistics) and " + num(bl.val_loss(), 4) +
            " (running averages): " + item_diff_text(ml) + ".";
    }
    md += "\n";
  }
  // 6. the model without a norm, for scale: how far it ends from the best per-sample norm
  {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t b = 0; b < nb; ++b) {
      const size_t best = best_per_sample(b);
      if (best == std::string::npos || !at(b, 0).trained()) continue;
      lo = std::min(lo, at(b, 0).val_loss() - at(b, best).val_loss());
      hi = std::max(hi, at(b, 0).val_loss() - at(b, best).val_loss());
    }
    if (std::isfinite(lo))
      md += "- *Without a norm* this " + std::to_string(kLayers) + "-layer MLP ends between " + num(lo, 3) +
            " and " + num(hi, 3) +
            " above the best per-sample norm across the batch sizes. The experiment measures how BatchNorm "
            "depends on the batch, not whether this shallow model needs a norm.\n";
  }
  md += "\nA ± is the standard error of the mean per-window difference between two models over the same " +
        std::to_string(n_val) +
        " validation windows; \"beyond noise\" means more than 1.96 of them. That is the validation "
        "sample's noise only. Another --seed trains other models on other batches, which can move every "
        "number more than that.\n";
  report.write_all(md);

  std::printf("Wrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
