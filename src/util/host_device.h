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

// A grid of `blocks`, at least one and at most 2^30 (a grid-stride loop then takes the rest).
inline int capped_blocks(int64_t blocks) {
  return static_cast<int>(blocks < (int64_t{1} << 30) ? (blocks > 0 ? blocks : 1) : (int64_t{1} << 30));
}

inline int blocks_for(int64_t total) { return capped_blocks((total + kThreads - 1) / kThreads); }

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t index_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

}  // namespace rpe::grid
#endif
