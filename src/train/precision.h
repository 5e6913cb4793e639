// Mixed precision: train.precision = bf16 or fp16 runs the forward pass under LibTorch autocast
// (matmuls in the half type, reductions/softmax/loss in fp32 per autocast's op lists) while
// the parameters, gradients and optimizer state stay fp32 ("master weights"). bf16 has fp32's
// exponent range, so it needs no loss scaling; fp16 (V100-class GPUs, no bf16 units) tops out
// at 65504 and underflows below 6e-8, so its backward runs on a scaled loss (train/loss_scaler.h).
#pragma once
#include "util/autocast_guard.h"  // AutocastGuard, autocast_dtype
