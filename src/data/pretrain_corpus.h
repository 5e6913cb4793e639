// The pretraining corpus as the MLM task reads it: training and held-out sequences.
//   data.shards set: the prepared shards (rpe-train prepare-data), read lazily through their
//     memory maps with a cached sample index (shard_sequences.h): a rank's memory grows by
//     8 bytes per sequence of the corpus, not with its tokens. The shards must be current
//     for data.train_files and the tokenizer (checked from the manifest, stat calls only).
//   otherwise: data.train_files read, tokenized and packed in memory (small corpora).
// Held-out documents come from data.valid_files or, if none are given, from the held-out
// rule of corpus.h (every round(1/valid_fraction)-th document); a warning says when that
// leaves nothing held out (there is no held-out loss then).
#pragma once
#include <memory>

#include "config/config.h"
#include "data/sequences.h"
#include "data/tokenizer.h"

namespace rpe {

struct PretrainCorpus {
  std::shared_ptr<const SequenceSource> train, valid;
};

PretrainCorpus build_corpus(const DataOptions& d, const Tokenizer& tok);

}  // namespace rpe
