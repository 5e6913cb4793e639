// The relative-layout CUDA kernels, doing the index arithmetic of relative_layout_kernels.h
// (checked on the CPU by test_relative_scores.cpp). Query side: a block per output row,
// neighbouring threads along the row (j for the layout, the slot c for its gradient), so loads
// and stores coalesce. Key side: its reads would follow a
// diagonal of s (a column of the gradient), so it goes through shared-memory tiles. Sums run
// in float (double for fp64). Plain CUDA, no LibTorch headers: relative_layout.cpp does the
// tensor work.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "model/attention/relative_layout_kernels.h"

namespace rpe::rlk {
namespace {

using grid::capped_blocks, grid::kThreads;

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

// The query side: one block per row of out (b, h, i), or of ds (b, h, r), at a time; threads
// along the row. The row's offsets (a 64-bit division and remainder) are worked out once per row:
// per element they cost more than the copy itself (the H100 profile of 2026-11-28: ~1 ms a layer
// for the forward at B 32, L 512, 1.8 ms for the gradient, where the bytes moved take ~0.2 ms).
template <class T>
__global__ void layout_kernel(Dims n, const T* s, T* out) {
  for (int64_t row = blockIdx.x; row < n.B * n.H * n.L; row += gridDim.x) {
    const int64_t bh = row / n.L, i = row % n.L;
    const T* src = s + n.block(bh) + i * n.W;
    T* dst = out + row * n.L;
    for (int64_t j = threadIdx.x; j < n.L; j += blockDim.x) dst[j] = src[slot(n, i, j)];  // exact in every dtype
  }
}

template <class T>
__global__ void layout_grad_kernel(Dims n, const T* g, T* ds) {
  for (int64_t row = blockIdx.x; row < n.B * n.H * n.L; row += gridDim.x) {
    const int64_t bh = row / n.L, r = row % n.L;
    const T* grad_row = g + grad_offset(n, bh, r, 0);  // query side: dL/dout[bh, r, t] at grad_row[t]
    T* dst = ds + n.block(bh) + r * n.W;
    for (int64_t c = threadIdx.x; c < n.W; c += blockDim.x) {
      const Run run = summed(n, r, c);
      typename Io<T>::Acc acc = 0;
      for (int64_t t = run.lo; t <= run.hi; ++t) acc += Io<T>::load(grad_row + t);
      dst[c] = Io<T>::store(acc);
    }
  }
}

// The key side, forward: one kTile x kTile tile of out per block and (b, h), staged through
// shared memory so that both the reads of s (threads along i) and the writes (along j) coalesce.
template <class T>
__global__ void key_layout_kernel(Dims n, const T* s, T* out) {
  __shared__ T tile[kTile][kTile + 1];  // +1: a column's elements fall in different banks
  const int lane = threadIdx.x;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile, i0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t bh = blockIdx.z; bh < n.B * n.H; bh += gridDim.z) {
    for (int row = threadIdx.y; row < kTile; row += blockDim.y) {
      const int64_t i = i0 + lane, j = j0 + row;
      if (i < n.L && j < n.L) tile[row][lane] = s[source(n, bh, i, j)];
    }
    __syncthreads();
    for (int row = threadIdx.y; row < kTile; row += blockDim.y) {
      const int64_t i = i0 + row, j = j0 + lane;
      if (i < n.L && j < n.L) out[(bh * n.L + i) * n.L + j] = tile[lane][row];
    }
    __syncthreads();  // the tile is refilled for the next (b, h)
  }
}

// The key side, backward: one kTile x kTile tile of ds (rows j, slots c) per block and (b, h).
// Inner slots read the 2 kTile - 1 rows of g staged along j (coalesced); the clipped ends sum
// their runs from g itself (two slots of a row; one element each when k = L - 1).
template <class T>
__global__ void key_layout_grad_kernel(Dims n, const T* g, T* ds) {
  __shared__ T rows[2 * kTile - 1][kTile + 1];
  const int lane = threadIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile, j0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t base = key_grad_base(n, j0, c0);
  for (int64_t bh = blockIdx.z; bh < n.B * n.H; bh += gridDim.z) {
    for (int r = threadIdx.y; r < 2 * kTile - 1; r += blockDim.y) {
      const int64_t i = base + r, j = j0 + lane;
      rows[r][lane] = i >= 0 && i < n.L && j < n.L ? g[(bh * n.L + i) * n.L + j] : Io<T>::store(0);
    }
    __syncthreads();
    for (int row = threadIdx.y; row < kTile; row += blockDim.y) {
      const int64_t j = j0 + row, c = c0 + lane;
      if (j >= n.L || c >= n.W) continue;
      typename Io<T>::Acc acc = 0;
      if (inner_slot(n, c)) {
        acc = Io<T>::load(&rows[key_grad_row(row, lane)][row]);
      } else {
        const Run run = summed(n, j, c);
        for (int64_t t = run.lo; t <= run.hi; ++t) acc += Io<T>::load(g + grad_offset(n, bh, j, t));
      }
      ds[n.block(bh) + j * n.W + c] = Io<T>::store(acc);
    }
    __syncthreads();
  }
}

dim3 key_grid(int64_t x_tiles, int64_t y_tiles, int64_t bh) {
  const auto tiles = [](int64_t len) { return static_cast<unsigned>((len + kTile - 1) / kTile); };
  return dim3(tiles(x_tiles), tiles(y_tiles), static_cast<unsigned>(bh < 65535 ? (bh > 0 ? bh : 1) : 65535));
}

std::string launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

const dim3 kTileThreads(kTile, 8);

// The query side's grid: a block per row (capped; each block then takes several).
int row_blocks(const Dims& n) { return capped_blocks(n.B * n.H * n.L); }

template <class T>
std::string layout(const Dims& n, const void* s, void* out, cudaStream_t stream) {
  if (n.key_side) {
    key_layout_kernel<T><<<key_grid(n.L, n.L, n.B * n.H), kTileThreads, 0, stream>>>(n, static_cast<const T*>(s),
                                                                                     static_cast<T*>(out));
    return launched();
  }
  layout_kernel<T><<<row_blocks(n), kThreads, 0, stream>>>(n, static_cast<const T*>(s), static_cast<T*>(out));
  return launched();
}

template <class T>
std::string layout_grad(const Dims& n, const void* g, void* ds, cudaStream_t stream) {
  if (n.key_side) {
    key_layout_grad_kernel<T><<<key_grid(n.W, n.L, n.B * n.H), kTileThreads, 0, stream>>>(
        n, static_cast<const T*>(g), static_cast<T*>(ds));
    return launched();
  }
  layout_grad_kernel<T><<<row_blocks(n), kThreads, 0, stream>>>(n, static_cast<const T*>(g), static_cast<T*>(ds));
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
