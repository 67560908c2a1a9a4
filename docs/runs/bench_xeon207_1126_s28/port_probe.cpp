// Throwaway probe kept as the record of docs/performance.md, stop 28: what a few AVX-512 instructions cost
// on the two vector ports of the Intel Xeon VM (lscpu model 207). Each loop runs 12 independent FMAs (6
// cycles on two FMA ports) plus the instructions named, 1e7 times; the extra cycles per iteration over the
// bare loop are the ports' extra work. Cycles assume 2.8 GHz (the bench's peak loop: 178.9 GFLOP/s per
// thread = 2 FMAs x 16 lanes x 2 flops x 2.8 GHz). Not part of the build:
//   g++ -O2 -mavx512f -mavx512bw -o /tmp/port_probe docs/runs/bench_xeon207_1126_s28/port_probe.cpp
//   /tmp/port_probe
// (The store line reads 6.7 or 22 cycles from run to run: its address aliases the stack; ignore it.)
#include <chrono>
#include <cstdio>
#include <algorithm>
#define FMA12                                                                                           \
  "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n vfmadd231ps %%zmm30, " \
  "%%zmm31, %%zmm2\n vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n "    \
  "vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n vfmadd231ps %%zmm30, " \
  "%%zmm31, %%zmm7\n vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n "    \
  "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n"
#define LOOP(name, body)                                                                                   \
  {                                                                                                        \
    double best = 1e9;                                                                                     \
    for (int r = 0; r < 7; ++r) {                                                                          \
      auto t0 = std::chrono::steady_clock::now();                                                          \
      asm volatile("mov $10000000, %%rcx\n kxnord %%k0, %%k0, %%k1\n 1:\n" body "dec %%rcx\n jnz 1b\n" ::  \
                       : "rcx", "rax", "rdx", "memory", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5",    \
                         "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14",      \
                         "zmm15", "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "k1", "k2", "k3"); \
      auto t1 = std::chrono::steady_clock::now();                                                          \
      best = std::min(best, std::chrono::duration<double>(t1 - t0).count());                               \
    }                                                                                                      \
    printf("%-40s %.2f cycles/iter\n", name, best * 2.8e9 / 1e7);                                          \
  }
int main() {
  LOOP("12 FMA", FMA12)
  LOOP("12 FMA + 2 vpermw maskz", FMA12
       "vpermw %%zmm20, %%zmm21, %%zmm12%{%%k1%}%{z%}\n vpermw %%zmm20, %%zmm21, %%zmm13%{%%k1%}%{z%}\n")
  LOOP("12 FMA + 2 vpermw", FMA12 "vpermw %%zmm20, %%zmm21, %%zmm12\n vpermw %%zmm20, %%zmm21, %%zmm13\n")
  LOOP("12 FMA + 2 (vpmovzxwd + vpslld)", FMA12
       "vpmovzxwd %%ymm20, %%zmm12\n vpslld $16, %%zmm12, %%zmm12\n vpmovzxwd %%ymm21, %%zmm13\n vpslld $16, "
       "%%zmm13, %%zmm13\n")
  LOOP("12 FMA + vpslld + vpandd", FMA12 "vpslld $16, %%zmm20, %%zmm12\n vpandd %%zmm20, %%zmm21, %%zmm13\n")
  LOOP("12 FMA + vcvtne2ps2bf16", FMA12 "vcvtne2ps2bf16 %%zmm20, %%zmm21, %%zmm12\n")
  LOOP("12 FMA + 2 fpclass + 2 kmovw + or", FMA12
       "vfpclassps $0x20, %%zmm20, %%k2\n vfpclassps $0x20, %%zmm21, %%k3\n kmovw %%k2, %%eax\n kmovw %%k3, "
       "%%edx\n or %%edx, %%eax\n")
  LOOP("12 FMA + 2 fpclass + korw + kortestw", FMA12
       "vfpclassps $0x20, %%zmm20, %%k2\n vfpclassps $0x20, %%zmm21, %%k3\n korw %%k2, %%k3, %%k2\n kortestw "
       "%%k2, %%k2\n")
  LOOP("12 FMA + vptestnmw + kortestd", FMA12 "vptestnmw %%zmm20, %%zmm21, %%k2\n kortestd %%k2, %%k2\n")
  LOOP("12 FMA + 2 vpmovzxwd(mem)", FMA12 "vpmovzxwd (%%rsp), %%zmm12\n vpmovzxwd 32(%%rsp), %%zmm13\n")
  LOOP("12 FMA + 2 vpermw (mem) maskz", FMA12
       "vpermw (%%rsp), %%zmm21, %%zmm12%{%%k1%}%{z%}\n vpermw (%%rsp), %%zmm21, %%zmm13%{%%k1%}%{z%}\n")
  LOOP("12 FMA + vmovdqu64 store", FMA12 "vmovdqu64 %%zmm20, -128(%%rsp)\n")
}
