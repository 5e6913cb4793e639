// Small BERT model options shared by the tests: one place for the sizes a test model is
// built with, so each test names only what it changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"

namespace rpe::test {

// Sizes of a small test model (fields left out keep these values), e.g.
// small_model_options("m4", {.hidden = 32, .heads = 4, .dropout = 0.0}).
struct SmallSizes {
  int64_t vocab = 50, hidden = 16, layers = 2, heads = 2, ffn = 32, max_position = 16;
  std::optional<double> dropout = std::nullopt;  // hidden and attention dropout; unset = ModelOptions' defaults
};

// ModelOptions of `method` with `sizes`; everything else (init, LayerNorm, the method's
// options) as ModelOptions has it.
ModelOptions small_model_options(const std::string& method, const SmallSizes& sizes = {});

// Whether `method` is in this build's registry (the interop tests loop over a fixed list).
bool method_registered(const std::string& method);

}  // namespace rpe::test
