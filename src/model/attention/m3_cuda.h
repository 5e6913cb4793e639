// m3's CUDA kernels (m3_cuda.cu): one thread per output element, each the element function
// of m3_kernels.h, on float or double device buffers in that header's layouts, launched on
// `stream` (a cudaStream_t). Compiled by nvcc with a CUDA LibTorch (RPE_WITH_M3_CUDA); m3.cpp
// converts LibTorch's tensors and checks the kernels against its band kernel before using them.
// Each returns "" or the CUDA error of its launch.
#pragma once
#include <string>

#include "model/attention/m3_kernels.h"

namespace rpe::m3k {

// e [BH, L, L] from q [BH, L, d], kt [BH, d, L], wxt [Hw, d, W].
template <class T>
std::string cuda_scores(const Dims& n, const T* q, const T* kt, const T* wxt, T* e, void* stream);

// gq, gk [BH, L, d] and gwx [BH, W, d] (per batch and head; the caller sums) from g [BH, L, L].
template <class T>
std::string cuda_grads(const Dims& n, const T* g, const T* q, const T* k, const T* wx, T* gq, T* gk, T* gwx,
                       void* stream);

}  // namespace rpe::m3k
