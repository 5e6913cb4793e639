// Registry of position methods keyed by their YAML name (model.attention.method).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace rpe {

class PositionMethodImpl;

// Names in registry order; an unknown name in a config is an error listing these.
std::vector<std::string> attention_method_names();

// Builds the method named by options.attention.method (UserError if unknown), warning
// once per model.attention key set away from its default that the method does not read.
std::shared_ptr<PositionMethodImpl> make_position_method(const ModelOptions& options);

// The model.attention keys with a non-default value that `method` does not read.
std::vector<std::string> unused_attention_options(const PositionMethodImpl& method, const AttentionOptions& options);

}  // namespace rpe
