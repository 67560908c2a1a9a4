// The fast GEMM: packed panels and a register-blocked Highway micro-kernel (the Goto / BLIS design).
// The contract is in gemm.h; gemm_naive.cpp is the three-loop reference that tests/test_gemm.cpp checks
// this file against, for every transpose form, odd size and leading dimension.
//
// Why not the three loops? C = A B does 2 M N K flops on only M K + K N + M N numbers, so a good kernel
// is limited by the FMA units, not by memory. The three loops reload A and B from memory for every
// FMA. The fix is to keep a small tile of C in registers and to feed it from data laid out so that the
// loads are contiguous and hit L1/L2:
//
//   for each k-superblock (several k-blocks of kc <= 1024; kc depends on K and the form, see Determinism):
//     pack op(B) for it into B-panels of NR columns, k-major: Bp[k * NR + c]   (shared by the threads)
//     for each macro-tile of C (a few A-panels of MR rows x a range of B-panels), in parallel:
//       for each k-block:
//         pack the tile's rows of op(A) for this block into A-panels            (this thread's own;
//           where op(B) is small and op(A) = A, full panels are read in place: see direct_a)
//         for each sweep of B-panels that fits in half of L2:
//           for each A-panel of the tile:                      <- streams from L1/L2
//             for each B-panel of the sweep:                   <- the sweep stays in L2
//               micro-kernel: an MR x NR tile of C lives in registers. For k in the block:
//                 load row k of the B-panel (NV vectors of L lanes, NR = NV L; row k + 16 is prefetched),
//                 for each of the MR rows: broadcast A[r, k] and FMA it into that row's NV accumulators
//                   c[r][v] += A[r, k] * B[k, v L .. v L + L)
//                 (where op(B) does not stay in the L2: also ask for a slice of the NEXT sweep, see
//                 "The far prefetch" in GemmT)
//               then add the register tile to C (store it, for the first block when !accumulate).
//
// The threads meet only twice per k-superblock (after packing op(B), and before it is overwritten); for
// the trainer's shapes that is twice per GEMM. gemm_batched (attention's per-head products) runs small
// GEMMs whole, one per thread, instead of splitting each one. One exception to the plan above: the
// weight-gradient form (op(A) transposed) with two k-blocks is split by k on two threads, each thread one
// k-block over all of C (see "Split by k" in GemmT).
//
// kc: up to 1024. With kc = 1024 an A-panel (12 x 1024 x 4 B = 48 KiB) no longer fits the 32 KiB L1, but
// the C tile is read and written once per k-block, and on this machine (Cascade Lake, busy L3) the wider
// blocks measured 15-40% faster for K = 1024 than kc = 256 (docs/performance.md).
//
// Transposes: the packing routines read op(A) and op(B) in whichever layout they are stored (NN, NT, TN,
// TT), so no transposed copy of a whole matrix is ever made. Packing must be cheap: it touches M K + K N
// numbers against M N K FMAs, so a packing cost of c cycles per number adds about 32 c (1/M + 1/N) to the
// run time at 32 f32 FMAs per cycle (16% for M = 1024, N = 256, c = 1). So every panel is filled by
// contiguous vector copies, and the one layout that needs a real transpose is done with 4 x 4 SIMD
// transposes:
//   A-panel, op(A) = A   (rows of A contiguous in k):     row-major copy    Ap[r * ars + k]
//   A-panel, op(A) = A^T (A stored K x M, rows = k):      k-major copy      Ap[k * MR + r]
//   B-panel, op(B) = B   (rows of B contiguous in n):     k-major copy      Bp[k * NR + c]
//   B-panel, op(B) = B^T (B stored N x K, rows = n):      4 x 4 transposes  Bp[k * NR + c]
// The micro-kernel is compiled for both A-panel layouts (a template flag); the B-panel is always k-major
// because the kernel loads it as vectors along n.
//
// Edges: panels are padded with zeros up to MR rows and NR columns, so the micro-kernel always runs the
// full tile, with the same vector code. Only the final store differs: it writes the valid rows, and on
// each row the last partial vector through a small stack buffer (tail-inl.h). No scalar loop over a row.
//
// Determinism: each C element is a sum over k in a fixed order: in k order inside a block (one register
// accumulator), then block after block in order. kc depends only on K and on whether op(A) is transposed
// (that form takes two k-blocks from K = 512 on), never on the thread count; no k-block is split across
// threads, and each C element's block sums are added to it in block order (split by k included: thread
// 1's block sum waits in a partial and is added after block 0's). So how tiles are handed to threads
// cannot change a single bit of the result: 1 and 2 threads agree bitwise. (Across machines the result
// can differ in the last bits: SSE4 has no FMA, so MulAdd rounds twice there.)
//
// Sizes on AVX-512 (32 registers): MR = 12, NV = 2 -> 24 accumulators + 2 B vectors + 1 broadcast.
// For f32 that is a 12 x 32 tile: per k, 24 FMAs (12 cycles on two FMA ports) against 2 vector loads
// and 12 broadcasts. On 16-register targets (AVX2, SSE4): MR = 6, NV = 2 -> 12 accumulators.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/kernels/gemm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include <atomic>

#include "tensor/sanitizer.h"  // NG_ASAN
#if defined(NG_ASAN)
#include <sanitizer/asan_interface.h>

#include <cstdio>
#include <cstdlib>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>  // __get_cpuid, for PrefetchForWrite
#endif

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "tensor/huge_blocks.h"
#include "tensor/kernels/tail-inl.h"
#include "tensor/parallel.h"

#if defined(NORMGRAD_OPENMP)
#include <omp.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace ng::gemm_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace simd = ng::simd::HWY_NAMESPACE;  // LoadTail, StoreTail

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int64_t kMR = 12;  // rows of the register tile
constexpr int64_t kNV = 2;   // vectors per row of the register tile
#else
constexpr int64_t kMR = 6;
constexpr int64_t kNV = 2;
#endif
// Rows of the B-panel the micro-kernel prefetches ahead of the row it loads: 16 rows (2 KiB of f32 on
// AVX-512, ~190 cycles of FMAs ahead). The hardware prefetchers alone left the kernel waiting on L2:
// on the Intel Xeon VM (stop 23, 2 threads, 4 alternating runs of `bench/gemm_shape`, best) 1024^3
// NN 8.52 -> 7.67 ms, NT 8.53 -> 7.44, TN 8.64 -> 7.85; 8 or 32 rows ahead were slower than 16.
constexpr int64_t kBAhead = 16;
constexpr int64_t kKcMax = 1024;  // widest k-block: measured, 256 -> 1024 cuts the C traffic (+15-40%)
constexpr int64_t kRowPad = 4;    // row-major A-panel rows are kc + 4 apart, not a multiple of
                                  // 1 KiB, so the 12 rows do not share L1 cache sets
