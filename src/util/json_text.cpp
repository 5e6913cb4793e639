// Bounded JSON parsing (see json_text.h).
#include "util/json_text.h"

#include "util/errors.h"

namespace rpe {

namespace {
struct TooDeep {};
}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where, int max_depth) {
  // The callback sees each value as it opens: throwing there stops before the tree grows.
  auto limit = [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > max_depth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit);
  } catch (const TooDeep&) {
    throw UserError(where + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace rpe
