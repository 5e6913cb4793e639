// What the project's CUDA kernels share (m3's scores, the relative layout): a marker for
// functions compiled for both the host and the device -- a kernels header written once, run by
// nvcc in the kernels and by the CPU tests in plain loops -- and, for nvcc, the block size and
// the grid-stride loop (m3's): one thread per output element at a time, as many blocks as the
// elements need (capped; each thread then takes several).
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define RPE_HD __host__ __device__ __forceinline__
#else
#define RPE_HD inline
#endif

#ifdef __CUDACC__
namespace rpe::grid {

constexpr int kThreads = 256;  // per block

inline int blocks_for(int64_t total) {
  const int64_t b = (total + kThreads - 1) / kThreads;
  return static_cast<int>(b < (int64_t{1} << 30) ? (b > 0 ? b : 1) : (int64_t{1} << 30));
}

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t index_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

}  // namespace rpe::grid
#endif
