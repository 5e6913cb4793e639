// The pretraining corpus as the MLM task reads it: training and held-out sequences.
//   data.shards set: the prepared shards (rpe-train prepare-data), read lazily through their
//     memory maps with a sample index cached in a file (shard_sequences.h): nothing in a rank's
//     heap grows with the corpus. The shards must be current for data.train_files and the
//     tokenizer (checked from the manifest, stat calls only).
//   otherwise: data.train_files read, tokenized and packed in memory (small corpora; a warning
//     above kTextPathWarnBytes of text).
// Held-out documents come from data.valid_files or, if none are given, from the held-out
// rule of corpus.h (every round(1/valid_fraction)-th document); a warning says when that
// leaves nothing held out (there is no held-out loss then).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "data/sequences.h"
#include "data/tokenizer.h"

namespace rpe {

struct PretrainCorpus {
  std::shared_ptr<const SequenceSource> train, valid;
};

PretrainCorpus build_corpus(const DataOptions& d, const Tokenizer& tok);

// The text path holds the whole corpus in every rank's memory, rebuilt at every start: about
// 18 bytes per token at the peak, 4 times the text. Above `limit` bytes of text files, the
// warning build_corpus logs (naming the size, the memory and prepare-data); "" below it.
constexpr uint64_t kTextPathWarnBytes = uint64_t{256} << 20;
std::string text_path_warning(const DataOptions& d, uint64_t limit = kTextPathWarnBytes);

}  // namespace rpe
