// Factories, random generators (statistics and reproducibility at 1 and 2 threads), and their errors.
#include <algorithm>

#include "ops_test_util.h"
#include "tensor/sanitizer.h"  // NG_ASAN

#if defined(__linux__)
#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#endif

using namespace ng;
using namespace ng::testing;

TEST(Factory, Values) {
  EXPECT_EQ(zeros({2, 3}).to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ones({2}, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(full({3}, 2.5, DType::bf16).to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(scalar_tensor(4.0).dim(), 0);
  EXPECT_EQ(scalar_tensor(4.0).item(), 4.0);
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::i64);
  EXPECT_EQ(arange(1.0, 2.0, 0.25).to_vector<double>(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(3.0, 0.0, -1.0).to_vector<double>(), (std::vector<double>{3, 2, 1}));
  EXPECT_EQ(arange(2.0, 1.0).numel(), 0);
  EXPECT_EQ(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).to_vector<double>()[3], 4.0);
  EXPECT_EQ(from_vector(std::vector<float>{1.5f}, {1}, DType::f64).dtype(), DType::f64);
  EXPECT_EQ(tensor({{1.0, 2.0}, {3.0, 4.0}}).shape(), (Shape{2, 2}));
  EXPECT_EQ(empty({0, 5}).numel(), 0);
  EXPECT_EQ(zeros_like(ones({3}, DType::f16)).dtype(), DType::f16);
  EXPECT_EQ(ones_like(zeros({2})).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(empty_like(zeros({4, 1})).shape(), (Shape{4, 1}));
  EXPECT_TRUE(zeros({2, 3}).is_contiguous());
  // A tensor of no values is contiguous whatever its strides ((4, 0) gets the strides (1, 1)), as in PyTorch
  EXPECT_TRUE(zeros({4, 0}).is_contiguous());
  EXPECT_TRUE(zeros({0, 3, 0}).is_contiguous());
  EXPECT_TRUE(zeros({4, 0}).t().is_contiguous());
  EXPECT_EQ(zeros({2, 3}).device().str(), "cpu");
  EXPECT_NE(tensor({1.0, 2.0}).str().find("Tensor(shape=(2), dtype=f32, values=[1, 2])"), std::string::npos);
}

TEST(Random, UniformNeverGivesItsUpperBoundInAnyDtype) {
  // In bf16 about 1 in 512 draws of rand rounded up to 1 (386 of 200000), in f16 1 in 4096: those are the
  // largest value below 1 now (1 - 2^-8, 1 - 2^-11). And a bound between two bf16 values keeps [lo, hi).
  Generator g(5);
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto u = rand({200000}, g, dt).to_vector<double>();
    const double top = dt == DType::bf16 ? 1 - 0x1p-8 : dt == DType::f16 ? 1 - 0x1p-11 : 1 - 0x1p-24;
    int64_t at_top = 0;
    for (double v : u) {
      ASSERT_TRUE(v >= 0.0 && v < 1.0) << v;
      at_top += v == top;
    }
    if (dt != DType::f32) {
      EXPECT_GT(at_top, 0);  // the draws that were rounded to 1 are there
    }
  }
  // hi = 1.006 lies between bf16's 1 and 1.0078125, above their midpoint: draws in (1.0039, 1.006) rounded
  // up to 1.0078125, past hi; now they are 1.
  const auto w = uniform({100000}, -1.0, 1.006, g, DType::bf16).to_vector<double>();
  EXPECT_EQ(*std::max_element(w.begin(), w.end()), 1.0);
  // And at lo: -0.1 lies between bf16's -0.10009765625 and -0.099609375, nearer the first, so draws within
  // half a bf16 step of lo rounded below it (712 in 10^6 before); now they are -0.099609375, the smallest
  // bf16 from lo. In f16 and f32 as well, where -0.1 is not exact either.
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    const auto s = uniform({200000}, -0.1, 0.1, g, dt).to_vector<double>();
    const double smallest = *std::min_element(s.begin(), s.end());
    EXPECT_GE(smallest, -0.1) << dtype_name(dt);
    EXPECT_LT(*std::max_element(s.begin(), s.end()), 0.1) << dtype_name(dt);
    if (dt == DType::bf16) {
      EXPECT_EQ(smallest, -0.099609375);
    }
  }
  EXPECT_EQ(uniform({10}, 3.0, 3.0, g, DType::bf16).to_vector<double>(), std::vector<double>(10, 3.0));
}

TEST(Random, StatisticsAndRanges) {
  Generator g(123);
  auto u = rand({100000}, g).to_vector<double>();
  double mean = 0;
  for (double v : u) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    mean += v;
  }
  EXPECT_NEAR(mean / 1e5, 0.5, 0.005);
  auto n = randn({100000}, g, DType::f64, 2.0, 3.0).to_vector<double>();
  double m = 0, m2 = 0;
  for (double v : n) m += v, m2 += v * v;
  m /= 1e5;
  EXPECT_NEAR(m, 2.0, 0.05);
  EXPECT_NEAR(std::sqrt(m2 / 1e5 - m * m), 3.0, 0.05);
  auto ui = uniform({10000}, -2.0, -1.0, g).to_vector<double>();
  for (double v : ui) ASSERT_TRUE(v >= -2.0 && v < -1.0);
  auto ri = randint(-3, 4, {10000}, g).to_vector<int64_t>();
  std::vector<int> count(7, 0);
  for (int64_t v : ri) {
    ASSERT_TRUE(v >= -3 && v < 4);
    ++count[size_t(v + 3)];
  }
  for (int c : count) EXPECT_NEAR(c, 10000 / 7.0, 200);
  // In-place fills.
  Tensor t = zeros({1000});
  uniform_(t, 5.0, 6.0, g);
  for (double v : t.to_vector<double>()) ASSERT_TRUE(v >= 5.0 && v < 6.0);
  normal_(t, 0.0, 0.01, g);
  for (double v : t.to_vector<double>()) ASSERT_LT(std::abs(v), 0.1);
}

