// The manifest of a prepared folder (manifest.h) and opening its shards (prepare.h):
// cheap freshness checks from stat() and the manifest, and a once-per-file verification
// of every shard against the manifest's checksum, remembered in a stamp file.
#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <set>

#include "data/manifest.h"
#include "data/prepare.h"
#include "data/verified_stamp.h"
#include "util/atomic_file.h"
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

std::string shards_out_of_date(const fs::path& dir, const DataOptions& d, const Tokenizer& tok) {
  const json inputs = manifest::input_identities(d, /*missing_ok=*/true);
  const std::string why = manifest::mismatch(dir, manifest::settings_of(d, tok), inputs, nullptr, /*check_shards=*/false);
  // Only a file the shards were prepared from is "gone since prepare-data" (the manifest lists
  // it: the match above); one of another config is simply not what they hold.
  for (const auto& f : inputs)
    if (why.empty() && f.contains("missing"))
      log::warn_rank0("data", "{}: gone since prepare-data: training on its shards as prepared (their checksums are verified)",
                      f.at("path").get<std::string>());
  return why;
}

std::vector<TokenStream> PreparedShards::streams(const std::vector<std::unique_ptr<MappedShard>>& shards) {
  std::vector<TokenStream> out;
  for (const auto& s : shards) out.push_back(s->stream());
  return out;
}

namespace {
// dir's manifest, checked for this build's format and the tokenizer's kind.
json prepared_manifest(const fs::path& dir, const Tokenizer& tok) {
  const fs::path m = dir / "manifest.json";
  if (!fs::exists(m)) throw UserError(dir.string() + ": no manifest.json (run rpe-train prepare-data first)");
  const json manifest = read_json_file(m);
  try {
    const json& settings = manifest.at("settings");
    const int version = settings.at("format_version").get<int>();
    if (version != kPreparedFormatVersion)
      throw UserError(m.string() + ": prepared with format version " + std::to_string(version) +
                      ", this build reads version " + std::to_string(kPreparedFormatVersion) +
                      " (rerun prepare-data)");
    const std::string kind = settings.at("tokenizer").get<std::string>();
    if (kind != tok.kind())
      throw UserError(m.string() + ": shards were made with the " + kind + " tokenizer, the config uses " + tok.kind());
  } catch (const json::exception& e) {
    throw UserError(m.string() + ": unexpected layout (" + std::string(e.what()) + ")");
  }
  return manifest;
}
}  // namespace

void require_prepared_for(const fs::path& dir, const Tokenizer& tok) { prepared_manifest(dir, tok); }

PreparedShards open_prepared(const fs::path& dir, const Tokenizer& tok, bool verify_all) {
  const fs::path m = dir / "manifest.json";
  const json manifest = prepared_manifest(dir, tok);
  PreparedShards p;
  try {
    // A shard listed twice (in one split or in both) would be trained on twice, or be its own
    // held-out set: refused, whatever the spelling ("a.bin", "./a.bin", a link to it).
    std::set<fs::path> seen;
    for (const char* split : {"train", "valid"})
      for (const auto& f : manifest.at("shards").at(split)) {
        const std::string name = f.at("file").get<std::string>();
        if (!seen.insert(same_file_key(dir / name)).second)
          throw UserError(m.string() + ": shard " + name + " is listed more than once (" + split +
                          "); its sequences would be read twice (rerun prepare-data)");
        auto shard = std::make_unique<MappedShard>(dir / name);
        if (shard->vocab_size() != tok.vocab_size())
          throw UserError(shard->file().string() + ": written for a vocabulary of " +
                          std::to_string(shard->vocab_size()) + ", the tokenizer has " +
                          std::to_string(tok.vocab_size()));
        const uint64_t checksum = manifest::parse_hex64(f.at("checksum").get<std::string>());
        const MappedShard& s = *shard;
        verify_once({s.file(), s.file().string() + ".verified", checksum, [&] { s.verify(&checksum); }}, verify_all);
        (std::string(split) == "train" ? p.train : p.valid).push_back(std::move(shard));
      }
  } catch (const json::exception& e) {
    throw UserError(m.string() + ": unexpected layout (" + std::string(e.what()) + ")");
  }
  if (p.train.empty()) throw UserError(m.string() + ": lists no training shards");
  return p;
}

}  // namespace rpe
