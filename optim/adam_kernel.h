// The Adam / AdamW update of one parameter tensor, as one pass over memory.
//
// optim/adam.cpp holds the math and the bookkeeping (steps, bias corrections, buffers); this file holds
// the element loop it runs, in two versions:
//   adam_update_reference: the plain scalar loop, the readable one and the tests' reference;
//   adam_update:           the same arithmetic with Highway vectors + OpenMP (optim/adam_kernel.cpp).
// Both do, per element k, the same operations in the same order (the compiler may fuse a multiply-add
// of the vector version into one FMA, so the two agree to a few ulps, not always bitwise):
//
//   g = grad[k] (+ wd p[k] when coupled weight decay)
//   p[k] = p[k] * decay                                        (AdamW; decay = 1 when not decoupled)
//   m[k] = m[k] + (1 - beta1) (g - m[k])
//   v[k] = beta2 v[k] + (1 - beta2) g^2
//   p[k] = p[k] - step_size m[k] / (sqrt(v[k]) / sqrt(bias_correction2) + eps)
//
// Why one pass matters: the update reads p, g, m, v and writes p, m, v: 7 numbers per parameter. Written
// as separate tensor ops (m.lerp_, v.mul_.addcmul_, ...) each pass re-reads its inputs from memory, which
// for a memory-bound update costs several times the compulsory traffic.
#pragma once

#include <cstdint>

namespace ng::optim {

// The per-step scalars (computed in double by Adam::step, used in the parameter's dtype).
struct AdamScalars {
  double one_minus_beta1 = 0.1, beta2 = 0.999, one_minus_beta2 = 0.001;
  double eps = 1e-8, step_size = 1e-3, bias_correction2_sqrt = 1.0;
  double weight_decay = 0.0;  // coupled (Adam): g += wd * p
  double decay = 1.0;         // decoupled (AdamW): p *= decay before the update
  bool coupled_wd = false, decoupled = false;
};

template <typename T>
void adam_update_reference(T* p, const T* g, T* m, T* v, int64_t n, const AdamScalars& s);
template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamScalars& s);

}  // namespace ng::optim
