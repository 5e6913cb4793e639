// m3's CUDA kernels: grid-stride loops, one thread per output element, each computing the
// element function of m3_kernels.h (checked on the CPU by test_m3.cpp) in registers. Threads
// next to each other take neighbouring elements along the output's last axis, so a warp's
// loads of q, k and the table coalesce or broadcast; the d- or L-long sums run in T (float
// for every dtype but fp64). Plain CUDA, no LibTorch headers: m3_cuda_tensors.cpp does the tensor work.
#include <cuda_runtime.h>

#include "model/attention/m3_kernels.h"

namespace rpe::m3k {
namespace {

using grid::blocks_for, grid::first_index, grid::index_stride, grid::kThreads;

template <class T>
__global__ void scores_kernel(Dims n, const T* q, const T* kt, const T* wxt, T* e) {
  const int64_t total = n.BH * n.L * n.L;
  for (int64_t x = first_index(); x < total; x += index_stride())
    e[x] = score(n, q, kt, wxt, x / (n.L * n.L), x / n.L % n.L, x % n.L);
}

template <class T>
__global__ void grad_qk_kernel(Dims n, const T* g, const T* q, const T* k, const T* wx, T* gq, T* gk) {
  const int64_t total = n.BH * n.L * n.d;
  for (int64_t x = first_index(); x < total; x += index_stride()) {
    const int64_t bh = x / (n.L * n.d), row = x / n.d % n.L, t = x % n.d;
    gq[x] = grad_q(n, g, k, wx, bh, row, t);
    gk[x] = grad_k(n, g, q, wx, bh, row, t);
  }
}

template <class T>
__global__ void grad_wx_kernel(Dims n, const T* g, const T* q, const T* k, T* gwx) {
  const int64_t total = n.BH * n.W() * n.d;
  for (int64_t x = first_index(); x < total; x += index_stride())
    gwx[x] = grad_wx(n, g, q, k, x / (n.W() * n.d), x / n.d % n.W(), x % n.d);
}

std::string launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace

template <class T>
std::string cuda_scores(const Dims& n, const T* q, const T* kt, const T* wxt, T* e, void* stream) {
  scores_kernel<T><<<blocks_for(n.BH * n.L * n.L), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, q, kt, wxt, e);
  return launched();
}

template <class T>
std::string cuda_grads(const Dims& n, const T* g, const T* q, const T* k, const T* wx, T* gq, T* gk, T* gwx,
                       void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  grad_qk_kernel<T><<<blocks_for(n.BH * n.L * n.d), kThreads, 0, s>>>(n, g, q, k, wx, gq, gk);
  auto err = launched();
  if (!err.empty()) return err;
  grad_wx_kernel<T><<<blocks_for(n.BH * n.W() * n.d), kThreads, 0, s>>>(n, g, q, k, gwx);
  return launched();
}

template std::string cuda_scores<float>(const Dims&, const float*, const float*, const float*, float*, void*);
template std::string cuda_scores<double>(const Dims&, const double*, const double*, const double*, double*, void*);
template std::string cuda_grads<float>(const Dims&, const float*, const float*, const float*, const float*, float*,
                                       float*, float*, void*);
template std::string cuda_grads<double>(const Dims&, const double*, const double*, const double*, const double*,
                                        double*, double*, double*, void*);

}  // namespace rpe::m3k
