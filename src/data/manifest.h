// manifest.json of a prepared shard folder: what the shards depend on (settings, tokenizer
// identity, input files) and what they hold (per shard: tokens, documents, bytes, checksum).
// Shared by prepare-data (writes it) and the readers (check it is current, verify shards).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

#include "config/config.h"
#include "data/tokenizer.h"

namespace rpe::manifest {

using json = nlohmann::json;

// Settings the output depends on besides the inputs' bytes, including the tokenizer's
// identity (kind, vocabulary size, checksum of its model file).
json settings_of(const DataOptions& d, const Tokenizer& tok);
// Path, size and mtime of every training then validation file (stat() only: prepare-data adds
// each file's "checksum" from the read that tokenizes it, ChunkReader::file_checksum). A missing
// file is a UserError, or with missing_ok ({"path", "missing": true}) one that mismatch() takes
// as unchanged: the text may be deleted once prepared, and training reads the shards only.
json input_identities(const DataOptions& d, bool missing_ok = false);
// "" when dir/manifest.json matches settings and inputs (and, with check_shards, every listed
// shard exists with its size); otherwise the reason. Inputs are matched by content, not by name:
// one found at another path or with another mtime is compared with the manifest's checksum,
// once (a stamp in `dir`, or the cache folder, remembers it). The parsed manifest goes to *out.
std::string mismatch(const std::filesystem::path& dir, const json& settings, const json& inputs, json* out,
                     bool check_shards = true);

std::string hex64(uint64_t v);
uint64_t parse_hex64(const std::string& s);  // UserError on a malformed value
int64_t mtime_ns(const std::filesystem::path& f);

}  // namespace rpe::manifest