constexpr int64_t kFarArs = kKcMax + kRowPad;  // ... and kKcMax + 4 apart in the far-prefetch kernel
constexpr int64_t kTileBBytes = 512 << 10;     // B-panels swept per A-panel: half of the 1 MiB L2
constexpr int64_t kPackedBBytes = 8 << 20;     // packed op(B) shared by the threads: at most this many bytes
constexpr int64_t kSplitKMin = 512;  // the weight-gradient form: two k-blocks from this K on (GemmT)

// ---- packing ----------------------------------------------------------------------------------------

// Copies n contiguous numbers with vectors (the last n % L through a stack buffer, tail-inl.h), and
// zero-fills dst[n, n_total).
//
// NOTE: not MaskedLoad / BlendedStore for the tail. In Highway 1.0.3 on SSE4, MaskedLoad is a full aligned
// load, which faulted on an unaligned row (found 2026-11-24, when Gemm.EverySimdTargetMatchesNaive first
// really ran its SSE4 leg); on AVX2, BlendedStore is vmaskmovps, which AMD Zen cores run microcoded.
template <typename T>
HWY_INLINE void CopyRow(const T* HWY_RESTRICT src, int64_t n, T* HWY_RESTRICT dst, int64_t n_total) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  if (i < n) simd::StoreTail(simd::LoadTail(d, src + i, size_t(n - i)), d, dst + i, size_t(n - i));
  for (int64_t j = n; j < n_total; ++j) dst[j] = T(0);
}

// The A-panels of one macro-tile: panels [0, n_panels) hold rows i0 + p MR + r of op(A), columns
// [k0, k0 + kc); panel p starts at Ap + p * a_panel_size. Rows past M are zeros.
//   !trans_a: op(A)[i, k] = A[i * lda + k]: each row is a contiguous copy, Ap[r * ars + k].
//    trans_a: op(A)[i, k] = A[k * lda + i]: row k of A is copied across the panels, Ap[k * MR + r].
template <typename T>
void PackATile(bool trans_a, const T* HWY_RESTRICT A, int64_t lda, int64_t M, int64_t i0, int64_t n_panels,
               int64_t k0, int64_t kc, int64_t ars, int64_t a_panel_size, T* HWY_RESTRICT Ap) {
  if (!trans_a) {
    for (int64_t p = 0; p < n_panels; ++p) {
      for (int64_t r = 0; r < kMR; ++r) {
        const int64_t i = i0 + p * kMR + r;
        T* dst = Ap + p * a_panel_size + r * ars;
        if (i >= M) {
          CopyRow<T>(nullptr, 0, dst, kc);
          continue;
        }
        // The rows of A are lda apart, often in different pages, where the hardware prefetcher restarts:
        // ask for the next row while copying this one.
        if (i + 1 < M)
          for (int64_t k = 0; k < kc; k += 64 / int64_t(sizeof(T))) hwy::Prefetch(A + (i + 1) * lda + k0 + k);
        CopyRow(A + i * lda + k0, kc, dst, kc);
      }
    }
  } else {
    // MR numbers per k and panel, fewer than a vector on AVX2 and AVX-512 (6 of 8, 12 of 16). Copy whole
    // vectors anyway: reading past the panel's MR rows stays inside row k of A while i + n_vec L <= M, and
    // the extra lanes land in the slot of k + 1 (rewritten by the next iteration) or, for the last k, in
    // the panel's kRowPad slack (MR kRowPad >= n_vec L - MR numbers, checked below). Only panels at the
    // bottom edge of A take the exact, zero-padding CopyRow.
    const hn::ScalableTag<T> d;
    const int64_t L = int64_t(hn::Lanes(d));
    const int64_t n_vec = (kMR + L - 1) / L;
    static_assert(kMR * kRowPad >= 16, "the A-panel slack must hold a vector's overrun");
    const int64_t rows = std::min(n_panels * kMR, M - i0);
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = A + (k0 + k) * lda + i0;
      for (int64_t p = 0; p < n_panels; ++p) {
        T* dst = Ap + p * a_panel_size + k * kMR;
        if (i0 + p * kMR + n_vec * L <= M) {
          for (int64_t v = 0; v < n_vec; ++v) hn::StoreU(hn::LoadU(d, src + p * kMR + v * L), d, dst + v * L);
        } else {
          CopyRow(src + p * kMR, std::clamp<int64_t>(rows - p * kMR, 0, kMR), dst, kMR);
        }
      }
    }
  }
}

// 4 x 4 transpose of f32 (or 2 x 2 of f64) in 128-bit vectors: reads `lanes` rows of `lanes` numbers
// (src + j * lds, j < lanes) and writes them transposed: dst[k * ldd + j] = src[j * lds + k].
template <typename T>
HWY_INLINE void Transpose128(const T* HWY_RESTRICT src, int64_t lds, T* HWY_RESTRICT dst, int64_t ldd) {
#if HWY_TARGET == HWY_SCALAR  // no 128-bit vectors: the same transpose, one number at a time
  constexpr int64_t Q = 16 / int64_t(sizeof(T));
  for (int64_t j = 0; j < Q; ++j)
    for (int64_t k = 0; k < Q; ++k) dst[k * ldd + j] = src[j * lds + k];
#else
  const hn::Full128<T> d;
  if constexpr (sizeof(T) == 4) {
    const auto r0 = hn::LoadU(d, src), r1 = hn::LoadU(d, src + lds);
    const auto r2 = hn::LoadU(d, src + 2 * lds), r3 = hn::LoadU(d, src + 3 * lds);
    // t0 = [r0[0] r1[0] r0[1] r1[1]], t1 = [r2[0] r3[0] r2[1] r3[1]], t2, t3 likewise for lanes 2, 3.
    const hn::Repartition<double, decltype(d)> d2;  // pairs of f32 moved as one 64-bit lane
    const auto t0 = hn::BitCast(d2, hn::InterleaveLower(d, r0, r1));
    const auto t1 = hn::BitCast(d2, hn::InterleaveLower(d, r2, r3));
    const auto t2 = hn::BitCast(d2, hn::InterleaveUpper(d, r0, r1));
    const auto t3 = hn::BitCast(d2, hn::InterleaveUpper(d, r2, r3));
    hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d2, t0, t1)), d, dst);            // column 0
    hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d2, t0, t1)), d, dst + ldd);      // column 1
    hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d2, t2, t3)), d, dst + 2 * ldd);  // column 2
    hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d2, t2, t3)), d, dst + 3 * ldd);  // column 3
  } else {
    const auto r0 = hn::LoadU(d, src), r1 = hn::LoadU(d, src + lds);
    hn::StoreU(hn::InterleaveLower(d, r0, r1), d, dst);
    hn::StoreU(hn::InterleaveUpper(d, r0, r1), d, dst + ldd);
  }
