// Fixed-length MLM sequences ([CLS] ... [SEP] [PAD]..., see packing.h), however they are
// stored: in memory (PackedSequences, the text path) or read lazily from memory-mapped
// shards (ShardSequences). The loader sees only this interface.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rpe {

// How documents become sequences (data.packing; packing.h has the rules).
enum class Packing {
  doc_sentences,   // whole sentences, one document per sequence
  full_sentences,  // whole sentences across documents (RoBERTa's FULL-SENTENCES, the default)
  contiguous,      // the token stream cut every L - 2 tokens, across sentences and documents
};
inline const char* packing_name(Packing p) {
  return p == Packing::doc_sentences ? "doc_sentences" : p == Packing::full_sentences ? "full_sentences" : "contiguous";
}
// The Packing named `name` (validate.cpp refuses other names first).
inline Packing packing_from_name(const std::string& name) {
  for (Packing p : {Packing::doc_sentences, Packing::full_sentences, Packing::contiguous})
    if (name == packing_name(p)) return p;
  throw std::invalid_argument("unknown data.packing '" + name + "'");
}

class SequenceSource {
 public:
  virtual ~SequenceSource() = default;
  virtual int64_t size() const = 0;         // number of sequences N
  virtual int64_t length() const = 0;       // tokens per sequence L (with [CLS], [SEP], padding)
  virtual int64_t real_tokens() const = 0;  // non-[PAD] tokens of all N sequences
  // Sequence i into tokens [L] and word_start [L] (1 = starts a word). Thread-safe.
  virtual void read(int64_t i, int32_t* tokens, uint8_t* word_start) const = 0;
  // Drops from the process's resident set the mapped file pages that reads have touched
  // (memory-mapped sources; the page cache keeps them). The loader calls it after each batch,
  // so a rank's RSS does not fill up with the corpus as it reads it. Thread-safe.
  virtual void release_pages() const {}
};

}  // namespace rpe
