// Tokenizer interface shared by SentencePiece and WordPiece. Besides ids it reports
// which pieces start a word (for whole-word masking) and byte offsets into the input
// (for SQuAD answer spans).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"

namespace rpe {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<uint8_t> word_start;                   // 1 where a piece begins a new word
  std::vector<std::pair<int32_t, int32_t>> offsets;  // [begin, end) bytes in the input
};

struct SpecialIds {
  int32_t pad = 0, unk = 1, cls = 2, sep = 3, mask = 4;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Ids of fine-tuning text: a literal "[SEP]", "[MASK]"... becomes its special id, as HF's
  // tokenizers make it.
  virtual Encoding encode(std::string_view text) const = 0;
  // Ids of pretraining text (a corpus line): literal "[PAD]", "[MASK]"... are ordinary characters,
  // as in Google's create_pretraining_data.py, so no corpus line puts a padding or mask id into
  // a sequence. SentencePiece's specials are control symbols, never read from text: the same.
  virtual Encoding encode_corpus(std::string_view text) const { return encode(text); }
  virtual int64_t vocab_size() const = 0;
  virtual std::string piece(int32_t id) const = 0;
  // Lowest id that is an ordinary piece (random replacement in masking draws from here up).
  virtual int32_t first_regular_id() const = 0;
  virtual std::string kind() const = 0;
  const SpecialIds& special() const { return special_; }

 protected:
  SpecialIds special_;
};

// The tokenizer named by data.tokenizer. A sentencepiece model named by
// data.tokenizer_model is loaded; when that key is empty one is trained from
// data.train_files into `default_model_path` (or reused if it already exists there).
std::unique_ptr<Tokenizer> make_tokenizer(const DataOptions& options, const std::filesystem::path& default_model_path);

// CRC-32 of every piece in id order and of the special ids: tokenizers with equal values give
// the same ids (how data-parallel ranks check that they loaded the same one).
uint32_t tokenizer_crc32(const Tokenizer& tokenizer);

}  // namespace rpe