#endif
}

// ---- packing op(B) = B, shared by the threads, and the other core's copy of it ----
//
// The packed op(B) is one buffer that every thread reads, and each thread packs its share of it (rows of
// B) before the tiles start. So the lines a thread writes now were read by the other thread in the
// previous GEMM, and sit in its cache: each store must first take the line away from there. On a CPU whose
// two cores share an L3 that is cheap. This machine is a VM whose two vCPUs the host moves around: part of
// the time they sit on different core complexes (CCDs) of the AMD EPYC, each with its own L3, and a
// core-to-core round trip takes ~330 ns instead of ~55 ns (normgrad_bench's round_trip baseline,
// docs/performance.md, stop 19). Then these stores wait on the other CCD one by one: perf put the
// training step's extra 8-10 ms in that state mostly on this store.
//
// So the packing announces its stores ahead: PREFETCHW asks for the line in the "about to be written"
// state two bands (2 kPackRows rows) ahead of the copy, and the other CCD's copy is being dropped while
// the copy works on earlier lines. Measured with the static schedule of the tiles (below), exp2's training
// step on 2 threads, medians of steps classified by the round trip around each: slow state 70.3 -> 67.4 ms
// (the fast state 60.5 -> 61.0 ms, which the even split of the tiles then more than won back).
//
// PrefetchForWrite(p, count): PREFETCHW for the lines of p[0 .. count), where the CPU has the instruction
// (CPUID 0x80000001, ECX bit 8: AMD since K8, Intel since Broadwell); elsewhere nothing.
#if HWY_ARCH_X86 && defined(__GNUC__)
inline const bool kCpuHasPrefetchW = [] {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 8)) != 0;
}();
#endif
template <typename T>
HWY_INLINE void PrefetchForWrite(T* p, int64_t count) {
#if HWY_ARCH_X86 && defined(__GNUC__)
  if (!kCpuHasPrefetchW) return;
  for (int64_t i = 0; i < count; i += 64 / int64_t(sizeof(T)))
    asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(p + i)));
#else
  (void)p;
  (void)count;
#endif
}

// Rows [k0, k1) of op(B) (stored rows of B, !trans_b), columns [j0, j0 + NR), copied into one B-panel:
//   Bp[k * NR + c] = B[(k0 + k) * ldb + j0 + c]. Columns past N are 0. `ahead`: where to PREFETCHW the same
// number of rows, or null.
// GemmT packs op(B) in bands of kPackRows rows: the pieces of a band (one per panel), then the next band.
// Each piece's stores are contiguous (kPackRows x NR numbers), and the band's rows stay in L1 while its
// panels are filled. A thread's share is a range of bands: rows of B that, in the trainers, it wrote
// itself in the previous op (the row-parallel kernels give it the same rows).
constexpr int64_t kPackRows = 16;
template <typename T>
void PackBPiece(const T* HWY_RESTRICT B, int64_t ldb, int64_t N, int64_t k0, int64_t k1, int64_t j0,
                int64_t NR, T* HWY_RESTRICT Bp, T* ahead) {
  const int64_t cols = std::min(NR, N - j0);
  for (int64_t k = k0; k < k1; ++k) {
    if (ahead) PrefetchForWrite(ahead + (k - k0) * NR, NR);
    CopyRow(B + k * ldb + j0, cols, Bp + (k - k0) * NR, NR);
  }
}

// One B-panel of op(B) = B^T (B stored N x K): rows [k0, k0 + kc) of op(B), columns [j0, j0 + NR), as
// Bp[k * NR + c] = B[(j0 + c) * ldb + k0 + k], transposed in 4 x 4 (f64: 2 x 2) blocks. Columns past N are 0.
template <typename T>
void PackBPanelTransposed(const T* HWY_RESTRICT B, int64_t ldb, int64_t N, int64_t j0, int64_t k0, int64_t kc,
                          int64_t NR, T* HWY_RESTRICT Bp) {
  const int64_t cols = std::min(NR, N - j0);
  constexpr int64_t Q = 16 / int64_t(sizeof(T));  // the transpose block: 4 for f32, 2 for f64
  const T* src = B + j0 * ldb + k0;               // src[c * ldb + k] = op(B)[k0 + k, j0 + c]
  const int64_t full_c = cols / Q * Q, full_k = kc / Q * Q;
  for (int64_t c = 0; c < full_c; c += Q) {
    for (int64_t k = 0; k < full_k; k += Q) Transpose128(src + c * ldb + k, ldb, Bp + k * NR + c, NR);
    for (int64_t k = full_k; k < kc; ++k)  // the last kc % Q rows of the panel
      for (int64_t j = c; j < c + Q; ++j) Bp[k * NR + j] = src[j * ldb + k];
  }
  for (int64_t c = full_c; c < cols; ++c)  // the last cols % Q columns (only at the right edge of C)
    for (int64_t k = 0; k < kc; ++k) Bp[k * NR + c] = src[c * ldb + k];
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t c = cols; c < NR; ++c) Bp[k * NR + c] = T(0);
}

// ---- the micro-kernel -------------------------------------------------------------------------------

// Sanitizer builds (the asan preset, CI): AddressSanitizer checks every load and store, and in the
// micro-kernel that is 14 checks for every 24 FMAs: a 1-step exp2 run took 170 s there, 96% of it in this
// function. So in those builds the micro-kernel is not instrumented, and instead checks, once per call,
// that every byte it will read or write (its A-panel, its B-panel and its rows of C) is addressable:
// the same out-of-bounds and use-after-free detection at panel granularity, for about nothing. The packing
// routines that fill the panels stay fully instrumented.
#if defined(NG_ASAN)
#define NG_GEMM_KERNEL_ATTR __attribute__((no_sanitize("address", "undefined")))
// Instrumented on purpose: a region that reaches poisoned memory is reported like any ASan error.
inline void CheckRegion(const void* p, int64_t bytes, const char* what) {
  if (bytes <= 0) return;
  void* bad = __asan_region_is_poisoned(const_cast<void*>(p), size_t(bytes));
  if (bad == nullptr) return;
  std::fprintf(
      stderr,
      "ERROR: AddressSanitizer (gemm micro-kernel): %s [%p, +%lld bytes) reaches poisoned memory at %p\n",
      what, p, static_cast<long long>(bytes), bad);
  __asan_describe_address(bad);
  std::abort();
}
#else
#define NG_GEMM_KERNEL_ATTR
#endif

