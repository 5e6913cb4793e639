// rpe-train prepare-data: tokenizes data.train_files (and data.valid_files) into shards in
// --out (default: data.shards) and prints a summary. Unchanged inputs make it a no-op, so
// scripts run it before every pretraining run of a preset. Shards it has just written are read
// back against the manifest's checksums once, here, and stamped (<shard>.verified): a training
// start then only stats them, where otherwise every rank of every node would re-read the whole
// corpus at its first start. --verify does the same for shards that were up to date.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "config/config.h"
#include "data/prepare.h"
#include "util/errors.h"

namespace rpe::cli {

namespace {
struct PrepareArgs {
  std::string config, out;
  std::vector<std::string> sets;
  int threads = 0;
  bool force = false, verify = false;
};

int run_prepare(const PrepareArgs& a) {
  const Config cfg = load_config(a.config, a.sets);
  const auto& d = cfg.data;
  require_train_files(cfg, "prepare-data");
  if (d.tokenizer_model.empty())
    cfg.fail("data.tokenizer_model", "prepare-data needs a fixed tokenizer (a vocab.txt, or a .model from "
                                     "rpe-train train-tokenizer)");
  const std::string out = a.out.empty() ? d.shards : a.out;
  if (out.empty()) cfg.fail("data.shards", "empty: give the output folder here or with --out");
  // A folder at least (not yet writable: shards that are up to date are only read).
  check_output_folder(a.out.empty() ? "data.shards" : "--out", out, {}, /*writable=*/false);
  const auto tok = make_tokenizer(d, d.tokenizer_model);
  const PrepareSummary s = prepare_data(d, *tok, {out, a.threads, a.force});
  const double mb = static_cast<double>(s.bytes) / 1e6;
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: %lld documents (%lld train, %lld valid), %lld sentences, %lld words, %lld tokens "
                "(%lld train, %lld valid) in %lld + %lld shards | %.1f MB text",
                out.c_str(), static_cast<long long>(s.documents), static_cast<long long>(s.train_documents),
                static_cast<long long>(s.valid_documents), static_cast<long long>(s.sentences),
                static_cast<long long>(s.words), static_cast<long long>(s.tokens),
                static_cast<long long>(s.train_tokens), static_cast<long long>(s.valid_tokens),
                static_cast<long long>(s.train_shards), static_cast<long long>(s.valid_shards), mb);
  std::cout << line;
  if (s.up_to_date) {
    std::cout << " | up to date, nothing to do (--force rebuilds)\n";
  } else {
    std::snprintf(line, sizeof line, " | %.2f s, %.1f MB/s on %d threads\n", s.seconds, mb / std::max(s.seconds, 1e-9),
                  s.threads);
    std::cout << line;
  }
  if (a.verify || !s.up_to_date) {
    const PreparedShards shards = open_prepared(out, *tok, /*verify_all=*/true);
    std::cout << out << ": " << shards.train.size() + shards.valid.size() << " shards verified against manifest.json\n";
  }
  return 0;
}
}  // namespace

void add_prepare_data(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("prepare-data", "Tokenize the corpus into memory-mapped shards");
  auto a = std::make_shared<PrepareArgs>();
  cmd->add_option("--config", a->config, "Experiment YAML file")->required();
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--out", a->out, "Output folder (default: data.shards)");
  cmd->add_option("--threads", a->threads, "Tokenizer threads (default: all cores; at most 1024)");
  cmd->add_flag("--force", a->force, "Rebuild even if the manifest says the shards are up to date");
  cmd->add_flag("--verify", a->verify,
                "Re-read every shard against the manifest's checksums, up to date or not (new shards always are)");
  cmd->callback([&run, a] { run = [a] { return run_prepare(*a); }; });
}

}  // namespace rpe::cli
