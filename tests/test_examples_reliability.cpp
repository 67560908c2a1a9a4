// The trainers under the reliability issue's promises, as black boxes (separate processes):
//
//   divergence   a config whose loss becomes NaN stops cleanly at that step; the step is in the summary's
//                table, the CSV and the plot; the other configs go on; every file is written; exit 0
//   anomaly      with --detect-anomaly the same run names the first op that made the NaN/Inf
//   determinism  the same seed gives byte-identical CSVs, at the same thread count and across 1 and 2
//   resume       --steps 10 --save, then a fresh process --steps 20 --resume, gives the bits of --steps 20
//
// Every run is a few steps on the copy task (exp3 --quick: a small model), on 1 thread unless the thread
// count is the point: one thread per run keeps them quick when ctest runs several tests at once.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "examples/common/paired.h"
#include "examples_test_util.h"
#include "io/safetensors.h"

using namespace extest;

namespace {

// The loss curve of one series as (step, loss) strings, exactly as the CSV has them.
std::vector<std::pair<std::string, std::string>> curve(const std::vector<CsvRow>& rows,
                                                       const std::string& panel, const std::string& series) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CsvRow& r : select(rows, "line", series, panel)) out.emplace_back(r.x, r.y);
  return out;
}

// The CSV writes losses with %.9g. A loss is an f32 value (held in a double), and 9 significant digits tell
// every two floats apart, so for such values equal strings mean equal bits. This checks the premise for one
// value: the string is exactly what %.9g prints for the float nearest to it.
bool is_printed_float(const std::string& s) {
  const float f = std::strtof(s.c_str(), nullptr);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", double(f));
  return s == buf;
}

}  // namespace

#ifdef NG_EXP2_NORM_COMPARISON_PATH

// --lr-scale 1e9 gives NoNorm a learning rate of 1e5: after one Adam step its weights are about 1e5, and
// with no norm anywhere the second forward overflows (the attention scores of layer 2 pass 3.4e38).
const std::string kDiverge = " --steps 2 --task copy --threads 1 --quiet --lr-scale 1e9 --out ";

TEST(TrainerDivergence, Exp2StopsTheConfigAtItsNaNStepAndFinishes) {
  const fs::path dir = temp_dir("diverge");
  const RunResult r = run(std::string(NG_EXP2_NORM_COMPARISON_PATH) + kDiverge + (dir / "out").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* ext : {"png", "csv", "md", "cmd.txt"})
    EXPECT_TRUE(fs::exists(dir / "out" / (std::string("norm_comparison.") + ext))) << ext;
  EXPECT_TRUE(contains(r.out, "(loss is NaN at step 2)")) << r.out;

  // The summary: NoNorm's NaN step in the table and in the conclusions; the others never diverged.
  const std::string md = slurp(dir / "out" / "norm_comparison.md");
  EXPECT_TRUE(contains(md, "| NoNorm | 100000 | NaN near step 500 | no | 2 |")) << md;
  EXPECT_TRUE(contains(md, "- NoNorm diverged at step 2 (loss is NaN)")) << md;
  EXPECT_TRUE(contains(md, "Every learning rate is the lesson's times --lr-scale 1e+09")) << md;
  for (const char* c : {"Post-LN + LayerNorm", "Pre-LN + LayerNorm", "Pre-LN + RMSNorm"})
    EXPECT_TRUE(contains(md, "| " + std::string(c) + " | ")) << c;
  EXPECT_EQ(count(md, " | no | - | "), 3u) << md;

  // The CSV: NoNorm's curve stops at step 2 with "nan", the vertical marker is at step 2, and the other
  // configs ran both steps with finite losses.
  const std::vector<CsvRow> rows = read_csv(dir / "out" / "norm_comparison.csv");
  const auto nonorm = curve(rows, "Training loss (copy)", "NoNorm");
  ASSERT_EQ(nonorm.size(), 2u);
  EXPECT_TRUE(std::isfinite(std::stod(nonorm[0].second)));
  EXPECT_EQ(nonorm[1], (std::pair<std::string, std::string>{"2", "nan"}));
  const std::vector<CsvRow> marker = select(rows, "vline", "NoNorm NaN at step 2");
  ASSERT_EQ(marker.size(), 1u);
  EXPECT_EQ(marker[0].x, "2");
  EXPECT_EQ(select(rows, "vline").size(), 1u);
  for (const char* c : {"Post-LN + LayerNorm", "Pre-LN + LayerNorm", "Pre-LN + RMSNorm"}) {
    const auto losses = curve(rows, "Training loss (copy)", c);
    ASSERT_EQ(losses.size(), 2u) << c;
    for (const auto& [step, loss] : losses) EXPECT_TRUE(std::isfinite(std::stod(loss))) << c << " " << step;
  }
  fs::remove_all(dir);
}