// C[0..rows, 0..cols) (+)= A-panel (MR x kc) * B-panel (kc x NR), with rows <= MR and cols <= NR.
// kARowMajor picks the A-panel layout: Ap[r * ars + k] (true) or Ap[k * MR + r] (false).
// kFar: also ask for far[k * far_step] into the L2 at each k (the next sweep's B-panels, see "The far
// prefetch" in GemmT); the row-major layout then has rows kFarArs apart, whatever ars says.
//
//   scalar meaning:  for r, c:  acc = 0;  for k: acc += A(r, k) * Bp[k * NR + c];
//                               C[r * ldc + c] = add_to_c ? C[r * ldc + c] + acc : acc;
template <bool kARowMajor, bool kFar, typename T>
NG_GEMM_KERNEL_ATTR HWY_NOINLINE void MicroKernel(int64_t kc, const T* HWY_RESTRICT Ap, int64_t ars,
                                                  const T* HWY_RESTRICT Bp, T* HWY_RESTRICT C, int64_t ldc,
                                                  int64_t rows, int64_t cols, bool add_to_c, const T* far,
                                                  int64_t far_step) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t NR = kNV * L;
  // A(r, k) = Ap[r * a_row_step + k * a_k_step]. With kFar the row step is a constant: the 12 broadcasts
  // then address A as one pointer plus 12 displacements, where a run-time step takes a register per row
  // (12 of the 16) and the far pointer no longer fits (GCC 12 parked two pointers in vector registers
  // and reloaded one from the stack, every k).
  const int64_t a_row_step = kARowMajor ? (kFar ? kFarArs : ars) : 1;
  const int64_t a_k_step = kARowMajor ? 1 : kMR;
#if defined(NG_ASAN)
  const int64_t E = int64_t(sizeof(T));
  CheckRegion(Ap, ((kMR - 1) * a_row_step + (kc - 1) * a_k_step + 1) * E, "A-panel");
  CheckRegion(Bp, kc * NR * E, "B-panel");
  for (int64_t r = 0; r < rows; ++r) CheckRegion(C + r * ldc, cols * E, "row of C");
#endif

  // The register tile: kMR x kNV vectors. The constant-bound loops below are unrolled by the compiler,
  // so every acc[r][v] is one register.
  V acc[kMR][kNV];
  HWY_UNROLL(kMR)
  for (int64_t r = 0; r < kMR; ++r) {
    HWY_UNROLL(kNV)
    for (int64_t v = 0; v < kNV; ++v) acc[r][v] = hn::Zero(d);
  }
  // The C tile is read only after the k loop: start fetching it now so the loop hides the latency.
  for (int64_t r = 0; r < rows; ++r) {
    hwy::Prefetch(C + r * ldc);
    hwy::Prefetch(C + r * ldc + NR - 1);
  }

  for (int64_t k = 0; k < kc; ++k) {
    const T* HWY_RESTRICT b_row = Bp + k * NR;        // op(B)[k, 0..NR)
    const T* HWY_RESTRICT a_col = Ap + k * a_k_step;  // op(A)[0..MR, k], a_row_step apart
    // Ask for row k + kBAhead of the B-panel now (NR numbers: two lines for f32 and f64 on AVX-512, one
    // on AVX2), so that it is in L1 when its turn comes. Past the panel's end this reaches into the next
    // B-panel, which the next call reads (a prefetch never faults, even past the buffer).
    hwy::Prefetch(b_row + kBAhead * NR);
    if constexpr (kFar) __builtin_prefetch(far + k * far_step, 0, 2);  // (prefetcht1: into the L2)
    if constexpr (kNV * hn::MaxLanes(d) * sizeof(T) > 64)
      hwy::Prefetch(b_row + kBAhead * NR + 64 / sizeof(T));
    V b[kNV];
    HWY_UNROLL(kNV)
    for (int64_t v = 0; v < kNV; ++v) b[v] = hn::Load(d, b_row + v * L);
    HWY_UNROLL(kMR)
    for (int64_t r = 0; r < kMR; ++r) {
      const V a = hn::Set(d, a_col[r * a_row_step]);  // broadcast A[r, k]
      HWY_UNROLL(kNV)
      for (int64_t v = 0; v < kNV; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
    }
  }

  // Write the tile back: full vectors where a row has L columns left, one masked vector at the row's end.
  if (rows == kMR && cols == NR) {
    HWY_UNROLL(kMR)
    for (int64_t r = 0; r < kMR; ++r) {
      T* c_row = C + r * ldc;
      HWY_UNROLL(kNV)
      for (int64_t v = 0; v < kNV; ++v) {
        const V out = add_to_c ? hn::Add(hn::LoadU(d, c_row + v * L), acc[r][v]) : acc[r][v];
        hn::StoreU(out, d, c_row + v * L);
      }
    }
    return;
  }
  HWY_UNROLL(kMR)
  for (int64_t r = 0; r < kMR; ++r) {
    if (r >= rows) break;
    T* c_row = C + r * ldc;
    HWY_UNROLL(kNV)
    for (int64_t v = 0; v < kNV; ++v) {
      const int64_t c0 = v * L;
      if (c0 >= cols) break;
      if (c0 + L <= cols) {
        const V out = add_to_c ? hn::Add(hn::LoadU(d, c_row + c0), acc[r][v]) : acc[r][v];
        hn::StoreU(out, d, c_row + c0);
      } else {  // the row's last cols - c0 < L numbers, exactly (see CopyRow's note)
        const size_t count = size_t(cols - c0);
        const V out = add_to_c ? hn::Add(simd::LoadTail(d, c_row + c0, count), acc[r][v]) : acc[r][v];
        simd::StoreTail(out, d, c_row + c0, count);
      }
    }
  }
}

// ---- the driver -------------------------------------------------------------------------------------

