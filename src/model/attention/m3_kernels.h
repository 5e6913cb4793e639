// m3's trilinear score and its three gradients, one output element at a time, written once for
// both compilers: nvcc builds the CUDA kernels from these (m3_cuda.cu: one thread per element),
// and the CPU tests call the very same functions in plain loops against the equation, so the
// index arithmetic the GPU runs is checked on every CI machine (test_m3.cpp).
//
// e_ij = sum_t q_it k_jt w_{clip(j-i,k), t}, with the table expanded to one row per offset
// s = j - i + L - 1 in [0, 2L-1) (clipping applied: m3.cpp's offset_rows), per (batch, head) bh
// and table head hw = (bh mod H) mod Hw (Hw = H, or 1 when the table is shared across heads).
// Layouts (contiguous, row-major), W = 2L - 1:
//   q, k [BH, L, d]   kt [BH, d, L]   g (dL/de) [BH, L, L]
//   wx [Hw, W, d] (the expanded table)   wxt [Hw, d, W] (the same, transposed)
// Each function reads what neighbouring threads of one warp read next to it (their index runs
// along the last axis: j for the score, t for the gradients), so a warp's loads coalesce.
#pragma once
#include <cstdint>
#include <string>

#include "util/host_device.h"

namespace rpe::m3k {

struct Dims {
  int64_t BH, H, Hw, L, d;
  RPE_HD int64_t W() const { return 2 * L - 1; }
  RPE_HD int64_t table_head(int64_t bh) const { return (bh % H) % Hw; }
};

// e[bh, i, j] (threads along j).
template <class T>
RPE_HD T score(const Dims& n, const T* q, const T* kt, const T* wxt, int64_t bh, int64_t i, int64_t j) {
  const T* qi = q + (bh * n.L + i) * n.d;
  const T* kj = kt + bh * n.d * n.L + j;                                   // kt[bh, t, j] at kj[t * L]
  const T* ws = wxt + n.table_head(bh) * n.d * n.W() + (j - i + n.L - 1);  // wxt[hw, t, s] at ws[t * W]
  T acc = 0;
  for (int64_t t = 0; t < n.d; ++t) acc += qi[t] * kj[t * n.L] * ws[t * n.W()];
  return acc;
}

// dL/dq[bh, i, t] = sum_j g_ij k_jt wx[j-i+L-1, t] (threads along t).
template <class T>
RPE_HD T grad_q(const Dims& n, const T* g, const T* k, const T* wx, int64_t bh, int64_t i, int64_t t) {
  const T* gi = g + (bh * n.L + i) * n.L;
  const T* kt = k + bh * n.L * n.d + t;
  const T* wt = wx + n.table_head(bh) * n.W() * n.d + (n.L - 1 - i) * n.d + t;  // row j - i + L - 1 at wt[j * d]
  T acc = 0;
  for (int64_t j = 0; j < n.L; ++j) acc += gi[j] * kt[j * n.d] * wt[j * n.d];
  return acc;
}

// dL/dk[bh, j, t] = sum_i g_ij q_it wx[j-i+L-1, t] (threads along t).
template <class T>
RPE_HD T grad_k(const Dims& n, const T* g, const T* q, const T* wx, int64_t bh, int64_t j, int64_t t) {
  const T* gj = g + bh * n.L * n.L + j;  // g[bh, i, j] at gj[i * L]
  const T* qt = q + bh * n.L * n.d + t;
  const T* wt = wx + n.table_head(bh) * n.W() * n.d + (j + n.L - 1) * n.d + t;  // row j - i + L - 1 at wt[-i * d]
  T acc = 0;
  for (int64_t i = 0; i < n.L; ++i) acc += gj[i * n.L] * qt[i * n.d] * wt[-i * n.d];
  return acc;
}

// dL/dwx[s, t] from one (batch, head): sum over the pairs (i, i + r), r = s - (L-1), of
// g_{i,i+r} q_it k_{i+r,t} (threads along t). Summed over batches (and heads, for a shared
// table) by the caller.
template <class T>
RPE_HD T grad_wx(const Dims& n, const T* g, const T* q, const T* k, int64_t bh, int64_t s, int64_t t) {
  const int64_t r = s - (n.L - 1), lo = r < 0 ? -r : 0, hi = r > 0 ? n.L - r : n.L;
  const T* gb = g + bh * n.L * n.L;
  const T* qt = q + bh * n.L * n.d + t;
  const T* kt = k + bh * n.L * n.d + t;
  T acc = 0;
  for (int64_t i = lo; i < hi; ++i) acc += gb[i * n.L + i + r] * qt[i * n.d] * kt[(i + r) * n.d];
  return acc;
}

// The CUDA kernels (m3_cuda.cu): one thread per output element, each the function above, on
// float or double device buffers in these layouts, launched on `stream` (a cudaStream_t).
// Each returns "" or the CUDA error of its launch (read, so cleared).
// e [BH, L, L] from q, kt, wxt:
template <class T>
std::string cuda_scores(const Dims& n, const T* q, const T* kt, const T* wxt, T* e, void* stream);
// gq, gk [BH, L, d] and gwx [BH, W, d] (per batch and head; the caller sums) from g:
template <class T>
std::string cuda_grads(const Dims& n, const T* g, const T* q, const T* k, const T* wx, T* gq, T* gk, T* gwx,
                       void* stream);

}  // namespace rpe::m3k
