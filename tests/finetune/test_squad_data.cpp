// SQuAD reader, feature windows and post-processing against hand-worked cases, using a
// whitespace tokenizer whose offsets are obvious.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "finetune/squad_data.h"
#include "finetune/squad_postprocess.h"
#include "util/errors.h"
#include "util/unicode_space.h"
#include "test_paths.h"

using namespace rpe;
using namespace rpe::finetune;
namespace fs = std::filesystem;

namespace {
// One token per space-separated word; id = 10 + word length (ids do not matter here).
class WhitespaceTokenizer : public Tokenizer {
 public:
  Encoding encode(std::string_view text) const override {
    Encoding e;
    size_t i = 0;
    while (i < text.size()) {
      if (text[i] == ' ') { ++i; continue; }
      size_t j = text.find(' ', i);
      if (j == std::string_view::npos) j = text.size();
      e.ids.push_back(static_cast<int32_t>(10 + j - i));
      e.word_start.push_back(1);
      e.offsets.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(j));
      i = j;
    }
    return e;
  }
  int64_t vocab_size() const override { return 100; }
  std::string piece(int32_t) const override { return "?"; }
  int32_t first_regular_id() const override { return 5; }
  std::string kind() const override { return "whitespace"; }
};

fs::path write_temp(const std::string& name, const std::string& text) {
  const auto p = fs::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const fs::path& p) {
  try {
    read_squad(p);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(SquadData, ReadsSampleAndMapsCharOffsetsToBytes) {
  const auto ex = read_squad(rpe::test::source_dir() + "/data/sample/squad/dev-v1.1.json");
  ASSERT_EQ(ex.size(), 280u);
  for (const auto& e : ex)
    for (const auto& a : e.answers) EXPECT_EQ(e.context.substr(a.begin, a.end - a.begin), a.text);
  // Character offsets count code points: "é" is 2 bytes, so "dog" at char 6 is byte 7.
  const auto p = write_temp("rpe_squad_utf8.json",
                            R"({"data":[{"paragraphs":[{"context":"caf\u00e9 a dog","qas":[{"id":"u1","question":"q",)"
                            R"("answers":[{"text":"dog","answer_start":7}]}]}]}]})");
  const auto u = read_squad(p);
  EXPECT_EQ(u[0].answers[0].begin, 8);
  EXPECT_EQ(u[0].context.substr(8, 3), "dog");
}

TEST(SquadData, BadInputNamesFileAndRecord) {
  auto p = write_temp("rpe_squad_bad1.json", R"({"data":[{"paragraphs":[{"context":"abc", "qas": [)");
  EXPECT_NE(error_of(p).find("rpe_squad_bad1.json: malformed JSON"), std::string::npos) << error_of(p);
  p = write_temp("rpe_squad_bad2.json", R"({"data":[{"paragraphs":[{"context":"abc","qas":[{"id":"x1","answers":[]}]}]}]})");
  EXPECT_NE(error_of(p).find("data[0].paragraphs[0].qas[0] (id x1): missing field 'question'"), std::string::npos)
      << error_of(p);
  p = write_temp("rpe_squad_bad3.json", R"({"data":[{"paragraphs":[{"context":"the red car","qas":[{"id":"x2",)"
                                        R"("question":"q","answers":[{"text":"red","answer_start":5}]}]}]}]})");
  EXPECT_NE(error_of(p).find("(id x2).answers[0]: answer_start 5 does not match the context"), std::string::npos)
      << error_of(p);
  // Predictions and scores are keyed by id: a repeated id would have one answer scored twice.
  p = write_temp("rpe_squad_bad4.json", R"({"data":[{"paragraphs":[{"context":"the red car","qas":[)"
                                        R"({"id":"d","question":"q","answers":[{"text":"red","answer_start":4}]},)"
                                        R"({"id":"d","question":"r","answers":[{"text":"car","answer_start":8}]}]}]}]})");
  EXPECT_NE(error_of(p).find("qas[1] (id d): an earlier question has the same id"), std::string::npos) << error_of(p);
  // An empty (or blank) answer text would train as "no answer": refused, naming the answer.
  for (const std::string text : {"", "  "}) {
    p = write_temp("rpe_squad_bad5.json", R"({"data":[{"paragraphs":[{"context":"the red car","qas":[)"
                                          R"({"id":"e","question":"q","answers":[{"text":")" + text +
                                              R"(","answer_start":3}]}]}]}]})");
    EXPECT_NE(error_of(p).find("qas[0] (id e).answers[0]: answer text is empty"), std::string::npos) << error_of(p);
  }
}

