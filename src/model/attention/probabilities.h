// The unfused attention's steps on its probabilities P [B, H, L, L] (self_attention.cpp's plain
// path: m1-m3, Shaw with values, backend plain), written so that backward keeps no more of P
// than it must: under autocast P is kept in the half type, and the dropped P is not kept at all.
// The fused path (SDPA) keeps no P.
#pragma once
#include <torch/torch.h>

#include <utility>

namespace rpe {

// softmax(logits) over the last dimension, summed in fp32 and returned -- and kept for backward
// -- in the autocast type (bf16 or fp16) when autocast is on for the logits' device, as
// FlashAttention and Megatron's fused softmax keep P: torch::softmax, on CUDA autocast's fp32
// list, would keep an fp32 [B, H, L, L] a layer, the plain path's largest saved tensor. Without
// autocast, or for fp64 logits, torch::softmax itself.
torch::Tensor softmax_kept_in_autocast_type(const torch::Tensor& logits);

// {dropout(P, p) @ v, dropout(P, p)}: P [B, H, L, L], v [B, H, L, d]. With 0 < p < 1, backward
// keeps P (the softmax keeps it already), the dropout mask (a byte an element) and v, not the
// dropped P that torch::matmul would keep: it makes it again, one elementwise pass. The dropped
// P serves a value term (Shaw's); unused, it is freed at once. p = 0 (evaluation): {P @ v, P}.
std::pair<torch::Tensor, torch::Tensor> dropout_then_values(const torch::Tensor& probs, const torch::Tensor& v,
                                                            double p);

}  // namespace rpe
