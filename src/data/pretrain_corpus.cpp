// See pretrain_corpus.h. Every rank builds the whole corpus in memory today (O(corpus) RAM).
#include "data/pretrain_corpus.h"

#include <cmath>

#include "data/corpus.h"
#include "data/prepare.h"

namespace rpe {

// Reads the corpus and packs it; held-out documents come from data.valid_files or, if
// none are given, from every (1/valid_fraction)-th document of the training files.
PretrainCorpus build_corpus(const DataOptions& d, const Tokenizer& tok) {
  const bool cross = d.packing == "full_sentences";
  if (!d.shards.empty()) {  // prepared by rpe-train prepare-data: memory-mapped shards
    const PreparedShards shards = open_prepared(d.shards, tok);
    PretrainCorpus c;
    c.train = std::make_shared<PackedSequences>(
        pack_streams(PreparedShards::streams(shards.train), tok.special(), d.max_seq_len, cross));
    c.valid = std::make_shared<PackedSequences>(
        pack_streams(PreparedShards::streams(shards.valid), tok.special(), d.max_seq_len, cross));
    return c;
  }
  std::vector<Document> train_docs, valid_docs;
  for (const auto& f : d.train_files) {
    auto docs = read_documents(f);
    train_docs.insert(train_docs.end(), std::make_move_iterator(docs.begin()), std::make_move_iterator(docs.end()));
  }
  for (const auto& f : d.valid_files) {
    auto docs = read_documents(f);
    valid_docs.insert(valid_docs.end(), std::make_move_iterator(docs.begin()), std::make_move_iterator(docs.end()));
  }
  if (d.valid_files.empty() && d.valid_fraction > 0.0 && train_docs.size() >= 2) {
    const auto every = std::max<size_t>(2, static_cast<size_t>(std::llround(1.0 / d.valid_fraction)));
    std::vector<Document> kept;
    for (size_t i = 0; i < train_docs.size(); ++i)
      (i % every == every - 1 ? valid_docs : kept).push_back(std::move(train_docs[i]));
    train_docs = std::move(kept);
  }
  PretrainCorpus c;
  c.train = std::make_shared<PackedSequences>(pack_documents(train_docs, tok, d.max_seq_len, cross));
  c.valid = std::make_shared<PackedSequences>(pack_documents(valid_docs, tok, d.max_seq_len, cross));
  return c;
}

}  // namespace rpe