// randint over ranges wider than 2^63 (hi - lo once overflowed int64_t: undefined behaviour, which UBSan
// in the asan preset reports if it comes back): the values stay in [lo, hi) and use the whole range.
TEST(Random, RandintOverTheWholeI64Range) {
  Generator g(5);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> v = randint(lo, hi, {4000}, g).to_vector<int64_t>();
  int64_t negative = 0;
  for (int64_t x : v) {
    EXPECT_LT(x, hi);
    negative += x < 0;
  }
  EXPECT_GT(negative, 1800);  // about half below zero (4000 draws: 2000 +- 32)
  EXPECT_LT(negative, 2200);
  const std::vector<int64_t> top = randint(hi - 3, hi, {200}, g).to_vector<int64_t>();
  for (int64_t x : top) EXPECT_TRUE(x >= hi - 3 && x < hi) << x;
}

TEST(Random, SameSeedSameTensorsAtOneAndTwoThreads) {
  std::vector<Tensor> r1, r2;
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    Generator g(2024);
    auto& r = threads == 1 ? r1 : r2;
    r.push_back(rand({70001}, g));
    r.push_back(randn({300, 301}, g, DType::f64));
    r.push_back(randint(0, 1000, {50001}, g));
    r.push_back(uniform({40000}, -1.0, 1.0, g, DType::bf16));
    r.push_back(dropout(ones({50000}), 0.5, true, g));
  }
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(bitwise_equal(r1[i], r2[i])) << i;
  // Different seeds differ; the generator state is (seed, offset) and can be restored.
  Generator a(1), b(2);
  EXPECT_FALSE(bitwise_equal(randn({16}, a), randn({16}, b)));
  Generator c(5);
  randn({10}, c);
  uint64_t seed = c.seed(), off = c.offset();
  Tensor next = randn({10}, c);
  c.set_state(seed, off);
  EXPECT_TRUE(bitwise_equal(randn({10}, c), next));
  c.manual_seed(5);
  EXPECT_EQ(c.offset(), 0u);
  manual_seed(9);
  Tensor d1 = rand({4});
  manual_seed(9);
  EXPECT_TRUE(bitwise_equal(rand({4}), d1));
}

