// --save / --resume in the trainers: a run that stops, saves and resumes gives the same bits as one that
// never stopped (also in the middle of a warmup), and resuming a checkpoint that is already at (or past) the
// run's last step, or of another run, is an ng::Error. Also the loop's warmup and the task's own pieces
// (its windows, its context-free loss, a short corpus).
//
// This calls the trainers' shared loop (examples/common/lm_task.h, train_lm) on the copy task with a small
// model, with dropout on so that the dropout generator's state must also travel in the checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "examples/common/lm_task.h"
#include "io/whole_file.h"
#include "ops_test_util.h"

namespace fs = std::filesystem;
using namespace ng;
using namespace ng::examples;
using ng::testing::error_of;

namespace {

nn::TinyLMConfig small_config(const LMTask& task) {
  nn::TinyLMConfig c;
  c.dim = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  c.norm_position = "pre";
  c.norm = "rmsnorm";
  c.dropout = 0.1;
  c.seed = 7;
  return task.configure(c);
}

TrainSpec small_spec(int64_t steps) {
  TrainSpec s;
  s.label = "resume-test";
  s.lr = 1e-3;
  s.steps = steps;
  s.batch = 4;
  s.seq = 8;
  s.data_seed = 11;
  return s;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

fs::path temp_file(const std::string& tag) {
  return fs::temp_directory_path() /
         ("normgrad_resume_" + tag + "_" + std::to_string(::getpid()) + ".safetensors");
}

}  // namespace

TEST(Examples, ResumeContinuesTheRunBitwise) {
  const LMTask task = LMTask::copy();

  // One run of 6 steps, never interrupted.
  nn::TinyLM straight(small_config(task));
  TrainResult full = train_lm(straight, task, small_spec(6), /*quiet=*/true, "", "");
  ASSERT_EQ(full.losses.size(), 6u);
  EXPECT_EQ(full.first_step, 1);

  // The same run stopped after 3 steps and saved, then a fresh model resumed to step 6.
  const fs::path ckpt = temp_file("bitwise");
  nn::TinyLM first_half(small_config(task));
  TrainResult a = train_lm(first_half, task, small_spec(3), true, "", ckpt.string());
  ASSERT_EQ(a.losses.size(), 3u);
  ASSERT_TRUE(fs::exists(ckpt));

  nn::TinyLMConfig other = small_config(task);
  other.seed = 12345;  // different initial weights: the checkpoint must overwrite all of them
  nn::TinyLM resumed(other);
  TrainResult b = train_lm(resumed, task, small_spec(6), true, ckpt.string(), "");
  // The checkpoint keeps the losses so far: the resumed result is the straight one, from step 1.
  EXPECT_EQ(b.first_step, 1);
  EXPECT_EQ(b.resumed_at, 3);
  ASSERT_EQ(b.losses.size(), 6u);

  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(same_bits(a.losses[k], full.losses[k])) << "step " << k + 1;
  for (size_t k = 0; k < 6; ++k)
    EXPECT_TRUE(same_bits(b.losses[k], full.losses[k]))
        << "step " << k + 1 << ": resumed " << b.losses[k] << " vs straight " << full.losses[k];
  fs::remove(ckpt);
}

TEST(Examples, ResumePastTheLastStepIsAnError) {
  const LMTask task = LMTask::copy();
  const fs::path ckpt = temp_file("past");
  nn::TinyLM m(small_config(task));
  train_lm(m, task, small_spec(2), true, "", ckpt.string());

  nn::TinyLM again(small_config(task));
  try {
    train_lm(again, task, small_spec(2), true, ckpt.string(), "");
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--resume"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is at step 2, expected fewer than the 2 steps of this run"), std::string::npos)
        << msg;
  }
  fs::remove(ckpt);
}

// train_lm's device checks run before any device work, so they need no GPU and no backend.
TEST(Examples, TrainLmDeviceChecks) {
  const LMTask task = LMTask::copy();
  nn::TinyLM m(small_config(task));
  TrainSpec spec = small_spec(1);
  spec.device = Device::cuda(0);
  std::string msg;
  try {
    train_lm(m, task, spec, true, "", "");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("train_lm: the model's parameters are on cpu but training runs on cuda:0"),
            std::string::npos)
      << msg;
  msg.clear();
  try {
    train_lm(m, task, spec, true, "", temp_file("device").string());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("train_lm: --save and --resume work on the CPU only"), std::string::npos) << msg;
}

