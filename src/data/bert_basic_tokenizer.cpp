// BERT basic tokenization with byte offsets (see the header for the steps and their order).
#include "data/bert_basic_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace rpe {

namespace {

bool is_cjk(char32_t cp) {  // the CJK Unified/Compatibility Ideograph blocks BERT splits per character
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// BERT counts every non-alphanumeric printable ASCII character as punctuation (so $ + < = > ^ ` | ~,
// which Unicode files under symbols, split off too), plus all of Unicode's P* categories.
bool is_punctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

void append_utf8(std::string& s, char32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// NFC of a UTF-8 string (utf8proc's STABLE|COMPOSE is NFC).
std::string nfc_string(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return s;  // cannot happen for valid code points; keep the input
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string to_utf8(const TracedWord& w, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) append_utf8(s, w[i].cp);
  return s;
}

// Decodes UTF-8 `s` into code points that all carry the range [begin, end).
void append_decoded(const std::string& s, int32_t begin, int32_t end, TracedWord& out) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t i = 0;
  while (i < static_cast<utf8proc_ssize_t>(s.size())) {
    utf8proc_int32_t cp;
    const auto len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size()) - i, &cp);
    if (len <= 0) break;
    out.push_back({static_cast<char32_t>(cp), begin, end});
    i += len;
  }
}

uint8_t combining_class(char32_t cp) {
  return static_cast<uint8_t>(utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class);
}

}  // namespace

BertBasicTokenizer::BertBasicTokenizer(bool lowercase) : lowercase_(lowercase) {
  for (int c = 0; c < 128; ++c) {
    ascii_lower_[c] = static_cast<char>(lowercase ? utf8proc_tolower(c) : c);
    ascii_class_[c] = classify(static_cast<char32_t>(c));
  }
}

BertBasicTokenizer::Class BertBasicTokenizer::classify(char32_t cp) const {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return kSpace;
  if (cp == 0 || cp == 0xFFFD) return kDrop;
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  // Every "other" category (Cc, Cf, Cs, Co private use, Cn unassigned), as Hugging Face's
  // BertTokenizer drops them (Google's tokenization.py drops Cc and Cf only): a private-use icon
  // inside a word would otherwise turn the whole word into [UNK].
  if (c == UTF8PROC_CATEGORY_CN || (c >= UTF8PROC_CATEGORY_CC && c <= UTF8PROC_CATEGORY_CO)) return kDrop;
  if (c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP) return kSpace;
  return is_punctuation(cp) ? kPunct : kRegular;
}

void BertBasicTokenizer::split(std::string_view text, int32_t base, WordList& out) const {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto n = static_cast<int32_t>(text.size());
  thread_local TracedWord word;  // the word being read (reused: no allocation per word)
  word.clear();
  int32_t i = 0;
  while (i < n) {
    const int32_t begin = i;
    char32_t cp;
    if (p[i] < 0x80) {  // ASCII fast path: tables filled from utf8proc
      cp = static_cast<char32_t>(ascii_lower_[p[i]]);
      ++i;
      const auto cls = static_cast<Class>(ascii_class_[p[begin]]);
      if (cls == kSpace) {
        finish_word(word, out);
      } else if (cls != kDrop) {
        word.push_back({cp, base + begin, base + i});
      }
      continue;
    }
    utf8proc_int32_t decoded;
    const auto len = utf8proc_iterate(p + i, n - i, &decoded);
    if (len <= 0) {  // invalid byte: dropped like U+FFFD (prepare-data rejects such files earlier)
      ++i;
      continue;
    }
    i += static_cast<int32_t>(len);
    cp = static_cast<char32_t>(decoded);
    if (lowercase_) {
      if (cp == 0x130) {  // full lower-case mapping of U+0130 is "i" + U+0307 (Python's str.lower)
        word.push_back({U'i', base + begin, base + i});
        cp = 0x307;
      } else {
        cp = static_cast<char32_t>(utf8proc_tolower(decoded));
      }
    }
    const Class cls = classify(cp);
    if (cls == kDrop) continue;
    if (cls == kSpace) {
      finish_word(word, out);
    } else if (is_cjk(cp)) {
      finish_word(word, out);
      word.push_back({cp, base + begin, base + i});
      finish_word(word, out);
    } else {
      word.push_back({cp, base + begin, base + i});
    }
  }
  finish_word(word, out);
}