TEST(Factory, Errors) {
  expect_error([] { empty({2, -1}); }, {"empty: sizes must be non-negative, got shape (2, -1)"});
  // A finite value past the dtype's range was written as inf (as masked_fill refuses it); inf itself is a
  // fill of its own.
  expect_error([] { full({2}, 1e10, DType::f16); }, {"fill_: value 1e+10 overflows f16 (it would be inf)"});
  expect_error([] { zeros({2}, DType::bf16).fill_(1e39); }, {"fill_: value 1e+39 overflows bf16"});
  EXPECT_EQ(full({2}, INFINITY, DType::f16).to_vector<double>(), std::vector<double>(2, INFINITY));
  EXPECT_EQ(full({1}, 65504.0, DType::f16).to_vector<double>(), std::vector<double>{65504.0});
  expect_error([] { zeros({-3}); }, {"empty: sizes must be non-negative"});
  expect_error(
      [] {
        empty({int64_t(1) << 32, int64_t(1) << 32});
      },
      {"empty: shape (4294967296, 4294967296) has too many elements (the byte size overflows 64 bits)"});
#if !defined(NG_ASAN)  // ASan aborts on huge allocations instead of returning null
  expect_error([] { empty({int64_t(1) << 52}); },
               {"Storage: out of memory allocating 18014398509481984 bytes"});
#endif
  expect_error([] { arange(0.0, 1.0, 0.0); }, {"arange: expected a non-zero step, got 0 (start 0, end 1)"});
  expect_error([] { arange(0.0, INFINITY); },
               {"arange: expected finite start, end and step, got start 0, end inf, step 1"});
  expect_error(
      [] {
        from_vector(std::vector<double>{1, 2, 3}, {2, 2});
      },
      {"from_vector: got 3 values for shape (2, 2), which holds 4"});
  expect_error(
      [] {
        tensor({{1.0, 2.0}, {3.0}});
      },
      {"tensor: rows must all have the same length: expected 2, got 1"});
  Generator g(1);
  expect_error([&] { uniform({2}, 1.0, 0.0, g); }, {"uniform: expected lo <= hi, got 1 and 0"});
  expect_error([&] { uniform({2}, 0.0, 1.0, g, DType::i64); },
               {"uniform: expected a floating dtype, got i64"});
  expect_error([&] { rand({2}, g, DType::i64); }, {"uniform: expected a floating dtype, got i64"});
  expect_error([&] { randn({2}, g, DType::i64); }, {"randn: expected a floating dtype, got i64"});
  expect_error([&] { randint(3, 3, {2}, g); }, {"randint: expected lo < hi, got 3 and 3"});
  // NaN, inf and negative spreads were accepted and filled the tensor with NaN or inf, or flipped the sign
  for (double bad : {double(NAN), double(INFINITY), -1.0}) {
    SCOPED_TRACE(bad);
    expect_error([&] { randn({2}, g, DType::f32, 0.0, bad); },
                 {"randn: expected a finite mean and a finite std >= 0"});
    Tensor w = zeros({2});
    expect_error([&] { normal_(w, 0.0, bad, g); }, {"randn: expected a finite mean and a finite std >= 0"});
  }
  expect_error([&] { randn({2}, g, DType::f32, double(INFINITY), 1.0); }, {"randn: expected a finite mean"});
  expect_error([&] { uniform({2}, 0.0, double(INFINITY), g); }, {"uniform: expected finite bounds"});
  expect_error([&] { uniform({2}, -1e308, 1e308, g); }, {"uniform: expected finite bounds"});
  expect_error([&] { uniform({2}, double(NAN), 1.0, g); }, {"uniform: expected lo <= hi, got nan and 1"});
  expect_error([] { zeros({2}).item(); }, {"item: expected a tensor with one element, got shape (2)"});
  expect_error([] { Tensor().shape(); },
               {"Tensor: use of an undefined tensor (a default-constructed ng::Tensor, with no shape and no "
                "data: expected one made by a factory such as zeros() or from_vector(), or by an op)"});
  expect_error([] { sum(Tensor()); }, {"sum: x is an undefined tensor (a default-constructed"});
  // Without the CUDA backend the core refuses; with it and no device, the backend says why (this machine:
  // "cuda: cudaGetDeviceCount(&count) failed: CUDA driver version is insufficient ..."). With a device the
  // copy succeeds, and the test says so rather than passing on nothing.
  try {
    Tensor moved = zeros({2}).to(Device::cuda(0));
#ifdef NORMGRAD_HAVE_CUDA
    EXPECT_EQ(moved.device(), Device::cuda(0));  // a GPU is present
#else
    ADD_FAILURE() << "to(cuda) succeeded in a build without the CUDA backend";
#endif
  } catch (const Error& e) {
    std::string msg = e.what();
#ifdef NORMGRAD_HAVE_CUDA
    // no driver (the runtime's error, cuda/runtime.cpp), or a driver and no device
    const bool runtime_error = msg.rfind("cuda: ", 0) == 0 && msg.find(" failed: ") != std::string::npos;
    EXPECT_TRUE(runtime_error || msg.find("device cuda:0 does not exist: 0") != std::string::npos) << msg;
#else
    EXPECT_NE(msg.find("to: cannot move a tensor from cpu to cuda:0"), std::string::npos) << msg;
#endif
  }
}

