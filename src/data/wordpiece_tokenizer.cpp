// WordPiece encoding: basic tokenization, then greedy longest-match-first per word.
#include "data/wordpiece_tokenizer.h"

#include <utf8proc.h>

#include <regex>

#include "data/corpus.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
const char* const kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

std::vector<std::string> vocab_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

WordPieceTokenizer::WordPieceTokenizer(const fs::path& vocab_file, bool lowercase) : basic_(lowercase) {
  if (!fs::exists(vocab_file))  // the base presets' default path is where download_data.sh puts BERT's
    throw UserError(vocab_file.string() +
                    ": wordpiece vocabulary not found (scripts/download_data.sh vocab fetches BERT's uncased and "
                    "cased ones into data/full/vocab/)");
  const std::string text = read_file(vocab_file);
  if (const size_t bad = find_invalid_utf8(text); bad != std::string::npos)
    throw UserError(vocab_file.string() + ": invalid UTF-8 at byte offset " + std::to_string(bad));
  pieces_ = vocab_lines(text);
  PieceMap all;
  for (size_t id = 0; id < pieces_.size(); ++id)
    all[pieces_[id]] = static_cast<int32_t>(id);  // a repeated line: the last one wins, as in BERT
  if (pieces_.empty()) throw UserError(vocab_file.string() + ": wordpiece vocabulary is empty");
  int32_t* ids[] = {&special_.pad, &special_.unk, &special_.cls, &special_.sep, &special_.mask};
  for (size_t k = 0; k < 5; ++k) {
    const auto it = all.find(std::string_view(kSpecialNames[k]));
    if (it == all.end())
      throw UserError(vocab_file.string() + ": not a BERT vocabulary (no " + kSpecialNames[k] + " line)");
    *ids[k] = it->second;
  }
  for (const auto& [piece, id] : all) {
    if (piece.size() > 2 && piece.compare(0, 2, "##") == 0) {
      continuation_.emplace(piece.substr(2), id);
      max_continuation_chars_ = std::max(max_continuation_chars_, count_code_points(piece) - 2);
    } else {
      initial_.emplace(piece, id);
      max_initial_chars_ = std::max(max_initial_chars_, count_code_points(piece));
    }
  }
  // Random replacement tokens are drawn above the reserved block that opens BERT's vocabularies
  // ([PAD], [unusedN], [UNK], [CLS], [SEP], [MASK]). A reserved piece further on (a [MASK]
  // appended at the end, an [unusedN] added later) is drawn now and then, as BERT's own data code
  // draws from the whole vocabulary; taking the last reserved piece as the block's end would
  // shrink the draw to the pieces after it, or leave none.
  static const std::regex reserved(R"(\[(unused\d+|PAD|UNK|CLS|SEP|MASK)\])");
  while (first_regular_ < static_cast<int32_t>(pieces_.size()) && std::regex_match(pieces_[first_regular_], reserved))
    ++first_regular_;
  if (first_regular_ >= static_cast<int32_t>(pieces_.size()))
    throw UserError(vocab_file.string() + ": wordpiece vocabulary has no ordinary pieces");
}

Encoding WordPieceTokenizer::encode(std::string_view text) const {
  Encoding out;
  out.ids.reserve(text.size() / 4 + 4);
  out.word_start.reserve(text.size() / 4 + 4);
  out.offsets.reserve(text.size() / 4 + 4);
  // Literal special-token strings are cut out first and kept whole.
  size_t seg = 0, i = text.find('[');
  while (i != std::string_view::npos) {
    size_t matched = 0;
    int32_t id = 0;
    const int32_t ids[] = {special_.pad, special_.unk, special_.cls, special_.sep, special_.mask};
    for (size_t k = 0; k < 5 && !matched; ++k) {
      const std::string_view name(kSpecialNames[k]);
      if (text.substr(i, name.size()) == name) matched = name.size(), id = ids[k];
    }
    if (!matched) {
      i = text.find('[', i + 1);
      continue;
    }
    encode_segment(text.substr(seg, i - seg), static_cast<int32_t>(seg), out);
    out.ids.push_back(id);
    out.word_start.push_back(1);
    out.offsets.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(i + matched));
    seg = i + matched;
    i = text.find('[', seg);
  }
  encode_segment(text.substr(seg), static_cast<int32_t>(seg), out);
  return out;
}

Encoding WordPieceTokenizer::encode_corpus(std::string_view text) const {
  Encoding out;
  encode_segment(text, 0, out);  // no cutting out of special-token strings
  return out;
}

void WordPieceTokenizer::encode_segment(std::string_view text, int32_t base, Encoding& out) const {
  if (text.empty()) return;
  thread_local WordList words;
  words.clear();
  basic_.split(text, base, words);
  for (size_t i = 0; i < words.size(); ++i)
    encode_word(words.chars.data() + words.begin(i), words.ends[i] - words.begin(i), out);
}

void WordPieceTokenizer::encode_word(const TracedChar* word, size_t n, Encoding& out) const {
  const size_t first = out.ids.size();
  if (n <= kMaxWordChars) {
    // UTF-8 of the word; pos[k] = byte where code point k starts.
    thread_local std::string s;
    thread_local std::vector<size_t> pos;
    s.clear();
    pos.clear();
    for (size_t k = 0; k < n; ++k) {
      const TracedChar& c = word[k];
      pos.push_back(s.size());
      if (c.cp < 0x80) {
        s.push_back(static_cast<char>(c.cp));
      } else {
        utf8proc_uint8_t buf[4];
        const auto len = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c.cp), buf);
        s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
      }
    }
    pos.push_back(s.size());
    size_t start = 0;
    while (start < n) {
      const PieceMap& map = start == 0 ? initial_ : continuation_;
      size_t end = std::min(n, start + (start == 0 ? max_initial_chars_ : max_continuation_chars_));
      int32_t id = -1;
      for (; end > start; --end) {  // longest match first
        const auto it = map.find(std::string_view(s).substr(pos[start], pos[end] - pos[start]));
        if (it != map.end()) {
          id = it->second;
          break;
        }
      }
      if (id < 0) break;  // no piece covers position `start`: the whole word is [UNK]
      out.ids.push_back(id);
      out.word_start.push_back(start == 0 ? 1 : 0);
      out.offsets.emplace_back(word[start].begin, word[end - 1].end);
      start = end;
    }
    if (start == n) return;
  }
  out.ids.resize(first);
  out.word_start.resize(first);
  out.offsets.resize(first);
  out.ids.push_back(special_.unk);
  out.word_start.push_back(1);
  out.offsets.emplace_back(word[0].begin, word[n - 1].end);
}

}  // namespace rpe