// --lr-scale 1e12: every config diverges at step 2. The summary compares nothing (a diverged config's
// "final loss" is the mean of the steps before its blow-up) and says so, with no placeholder value.
TEST(TrainerDivergence, Exp2ComparesOnlyConfigsThatFinished) {
  const fs::path dir = temp_dir("all_diverge");
  const RunResult r =
      run(std::string(NG_EXP2_NORM_COMPARISON_PATH) +
              " --steps 3 --task copy --threads 1 --quiet --lr-scale 1e12 --out " + (dir / "out").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = slurp(dir / "out" / "norm_comparison.md");
  EXPECT_TRUE(contains(md, "- Every config diverged: none has a final loss to rank.")) << md;
  EXPECT_TRUE(contains(md, "Post-LN ended at no final loss (diverged at step 2)")) << md;
  EXPECT_TRUE(contains(md,
                       "Not compared: Post-LN + LayerNorm diverged at step 2, Pre-LN + LayerNorm diverged "
                       "at step 2, Pre-LN + RMSNorm diverged at step 2."))
      << md;
  EXPECT_TRUE(contains(md, "- RMSNorm vs LayerNorm: not compared, Pre-LN + LayerNorm diverged at step 2."))
      << md;
  EXPECT_TRUE(contains(md, "No config finished, so this run has no final loss to hold against the floor."))
      << md;
  for (const char* wrong :
       {"Pre-LN beat", "did NOT beat", "1e+300", "Best final loss", "No config converged"})
    EXPECT_FALSE(contains(md, wrong)) << wrong << "\n" << md;
  fs::remove_all(dir);
}

// --lr-scale 1e6: NoNorm diverges at step 2 and the other three blow up without reaching NaN. The summary
// says their loss grew, instead of calling the runs losses "that barely moved".
TEST(TrainerDivergence, Exp2SaysWhenTheLossGrew) {
  const fs::path dir = temp_dir("grew");
  const RunResult r =
      run(std::string(NG_EXP2_NORM_COMPARISON_PATH) +
              " --steps 6 --task copy --threads 1 --quiet --lr-scale 1e6 --out " + (dir / "out").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = slurp(dir / "out" / "norm_comparison.md");
  EXPECT_TRUE(
      contains(md, "- No config converged, and the loss grew by 20% or more in Post-LN + LayerNorm ("))
      << md;
  EXPECT_TRUE(contains(md, "the comparisons below rank runs that went the wrong way, not the norms.")) << md;
  EXPECT_FALSE(contains(md, "barely moved")) << md;
  fs::remove_all(dir);
}

// What would make the run's end fail is found before the first step: a folder where one of the four files
// goes, and a --save path that is a FIFO (which the checkpoint's rename would have replaced). Both used to
// train every config first.
TEST(TrainerOutputs, Exp2OutputProblemsFailBeforeAnyTraining) {
  const fs::path dir = temp_dir("outputs");
  const std::string exe =
      std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 2 --task copy --threads 1 --quiet --out ";
  const fs::path out = dir / "out";
  fs::create_directories(out / "norm_comparison.csv");
  RunResult r = run(exe + out.string(), dir);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(
      r.err, "error: Report: cannot write '" + (out / "norm_comparison.csv").string() + "': it is a folder"))
      << r.err;
  EXPECT_FALSE(contains(r.out, "final loss")) << r.out;
  fs::remove_all(out);

  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  r = run(exe + out.string() + " --save " + fifo.string(), dir);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: --save: cannot write '" + fifo.string() +
                                  "': it is not a regular file (a device, pipe or socket)"))
      << r.err;
  EXPECT_FALSE(contains(r.out, "final loss")) << r.out;
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::remove_all(dir);
}

