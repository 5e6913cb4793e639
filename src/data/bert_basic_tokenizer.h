// BERT's "basic" pre-tokenization (Devlin et al. 2019, google-research/bert tokenization.py,
// as in HF BertTokenizer): text -> words, before word pieces. In order:
//   uncased: per-character lower-casing;
//   cleaning: drop U+0000, U+FFFD and every "other" character (Cc, Cf, Cs, Co, Cn; \t \n \r
//             excepted), as HF BertTokenizer (Google's tokenization.py: Cc and Cf only),
//             whitespace (\t \n \r, Zs, and Zl/Zp which Python's split() also splits on) -> space;
//   CJK ideographs become words of their own;
//   cased: NFC per word; uncased: NFD per word with non-spacing marks (Mn) dropped;
//   punctuation (Unicode P*, and ASCII symbols such as $ + < = > ^ ` | ~) splits off as words.
// Unicode categories, case mapping and normalisation come from utf8proc. Every output code
// point keeps the byte range [begin, end) of the input it came from, so word pieces map
// back to the original text (SQuAD answer spans).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace rpe {

struct TracedChar {
  char32_t cp;
  int32_t begin, end;  // bytes of the original text this code point came from
};

// A word: its code points (each with its source byte range).
using TracedWord = std::vector<TracedChar>;

// Words stored flat (no allocation per word): word i is chars[begin(i), ends[i]).
struct WordList {
  std::vector<TracedChar> chars;
  std::vector<uint32_t> ends;
  size_t size() const { return ends.size(); }
  uint32_t begin(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
  void clear() { chars.clear(), ends.clear(); }
};

class BertBasicTokenizer {
 public:
  explicit BertBasicTokenizer(bool lowercase);
  // Appends the words of text[0, size) to `out`; offsets are shifted by `base`.
  void split(std::string_view text, int32_t base, WordList& out) const;
  bool lowercase() const { return lowercase_; }

 private:
  enum Class : uint8_t { kRegular, kSpace, kDrop, kPunct };
  Class classify(char32_t cp) const;
  void finish_word(TracedWord& word, WordList& out) const;
  void nfc(TracedWord& word) const;
  void strip_accents(TracedWord& word) const;
  bool lowercase_;
  uint8_t ascii_class_[128];   // classify() for ASCII, filled from utf8proc at construction
  char ascii_lower_[128];
};

}  // namespace rpe
