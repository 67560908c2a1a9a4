// --save / --resume in the trainers: a run that stops, saves and resumes gives the same bits as one that
// never stopped, and resuming a checkpoint that is already at (or past) the run's last step is an ng::Error.
//
// This calls the trainers' shared loop (examples/common/lm_task.h, train_lm) on the copy task with a small
// model, with dropout on so that the dropout generator's state must also travel in the checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "examples/common/lm_task.h"

namespace fs = std::filesystem;
using namespace ng;
using namespace ng::examples;

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
  EXPECT_EQ(b.first_step, 4);
  ASSERT_EQ(b.losses.size(), 3u);

  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(same_bits(a.losses[k], full.losses[k])) << "step " << k + 1;
  for (size_t k = 0; k < 3; ++k)
    EXPECT_TRUE(same_bits(b.losses[k], full.losses[3 + k]))
        << "step " << 4 + k << ": resumed " << b.losses[k] << " vs straight " << full.losses[3 + k];
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
