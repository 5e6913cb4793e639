// Packing tokenized documents into fixed-length sequences, RoBERTa style:
// [CLS] s1 s2 ... [SEP], filled with whole sentences. full_sentences crosses document
// boundaries (marked by an extra [SEP]); doc_sentences stops at each document's end.
// A sentence longer than the room left is split across sequences.
#pragma once
#include <cstdint>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"

namespace rpe {

// Fixed-length sequences stored flat: row r is tokens[r*L, (r+1)*L).
struct PackedSequences {
  int64_t seq_len = 0;
  std::vector<int32_t> tokens;      // [N * L], padded with [PAD]
  std::vector<uint8_t> word_start;  // [N * L], 1 = starts a word (never on special tokens)
  int64_t size() const { return seq_len ? static_cast<int64_t>(tokens.size()) / seq_len : 0; }
  int64_t real_tokens() const;      // non-[PAD] tokens
};

PackedSequences pack_documents(const std::vector<Document>& docs, const Tokenizer& tokenizer, int64_t seq_len,
                               bool cross_documents);

}  // namespace rpe
