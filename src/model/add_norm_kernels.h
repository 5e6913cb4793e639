// The CUDA kernels of the fused post-LN "add & norm" (add_norm.h), declared for the C++ side.
// Plain CUDA behind this header, no LibTorch (add_norm_cuda.cu); add_norm.cpp does the tensor
// work and checks the kernels against its ATen path on a device before first using them there.
//
// One warp per row of D features, rows in a grid-stride loop. Layouts (contiguous, row-major):
//   x, z, y, dy, dx [N, D] fp32   u, du [N, D] in `update`'s dtype   keep [N, D] bytes or null
//   y_low, dy_low [N, D] in `update`'s dtype or null
//   mean, rstd [N] fp32   w, b [D] fp32   dw_part, db_part [parts, D] fp32 (the caller sums them)
// Each launcher returns "" or the CUDA error of its launch (read, so cleared).
#pragma once
#include <cstdint>
#include <string>

namespace rpe::addnorm {

enum class Dtype { f32, bf16, f16 };  // the update's (the sublayer output's) element type

struct Rows {
  int64_t N, D;
};

// Largest D the backward kernel takes: its block keeps two D-float accumulators in shared memory.
constexpr int64_t kMaxWidth = 4096;

// z = x + drop(u), drop(u) = keep ? u * scale : 0 (u itself when keep is null);
// y = (z - mean) * rstd * w + b, with mean and the biased variance of each row of z;
// y_low (unless null) = y rounded to u's dtype, for the next Linear under autocast.
std::string cuda_forward(Rows n, const float* x, const void* u, Dtype ut, const uint8_t* keep, float scale,
                         const float* w, const float* b, float eps, float* z, float* y, void* y_low, float* mean,
                         float* rstd, void* stream);

// Row blocks of the backward kernel for N rows: the first dimension of dw_part and db_part.
int backward_parts(int64_t rows);

// From dL/dy (dy, plus dy_low unless null: the two outputs' gradients, summed here): dx = dL/dz
// (the residual's gradient), du = dx through the dropout, in u's dtype; dw_part[p] and
// db_part[p] the p-th row block's sums of dy * xhat and dy.
std::string cuda_backward(Rows n, const float* dy, const void* dy_low, const float* z, const float* mean,
                          const float* rstd, const float* w, const uint8_t* keep, float scale, float* dx, void* du,
                          Dtype ut, float* dw_part, float* db_part, void* stream);

}  // namespace rpe::addnorm