TEST(Storage, AlignmentSmallAndBigBlocks) {
  // Every block is 64-byte aligned (SIMD loads); big blocks (tensor/huge_blocks.h) start at a 2 MiB
  // boundary, so that they can sit on transparent huge pages, plus a colour below 4 KiB.
  for (size_t nbytes : {size_t(1), size_t(100), size_t(1) << 20, kHugeBlockMin - 64}) {
    Storage s(nbytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % 64, 0u) << nbytes;
  }
  for (size_t nbytes : {kHugeBlockMin, (size_t(40) << 20) + 3}) {
    Storage s(nbytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % 64, 0u) << nbytes;
    // within the first 4 KiB after a 2 MiB boundary: the block's start, moved by its colour
    if (huge_blocks_enabled()) {
      EXPECT_LT(reinterpret_cast<uintptr_t>(s.data()) % kHugePageBytes, 4096u) << nbytes;
    }
  }
  // A tensor on such a block works like any other (its last bytes included).
  const int64_t n = (int64_t(40) << 20) / 4 + 5;
  Tensor t = full({n}, 1.5);
  Tensor u = t * 2.0;
  const float* pu = u.data<float>();
  EXPECT_EQ(pu[0], 3.0f);
  EXPECT_EQ(pu[n - 1], 3.0f);
  EXPECT_NEAR(sum(u).item(), 3.0 * double(n), 3.0 * double(n) * 1e-6);  // (an f32 sum)
}

#if defined(__linux__)
namespace {
// The VmFlags of the mapping that holds address a, from /proc/self/smaps ("" when none holds it).
std::string vm_flags_at(uintptr_t a) {
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}
}  // namespace

