// User threads: what a program that runs normgrad from several std::threads of its own may rely on.
//
// Each test here gives the same answer in a plain build whether or not it races, as long as the race does
// no visible harm on this machine; the ThreadSanitizer build (scripts/tsan.sh) is what turns a data race in
// these paths into a failure. Tests of one shared object under threads live beside that object
// (Autograd.ThreadsRunningBackwardIntoOneLeaf, Attention.ThreadsRunningOneModelsForwardAtOnce,
// Random.ThreadsDrawingFromOneGeneratorGetBlocksOfTheirOwn).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;

namespace {

// One small training run: `steps` AdamW steps of a TinyLM on fixed random tokens, with clipping. Returns
// the loss of every step and then every parameter value, as doubles, so two runs compare bit for bit.
std::vector<double> train(const nn::TinyLMConfig& c, int steps) {
  nn::TinyLM m(c);
  optim::AdamWOptions o;
  o.lr = 3e-3;
  optim::AdamW opt(m.named_parameters(), o);
  Generator data(c.seed + 100);
  const int64_t B = 4, T = 24;
  std::vector<double> out;
  for (int step = 0; step < steps; ++step) {
    Tensor x = randint(0, c.vocab_size, {B, T}, data);
    Tensor y = randint(0, c.vocab_size, {B, T}, data);
    Tensor loss = m.loss(x, y);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    out.push_back(loss.item());
  }
  for (const Tensor& p : m.parameters())
    for (double v : p.to_vector<double>()) out.push_back(v);
  return out;
}

std::vector<nn::TinyLMConfig> three_models() {
  std::vector<nn::TinyLMConfig> cs(3);
  for (size_t i = 0; i < cs.size(); ++i) {
    cs[i].vocab_size = 40;
    cs[i].dim = 64;
    cs[i].n_layers = 2;
    cs[i].n_heads = 4;
    cs[i].seed = 7 + i;
  }
  cs[0].norm = "rmsnorm";  // MiniMind's Pre-LN RMSNorm and SwiGLU
  cs[0].ffn = "swiglu";
  cs[1].norm = "layernorm";
  cs[1].norm_position = "post";
  cs[2].norm = "rmsnorm";
  cs[2].dropout = 0.1;  // its own dropout stream (TinyLM's dropout_gen_)
  return cs;
}

}  // namespace

// Three models, each trained by its own thread at once, each thread's kernels on a team of 2 OpenMP threads:
// every loss and every final parameter is the one the same model gets trained alone. Shared state in the
// way: the storage cache, the autograd sequence counter, the thread count, the default generator's callers.
TEST(UserThreads, SeparateModelsTrainingAtOnceGetWhatEachGetsAlone) {
  ng::testing::ThreadsGuard two(2);
  const std::vector<nn::TinyLMConfig> cs = three_models();
  const int steps = 4;
  std::vector<std::vector<double>> alone;
  for (const auto& c : cs) alone.push_back(train(c, steps));
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<double>> together(cs.size());
    std::vector<std::string> error(cs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < cs.size(); ++i)
      threads.emplace_back([&, i] {
        try {
          together[i] = train(cs[i], steps);
        } catch (const Error& e) {
          error[i] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < cs.size(); ++i) {
      ASSERT_EQ(error[i], "") << "model " << i << ", round " << round;
      ASSERT_EQ(together[i].size(), alone[i].size());
      EXPECT_EQ(std::memcmp(together[i].data(), alone[i].data(), alone[i].size() * sizeof(double)), 0)
          << "model " << i << ", round " << round << ": first loss " << together[i][0] << " vs "
          << alone[i][0];
    }
  }
}

// set_num_threads is process-wide, and another thread may call it while kernels run: each result is still
// the one computed at a fixed count (how work is split never depends on the count, tensor/parallel.h).
TEST(UserThreads, SetNumThreadsFromAnotherThreadWhileKernelsRun) {
  ng::testing::ThreadsGuard restore(2);
  Generator g(5);
  // Big enough that each op runs a parallel region: 192 x 256 x 320 is past the GEMM's one-thread size.
  const Tensor a = randn({192, 256}, g), b = randn({256, 320}, g), x = randn({256, 300}, g);
  const Tensor w = randn({300}, g), bias = randn({300}, g);
  auto compute = [&] {
    std::vector<double> r = matmul(a, b).to_vector<double>();
    for (double v : F::layer_norm(x, {300}, w, bias, 1e-5).to_vector<double>()) r.push_back(v);
    for (double v : sum(softmax(x, -1), {0}).to_vector<double>()) r.push_back(v);
    return r;
  };
  const std::vector<double> want = compute();
  std::atomic<bool> done{false};
  std::thread flipper([&] {
    for (int i = 0; !done.load(); ++i) set_num_threads(1 + i % 3);
  });
  bool same = true;
  for (int i = 0; i < 100 && same; ++i) same = compute() == want;
  done = true;
  flipper.join();
  EXPECT_TRUE(same);
}

// Anomaly mode belongs to the thread that turned it on, as grad mode does: while one thread holds a
// DetectAnomalyGuard, another thread's log(-1) gives NaN and no error, and the guard's own thread still
// gets its error after the other thread is done.
TEST(UserThreads, AnomalyModeIsPerThread) {
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;  // 1: the guard is on in thread A; 2: thread B has run its op
  auto wait_for = [&](int p) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase >= p; });
  };
  auto reach = [&](int p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = p;
    }
    cv.notify_all();
  };
  std::string a_error, b_error;
  bool b_nan = false;
  std::thread a([&] {
    DetectAnomalyGuard anomaly;
    reach(1);
    wait_for(2);
    try {
      Tensor x = full({3}, -1.0).requires_grad_();
      (void)log(x);
    } catch (const Error& e) {
      a_error = e.what();
    }
  });
  std::thread b([&] {
    wait_for(1);
    try {
      Tensor x = full({3}, -1.0).requires_grad_();
      b_nan = std::isnan(log(x).to_vector<double>()[0]);
    } catch (const Error& e) {
      b_error = e.what();
    }
    reach(2);
  });
  a.join();
  b.join();
  EXPECT_EQ(b_error, "");
  EXPECT_TRUE(b_nan);
  EXPECT_NE(a_error.find("anomaly"), std::string::npos) << a_error;
  EXPECT_FALSE(anomaly_enabled());
}