// A checkpoint of another run is refused before anything trains (check_checkpoint_flags) and by train_lm:
// another learning rate, data seed or vocabulary was each silently replaced by the file's, so a run
// labelled "lr 1e-3" went on at the checkpoint's lr. And --save may not name the corpus or a report file.
TEST(Examples, ResumeOfAnotherRunIsAnError) {
  const LMTask copy = LMTask::copy();
  const fs::path ckpt = temp_file("another");
  {
    nn::TinyLM m(small_config(copy));
    train_lm(m, copy, small_spec(2), true, "", ckpt.string());
  }
  TrainSpec lr = small_spec(4), seed = small_spec(4);
  lr.lr = 5e-3;
  seed.data_seed = 12;
  for (const auto& case_ :
       {std::pair{lr, std::string("trained resume-test at lr 0.001, this run asks for lr 0.005")},
        std::pair{seed, std::string("drew its batches with data seed 11, this run's is 12")}}) {
    const TrainSpec& spec = case_.first;  // named, not a structured binding: clang 14 cannot capture those
    const std::string& expected = case_.second;
    EXPECT_NE(error_of([&] {
                check_checkpoint_flags(small_config(copy), copy, spec, ckpt.string(), "");
              }).find(expected),
              std::string::npos)
        << expected;
    nn::TinyLM m(small_config(copy));
    EXPECT_NE(error_of([&] { train_lm(m, copy, spec, true, ckpt.string(), ""); }).find(expected),
              std::string::npos)
        << expected;
  }
  check_checkpoint_flags(small_config(copy), copy, small_spec(4), ckpt.string(), "");  // the same run: fine
  // Saved losses that are not one per step done, or not numbers.
  {
    io::SafetensorsData data = io::load_safetensors(ckpt.string());
    for (const auto& [losses, expected] :
         {std::pair<std::string, std::string>{"[1.0]",
                                              "train.losses holds 1 losses, expected one per step done (2)"},
          {"{\"a\": 1, \"b\": 2}", "train.losses is not a JSON array of numbers (a JSON object)"},
          {"[\"x\", 2]", "train.losses is not a JSON array of numbers"}}) {
      auto meta = data.metadata;
      meta["train.losses"] = losses;
      const fs::path bad = temp_file("bad_losses");
      io::save_safetensors(bad.string(), data.tensors, meta);
      EXPECT_NE(error_of([&] {
                  check_checkpoint_flags(small_config(copy), copy, small_spec(4), bad.string(), "");
                }).find(expected),
                std::string::npos)
          << expected;
      fs::remove(bad);
    }
  }

  // Two corpora of the same size whose byte sets differ: the ids of one mean other characters in the other.
  const fs::path a = temp_file("corpus_a"), b = temp_file("corpus_b");
  std::string text;
  for (int i = 0; i < 80; ++i) text += "To be, or not to be: that is the question. ";
  std::string other = text;
  std::replace(other.begin(), other.end(), 'q', 'Z');
  io::atomic_write_file(a.string(), text);
  io::atomic_write_file(b.string(), other);
  const LMTask ta = LMTask::shakespeare(a.string()), tb = LMTask::shakespeare(b.string());
  ASSERT_EQ(ta.vocab, tb.vocab);
  {
    nn::TinyLM m(small_config(ta));
    train_lm(m, ta, small_spec(2), true, "", ckpt.string());
  }
  const std::string m =
      error_of([&] { check_checkpoint_flags(small_config(tb), tb, small_spec(4), ckpt.string(), ""); });
  EXPECT_NE(m.find("--data has another vocabulary"), std::string::npos) << m;
  check_checkpoint_flags(small_config(ta), ta, small_spec(4), ckpt.string(), "");

  // --save on the corpus, or on one of the run's own files (through another spelling of the path).
  const fs::path dir = fs::path(ckpt).parent_path();
  const std::string report_file = (dir / "exp.csv").string();
  for (const std::string& target : {a.string(), (dir / "." / "exp.csv").string()}) {
    const std::string msg = error_of([&] {
      check_checkpoint_flags(small_config(ta), ta, small_spec(2), "", target, {a.string(), report_file});
    });
    EXPECT_NE(msg.find("--save: " + target + " is "), std::string::npos) << msg;
    EXPECT_NE(msg.find("which this run reads or writes"), std::string::npos) << msg;
  }
  check_checkpoint_flags(small_config(ta), ta, small_spec(2), "", ckpt.string(), {a.string(), report_file});
  // A file already there that is not a checkpoint (here the other corpus) is not --save's to replace.
  const std::string msg =
      error_of([&] { check_checkpoint_flags(small_config(ta), ta, small_spec(2), "", b.string()); });
  EXPECT_NE(msg.find("--save: " + b.string() + " exists and is not a normgrad checkpoint"), std::string::npos)
      << msg;
  fs::remove(a);
  fs::remove(b);
  fs::remove(ckpt);
}

