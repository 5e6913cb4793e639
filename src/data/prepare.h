// prepare-data: text files -> tokenized, versioned shards (shard.h) plus manifest.json.
// Files are cut into ~1 MB units at blank lines (documents never straddle units), units are
// tokenized in parallel on all cores and written in input order, so the output does not
// depend on the thread count. Documents are numbered across the training files; with no
// data.valid_files, every round(1/valid_fraction)-th document goes to the validation split
// (the same rule as the in-memory path). A rerun whose inputs (size, mtime), tokenizer and
// settings match the manifest is a no-op.
#pragma once
#include <filesystem>
#include <memory>
#include <vector>

#include "config/config.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace rpe {

struct PrepareOptions {
  std::filesystem::path out_dir;
  int threads = 0;     // 0 = all cores
  bool force = false;  // rebuild even when the manifest says up to date
};

struct PrepareSummary {
  int64_t documents = 0, sentences = 0, tokens = 0, words = 0, bytes = 0;
  int64_t train_documents = 0, valid_documents = 0, train_tokens = 0, valid_tokens = 0;
  int64_t train_shards = 0, valid_shards = 0;
  double seconds = 0.0;
  bool up_to_date = false;  // nothing was done: the manifest matched
};

PrepareSummary prepare_data(const DataOptions& data, const Tokenizer& tokenizer, const PrepareOptions& options);

// The shards of a prepared folder, memory-mapped, checked against the tokenizer.
struct PreparedShards {
  std::vector<std::unique_ptr<MappedShard>> train, valid;
  static std::vector<TokenStream> streams(const std::vector<std::unique_ptr<MappedShard>>& shards);
};
PreparedShards open_prepared(const std::filesystem::path& dir, const Tokenizer& tokenizer);

}  // namespace rpe
