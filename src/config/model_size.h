// Size limits of a model before anything is allocated: absurd sizes (model.ffn = 1e10, an
// HF config.json with vocab_size 1e11) must be a one-line error naming the keys, not an
// abort inside LibTorch's allocator. Used by config validation and the HF config reader.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"

namespace rpe {

// Parameters a model of these options holds (embeddings, encoder layers, position tables,
// MLM head), in double so absurd sizes cannot overflow. vocab_size 0 counts `vocab_hint`.
double estimated_parameters(const ModelOptions& m, int64_t vocab_hint);

// Model FLOPs of training on one token (forward and backward, multiply-add = 2) of a BERT of
// these options on sequences of `seq_len` tokens, `predicted` of them scored by the MLM head:
// 6 per weight of the encoder's matmuls, 12·L·D per layer for the two attention products, and
// the head's transform and decoder on the predicted share. The same count for every position
// method (their own terms are not model FLOPs, as recomputation is not), so FLOP/s compare across
// methods as tokens/s do; MFU is it over the device's peak. vocab_size 0 counts `vocab_hint`.
double model_flops_per_token(const ModelOptions& m, int64_t vocab_hint, int64_t seq_len, double predicted);

// Bytes of physical memory of this machine (0 if unknown).
uint64_t physical_memory_bytes();

// "" when the parameters, their gradients and two Adam moments (16 bytes per fp32
// parameter) fit in physical memory; otherwise why not, naming the size keys with `keys`
// (e.g. "model.hidden/layers/ffn/vocab_size").
std::string model_memory_problem(const ModelOptions& m, int64_t vocab_hint, const std::string& keys);

}  // namespace rpe