// TrainSpec::warmup ramps the rate up: step s trains at lr * s / warmup. Adam's first step moves each weight
// by lr * m / (sqrt(v) + eps) with m = g and v = g^2 (bias-corrected), the same factor in every run that
// sees the same gradient: so a warmup of 4, whose first step is at lr / 4, moves the weights a quarter as far
// as no warmup, and a warmup of 1 as far.
TEST(Examples, WarmupRampsTheLearningRate) {
  const LMTask task = LMTask::copy();
  auto moved = [&](int64_t warmup) {
    nn::TinyLM m(small_config(task));
    std::vector<std::vector<float>> before;
    for (const Tensor& p : m.parameters()) before.push_back(p.to_vector<float>());
    TrainSpec spec = small_spec(1);
    spec.warmup = warmup;
    train_lm(m, task, spec, true);
    double sum = 0;
    const std::vector<Tensor> after = m.parameters();
    for (size_t i = 0; i < after.size(); ++i) {
      const std::vector<float> v = after[i].to_vector<float>();
      for (size_t k = 0; k < v.size(); ++k) sum += std::abs(double(v[k]) - double(before[i][k]));
    }
    return sum;
  };
  const double full = moved(0);
  ASSERT_GT(full, 0);
  EXPECT_NEAR(moved(4) / full, 0.25, 1e-3);
  EXPECT_NEAR(moved(1) / full, 1.0, 1e-3);
}

// A run saved in the middle of its warmup resumes to the same bits as the run that never stopped, and its
// losses differ from a run without warmup from step 2 on (the first loss is before any step).
TEST(Examples, ResumeMidWarmupContinuesTheRunBitwise) {
  const LMTask task = LMTask::copy();
  auto spec = [](int64_t steps) {
    TrainSpec s = small_spec(steps);
    s.warmup = 4;
    return s;
  };
  nn::TinyLM straight(small_config(task)), plain(small_config(task));
  const TrainResult full = train_lm(straight, task, spec(6), true);
  const TrainResult no_warmup = train_lm(plain, task, small_spec(6), true);
  ASSERT_EQ(full.losses.size(), 6u);
  EXPECT_TRUE(same_bits(full.losses[0], no_warmup.losses[0]));
  for (size_t k = 1; k < 6; ++k) EXPECT_NE(full.losses[k], no_warmup.losses[k]) << "step " << k + 1;

  const fs::path ckpt = temp_file("warmup");
  nn::TinyLM first(small_config(task)), resumed(small_config(task));
  train_lm(first, task, spec(2), true, "", ckpt.string());
  const TrainResult b = train_lm(resumed, task, spec(6), true, ckpt.string(), "");
  ASSERT_EQ(b.losses.size(), 6u);
  for (size_t k = 0; k < 6; ++k)
    EXPECT_TRUE(same_bits(b.losses[k], full.losses[k]))
        << "step " << k + 1 << ": resumed " << b.losses[k] << " vs straight " << full.losses[k];
  fs::remove(ckpt);
}