// answer_start near 2^63 (start + length overflowed and passed the bound, then read far past the
// context) and past int64's range (it was shown as -1): both outside the context, as written.
TEST(SquadData, HugeAnswerStartIsOutsideTheContext) {
  for (const std::string start : {"9223372036854775806", "18446744073709551615", "12"}) {
    const auto p = write_temp("rpe_squad_start.json", R"({"data":[{"paragraphs":[{"context":"the red car","qas":[)"
                                                      R"({"id":"h","question":"q","answers":[{"text":"red",)"
                                                      R"("answer_start":)" + start + "}]}]}]}]}");
    EXPECT_NE(error_of(p).find("(id h).answers[0]: answer_start " + start + " lies outside the context"), std::string::npos)
        << error_of(p);
  }
}

// A number too large for a double anywhere in the file (here a field nobody reads) is nlohmann's
// out_of_range, not a parse_error: it must still be one UserError naming the file.
TEST(SquadData, NumberOverflowNamesTheFile) {
  const auto p = write_temp("rpe_squad_overflow.json", R"({"data":[{"x":1e400,"paragraphs":[{"context":"a b",)"
                                                       R"("qas":[{"id":"o","question":"q","answers":[{"text":"b",)"
                                                       R"("answer_start":2}]}]}]}]})");
  EXPECT_EQ(error_of(p), p.string() + ": malformed JSON (number overflow parsing '1e400')");
  EXPECT_EQ(error_of(fs::temp_directory_path()), "cannot read " + fs::temp_directory_path().string() +
                                                     ": a folder, not a file");
}

// Questions to predict (answers_optional) follow evaluate-squad's rule once the file is scored:
// "answers": [] without is_impossible is refused when another question has answers; a file with
// no answers anywhere is unlabelled and read; a question without "answers" stays unscored.
TEST(SquadData, EmptyAnswersInAScoredFileAreRefusedAsEvaluateSquadDoes) {
  const std::string head = R"({"data":[{"paragraphs":[{"context":"the red car","qas":[)";
  const std::string answered = R"({"id":"a","question":"q","answers":[{"text":"red","answer_start":4}]})";
  const auto mixed = write_temp("rpe_squad_empty1.json", head + answered + R"(,{"id":"e","question":"r","answers":[]}]}]}]})");
  const std::string want = mixed.string() + ": data[0].paragraphs[0].qas[1] (id e): no answers and not is_impossible";
  EXPECT_EQ(error_of(mixed).substr(0, want.size()), want) << error_of(mixed);
  try {
    read_squad(mixed, /*answers_optional=*/true);
    ADD_FAILURE() << "a labelled file with answers: [] was read for scoring";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, want.size()), want) << e.what();
  }
  const auto unlabelled = write_temp("rpe_squad_empty2.json", head + R"({"id":"e","question":"r","answers":[]},)" +
                                                              R"({"id":"f","question":"s"}]}]}]})");
  const auto u = read_squad(unlabelled, /*answers_optional=*/true);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_TRUE(u[0].answers.empty() && u[1].answers.empty());
  const auto partly = write_temp("rpe_squad_empty3.json", head + answered + R"(,{"id":"f","question":"s"}]}]}]})");
  const auto q = read_squad(partly, /*answers_optional=*/true);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].answers.size(), 1u);
  EXPECT_TRUE(q[1].answers.empty());
}

TEST(SquadData, UnanswerableQuestionsAreRefusedUnderSquad11) {
  const auto p = write_temp("rpe_squad_v2.json", R"({"data":[{"paragraphs":[{"context":"the red car","qas":[)"
                                                 R"({"id":"a","question":"q","answers":[{"text":"red","answer_start":4}]},)"
                                                 R"({"id":"b","question":"r","answers":[],"is_impossible":true}]}]}]})");
  const auto examples = rpe::finetune::read_squad(p);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_TRUE(examples[1].impossible);
  try {
    rpe::finetune::refuse_unanswerable(p.string(), examples);
    FAIL() << "expected a UserError";
  } catch (const rpe::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rpe_squad_v2.json: question b is unanswerable (is_impossible)"),
              std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(rpe::finetune::refuse_unanswerable(p.string(), {examples[0]}));
}

TEST(SquadFeatures, WindowsTargetsAndMaxContextHandWorked) {
  // 20 one-letter words w0..w19 ("a b c ..."), answer = words 9..10.
  std::string ctx;
  for (int i = 0; i < 20; ++i) ctx += std::string(i ? " " : "") + static_cast<char>('a' + i);
  SquadExample ex{"q", "x y", ctx, {{"j k", 18, 21}}, false};
  WhitespaceTokenizer tok;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> offsets;
  // max_seq_len 16, question 2 tokens -> 11 context tokens per window, stride 4:
  // windows [0,11) [4,15) [8,19) [12,20).
  const auto f = make_squad_features({ex}, tok, {16, 4, 64}, &offsets);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].doc_start, 0);
  EXPECT_EQ(f[1].doc_start, 4);
  EXPECT_EQ(f[2].doc_start, 8);
  EXPECT_EQ(f[3].doc_start, 12);
  EXPECT_EQ(f[3].doc_len, 8);
  EXPECT_EQ(f[0].ids.size(), 16u);  // [CLS] x y [SEP] 11 words [SEP]
  EXPECT_EQ(f[0].context_offset, 4);
  // answer words 9..10: inside windows 0, 1, 2 -> positions 4 + 9 - start; not in window 3.
  EXPECT_EQ(f[0].start, 13);
  EXPECT_EQ(f[0].end, 14);
  EXPECT_EQ(f[1].start, 9);
  EXPECT_EQ(f[2].start, 5);
  EXPECT_EQ(f[3].start, 0);
  EXPECT_EQ(f[3].end, 0);
  // word 9: window 1 has min(5, 5) = 5 context on its shorter side, window 0 has 1,
  // window 2 has 1 -> its best window is 1.
  EXPECT_FALSE(f[0].max_context[9]);
  EXPECT_TRUE(f[1].max_context[9 - 4]);
  EXPECT_FALSE(f[2].max_context[9 - 8]);
}