// dst[0, n) += src[0, n)
template <typename T>
HWY_INLINE void AddRow(const T* HWY_RESTRICT src, int64_t n, T* HWY_RESTRICT dst) {
  const hn::ScalableTag<T> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Add(hn::LoadU(d, dst + i), hn::LoadU(d, src + i)), d, dst + i);
  if (i < n) {
    const size_t c = size_t(n - i);
    simd::StoreTail(hn::Add(simd::LoadTail(d, dst + i, c), simd::LoadTail(d, src + i, c)), d, dst + i, c);
  }
}

// Packing buffers, kept per calling thread and grown on demand, so that repeated GEMMs (a training loop)
// neither allocate nor page-fault fresh memory every call.
// The packed op(B) asks for 2 MiB pages where it spans them (huge_blocks.h): the threads stream all of it
// once per row of tiles, and at 4 KiB pages the 8 MiB of a 2048^3 k-block are 2048 pages, the whole reach
// of a core's second-level TLB. Measured (gemm_shape NN, 2 threads, 4 alternating rounds of 10 reps, best
// GFLOP/s, Xeon model 167): 1024^3 350-367 -> 359-368, 2048^3 349-364 -> 358-369.
template <typename T>
struct Workspace {
  hwy::AlignedFreeUniquePtr<T[]> a, b;
  size_t a_size = 0, b_size = 0;
  void reserve(size_t na, size_t nb) {
    if (na > a_size) {
      a = hwy::AllocateAligned<T>(na);
      a_size = na;
    }
    if (nb > b_size) {
      b = hwy::AllocateAligned<T>(nb);
      b_size = nb;
      advise_huge_pages(b.get(), nb * sizeof(T));
    }
  }
};

// ---- handing out the tiles: each thread its own rows first, then the others' last ones ----
//
// Thread t owns a contiguous range of tiles, the same rows of C in every GEMM of a shape (so the next
// row-parallel op finds them in its own cache, and on this host's two-CCD state its packed rows of op(B)
// are its own). It takes them from the front. A thread whose range is done takes the other ranges' tiles
// from the back, so a core slowed by another process does not hold up the GEMM. With a busy loop on one of
// the two CPUs (bench_ab, 2026-11-25, best of 2 rounds), the 1024^3 products took 15.3-18.8 ms with fixed
// ranges alone, 13.1-14.0 ms with OpenMP's dynamic schedule (which gives up the affinity) and 12.4-13.3 ms
// with these. Undisturbed, they match fixed ranges; in the host's two-CCD state the training step is
// about 1 ms slower than with fixed ranges alone (67.2 against 66.2 ms, medians): the price of the
// insurance.
// A range is one 64-bit word, (front << 32) | back, updated by compare-and-swap: a tile is claimed once.
struct alignas(64) TileRange {
  std::atomic<uint64_t> word{0};
  void reset(int64_t front, int64_t back) {
    word.store(uint64_t(front) << 32 | uint64_t(back), std::memory_order_relaxed);
  }
  // The next tile from the front (the owner) or the back (another thread); -1 when the range is empty.
  int64_t claim(bool from_front) {
    uint64_t w = word.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t front = int64_t(w >> 32), back = int64_t(w & 0xffffffffu);
      if (front >= back) return -1;
      const uint64_t next = from_front ? uint64_t(front + 1) << 32 | uint64_t(back)
                                       : uint64_t(front) << 32 | uint64_t(back - 1);
      if (word.compare_exchange_weak(w, next, std::memory_order_relaxed))
        return from_front ? front : back - 1;
    }
  }
};

