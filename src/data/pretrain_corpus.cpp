// See pretrain_corpus.h.
#include "data/pretrain_corpus.h"

#include <fmt/format.h>

#include <filesystem>

#include "data/corpus.h"
#include "data/packing.h"
#include "data/prepare.h"
#include "data/shard_sequences.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {

namespace {
PretrainCorpus from_shards(const DataOptions& d, const Tokenizer& tok, Packing packing) {
  // The cheap check (stat() and the manifest) first: stale shards are refused before their
  // first opening reads every byte of them for its checksum (~11 GB at paper scale, every rank).
  require_prepared_for(d.shards, tok);
  if (const std::string why = shards_out_of_date(d.shards, d, tok); !why.empty())
    throw UserError(d.shards + ": the shards were prepared with other settings: " + why +
                    ". Give the settings they were prepared with (a run's own: --config RUN/config.yaml), or "
                    "rpe-train prepare-data --config <this config> to replace them with this config's");
  auto shards = std::make_shared<const PreparedShards>(open_prepared(d.shards, tok));
  PretrainCorpus c;
  c.train = std::make_shared<ShardSequences>(shards, false, d.shards, tok.special(), d.max_seq_len, packing);
  c.valid = std::make_shared<ShardSequences>(shards, true, d.shards, tok.special(), d.max_seq_len, packing);
  return c;
}

PretrainCorpus from_text(const DataOptions& d, const Tokenizer& tok, Packing packing) {
  if (const std::string why = text_path_warning(d); !why.empty()) log::warn_rank0("data", "{}", why);
  std::vector<Document> train_docs, valid_docs;
  const int64_t period = holdout_period(d);
  int64_t index = 0;
  require_distinct_text_files(d);
  for (const auto& f : d.train_files)
    for (auto& doc : read_documents(f, d.document_format))
      (is_held_out(index++, period) ? valid_docs : train_docs).push_back(std::move(doc));
  for (const auto& f : d.valid_files)
    for (auto& doc : read_documents(f, d.document_format)) valid_docs.push_back(std::move(doc));
  if (valid_docs.empty())
    log::warn_rank0("data", "no held-out documents ({} documents, data.valid_fraction {}): there will be no held-out loss; "
                    "give data.valid_files, or more documents (data.document_format: {})",
                    train_docs.size(), d.valid_fraction, d.document_format);
  PretrainCorpus c;
  c.train = std::make_shared<PackedSequences>(pack_documents(train_docs, tok, d.max_seq_len, packing));
  c.valid = std::make_shared<PackedSequences>(pack_documents(valid_docs, tok, d.max_seq_len, packing));
  return c;
}
}  // namespace

std::string text_path_warning(const DataOptions& d, uint64_t limit) {
  uint64_t bytes = 0;
  for (const auto* files : {&d.train_files, &d.valid_files})
    for (const auto& f : *files) {
      std::error_code ec;
      const auto n = std::filesystem::file_size(f, ec);  // not a regular file: its reader says so
      if (!ec) bytes += n;
    }
  if (bytes <= limit) return {};
  const auto gb = [](double b) { return fmt::format("{:.1f} GB", b / 1e9); };
  return fmt::format("data.train_files/valid_files hold {} of text, read, tokenized and packed into the memory of "
                     "every rank at every start (~{} each, ~18 bytes a token): for a corpus this size run "
                     "`rpe-train prepare-data` once and set data.shards (docs/data.md)",
                     gb(static_cast<double>(bytes)), gb(4.0 * static_cast<double>(bytes)));
}

PretrainCorpus build_corpus(const DataOptions& d, const Tokenizer& tok) {
  const Packing packing = packing_from_name(d.packing);
  return d.shards.empty() ? from_text(d, tok, packing) : from_shards(d, tok, packing);
}

}  // namespace rpe
