// The fused post-LN add & norm on CUDA (add_norm_kernels.h): a warp per row, each lane taking
// the columns lane, lane + 32, ... so a warp's loads coalesce; row sums by warp shuffles. The
// row is read once from DRAM and again from cache (a BERT-base row is 3 KiB): z is written in
// the first pass and re-read by the same lane, so no synchronisation is needed. What the
// unfused path spends in separate kernels (dropout, cast, add, LayerNorm and their backward,
// the cast of the update's gradient) is one pass each way here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "model/add_norm_kernels.h"

namespace rpe::addnorm {
namespace {

constexpr int kWarps = 8;  // rows in flight per block
constexpr int kThreads = 32 * kWarps;
// Backward's row blocks at most: enough to fill an H100 twice over with 8 rows each in flight;
// fewer parts keep the final sum over them (dw_part.sum(0)) small.
constexpr int64_t kMaxParts = 1024;

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_float(__half v) { return __half2float(v); }
__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ void store(__half* p, float v) { *p = __float2half(v); }

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ int lane() { return static_cast<int>(threadIdx.x) & 31; }
__device__ int64_t first_row() { return static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); }
__device__ int64_t row_stride() { return static_cast<int64_t>(gridDim.x) * kWarps; }

// Every lane of a warp runs the same rows (the row depends on the warp only), so the shuffles
// see all 32 lanes.
template <class U>
__global__ void forward_kernel(Rows n, const float* x, const U* u, const uint8_t* keep, float scale, const float* w,
                               const float* b, float eps, float* z, float* y, U* y_low, float* mean, float* rstd) {
  const float inv_d = 1.0f / static_cast<float>(n.D);
  for (int64_t row = first_row(); row < n.N; row += row_stride()) {
    const int64_t base = row * n.D;
    float sum = 0;
    for (int64_t c = lane(); c < n.D; c += 32) {
      float v = to_float(u[base + c]);
      // times 0, not 0: an inf or NaN dropped stays NaN, as torch::dropout's u * mask * scale
      if (keep) v *= keep[base + c] ? scale : 0.0f;
      const float zc = x[base + c] + v;
      z[base + c] = zc;
      sum += zc;
    }
    const float mu = warp_sum(sum) * inv_d;
    float squares = 0;  // a second pass over z (stable as LayerNorm's Welford, unlike E[z^2] - mu^2)
    for (int64_t c = lane(); c < n.D; c += 32) {
      const float dev = z[base + c] - mu;
      squares += dev * dev;
    }
    const float r = rsqrtf(warp_sum(squares) * inv_d + eps);
    for (int64_t c = lane(); c < n.D; c += 32) {
      const float v = (z[base + c] - mu) * r * w[c] + b[c];
      y[base + c] = v;
      if (y_low) store(y_low + base + c, v);
    }
    if (lane() == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  }
}

// dz = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w; the block sums dy * xhat
// and dy per column in shared memory (dynamic: 2 * D floats) and writes them as its part.
template <class U>
__global__ void backward_kernel(Rows n, const float* dy, const U* dy_low, const float* z, const float* mean,
                                const float* rstd, const float* w, const uint8_t* keep, float scale, float* dx, U* du,
                                float* dw_part, float* db_part) {
  extern __shared__ float sums[];  // [2, D]: dw, then db
  for (int64_t c = threadIdx.x; c < 2 * n.D; c += blockDim.x) sums[c] = 0;
  __syncthreads();
  const float inv_d = 1.0f / static_cast<float>(n.D);
  for (int64_t row = first_row(); row < n.N; row += row_stride()) {
    const int64_t base = row * n.D;
    const float mu = mean[row], r = rstd[row];
    float sum_g = 0, sum_gx = 0;
    // dL/dy of both outputs: the fp32 stream's and, where the next Linear read it, y_low's
    auto grad = [&](int64_t i) { return dy[i] + (dy_low ? to_float(dy_low[i]) : 0.0f); };
    for (int64_t c = lane(); c < n.D; c += 32) {
      const float g = grad(base + c) * w[c];
      sum_g += g;
      sum_gx += g * (z[base + c] - mu) * r;
    }
    const float mean_g = warp_sum(sum_g) * inv_d, mean_gx = warp_sum(sum_gx) * inv_d;
    for (int64_t c = lane(); c < n.D; c += 32) {
      const float d = grad(base + c), xhat = (z[base + c] - mu) * r;
      const float dz = r * (d * w[c] - mean_g - xhat * mean_gx);
      dx[base + c] = dz;
      store(du + base + c, keep ? dz * (keep[base + c] ? scale : 0.0f) : dz);
      atomicAdd(sums + c, d * xhat);
      atomicAdd(sums + n.D + c, d);
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < n.D; c += blockDim.x) {
    dw_part[blockIdx.x * n.D + c] = sums[c];
    db_part[blockIdx.x * n.D + c] = sums[n.D + c];
  }
}

int row_blocks(int64_t rows, int64_t cap) {
  const int64_t b = (rows + kWarps - 1) / kWarps;
  return static_cast<int>(b < 1 ? 1 : (b > cap ? cap : b));
}

std::string launched() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

template <class U>
void launch_forward(Rows n, const float* x, const void* u, const uint8_t* keep, float scale, const float* w,
                    const float* b, float eps, float* z, float* y, void* y_low, float* mean, float* rstd,
                    cudaStream_t s) {
  forward_kernel<<<row_blocks(n.N, int64_t{1} << 20), kThreads, 0, s>>>(
      n, x, static_cast<const U*>(u), keep, scale, w, b, eps, z, y, static_cast<U*>(y_low), mean, rstd);
}

template <class U>
void launch_backward(Rows n, const float* dy, const void* dy_low, const float* z, const float* mean, const float* rstd,
                     const float* w, const uint8_t* keep, float scale, float* dx, void* du, float* dw_part,
                     float* db_part, cudaStream_t s) {
  const size_t shared = 2 * static_cast<size_t>(n.D) * sizeof(float);
  backward_kernel<<<row_blocks(n.N, kMaxParts), kThreads, shared, s>>>(
      n, dy, static_cast<const U*>(dy_low), z, mean, rstd, w, keep, scale, dx, static_cast<U*>(du), dw_part, db_part);
}

}  // namespace

std::string cuda_forward(Rows n, const float* x, const void* u, Dtype ut, const uint8_t* keep, float scale,
                         const float* w, const float* b, float eps, float* z, float* y, void* y_low, float* mean,
                         float* rstd, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (ut) {
    case Dtype::f32: launch_forward<float>(n, x, u, keep, scale, w, b, eps, z, y, y_low, mean, rstd, s); break;
    case Dtype::bf16: launch_forward<__nv_bfloat16>(n, x, u, keep, scale, w, b, eps, z, y, y_low, mean, rstd, s); break;
    case Dtype::f16: launch_forward<__half>(n, x, u, keep, scale, w, b, eps, z, y, y_low, mean, rstd, s); break;
  }
  return launched();
}

int backward_parts(int64_t rows) { return row_blocks(rows, kMaxParts); }

std::string cuda_backward(Rows n, const float* dy, const void* dy_low, const float* z, const float* mean,
                          const float* rstd, const float* w, const uint8_t* keep, float scale, float* dx, void* du,
                          Dtype ut, float* dw_part, float* db_part, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (ut) {
    case Dtype::f32:
      launch_backward<float>(n, dy, dy_low, z, mean, rstd, w, keep, scale, dx, du, dw_part, db_part, s);
      break;
    case Dtype::bf16:
      launch_backward<__nv_bfloat16>(n, dy, dy_low, z, mean, rstd, w, keep, scale, dx, du, dw_part, db_part, s);
      break;
    case Dtype::f16:
      launch_backward<__half>(n, dy, dy_low, z, mean, rstd, w, keep, scale, dx, du, dw_part, db_part, s);
      break;
  }
  return launched();
}

}  // namespace rpe::addnorm
