// The post-LN "add & norm" of a Transformer sublayer (Vaswani et al. 2017, BERT):
//   y = LayerNorm(x + Dropout(update))
// x [.., D] the residual stream (fp32 under autocast: LayerNorm's output), update [.., D] the
// sublayer's output (bf16 under autocast), y [.., D] in x's dtype.
//
// On CUDA it runs as one fused kernel each way (add_norm_cuda.cu) where the unfused path runs
// dropout, a cast, an add and LayerNorm forward, and their four backward kernels, each a full
// pass over [B·L, D] (the H100 profile: these elementwise passes, not the GEMMs, hold absolute's
// MFU at 22%). Everywhere else (the CPU, pre-LN, a kernel that failed its check) it is the
// unfused composite, unchanged, with the same random draws. The fused path draws its dropout
// mask with bernoulli_ (the same distribution, other draws).
#pragma once
#include <torch/torch.h>

namespace rpe {

// y [.., D] in x's dtype; y_low: where `low` asks for it and the fused kernel runs with an
// update of another dtype (bf16 under autocast), the same values rounded to the update's dtype,
// made in the same pass, for the next Linear: autocast reads it as it is instead of casting y
// in a kernel of its own, and backward sums its gradient into the kernel's instead of a cast
// and an add. Undefined elsewhere: the caller passes y on.
struct AddNormOutput {
  torch::Tensor y, y_low;
};

AddNormOutput add_norm(const torch::Tensor& x, const torch::Tensor& update, double dropout, bool training,
                       torch::nn::LayerNorm norm, bool low = false);

// Whether add_norm may take its CUDA kernels (default true): the benchmarks' --unfused-add-norm
// turns them off for the process, to time both on one device.
void set_fused_add_norm(bool enabled);

// Whether this build has the kernels (a CUDA LibTorch and nvcc).
bool add_norm_kernel_built();

// Whether add_norm uses its kernels on `device`: built, and in agreement with the ATen engine
// below on a small problem there, checked once per device (a warning and the unfused path if not).
bool add_norm_kernel_usable(const torch::Device& device);

namespace add_norm_detail {

// cuda: the kernels; aten: the kernels' arithmetic in ATen ops, on any device (the tests' and
// the device check's second opinion).
enum class Engine { cuda, aten };

// The fused autograd function with the dropout mask given: keep [.., D] bool or uint8 0/1
// (undefined: no dropout), kept values scaled by `scale`. x, weight, bias fp32; update fp32,
// bf16 or fp16; `low`: y_low made too (in the update's dtype).
AddNormOutput fused(const torch::Tensor& x, const torch::Tensor& update, const torch::Tensor& keep, double scale,
                    const torch::Tensor& weight, const torch::Tensor& bias, double eps, Engine engine,
                    bool low = false);

// How far `engine` is from the ATen engine on `device` (add_norm_kernel_usable's check, with
// Engine::cuda): the largest difference over outputs and gradients on small problems, in units
// of its tolerance (below 1 passes).
double disagreement(const torch::Device& device, Engine engine);

// The unfused composite with the same mask, through autograd: the reference.
torch::Tensor composite(const torch::Tensor& x, const torch::Tensor& update, const torch::Tensor& keep, double scale,
                        const torch::Tensor& weight, const torch::Tensor& bias, double eps);

}  // namespace add_norm_detail
}  // namespace rpe
