// WordPiece tokenizer: hand-computed tables on a tiny vocabulary (ids = line numbers), byte
// offsets, word starts, and the errors for bad vocabularies. Parity with HF BertTokenizer on
// real text is checked by tests/data/wordpiece_parity.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "data/packing.h"
#include "data/wordpiece_tokenizer.h"
#include "data_test_util.h"
#include "util/errors.h"
#include "test_paths.h"

namespace rpe {
namespace {

using Offsets = std::vector<std::pair<int32_t, int32_t>>;

// Ids in tiny_vocab_lines(): letters a..z = 5..30, ##a..##z = 31..56, then the words.
int32_t id_of(const std::string& piece) {
  const auto v = test::tiny_vocab_lines();
  return static_cast<int32_t>(std::find(v.begin(), v.end(), piece) - v.begin());
}

class WordPieceTest : public ::testing::Test {
 protected:
  void SetUp() override { vocab_ = test::write_tiny_vocab(test::temp_dir()); }
  std::filesystem::path vocab_;
};

TEST_F(WordPieceTest, GreedyLongestMatchWithOffsetsAndWordStarts) {
  WordPieceTokenizer tok(vocab_, /*lowercase=*/true);
  const Encoding e = tok.encode("UNaffable cat,runs!");
  // un ##aff ##able | cat | , | runs | !
  EXPECT_EQ(e.ids, (std::vector<int32_t>{61, 62, 63, 58, 66, 60, 68}));
  EXPECT_EQ(e.word_start, (std::vector<uint8_t>{1, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(e.offsets, (Offsets{{0, 2}, {2, 5}, {5, 9}, {10, 13}, {13, 14}, {14, 18}, {18, 19}}));
  EXPECT_EQ(tok.special().mask, 4);
  EXPECT_EQ(tok.first_regular_id(), 5);
  EXPECT_EQ(tok.piece(62), "##aff");
}

// Random replacements come from above the opening reserved block; a reserved piece further on
// does not move it (before: [MASK] at the end left "no ordinary pieces", an [unusedN] in the
// middle left the pieces before it out of the draw).
TEST_F(WordPieceTest, ReservedPiecesAfterTheOpeningBlockDoNotMoveTheDraw) {
  auto lines = test::tiny_vocab_lines();
  const auto mask = std::find(lines.begin(), lines.end(), "[MASK]");
  ASSERT_EQ(mask - lines.begin(), 4);
  lines.erase(mask);
  lines.insert(lines.begin() + 20, "[unused7]");
  lines.push_back("[MASK]");
  const auto file = test::temp_dir() / "moved_mask_vocab.txt";
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  test::write_text(file, text);
  WordPieceTokenizer tok(file, true);
  EXPECT_EQ(tok.first_regular_id(), 4);  // [PAD] [UNK] [CLS] [SEP], then "a"
  EXPECT_EQ(tok.piece(4), "a");
  EXPECT_EQ(tok.special().mask, static_cast<int32_t>(lines.size()) - 1);
}

TEST_F(WordPieceTest, FallsBackToLettersAndUnknownWords) {
  WordPieceTokenizer tok(vocab_, true);
  // "playing" = play ##ing; "cab" = c ##a ##b; "dog7": no piece for "7" -> the whole word is [UNK].
  const Encoding e = tok.encode("playing cab dog7");
  EXPECT_EQ(e.ids, (std::vector<int32_t>{id_of("play"), id_of("##ing"), id_of("c"), id_of("##a"), id_of("##b"), 1}));
  EXPECT_EQ(e.offsets.back(), (std::pair<int32_t, int32_t>{12, 16}));
  // 100 letters still get pieces; 101 is [UNK] (BERT's max_input_chars_per_word).
  EXPECT_EQ(tok.encode(std::string(100, 'a')).ids.size(), 100u);
  EXPECT_EQ(tok.encode(std::string(101, 'a')).ids, std::vector<int32_t>{1});
}

TEST_F(WordPieceTest, UncasedStripsAccentsAndCasedKeepsThem) {
  WordPieceTokenizer uncased(vocab_, true), cased(vocab_, false);
  // "Éa" -> lower "éa" -> NFD "e" U+0301 "a" -> drop Mn -> "ea" = e ##a, offsets in bytes (É is 2).
  const Encoding u = uncased.encode("Éa");
  EXPECT_EQ(u.ids, (std::vector<int32_t>{id_of("e"), id_of("##a")}));
  EXPECT_EQ(u.offsets, (Offsets{{0, 2}, {2, 3}}));
  // Already decomposed: the dropped U+0301 (2 bytes) belongs to the piece before it, or, at a
  // word's start, to the piece after it: the offsets cover every byte of the word.
  const Encoding tail = uncased.encode("cae\xcc\x81 \xcc\x81"
                                       "a");
  EXPECT_EQ(tail.ids, (std::vector<int32_t>{id_of("c"), id_of("##a"), id_of("##e"), id_of("a")}));
  EXPECT_EQ(tail.offsets, (Offsets{{0, 1}, {1, 2}, {2, 5}, {6, 9}}));
  // Cased: "é" stays (vocab has it), "É" is unknown; decomposed e+U+0301 is composed by NFC first.
  EXPECT_EQ(cased.encode("é").ids, std::vector<int32_t>{id_of("é")});
  EXPECT_EQ(cased.encode("e\xcc\x81").ids, std::vector<int32_t>{id_of("é")});
  EXPECT_EQ(cased.encode("e\xcc\x81").offsets, (Offsets{{0, 3}}));
  EXPECT_EQ(cased.encode("\xc3\x89").ids, std::vector<int32_t>{1});
  EXPECT_EQ(cased.encode("Cat").ids, (std::vector<int32_t>{1}));  // no "C" in the vocabulary
}

TEST_F(WordPieceTest, CjkWhitespaceControlAndSpecialStrings) {
  WordPieceTokenizer tok(vocab_, true);
  // CJK characters are words of their own even without spaces; offsets are 3 bytes each.
  const Encoding c = tok.encode("a你好b");
  EXPECT_EQ(c.ids, (std::vector<int32_t>{id_of("a"), id_of("你"), id_of("好"), id_of("b")}));
  EXPECT_EQ(c.word_start, (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(c.offsets, (Offsets{{0, 1}, {1, 4}, {4, 7}, {7, 8}}));
  // NBSP (U+00A0) and U+2028 split words; a zero-width space (Cf) and a control char are dropped.
  EXPECT_EQ(tok.encode("a\xc2\xa0" "b\xe2\x80\xa8" "c").ids, (std::vector<int32_t>{id_of("a"), id_of("b"), id_of("c")}));
  EXPECT_EQ(tok.encode("c\xe2\x80\x8b" "a\x01t").ids, std::vector<int32_t>{id_of("cat")});
  // So are private-use (U+E000, U+F8FF) and unassigned (U+0378) characters, as HF BertTokenizer
  // drops them, instead of making their word [UNK].
  EXPECT_EQ(tok.encode("c\xee\x80\x80" "a\xcd\xb8t \xef\xa3\xbf").ids, std::vector<int32_t>{id_of("cat")});
  // Literal special tokens stay whole; other bracket text is punctuation.
  const Encoding s = tok.encode("x[MASK]y [mask]");
  EXPECT_EQ(s.ids, (std::vector<int32_t>{id_of("x"), 4, id_of("y"), 1, id_of("m"), id_of("##a"), id_of("##s"),
                                         id_of("##k"), 1}));
  EXPECT_EQ(s.offsets[1], (std::pair<int32_t, int32_t>{1, 7}));
}

// Pretraining text reads special-token strings as ordinary text (Google's pretraining data
// does): a corpus line cannot put [PAD] (attention would skip it) or [MASK] into a sequence.
TEST_F(WordPieceTest, CorpusTextKeepsSpecialStringsAsText) {
  WordPieceTokenizer tok(vocab_, true);
  const Encoding e = tok.encode_corpus("x[MASK]y");
  const int32_t unk = 1;  // "[" and "]" are not in the tiny vocabulary
  EXPECT_EQ(e.ids, (std::vector<int32_t>{id_of("x"), unk, id_of("m"), id_of("##a"), id_of("##s"), id_of("##k"), unk,
                                         id_of("y")}));
  EXPECT_EQ(e.offsets[2], (std::pair<int32_t, int32_t>{2, 3}));
  // The pretraining sequences are built from encode_corpus: no special id but [CLS]/[SEP]/padding.
  const auto packed = pack_documents({Document{{"a [PAD] b", "c [MASK] [SEP] d"}}}, tok, 32, Packing::full_sentences);
  const std::vector<int32_t> row(packed.tokens.begin(), packed.tokens.begin() + 32);
  const int64_t real = std::count_if(row.begin(), row.end(), [](int32_t t) { return t != 0; });
  EXPECT_EQ(real, packed.real_tokens());
  // [CLS] text [SEP](document end) [SEP](sequence end): the text between holds no special id
  // but [UNK] (the brackets), where encode() would give [PAD], [MASK] and [SEP].
  ASSERT_GT(real, 3);
  EXPECT_EQ(row[0], 2);
  EXPECT_EQ(row[real - 2], 3);
  EXPECT_EQ(row[real - 1], 3);
  for (int64_t i = 1; i < real - 2; ++i) EXPECT_TRUE(row[i] == unk || row[i] >= 5) << "position " << i << ": " << row[i];
}

TEST_F(WordPieceTest, BadVocabulariesAreUserErrorsNamingTheFile) {
  const auto dir = test::temp_dir("_bad");
  try {
    WordPieceTokenizer tok(dir / "missing.txt", true);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt: wordpiece vocabulary not found"), std::string::npos);
  }
  test::write_text(dir / "nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
  EXPECT_THROW(WordPieceTokenizer(dir / "nomask.txt", true), UserError);
  test::write_text(dir / "empty.txt", "");
  EXPECT_THROW(WordPieceTokenizer(dir / "empty.txt", true), UserError);
}

// The fingerprint data-parallel ranks compare (dist/replica_check.h): equal for the same
// vocabulary loaded twice, different when a piece changes or two pieces swap ids.
TEST_F(WordPieceTest, FingerprintChangesWithAnyPieceOrId) {
  const auto dir = test::temp_dir("_crc");
  auto crc_of = [&](std::vector<std::string> lines, const std::string& name) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    test::write_text(dir / name, text);
    return tokenizer_crc32(WordPieceTokenizer(dir / name, true));
  };
  const auto lines = test::tiny_vocab_lines();
  const uint32_t base = tokenizer_crc32(WordPieceTokenizer(vocab_, true));
  EXPECT_EQ(tokenizer_crc32(WordPieceTokenizer(vocab_, true)), base);
  EXPECT_EQ(crc_of(lines, "same.txt"), base);
  auto changed = lines, swapped = lines, joined = lines;
  changed.back() += "s";
  std::swap(swapped[10], swapped[11]);
  joined[10] += joined[11];  // "ab","c" -> "abc","": the same bytes without the separators
  joined[11] = "";
  EXPECT_NE(crc_of(changed, "changed.txt"), base);
  EXPECT_NE(crc_of(swapped, "swapped.txt"), base);
  EXPECT_NE(crc_of(joined, "joined.txt"), base);
}

// A vocabulary whose [PAD] is not id 0 (here [UNK] and [PAD] swapped): sequences pad with its
// own id, and real_tokens counts what is not that id (it counted what was not 0).
TEST(WordPieceOtherPad, PackedSequencesCountTokensByTheVocabularysPad) {
  auto lines = test::tiny_vocab_lines();
  std::swap(lines[0], lines[1]);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  const auto vocab = test::temp_dir() / "vocab.txt";
  test::write_text(vocab, text);
  WordPieceTokenizer tok(vocab, true);
  ASSERT_EQ(tok.special().pad, 1);
  const auto packed = pack_documents({Document{{"the cat ."}}}, tok, 8, Packing::full_sentences);
  // [CLS] the cat . [SEP] ([SEP]) then [PAD]s: id 1 here, and no [UNK] (id 0) at all
  const auto pads = std::count(packed.tokens.begin(), packed.tokens.end(), 1);
  EXPECT_GE(pads, 2);
  EXPECT_EQ(packed.tokens.back(), 1);
  EXPECT_EQ(std::count(packed.tokens.begin(), packed.tokens.end(), 0), 0);
  EXPECT_EQ(packed.real_tokens(), 8 - pads);
}

// The real BERT vocabularies, when ../shared/data is there: specials at the documented ids.
TEST(WordPieceRealVocab, SpecialIdsAndRegularRange) {
  const std::string dir = rpe::test::source_dir() + "/../shared/data/vocab/";
  if (!std::filesystem::exists(dir + "uncased/vocab.txt")) GTEST_SKIP() << "no shared data";
  WordPieceTokenizer uncased(dir + "uncased/vocab.txt", true), cased(dir + "cased/vocab.txt", false);
  EXPECT_EQ(uncased.vocab_size(), 30522);
  EXPECT_EQ(cased.vocab_size(), 28996);
  for (const auto* t : {&uncased, &cased}) {
    EXPECT_EQ(t->special().pad, 0);
    EXPECT_EQ(t->special().unk, 100);
    EXPECT_EQ(t->special().cls, 101);
    EXPECT_EQ(t->special().sep, 102);
    EXPECT_EQ(t->special().mask, 103);
  }
  EXPECT_EQ(uncased.piece(uncased.first_regular_id()), "!");  // after [unused993]
  EXPECT_EQ(cased.piece(cased.first_regular_id()), "!");      // after [unused101]
}

}  // namespace
}  // namespace rpe