// A checkpoint records its run's warmup (metadata train.warmup; absent: none). Resuming it with another
// warmup, or with a rate that the warmup does not give at the checkpoint's step, is an ng::Error, and so is
// a train.warmup that is not a whole number from 0 to 2^63 - 1 (2^64 - 1 was read as -1).
TEST(Examples, ResumeWithAnotherWarmupIsAnError) {
  const LMTask task = LMTask::copy();
  auto spec = [](int64_t steps, int64_t warmup, double lr) {
    TrainSpec s = small_spec(steps);
    s.warmup = warmup;
    s.lr = lr;
    return s;
  };
  const fs::path ckpt = temp_file("warmup_other");
  {
    nn::TinyLM m(small_config(task));
    train_lm(m, task, spec(2, 4, 1e-3), true, "", ckpt.string());  // saved at lr 1e-3 * 2 / 4
  }
  check_checkpoint_flags(small_config(task), task, spec(6, 4, 1e-3), ckpt.string(), "");  // the same run
  for (const auto& case_ :
       {std::pair{spec(6, 0, 1e-3), std::string("--resume: the checkpoint " + ckpt.string() +
                                                " trained resume-test with a warmup of 4 steps, this run "
                                                "asks for 0: give the warmup of the run that saved it")},
        std::pair{spec(6, 4, 5e-3),
                  std::string("trained resume-test at lr 0.0005, this run asks for lr 0.0025 at step 2 (lr "
                              "0.005 after its warmup)")}}) {
    const TrainSpec& s = case_.first;
    const std::string& expected = case_.second;
    EXPECT_NE(error_of([&] {
                check_checkpoint_flags(small_config(task), task, s, ckpt.string(), "");
              }).find(expected),
              std::string::npos)
        << expected;
    nn::TinyLM m(small_config(task));
    EXPECT_NE(error_of([&] { train_lm(m, task, s, true, ckpt.string(), ""); }).find(expected),
              std::string::npos)
        << expected;
  }
  // The key missing (a checkpoint of a run without warmup, or from before train_lm had it), or not a count.
  const io::SafetensorsData data = io::load_safetensors(ckpt.string());
  for (const auto& [value, expected] :
       {std::pair<std::string, std::string>{"",
                                            "trained resume-test with a warmup of 0 steps, this run asks "
                                            "for 4"},
        {"-3", "train.warmup is not a whole number of steps from 0 to 2^63 - 1 (got -3)"},
        {"2.5", "train.warmup is not a whole number of steps from 0 to 2^63 - 1 (got 2.5)"},
        {"18446744073709551615",
         "train.warmup is not a whole number of steps from 0 to 2^63 - 1 (got 18446744073709551615)"},
        {"four", "train.warmup is not JSON ("}}) {
    auto meta = data.metadata;
    if (value.empty())
      meta.erase("train.warmup");
    else
      meta["train.warmup"] = value;
    const fs::path bad = temp_file("bad_warmup");
    io::save_safetensors(bad.string(), data.tensors, meta);
    EXPECT_NE(error_of([&] {
                check_checkpoint_flags(small_config(task), task, spec(6, 4, 1e-3), bad.string(), "");
              }).find(expected),
              std::string::npos)
        << expected;
    fs::remove(bad);
  }
  fs::remove(ckpt);
}

