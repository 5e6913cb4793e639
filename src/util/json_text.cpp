// Bounded JSON parsing of user files and lossless-or-replaced dumping (see json_text.h).
#include "util/json_text.h"

#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {

namespace {
struct TooDeep {};

// nlohmann's what() starts "[json.exception.parse_error.101] "; the reason is the rest.
std::string reason_of(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t close = what.rfind("] ", what.find(' '));
  return what.compare(0, 16, "[json.exception.") == 0 && close != std::string::npos ? what.substr(close + 2) : what;
}

// Parses `text`; throws UserError(where + ": " + wording + " (" + reason + ")") on any failure.
template <class Json = nlohmann::json>
Json parse_bounded(const std::string& text, const std::string& where, const std::string& wording, int max_depth) {
  // The callback sees each value as it opens: throwing there stops before the tree grows.
  auto limit = [max_depth](int depth, typename Json::parse_event_t, Json&) {
    if (depth > max_depth) throw TooDeep{};
    return true;
  };
  try {
    return Json::parse(text, limit);
  } catch (const TooDeep&) {
    throw UserError(where + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range.406 (1e400), ...
    throw UserError(where + ": " + wording + " (" + reason_of(e) + ")");
  }
}
}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where, int max_depth) {
  return parse_bounded(text, where, "not valid JSON", max_depth);
}

nlohmann::json read_json_file(const std::filesystem::path& file, int max_depth) {
  return parse_bounded(read_file(file), file.string(), "malformed JSON", max_depth);
}

nlohmann::ordered_json read_ordered_json_file(const std::filesystem::path& file, int max_depth) {
  return parse_bounded<nlohmann::ordered_json>(read_file(file), file.string(), "malformed JSON", max_depth);
}

nlohmann::json parse_json_line(const std::string& line, const std::filesystem::path& file, int64_t line_no,
                               int max_depth) {
  return parse_bounded(line, file.string() + ":" + std::to_string(line_no), "malformed JSON line", max_depth);
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace rpe