// max_threads: the most threads this GEMM may use (1 inside gemm_batched's parallel loop).
template <typename T>
void GemmT(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
           int64_t ldb, T* C, int64_t ldc, bool accumulate, int max_threads) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: C = 0, or C unchanged when accumulating
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return;
  }
  const hn::ScalableTag<T> d;
  const int64_t NR = kNV * int64_t(hn::Lanes(d));

  // k-blocks of equal width kc <= kKcMax. Depends on the shape and form alone: part of the summation order.
  // The weight-gradient form (op(A) transposed) takes two k-blocks from K = kSplitKMin on, so that two
  // threads can each take one (split by k, below).
  int64_t k_blocks = (K + kKcMax - 1) / kKcMax;
  if (trans_a && k_blocks == 1 && K >= kSplitKMin) k_blocks = 2;
  const int64_t kc_max = (K + k_blocks - 1) / k_blocks;

  const int64_t a_panels = (M + kMR - 1) / kMR;
  const int64_t b_panels = (N + NR - 1) / NR;
  const int64_t b_panel_size = kc_max * NR;
  const int64_t b_block_size = b_panels * b_panel_size;  // all of op(B) for one k-block
  // The far prefetch. Where op(B)'s k-block is bigger than the L2 budget (the cubes: 4 MiB at 1024^3), each
  // sweep of B-panels comes from L3 (or the other core) the first time, i.e. for the tile's first A-panel,
  // and is reused from the L2 by the others. That first A-panel's calls then pull 128 B per 12 cycles from
  // L3, more than one core gets: timed per call with rdtsc (a throwaway build of gemm_shape, 2048^3 NN, 2
  // threads, Xeon model 167), they took 15600-16600 TSC cycles against 11500-12700 for the other calls,
  // 12.9% of the calls; at 1024^3 (tile_a 5: 21% of the calls) 15100-16400 against 12000-12200. A longer
  // in-panel prefetch distance (48 or 96 rows instead of 16) did not help them, and asking for the next
  // sweep in bursts between calls made the whole GEMM 4-8% slower. So the micro-kernel asks for the next
  // sweep one line at a time, spread over the current sweep's calls (one prefetcht1 per k): the first
  // calls fell to 12500-13700 cycles (2048^3) and 12500-13000 (1024^3), the others unchanged.
  const bool far = b_block_size * int64_t(sizeof(T)) > 2 * kTileBBytes;
  const int64_t ars = far && !trans_a ? kFarArs : kc_max + kRowPad;  // row stride of a row-major A-panel
  const int64_t a_panel_size = kMR * ars;
  // A in place: where op(A) = A and op(B) stays in the L2, the micro-kernel reads a full panel's 12 rows
  // straight from A (the row step lda instead of ars) and only a last, partial panel is packed (its rows
  // past M must read as zeros). The rows of A are contiguous in k, like a packed row-major panel; what the
  // copy bought was a row step that is no multiple of 4 KiB, so the 12 rows do not crowd the same L1 sets,
  // and that is the one case kept packed. Measured (gemm_shape --batch 64 -m 64 -n 64 -k 64, attention's
  // per-head products, 2 threads, 3 alternating rounds, best GFLOP/s, Xeon model 167): NN 234-236 ->
  // 278-280, NT 227-231 -> 263-266; the trainer's NN and NT shapes level (bench_ab, 5 rounds). The far
  // kernel (big op(B)) keeps packing: its rows must be kFarArs apart.
  const bool direct_a = !trans_a && !far && (lda * int64_t(sizeof(T))) % 4096 != 0;

  // op(B) is packed for several k-blocks at once (a "k-superblock", at most kPackedBBytes), then the
  // threads run through it without meeting at a barrier in between.
  const int64_t blocks_per_super =
      std::clamp<int64_t>(kPackedBBytes / (b_block_size * int64_t(sizeof(T))), 1, k_blocks);

  // Macro-tiles: tile_a A-panels (rows of C) x a range of B-panels (columns of C), ~8 per thread. The
  // tiling decides which thread adds to which C element, never the order of any sum, so it may depend on
  // the thread count.
  int threads = std::min(num_threads(), max_threads);
  if (double(M) * double(N) * double(K) < 64.0 * 64.0 * 64.0) threads = 1;  // not worth waking threads
  // Rows of tiles: at most tile_a A-panels each, as many per thread (the static schedule below hands each
  // thread a contiguous range of them), the panels spread evenly over them (sizes differ by at most one).
  // Tiles of exactly tile_a left the last one short: M = 1024 is 86 A-panels, 18 tiles of 5, so 45 panels
  // for one thread and 41 for the other.
  // At least 4 A-panels a tile where every thread has 4: a tile's B-panels are swept through the L2 once
  // per tile row and then serve its tile_a A-panels, so one A-panel per tile (what ~8 tiles per thread
  // gave for M < 768 at 2 threads) streams the tile's whole op(B) from L3 again for every 12 rows of C.
  // Measured on an Intel Xeon VM (stop 22, a driver calling gemm, now bench/gemm_shape, best of 30):
  // M = 256, N = K = 1024 NN 194 -> 264 GFLOP/s on 2 threads (1 thread, where the old rule gave 2: 144 ->
  // 150), TN (the weight gradient, split by k) 261 -> 303; the two builds again in alternation, later on a
  // slower host (`gemm_shape --form NN -m 256 -n 1024 -k 1024`, then `--form TN`): NN 149-154 -> 204-219,
  // TN 196-208 -> 226-232; exp2's step, whose TN 256 x 1024 x 1024 product ran at 41% of peak
  // (bench/step_states, 8 alternating runs of 30 steps): median 46.45 -> 46.05 ms, best 43.45 ms either
  // way. M >= 768 (>= 384 on 1 thread) is unchanged. (Tiles only decide which thread computes which part
  // of C, never a sum's order.)
  const int64_t min_tile_a = std::clamp<int64_t>(a_panels / threads, 1, 4);  // 4, or what a thread has
  const int64_t tile_a = std::clamp<int64_t>(a_panels / (8 * threads), min_tile_a, 8);
  int64_t tiles_m = (a_panels + tile_a - 1) / tile_a;
  if (tiles_m % threads != 0) tiles_m = std::min(a_panels, tiles_m + threads - tiles_m % threads);
  const int64_t tiles_n = std::clamp<int64_t>((8 * threads + tiles_m - 1) / tiles_m, 1, b_panels);
  const int64_t tile_b = (b_panels + tiles_n - 1) / tiles_n;
  const int64_t tiles = tiles_m * tiles_n;
  // B-panels swept for each A-panel: as many as fit in half of L2.
  const int64_t sweep_b = std::clamp<int64_t>(kTileBBytes / (b_panel_size * int64_t(sizeof(T))), 1, tile_b);
  if (threads > tiles) threads = int(std::max<int64_t>(1, tiles));

  // The tile ranges, one per thread (see TileRange); none for one thread, which takes the tiles in order.
  std::vector<TileRange> ranges(threads > 1 ? static_cast<size_t>(threads) : 0);
  static thread_local Workspace<T> ws;  // the packed op(B), shared by this call's threads
  ws.reserve(0, size_t(blocks_per_super * b_block_size));
  T* Bp = ws.b.get();

  // The micro-kernel for this A-panel layout (row-major unless op(A) is a transposed view), with or
  // without the far prefetch.
  const auto kernel = trans_a ? (far ? &MicroKernel<false, true, T> : &MicroKernel<false, false, T>)
                              : (far ? &MicroKernel<true, true, T> : &MicroKernel<true, false, T>);

  // Split by k (see the run below): two threads, two k-blocks, the weight-gradient form, and a C small
  // enough for its partial copy (at most kPackedBBytes; a bigger C has tiles enough to share by rows).
  const bool split_k =
      trans_a && k_blocks == 2 && threads == 2 && M * N * int64_t(sizeof(T)) <= kPackedBBytes;
  static thread_local Workspace<T> part_ws;  // split by k: thread 1's partial C (M x N)
  if (split_k) part_ws.reserve(0, size_t(M * N));
  T* const P = part_ws.b.get();
  std::atomic<const T*> packed_b[2] = {nullptr, nullptr};  // split by k: each thread's op(B), once packed

  // The tiles of one range of k-blocks [kb_lo, kb_hi) whose op(B) is packed at Bb: tile t's rows and
  // columns of C, added into D (row stride ldd) when add_first (the first block) or kb > kb_lo.
  const auto tile = [&](T* Ap, int64_t t, int64_t kb_lo, int64_t kb_hi, const T* Bb, T* D, int64_t ldd,
                        bool add_first) {
    const int64_t tm = t / tiles_n;  // row of tiles: A-panels [pa0, pa1), at most tile_a of them
    const int64_t pa0 = tm * a_panels / tiles_m, pa1 = (tm + 1) * a_panels / tiles_m;
    const int64_t pb0 = (t % tiles_n) * tile_b, pb1 = std::min(b_panels, pb0 + tile_b);
    for (int64_t kb = kb_lo; kb < kb_hi; ++kb) {
      const int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
      const bool last_partial = pa1 * kMR > M;
      if (!direct_a)
        PackATile(trans_a, A, lda, M, pa0 * kMR, pa1 - pa0, k0, kc, ars, a_panel_size, Ap);
      else if (last_partial)
        PackATile(trans_a, A, lda, M, (pa1 - 1) * kMR, 1, k0, kc, ars, a_panel_size,
                  Ap + (pa1 - 1 - pa0) * a_panel_size);
      const T* Bk = Bb + (kb - kb_lo) * b_block_size;
      for (int64_t sb = pb0; sb < pb1; sb += sweep_b) {
        const int64_t sb1 = std::min(pb1, sb + sweep_b);
        // The far prefetch: the next sweep (or, after the last, this tile's first, which the thread's
        // next tile row usually sweeps again), spread over this sweep's calls, far_step numbers per k.
        const int64_t nsb = sb1 < pb1 ? sb1 : pb0, n_next = std::min(pb1, nsb + sweep_b) - nsb;
        const int64_t calls = (pa1 - pa0) * (sb1 - sb);
        const int64_t far_step = n_next * b_panel_size / (calls * kc);  // (rounded down: inside the sweep)
        const T* far_at = Bk + nsb * b_panel_size;
        for (int64_t pa = pa0; pa < pa1; ++pa) {
          const int64_t i0 = pa * kMR;
          for (int64_t pb = sb; pb < sb1; ++pb, far_at += kc * far_step) {
            const int64_t j0 = pb * NR;
            const bool in_place = direct_a && !(last_partial && pa == pa1 - 1);
            kernel(kc, in_place ? A + i0 * lda + k0 : Ap + (pa - pa0) * a_panel_size, in_place ? lda : ars,
                   Bk + pb * b_panel_size, D + i0 * ldd + j0, ldd, std::min(kMR, M - i0),
                   std::min(NR, N - j0), add_first || kb > kb_lo, far_at, far_step);
          }
        }
      }
    }
  };
  // Pack items [q0, q1) of op(B) for the k-blocks [kb_lo, kb_hi) into Bb (k-block kb's panels at
  // Bb + (kb - kb_lo) * b_block_size). !trans_b: an item is one band of kPackRows rows of one panel, the
  // same number of bands in each k-block (the last band of a block may be short); trans_b: one panel of one
  // k-block.
  const int64_t bands_per_block = (kc_max + kPackRows - 1) / kPackRows;
  const auto pack_items = [&](int64_t kb_lo, int64_t kb_hi) {
    return (kb_hi - kb_lo) * b_panels * (trans_b ? 1 : bands_per_block);
  };
  const auto pack_b = [&](int64_t kb_lo, int64_t kb_hi, int64_t q0, int64_t q1, T* Bb) {
    if (!trans_b) {
      const int64_t items = pack_items(kb_lo, kb_hi);
      for (int64_t q = q0; q < q1; ++q) {  // band-major: a thread's bands are its rows of B
        const int64_t kb = kb_lo + q / b_panels / bands_per_block, pb = q % b_panels;
        const int64_t k0 = kb * kc_max + (q / b_panels % bands_per_block) * kPackRows;
        const int64_t k1 = std::min({k0 + kPackRows, (kb + 1) * kc_max, K});
        T* dst = Bb + (kb - kb_lo) * b_block_size + pb * b_panel_size + (k0 - kb * kc_max) * NR;
        PackBPiece(B, ldb, N, k0, k1, pb * NR, NR, dst,
                   q + 2 * b_panels < items ? dst + 2 * kPackRows * NR : nullptr);
      }
    } else {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t kb = kb_lo + q / b_panels, pb = q % b_panels;
        const int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
        PackBPanelTransposed(B, ldb, N, pb * NR, k0, kc, NR, Bb + q * b_panel_size);
      }
    }
  };

  // The work of thread `me` of a team of `team`: its share of the packing and of the tiles, the team meeting
  // only where op(B) must be complete (after packing) or may be overwritten (before the next superblock).
  // A team of 1 is the whole GEMM with no OpenMP at all: see the call below.
  const auto run = [&](int me, int team) {
    // This thread's share of `count` items: a contiguous range, as schedule(static) gives.
    const auto share = [&](int64_t count) { return std::pair{count * me / team, count * (me + 1) / team}; };
    const auto barrier = [&] {
#if defined(NORMGRAD_OPENMP)
      if (team > 1) {
#pragma omp barrier
      }
#endif
    };
    static thread_local Workspace<T> tile_ws;  // this thread's A-panels (and, split by k, its op(B))
    tile_ws.reserve(size_t(tile_a * a_panel_size), split_k ? size_t(b_block_size) : 0);
    T* Ap = tile_ws.a.get();

    // Split by k. Thread me takes k-block me and all of C: thread 0 adds its block into C as one thread
    // would, thread 1 writes its block's sum into the partial P, each from an op(B) it packed itself;
    // then C += P, the rows of C shared. One thread computes C + (block 0's sum), then + (block 1's
    // sum): the same two additions, so the same bits.
    // Why: in the weight-gradient form dW = dY^T X, k is the token, and each thread wrote its own tokens'
    // rows of dY and X in the ops before (the row-parallel kernels, and the GEMM's rows of C). Split by
    // rows of C, each thread packs and reads the other's rows too, and on this host's two-CCD state
    // (docs/performance.md, stop 19) every such line crosses the fabric; split by k, only P does (M x N
    // numbers, against K x (M + N)). Measured on exp2's step, 2 threads (bench/step_states, two A/B runs
    // in alternation, medians): two CCDs 66.6 -> 64.0 and 67.7 -> 65.3 ms, one CCX level (58.1 -> 58.5,
    // 62.6 -> 62.7 ms); 1 thread level.
    // A thread done with its own k-block takes the other's last tiles (as TileRange does below), once the
    // other's op(B) is packed. With a busy loop on one CPU, 1024^3 (TN) took 14.6-15.0 ms so, 18.5-22.9 ms
    // without the stealing, and 15.4-16.8 ms shared by rows of C (scripts/bench_ab.py, 2 rounds, best to
    // median).
    if (split_k && team == 2) {
      T* Bown = tile_ws.b.get();
      ranges[size_t(me)].reset(0, tiles);
      pack_b(me, me + 1, 0, pack_items(me, me + 1), Bown);
      packed_b[me].store(Bown, std::memory_order_release);  // (after the reset: a thief sees both)
      const auto block_tile = [&](int block, const T* Bb, int64_t t) {
        if (block == 0)
          tile(Ap, t, 0, 1, Bb, C, ldc, accumulate);
        else
          tile(Ap, t, 1, 2, Bb, P, N, false);
      };
      for (int64_t t; (t = ranges[size_t(me)].claim(true)) >= 0;) block_tile(me, Bown, t);
      const int other = 1 - me;
      if (const T* Bo = packed_b[other].load(std::memory_order_acquire))
        for (int64_t t; (t = ranges[size_t(other)].claim(false)) >= 0;) block_tile(other, Bo, t);
      barrier();
      const auto [i0, i1] = share(M);
      for (int64_t i = i0; i < i1; ++i) AddRow(P + i * N, N, C + i * ldc);
      return;
    }

    for (int64_t kb0 = 0; kb0 < k_blocks; kb0 += blocks_per_super) {
      const int64_t kb1 = std::min(k_blocks, kb0 + blocks_per_super);

      // The tile ranges, one per requested thread; this thread resets those it owns (all of them when
      // OpenMP gave a smaller team). No one is claiming: the previous superblock ended at a barrier.
      if (team > 1)
        for (int r = me; r < threads; r += team)
          ranges[size_t(r)].reset(tiles * r / threads, tiles * (r + 1) / threads);

      // 1) Pack op(B) for the k-blocks [kb0, kb1), shared by all threads.
      {
        const auto [q0, q1] = share(pack_items(kb0, kb1));
        pack_b(kb0, kb1, q0, q1, Bp);
      }
      barrier();  // op(B) is packed before any tile reads it

      // 2) The macro-tiles. For each k-block: pack the tile's A-panels, then sweep them against the
      //    B-panels, sweep_b at a time (those stay in L2 while every A-panel of the tile passes).
      //    Each thread its own range of tiles from the front, then the other ranges from the back
      //    (TileRange). (OpenMP's dynamic schedule until stop 19. Fixed ranges instead, with the A-panels
      //    spread evenly over the rows of tiles, against it: the step fast 60.5 -> 59.9 ms, slow
      //    70.5 -> 66.1 ms, the matmul entries of normgrad_bench 3-5% faster, e.g. 1024^3 10.26 -> 9.96 ms.)
      const auto my_tile = [&](int64_t t) { tile(Ap, t, kb0, kb1, Bp, C, ldc, accumulate || kb0 > 0); };
      if (team == 1) {
        for (int64_t t = 0; t < tiles; ++t) my_tile(t);  // one thread: every tile in order, nothing to claim
      } else {
        for (int step = 0; step < threads; ++step) {
          const int r = (me + step) % threads;
          for (int64_t t; (t = ranges[size_t(r)].claim(r % team == me)) >= 0;) my_tile(t);
        }
      }
      if (kb1 < k_blocks) barrier();  // the next superblock's packing overwrites op(B)
    }
  };

  // One thread: no parallel region. gemm_batched runs attention's small products one per thread inside its
  // own parallel loop (max_threads = 1), and there even a region of one thread costs: libgomp sets up and
  // tears down a team for it, 0.7-0.9 us (a driver, 2026-11-25) for each of ~450 products per exp2 step.
  if (threads == 1) {
    run(0, 1);
    return;
  }