// A checkpoint records the run's clipping (train.clip), and a resume with another --clip is refused: it went
// on with the new max norm, a run no straight run makes. A checkpoint without the key (from before train_lm
// wrote it) is resumed with any; a value that is not a max norm >= 0 is an error.
TEST(Examples, ResumeWithAnotherClipIsAnError) {
  const LMTask task = LMTask::copy();
  auto spec = [](int64_t steps, double clip) {
    TrainSpec s = small_spec(steps);
    s.clip = clip;
    return s;
  };
  const fs::path ckpt = temp_file("clip_other");
  {
    nn::TinyLM m(small_config(task));
    train_lm(m, task, spec(2, 0.5), true, "", ckpt.string());
  }
  const io::SafetensorsData data = io::load_safetensors(ckpt.string());
  EXPECT_EQ(data.metadata.at("train.clip"), "0.5");
  check_checkpoint_flags(small_config(task), task, spec(4, 0.5), ckpt.string(), "");  // the same run
  for (const auto& case_ :
       {std::pair{0.0, std::string("--resume: the checkpoint " + ckpt.string() +
                                   " trained resume-test with gradients clipped at 0.5, this run asks for no "
                                   "gradient clipping: give the --clip of the run that saved it")},
        std::pair{1.0,
                  std::string("with gradients clipped at 0.5, this run asks for gradients clipped at 1:")}}) {
    const double clip = case_.first;  // clang 14 cannot capture a structured binding in a lambda
    const std::string& expected = case_.second;
    EXPECT_NE(error_of([&] {
                check_checkpoint_flags(small_config(task), task, spec(4, clip), ckpt.string(), "");
              }).find(expected),
              std::string::npos)
        << expected;
    nn::TinyLM m(small_config(task));
    EXPECT_NE(error_of([&] { train_lm(m, task, spec(4, clip), true, ckpt.string(), ""); }).find(expected),
              std::string::npos)
        << expected;
  }
  for (const auto& [value, expected] : {std::pair<std::string, std::string>{"", ""},
                                        {"-1", "train.clip is not a finite max norm >= 0 (got -1)"},
                                        {"\"1\"", "train.clip is not a finite max norm >= 0 (got \"1\")"},
                                        {"half", "train.clip is not JSON ("}}) {
    auto meta = data.metadata;
    if (value.empty())
      meta.erase("train.clip");
    else
      meta["train.clip"] = value;
    const fs::path bad = temp_file("bad_clip");
    io::save_safetensors(bad.string(), data.tensors, meta);
    const std::string got =
        error_of([&] { check_checkpoint_flags(small_config(task), task, spec(4, 0.0), bad.string(), ""); });
    if (expected.empty())
      EXPECT_EQ(got, "<no error>") << "a checkpoint from before train.clip is resumed with any --clip";
    else
      EXPECT_NE(got.find(expected), std::string::npos) << expected << " in: " << got;
    fs::remove(bad);
  }
  fs::remove(ckpt);
}

// The context-free loss: the entropy of the training split's bytes (shakespeare), ln(vocab) (copy). Two
// corpora of 1200 bytes whose first 90% (the training split, 1080 bytes) holds a and b half and half, and
// a, a, a, b: ln 2 and -(3/4 ln 3/4 + 1/4 ln 1/4). The last 10% (validation) does not count: it is all c.
TEST(Examples, ContextFreeLossIsTheTargetsEntropy) {
  EXPECT_NEAR(LMTask::copy().context_free_loss(), std::log(1000.0), 1e-12);
  EXPECT_NEAR(LMTask::copy(7).context_free_loss(), std::log(7.0), 1e-12);
  const fs::path path = temp_file("entropy_corpus");
  for (const auto& [unit, expected] : {std::pair<std::string, double>{"ab", std::log(2.0)},
                                       {"aaab", -(0.75 * std::log(0.75) + 0.25 * std::log(0.25))}}) {
    std::string text;
    while (text.size() < 1080) text += unit;
    text += std::string(120, 'c');
    io::atomic_write_file(path.string(), text);
    const LMTask task = LMTask::shakespeare(path.string());
    ASSERT_EQ(task.train_ids.size(), 1080u);
    EXPECT_NEAR(task.context_free_loss(), expected, 1e-12) << unit;
  }
  fs::remove(path);
}

// A run that diverged is not saved: its generators have drawn the failed step's batch while its step count
// has not moved, so its checkpoint would not resume the run. An older checkpoint at the path stays.
TEST(Examples, ADivergedRunIsNotSaved) {
  const LMTask task = LMTask::copy();
  const fs::path ckpt = temp_file("diverged");
  fs::remove(ckpt);
  TrainSpec spec = small_spec(6);
  spec.lr = 1e30;
  nn::TinyLMConfig c = small_config(task);
  c.norm_position = "none";  // nothing to hold the activations: NaN within a few steps
  nn::TinyLM m(c);
  TrainResult r = train_lm(m, task, spec, true, "", ckpt.string());
  ASSERT_GE(r.nan_step, 1) << "lr 1e30 without norms should diverge";
  EXPECT_FALSE(fs::exists(ckpt));
}

