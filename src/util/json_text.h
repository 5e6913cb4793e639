// JSON handed to us from outside (a safetensors header, a Hugging Face config.json) parsed
// with a nesting limit: nlohmann builds the whole tree, so a hostile 100 MB header of '['
// would cost gigabytes before failing. Real files nest a few levels (a safetensors header 3).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace rpe {

// Parses `text`; UserError naming `where` when it is not JSON or nests deeper than max_depth.
nlohmann::json parse_json_text(const std::string& text, const std::string& where, int max_depth = 32);

}  // namespace rpe
