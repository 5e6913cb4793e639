// The relative-layout CUDA kernels: grid-stride loops, one thread per output element, each
// doing the index arithmetic of relative_layout_kernels.h (checked on the CPU by
// test_relative_scores.cpp). Neighbouring threads take neighbouring elements along the output's
// last axis (j for the layout, the slot c for its gradient), so the query side's loads and every
// store coalesce; the key side reads along a diagonal of s (or a column of the gradient), which
// the L2 cache serves (a [L, W] block is 1 MiB in bf16 at L = 512). Sums run in float (double
// for fp64). Plain CUDA, no LibTorch headers: relative_layout.cpp does the tensor work.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "model/attention/relative_layout_kernels.h"

namespace rpe::rlk {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t total) {
  const int64_t b = (total + kThreads - 1) / kThreads;
  return static_cast<int>(b < (int64_t{1} << 30) ? (b > 0 ? b : 1) : (int64_t{1} << 30));
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t index_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

// Element type T, summed in Acc.
template <class T> struct Io {
  using Acc = float;
  __device__ static float load(const T* p) { return static_cast<float>(*p); }
  __device__ static T store(float v) { return static_cast<T>(v); }
};
template <> struct Io<double> {
  using Acc = double;
  __device__ static double load(const double* p) { return *p; }
  __device__ static double store(double v) { return v; }
};
template <> struct Io<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Io<__half> {
  using Acc = float;
  __device__ static float load(const __half* p) { return __half2float(*p); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};

template <class T>
__global__ void layout_kernel(Dims n, const T* s, T* out) {
  const int64_t total = n.B * n.H * n.L * n.L;
  for (int64_t x = first_index(); x < total; x += index_stride())
    out[x] = s[source(n, x / (n.L * n.L), x / n.L % n.L, x % n.L)];  // a copy: exact in every dtype
}

template <class T>
__global__ void layout_grad_kernel(Dims n, const T* g, T* ds) {
  const int64_t total = n.B * n.H * n.L * n.W;
  for (int64_t x = first_index(); x < total; x += index_stride()) {
    const int64_t bh = x / (n.L * n.W), r = x / n.W % n.L, c = x % n.W;
    const Run run = summed(n, r, c);
    typename Io<T>::Acc acc = 0;
    for (int64_t t = run.lo; t <= run.hi; ++t) acc += Io<T>::load(g + grad_offset(n, bh, r, t));
    ds[n.block(bh) + r * n.W + c] = Io<T>::store(acc);
  }
}

std::string launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

template <class T>
std::string layout(const Dims& n, const void* s, void* out, cudaStream_t stream) {
  layout_kernel<T><<<blocks_for(n.B * n.H * n.L * n.L), kThreads, 0, stream>>>(n, static_cast<const T*>(s),
                                                                                  static_cast<T*>(out));
  return launched();
}

template <class T>
std::string layout_grad(const Dims& n, const void* g, void* ds, cudaStream_t stream) {
  layout_grad_kernel<T><<<blocks_for(n.B * n.H * n.L * n.W), kThreads, 0, stream>>>(n, static_cast<const T*>(g),
                                                                                       static_cast<T*>(ds));
  return launched();
}

}  // namespace

std::string cuda_layout(const Dims& n, Dtype dt, const void* s, void* out, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case Dtype::f64: return layout<double>(n, s, out, st);
    case Dtype::f32: return layout<float>(n, s, out, st);
    case Dtype::bf16: return layout<__nv_bfloat16>(n, s, out, st);
    case Dtype::f16: return layout<__half>(n, s, out, st);
  }
  return "unknown dtype";
}

std::string cuda_layout_grad(const Dims& n, Dtype dt, const void* g, void* ds, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case Dtype::f64: return layout_grad<double>(n, g, ds, st);
    case Dtype::f32: return layout_grad<float>(n, g, ds, st);
    case Dtype::bf16: return layout_grad<__nv_bfloat16>(n, g, ds, st);
    case Dtype::f16: return layout_grad<__half>(n, g, ds, st);
  }
  return "unknown dtype";
}

}  // namespace rpe::rlk