// The Shakespeare task's windows: every start in [0, N - T - 1] is drawn, so the split's last id is a
// target too, and a split of exactly T + 1 ids (one window) is taken. Until stop 44 randint's exclusive
// bound was N - T - 1: the last window was never drawn (8000 batches of a 10-id split saw starts 0-4, never
// 5, and never the target 9), and a split of T + 1 ids was refused as "shorter than seq + 1".
TEST(Examples, ShakespeareWindowsCoverTheWholeSplit) {
  LMTask task;
  task.name = "shakespeare";
  task.vocab = 10;
  for (int64_t i = 0; i < 10; ++i) task.train_ids.push_back(i);  // id = its position: a token says its start
  Generator gen(1);
  Tensor tokens, targets;
  task.batch(8000, 4, gen, tokens, targets);
  std::vector<int> seen(10, 0);
  const std::vector<int64_t> x = tokens.to_vector<int64_t>(), y = targets.to_vector<int64_t>();
  for (size_t b = 0; b < 8000; ++b) {
    ++seen[size_t(x[b * 4])];
    ASSERT_EQ(y[b * 4 + 3], x[b * 4] + 4);  // the window's last target
  }
  for (int64_t s = 0; s <= 5; ++s) EXPECT_GT(seen[size_t(s)], 1000) << "start " << s;  // ~1333 each
  for (int64_t s = 6; s < 10; ++s) EXPECT_EQ(seen[size_t(s)], 0) << "start " << s;
  // One window exactly.
  task.train_ids = {3, 1, 4, 1, 5};
  task.batch(3, 4, gen, tokens, targets);
  EXPECT_EQ(tokens.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 4, 1, 3, 1, 4, 1, 3, 1, 4, 1}));
  EXPECT_EQ(targets.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 1, 5, 1, 4, 1, 5, 1, 4, 1, 5}));
  task.train_ids = {3, 1, 4, 1};
  try {
    task.batch(1, 4, gen, tokens, targets);
    ADD_FAILURE() << "a split of 4 ids gave a window of 5";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("LMTask::batch: the training split has 4 tokens, fewer than seq + 1 = 5"),
        std::string::npos)
        << e.what();
  }
}

// Two runs are compared over the steps both hold. A run resumed from a checkpoint without its losses starts
// its curve after the checkpoint's step (first_step > 1); its curve beside a full run's is compared over
// their common last steps. paired_diff of the two curves as they were refused their different lengths, and
// the trainer failed after all its training, writing nothing.
TEST(Examples, PairedDiffOfRunsUsesTheStepsBothHold) {
  TrainResult full, resumed;
  for (int64_t k = 1; k <= 30; ++k) full.losses.push_back(5.0 - 0.01 * double(k));
  resumed.first_step = 11;  // steps 11..30
  for (int64_t k = 11; k <= 30; ++k)
    resumed.losses.push_back(5.0 - 0.01 * double(k) + (k % 2 == 0 ? 0.3 : 0.1));  // 0.2 higher on average

  const PairedDiff d = paired_diff(resumed, full, 50);
  EXPECT_EQ(d.steps, 20u);  // the 20 steps both hold, not the full run's 30
  EXPECT_NEAR(d.mean, 0.2, 1e-12);
  const PairedDiff by_hand =
      paired_diff(resumed.losses, std::vector<double>(full.losses.begin() + 10, full.losses.end()), 50);
  EXPECT_EQ(d.mean, by_hand.mean);
  EXPECT_EQ(d.se, by_hand.se);
  // The same in the other order: the sign flips.
  EXPECT_NEAR(paired_diff(full, resumed, 50).mean, -0.2, 1e-12);

  // Runs that end at different steps are not two runs of one --steps.
  TrainResult shorter = full;
  shorter.losses.pop_back();
  try {
    paired_diff(shorter, resumed, 50);
    ADD_FAILURE() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "paired_diff: the two runs must end at the same step; one ends at step 29, the other at step 30"),
        std::string::npos)
        << e.what();
  }
}

// A corpus of 1000 bytes or fewer is refused, saying how long it is and what is expected.
TEST(Examples, ShortCorpusSaysWhatItExpects) {
  const fs::path path = temp_file("short_corpus");
  io::atomic_write_file(path.string(), "x");
  try {
    LMTask::shakespeare(path.string());
    ADD_FAILURE() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LMTask::shakespeare: " + path.string() +
                                         " is too short (1 bytes), expected more than 1000"),
              std::string::npos)
        << e.what();
  }
  fs::remove(path);
}
