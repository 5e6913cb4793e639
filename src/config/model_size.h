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

// Bytes of physical memory of this machine (0 if unknown).
uint64_t physical_memory_bytes();

// "" when the parameters, their gradients and two Adam moments (16 bytes per fp32
// parameter) fit in physical memory; otherwise why not, naming the size keys with `keys`
// (e.g. "model.hidden/layers/ffn/vocab_size").
std::string model_memory_problem(const ModelOptions& m, int64_t vocab_hint, const std::string& keys);

}  // namespace rpe
