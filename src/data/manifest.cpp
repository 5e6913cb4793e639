// manifest.json of a prepared shard folder (manifest.h): what it records of the settings and
// inputs, and whether a config still matches it.
#include "data/manifest.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>

#include "data/prepare.h"
#include "data/shard.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"

namespace rpe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace manifest {

std::string hex64(uint64_t v) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(v));
  return hex;
}

uint64_t parse_hex64(const std::string& s) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw UserError("malformed checksum '" + s + "' in manifest.json");
  return std::stoull(s, nullptr, 16);
}

int64_t mtime_ns(const fs::path& f) {
  struct stat st {};
  if (::stat(f.string().c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

namespace {
json file_identity(const std::string& f, bool missing_ok) {
  std::error_code ec;
  if (fs::is_directory(f, ec)) throw UserError(f + ": is a folder, not a text file (list the files in it)");
  if (!input_exists(f)) {  // a link loop is no missing file: its own error
    if (missing_ok) return {{"path", f}, {"missing", true}};
    throw UserError(f + ": file not found");
  }
  require_regular_file(f);  // a FIFO has no size (filesystem_error below) and would block the reader
  return {{"path", f}, {"bytes", static_cast<int64_t>(fs::file_size(f))}, {"mtime_ns", mtime_ns(f)}};
}
}  // namespace

json settings_of(const DataOptions& d, const Tokenizer& tok) {
  json s = {{"format_version", kPreparedFormatVersion},
            {"tokenizer", tok.kind()},
            {"vocab_size", tok.vocab_size()},
            {"lowercase", d.lowercase},
            {"document_format", d.document_format},
            {"valid_fraction", d.valid_fraction},
            {"shard_tokens", d.shard_tokens},
            {"train_files", d.train_files},
            {"valid_files", d.valid_files}};
  s["tokenizer_model"] = nullptr;
  if (!d.tokenizer_model.empty()) {  // identity by content: a copied vocabulary is the same tokenizer
    ShardHasher h;
    const std::string bytes = read_file(d.tokenizer_model);
    h.update(bytes.data(), bytes.size());
    s["tokenizer_model"] = {{"path", d.tokenizer_model}, {"checksum", hex64(h.value())}};
  }
  return s;
}

json input_identities(const DataOptions& d, bool missing_ok) {
  json inputs = json::array();
  for (const auto& f : d.train_files) inputs.push_back(file_identity(f, missing_ok));
  for (const auto& f : d.valid_files) inputs.push_back(file_identity(f, missing_ok));
  return inputs;
}

namespace {
// The settings without the tokenizer model's path: its checksum is its identity, so a copy of
// the same vocab.txt elsewhere is the same tokenizer.
json without_model_path(json settings) {
  if (settings.contains("tokenizer_model") && settings["tokenizer_model"].is_object())
    settings["tokenizer_model"].erase("path");
  return settings;
}

// What differs between the settings the shards were prepared with and this config's, by the
// config key a user would change: "data.train_files (prepared: [...]; this config: [...])".
std::string settings_difference(const json& prepared, const json& now) {
  static const std::map<std::string, std::string> key_of{
      {"format_version", "the shard format (an older rpe-train prepared them)"},
      {"tokenizer", "data.tokenizer"},
      {"vocab_size", "the tokenizer's vocabulary size"},
      {"tokenizer_model", "data.tokenizer_model (its content)"}};
  const auto shown = [](const json& v) {
    std::string text = v.is_null() ? "none" : v.dump();
    return text.size() > 160 ? text.substr(0, 157) + "..." : text;
  };
  std::vector<std::string> parts;
  for (const auto& [key, value] : now.items()) {
    const json old = prepared.contains(key) ? prepared.at(key) : json();
    if (old == value) continue;
    const auto named = key_of.find(key);
    parts.push_back(named != key_of.end() ? named->second
                                          : "data." + key + " (prepared: " + shown(old) + "; this config: " + shown(value) + ")");
  }
  return parts.empty() ? "settings changed" : join(parts, "; ");
}
}  // namespace

std::string mismatch(const fs::path& dir, const json& settings, const json& inputs, json* out, bool check_shards) {
  const fs::path m = dir / "manifest.json";
  if (!fs::exists(m)) return "no manifest.json";
  try {
    const json manifest = read_json_file(m);
    if (out) *out = manifest;
    const json prepared = without_model_path(manifest.at("settings")), now = without_model_path(settings);
    if (prepared != now) return settings_difference(prepared, now);
    const json& old = manifest.at("inputs");
    if (old.size() != inputs.size()) return "input files changed";
    for (size_t i = 0; i < inputs.size(); ++i)
      for (const char* k : {"path", "bytes", "mtime_ns"}) {
        if (inputs[i].contains("missing") && std::string(k) != "path") continue;  // gone: the shards stand
        if (old[i].at(k) != inputs[i].at(k)) return inputs[i].at("path").get<std::string>() + " changed";
      }
    for (const char* split : {"train", "valid"})
      for (const auto& f : manifest.at("shards").at(split)) {
        if (!check_shards) break;
        const fs::path shard = dir / f.at("file").get<std::string>();
        std::error_code ec;
        if (fs::file_size(shard, ec) != f.at("bytes").get<uint64_t>() || ec)
          return shard.filename().string() + " is missing or has another size";
      }
    return "";
  } catch (const json::exception&) {
    return "unreadable manifest.json";
  } catch (const UserError&) {  // read_json_file: not JSON, or not a regular file
    return "unreadable manifest.json";
  }
}

}  // namespace manifest

}  // namespace rpe
