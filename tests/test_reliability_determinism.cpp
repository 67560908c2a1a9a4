// Determinism: the same seed gives bitwise-identical losses across runs and across 1 and 2 threads.
//
// Every reduction in normgrad has a fixed order (tensor/parallel.h: chunk boundaries depend only on the
// problem size, never on the thread count), and every random draw comes from a seeded Philox generator. So a
// whole training run, forward, backward and optimizer, must give the same bits whatever the thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "normgrad.h"

using namespace ng;

namespace {

// Restores the thread count when the test ends, even on failure.
struct ThreadCountGuard {
  int prev = num_threads();
  ~ThreadCountGuard() { set_num_threads(prev); }
};

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Train a small TinyLM for `steps` Adam steps on a fixed random batch; return each step's loss, as bits.
// Dropout is on, so the dropout generator's stream is part of what must be reproduced.
std::vector<uint64_t> train_tinylm(int threads, const std::string& norm, int steps = 20) {
  set_num_threads(threads);
  nn::TinyLMConfig cfg;
  cfg.vocab_size = 32;
  cfg.dim = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.norm = norm;
  cfg.max_seq_len = 32;
  cfg.dropout = 0.1;
  cfg.seed = 1234;
  nn::TinyLM model(cfg);
  model.train();
  optim::Adam opt(model.named_parameters(), {.lr = 3e-3});

  Generator data_gen(99);
  const int64_t B = 4, T = 32;  // B*T = 128 rows: large enough that the kernels split work across threads
  Tensor tokens = randint(0, cfg.vocab_size, {B, T + 1}, data_gen);
  Tensor x = tokens.slice(1, 0, T).contiguous(), y = tokens.slice(1, 1, T + 1).contiguous();

  std::vector<uint64_t> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = model.loss(x, y);
    loss.backward();
    opt.step();
    losses.push_back(bits_of(loss.item()));
  }
  return losses;
}

double value_of(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

}  // namespace

TEST(Determinism, TinyLMTrainingIsBitwiseIdenticalAcrossThreadCountsAndRuns) {
  ThreadCountGuard guard;
  for (const char* norm : {"layernorm", "rmsnorm"}) {
    const std::vector<uint64_t> one = train_tinylm(1, norm);
    const std::vector<uint64_t> two = train_tinylm(2, norm);
    const std::vector<uint64_t> two_again = train_tinylm(2, norm);
    ASSERT_EQ(one.size(), 20u);
    for (size_t s = 0; s < one.size(); ++s) {
      EXPECT_EQ(one[s], two[s]) << norm << " step " << s << ": 1 thread " << value_of(one[s])
                                << ", 2 threads " << value_of(two[s]);
      EXPECT_EQ(two[s], two_again[s]) << norm << " step " << s << ": two runs with the same seed differ";
    }
    // The run really trained (a test of identical constants would prove nothing): the loss fell from about
    // log(32) = 3.47.
    EXPECT_NEAR(value_of(one.front()), std::log(32.0), 0.5) << norm;
    EXPECT_LT(value_of(one.back()), value_of(one.front()) - 0.3) << norm;
  }
}

// A thread count past kMaxThreads is refused before OpenMP sees it (100000 crashed the process in libgomp),
// and the count in force is left as it was.
TEST(Determinism, SetNumThreadsRefusesAbsurdCounts) {
  const int before = num_threads();
  set_num_threads(2);
  try {
    set_num_threads(100000);
    ADD_FAILURE() << "set_num_threads(100000) was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_num_threads: expected at most 1024 threads, got 100000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(kMaxThreads);  // the bound itself is taken (no parallel region runs here)
  EXPECT_EQ(num_threads(), kMaxThreads);
  set_num_threads(before);
}

// set_num_threads(0) puts OpenMP's default back. It used to leave the last count in force, so a test that
// ran on one thread and then called set_num_threads(0) left every later test of its process on one thread.
// (before + 1, so that the count set always differs from the default, even on one core.)
TEST(Determinism, SetNumThreadsZeroRestoresTheDefault) {
  set_num_threads(0);
  const int openmp_default = num_threads();
  set_num_threads(openmp_default + 1);
  EXPECT_EQ(num_threads(), openmp_default + 1);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), openmp_default);
  // A parallel region really runs on that many threads again, not only the count reported.
  std::atomic<int> most{0};
  std::atomic<int> inside{0};
  parallel_for(4 * openmp_default, 1, [&](int64_t, int64_t) {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --inside;
  });
  EXPECT_EQ(most.load(), openmp_default);
}

