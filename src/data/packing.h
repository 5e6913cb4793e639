// Packing tokenized documents into fixed-length sequences [CLS] ... [SEP] [PAD]...:
// - full_sentences (RoBERTa's FULL-SENTENCES, Liu et al. 2019): whole sentences, across
//   document boundaries (marked by an extra [SEP]); a sentence is never split unless it is
//   longer than a whole sequence's room (L - 2), so a sequence ends early when the next
//   sentence does not fit (corpora whose "sentences" are paragraphs leave ~10-20% padding).
// - doc_sentences: the same, stopping at each document's end.
// - contiguous: the stream of full_sentences (document [SEP]s included) cut every L - 2 tokens,
//   splitting sentences and words where the cut falls (as BERT's truncation does): no padding
//   but in the last sequence, and where a document's [SEP] would be a sequence's last token.
// Works on token streams (shards or in-memory), so the text path and the shard path pack
// identically, across shard boundaries as if the shards were one stream.
#pragma once
#include <cstdint>
#include <vector>

#include "data/corpus.h"
#include "data/sequences.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace rpe {

// Fixed-length sequences stored flat in memory: row r is tokens[r*L, (r+1)*L).
struct PackedSequences : SequenceSource {
  int64_t seq_len = 0;
  std::vector<int32_t> tokens;      // [N * L], padded with [PAD]
  std::vector<uint8_t> word_start;  // [N * L], 1 = starts a word (never on special tokens)
  int32_t pad = 0;                  // the vocabulary's [PAD] id (not always 0)
  int64_t size() const override { return seq_len ? static_cast<int64_t>(tokens.size()) / seq_len : 0; }
  int64_t length() const override { return seq_len; }
  int64_t real_tokens() const override;  // non-[PAD] tokens
  void read(int64_t i, int32_t* out_tokens, uint8_t* out_word_start) const override;
};

// Packs the documents of `streams`, in order, as one stream.
PackedSequences pack_streams(const std::vector<TokenStream>& streams, const SpecialIds& special, int64_t seq_len,
                             Packing packing);

// Tokenizes `docs` (one encode() per sentence) and packs them.
PackedSequences pack_documents(const std::vector<Document>& docs, const Tokenizer& tokenizer, int64_t seq_len,
                               Packing packing);

}  // namespace rpe