TEST(SquadPostprocess, BestSpanAcrossWindowsAndNullScore) {
  std::string ctx;
  for (int i = 0; i < 20; ++i) ctx += std::string(i ? " " : "") + static_cast<char>('a' + i);
  SquadExample ex{"q", "x y", ctx, {{"j k", 18, 21}}, false};
  WhitespaceTokenizer tok;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> offsets;
  const auto f = make_squad_features({ex}, tok, {16, 4, 64}, &offsets);
  std::vector<std::vector<float>> s(f.size()), e(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    s[i].assign(f[i].ids.size(), 0.0f);
    e[i].assign(f[i].ids.size(), 0.0f);
  }
  // Window 1: span words 9..10 scores 3 + 3; window 0 has a higher but non-max-context start
  // (word 9 is not best in window 0) and window 3 a span longer than max_answer_len 3.
  s[1][4 + 5] = 3;  e[1][4 + 6] = 3;
  s[0][4 + 9] = 5;  e[0][4 + 10] = 5;
  // Window 3: the only high-scoring span, words 16..19, is 4 tokens > max_answer_len 3;
  // every other context position there is -20 so no short span can use either end.
  for (int64_t t = 4; t < 4 + 8; ++t) s[3][t] = e[3][t] = -20;
  s[3][4 + 4] = 9;  e[3][4 + 7] = 9;
  s[2][0] = 4;      e[2][0] = 4;      // window 2 null score 8; windows 0, 1, 3 null 0 -> min 0
  SquadPostOptions o;
  o.n_best = 20;
  o.max_answer_len = 3;
  auto p = squad_predictions({ex}, f, offsets, s, e, o);
  EXPECT_EQ(p.at("q").text, "j k");
  o.v2 = true;
  o.null_threshold = -7.0;  // null 0 - span 6 = -6 > -7 -> no answer
  p = squad_predictions({ex}, f, offsets, s, e, o);
  EXPECT_DOUBLE_EQ(p.at("q").score_diff, -6.0);
  EXPECT_EQ(p.at("q").text, "");
  o.null_threshold = 0.0;
  EXPECT_EQ(squad_predictions({ex}, f, offsets, s, e, o).at("q").text, "j k");
  // A sentencepiece piece's span starts at the space before it; where that is a no-break space
  // (U+00A0, two bytes), the answer text is stripped of it as Python's strip() would.
  SquadExample nbsp = ex;
  nbsp.context = ctx.substr(0, 17) + "\xc2\xa0" + ctx.substr(18);
  auto shifted = offsets;
  for (auto& [b, end] : shifted[0]) {
    if (b >= 18) ++b;
    if (end >= 18) ++end;
  }
  shifted[0][9].first = 17;  // "j" from its preceding space
  EXPECT_EQ(squad_predictions({nbsp}, f, shifted, s, e, o).at("q").text, "j k");
}

TEST(UnicodeSpace, PythonsWhitespaceSet) {
  EXPECT_EQ(rpe::strip_space("\xc2\xa0 \xe3\x80\x80j k\xe2\x80\xaf\t"), "j k");
  EXPECT_EQ(rpe::strip_space("\xe2\x80\x8bj\xef\xbb\xbf"), "\xe2\x80\x8bj\xef\xbb\xbf");  // ZWSP, BOM: not spaces
  EXPECT_EQ(rpe::strip_space(" \xc2\x85 "), "");
  EXPECT_EQ(rpe::strip_space("\xf0\x9f\x98\x80 "), "\xf0\x9f\x98\x80");  // a 4-byte character kept whole
  EXPECT_EQ(rpe::strip_space("a\xc2"), "a\xc2");                          // a cut character is text
}