// A corpus without a newline trains and samples (the sample's prompt was "\n", whose encoding failed after
// all four configs had trained); a corpus of one distinct byte is refused before training.
TEST(TrainerOutputs, Exp2CorporaWithoutANewlineOrWithOneByte) {
  const fs::path dir = temp_dir("corpora");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "to be or not ";
  write_file(dir / "no_newline.txt", text);
  write_file(dir / "one_byte.txt", std::string(3000, 'a'));
  const std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 2 --threads 1 --quiet";
  RunResult r =
      run(exe + " --data " + (dir / "no_newline.txt").string() + " --out " + (dir / "a").string(), dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Sample from Pre-LN + RMSNorm")) << r.out;
  EXPECT_TRUE(fs::exists(dir / "a" / "norm_comparison.md"));
  r = run(exe + " --data " + (dir / "one_byte.txt").string() + " --out " + (dir / "b").string(), dir);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: LMTask::shakespeare: " + (dir / "one_byte.txt").string() +
                                  " has 1 distinct byte, expected at least 2"))
      << r.err;
  EXPECT_FALSE(contains(r.out, "final loss")) << r.out;
  fs::remove_all(dir);
}

// The same run with --detect-anomaly: the first op whose output is not finite is named (a Matmul of the
// attention, shapes (B, NH, T, T) = (16, 4, 64, 64)), its inputs were still finite (it made the Inf, it did
// not inherit it), the config stops at the same step 2, and the run still finishes with its files.
TEST(TrainerDivergence, Exp2DetectAnomalyNamesTheFirstOp) {
  const fs::path dir = temp_dir("anomaly");
  const RunResult r =
      run(std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --detect-anomaly" + kDiverge + (dir / "out").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string report =
      "anomaly: the forward of Matmul (node MatmulBackward) produced NaN or Inf in its output of shape "
      "(16, 4, 64, 64); its inputs have shapes (16, 4, 64, 64), (16, 4, 64, 64).";
  EXPECT_TRUE(contains(r.err, "NoNorm: step 2: " + report)) << r.err;
  EXPECT_FALSE(contains(r.err, "already held NaN")) << r.err;
  const std::string md = slurp(dir / "out" / "norm_comparison.md");
  EXPECT_TRUE(contains(md, "- NoNorm diverged at step 2 (" + report + ")")) << md;
  EXPECT_TRUE(contains(md, "| NoNorm | 100000 | NaN near step 500 | no | 2 |")) << md;
  EXPECT_EQ(count(md, " | no | - | "), 3u) << "the other configs ran to the end: " << md;
  EXPECT_TRUE(fs::exists(dir / "out" / "norm_comparison.png"));
  fs::remove_all(dir);
}

// exp2's --save/--resume, across processes, on the copy task: 4 steps straight against 2 steps and --save,
// then a fresh process with --resume for steps 3 and 4. The last config (Pre-LN + RMSNorm) is the one saved
// and resumed; the other three train again from step 1 in the second process, and must match too.
TEST(TrainerResume, Exp2AcrossProcessesIsBitwise) {
  if (kSanitized)
    GTEST_SKIP() << "three exp2 runs take minutes under ASan; Exp3AcrossProcessesIsBitwise runs there";
  const fs::path dir = temp_dir("resume2");
  const std::string exe = std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --threads 1 --quiet --task copy";
  const fs::path ckpt = dir / "ckpt.safetensors";
  RunResult r = run(exe + " --steps 4 --out " + (dir / "straight").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(exe + " --steps 2 --save " + ckpt.string() + " --out " + (dir / "first").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(exe + " --steps 4 --resume " + ckpt.string() + " --out " + (dir / "second").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "Pre-LN + RMSNorm: resumed from " + ckpt.string() + " at step 2")) << r.err;

  // The checkpoint keeps the losses so far: the resumed run's files are the straight run's, byte for byte
  // (its curve from step 1, its table and statistics), the first run's curve is their first two steps.
  const std::string panel = "Training loss (copy)";
  const auto straight = read_csv(dir / "straight" / "norm_comparison.csv");
  const auto first = read_csv(dir / "first" / "norm_comparison.csv");
  EXPECT_EQ(slurp(dir / "second" / "norm_comparison.csv"), slurp(dir / "straight" / "norm_comparison.csv"));
  const auto expected = curve(straight, panel, "Pre-LN + RMSNorm");
  ASSERT_EQ(expected.size(), 4u);
  const auto head = curve(first, panel, "Pre-LN + RMSNorm");
  ASSERT_EQ(head.size(), 2u);
  for (size_t k = 0; k < 4; ++k) {
    if (k < 2) {
      EXPECT_EQ(head[k], expected[k]) << "step " << k + 1;
    }
    EXPECT_TRUE(is_printed_float(expected[k].second)) << expected[k].second;
  }
  EXPECT_TRUE(contains(slurp(dir / "second" / "norm_comparison.md"),
                       "- Pre-LN + RMSNorm was resumed from `" + ckpt.string() +
                           "` at step 2; the checkpoint kept its losses of steps 1 to 2, so its curve and "
                           "statistics are those of the whole run"));
  fs::remove_all(dir);
}

// exp2's --resume and --save apply to its last config: a corrupt checkpoint or a --save folder that is not
// there is an error before NoNorm, the first config, trains (no "final loss" line, no CSV).
TEST(TrainerResume, Exp2CheckpointFlagsFailBeforeAnyTraining) {
  const fs::path dir = temp_dir("ckflags2");
  const std::string exe =
      std::string(NG_EXP2_NORM_COMPARISON_PATH) + " --steps 2 --task copy --threads 1 --quiet";
  const fs::path corrupt = dir / "corrupt.safetensors";
  write_file(corrupt, std::string(7, '\x01'));  // shorter than the 8-byte header length
  const fs::path missing = dir / "missing" / "c.safetensors";
  const fs::path notes = dir / "notes.txt";  // a file of the user's, not a checkpoint: --save keeps off it
  write_file(notes, "my notes\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --resume " + corrupt.string(), "error: load_safetensors: " + corrupt.string()},
      {" --save " + missing.string(), "error: --save: expected an existing folder for " + missing.string()},
      {" --save " + notes.string(),
       "error: --save: " + notes.string() + " exists and is not a normgrad checkpoint"},
  };
  for (const auto& [flags, error] : cases) {
    const fs::path out = dir / "out";
    RunResult r = run(exe + flags + " --out " + out.string(), dir);
    EXPECT_EQ(r.status, 1) << flags << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, error)) << flags << "\n" << r.err;
    EXPECT_FALSE(contains(r.out, "final loss")) << flags << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out / "norm_comparison.csv")) << flags;
    fs::remove_all(out);
  }
  EXPECT_EQ(slurp(notes), "my notes\n");
  fs::remove_all(dir);
}
#endif

