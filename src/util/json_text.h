// JSON handed to us from outside (a user's SQuAD, results or summary file, a safetensors header,
// a Hugging Face config.json) parsed with a nesting limit: nlohmann builds the whole tree, so a
// hostile 100 MB header of '[' would cost gigabytes before failing. Real files nest a few levels
// (a safetensors header 3, SQuAD 7). Every nlohmann exception of the parse (syntax, a number
// too large for a double such as 1e400, bad UTF-8) becomes one UserError naming the file, so
// no reader of user files parses with json::parse directly. Writing: JSON of strings taken
// from paths (not always UTF-8) is dumped through dump_json, which cannot throw on them.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace rpe {

// Parses `text`; UserError "<where>: not valid JSON (<reason>)", or naming the depth when it
// nests deeper than max_depth.
nlohmann::json parse_json_text(const std::string& text, const std::string& where, int max_depth = 32);

// Reads `file` (a regular file: util/input_file.h) and parses it: UserError
// "<file>: malformed JSON (<reason>)".
nlohmann::json read_json_file(const std::filesystem::path& file, int max_depth = 32);
// The same, its objects' keys in the file's order (nlohmann::json sorts them): for a file whose
// order means something (the official SQuAD 2.0 script breaks ties of no-answer scores by it).
nlohmann::ordered_json read_ordered_json_file(const std::filesystem::path& file, int max_depth = 32);

// One line (1-based `line_no`) of the JSON-lines file `file`: UserError
// "<file>:<line_no>: malformed JSON line (<reason>)".
nlohmann::json parse_json_line(const std::string& line, const std::filesystem::path& file, int64_t line_no,
                               int max_depth = 32);

// j.dump(indent) with invalid UTF-8 in strings replaced by U+FFFD instead of a type_error: a
// folder name with a Latin-1 byte is shown, not a crash after some outputs were written.
std::string dump_json(const nlohmann::json& j, int indent = -1);
std::string dump_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace rpe