#if defined(NORMGRAD_OPENMP)
#pragma omp parallel num_threads(threads)
  run(omp_get_thread_num(), omp_get_num_threads());
#else
  run(0, 1);
#endif
}

// Work per GEMM below which gemm_batched runs whole GEMMs in parallel instead of splitting each one.
constexpr double kSmallGemmFmas = 256.0 * 256.0 * 256.0;

template <typename T>
void GemmBatchedT(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const T* A,
                  const int64_t* a_off, int64_t lda, const T* B, const int64_t* b_off, int64_t ldb, T* C,
                  int64_t c_stride, int64_t ldc, bool accumulate) {
  if (batch == 1 || double(M) * double(N) * double(K) >= kSmallGemmFmas) {
    for (int64_t b = 0; b < batch; ++b)
      GemmT(ta, tb, M, N, K, A + a_off[b], lda, B + b_off[b], ldb, C + b * c_stride, ldc, accumulate,
            1 << 30);
    return;
  }
  parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      GemmT(ta, tb, M, N, K, A + a_off[b], lda, B + b_off[b], ldb, C + b * c_stride, ldc, accumulate, 1);
  });
}

void GemmF32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  GemmT(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, 1 << 30);
}
void GemmF64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
             int64_t ldb, double* C, int64_t ldc, bool accumulate) {
  GemmT(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, 1 << 30);
}
void GemmBatchedF32(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                    const int64_t* a_off, int64_t lda, const float* B, const int64_t* b_off, int64_t ldb,
                    float* C, int64_t c_stride, int64_t ldc, bool accumulate) {
  GemmBatchedT(ta, tb, batch, M, N, K, A, a_off, lda, B, b_off, ldb, C, c_stride, ldc, accumulate);
}
void GemmBatchedF64(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
                    const int64_t* a_off, int64_t lda, const double* B, const int64_t* b_off, int64_t ldb,
                    double* C, int64_t c_stride, int64_t ldc, bool accumulate) {
  GemmBatchedT(ta, tb, batch, M, N, K, A, a_off, lda, B, b_off, ldb, C, c_stride, ldc, accumulate);
}

}  // namespace HWY_NAMESPACE
}  // namespace ng::gemm_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "tensor/kernels/gemm.h"
namespace ng {
namespace gemm_simd {
HWY_EXPORT(GemmF32);
HWY_EXPORT(GemmF64);
HWY_EXPORT(GemmBatchedF32);
HWY_EXPORT(GemmBatchedF64);
}  // namespace gemm_simd

// The calls below name the kernels from inside gemm_simd (a using-directive): in a one-target build
// (HWY_COMPILE_ONLY_STATIC, the sanitizer builds) HWY_DYNAMIC_DISPATCH(F) is HWY_NAMESPACE::F, and the
// kernels' HWY_NAMESPACE is gemm_simd's.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  using namespace gemm_simd;
  HWY_DYNAMIC_DISPATCH(GemmF32)(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double* C, int64_t ldc, bool accumulate) {
  using namespace gemm_simd;
  HWY_DYNAMIC_DISPATCH(GemmF64)(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}
void gemm_batched(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                  const int64_t* a_off, int64_t lda, const float* B, const int64_t* b_off, int64_t ldb,
                  float* C, int64_t c_stride, int64_t ldc, bool accumulate) {
  using namespace gemm_simd;
  HWY_DYNAMIC_DISPATCH(GemmBatchedF32)
  (ta, tb, batch, M, N, K, A, a_off, lda, B, b_off, ldb, C, c_stride, ldc, accumulate);
}
void gemm_batched(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
                  const int64_t* a_off, int64_t lda, const double* B, const int64_t* b_off, int64_t ldb,
                  double* C, int64_t c_stride, int64_t ldc, bool accumulate) {
  using namespace gemm_simd;
  HWY_DYNAMIC_DISPATCH(GemmBatchedF64)
  (ta, tb, batch, M, N, K, A, a_off, lda, B, b_off, ldb, C, c_stride, ldc, accumulate);
}
}  // namespace ng
#endif