TEST(Storage, AdviseHugePagesMarksTheWholeHugePagesInside) {
  // The GEMM's packed op(B) is no Storage block; advise_huge_pages asks for 2 MiB pages for it. Where the
  // OS has transparent huge pages, the whole 2 MiB pages inside the range are marked (smaps: "hg"), and
  // the partial page before them is not.
  if (!huge_blocks_enabled()) GTEST_SKIP() << "a no-op in this build (AddressSanitizer)";
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  const size_t len = size_t(12) << 20;
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(base, MAP_FAILED);
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  const uintptr_t p = b + 4096;  // not on a 2 MiB boundary
  const uintptr_t first = (p + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  EXPECT_EQ(vm_flags_at(first).find(" hg"), std::string::npos) << "marked before the call";
  advise_huge_pages(reinterpret_cast<void*>(p), len - 8192);
  EXPECT_NE(vm_flags_at(first).find(" hg"), std::string::npos) << vm_flags_at(first);
  EXPECT_NE(vm_flags_at(first + kHugePageBytes * 3 + 5).find(" hg"), std::string::npos);
  EXPECT_EQ(vm_flags_at(p).find(" hg"), std::string::npos) << "the partial page before the first boundary";
  advise_huge_pages(reinterpret_cast<void*>(p), 100);  // no whole page inside: nothing to do
  munmap(base, len);
}
#endif

TEST(Storage, BigBlocksAreKeptAndReusedUpToTheCap) {
  if (!huge_blocks_enabled()) GTEST_SKIP() << "big blocks come from malloc in this build (AddressSanitizer)";
  release_huge_blocks();
  const size_t big = size_t(16) << 20;
  auto base = [](void* p) { return reinterpret_cast<uintptr_t>(p) / kHugePageBytes; };  // the 2 MiB block
  uintptr_t first = 0;
  {
    Storage a(big);
    first = base(a.data());
    EXPECT_EQ(huge_block_stats().cached_bytes, 0u);
  }
  EXPECT_EQ(huge_block_stats().cached_bytes, big);  // kept, not unmapped
  const size_t reuses = huge_block_stats().reuses;
  {
    Storage other(big + (size_t(4) << 20));  // another rounded size: a new mapping
    EXPECT_NE(base(other.data()), first);
    Storage again(big - 100);  // rounds to the same 16 MiB: the kept block (with the next colour)
    EXPECT_EQ(base(again.data()), first);
    EXPECT_NE(again.data(), other.data());
    EXPECT_EQ(huge_block_stats().reuses, reuses + 1);
  }
  // Freeing more than the cap keeps at most the cap, the newest blocks.
  {
    std::vector<std::unique_ptr<Storage>> blocks;
    for (size_t i = 0; i < kHugeCacheCap / big + 4; ++i) blocks.push_back(std::make_unique<Storage>(big));
  }
  EXPECT_LE(huge_block_stats().cached_bytes, kHugeCacheCap);
  EXPECT_GE(huge_block_stats().cached_bytes, kHugeCacheCap - big);
  release_huge_blocks();
  EXPECT_EQ(huge_block_stats().cached_bytes, 0u);
}

// Two threads drawing from one generator (as two std::threads calling randn() draw from
// default_generator()) each reserve blocks of their own: none is lost and none is handed out twice. With a
// plain read and add in Generator::advance, two threads lost reservations (and so drew equal numbers).
TEST(Random, ThreadsDrawingFromOneGeneratorGetBlocksOfTheirOwn) {
  Generator one(5);
  (void)randn({4}, one);
  const uint64_t blocks = one.offset();  // the blocks one randn({4}) reserves
  Generator gen(5);
  constexpr int kDraws = 100000;
  auto draw = [&] {
    for (int i = 0; i < kDraws; ++i) (void)randn({4}, gen);
  };
  std::thread t1(draw), t2(draw);
  t1.join();
  t2.join();
  EXPECT_EQ(gen.offset(), 2 * kDraws * blocks);
  // A copy takes the state as it is; the copy and the original then draw the same numbers.
  Generator copy = gen;
  EXPECT_EQ(randn({8}, copy).to_vector<double>(), randn({8}, gen).to_vector<double>());
}
