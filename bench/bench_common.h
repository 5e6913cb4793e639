// What the benchmarks share: the whole-model ones' (rpe-bench-model, rpe-bench-optim) size
// options (BERT-base by default), the device check and the end-of-step sync; the relative
// methods' layout and clipping options (rpe-bench-model, rpe-bench-attention).
#pragma once
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "model/attention/position_method.h"
#include "model/bert.h"

namespace rpe::bench {

struct ModelSize {
  int64_t hidden = 768, layers = 12, heads = 12, ffn = 3072, vocab = 30522;
};

inline void add_size_options(CLI::App& app, ModelSize& s) {
  app.add_option("--hidden", s.hidden);
  app.add_option("--layers", s.layers);
  app.add_option("--heads", s.heads);
  app.add_option("--ffn", s.ffn);
  app.add_option("--vocab", s.vocab);
}

inline ModelOptions model_options(const ModelSize& s) {
  ModelOptions o;
  o.hidden = s.hidden, o.layers = s.layers, o.heads = s.heads, o.ffn = s.ffn, o.vocab_size = s.vocab;
  return o;
}

// --relative-blocks N: the relative methods' skew in N query blocks instead of the default (0);
// pass N to set_relative_skew_blocks once parsed, before any model runs.
inline void add_relative_blocks_option(CLI::App& app, int64_t& blocks) {
  app.add_option("--relative-blocks", blocks, "relative methods' skew in this many query blocks (0: the default, 4)")
      ->check(CLI::NonNegativeNumber);
}

// --max-relative K: the relative methods' clipping distance, model.attention.max_relative (0: the
// default, k = max_position - 1). The paper's Table 4 models clip at k = 2 to 256; methods
// without a k ignore it.
inline void add_max_relative_option(CLI::App& app, int64_t& k) {
  app.add_option("--max-relative", k, "relative methods' clipping distance k (0: the default, max_position - 1)")
      ->check(CLI::NonNegativeNumber);
}

// False (with a one-line message) when --device asks for CUDA that LibTorch does not see.
inline bool device_available(const std::string& device, const char* program) {
  if (device.rfind("cuda", 0) != 0 || torch::cuda::is_available()) return true;
  std::cerr << program << ": --device " << device << " but LibTorch sees no CUDA device\n";
  return false;
}

// Ends a timed step: waits for the device's queued work.
inline void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);  // -1: the current one
}

}  // namespace rpe::bench