#ifdef NG_EXP3_PRENORM_VS_POSTNORM_PATH

const std::string kExp3 = " --quick --task copy --quiet";

// Same seed, same thread count: byte-identical CSVs after 5 steps (2 under ASan) (every loss of the four
// runs, the final-loss and stability bars). The CSV holds no timings (those are only in the summary's
// "seconds" column), so the whole file is compared. Every reduction has a fixed order, so 1 thread gives the
// same bytes as 2.
TEST(TrainerDeterminism, Exp3SameSeedSameBytes) {
  const fs::path dir = temp_dir("determinism");
  const int steps = kSanitized ? 2 : 5;
  const std::string exe =
      std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + kExp3 + " --steps " + std::to_string(steps);
  for (const char* name : {"a", "b"}) {
    const RunResult r = run(exe + " --seed 3 --threads 2 --out " + (dir / name).string(), dir);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  const RunResult r = run(exe + " --seed 3 --threads 1 --out " + (dir / "one").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string a = slurp(dir / "a" / "prenorm_vs_postnorm.csv");
  ASSERT_EQ(select(read_csv(dir / "a" / "prenorm_vs_postnorm.csv"), "line").size(), 4u * size_t(steps));
  EXPECT_FALSE(contains(a, "second")) << "a timing column would make this comparison meaningless";
  EXPECT_EQ(a, slurp(dir / "b" / "prenorm_vs_postnorm.csv")) << "two runs at 2 threads differ";
  EXPECT_EQ(a, slurp(dir / "one" / "prenorm_vs_postnorm.csv")) << "1 thread differs from 2";
  // A different seed gives different losses: the comparison above can fail.
  const RunResult other = run(exe + " --seed 4 --threads 2 --out " + (dir / "c").string(), dir);
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_NE(a, slurp(dir / "c" / "prenorm_vs_postnorm.csv"));
  fs::remove_all(dir);
}

// The resume check, across processes: train 10 steps and --save; a fresh process --resume's and
// trains 10 more (2 + 2 under ASan). The last run (Post-LN 8L) is the one saved; its 20 losses must be the
// bits of a straight 20-step run, and the other three runs (trained again from step 1 in the second process)
// match too.
TEST(TrainerResume, Exp3AcrossProcessesIsBitwise) {
  const size_t total = kSanitized ? 4 : 20, half = total / 2;
  const std::string steps = std::to_string(total), half_steps = std::to_string(half);
  const fs::path dir = temp_dir("resume3");
  const std::string exe = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + kExp3 + " --threads 1";
  const fs::path ckpt = dir / "ckpt.safetensors";
  RunResult r = run(exe + " --steps " + steps + " --out " + (dir / "straight").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run(exe + " --steps " + half_steps + " --save " + ckpt.string() + " --out " + (dir / "first").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::exists(ckpt));
  r = run(exe + " --steps " + steps + " --resume " + ckpt.string() + " --out " + (dir / "second").string(),
          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "Post-LN 8L: resumed from " + ckpt.string() + " at step " + half_steps))
      << r.err;
  // The same checkpoint with --steps at its own step leaves nothing to run: an error before the first run
  // trains (the runs before the resumed one print "final" when they finish).
  RunResult past =
      run(exe + " --steps " + half_steps + " --resume " + ckpt.string() + " --out " + (dir / "past").string(),
          dir);
  EXPECT_EQ(past.status, 1) << past.err;
  EXPECT_TRUE(contains(past.err, "error: --resume: the checkpoint " + ckpt.string() + " is at step " +
                                     half_steps + ", expected fewer than the " + half_steps + " steps"))
      << past.err;
  EXPECT_FALSE(contains(past.out, "final")) << past.out;

  // The checkpoint keeps the losses so far: the resumed run's CSV is the straight run's, byte for byte (the
  // 8-layer Post-LN curve from step 1, and the final-loss and stability bars computed from it).
  const auto straight = read_csv(dir / "straight" / "prenorm_vs_postnorm.csv");
  const auto first = read_csv(dir / "first" / "prenorm_vs_postnorm.csv");
  EXPECT_EQ(slurp(dir / "second" / "prenorm_vs_postnorm.csv"),
            slurp(dir / "straight" / "prenorm_vs_postnorm.csv"));
  const std::string panel = "8 layers: training loss";
  const auto expected = curve(straight, panel, "Post-LN 8L");
  ASSERT_EQ(expected.size(), total);
  const auto head = curve(first, panel, "Post-LN 8L");
  ASSERT_EQ(head.size(), half);
  for (size_t k = 0; k < total; ++k) {
    if (k < half) {
      EXPECT_EQ(head[k], expected[k]) << "step " << k + 1;
    }
    EXPECT_TRUE(is_printed_float(expected[k].second)) << expected[k].second;
  }
  EXPECT_EQ(
      select(read_csv(dir / "second" / "prenorm_vs_postnorm.csv"), "line", "", "4 layers: training loss")
          .size(),
      2 * total);
  EXPECT_TRUE(contains(slurp(dir / "second" / "prenorm_vs_postnorm.md"),
                       "- Post-LN 8L was resumed from `" + ckpt.string() + "` at step " + half_steps +
                           "; the checkpoint kept its losses of steps 1 to " + half_steps));
  fs::remove_all(dir);
}

// A checkpoint that kept no losses (one not written by train_lm, here: exp3's with train.losses removed)
// resumes a run whose curve starts after the checkpoint's step. Its comparisons with the runs trained from
// step 1 are made over the steps both hold; the trainer used to stop at the summary with "paired_diff: the
// two loss curves must have one loss per step each", after all the training, and write no files.
TEST(TrainerResume, Exp3WithoutSavedLossesComparesTheStepsBothRunsHold) {
  const fs::path dir = temp_dir("nolosses3");
  const std::string exe = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + kExp3 + " --threads 1";
  const fs::path ckpt = dir / "ckpt.safetensors", bare = dir / "bare.safetensors";
  RunResult r = run(exe + " --steps 4 --save " + ckpt.string() + " --out " + (dir / "first").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  ng::io::SafetensorsData data = ng::io::load_safetensors(ckpt.string());
  ASSERT_EQ(data.metadata.erase("train.losses"), 1u);
  ng::io::save_safetensors(bare.string(), data.tensors, data.metadata);

  r = run(exe + " --steps 24 --resume " + bare.string() + " --out " + (dir / "second").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = slurp(dir / "second" / "prenorm_vs_postnorm.md");
  EXPECT_TRUE(contains(md, "its curve and statistics cover steps 5 to 24 only")) << md;
  const auto rows = read_csv(dir / "second" / "prenorm_vs_postnorm.csv");
  const std::vector<double> post8 = curve_of(rows, "8 layers: training loss", "Post-LN 8L");
  const std::vector<double> pre8 = curve_of(rows, "8 layers: training loss", "Pre-LN 8L");
  const std::vector<double> post4 = curve_of(rows, "4 layers: training loss", "Post-LN 4L");
  ASSERT_EQ(post8.size(), 20u);
  ASSERT_EQ(pre8.size(), 24u);
  ASSERT_EQ(post4.size(), 24u);
  // The full runs' steps 5..24 beside the resumed run's.
  const std::vector<double> pre8_tail(pre8.begin() + 4, pre8.end()),
      post4_tail(post4.begin() + 4, post4.end());
  const ng::examples::PairedDiff positions = ng::examples::paired_diff(pre8_tail, post8, 100);
  const ng::examples::PairedDiff depths = ng::examples::paired_diff(post8, post4_tail, 100);
  EXPECT_EQ(positions.steps, 20u);
  EXPECT_TRUE(contains(md, ng::examples::paired_text(positions, "Pre-LN 8L", "Post-LN 8L"))) << md;
  EXPECT_TRUE(contains(md, ng::examples::paired_text(depths, "Post-LN 8L", "Post-LN 4L"))) << md;
  fs::remove_all(dir);
}

// A checkpoint that cannot be resumed, or a --save path that cannot be written, is an error before the
// first run trains, not after three runs have trained (the checks of examples/common/lm_task.h,
// check_checkpoint_flags): status 1, the reason named, no run's "final" line. And the run that fails leaves
// the files of the run before it in --out as they were, its command line included (examples/common/report.h:
// nothing is written until the end).
TEST(TrainerResume, Exp3CheckpointFlagsFailBeforeAnyTraining) {
  const fs::path dir = temp_dir("ckflags3");
  const std::string exe = std::string(NG_EXP3_PRENORM_VS_POSTNORM_PATH) + kExp3 + " --threads 1 --steps 2";
  const fs::path out = dir / "out";
  RunResult ok = run(exe + " --out " + out.string(), dir);
  ASSERT_EQ(ok.status, 0) << ok.err;
  const std::vector<std::string> exts = {"png", "csv", "md", "cmd.txt"};
  std::vector<std::string> before;
  for (const std::string& e : exts) before.push_back(slurp(out / ("prenorm_vs_postnorm." + e)));

  const fs::path corrupt = dir / "corrupt.safetensors";
  write_file(corrupt, std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":") + std::string(40, 'x'));
  struct Case {
    std::string flags, error;
  };
  const std::vector<Case> cases = {
      {" --resume " + corrupt.string(), "error: load_safetensors: " + corrupt.string()},
      {" --save " + (dir / "missing" / "c.safetensors").string(),
       "error: --save: expected an existing folder for " + (dir / "missing" / "c.safetensors").string()},
      {" --save " + dir.string(), "error: --save: expected a file path, got the folder " + dir.string()},
  };
  for (const Case& c : cases) {
    RunResult r = run(exe + c.flags + " --out " + out.string(), dir);
    EXPECT_EQ(r.status, 1) << c.flags << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.error)) << c.flags << "\n" << r.err;
    EXPECT_FALSE(contains(r.out, "final")) << c.flags << "\n" << r.out;
    for (size_t i = 0; i < exts.size(); ++i)
      EXPECT_EQ(slurp(out / ("prenorm_vs_postnorm." + exts[i])), before[i]) << c.flags << ": " << exts[i];
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(out)) ++files, (void)entry;
    EXPECT_EQ(files, exts.size()) << c.flags;
  }
  fs::remove_all(dir);
}
#endif