TEST(Determinism, DifferentSeedsGiveDifferentLosses) {
  // The converse: the seed matters (so the equality above is not an accident of ignoring it).
  ThreadCountGuard guard;
  set_num_threads(1);
  nn::TinyLMConfig cfg;
  cfg.vocab_size = 16;
  cfg.dim = 32;
  cfg.n_layers = 1;
  cfg.n_heads = 2;
  Tensor tokens = arange(0.0, 16.0, 1.0, DType::i64).reshape({2, 8});
  cfg.seed = 1;
  nn::TinyLM a(cfg);
  cfg.seed = 2;
  nn::TinyLM b(cfg);
  EXPECT_NE(bits_of(a.loss(tokens, tokens).item()), bits_of(b.loss(tokens, tokens).item()));
}

TEST(Determinism, LargeReductionsAndMatmulAreBitwiseIdenticalAcrossThreadCounts) {
  // The building blocks on their own, at sizes where the work is split into many chunks.
  ThreadCountGuard guard;
  Generator gen(5);
  Tensor v = randn({1 << 20}, gen);  // 1M values: a sum over everything is many fixed chunks
  Tensor a = randn({256, 192}, gen), w = randn({192, 160}, gen);
  Tensor rows = randn({512, 300}, gen);

  set_num_threads(1);
  const double s1 = sum(v).item();
  Tensor m1 = matmul(a, w), r1 = var(rows, {1}), n1 = F::layer_norm(rows, {300});
  set_num_threads(2);
  const double s2 = sum(v).item();
  Tensor m2 = matmul(a, w), r2 = var(rows, {1}), n2 = F::layer_norm(rows, {300});

  EXPECT_EQ(bits_of(s1), bits_of(s2));
  auto same_bits = [](const Tensor& x, const Tensor& y) {
    return std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
  };
  EXPECT_TRUE(same_bits(m1, m2)) << "matmul";
  EXPECT_TRUE(same_bits(r1, r2)) << "var";
  EXPECT_TRUE(same_bits(n1, n2)) << "layer_norm";
}

TEST(Determinism, RowNormForwardsGiveTheSameBitsInEveryRunOfChunks) {
  // LayerNorm's and RMSNorm's fast forwards hand each thread its chunks of rows as one run
  // (parallel_for_runs), so where a run starts depends on the thread count. Every row must still give the
  // same bits. The shapes make the runs start where the per-run state would show:
  //   n = 700 bf16 (grain 16384 / 700 = 23 rows, rounded up to 32, two UnshiftedGate blocks): every 7th row
  //     sits far from 0 (mean 30), so a gate block that started on another row would decide otherwise;
  //   n = 3000 (grain 5 rows): wide rows go four at a time from the start of a run;
  //   n = 2560 (bf16 grain 16 rows): four at a time, the next four's sums taken in the output walk, unshifted
  //     or shifted as the gate guesses from the rows before (LayerNormOutputFused);
  //   n = 256 (grain 64 rows): short rows, software-pipelined across the run.
  ThreadCountGuard guard;
  Generator gen(11);
  for (DType dt : {DType::f32, DType::bf16}) {
    for (int64_t n : {700, 3000, 2560, 256}) {
      const int64_t rows = 203;
      std::vector<double> xs = randn({rows, n}, gen, DType::f64).to_vector<double>();
      for (int64_t r = 0; r < rows; r += 7)
        for (int64_t i = 0; i < n; ++i) xs[size_t(r * n + i)] += 30.0;
      Tensor x = from_vector(xs, {rows, n}).to(dt);
      Tensor w = randn({n}, gen, DType::f32), b = randn({n}, gen, DType::f32);
      std::vector<std::vector<Tensor>> outs;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        norms::NormStats ln = norms::layer_norm_forward(x, n, w, b, 1e-5);
        norms::NormStats rms = norms::rms_norm_forward(x, n, w, 1e-5);
        outs.push_back({ln.y, ln.mean, ln.rstd, rms.y, rms.rstd});
      }
      const char* names[] = {"layer_norm y", "layer_norm mean", "layer_norm rstd", "rms_norm y",
                             "rms_norm rstd"};
      for (size_t t = 1; t < outs.size(); ++t)
        for (size_t k = 0; k < outs[0].size(); ++k) {
          const Tensor &a = outs[0][k], &c = outs[t][k];
          EXPECT_EQ(std::memcmp(a.raw_data(), c.raw_data(), size_t(a.numel()) * dtype_size(a.dtype())), 0)
              << names[k] << ", " << dtype_name(dt) << ", n = " << n << ", " << t + 1 << " threads against 1";
        }
    }
  }
}
