// manifest.json of a prepared shard folder (manifest.h): what it records of the settings and
// inputs, and whether a config still matches it.
#include "data/manifest.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cstdio>
#include <map>

#include "data/hashed_input.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/verified_stamp.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"
#include "util/log.h"

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
    s["tokenizer_model"] = {{"path", d.tokenizer_model}, {"checksum", hex64(file_checksum(d.tokenizer_model))}};
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
// The settings as compared: without the tokenizer model's path (its checksum is its identity,
// so a copy of the same vocab.txt elsewhere is the same tokenizer) and with the file lists as
// counts (the inputs are compared file by file, by content: the same corpus named by another
// path — relative instead of absolute, or staged to a node's scratch disk — is the same corpus).
json comparable(json settings) {
  if (settings.contains("tokenizer_model") && settings["tokenizer_model"].is_object())
    settings["tokenizer_model"].erase("path");
  for (const char* list : {"train_files", "valid_files"})
    if (settings.contains(list) && settings[list].is_array()) settings[list] = settings[list].size();
  return settings;
}

// What differs between the settings the shards were prepared with and this config's, by the
// config key a user would change: "data.train_files (prepared: [...]; this config: [...])".
std::string settings_difference(const json& prepared_settings, const json& settings) {
  const json prepared = comparable(prepared_settings), now = comparable(settings);
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
    if (prepared.contains(key) && prepared.at(key) == value) continue;
    const json old = prepared_settings.contains(key) ? prepared_settings.at(key) : json();
    const auto named = key_of.find(key);
    parts.push_back(named != key_of.end() ? named->second
                                          : "data." + key + " (prepared: " + shown(old) + "; this config: " +
                                                shown(settings.at(key)) + ")");
  }
  return parts.empty() ? "settings changed" : join(parts, "; ");
}
}  // namespace

// Why an input is not the one the shards were prepared from ("" when it is):
// - gone from the path it had: the shards stand (the text may be deleted once prepared);
// - another size: changed;
// - the same size and mtime at the same path: the same file;
// - otherwise (moved, re-copied, touched) its content is checked against the checksum taken at
//   prepare time, once: a stamp in the shard folder (verified_stamp.h) remembers the match, so
//   other ranks and later starts only stat() the file. Manifests without checksums (written
//   before they were recorded) call such a file changed.
std::string input_change(const fs::path& dir, const json& old, const json& now) {
  const std::string path = now.at("path").get<std::string>(), was = old.at("path").get<std::string>();
  if (now.contains("missing"))
    return path == was || same_file_key(path) == same_file_key(was)
               ? ""
               : path + ": file not found (the shards were prepared from " + was + ")";
  // A file under another name than the one prepared from is named beside it: another corpus than
  // the shards', rather than the shards' one changed.
  const bool elsewhere = path != was && same_file_key(path) != same_file_key(was);
  const auto changed = [&](const std::string& how) {
    return elsewhere ? path + " is not the file the shards were prepared from (" + was + "): " + how
                     : path + " changed (" + how + ")";
  };
  const auto bytes = now.at("bytes").get<int64_t>(), bytes_then = old.at("bytes").get<int64_t>();
  if (bytes != bytes_then) return changed(fmt::format("{} bytes, prepared from {} bytes", bytes, bytes_then));
  // The same size and mtime at the path prepared from: the file itself (make's and rsync's test).
  // At another path it is read: two parts of a split corpus share a size, and an mtime where a
  // tool restored it to the second.
  if (!elsewhere && old.at("mtime_ns") == now.at("mtime_ns")) return "";
  if (!old.contains("checksum")) return changed("the manifest records no checksum to compare it by");
  uint64_t checksum = 0;
  try {
    checksum = parse_hex64(old.at("checksum").get<std::string>());
  } catch (const UserError&) {
    return "unreadable manifest.json";
  }
  // The stamp is named by the file's place, size and mtime: each node's staged copy (its own
  // mtime, the same path) keeps its own, rather than every node's reading replacing the others'.
  const std::string key_text = same_file_key(fs::absolute(path)).string() + "\n" + std::to_string(bytes) + " " +
                               now.at("mtime_ns").dump();
  ShardHasher key;
  key.update(key_text.data(), key_text.size());
  bool differs = false;
  try {
    verify_once({path, dir / ("input-" + hex64(key.value()) + ".verified"), checksum, [&] {
                   log::info("data", "{}: moved or touched since prepare-data: comparing its content with the manifest's "
                             "checksum ({:.1f} GB, once)", path, static_cast<double>(bytes) / 1e9);
                   differs = file_checksum(path) != checksum;
                   if (differs) throw UserError(path + ": other content");
                 }});
  } catch (const UserError&) {
    if (!differs) throw;  // not the comparison: an unreadable file, an unusable cache folder
    return changed("the same size, another content");
  }
  return "";
}

std::string mismatch(const fs::path& dir, const json& settings, const json& inputs, json* out, bool check_shards) {
  const fs::path m = dir / "manifest.json";
  if (!fs::exists(m)) return "no manifest.json";
  json manifest;
  try {
    manifest = read_json_file(m);
  } catch (const UserError&) {  // not JSON, or not a regular file
    return "unreadable manifest.json";
  }
  if (out) *out = manifest;
  try {
    if (comparable(manifest.at("settings")) != comparable(settings))
      return settings_difference(manifest.at("settings"), settings);
    for (const char* split : {"train", "valid"})
      for (const auto& f : manifest.at("shards").at(split)) {
        if (!check_shards) break;
        const fs::path shard = dir / f.at("file").get<std::string>();
        std::error_code ec;
        if (fs::file_size(shard, ec) != f.at("bytes").get<uint64_t>() || ec)
          return shard.filename().string() + " is missing or has another size";
      }
    // Last: it may read a moved or touched input whole (once; see input_change).
    const json& old = manifest.at("inputs");
    if (old.size() != inputs.size()) return "input files changed";
    for (size_t i = 0; i < inputs.size(); ++i)
      if (std::string why = input_change(dir, old[i], inputs[i]); !why.empty()) return why;
    return "";
  } catch (const json::exception&) {  // a field missing or of another type
    return "unreadable manifest.json";
  }
}

}  // namespace manifest

}  // namespace rpe
