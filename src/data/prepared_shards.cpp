// Opening a prepared folder's shards (prepare.h): the cheap freshness check against the
// manifest (manifest.cpp), and a once-per-file verification of every shard against the
// manifest's checksum, remembered in a stamp file (verified_stamp.h).
#include <chrono>
#include <functional>
#include <set>

#include "data/manifest.h"
#include "data/prepare.h"
#include "data/verified_stamp.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using json = nlohmann::json;

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

// What a process that waits while others verify the shards logs: a line when it first waits, then
// at most one every 30 s while it still does, not a line per shard (thousands at paper scale,
// where every rank but one waits on each shard in turn).
class VerifyWaitNotice {
 public:
  VerifyWaitNotice(fs::path dir, size_t shards) : dir_(std::move(dir)), shards_(shards) {}
  std::function<void()> for_shard(const fs::path& shard, size_t index) {
    return [this, shard, index] { waited(shard, index); };
  }

 private:
  void waited(const fs::path& shard, size_t index) {
    const auto now = std::chrono::steady_clock::now();
    if (++waits_ > 1 && now - last_ < std::chrono::seconds(30)) return;
    last_ = now;
    log::info("data", "{}: {} for another process verifying shard {} of {} ({}){}", dir_.string(),
              waits_ == 1 ? "waiting" : "still waiting", index + 1, shards_, shard.filename().string(),
              waits_ == 1 ? "; waits on further shards are logged at most every 30 s"
                          : "; waited on " + std::to_string(waits_) + " shards so far");
  }
  fs::path dir_;
  size_t shards_, waits_ = 0;
  std::chrono::steady_clock::time_point last_;
};
}  // namespace

void require_prepared_for(const fs::path& dir, const Tokenizer& tok) { prepared_manifest(dir, tok); }

PreparedShards open_prepared(const fs::path& dir, const Tokenizer& tok, bool verify_all) {
  const fs::path m = dir / "manifest.json";
  const json manifest = prepared_manifest(dir, tok);
  PreparedShards p;
  try {
    VerifyWaitNotice notice(dir, manifest.at("shards").at("train").size() + manifest.at("shards").at("valid").size());
    size_t index = 0;
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
        verify_once({s.file(), s.file().string() + ".verified", checksum, [&] { s.verify(&checksum); },
                     notice.for_shard(s.file(), index++)},
                    verify_all);
        (std::string(split) == "train" ? p.train : p.valid).push_back(std::move(shard));
      }
  } catch (const json::exception& e) {
    throw UserError(m.string() + ": unexpected layout (" + std::string(e.what()) + ")");
  }
  if (p.train.empty()) throw UserError(m.string() + ": lists no training shards");
  return p;
}

}  // namespace rpe