void BertBasicTokenizer::finish_word(TracedWord& word, WordList& out) const {
  if (word.empty()) return;
  const bool ascii = std::all_of(word.begin(), word.end(), [](const TracedChar& c) { return c.cp < 0x80; });
  if (!ascii) {
    // Uncased: NFD(NFC(x)) == NFD(x), so BERT's NFC step needs no work before stripping accents.
    if (lowercase_) strip_accents(word);
    else nfc(word);
  }
  // Punctuation characters become words of their own.
  for (const auto& c : word) {
    const bool punct = c.cp < 0x80 ? ascii_class_[c.cp] == kPunct : is_punctuation(c.cp);
    if (punct && !out.chars.empty() && (out.ends.empty() || out.ends.back() != out.chars.size()))
      out.ends.push_back(static_cast<uint32_t>(out.chars.size()));  // close the word before it
    out.chars.push_back(c);
    if (punct) out.ends.push_back(static_cast<uint32_t>(out.chars.size()));
  }
  if (out.ends.empty() || out.ends.back() != out.chars.size()) out.ends.push_back(static_cast<uint32_t>(out.chars.size()));
  word.clear();
}

// NFD, canonical ordering of combining marks, then drop Mn (non-spacing marks).
void BertBasicTokenizer::strip_accents(TracedWord& word) const {
  TracedWord d;
  d.reserve(word.size() + 4);
  utf8proc_int32_t buf[32];
  for (const auto& c : word) {
    if (c.cp < 0x80) {
      d.push_back(c);
      continue;
    }
    int boundclass = 0;
    const auto k = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c.cp), buf, 32, UTF8PROC_DECOMPOSE,
                                           &boundclass);
    for (utf8proc_ssize_t j = 0; j < k && j < 32; ++j) d.push_back({static_cast<char32_t>(buf[j]), c.begin, c.end});
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t a = 0; a < d.size();) {
    if (combining_class(d[a].cp) == 0) {
      ++a;
      continue;
    }
    size_t b = a;
    while (b < d.size() && combining_class(d[b].cp) != 0) ++b;
    std::stable_sort(d.begin() + static_cast<std::ptrdiff_t>(a), d.begin() + static_cast<std::ptrdiff_t>(b),
                     [](const TracedChar& x, const TracedChar& y) { return combining_class(x.cp) < combining_class(y.cp); });
    a = b;
  }
  // A dropped mark's bytes go to its neighbour, so offsets still cover the original text: a
  // decomposed "e" U+0301 at a word's end maps back to both (the answer text "Mahé", not "Mahe").
  word.clear();
  int32_t orphan_begin = -1;  // first byte of marks dropped before any kept character
  for (const auto& c : d) {
    if (utf8proc_category(static_cast<utf8proc_int32_t>(c.cp)) != UTF8PROC_CATEGORY_MN) {
      word.push_back(c);
      if (orphan_begin >= 0) word.back().begin = std::min(word.back().begin, orphan_begin), orphan_begin = -1;
    } else if (!word.empty()) {
      word.back().end = std::max(word.back().end, c.end);
    } else if (orphan_begin < 0) {
      orphan_begin = c.begin;
    }
  }
}

// NFC with offsets. Usually a no-op; otherwise the word is cut before each starter (combining
// class 0) into segments, neighbours that compose together are merged into one group, and each
// group's output code points all carry the group's whole byte range.
void BertBasicTokenizer::nfc(TracedWord& word) const {
  if (std::all_of(word.begin(), word.end(), [](const TracedChar& c) { return c.cp < 0x300; })) return;
  const std::string s = to_utf8(word, 0, word.size());
  if (nfc_string(s) == s) return;
  TracedWord out;
  size_t g0 = 0, g1 = 0;  // current group word[g0, g1)
  auto emit = [&](size_t a, size_t b) {
    const std::string src = to_utf8(word, a, b), dst = nfc_string(src);
    if (src == dst) out.insert(out.end(), word.begin() + static_cast<std::ptrdiff_t>(a),
                               word.begin() + static_cast<std::ptrdiff_t>(b));
    else append_decoded(dst, word[a].begin, word[b - 1].end, out);
  };
  while (g1 < word.size()) {
    size_t s1 = g1 + 1;  // next segment word[g1, s1): a starter (or stray marks) plus its non-starters
    while (s1 < word.size() && combining_class(word[s1].cp) != 0) ++s1;
    if (g1 > g0) {
      const std::string joint = nfc_string(to_utf8(word, g0, s1));
      const std::string apart = nfc_string(to_utf8(word, g0, g1)) + nfc_string(to_utf8(word, g1, s1));
      if (joint == apart) {
        emit(g0, g1);
        g0 = g1;
      }
    }
    g1 = s1;
  }
  if (g1 > g0) emit(g0, g1);
  word = std::move(out);
}

}  // namespace rpe
