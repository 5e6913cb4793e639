// WordPiece tokenizer compatible with BERT's vocab.txt (Wu et al. 2016; Devlin et al. 2019):
// BERT's basic tokenization (bert_basic_tokenizer.h), then per word greedy longest-match-first
// pieces, continuation pieces spelled "##piece"; a word with no full cover, or longer than 100
// code points, becomes [UNK]. The literal strings [PAD] [UNK] [CLS] [SEP] [MASK] in the text are
// kept as their special tokens (as HF BertTokenizer does) by encode(), read as ordinary text by
// encode_corpus() (as Google's pretraining data does). Ids are line numbers of vocab.txt.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bert_basic_tokenizer.h"
#include "data/tokenizer.h"

namespace rpe {

class WordPieceTokenizer : public Tokenizer {
 public:
  // lowercase = true for "uncased" vocabularies (lower-case + strip accents), false for cased.
  WordPieceTokenizer(const std::filesystem::path& vocab_file, bool lowercase);
  Encoding encode(std::string_view text) const override;
  Encoding encode_corpus(std::string_view text) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::string piece(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)); }
  int32_t first_regular_id() const override { return first_regular_; }
  std::string kind() const override { return "wordpiece"; }

  static constexpr size_t kMaxWordChars = 100;  // longer words become [UNK]

 private:
  // Transparent hashing: look pieces up by string_view without building strings.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using PieceMap = std::unordered_map<std::string, int32_t, Hash, std::equal_to<>>;
  void encode_segment(std::string_view text, int32_t base, Encoding& out) const;
  void encode_word(const TracedChar* word, size_t n, Encoding& out) const;

  BertBasicTokenizer basic_;
  std::vector<std::string> pieces_;
  PieceMap initial_;       // pieces that start a word
  PieceMap continuation_;  // "##x" pieces, stored as "x"
  size_t max_initial_chars_ = 0, max_continuation_chars_ = 0;
  int32_t first_regular_ = 0;
};

// A vocab.txt's pieces, one a line (id = line number; a trailing '\r' dropped), as
// WordPieceTokenizer and BERT read them.
std::vector<std::string> vocab_lines(const std::string& text);

}  // namespace rpe
