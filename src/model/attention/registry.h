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

// Builds the method named by options.attention.method (UserError if unknown).
std::shared_ptr<PositionMethodImpl> make_position_method(const ModelOptions& options);

}  // namespace rpe
