// prepare-data: text files -> tokenized, versioned shards (shard.h) plus manifest.json.
// Each file is streamed (text_reader.h, .gz too) in ~1 MB chunks cut at document boundaries;
// the chunks are tokenized in parallel on all cores and written in input order
// (chunk_pipeline.h: reading and writing overlap the tokenizing, no barrier between batches),
// so the output does not depend on the thread count, and memory is O(threads x chunk + one
// shard), not O(corpus). Documents are numbered across the training files; with no data.valid_files,
// the held-out rule of corpus.h (holdout_period) picks the validation documents, the same
// rule as the text path. A rerun whose inputs (size, mtime), tokenizer and settings match the
// manifest is a no-op. The manifest is removed before any shard is written and written
// (atomically) after the last one, so an interrupted run leaves nothing a later run trusts.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/chunk_pipeline.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace rpe {

// Of the manifest + shard set (3: encode_corpus; 4: Unicode blank lines end documents, private-use
// and unassigned characters dropped as Hugging Face's BertTokenizer does).
inline constexpr int kPreparedFormatVersion = 4;

struct PrepareOptions {
  std::filesystem::path out_dir;
  int threads = 0;     // 0 = all cores
  bool force = false;  // rebuild even when the manifest says up to date
  int64_t fail_after_shards = -1;  // tests: throw after writing this many shard files (-1 = never)
};

struct PrepareSummary {
  int64_t documents = 0, sentences = 0, tokens = 0, words = 0, bytes = 0;
  int64_t train_documents = 0, valid_documents = 0, train_tokens = 0, valid_tokens = 0;
  int64_t train_shards = 0, valid_shards = 0;
  double seconds = 0.0;
  int threads = 1;
  // Where the threads' time went (not in the manifest): reading, tokenizing, committing
  // (writing shards included; write_seconds of it), waiting, summed over the threads.
  PipelineTimes times;
  double write_seconds = 0.0;
  bool up_to_date = false;  // nothing was done: the manifest matched
};

PrepareSummary prepare_data(const DataOptions& data, const Tokenizer& tokenizer, const PrepareOptions& options);

// Empty when `dir` holds shards prepared from exactly these inputs and settings (stat calls
// and the manifest only; the shards themselves are open_prepared's to check); otherwise why
// not, in a few words.
std::string shards_out_of_date(const std::filesystem::path& dir, const DataOptions& data, const Tokenizer& tokenizer);

// UserError unless `dir` has a manifest of this build's format for the tokenizer's kind
// (the manifest only: a cheap check before shards_out_of_date).
void require_prepared_for(const std::filesystem::path& dir, const Tokenizer& tokenizer);

// The shards of a prepared folder, memory-mapped, checked against the tokenizer. Each shard
// is verified (checksum from the manifest, ids, boundaries) once: a stamp file
// "<shard>.verified" records size, mtime and checksum, and while those match the next open
// only stats the file. verify_all ignores the stamps.
struct PreparedShards {
  std::vector<std::unique_ptr<MappedShard>> train, valid;
  static std::vector<TokenStream> streams(const std::vector<std::unique_ptr<MappedShard>>& shards);
};
PreparedShards open_prepared(const std::filesystem::path& dir, const Tokenizer& tokenizer, bool verify_all = false);

}  // namespace rpe
