// The pretraining corpus as the MLM task reads it: training and held-out packed sequences,
// from prepared shards (data.shards) or from raw text files (data.train_files).
#pragma once
#include <memory>

#include "config/config.h"
#include "data/packing.h"
#include "data/tokenizer.h"

namespace rpe {

struct PretrainCorpus {
  std::shared_ptr<PackedSequences> train, valid;
};

// Reads the corpus and packs it; held-out documents come from data.valid_files or, if
// none are given, from every (1/valid_fraction)-th document of the training files.
PretrainCorpus build_corpus(const DataOptions& d, const Tokenizer& tok);

}  // namespace rpe
